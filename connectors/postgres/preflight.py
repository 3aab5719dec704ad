"""The checks `pgcdc run` makes of its source before it reads any WAL.

`preflight(dsn) -> major version` connects once and applies the checks of `pgcdc setup`
(`connectors.postgres.setup.check_source`: a supported version, `wal_level = logical`,
the REPLICATION privilege). Without them, a source at `wal_level = replica` decodes to
"consistent", drops every INSERT (the WAL lacks what decoding needs) and fails only at
the first UPDATE with a misleading SchemaMismatchError.

Errors: `SourceSetupError` (fatal) for a source that does not qualify;
`SourceAuthError` (fatal) when the server refuses the credentials, since retrying a
wrong password never helps; `SourceUnavailableError` (retryable) when it cannot be
reached.
"""

from __future__ import annotations

from connectors.postgres.server import connect
from connectors.postgres.setup import check_source


def source_identity(dsn: str) -> str:
    """`<system identifier>-<database>`: which server and database a pipeline reads.

    Part of the default transactional.id, so pipelines on different servers or
    databases that share a slot name do not fence each other."""
    conn = connect(dsn, "pgcdc-preflight")
    try:
        with conn.cursor() as cur:
            cur.execute(
                "SELECT system_identifier::text, current_database() "
                "FROM pg_catalog.pg_control_system()"
            )
            row = cur.fetchone()
            assert row is not None
            return f"{row[0]}-{row[1]}"
    finally:
        conn.close()


def preflight(dsn: str) -> int:
    """Check the source as `pgcdc setup` does; return its major version."""
    conn = connect(dsn, "pgcdc-preflight")
    try:
        with conn.cursor() as cur:
            major, _database, _superuser = check_source(cur)
        return major
    finally:
        conn.close()
