"""Chunked snapshots while streaming goes on: planning, readers, watermarks, signals.

Who does what:
- reader threads (`snapshot.parallelism`, each a `ChunkReader` with its own
  connections) take the next chunk from the plan, write its low watermark, read it in
  a fresh snapshot, write its high watermark, and go on to the next while the worker
  publishes it; a reader waits for its oldest chunk to be published before it holds
  `READ_AHEAD` of them, and for the oldest of all readers' before they hold
  max(`HELD_MAX`, parallelism) together (`ReadAhead`: memory holds at most that many
  chunks, and a single reader's next read overlaps the publication of its last chunk);
- the worker's thread, the only one touching the output plugin and the Kafka sink,
  sees the watermarks where they lie in the WAL through `SnapshotHooks` (a plugin
  wrapped around the Avro plugin): at a low watermark the chunk's window opens; every
  replayed change and commit goes to the `WindowTracker`; at the high watermark the
  surviving rows are published as op `r` right there in stream order, and the
  progress record is staged into the same Kafka transaction, with an offset at the
  watermark (`Worker.commit_snapshot_chunk`). That transaction is committed by the
  sink's batch rule, with whatever follows it (see "Commits" below).

Watermarks: `pg_logical_emit_message(false, '__pgcdc.snapshot.watermark', {"run","chunk",
"kind"})`. Non-transactional, because a watermark marks a WAL position: a
transactional one would be decoded at its commit, which is no better ordered (and it
would take an xid and an fsync per watermark). A watermark of another run (a worker
that died) is ignored: its chunk was not committed, so the plan hands it out again.
Both prefixes start with `pgcdc.`, pgcdc's internal namespace: they never reach Kafka.

Signals: `pg_logical_emit_message(true, '__pgcdc.snapshot.signal', json)`, as
`pgcdc snapshot` writes it. Transactional, so a signal exists only if its transaction
committed, and it is acted on exactly once: its effect (the state) is staged into the
Kafka transaction of that source transaction's offset. Kafka signals (topic
`<prefix>.signals`, Debezium's format) are re-emitted into the WAL as the same
message carrying their Kafka offset, so both kinds are ordered by the WAL and the
state's `signal_offset` drops the copy a restart re-emits. Types: `execute-snapshot`
(`data.data-collections`: ["schema.table", ...], `data.additional-conditions`:
[{"data-collection", "filter"}] or `data.additional-condition`), `pause-snapshot`,
`resume-snapshot`, `stop-snapshot`.

State (`SnapshotState`, in every progress record): the tables queued, each with its
committed prefix bound, the chunks planned past it (committed ones out of order among
them), where planning stopped, rows and chunks published; the paused flag; the
signal offset; the tables captured so far. Resuming re-reads exactly the planned
chunks that are not committed, then plans on: a committed chunk is never read again,
none is lost.

Commits: a chunk commits its Kafka transaction itself only when it finishes a table.
Otherwise, while more chunks are on their way (`in_flight`), the worker does not commit
on an idle stream either, so that several chunks share a commit, cut by
kafka.max_batch_bytes or max_batch_age_s (under the blocking method, decoding is paused
and kafka.max_batch_bytes alone cuts them until the table ends): a commit
waits for every record of the transaction to be acknowledged, and the worker's thread,
which alone produces, did nothing else meanwhile (a commit per 8 MiB chunk took ~15% of
that thread; py-spy). A chunk is committed, and said to be (`snapshot_chunk_committed`,
the chunk counter, `snapshot_table_done`, `snapshot_done`), only when the Kafka
transaction holding it is (`kafka_committed`, the worker's commit callback): a restart
reads again exactly the chunks not announced.

Markers (source.snapshot): the initial snapshot uses Debezium's `first`,
`first_in_data_collection`, `true`, `last_in_data_collection`, `last`, by Debezium's
rules (service.tablesnap.markers: `first` only in the first table of `state.jobs`,
whichever reader publishes first; `last` on the last row of the last table with rows);
on-demand snapshots use `incremental`, as Debezium's incremental snapshots do.
"""

from __future__ import annotations

import json
import sys
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, TextIO

import psycopg2
import structlog

from connectors.postgres.catalog import Catalog
from connectors.tablesnap.chunks import (
    SIGNAL_PREFIX,
    WATERMARK_PREFIX,
    ChunkRead,
    ChunkReader,
    ChunkSpec,
)
from connectors.tablesnap.progress import ProgressRecord, SignalConsumer, progress_topic
from service.config import Settings, SnapshotSettings
from service.errors import PgcdcError
from service.output.api import ChangeOp, PluginContext, RelationInfo, RowChange, TxnInfo
from service.output.filters import TableFilter
from service.schema.tabledef import TableDef
from service.tablesnap import markers
from service.tablesnap.plan import END, Bound, Interval, SnapshotState, TableJob
from service.tablesnap.watermark import WindowTracker
from service.types.rowdecode import RowRun, RunList
from service.types.unknown import UnknownTypePolicy

log = structlog.get_logger(__name__)

# Reads of a keyless (CTID) chunk under the plain window before it is read under a
# SHARE lock of its table (ChunkReader.read, lock): any change of such a table inside
# the window forces a re-read, so a table under constant writes needs the lock.
KEYLESS_OPTIMISTIC_READS = 2


# --- what the worker offers --------------------------------------------------------------


class WorkerPort(Protocol):
    """The worker side the snapshotter needs (service.app.worker.Worker has it)."""

    def snapshot_ready(self) -> bool: ...
    def relation_at(self, oid: int, lsn: int) -> RelationInfo | None: ...
    def stage_snapshot_progress(self, topic: str, key: bytes, value: bytes) -> None: ...
    def commit_snapshot_chunk(self, lsn: int, *, now: bool) -> None: ...


class _Labelled(Protocol):
    def labels(self, *values: str) -> Any: ...


@dataclass(slots=True)
class _Pending:
    """A chunk between its reader and the worker (one per reader at most)."""

    chunk_id: str
    job: TableJob
    interval: Interval
    spec: ChunkSpec
    read: ChunkRead | None = None
    failed: bool = False
    published: threading.Event = field(default_factory=threading.Event)
    # the chunk's records encoded ahead by its reader (`Snapshotter._prepare`), and
    # whether the worker began publishing it (then no reader starts that); under `lock`
    ahead: _Ahead | None = None
    publishing: bool = False


@dataclass(slots=True)
class _Published:
    """A chunk published into the open Kafka transaction: its `snapshot_chunk_committed`
    fields, and the tables its publication finished."""

    job: TableJob
    said: dict[str, Any]
    finished: list[TableJob]


class _Ahead:
    """A chunk's records being encoded ahead on its reader's thread: `value` (the
    plugin's `snapshot_prepare` result, None when it had none) once `done` is set."""

    __slots__ = ("done", "value")

    def __init__(self) -> None:
        self.done = threading.Event()
        self.value: Any = None


# Chunks one reader may hold read and not yet published: 2, so that reading the next
# chunk (the server's COPY, the watermarks' round trips) overlaps the worker's
# publication of the last one (encode, produce, the Kafka commit); chunks are published
# at their high watermarks in WAL order all the same, as with several readers.
READ_AHEAD = 2
HELD_MAX = 4  # chunks held unpublished by all readers together (ReadAhead)
# Chunks held with their records encoded ahead (`Snapshotter._prepare`), all readers
# together, besides the one being published: each doubles what its chunk holds (the
# COPY stream and the records). One is enough for the worker to find the next chunk
# encoded whenever it gets there (1.2M wide rows: 106k rows/s with one reader at 1 or
# 2; with four readers, 196 MB peak RSS at 1 against 205 MB at 2).
AHEAD_MAX = 1
# The longest a reader whose chunk waits for such a place sleeps before it looks again
# (`_ahead_place`); a publication that frees one wakes it at once.
AHEAD_POLL_S = 0.05
IDLE_POLL_S = 0.2  # a reader with nothing to read looks again after this, or a `ring`
RATE_BURST_S = 1.0  # rate_limit_rows_per_s: idle time earns at most this much (_throttle)
HEAP_PAGE_BYTES = 8192  # BLCKSZ: what pg_class.relpages counts
MIN_CHUNK_BYTES = 64 * 1024  # snapshot.chunk_bytes' least value


def chunk_budget(cfg: SnapshotSettings) -> int:
    """The byte budget of one chunk, for planning and reading: `snapshot.chunk_bytes`,
    or with more than three readers chunk_bytes * 3 / parallelism (at least 64 KiB), so
    that added readers do not add memory: `ReadAhead` holds max(HELD_MAX, parallelism)
    chunks, 4 x chunk_bytes for two or three readers, 3 x chunk_bytes past them. It
    bounds the chunks held, not their bytes: four readers of 8 MiB chunks peaked at
    189-203 MB against 175-191 MB for two (1.2M rows of the wide table,
    `bench_snapshot_vs_debezium.py --systems pgcdc-1,pgcdc-2,pgcdc-4`). With 4 MiB chunks
    (chunk_bytes * 2 / parallelism, before) four peaked at 145-162 MB, and with 6 MiB at
    171-179 MB and 8.6% more rows/s (median of 6 alternating runs, 140.1k against 129.0k):
    half-size chunks meant twice the chunks and Kafka commits."""
    readers = max(3, cfg.parallelism)
    return max(MIN_CHUNK_BYTES, int(cfg.chunk_bytes) * 3 // readers)


class ReadAhead:
    """The read-ahead rule of every reader, for both methods: a reader holds at most
    `READ_AHEAD` chunks read and not yet published, and all readers together at most
    `limit`, max(`HELD_MAX`, parallelism), so that each reader can hold one. Memory then
    holds at most that many chunks: a second reader doubles what one holds, a third or
    fourth adds nothing (before: two per reader, and four readers of 8 MiB chunks of
    0.8 KB rows peaked at 228 MB). No reader waits for another: a chunk held is
    published by the worker's thread alone, whose high watermark its reader has
    already written. A chunk held with its records encoded ahead (`_Pending.ahead`)
    takes two places: it holds about twice the bytes (four readers peaked at 205 MB
    with it counted once, 1.2M rows of the wide table)."""

    def __init__(self, limit: int = HELD_MAX) -> None:
        self.limit = limit
        self._lock = threading.Lock()
        self._all: list[_Pending] = []  # every reader's, oldest first, maybe published
        self._reserved = 0  # places `room` gave to reads not yet `add`ed or `release`d

    def room(self, held: list[_Pending]) -> bool:
        """Drop the published chunks from `held` (this reader's, oldest first); True when
        it may read one more, its place then reserved until `add` or `release`; else
        wait up to 0.5 s on the oldest chunk it waits for and return False (the caller
        loops, so it sees a stop)."""
        held[:] = [h for h in held if not h.published.is_set()]
        with self._lock:
            self._all = [h for h in self._all if not h.published.is_set()]
            oldest = self._all[0] if self._all else None
            places = len(self._all) + self._reserved
            places += sum(h.ahead is not None for h in self._all)
            if len(held) < READ_AHEAD and places < self.limit:
                self._reserved += 1
                return True
        wait_on = held[0] if len(held) >= READ_AHEAD else oldest
        if wait_on is None:  # the places are reads still in progress: they end soon
            time.sleep(0.02)
        else:
            wait_on.published.wait(0.5)
        return False

    def add(self, held: list[_Pending], p: _Pending) -> None:
        """The reserved place holds `p`, read by the reader whose chunks are `held`."""
        held.append(p)
        with self._lock:
            self._reserved -= 1
            self._all.append(p)

    def release(self) -> None:
        """The reserved place read nothing (no chunk to read, or the read failed)."""
        with self._lock:
            self._reserved -= 1


def key_of(values: Any, names: tuple[str, ...]) -> tuple[str | None, ...] | None:
    """The key of a row as the text of its key columns (the same text both sides)."""
    if values is None or not names:
        return None
    by_name = {c.name: c for c in values}
    try:
        return tuple(by_name[n].text for n in names)
    except KeyError:
        return None


def log_chunk_read(p: _Pending, read: ChunkRead, **extra: Any) -> None:
    """The `snapshot_chunk_read` event of one chunk (shared with snapshot_export)."""
    log.info(
        "snapshot_chunk_read",
        table=p.spec.table,
        chunk=p.chunk_id,
        bounds=p.spec.bounds(),
        rows=len(read.rows),
        bytes=read.nbytes,
        cut=read.cut,
        **extra,
    )


class Snapshotter:
    """Plans and reads chunks, and publishes them at their high watermark."""

    def __init__(self, settings: Settings, metrics: Any, *, terminal: TextIO | None = None) -> None:
        self.settings = settings
        self.cfg = settings.snapshot
        self.metrics = metrics
        self.slot = settings.source.slot
        self.run_id = uuid.uuid4().hex[:12]
        self.state = SnapshotState()
        self.tracker = WindowTracker()
        self.read_ahead = ReadAhead(max(HELD_MAX, settings.snapshot.parallelism))
        self.lock = threading.Lock()
        # Notified when a chunk's publication begins: its records' place is free.
        self._ahead_freed = threading.Condition(self.lock)
        # Rung (`ring`) when chunks may start that could not: an idle reader waits on it
        # for IDLE_POLL_S at most (`_idle`), and `_bell` counts the rings.
        self._rung = threading.Condition(self.lock)
        self._bell = 0
        self.stop = threading.Event()
        self.port: WorkerPort | None = None
        self.ctx: PluginContext | None = None
        # The inner plugin's PluginWrapper: chunk rows bypass the hooks (they are not
        # stream changes), but keep the wrapper's write rules and error context.
        self.emitter: Any = None
        # decoding.unknown_types (the worker's policy; a fresh `fail` one until set)
        self.unknown_types: UnknownTypePolicy | None = None
        self._pending: dict[str, _Pending] = {}
        self._seq = 0
        self._threads: list[threading.Thread] = []
        self._rate_started = time.monotonic()
        self._rate_rows = 0
        # rate_limit_rows_per_s: when the rows read so far may all have been read
        self._rate_due = self._rate_started
        self.terminal = (
            terminal if terminal is not None else (sys.stderr if sys.stderr.isatty() else None)
        )
        self._drawn = 0.0
        # Initial tables known to have no row (connectors.tablesnap.export under the
        # shared snapshot, `_learn_empty_after` under the chunked method): they cannot
        # hold the `last` record (`_emit_rows`).
        self.empty_tables: set[str] = set()
        self.reads = 0
        self.retries = 0
        # chunks whose rows the native encoder could not take, by reason (_native_fields)
        self.native_fallbacks: Counter[str] = Counter()
        self._announce: list[TableJob] = []  # finished, logged by `_announce_done`
        # Published chunks whose Kafka transaction is not committed yet, oldest first,
        # each with the tables its publication finished (`_commit`, `kafka_committed`);
        # and the tables finished by the chunk being published now. Changed by the
        # worker's thread alone, `_uncommitted` under `lock` (`_announce_done` reads it).
        self._uncommitted: list[_Published] = []
        self._finishing: list[TableJob] = []
        # rows a chunk of the table held when its byte budget cut it (`_chunk_rows`)
        self._rows_hint: dict[str, int] = {}

    # --- set-up ---------------------------------------------------------------------

    def hooks(self, plugin: object) -> SnapshotHooks:
        return SnapshotHooks(plugin, self)

    def restore(self, doc: dict[str, Any] | None) -> None:
        if doc is not None:
            self.state = SnapshotState.from_json(doc)

    def captured_tables(self) -> list[str]:
        """The tables the filters capture now (ordinary tables, by OID order)."""
        include = TableFilter(self.settings.filters)
        catalog = Catalog(self.settings.source.dsn())
        try:
            snap = catalog.snapshot()
        finally:
            catalog.close()
        return [
            t.qualified_name for t in snap.tables if t.relkind == "r" and include(t.schema, t.name)
        ]

    def fresh(self, tables: list[str], *, snapshot: bool) -> bytes:
        """The state of a first start: every captured table queued when `snapshot`."""
        with self.lock:
            self.state = SnapshotState(
                jobs=[TableJob(t, "initial") for t in tables] if snapshot else [],
                captured=list(tables),
            )
            return ProgressRecord(None, self.state.to_json()).encode()

    def add_new_tables(self, tables: list[str]) -> bool:
        """Queue the tables captured now but not before (snapshot.mode asks for it)."""
        with self.lock:
            new = [t for t in tables if t not in self.state.captured]
            self.state.captured.extend(new)
            for t in new:
                self.state.jobs.append(TableJob(t, "incremental"))
                log.info("snapshot_new_table", table=t)
            return bool(new)

    def start(self, port: WorkerPort) -> None:
        self.port = port
        for n in range(self.cfg.parallelism):
            t = threading.Thread(target=self._reader, args=(n,), name=f"snapshot-{n}", daemon=True)
            t.start()
            self._threads.append(t)
        if self.cfg.kafka_signals:
            t = threading.Thread(target=self._signals, name="snapshot-signals", daemon=True)
            t.start()
            self._threads.append(t)

    def ring(self) -> None:
        """Chunks may start now (the worker's initial snapshot is committed, so
        `snapshot_ready` turned true): idle readers look again at once rather than at
        their next poll."""
        with self.lock:
            self._bell += 1
            self._rung.notify_all()

    def _idle(self, bell: int) -> None:
        """Wait, as a reader with nothing to read, for a `ring` after `bell` (the count
        seen before it looked) or IDLE_POLL_S, whichever comes first."""
        with self.lock:
            if self._bell == bell and not self.stop.is_set():
                self._rung.wait(IDLE_POLL_S)

    def close(self) -> None:
        self.stop.set()
        self.ring()
        for p in list(self._pending.values()):
            p.published.set()
        for t in self._threads:
            t.join(10)

    # --- planning (under the lock) ----------------------------------------------------

    def _next(self, reader: ChunkReader, *, shared: bool = False) -> _Pending | None:
        """The next chunk to read. `shared`: for the shared-snapshot readers of the
        initial snapshot (connectors.tablesnap.export), which run while decoding is
        paused at the consistent point, so neither the port nor a pause applies."""
        with self.lock:
            if not shared and (
                self.state.paused or self.port is None or not self.port.snapshot_ready()
            ):
                return None
            for job in self.state.pending():
                if not job.oid and not self._resolve(reader, job):
                    continue
                if job.done:
                    continue
                for iv in job.open:
                    if not iv.committed and not iv.busy:
                        return self._hand_out(job, iv)
                if job.planned_to == END:
                    if not job.open:
                        self._finish(job)
                    continue
                planned = self._plan(reader, job)
                if planned is not None:
                    return self._hand_out(job, planned)
            return None

    def _resolve(self, reader: ChunkReader, job: TableJob) -> bool:
        schema, _, name = job.table.partition(".")
        with reader._sql().cursor() as cur:
            cur.execute(
                "SELECT c.oid FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n"
                " ON n.oid = c.relnamespace WHERE n.nspname = %s AND c.relname = %s",
                (schema, name),
            )
            row = cur.fetchone()
        if row is None:
            log.warning("snapshot_table_missing", table=job.table)
            job.done = True
            return False
        job.oid = int(row[0])
        plan = reader.describe(job.oid)
        if plan is None:
            job.done = True
            return False
        job.keyed = bool(plan.key_names)
        job.estimate = plan.estimate
        if job.planned_to is None and not job.keyed:
            job.committed_to = job.planned_to = 0
        log.info("snapshot_table_started", table=job.table, keyed=job.keyed, estimate=job.estimate)
        return True

    def _plan(self, reader: ChunkReader, job: TableJob) -> Interval | None:
        plan = reader._cache.get(job.oid) or reader.describe(job.oid)
        if plan is None:
            job.open = [i for i in job.open if i.committed]
            job.planned_to = END
            return None
        lo = job.planned_to
        assert not isinstance(lo, str)
        rows = self._chunk_rows(job, plan.estimate, plan.pages)
        if job.keyed:
            assert lo is None or isinstance(lo, tuple)
            hi: Bound = reader.plan_key_bound(plan, lo, rows, job.where)
        else:
            per_page = max(1.0, plan.estimate / max(1, plan.pages)) if plan.pages else 100.0
            pages = max(1, int(rows / per_page))
            start = lo if isinstance(lo, int) else 0
            hi = start + pages if start + pages < plan.pages else None
        iv = Interval(lo, hi)
        job.open.append(iv)
        job.planned_to = END if hi is None else hi
        return iv

    def _chunk_rows(self, job: TableJob, estimate: float, pages: int) -> int:
        """The rows to plan a chunk of `job` for: `snapshot.chunk_rows`, or fewer where
        as many would pass its byte budget (`chunk_budget`), judged by the heap's bytes per row
        (pg_class's relpages and reltuples: the tuple headers make it an overestimate
        of the COPY bytes, so the chunk stays within its budget) and by what a chunk of
        the table cut at its byte budget held. A chunk planned past its budget is read
        whole and cut, its rest read again: COPY twice for the rows of one chunk, and
        the whole stream held meanwhile. Called under the lock (planning holds it)."""
        rows = self.cfg.chunk_rows
        learned = self._rows_hint.get(job.table)
        if learned is not None:
            rows = min(rows, learned)
        if pages > 0 and estimate > 0:
            per_row = pages * HEAP_PAGE_BYTES / estimate
            rows = min(rows, max(1, int(chunk_budget(self.cfg) / per_row)))
        return rows

    def learn_cut(self, job: TableJob, read: ChunkRead) -> None:
        """A chunk of `job` was cut at its byte budget: plan the table's next chunks for
        the rows it held (`_chunk_rows`)."""
        if read.cut and read.rows:
            with self.lock:
                self._rows_hint[job.table] = len(read.rows)

    def _hand_out(self, job: TableJob, iv: Interval) -> _Pending:
        iv.busy = True
        self._seq += 1
        chunk_id = f"{self._seq}"
        spec = ChunkSpec(job.oid, job.table, job.keyed, iv.lo, iv.hi, job.where)
        pending = _Pending(chunk_id, job, iv, spec)
        self._pending[chunk_id] = pending
        return pending

    def _finish(self, job: TableJob, *, committing: bool = False) -> None:
        """`committing`: the table's last chunk is being published; its
        `snapshot_table_done` (and `snapshot_done`) is logged once the Kafka transaction
        holding it is committed (`kafka_committed`)."""
        job.done = True
        done = sum(1 for j in self.state.jobs if j.done)
        if self.metrics is not None:
            self.metrics.snapshot_tables_done.labels(self.slot).set(done)
            self.metrics.snapshot_current_table.labels(self.slot, job.table).set(0)
        if committing:
            self._finishing.append(job)
            return
        self._announce.append(job)
        self._announce_done()

    def _announce_done(self) -> None:
        """Log the finished tables of `_announce`; `snapshot_done` with them when no
        table is pending and no published chunk waits for its commit."""
        with_all = not self.state.pending() and not self._uncommitted
        for job in self._announce:
            log.info("snapshot_table_done", table=job.table, rows=job.rows, chunks=job.chunks)
        if self._announce and with_all:
            # rows: every row the state's table jobs published, by every worker (a
            # resumed snapshot counts the chunks committed before the restart too).
            rows = sum(j.rows for j in self.state.jobs)
            log.info("snapshot_done", tables=len(self.state.jobs), rows=rows)
        self._announce.clear()

    # --- readers ----------------------------------------------------------------------

    def _reader(self, n: int) -> None:
        s = self.settings
        reader = ChunkReader(
            s.source.dsn(),
            s.filters,
            unknown_types=self.unknown_types,
            application_name=f"pgcdc-snapshot-{n}",
        )
        backoff = 0.2
        held: list[_Pending] = []  # read by this reader, oldest first, maybe published
        try:
            while not self.stop.is_set():
                if not self.read_ahead.room(held):
                    continue
                read: bool | None = False
                pending: _Pending | None = None
                bell = self._bell
                try:
                    pending = self._next(reader)
                    if pending is not None:
                        read = self._read_one(reader, pending)
                except (psycopg2.Error, PgcdcError) as exc:
                    log.warning("snapshot_plan_failed", error=str(exc).strip())
                    reader.close()
                    read = None
                finally:
                    if read and pending is not None:
                        self.read_ahead.add(held, pending)
                    else:
                        self.read_ahead.release()
                if read is None:
                    self.stop.wait(backoff)
                    backoff = min(backoff * 2, 5.0)
                    continue
                if pending is None:
                    self._idle(bell)
                    continue
                pending = None  # `held` keeps it until published; `room` may wait long
                backoff = 0.2
        finally:
            reader.close()

    def _read_one(self, reader: ChunkReader, p: _Pending) -> bool | None:
        """Read chunk `p`: True once read (the worker publishes it at its high
        watermark), False when there was nothing to read (paused or stopped since it
        was handed out), None when the read failed (the chunk is handed out again)."""
        with self.lock:
            if self.state.paused or p.job.done:  # paused or stopped since it was handed out
                p.interval.busy = False
                self._pending.pop(p.chunk_id, None)
                return False
        payload = {"run": self.run_id, "chunk": p.chunk_id}
        # A keyless chunk the stream forced to re-read KEYLESS_OPTIMISTIC_READS times is
        # read under a table lock, whose window no change can enter: progress is certain.
        locked = not p.spec.keyed and p.interval.retries >= KEYLESS_OPTIMISTIC_READS

        def hand_over(read: ChunkRead) -> None:
            self.reads += 1
            self.learn_cut(p.job, read)
            log_chunk_read(p, read, locked=locked)
            with self.lock:
                p.read = read

        try:
            self._learn_empty_after(reader, p)
            read = reader.read(
                p.spec,
                rows=self.cfg.chunk_rows,
                max_bytes=chunk_budget(self.cfg),
                low={**payload, "kind": "low"},
                high={**payload, "kind": "high"},
                on_read=hand_over,
                lock=locked,
            )
        except (psycopg2.Error, PgcdcError) as exc:
            log.warning("snapshot_chunk_read_failed", table=p.spec.table, error=str(exc).strip())
            reader.close()
            with self.lock:
                p.failed = True
                p.interval.busy = False
                self._pending.pop(p.chunk_id, None)
            return None
        self._prepare(p, read)
        self._throttle(len(read.rows))
        return True

    def _prepare(self, p: _Pending, read: ChunkRead) -> None:
        """Encode the chunk's records now, on this reader's thread, for its publication
        (the plugin's `snapshot_prepare`: the Avro plugin's native encoder, with the GIL
        released): the worker then only writes each row's Envelope around its record and
        produces it, so encoding the next chunk overlaps producing this one, even with
        one reader. While AHEAD_MAX other chunks hold their records, it waits for a
        place (`_ahead_place`). Skipped when the worker already began publishing the
        chunk, when the chunk was not split natively, or when a column is read as its
        text (the publication decides those, as `_native_fields`); a chunk whose table
        had no chunk published natively yet gets nothing from the plugin, and
        publication encodes it as before."""
        wrapper, plan = self.emitter, read.plan
        if wrapper is None or read.copy is None or plan is None or not read.rows:
            return
        if not wrapper.has("snapshot_prepare"):
            return
        fields, reason = plan.copy_fields()
        if reason:
            return
        ahead = _Ahead()
        if not self._ahead_place(p, ahead):
            return
        try:
            ahead.value = wrapper.call_readonly("snapshot_prepare", plan.table, read.copy, fields)
        except Exception as exc:  # publication encodes the chunk itself, and reports
            log.warning("snapshot_prepare_failed", table=p.spec.table, error=repr(exc))
        finally:
            ahead.done.set()

    def _ahead_place(self, p: _Pending, ahead: _Ahead) -> bool:
        """Give `p` its records' place (`p.ahead = ahead`) once fewer than AHEAD_MAX
        chunks hold one; False, having waited for nothing more, once the worker began
        publishing `p`, `p` was let go (`published` set: also what the blocking
        method's export does to every pending chunk when it halts) or the snapshot
        stops. The places free as publications begin:
        with two readers taking turns, the chunk read while the other reader's waits
        to be published used to be skipped, and the worker then encoded every second
        chunk itself (55% of 1.2M wide rows encoded ahead, against all but the first
        chunk's when it waits)."""
        while True:
            with self.lock:
                if p.publishing or p.published.is_set():
                    return False
                if sum(q.ahead is not None for q in self._pending.values()) < AHEAD_MAX:
                    p.ahead = ahead
                    return True
                self._ahead_freed.wait(AHEAD_POLL_S)
            if self.stop.is_set():
                return False

    def _begin_publication(self, p: _Pending) -> Any:
        """The worker begins publishing `p`: no reader starts encoding it from now on, its
        records' place is free (a reader waiting in `_ahead_place` takes it), and what
        its reader encoded ahead is returned (None: nothing), waited for if its reader
        is still at it (no slower than encoding it here)."""
        with self.lock:
            p.publishing = True
            ahead, p.ahead = p.ahead, None  # a published chunk holds no records
            if ahead is not None:
                self._ahead_freed.notify_all()
        if ahead is None:
            return None
        ahead.done.wait()
        return ahead.value

    def _learn_empty_after(self, reader: ChunkReader, p: _Pending) -> None:
        """Before the read of an initial table's final interval, learn which of the
        initial tables still to come have no row, up to the first that has one: the
        table's last row is then the snapshot's `last` when only empty tables follow
        (`_emit_rows`). Under the chunked method a table found empty here may gain rows
        before its own read; its last row is then marked `last` as well."""
        if p.job.marker != "initial" or p.interval.hi is not None:
            return
        with self.lock:
            after = [
                j.table
                for j in self.state.jobs
                if j is not p.job
                and not j.done
                and j.marker == "initial"
                and j.table not in self.empty_tables
            ]
        if not after:
            return
        empty = reader.empty_tables(after, until_rows=True)
        with self.lock:
            self.empty_tables |= empty

    def _throttle(self, rows: int) -> None:
        """rate_limit_rows_per_s, after a read of `rows`: wait until they are due. Time
        spent idle (streaming between snapshots, paused) earns at most `RATE_BURST_S`
        of reads at full speed: before, the rate counted from the worker's start, so an
        on-demand snapshot after an hour of streaming was not limited at all."""
        rate = self.cfg.rate_limit_rows_per_s
        if rate <= 0:
            return
        with self.lock:
            now = time.monotonic()
            self._rate_rows += rows
            self._rate_due = max(self._rate_due, now - RATE_BURST_S) + rows / rate
            ahead = self._rate_due - now
        if ahead > 0:
            self.stop.wait(ahead)

    # --- the worker's side: watermarks ----------------------------------------------

    def on_watermark(self, ctx: PluginContext, lsn: int, payload: bytes) -> None:
        try:
            doc = json.loads(payload)
        except ValueError:
            log.warning("snapshot_watermark_malformed", lsn=lsn)
            return
        if not isinstance(doc, dict) or doc.get("run") != self.run_id:
            return  # another run's watermark: its chunk is handed out again
        chunk_id, kind = str(doc.get("chunk")), doc.get("kind")
        with self.lock:
            p = self._pending.get(chunk_id)
        if p is None:
            return
        if kind == "low":
            if not self.tracker.is_open(chunk_id):
                self.tracker.low(chunk_id, p.spec.table_oid, keyed=p.spec.keyed)
            return
        if kind != "high":
            raise PgcdcError(f"watermark of unknown kind {kind!r}", lsn=lsn)
        try:
            self._publish(ctx, lsn, p)
        finally:
            self.published(p)

    def published(self, p: _Pending) -> None:
        """Chunk `p` is done with (published, retried or abandoned), under either
        method: out of the pending ones, its interval free, its rows let go (its reader
        may still hold `p` while it waits for room), and its place in `ReadAhead` freed."""
        with self.lock:
            self._pending.pop(p.chunk_id, None)
            p.interval.busy = False
            p.read = None
            if p.ahead is not None:  # retried or abandoned with its records' place
                p.ahead = None
                self._ahead_freed.notify_all()
        p.published.set()

    def _publish(self, ctx: PluginContext, lsn: int, p: _Pending) -> None:
        read = p.read
        if read is None or not self.tracker.is_open(p.chunk_id):
            self.tracker.abandon(p.chunk_id)
            return  # the read failed, or the low watermark lay before this run's start
        assert self.port is not None
        with self.lock:
            live = p.job in self.state.jobs and not p.job.done
        if not live:
            self.tracker.abandon(p.chunk_id)
            log.info("snapshot_chunk_abandoned", table=p.spec.table, chunk=p.chunk_id)
            return  # stopped meanwhile
        rel = self.port.relation_at(p.spec.table_oid, lsn) if not read.missing else None
        same = (
            rel is not None
            and read.plan is not None
            and [(c.name, c.type_oid) for c in rel.columns]
            == [(c.name, c.type_oid) for c in read.plan.relation.columns]
        )
        if read.missing or rel is None:
            self.tracker.abandon(p.chunk_id)
            with self.lock:
                p.job.open = [i for i in p.job.open if i.committed]
                p.job.planned_to = END
                self._advance(p.job)
            self._commit(lsn, p, 0, done_table=True)
            return
        assert read.plan is not None
        # Only the key columns are decoded here, and only when the window saw a change
        # of its table's keys; whole rows at emission. The tracker keeps rows by their
        # index in the chunk (`_emit_rows` reads them).
        names = rel.key_columns if p.spec.keyed and self.tracker.needs_keys(p.chunk_id) else ()
        rows = (
            [(read.key(fields, names), i) for i, fields in enumerate(read.rows)]
            if names
            else [(None, i) for i in range(len(read.rows))]
        )
        snap = read.snapshot
        assert snap is not None  # set by every read that is not `missing`
        outcome = self.tracker.high(p.chunk_id, rows, snap.xip, snap.xmax)
        if outcome.retry is not None or not same:
            self.retries += 1
            with self.lock:
                p.interval.retries += 1
            if self.metrics is not None:
                self.metrics.snapshot_chunk_retries.labels(self.slot).inc()
            log.info(
                "snapshot_chunk_retry",
                table=p.spec.table,
                chunk=p.chunk_id,
                reason=outcome.retry or "the table's definition changed",
            )
            return
        self._emit_rows(ctx, lsn, p, read, rel, outcome.kept, outcome.filled)
        with self.lock:
            iv = p.interval
            real_hi = read.real_hi
            if read.cut and real_hi != iv.hi:
                rest = Interval(real_hi, iv.hi)
                p.job.open.insert(p.job.open.index(iv) + 1, rest)
                iv.hi = real_hi
            iv.committed = True
            p.job.rows += len(outcome.kept) + len(outcome.filled)
            p.job.chunks += 1
            self._advance(p.job)
        self._commit(
            lsn,
            p,
            len(outcome.kept) + len(outcome.filled),
            dropped=outcome.dropped,
            filled=len(outcome.filled),
        )

    def _advance(self, job: TableJob) -> None:
        """Move the committed prefix on (under the lock; a `_commit` follows)."""
        while job.open and job.open[0].committed:
            job.committed_to = job.open.pop(0).hi
        if job.planned_to == END and not job.open:
            self._finish(job, committing=True)

    def _commit(
        self,
        lsn: int,
        p: _Pending,
        rows: int,
        *,
        dropped: int = 0,
        filled: int = 0,
        done_table: bool = False,
    ) -> None:
        assert self.port is not None
        with self.lock:
            last = {
                "table": p.spec.table,
                "bounds": [
                    p.spec.bounds()[0],
                    list(p.interval.hi) if isinstance(p.interval.hi, tuple) else p.interval.hi,
                ],
                "rows": rows,
                "done": p.job.done or done_table,
            }
            value = ProgressRecord(last, self.state.to_json()).encode()
            finished, self._finishing = self._finishing, []
        self.port.stage_snapshot_progress(progress_topic(self.settings), self.slot.encode(), value)
        said = {**last, "chunk": p.chunk_id, "dropped": dropped, "filled": filled}
        # Before the port's call: a commit there calls `kafka_committed` back.
        with self.lock:
            self._uncommitted.append(_Published(p.job, said, finished))
        self.port.commit_snapshot_chunk(lsn, now=bool(finished))

    def kafka_committed(self) -> None:
        """The worker committed its Kafka transaction: the chunks published into it are
        committed now, and said to be (see "Commits" in the module docstring)."""
        with self.lock:  # a reader's `_finish` reads `_uncommitted` (`_announce_done`)
            published, self._uncommitted = self._uncommitted, []
            for c in published:
                if self.metrics is not None:
                    self.metrics.snapshot_chunks.labels(self.slot).inc()
                log.info("snapshot_chunk_committed", **c.said)
                self._announce.extend(c.finished)
            if published:
                self._announce_done()
        for c in published:
            self._draw(c.job)

    def in_flight(self) -> bool:
        """A chunk is handed out and not yet published (being read, or read with its high
        watermark on its way) while a published one waits for its commit: the worker
        then holds that commit for the next publication (module docstring, "Commits")."""
        if not self._uncommitted:
            return False
        with self.lock:
            return any(not p.failed for p in self._pending.values())

    def _emit_rows(
        self,
        ctx: PluginContext,
        lsn: int,
        p: _Pending,
        read: ChunkRead,
        rel: RelationInfo,
        rows: Sequence[int],
        filled: Sequence[tuple[list[Any], frozenset[int], int]] = (),
    ) -> None:
        """The kept rows (indexes into `read.rows`) as one pseudo-transaction through the
        wrapped (inner) plugin.

        `filled` (service.tablesnap.watermark, Unchanged TOAST): dropped rows whose latest
        stream state lacks unchanged-TOAST values, published first as that state with
        the missing positions taken from the chunk row.

        A chunk the native core split (`read.copy`) goes to the plugin's `snapshot_rows`
        when it has one (the Avro plugin's native encoder, connectors.avro.native_rows):
        runs of rows encoded in Rust from the chunk, each row it leaves to Python
        published here the single way, in order; with no native plan for the table
        (it returns -1), every row goes the single way."""
        wrapper = self.emitter
        assert wrapper is not None
        job = p.job
        initial = job.marker == "initial"
        export = self.state.export
        if initial and export is not None:
            # The initial snapshot's rows, shared snapshot or finished by watermarks
            # after a restart, carry one xid and one ts: the shared snapshot's xmax (the
            # xid txid_current() in Debezium's snapshot transaction gets when nothing
            # else starts meanwhile) and the clock when it was exported.
            txn = TxnInfo(
                xid=int(export["xmax"]),
                first_lsn=lsn,
                final_lsn=lsn,
                end_lsn=lsn,
                commit_time=int(export["time"]),
                origin=None,
            )
        else:
            txn = TxnInfo(
                xid=0, first_lsn=lsn, final_lsn=lsn, end_lsn=lsn, commit_time=0, origin=None
            )
        with self.lock:
            last_table = initial and not any(
                j is not job
                and not j.done
                and j.marker == "initial"
                and j.table not in self.empty_tables
                for j in self.state.jobs
            )
            table_ends = (
                job.planned_to == END
                and all(i is p.interval or i.committed for i in job.open)
                # LIMIT reached exactly at the chunk's bound: nothing is left of it.
                and not (read.cut and read.real_hi != p.interval.hi)
            )
            # Debezium's `first` belongs to the first table of the snapshot's order only,
            # whichever chunk is published first (service.tablesnap.markers).
            first_table = job is next((j for j in self.state.jobs if j.marker == "initial"), None)
        first_of_table = job.chunks == 0
        end = len(rows) - 1
        prepared = self._begin_publication(p)
        wrapper.call("begin", lsn, txn.xid, txn)
        try:
            for latest, missing, at in filled:
                read_values = read.values(read.rows[at])
                values = [read_values[i] if i in missing else v for i, v in enumerate(latest)]
                ctx.state["snapshot"] = markers.TRUE if initial else markers.INCREMENTAL
                change = RowChange(ChangeOp.INSERT, lsn, rel, values, None, False)
                wrapper.call("change", lsn, 0, txn, change)

            def marker(n: int) -> str:
                if not initial:
                    return markers.INCREMENTAL
                return markers.initial_marker(
                    first_table=first_table,
                    first_in_table=n == 0 and first_of_table,
                    last_in_table=n == end and table_ends,
                    last_overall=n == end and table_ends and last_table,
                )

            table, fields = self._native_fields(read, wrapper)
            native = table is not None
            n, count = 0, len(rows)
            while n < count:
                if native:
                    done = wrapper.call(
                        "snapshot_rows",
                        lsn,
                        txn.xid,
                        txn,
                        rel,
                        table,
                        read.copy,
                        fields,
                        rows,
                        n,
                        marker,
                        prepared,
                    )
                    if done < 0:
                        native = False  # no native plan: the rest the single way
                    else:
                        n += done
                        if n >= count:
                            break
                # row n the single way (the Python path's, or no native encoder)
                ctx.state["snapshot"] = marker(n)
                values = read.values(read.rows[rows[n]])
                change = RowChange(ChangeOp.INSERT, lsn, rel, values, None, False)
                wrapper.call("change", lsn, txn.xid, txn, change)
                n += 1
            wrapper.call("commit", lsn, txn.xid, txn, lsn)
        finally:
            ctx.state.pop("snapshot", None)
        if self.metrics is not None and (rows or filled):
            self.metrics.snapshot_rows.labels(self.slot, job.table).inc(len(rows) + len(filled))
            self.metrics.snapshot_current_table.labels(self.slot, job.table).set(1)
            self.metrics.snapshot_rows_estimate.labels(self.slot, job.table).set(job.estimate)

    def _native_fields(self, read: ChunkRead, wrapper: Any) -> tuple[TableDef | None, Any]:
        """(the table definition, where its columns sit in a COPY row) when the chunk's
        rows can go to the plugin's native `snapshot_rows` (`_emit_rows`); (None, None)
        when not: the chunk was parsed in Python, the plugin has no native encoder, or
        a column is read as its text (logged once per table definition, and counted in
        `native_fallbacks` per chunk)."""
        plan = read.plan
        if read.copy is None or plan is None or not wrapper.has("snapshot_rows"):
            return None, None
        fields, reason = plan.copy_fields()
        if reason:
            self.native_fallbacks[reason] += 1
            if not plan.native_off_logged:
                plan.native_off_logged = True
                log.info("snapshot_native_off", table=read.spec.table, reason=reason)
            return None, None
        return plan.table, fields

    # --- the worker's side: signals ---------------------------------------------------

    def on_signal(self, lsn: int, payload: bytes) -> None:
        """A committed `__pgcdc.snapshot.signal` message: change the state, stage it."""
        try:
            doc = json.loads(payload)
        except ValueError:
            log.warning("snapshot_signal_malformed", lsn=lsn)
            return
        if not isinstance(doc, dict):
            log.warning("snapshot_signal_malformed", lsn=lsn)
            return
        with self.lock:
            offset = doc.get("kafka_offset")
            if isinstance(offset, int):
                if offset < self.state.signal_offset:
                    return  # re-emitted after a restart: acted on already
                self.state.signal_offset = offset + 1
            self._apply_signal(doc, lsn)
            value = ProgressRecord(None, self.state.to_json()).encode()
        assert self.port is not None
        self.port.stage_snapshot_progress(progress_topic(self.settings), self.slot.encode(), value)

    def _apply_signal(self, doc: dict[str, Any], lsn: int) -> None:
        kind = doc.get("type")
        data = doc.get("data") or {}
        log.info("snapshot_signal", type=kind, lsn=lsn)
        match kind:
            case "execute-snapshot":
                filters: dict[str, str] = {}
                for cond in data.get("additional-conditions") or []:
                    filters[str(cond.get("data-collection"))] = str(cond.get("filter"))
                for named in data.get("data-collections") or []:
                    table = str(named) if "." in str(named) else f"public.{named}"
                    where = filters.get(table) or data.get("additional-condition") or None
                    self.state.jobs = [
                        j for j in self.state.jobs if not (j.table == table and not j.done)
                    ]
                    self.state.jobs.append(TableJob(table, "incremental", where))
            case "pause-snapshot":
                self.state.paused = True
            case "resume-snapshot":
                self.state.paused = False
            case "stop-snapshot":
                # The tables named (all when none is) end where they are: done, marked
                # stopped, their uncommitted chunks forgotten (a chunk being read is not
                # published: `_publish` sees the job done).
                names = {
                    str(t) if "." in str(t) else f"public.{t}"
                    for t in data.get("data-collections") or []
                }
                stopped = []
                for j in self.state.jobs:
                    if not j.done and (not names or j.table in names):
                        j.done = j.stopped = True
                        j.open = []
                        stopped.append(j.table)
                log.info("snapshot_stopped", tables=stopped, lsn=lsn)
            case _:
                log.warning("snapshot_signal_unknown", type=kind, lsn=lsn)

    def _signals(self) -> None:
        """Kafka signals into the WAL, so that both kinds are ordered there."""
        consumer: SignalConsumer | None = None
        reader: ChunkReader | None = None
        try:
            while not self.stop.is_set():
                try:
                    if consumer is None:
                        with self.lock:
                            start = self.state.signal_offset
                        consumer = SignalConsumer(self.settings, start)
                        reader = ChunkReader(self.settings.source.dsn(), self.settings.filters)
                    for offset, doc in consumer.poll(0.5):
                        if not isinstance(doc, dict):
                            log.warning("snapshot_signal_malformed", kafka_offset=offset)
                            continue
                        assert reader is not None
                        reader.emit(
                            SIGNAL_PREFIX, {**doc, "kafka_offset": offset}, transactional=True
                        )
                except Exception as exc:  # a signal source must not stop the worker: retried
                    log.warning("snapshot_signals_failed", error=str(exc).strip())
                    if consumer is not None:
                        consumer.close()
                    consumer = None
                    self.stop.wait(2.0)
        finally:
            if consumer is not None:
                consumer.close()
            if reader is not None:
                reader.close()

    # --- progress on a terminal -------------------------------------------------------

    def _draw(self, job: TableJob) -> None:
        if self.terminal is None:
            return
        now = time.monotonic()
        if now - self._drawn < 0.2 and not job.done:
            return
        self._drawn = now
        total = max(job.estimate, job.rows)
        width = 30
        filled = width if not total else min(width, width * job.rows // total)
        elapsed = max(1e-6, now - self._rate_started)
        rate = sum(j.rows for j in self.state.jobs) / elapsed
        eta = f"{(total - job.rows) / rate:.0f}s" if rate > 0 and total > job.rows else "-"
        self.terminal.write(
            f"\rsnapshot {job.table} [{'#' * filled}{'.' * (width - filled)}]"
            f" {job.rows}/~{job.estimate} rows, ETA {eta}" + ("\n" if job.done else "")
        )
        self.terminal.flush()


class SnapshotHooks:
    """The output plugin, seen through the snapshot: watermarks and signals are taken
    out, every change and commit is shown to the window tracker first."""

    def __init__(self, plugin: object, snapshotter: Snapshotter) -> None:
        self._plugin = plugin
        self._snap = snapshotter
        self._tracker = snapshotter.tracker

    def __getattr__(self, name: str) -> Any:
        return getattr(self._plugin, name)

    def startup(self, ctx: PluginContext, options: Any, is_init: bool) -> None:
        self._snap.ctx = ctx
        fn: Callable[..., Any] | None = getattr(self._plugin, "startup", None)
        if fn is not None:
            fn(ctx, options, is_init)

    def begin(self, ctx: PluginContext, txn: TxnInfo) -> None:
        self._plugin.begin(ctx, txn)  # type: ignore[attr-defined]

    def change(self, ctx: PluginContext, txn: TxnInfo, change: RowChange) -> None:
        oid = change.relation.oid
        tracker = self._tracker
        if tracker.watches(oid):
            names = change.relation.key_columns
            keys: list[Hashable] | None = None
            if names:
                new_key, old_key = key_of(change.new, names), key_of(change.old, names)
                keys = [k for k in (new_key, old_key) if k is not None] or None
                if keys is not None and change.new is not None and new_key is not None:
                    # The new row and its unchanged-TOAST positions, for the window's fill.
                    new = change.new
                    missing = [i for i, c in enumerate(new) if c.unchanged]
                    moved = old_key if old_key is not None and old_key != new_key else None
                    tracker.change(
                        oid, keys, old_key=moved, new_key=new_key, values=new, missing=missing
                    )
                else:
                    tracker.change(oid, keys, old_key=old_key)
            else:
                tracker.change(oid, keys)
        else:
            tracker.touch(oid)
        self._plugin.change(ctx, txn, change)  # type: ignore[attr-defined]

    def changes(self, ctx: PluginContext, txn: TxnInfo, changes: Sequence[RowChange]) -> None:
        """`change` for each: one call of the plugin's `changes` when no window watches
        any of their tables (the tracker only needs to know they were touched)."""
        tracker = self._tracker
        fn: Callable[..., Any] | None = getattr(self._plugin, "changes", None)
        # a RowRun is of one table (a RunList's runs each): their rows are built only if
        # something reads them
        if isinstance(changes, RowRun):
            oids = {changes.relation.oid}
        elif isinstance(changes, RunList):
            oids = {run.relation.oid for run in changes.runs}
        else:
            oids = {c.relation.oid for c in changes}
        if fn is None or any(tracker.watches(oid) for oid in oids):
            for c in changes:
                ctx.write_lsn = c.lsn
                self.change(ctx, txn, c)
            return
        for oid in oids:
            tracker.touch(oid)
        fn(ctx, txn, changes)

    def truncate(self, ctx: PluginContext, txn: TxnInfo, trunc: Any) -> None:
        for rel in trunc.relations:
            self._tracker.truncate(rel.oid)
        fn = getattr(self._plugin, "truncate", None)
        if fn is not None:
            fn(ctx, txn, trunc)

    def commit(self, ctx: PluginContext, txn: TxnInfo, commit_lsn: int) -> None:
        self._tracker.commit(txn.xid)
        self._plugin.commit(ctx, txn, commit_lsn)  # type: ignore[attr-defined]

    def message(self, ctx: PluginContext, txn: TxnInfo | None, msg: Any) -> None:
        if msg.prefix == WATERMARK_PREFIX:
            self._snap.on_watermark(ctx, msg.lsn, bytes(msg.payload))
            return
        if msg.prefix == SIGNAL_PREFIX:
            if msg.transactional:
                self._snap.on_signal(msg.lsn, bytes(msg.payload))
            return
        fn = getattr(self._plugin, "message", None)
        if fn is not None:
            fn(ctx, txn, msg)
