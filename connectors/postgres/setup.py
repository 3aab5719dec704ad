"""`pgcdc setup` and `pgcdc teardown`: prepare (or clean) the source database.

`setup(dsn, slot_name)` checks, in this order, and stops at the first failure with a
`SourceSetupError` that names the problem and its fix:

1. the server's major version is supported (15..18);
2. `wal_level` is `logical`;
3. the connecting role has REPLICATION (or is superuser), needed to stream WAL;
4. the role is superuser, needed to create event triggers. This is the one part of
   pgcdc that needs one; the worker runs as a role with the grants of
   `connectors.postgres.privileges`, so setup runs with credentials of its own.

Then, idempotently: creates the physical replication slot if absent
(`pg_create_physical_replication_slot(name, true)`, reserving WAL at once), and installs
the DDL capture of `sql/ddl_capture.sql` in the connected database (schema `pgcdc`, the
SECURITY DEFINER trigger functions with a fixed search_path, and the event triggers on
`ddl_command_end` and `sql_drop`), and the TOAST reader of `sql/toast_reader.sql`
(`pgcdc.toast_chunks`, a SECURITY DEFINER function over pageinspect, which it installs
in schema pgcdc when the server has it and the database does not; EXECUTE revoked from
PUBLIC and granted, with USAGE on schema pgcdc, to `worker_role` when one is named:
the unchanged-TOAST fill's reads of values replaced since, README "Privileges"). A
server without pageinspect gets the function all the same, reported as
`toast_reader_usable = False`: the worker's start-up check
(connectors.postgres.privileges) then names it. Running it twice changes nothing. Last
it lists every captured column whose type pgcdc cannot decode (array elements, domain
bases, composite fields and range subtypes included), naming table, column and type, in
`SetupReport.undecodable_columns`.

`teardown(dsn, slot_name, drop_slot=True)` removes the event triggers, the functions,
the schema and (optionally) the slot. It is idempotent too.

This module does I/O (psycopg2); the CLI wires it in.
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib import resources

import psycopg2
import psycopg2.errors
import psycopg2.extensions
import psycopg2.sql

from connectors.postgres.catalog import table_def_sql
from connectors.postgres.privileges import TOAST_READER
from connectors.postgres.server import connect
from connectors.postgres.slots import drop_slot as drop_slot_named
from connectors.postgres.slots import ensure_physical_slot
from connectors.postgres.type_check import undecodable_columns
from service.config import FilterSettings
from service.errors import SourceSetupError
from service.schema.history import DDL_PREFIX

SUPPORTED_MAJOR_VERSIONS = range(15, 19)
EVENT_TRIGGERS = ("pgcdc_ddl_command_end", "pgcdc_sql_drop")
DDL_SCHEMA = "pgcdc"


@dataclass(slots=True, frozen=True)
class SetupReport:
    """What `setup` found and did."""

    server_version: int  # major version
    database: str
    slot_name: str
    slot_created: bool  # False: it existed already
    restart_lsn: int | None
    ddl_capture_installed: bool
    # pgcdc.toast_chunks exists and pageinspect is installed; `toast_reader_grantee`:
    # the role granted EXECUTE on it (None: no --worker-role given)
    toast_reader_usable: bool = False
    toast_reader_grantee: str | None = None
    # Captured columns whose type pgcdc cannot decode (connectors.postgres.type_check),
    # each as "schema.table.column: type ..., cannot be decoded"; empty when none.
    undecodable_columns: tuple[str, ...] = ()


def check_version(server_version_num: int) -> int:
    """The major version of `server_version_num` (e.g. 150004), if pgcdc supports it."""
    major = server_version_num // 10000
    if major not in SUPPORTED_MAJOR_VERSIONS:
        raise SourceSetupError(
            f"PostgreSQL {major} is not supported: pgcdc decodes the WAL of versions "
            f"{SUPPORTED_MAJOR_VERSIONS.start}..{SUPPORTED_MAJOR_VERSIONS.stop - 1} only"
        )
    return major


def ddl_capture_sql() -> str:
    """The installation script, with the shared table-definition query and the DDL
    message prefix (service.schema.history.DDL_PREFIX) inlined."""
    sql = resources.files("connectors.postgres").joinpath("sql")
    script = sql.joinpath("ddl_capture.sql").read_text("utf-8")
    return script.replace("{table_def}", table_def_sql()).replace("{ddl_prefix}", DDL_PREFIX)


def toast_reader_sql() -> str:
    """The TOAST reader's installation script (pgcdc.toast_chunks)."""
    return (
        resources.files("connectors.postgres")
        .joinpath("sql", "toast_reader.sql")
        .read_text("utf-8")
    )


def _install_toast_reader(cur: psycopg2.extensions.cursor, worker_role: str | None) -> bool:
    """pageinspect (in schema pgcdc, when available and absent), the reader, the grant;
    whether the reader can work (pageinspect installed). Inside the caller's transaction."""
    cur.execute(
        "SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_extension WHERE extname = 'pageinspect'),"
        " EXISTS (SELECT 1 FROM pg_catalog.pg_available_extensions"
        "         WHERE name = 'pageinspect')"
    )
    row = cur.fetchone()
    assert row is not None
    installed, available = row
    cur.execute(toast_reader_sql())
    if not installed and available:
        cur.execute("CREATE EXTENSION pageinspect WITH SCHEMA pgcdc")
        installed = True
    if worker_role is not None:
        role = psycopg2.sql.Identifier(worker_role)
        cur.execute(psycopg2.sql.SQL("GRANT USAGE ON SCHEMA pgcdc TO {}").format(role))
        cur.execute(
            psycopg2.sql.SQL("GRANT EXECUTE ON FUNCTION {} TO {}").format(
                psycopg2.sql.SQL(TOAST_READER), role
            )
        )
    return bool(installed)


def check_source(cur: psycopg2.extensions.cursor) -> tuple[int, str, bool]:
    """The checks 1-3; returns (major version, database, superuser)."""
    cur.execute(
        "SELECT current_setting('server_version_num')::int, current_setting('wal_level'),"
        " current_database(), r.rolname, r.rolreplication, r.rolsuper"
        " FROM pg_catalog.pg_roles r WHERE r.rolname = current_user"
    )
    row = cur.fetchone()
    if row is None:
        raise SourceSetupError("cannot read the connecting role from pg_roles")
    version_num, wal_level, database, role, replication, superuser = row
    major = check_version(int(version_num))
    if wal_level != "logical":
        raise SourceSetupError(
            f"wal_level is {wal_level!r}, but pgcdc needs 'logical': set wal_level = logical "
            "in postgresql.conf and restart the server",
            field="wal_level",
        )
    if not (replication or superuser):
        raise SourceSetupError(
            f"role {role!r} lacks the REPLICATION privilege needed to stream WAL: "
            f"ALTER ROLE {role} REPLICATION",
            field="REPLICATION",
        )
    return major, str(database), bool(superuser)


def setup(
    dsn: str,
    slot_name: str,
    filters: FilterSettings | None = None,
    *,
    worker_role: str | None = None,
) -> SetupReport:
    """Check the source, create the physical slot, install the DDL capture and the TOAST
    reader (EXECUTE granted to `worker_role`, the role `pgcdc run` connects as, when
    given), and list the captured columns (by `filters`) whose type pgcdc cannot
    decode."""
    conn = connect(dsn, "pgcdc-setup")
    try:
        with conn.cursor() as cur:
            major, database, superuser = check_source(cur)
            if not superuser:
                raise SourceSetupError(
                    "installing the DDL capture creates event triggers, which needs a "
                    "superuser: run `pgcdc setup` once with a superuser's credentials "
                    "(PGCDC_SOURCE__USER, PGCDC_SOURCE__PASSWORD), kept apart from the "
                    "worker's role, which needs only the grants of README: Privileges",
                    field="superuser",
                )
            slot_created, restart_lsn = ensure_physical_slot(cur, slot_name)
            try:
                conn.autocommit = False
                cur.execute(ddl_capture_sql())
                toast_usable = _install_toast_reader(cur, worker_role)
                conn.commit()
            except psycopg2.Error as exc:
                conn.rollback()
                no_role = isinstance(exc, psycopg2.errors.UndefinedObject)
                raise SourceSetupError(
                    f"installing the DDL capture and TOAST reader failed: {exc}",
                    field="--worker-role" if no_role else None,
                ) from exc
            finally:
                conn.autocommit = True
        unknown = tuple(
            c.describe() for c in undecodable_columns(conn, filters or FilterSettings())
        )
    finally:
        conn.close()
    return SetupReport(
        server_version=major,
        database=database,
        slot_name=slot_name,
        slot_created=slot_created,
        restart_lsn=restart_lsn,
        ddl_capture_installed=True,
        toast_reader_usable=toast_usable,
        toast_reader_grantee=worker_role,
        undecodable_columns=unknown,
    )


def teardown(dsn: str, slot_name: str, *, drop_slot: bool = True) -> None:
    """Remove the DDL capture and (unless `drop_slot` is False) the physical slot."""
    conn = connect(dsn, "pgcdc-setup")
    try:
        with conn.cursor() as cur:
            try:
                conn.autocommit = False
                for trigger in EVENT_TRIGGERS:
                    cur.execute(f"DROP EVENT TRIGGER IF EXISTS {trigger}")
                cur.execute(f"DROP SCHEMA IF EXISTS {DDL_SCHEMA} CASCADE")
                conn.commit()
            except psycopg2.Error as exc:
                conn.rollback()
                raise SourceSetupError(f"removing the DDL capture failed: {exc}") from exc
            finally:
                conn.autocommit = True
            if drop_slot:
                drop_slot_named(cur, slot_name)
    finally:
        conn.close()
