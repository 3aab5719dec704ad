"""SQL connections to the source server, and the few server-wide questions pgcdc asks.

Every plain (non-replication) connection pgcdc opens goes through `connect`, so how
pgcdc connects is decided in one place: autocommit, an application name that says
which part of pgcdc it is, a `statement_timeout` (`-c statement_timeout` in the
connection's options, so a query the server cannot finish raises instead of blocking
the worker; the DSN itself, which the replication connection shares, carries none), and
an unreachable server turned into `SourceUnavailableError` (retryable), or
`SourceAuthError` (fatal) when the server refused the credentials
(`connectors.postgres.classify`). Replication connections are
`connectors.postgres.stream`'s.

`retry_transient(what, fn)` runs `fn` again, with backoff, while it fails with a
transient SQL error (deadlock, serialization failure, lock timeout:
`classify.is_transient`); the live catalog queries go through it. After
`TRANSIENT_RETRY_BUDGET_S` it gives up with `SourceUnavailableError` (retryable).

The timeout is `source.statement_timeout_s`, set once at start by the worker through
`set_statement_timeout` (the callers pass only a DSN); until then it is
`DEFAULT_STATEMENT_TIMEOUT_S`.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, TypeVar

import psycopg2
import psycopg2.extensions
import structlog

from connectors.postgres.classify import connect_error, is_transient
from service.errors import SourceUnavailableError
from service.lsn import parse_lsn

log = structlog.get_logger(__name__)
T = TypeVar("T")
TRANSIENT_RETRY_BUDGET_S = 60.0

DEFAULT_STATEMENT_TIMEOUT_S = 60.0
_statement_timeout_ms = int(DEFAULT_STATEMENT_TIMEOUT_S * 1000)


def set_statement_timeout(seconds: float) -> None:
    """The statement_timeout of every SQL connection `connect` opens from now on."""
    global _statement_timeout_ms  # noqa: PLW0603 (one process-wide setting, set at start)
    _statement_timeout_ms = max(1, int(seconds * 1000))


def connect(dsn: str, application_name: str = "pgcdc") -> psycopg2.extensions.connection:
    """An autocommit connection to the source (`SourceUnavailableError` if unreachable)."""
    try:
        conn = psycopg2.connect(
            dsn,
            application_name=application_name,
            options=f"-c statement_timeout={_statement_timeout_ms}",
        )
    except psycopg2.OperationalError as exc:
        raise connect_error(exc, application_name) from exc
    conn.autocommit = True
    return conn


def retry_transient(what: str, fn: Callable[[], T], *, budget_s: float | None = None) -> T:
    """`fn()`, run again with exponential backoff (50 ms up to 2 s) while it raises a
    transient SQL error; on an autocommit connection nothing else needs undoing."""
    budget = TRANSIENT_RETRY_BUDGET_S if budget_s is None else budget_s
    deadline = time.monotonic() + budget
    delay = 0.05
    while True:
        try:
            return fn()
        except psycopg2.Error as exc:
            if not is_transient(exc):
                raise
            detail = str(exc).strip().splitlines()[0]
            if time.monotonic() + delay > deadline:
                raise SourceUnavailableError(
                    f"{what} still failed after {budget:.0f}s of retries: {detail}"
                ) from exc
            log.warning("sql_transient_retry", what=what, sqlstate=exc.pgcode, error=detail)
            time.sleep(delay)
            delay = min(delay * 2, 2.0)


def server_version(dsn: str) -> int:
    """The source's major version (15, 16, ...)."""
    conn = connect(dsn)
    try:
        return int(conn.server_version) // 10000
    finally:
        conn.close()


def current_wal_lsn(conn: Any) -> int:
    """`pg_current_wal_lsn()`: where the server is writing WAL now."""
    with conn.cursor() as cur:
        cur.execute("SELECT pg_catalog.pg_current_wal_lsn()::text")
        row = cur.fetchone()
    return parse_lsn(str(row[0]))


def force_running_xacts(dsn: str, version: int) -> None:
    """Have the server log RUNNING_XACTS now, so decoding becomes consistent at once.

    PG16+ has `pg_log_standby_snapshot()`; on 15 a CHECKPOINT writes one (as the
    bgwriter otherwise does only every 15 s, LOG_SNAPSHOT_INTERVAL_MS).
    """
    conn = connect(dsn)
    try:
        with conn.cursor() as cur:
            if version >= 16:
                cur.execute("SELECT pg_catalog.pg_log_standby_snapshot()")
            else:
                cur.execute("CHECKPOINT")
    finally:
        conn.close()
