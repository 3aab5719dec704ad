"""The checks `pgcdc run` makes of its source before it reads any WAL.

`preflight(dsn) -> major version` connects once and applies the checks of `pgcdc setup`
(connectors.postgres.setup: a supported version, `wal_level = logical`, the REPLICATION
privilege). Without them, a source at `wal_level = replica` decodes to "consistent",
drops every INSERT (the WAL lacks what decoding needs) and fails only at the first
UPDATE with a misleading SchemaMismatchError.

Errors: `SourceSetupError` (fatal) for a source that does not qualify;
`SourceAuthError` (fatal) when the server refuses the credentials, since retrying a
wrong password never helps; `SourceUnavailableError` (retryable) when it cannot be
reached.
"""

from __future__ import annotations

import psycopg2

from connectors.postgres.setup import _check
from service.errors import SourceSetupError, SourceUnavailableError

# SQLSTATE 28P01 invalid_password, 28000 invalid_authorization_specification: libpq
# reports them as OperationalError with only the server's text, so the text is matched.
_AUTH_FAILURES = ("password authentication failed", "no password supplied",
                  "authentication failed", "no pg_hba.conf entry")


class SourceAuthError(SourceSetupError):
    """The source refused the credentials (wrong password, no pg_hba.conf entry)."""


def is_auth_failure(exc: BaseException) -> bool:
    """Whether a psycopg2 connection error says the credentials were refused."""
    text = str(exc).lower()
    return isinstance(exc, psycopg2.OperationalError) and any(m in text for m in _AUTH_FAILURES)


def connect_error(exc: psycopg2.OperationalError, what: str) -> SourceSetupError | \
        SourceUnavailableError:
    """The pgcdc error for a failed connection: fatal when the credentials were refused."""
    detail = str(exc).strip()
    if is_auth_failure(exc):
        return SourceAuthError(f"the source refused the credentials for {what}: {detail}; "
                               "fix source.user / source.password", field="source.password")
    return SourceUnavailableError(f"cannot connect to the source ({what}): {detail}")


def source_identity(dsn: str) -> str:
    """`<system identifier>-<database>`: which server and database a pipeline reads.

    Part of the default transactional.id, so pipelines on different servers or
    databases that share a slot name do not fence each other."""
    try:
        conn = psycopg2.connect(dsn, application_name="pgcdc-preflight")
    except psycopg2.OperationalError as exc:
        raise connect_error(exc, "the source identity") from exc
    try:
        with conn.cursor() as cur:
            cur.execute("SELECT system_identifier::text, current_database() "
                        "FROM pg_catalog.pg_control_system()")
            row = cur.fetchone()
            assert row is not None
            return f"{row[0]}-{row[1]}"
    finally:
        conn.close()


def preflight(dsn: str) -> int:
    """Check the source as `pgcdc setup` does; return its major version."""
    try:
        conn = psycopg2.connect(dsn, application_name="pgcdc-preflight")
    except psycopg2.OperationalError as exc:
        raise connect_error(exc, "the start-up checks") from exc
    conn.autocommit = True
    try:
        with conn.cursor() as cur:
            major, _database, _superuser = _check(cur)
        return major
    finally:
        conn.close()
