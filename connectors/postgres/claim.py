"""The worker's claim on its slot: one session advisory lock on the source, so that of
two workers with one configuration only one starts at a time (issue 31 part 4).

The slot admits one walsender, but a worker touches Kafka before it streams: its
`init_transactions` fences every other producer with the same transactional.id. Two
workers that both saw the slot released (the standby, and the killed worker restarted a
moment later by its supervisor) therefore fenced each other in turn: the one that
started last won and the standby died of `FencedError` (issue 31, measured: 10 of 10
kills). The claim closes that window. A worker that sees the slot released must also
take `pg_try_advisory_lock(key)`; the loser goes on waiting as the standby.

Receives the source DSN, the slot name and the keepalive idle time; holds one autocommit
connection (application_name `pgcdc-claim`) for as long as the claim is held, which
for the worker is its whole life: a replay or a reconnect of the stream releases the
slot for a moment, and the standby must not start then.

Guarantees and limits:

- the key is `hashtextextended('pgcdc slot <name>', 0)` in the source database; advisory
  locks are per database, are not WAL-logged and work on a hot standby;
- the lock dies with its backend: a killed worker's socket is closed by its kernel, and
  the backend exits on the EOF; a worker whose host vanished is found by the server's
  TCP keepalives, which the claim sets for its own session (`tcp_keepalives_idle` to
  source.keepalives_idle_s, interval 5 s, count 3) instead of the server's default of
  hours;
- a lost claim connection (the source restarted) is not noticed by the worker holding
  it: a standby may then claim and start, and Kafka's fencing decides as before the
  claim existed (the fenced worker exits 1 and, restarted, waits);
- errors reaching the server while taking the claim count as "not taken" (the caller
  polls again); `connect`'s own fatal errors (credentials, TLS) propagate.
"""

from __future__ import annotations

import contextlib

import psycopg2
import psycopg2.extensions
import structlog

from connectors.postgres.server import connect

log = structlog.get_logger(__name__)


class SlotClaim:
    """The advisory lock named after one slot, on a connection of its own."""

    __slots__ = ("_conn", "_dsn", "_keepalive_s", "key_text")

    def __init__(self, dsn: str, slot: str, *, keepalive_s: int) -> None:
        self._dsn = dsn
        self._keepalive_s = keepalive_s
        self.key_text = f"pgcdc slot {slot}"
        # Open exactly while the claim is held (a connection that lost the race is
        # closed again, so a waiting standby keeps no backend between its polls).
        self._conn: psycopg2.extensions.connection | None = None

    @property
    def held(self) -> bool:
        return self._conn is not None and not self._conn.closed

    def try_take(self) -> bool:
        """Take the claim if no other session holds it; True if this one holds it now."""
        if self.held:
            return True
        conn = connect(self._dsn, "pgcdc-claim")
        try:
            with conn.cursor() as cur:
                idle = self._keepalive_s
                cur.execute(f"SET tcp_keepalives_idle = {int(idle)}")
                cur.execute("SET tcp_keepalives_interval = 5")
                cur.execute("SET tcp_keepalives_count = 3")
                cur.execute(
                    "SELECT pg_catalog.pg_try_advisory_lock(pg_catalog.hashtextextended(%s, 0))",
                    (self.key_text,),
                )
                row = cur.fetchone()
                taken = row is not None and bool(row[0])
        except psycopg2.Error as exc:  # lost meanwhile: the caller polls again
            log.warning("slot_claim_failed", claim=self.key_text, error=str(exc).strip())
            conn.close()
            return False
        if not taken:
            conn.close()
            return False
        self._conn = conn
        return True

    def release(self) -> None:
        """Unlock, then close the connection (idempotent). The explicit unlock makes the
        claim free when this returns: closing alone frees it only once the backend has
        seen the socket closed and exited, a moment later (a standby polling right
        after would still find it held)."""
        conn, self._conn = self._conn, None
        if conn is None:
            return
        # a lost connection took the lock along: nothing to unlock
        with contextlib.suppress(psycopg2.Error), conn.cursor() as cur:
            cur.execute(
                "SELECT pg_catalog.pg_advisory_unlock(pg_catalog.hashtextextended(%s, 0))",
                (self.key_text,),
            )
        with contextlib.suppress(psycopg2.Error):  # closing is all that is left to do
            conn.close()
