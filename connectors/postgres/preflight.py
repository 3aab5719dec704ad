"""The checks `pgcdc run` makes of its source before it reads any WAL.

`preflight(dsn, tables) -> major version` connects once and applies the checks of
`pgcdc setup` (`connectors.postgres.setup.check_source`: a supported version,
`wal_level = logical`, the REPLICATION privilege), then the worker's other privileges
(`connectors.postgres.privileges`: writing RUNNING_XACTS on demand, EXECUTE on the
functions it calls, for a snapshot reading the tables `tables` captures, and with the
unchanged-TOAST fill its reader of replaced values); and that a chunked initial snapshot
does not meet a standby, where its watermarks cannot be written.
Without them, a source at `wal_level = replica` decodes to "consistent", drops every
INSERT (the WAL lacks what decoding needs) and fails only at the first UPDATE with a
misleading SchemaMismatchError; a role without pg_checkpoint dies at its first start
in the middle of it.

Errors: `SourceSetupError` (fatal) for a source that does not qualify, its subclass
`SourcePrivilegeError` naming every GRANT the role lacks;
`SourceAuthError` (fatal) when the server refuses the credentials, since retrying a
wrong password never helps; `SourceUnavailableError` (retryable) when it cannot be
reached.
"""

from __future__ import annotations

import psycopg2.errors

from connectors.postgres.privileges import check_worker_privileges, role_ident
from connectors.postgres.server import connect
from connectors.postgres.setup import check_source
from service.config import FilterSettings
from service.errors import SourcePrivilegeError, SourceSetupError


def source_identity(dsn: str) -> str:
    """`<system identifier>-<database>`: which server and database a pipeline reads.

    Part of the default transactional.id, so pipelines on different servers or
    databases that share a slot name do not fence each other."""
    conn = connect(dsn, "pgcdc-preflight")
    try:
        with conn.cursor() as cur:
            try:
                cur.execute(
                    "SELECT system_identifier::text, current_database() "
                    "FROM pg_catalog.pg_control_system()"
                )
            except psycopg2.errors.InsufficientPrivilege as exc:
                # The first query `pgcdc run` makes: on a server that revoked it from
                # PUBLIC, the grant is named here, before preflight's full list.
                role = role_ident(cur)
                raise SourcePrivilegeError(
                    f"role {conn.info.user!r} may not read pg_control_system(): {str(exc).strip()}",
                    grants=(f"GRANT EXECUTE ON FUNCTION pg_catalog.pg_control_system() TO {role}",),
                ) from exc
            row = cur.fetchone()
            assert row is not None
            return f"{row[0]}-{row[1]}"
    finally:
        conn.close()


def preflight(
    dsn: str,
    tables: FilterSettings | None,
    *,
    toast_fill: bool = False,
    chunked_snapshot: bool = False,
) -> int:
    """Check the source as `pgcdc setup` does, and the worker's privileges (`tables`:
    the filters of the tables a snapshot reads, None when none is taken; `toast_fill`:
    the unchanged-TOAST fill's reader too); return the source's major version.
    `chunked_snapshot`: the initial snapshot is chunked, whose DBLog watermarks are
    written into the source's WAL (pg_logical_emit_message), which a standby refuses
    (a SourceSetupError naming snapshot.method, not a chunk retried for ever)."""
    conn = connect(dsn, "pgcdc-preflight")
    try:
        with conn.cursor() as cur:
            major, _database, _superuser = check_source(cur)
            check_worker_privileges(cur, major, tables=tables, toast_fill=toast_fill)
            if chunked_snapshot:
                cur.execute("SELECT pg_catalog.pg_is_in_recovery()")
                row = cur.fetchone()
                if row is not None and row[0]:
                    raise SourceSetupError(
                        "snapshot.method is chunked, whose watermarks are written into the "
                        "source's WAL, and the source (source.host) is a standby, which "
                        "cannot write: set snapshot.method: blocking (its readers share one "
                        "exported snapshot and write nothing), or point source.host at the "
                        "primary for the snapshot",
                        field="snapshot.method",
                    )
        return major
    finally:
        conn.close()
