"""The privileges `pgcdc run` needs on its source, per major version, and their check.

The worker's set (what deploy/postgres/init/01-pgcdc.sh grants; README "Privileges"):

- LOGIN and REPLICATION: the physical replication connection (IDENTIFY_SYSTEM,
  READ_REPLICATION_SLOT, CREATE_REPLICATION_SLOT, START_REPLICATION) and the slot
  functions, which check it themselves (CheckSlotPermissions). Checked by
  `connectors.postgres.setup.check_source`, before this module.
- A RUNNING_XACTS record on demand, so that decoding turns consistent at once on a fresh
  start (`connectors.postgres.server.force_running_xacts`). On 15 that is CHECKPOINT,
  allowed to roles with the privileges of the predefined role `pg_checkpoint`
  (standard_ProcessUtility checks has_privs_of_role). On 16+ it is
  `pg_log_standby_snapshot()`, whose EXECUTE is revoked from PUBLIC: granted to the
  role in the database it connects to (function ACLs live in each database's
  pg_proc). `running_xacts(major)` says which.
- EXECUTE on the other server functions it calls (`PUBLIC_FUNCTIONS`). PUBLIC has it
  by default; a hardened server may have revoked it.
- SELECT on every captured table, and USAGE on its schema, for the initial snapshot
  (`pg_read_all_data` gives both, for tables created later too). Not checked with
  `snapshot.mode: never`; a snapshot signalled later needs it all the same.

- With `toast.unchanged: fill` (`toast_fill`): EXECUTE on `pgcdc.toast_chunks`
  (`TOAST_READER`) and USAGE on its schema, the SECURITY DEFINER reader of TOAST
  chunks a later transaction replaced or deleted
  (connectors/postgres/sql/toast_reader.sql), and pageinspect, which it reads the pages
  with, installed. `pgcdc setup --worker-role ROLE` creates both and grants them.
  Without them a value replaced after the UPDATE that kept it would go to Kafka as a
  placeholder although the database still has it: the fill's promise, so the worker
  does not start (set `toast.unchanged: placeholder` to run without the fill).
  pg_read_all_data does not stand in for it: it lets the role SELECT a TOAST table
  directly, which shows only the chunks a snapshot sees (README "Privileges").

Why a grant for RUNNING_XACTS and no fallback without one: the bgwriter logs such a
record only every 15 s (LOG_SNAPSHOT_INTERVAL_MS) and only when other WAL was written
since its last one, so a worker waiting for it on an idle server could wait
indefinitely, and start-up time would depend on the load. The two grants are narrow:
pg_checkpoint lets the role run CHECKPOINT and nothing else, and
pg_log_standby_snapshot() only writes that one WAL record.

The superuser part runs once, apart from the worker: `pgcdc setup` installs the DDL
capture's event triggers (connectors.postgres.setup).

`missing_grants(cur, major, tables=...)` returns the GRANT statements the connected role
lacks, in the order above; `check_worker_privileges` raises `SourcePrivilegeError`
naming all of them, so one round of grants fixes the start. This module does I/O
(read-only SQL on a cursor the caller owns).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from service.config import FilterSettings
from service.errors import SourcePrivilegeError
from service.output.filters import TableFilter


@dataclass(slots=True, frozen=True)
class RunningXactsPrivilege:
    """How one major version writes RUNNING_XACTS on demand, and the grant it needs."""

    statement: str  # what force_running_xacts runs
    check_sql: str  # true when the connected role may run it
    grant: str  # the GRANT, with {role} for the role's quoted name


_CHECKPOINT = RunningXactsPrivilege(
    statement="CHECKPOINT",
    check_sql="SELECT pg_catalog.pg_has_role('pg_checkpoint', 'USAGE')",
    grant="GRANT pg_checkpoint TO {role}",
)
_LOG_STANDBY_SNAPSHOT = RunningXactsPrivilege(
    statement="SELECT pg_catalog.pg_log_standby_snapshot()",
    check_sql="SELECT pg_catalog.has_function_privilege("
    "'pg_catalog.pg_log_standby_snapshot()', 'EXECUTE')",
    grant="GRANT EXECUTE ON FUNCTION pg_catalog.pg_log_standby_snapshot() TO {role}",
)


def running_xacts(major: int) -> RunningXactsPrivilege:
    """How `major` writes RUNNING_XACTS on demand: pg_log_standby_snapshot() exists from
    16 on, CHECKPOINT before."""
    return _CHECKPOINT if major < 16 else _LOG_STANDBY_SNAPSHOT


# Server functions the worker calls whose EXECUTE PUBLIC has by default, as
# regprocedure text, and who calls each. pg_logical_emit_message gained its `flush`
# argument in 17.
PUBLIC_FUNCTIONS = (
    "pg_catalog.pg_control_system()",  # preflight.source_identity
    "pg_catalog.pg_control_checkpoint()",  # a first start's redo point (server.latest_redo)
    "pg_catalog.pg_current_wal_lsn()",  # catalog snapshot, lag, slot state
    "pg_catalog.pg_current_snapshot()",  # catalog snapshot, snapshot readers
    "pg_catalog.pg_export_snapshot()",  # the shared initial snapshot
    "pg_catalog.pg_relation_filenode(regclass)",  # where pg_class lives (catalog)
    "pg_catalog.pg_relation_size(regclass)",  # chunk planning
    "pg_catalog.pg_create_physical_replication_slot(name,boolean,boolean)",  # slots
    "pg_catalog.pg_replication_slot_advance(name,pg_lsn)",  # slots
    "pg_catalog.pg_drop_replication_slot(name)",  # slots
)


# The unchanged-TOAST fill's reader of replaced values (sql/toast_reader.sql).
TOAST_READER = "pgcdc.toast_chunks(regclass, oid[])"
_TOAST_READER_SQL = """
SELECT p.oid IS NOT NULL,
       p.oid IS NOT NULL AND pg_catalog.has_function_privilege(p.oid, 'EXECUTE'),
       p.oid IS NOT NULL AND pg_catalog.has_schema_privilege('pgcdc', 'USAGE'),
       EXISTS (SELECT 1 FROM pg_catalog.pg_extension WHERE extname = 'pageinspect')
FROM (SELECT pg_catalog.to_regprocedure('pgcdc.toast_chunks(regclass,oid[])')::oid AS oid) p
"""


def toast_reader_state(cur: Any) -> tuple[bool, bool, bool, bool]:
    """(pgcdc.toast_chunks exists, the connected role may execute it, and may use its
    schema, pageinspect is installed) in the connected database."""
    cur.execute(_TOAST_READER_SQL)
    exists, executable, usage, pageinspect = cur.fetchone()
    return bool(exists), bool(executable), bool(usage), bool(pageinspect)


def public_functions(major: int) -> tuple[str, ...]:
    """`PUBLIC_FUNCTIONS` plus the watermark writer's signature on `major`."""
    emit = (
        "pg_catalog.pg_logical_emit_message(boolean,text,text)"
        if major < 17
        else "pg_catalog.pg_logical_emit_message(boolean,text,text,boolean)"
    )
    return (*PUBLIC_FUNCTIONS, emit)


# Ordinary tables outside the system schemas and pgcdc's own, as type_check and the
# snapshot readers list them, with the connected role's USAGE and SELECT on each.
_TABLES_SQL = """
SELECT n.nspname, c.relname, pg_catalog.quote_ident(n.nspname),
       pg_catalog.quote_ident(c.relname), pg_catalog.has_schema_privilege(n.oid, 'USAGE'),
       pg_catalog.has_table_privilege(c.oid, 'SELECT')
FROM pg_catalog.pg_class c
JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
WHERE c.relkind = 'r'
  AND n.nspname NOT IN ('pg_catalog', 'information_schema', 'pgcdc')
  AND n.nspname NOT LIKE 'pg_toast%%' AND n.nspname NOT LIKE 'pg_temp%%'
ORDER BY n.nspname, c.relname
"""


def role_ident(cur: Any) -> str:
    """The connected role's name, quoted as a GRANT names it (quote_ident)."""
    cur.execute("SELECT pg_catalog.quote_ident(current_user)")
    return str(cur.fetchone()[0])


def missing_grants(
    cur: Any, major: int, *, tables: FilterSettings | None, toast_fill: bool = False
) -> list[str]:
    """The GRANT statements the connected role lacks for `pgcdc run` on `major`, in the
    order of the module docstring; `tables`: the filters whose tables the role must be
    able to read (None: no snapshot, no read check); `toast_fill`: the TOAST reader too
    (a CREATE EXTENSION when pageinspect is missing)."""
    cur.execute("SELECT pg_catalog.current_setting('is_superuser') = 'on'")
    if cur.fetchone()[0]:
        return []
    role = role_ident(cur)
    grants: list[str] = []
    method = running_xacts(major)
    cur.execute(method.check_sql)
    if not cur.fetchone()[0]:
        grants.append(method.grant.format(role=role))
    for function in public_functions(major):
        cur.execute("SELECT pg_catalog.has_function_privilege(%s, 'EXECUTE')", (function,))
        if not cur.fetchone()[0]:
            grants.append(f"GRANT EXECUTE ON FUNCTION {function} TO {role}")
    if tables is not None:
        grants.extend(_read_grants(cur, role, TableFilter(tables)))
    if toast_fill:
        exists, executable, usage, pageinspect = toast_reader_state(cur)
        if exists and not usage:
            grants.append(f"GRANT USAGE ON SCHEMA pgcdc TO {role}")
        if not executable:
            grants.append(f"GRANT EXECUTE ON FUNCTION {TOAST_READER} TO {role}")
        if not pageinspect:
            grants.append("CREATE EXTENSION pageinspect WITH SCHEMA pgcdc")
    return grants


def _read_grants(cur: Any, role: str, included: TableFilter) -> list[str]:
    """USAGE on each schema and SELECT on each captured table the role lacks; a schema
    none of whose captured tables it can read gets one `ON ALL TABLES IN SCHEMA`."""
    cur.execute(_TABLES_SQL)
    # quoted schema -> (quoted table, USAGE on its schema, SELECT on it), captured only
    by_schema: dict[str, list[tuple[str, bool, bool]]] = {}
    for schema, table, nsp, rel, usage, select in cur.fetchall():
        if included(schema, table):
            by_schema.setdefault(str(nsp), []).append((str(rel), bool(usage), bool(select)))
    grants = []
    for nsp, rows in by_schema.items():
        if not rows[0][1]:
            grants.append(f"GRANT USAGE ON SCHEMA {nsp} TO {role}")
        unreadable = [rel for rel, _usage, select in rows if not select]
        if unreadable and len(unreadable) == len(rows):
            grants.append(f"GRANT SELECT ON ALL TABLES IN SCHEMA {nsp} TO {role}")
            continue
        grants.extend(f"GRANT SELECT ON {nsp}.{rel} TO {role}" for rel in unreadable)
    return grants


def check_worker_privileges(
    cur: Any, major: int, *, tables: FilterSettings | None, toast_fill: bool = False
) -> None:
    """Raise `SourcePrivilegeError` naming every grant `missing_grants` finds."""
    grants = missing_grants(cur, major, tables=tables, toast_fill=toast_fill)
    if not grants:
        return
    cur.execute("SELECT current_user")
    (role,) = cur.fetchone()
    reads = any(g.startswith(("GRANT SELECT", "GRANT USAGE")) for g in grants)
    toast = ""
    if any(TOAST_READER in g or "SCHEMA pgcdc" in g for g in grants):
        exists = toast_reader_state(cur)[0]
        toast = (
            "; toast.unchanged is fill, whose reader of replaced TOAST values "
            + ("pgcdc.toast_chunks" if exists else "pgcdc.toast_chunks does not exist yet:")
            + (
                " needs EXECUTE"
                if exists
                else f" `pgcdc setup --worker-role {role}` creates it and makes the grant"
            )
            + " (or set toast.unchanged: placeholder)"
        )
    raise SourcePrivilegeError(
        f"role {role!r} lacks privileges `pgcdc run` needs on PostgreSQL {major} "
        "(README: Privileges"
        + ("; GRANT pg_read_all_data instead gives read access to every table" if reads else "")
        + toast
        + ")",
        grants=tuple(grants),
    )
