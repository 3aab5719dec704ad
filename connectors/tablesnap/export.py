"""The default initial snapshot (`snapshot.method = blocking`): parallel readers sharing
one exported snapshot, each chunk committed in its own Kafka transaction.

Contract. Every row of the captured tables as the aligned snapshot sees it is published
once as op `r`, and every `r` of a table lies in Kafka before any stream change of that
table, because decoding stays paused at the consistent point until the last chunk is
committed. No Kafka transaction holds more than one chunk (`snapshot.chunk_rows`,
`snapshot.chunk_bytes`), so none comes near transaction.max.timeout.ms whatever the
database size; memory holds at most two chunks per reader and max(four, parallelism) in
all (connectors.tablesnap.snapshotter `ReadAhead`), each within `chunk_budget`: a
reader reads its next chunk while the worker publishes its last one.

How (PostgreSQL's own pattern: walsender's CREATE_REPLICATION_SLOT ... EXPORT_SNAPSHOT,
and pg_dump -j, whose workers import the leader's snapshot):
1. `SharedSnapshot.__call__` runs as the session's snapshot reader, inside the
   REPEATABLE READ transaction of the aligned catalog snapshot
   (`Catalog.snapshot(inside=...)`): it calls `pg_export_snapshot()` there and, while
   that transaction is still open, opens `snapshot.parallelism` connections which
   import the snapshot (`SET TRANSACTION SNAPSHOT`, connectors.tablesnap.chunks
   `SharedSnapshotReader`) and check that `pg_current_snapshot()` there is the exported
   one. The catalog transaction then ends; the importers keep the snapshot.
2. `run`, called by the worker when the session is aligned (still inside the decoding
   loop, so decoding is paused): reader threads take chunks from the snapshotter's plan
   (the same `SnapshotState`, key or CTID chunks of connectors.tablesnap.chunks, planned
   in the shared snapshot) and read them; the worker's thread, the only one touching
   the plugin and the sink, publishes each chunk as op `r` and commits it with its
   progress record and the stream offset of the consistent point, unchanged from chunk
   to chunk (`WorkerPort.commit_snapshot_chunk`): the confirmed LSN where decoding
   stands, the restart LSN of the reorder buffer there.
3. Restart in the middle (SIGKILL, a failed reader, a broker failure): the exported
   snapshot is gone. The next worker resumes from that offset with the shared
   snapshot's visibility (`SnapshotState.export`), so every transaction is again either
   in the snapshot or in the stream; the committed chunks are never read again and the
   remaining ones are read by the snapshotter's DBLog watermark method while streaming
   goes on. For the tables not finished before the restart, a row changed meanwhile may
   then see its change before its `r` (DBLog semantics, as `method = chunked`); the
   materialized topics still end with every row's latest state.

Errors: a reader's failure stops the snapshot with that error (the worker restarts and
resumes as in 3); `run` returns False when the worker is asked to stop.
"""

from __future__ import annotations

import queue
import threading
import time
from typing import Any, Protocol

import structlog

from connectors.tablesnap.chunks import SharedSnapshotReader
from connectors.tablesnap.snapshotter import (
    Snapshotter,
    _Pending,
    chunk_budget,
    log_chunk_read,
)
from service.config import Settings
from service.errors import PgcdcError, SourceUnavailableError
from service.lsn import format_lsn
from service.pgconst import UNIX_EPOCH_USECS
from service.schema.tabledef import CatalogSnapshot
from service.tablesnap.plan import END, Interval

log = structlog.get_logger(__name__)


class ExportPort(Protocol):
    """The worker side `run` needs besides the snapshotter's `WorkerPort` (through
    which each chunk is committed): keep the walsender and the watchdog fed while
    decoding is paused (service.app.worker.Worker has it)."""

    def snapshot_keepalive(self) -> None: ...


def export_doc(snapshot: CatalogSnapshot, confirmed_lsn: int, ts_us: int) -> dict[str, Any]:
    """`SnapshotState.export`: what a restart needs of the shared snapshot."""
    return {
        "lsn": snapshot.lsn,
        "xmin": snapshot.xmin,
        "xmax": snapshot.xmax,
        "xip": sorted(snapshot.xip),
        "confirmed": confirmed_lsn,
        "time": ts_us,
    }


def export_visibility(doc: dict[str, Any]) -> CatalogSnapshot:
    """The shared snapshot again, for its `xid_visible` (XidInMVCCSnapshot, negated)."""
    return CatalogSnapshot(
        db_oid=0,
        lsn=int(doc["lsn"]),
        xmin=int(doc["xmin"]),
        xmax=int(doc["xmax"]),
        xip=frozenset(int(x) for x in doc.get("xip", [])),
        tables=(),
    )


class SharedSnapshot:
    """`Session(snapshot_reader=...)`: exports the aligned snapshot into the readers;
    then `run` reads and publishes it (module docstring)."""

    def __init__(self, settings: Settings, snapshotter: Snapshotter) -> None:
        self.settings = settings
        self.snap = snapshotter
        self.readers: list[SharedSnapshotReader] = []
        self.snapshot: CatalogSnapshot | None = None
        self.snapshot_id = ""
        self.ts_us = 0
        self._ready: queue.Queue[_Pending | None] = queue.Queue()
        self._errors: list[BaseException] = []
        self._halt = threading.Event()

    # --- 1. inside the aligned catalog transaction -------------------------------------

    def __call__(self, cursor: Any, snapshot: CatalogSnapshot) -> None:
        cursor.execute("SELECT pg_catalog.pg_export_snapshot()")
        row = cursor.fetchone()
        self.snapshot_id, self.snapshot = str(row[0]), snapshot
        self.ts_us = time.time_ns() // 1000 - UNIX_EPOCH_USECS
        s = self.settings
        try:
            for n in range(s.snapshot.parallelism):
                reader = SharedSnapshotReader(
                    s.source.dsn(),
                    s.filters,
                    snapshot,
                    self.snapshot_id,
                    unknown_types=self.snap.unknown_types,
                    application_name=f"pgcdc-snapshot-export-{n}",
                )
                self.readers.append(reader)
                imported = reader.import_snapshot()
                log.info(
                    "snapshot_export_imported",
                    reader=n,
                    snapshot_id=self.snapshot_id,
                    snapshot=imported,
                    pid=reader.backend_pid,
                )
        except BaseException:
            self.close()
            raise
        log.info(
            "snapshot_exported",
            snapshot_id=self.snapshot_id,
            snapshot_lsn=format_lsn(snapshot.lsn),
            readers=len(self.readers),
        )

    # --- 2. when aligned, in the worker's thread -----------------------------------------

    def run(self, port: ExportPort, confirmed_lsn: int, stop: threading.Event) -> bool:
        """Read and publish every chunk; True when done, False when `stop` was set."""
        snap, snapshot = self.snap, self.snapshot
        assert snapshot is not None and self.readers
        with snap.lock:
            snap.state.export = export_doc(snapshot, confirmed_lsn, self.ts_us)
            tables = len(snap.state.pending())
            names = [j.table for j in snap.state.pending() if j.marker == "initial"]
        # Tables with no row cannot hold the snapshot's last record: known now, the last
        # row of the last table that has one is marked `last` (as Debezium marks the last
        # record it emits), also when empty tables come after it.
        empty = self.readers[0].empty_tables(names)
        with snap.lock:
            snap.empty_tables = empty
        if snap.metrics is not None:
            snap.metrics.snapshot_tables_total.labels(snap.slot).set(tables)
            snap.metrics.snapshot_tables_done.labels(snap.slot).set(0)
        log.info("snapshot_started", tables=tables, readers=len(self.readers), method="blocking")
        if not tables:
            log.info("snapshot_done", tables=0, rows=0)
        threads = [
            threading.Thread(
                target=self._reader, args=(n, r), name=f"snapshot-export-{n}", daemon=True
            )
            for n, r in enumerate(self.readers)
        ]
        for t in threads:
            t.start()
        try:
            while not self._done():
                if self._errors:
                    raise self._errors[0]
                if stop.is_set():
                    return False
                try:
                    p = self._ready.get(timeout=0.5)
                except queue.Empty:
                    port.snapshot_keepalive()
                    continue
                if p is not None:
                    try:
                        self._publish(port, p, snapshot, confirmed_lsn)
                    finally:
                        snap.published(p)
                port.snapshot_keepalive()
            if self._errors:
                raise self._errors[0]
            return True
        finally:
            self._halt.set()
            with snap.lock:
                for p in list(snap._pending.values()):
                    p.published.set()
            for t in threads:
                t.join(30)
            self.close()

    def _done(self) -> bool:
        with self.snap.lock:
            return not any(j.marker == "initial" for j in self.snap.state.pending())

    def _reader(self, n: int, reader: SharedSnapshotReader) -> None:
        snap, cfg = self.snap, self.settings.snapshot
        held: list[_Pending] = []  # read by this reader, oldest first, maybe published
        try:
            while not self._halt.is_set():
                if not snap.read_ahead.room(held):  # the oldest is published before one more
                    continue
                p = snap._next(reader, shared=True)
                if p is None:
                    snap.read_ahead.release()
                    if self._done():
                        return
                    self._halt.wait(0.05)  # a cut chunk's rest may still be planned
                    continue
                read = reader.read_shared(p.spec, rows=cfg.chunk_rows, max_bytes=chunk_budget(cfg))
                snap.learn_cut(p.job, read)
                with snap.lock:
                    snap.reads += 1
                    p.read = read
                log_chunk_read(p, read, reader=n)
                self._ready.put(p)
                snap.read_ahead.add(held, p)
                snap._prepare(p, read)  # the worker waits for it if it gets there first
                snap._throttle(len(read.rows))
                del p, read  # `held` keeps the chunk until published; `room` may wait long
        except BaseException as exc:  # handed to the worker's thread, which raises it
            if not isinstance(exc, PgcdcError):
                exc = SourceUnavailableError(f"shared snapshot reader {n} failed: {exc}")
            self._errors.append(exc)
            self._ready.put(None)

    def _publish(
        self, port: ExportPort, p: _Pending, snapshot: CatalogSnapshot, confirmed: int
    ) -> None:
        """One chunk as op `r`, committed with its progress record at the unchanged offset."""
        snap, read = self.snap, p.read
        assert read is not None and snap.ctx is not None
        with snap.lock:
            live = p.job in snap.state.jobs and not p.job.done
        if not live:
            return
        if read.missing or read.plan is None:
            # Not in the snapshot's catalog: nothing to read (cannot happen for a table
            # the aligned snapshot lists; kept for a plan that names an unknown OID).
            with snap.lock:
                p.job.open = [i for i in p.job.open if i.committed]
                p.job.planned_to = END
                snap._advance(p.job)
            snap._commit(confirmed, p, 0, done_table=True)
            return
        snap._emit_rows(snap.ctx, snapshot.lsn, p, read, read.plan.relation, range(len(read.rows)))
        with snap.lock:
            iv = p.interval
            real_hi = read.real_hi
            if read.cut and real_hi != iv.hi:
                rest = Interval(real_hi, iv.hi)
                p.job.open.insert(p.job.open.index(iv) + 1, rest)
                iv.hi = real_hi
            iv.committed = True
            p.job.rows += len(read.rows)
            p.job.chunks += 1
            snap._advance(p.job)
        snap._commit(confirmed, p, len(read.rows))

    def close(self) -> None:
        """End the importers' transactions (they pin the source's xmin horizon)."""
        for r in self.readers:
            r.close()
        self.readers = []
