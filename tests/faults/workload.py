"""The fault suite's continuous workload: the mixed transactions of
`tests.integration.pipeline_kafka_support.Workload` (inserts, updates, deletes,
upserts, savepoints rolled back or released, some transactions rolled back), plus a
20,000-row transaction every `big_every` transactions (it spills at a 1 MB work_mem),
run in a loop until stopped, and surviving the faults the scenarios inject into
PostgreSQL.

Every transaction's fate is recorded (`FaultTxn`): committed, rolled back, or in
doubt when the connection was lost during COMMIT; `resolve_in_doubt` settles those
with `pg_xact_status()`. A transaction that failed before COMMIT is aborted. The
workload connects to the server directly, never through the worker's proxy.
"""

from __future__ import annotations

import contextlib
import threading
import time
from dataclasses import dataclass
from typing import Any

import psycopg2

from tests.integration.pipeline_kafka_support import Pipeline, TxnOutcome, Workload, insert_lsn

BIG_ROWS = 20_000


@dataclass
class FaultTxn(TxnOutcome):
    """A TxnOutcome with its 64-bit xid and whether its COMMIT was in doubt."""

    xid8: int = 0
    in_doubt: bool = False


class ContinuousWorkload(Workload):
    """Workload's transactions in a loop, tolerant of a failing server."""

    def __init__(self, p: Pipeline, seed: int, *, big_every: int = 50) -> None:
        super().__init__(p, seed)
        self.big_every = big_every
        self.errors = 0  # transactions cut short by a fault
        self.stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.failure: BaseException | None = None
        self.ddl_done: list[str] = []

    # --- one transaction ------------------------------------------------------------

    def _reconnect(self) -> None:
        with contextlib.suppress(psycopg2.Error):  # already broken: hence the reconnect
            self.conn.close()
        deadline = time.monotonic() + 300
        while True:
            try:
                self.conn = self.p.connect()
                return
            except psycopg2.OperationalError:
                if time.monotonic() > deadline or self.stop.is_set():
                    raise
                time.sleep(0.5)

    def transaction(self) -> FaultTxn:
        rng = self.rng
        out = FaultTxn(0, committed=False)
        try:
            cur = self.conn.cursor()
            cur.execute("BEGIN")
            cur.execute("SELECT pg_current_xact_id()::text::bigint")
            out.xid8 = int(cur.fetchone()[0])
            out.xid = out.xid8 & 0xFFFFFFFF
            if len(self.outcomes) % self.big_every == self.big_every - 1:
                a = self.next_ledger
                self.next_ledger += BIG_ROWS
                cur.execute(
                    "INSERT INTO ledger SELECT g, g % 977, g % 10000, 'big ' || g "
                    f"FROM generate_series({a}, {a + BIG_ROWS - 1}) g"
                )
                out.events["ledger"] = cur.rowcount
            for i in range(rng.randint(1, 6)):
                table, sql = self._statement()
                mode = rng.random()
                if mode < 0.15:
                    cur.execute(f"SAVEPOINT s{i}")
                    cur.execute(sql)
                    cur.execute(f"ROLLBACK TO SAVEPOINT s{i}")
                    continue
                if mode < 0.25:
                    cur.execute(f"SAVEPOINT s{i}")
                    cur.execute(sql)
                    rows = cur.rowcount
                    cur.execute(f"RELEASE SAVEPOINT s{i}")
                else:
                    cur.execute(sql)
                    rows = cur.rowcount
                out.events[table] = out.events.get(table, 0) + rows
            if not out.total:
                cur.execute(
                    "INSERT INTO kv VALUES ('k0', 'touch') "
                    "ON CONFLICT (k) DO UPDATE SET v = EXCLUDED.v"
                )
                out.events["kv"] = 1
            out.commit_from = insert_lsn(cur)
            commit = rng.random() >= 0.12
        except psycopg2.Error:
            # Failed before COMMIT: the server rolls it back (or has crashed and will).
            self.errors += 1
            out.committed = False
            if out.xid8:
                self.outcomes.append(out)
            self._reconnect()
            return out
        try:
            cur.execute("COMMIT" if commit else "ROLLBACK")
            out.committed = commit
        except psycopg2.Error:
            self.errors += 1
            out.committed, out.in_doubt = commit, commit  # a ROLLBACK cannot commit
            self._reconnect()
        self.outcomes.append(out)
        return out

    def big_transaction(self, rows: int, first_id: int) -> FaultTxn:
        """One `rows`-row ledger insert on a connection of its own (ids from `first_id`,
        apart from the loop's), committed; safe to call while the loop runs."""
        conn = self.p.connect()
        try:
            cur = conn.cursor()
            cur.execute("BEGIN")
            cur.execute("SELECT pg_current_xact_id()::text::bigint")
            xid8 = int(cur.fetchone()[0])
            out = FaultTxn(xid8 & 0xFFFFFFFF, committed=False, xid8=xid8)
            cur.execute(
                "INSERT INTO ledger SELECT g, g % 977, g % 10000, 'huge ' || g "
                f"FROM generate_series({first_id}, {first_id + rows - 1}) g"
            )
            out.events["ledger"] = cur.rowcount
            out.commit_from = insert_lsn(cur)
            cur.execute("COMMIT")
            out.committed = True
        finally:
            conn.close()
        self.outcomes.append(out)
        return out

    def ddl(self, sql: str) -> None:
        """A schema change on a connection of its own, in its own transaction (retried
        while the server is away); safe to call while the loop runs."""
        deadline = time.monotonic() + 300
        while True:
            try:
                conn = self.p.connect()
                try:
                    with conn.cursor() as cur:
                        cur.execute(sql)
                finally:
                    conn.close()
                self.ddl_done.append(sql)
                return
            except psycopg2.Error:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.5)

    # --- in the background ------------------------------------------------------------

    def start(self, pause_s: float = 0.3) -> None:
        def loop() -> None:
            try:
                while not self.stop.is_set():
                    self.transaction()
                    time.sleep(self.rng.uniform(0, pause_s))
            except BaseException as exc:  # handed to the runner by finish()
                self.failure = exc

        self._thread = threading.Thread(target=loop, daemon=True, name="workload")
        self._thread.start()

    def finish(self) -> None:
        self.stop.set()
        if self._thread is not None:
            self._thread.join(300)
            assert not self._thread.is_alive(), "the workload did not stop"
        if self.failure is not None:
            raise self.failure
        self.resolve_in_doubt()

    def resolve_in_doubt(self) -> None:
        """Settle every COMMIT that lost its connection with pg_xact_status()."""
        doubtful = [o for o in self.outcomes if isinstance(o, FaultTxn) and o.in_doubt]
        if not doubtful:
            return
        self._reconnect()
        with self.conn.cursor() as cur:
            for o in doubtful:
                cur.execute("SELECT pg_xact_status(%s::text::xid8)", (str(o.xid8),))
                status = cur.fetchone()[0]
                assert status in ("committed", "aborted"), (o.xid8, status)
                o.committed = status == "committed"

    def last_commit_lsn(self) -> int:
        committed = self.committed()
        return committed[-1].commit_from if committed else 0

    def in_doubt(self) -> int:
        return sum(1 for o in self.outcomes if isinstance(o, FaultTxn) and o.in_doubt)


def server_lsn(p: Pipeline) -> Any:
    """The server's insert position now (direct connection)."""
    conn = p.connect()
    try:
        return insert_lsn(conn.cursor())
    finally:
        conn.close()
