"""SQL connections to the source server, and the few server-wide questions pgcdc asks.

Every plain (non-replication) connection pgcdc opens goes through `connect`, so how
pgcdc connects is decided in one place: autocommit, an application name that says
which part of pgcdc it is, a `statement_timeout` (`-c statement_timeout` in the
connection's options, so a query the server cannot finish raises instead of blocking
the worker; the DSN itself, which the replication connection shares, carries none), and
an unreachable server retried with backoff for `source.retry_budget_s` (set once at
start through `set_connect_retry_budget`; 0, no retry, until then) and then turned into
`SourceUnavailableError` (retryable), and a connection the server refused for good
(TLS, credentials, no such role or database: `connectors.postgres.classify.refused_error`)
into its fatal error at once. Replication connections are
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
import psycopg2.errors
import psycopg2.extensions
import structlog

from connectors.postgres.classify import connect_error, is_transient
from connectors.postgres.privileges import role_ident, running_xacts
from service.backoff import Backoff
from service.errors import SourcePrivilegeError, SourceUnavailableError
from service.lsn import parse_lsn

log = structlog.get_logger(__name__)
T = TypeVar("T")
TRANSIENT_RETRY_BUDGET_S = 60.0

DEFAULT_STATEMENT_TIMEOUT_S = 60.0
_statement_timeout_ms = int(DEFAULT_STATEMENT_TIMEOUT_S * 1000)
_connect_budget_s = 0.0  # source.retry_budget_s once set_connect_retry_budget ran


def set_statement_timeout(seconds: float) -> None:
    """The statement_timeout of every SQL connection `connect` opens from now on."""
    global _statement_timeout_ms  # noqa: PLW0603 (one process-wide setting, set at start)
    _statement_timeout_ms = max(1, int(seconds * 1000))


def set_connect_retry_budget(seconds: float) -> None:
    """How long `connect` retries an unreachable source from now on (0: no retry)."""
    global _connect_budget_s  # noqa: PLW0603 (one process-wide setting, set at start)
    _connect_budget_s = max(0.0, seconds)


def connect(
    dsn: str, application_name: str = "pgcdc", *, retry_budget_s: float | None = None
) -> psycopg2.extensions.connection:
    """An autocommit connection to the source.

    A server that cannot be reached is tried again with backoff for `retry_budget_s`
    (default: the process-wide budget, `set_connect_retry_budget`), then
    `SourceUnavailableError`; one that refused the connection for good
    (`classify.refused_error`: TLS, credentials, no such role or database) raises its fatal
    error at once."""
    budget = _connect_budget_s if retry_budget_s is None else retry_budget_s
    backoff = Backoff(budget)
    sslmode = psycopg2.extensions.parse_dsn(dsn).get("sslmode")
    while True:
        try:
            conn = psycopg2.connect(
                dsn,
                application_name=application_name,
                options=f"-c statement_timeout={_statement_timeout_ms}",
            )
            break
        except psycopg2.OperationalError as exc:
            error = connect_error(exc, application_name, sslmode=sslmode)
            if not isinstance(error, SourceUnavailableError):
                raise error from exc
            if backoff.spent():
                if budget > 0:
                    error = SourceUnavailableError(
                        f"{error.message}; still unreachable after {budget:.0f}s of retries "
                        "(source.retry_budget_s)"
                    )
                raise error from exc
            log.warning(
                "source_connect_retry",
                what=application_name,
                error=str(exc).strip().splitlines()[0],
                retry_in_s=round(min(backoff.delay, backoff.remaining()), 2),
            )
            backoff.sleep()
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
    """`pg_current_wal_lsn()`: where the server is writing WAL now; on a standby
    `pg_last_wal_replay_lsn()`, where it has replayed to."""
    with conn.cursor() as cur:
        cur.execute(
            "SELECT (CASE WHEN pg_catalog.pg_is_in_recovery() "
            "THEN pg_catalog.pg_last_wal_replay_lsn() "
            "ELSE pg_catalog.pg_current_wal_lsn() END)::text"
        )
        row = cur.fetchone()
    return parse_lsn(str(row[0]))


def latest_redo(conn: Any) -> int:
    """The redo point of the server's latest completed checkpoint (pg_control_checkpoint,
    EXECUTE to PUBLIC): from there on every page's first change after the checkpoint is
    logged whole (full_page_writes), and a RUNNING_XACTS record follows it (CreateCheckPoint
    logs one), as from a physical slot's restart_lsn, which is such a point too
    (ReplicationSlotReserveWal takes GetRedoRecPtr)."""
    with conn.cursor() as cur:
        cur.execute("SELECT redo_lsn::text FROM pg_catalog.pg_control_checkpoint()")
        row = cur.fetchone()
    return parse_lsn(str(row[0]))


def force_running_xacts(dsn: str, version: int) -> None:
    """Have the server log RUNNING_XACTS now, so decoding becomes consistent at once.

    PG16+ has `pg_log_standby_snapshot()`; on 15 a CHECKPOINT writes one (as the
    bgwriter otherwise does only every 15 s, LOG_SNAPSHOT_INTERVAL_MS). Each needs a
    grant (connectors.postgres.privileges.running_xacts); a role without it gets
    `SourcePrivilegeError` naming that grant, which the worker's preflight has
    normally raised before.
    """
    method = running_xacts(version)
    conn = connect(dsn)
    try:
        with conn.cursor() as cur:
            try:
                cur.execute(method.statement)
            except psycopg2.errors.InsufficientPrivilege as exc:
                role = role_ident(cur)
                raise SourcePrivilegeError(
                    f"role {conn.info.user!r} may not write a RUNNING_XACTS record "
                    f"({method.statement}): {str(exc).strip()}",
                    grants=(method.grant.format(role=role),),
                ) from exc
    finally:
        conn.close()
