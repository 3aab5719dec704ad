"""Reorder buffer replay: a transaction's changes, merged by LSN, to the sink
(ReorderBufferReplay, ReorderBufferProcessTXN, ReorderBufferIterTXNInit/Next,
ReorderBufferRestoreChanges, ReorderBufferStreamTXN, ReorderBufferTruncateTXN in
reorderbuffer.c).

Part of the reorder buffer stage: `Replayer` is the half that takes changes out of
the buffer. `service.reorder.buffer.ReorderBuffer` holds one and owns the module
contract and the transaction table; both are handed the same `ReorderBufferState`
(`service.reorder.txn`: settings, sink, spill store, toast test, counters, memory
accounting), and this module does not import the buffer's.

Receives: a top-level `ReorderBufferTXN` at its commit or prepare (`replay`), or when
the memory limit picks it for streaming (`stream_txn`); its in-memory changes and
those of its known subtransactions, some possibly spilled.
Hands on, to the state's `ReplaySink`: `begin` (or `begin_prepare`), every change in
LSN order (a k-way heap merge over the transaction and its subtransactions, spilled
ones restored in batches), then `commit` (or `prepare`); or, streaming,
`stream_start`, the changes so far, `stream_stop`, and at the end `stream_commit` /
`stream_prepare`. It never forgets a transaction: after `replay` the buffer cleans it
up (ReorderBufferCleanupTXN) unless it is a decoded prepare. Outside streaming, plain
main-table changes (no TOAST chunks held for them) go to `changes` in runs of up to
`RUN_MAX`, each run handed on before any other callback; the sink treats a run as
`change` on each of its changes. A queued `InsertRows` (an InsertRun's rows, still in
the native core) is such a run already and goes to `changes` as it is, in windows of
up to `RUN_MAX` (one of fewer than `ROWS_ALONE` rows joins the run around it as its
rows). An insert or update run that carries TOAST chunk rows is replayed whole too
(an update run's bare deletes, the chunks of the values its rows replaced, passed over
as a toast relation's deletes are), its chunks collected
in the native core (`HeapRows.toast_replay`, ReorderBufferToastAppendChunk /
ReorderBufferToastReset) from the chunks held before it on (those of its first row),
each main row handed on as the branches for single changes would (with the chunks
held for it to `change`, else into the run), and the chunks still held after it
handed back to the replay's `_ToastState`, still accounted. A delete run whose chunk
rows are bare deletes (no old tuple) of a toast relation is replayed whole as well:
those are released as they would be one by one (ReorderBufferProcessTXN does not
decode a toast relation's deletes) and its other rows go on as a run (`mains`).
Where its rows could not go so (chunks held before one without chunks, bare deletes
of a table, streaming, a toast relation) they come one by one instead, exactly as if
queued one by one.

Guarantees:
- Changes of one input keep their order; inputs are merged by LSN.
- TOAST: toast-relation inserts are never handed on; their chunks are collected per
  chunk_id in chunk_seq order (`_ToastState`, ReorderBufferToastAppendChunk) and
  attached to the next main-table change as `ReplayChange.toast`, and dropped after a
  change with `clear_toast_afterwards` (ReorderBufferToastReset).
- Speculative insert: SPEC_INSERT is held until SPEC_CONFIRM (handed on as INSERT) or
  SPEC_ABORT / any other change (dropped); SPEC_CONFIRM without SPEC_INSERT raises
  `DecodeError` with the LSN.
- Memory: each change is released from the state's accounting once handed on (TOAST
  chunks when reset); restoring from the spill store stops at `restore_batch` changes
  or at `work_mem`, and the next batch is read only when the merge needs it. A spilled
  InsertRows is one record, read back whole as an InsertRows, and restored as its
  rows would be one by one (they count toward `restore_batch`): where a bound falls
  inside it, the rows up to that point join the batch and the rest waits, loaded but
  not accounted, for the next one. So the accounting (and `peak`) is that of the same
  changes restored one by one; beyond it, each spilled input may hold the rest of one
  record in native form (at most one InsertRun, 1024 WAL records, of compact rows).
- Counters: `total_bytes`, `total_txns`, and the `stream_*` counters of the state's
  `stats`, as described in `service.reorder.buffer`.
- Pure: no I/O except through the `SpillStore` interface.
"""

from __future__ import annotations

import dataclasses
import heapq
from collections.abc import Callable, Iterator, Mapping
from types import MappingProxyType

from service.decode.events import ChangeKind, HeapChange, InsertRows, MessageEvent, TruncateEvent
from service.errors import DecodeError
from service.reorder.changes import (
    CHANGE_OVERHEAD,
    EMPTY_TOAST,
    TUPLE_OVERHEAD,
    Change,
    ReplayChange,
    change_size,
    held,
    toast_chunk,
)
from service.reorder.txn import ReorderBufferState, ReorderBufferTXN
from service.wal.record import RelFileLocator

_INSERT = ChangeKind.INSERT
_DELETE = ChangeKind.DELETE
_PLAIN = frozenset((ChangeKind.INSERT, ChangeKind.UPDATE, ChangeKind.DELETE))
_SPEC_INSERT = ChangeKind.SPEC_INSERT
_SPEC_CONFIRM = ChangeKind.SPEC_CONFIRM
_SPEC_ABORT = ChangeKind.SPEC_ABORT


# What each row of an InsertRows adds to the accounted size beyond its tuple data (a
# HeapChange with a new tuple and no old one: `change_size`).
_ROW_BASE = CHANGE_OVERHEAD + TUPLE_OVERHEAD

# The most changes handed to the sink in one `changes` call: they are released from
# the memory accounting as they join the run, so a run is memory the limit does not see.
RUN_MAX = 1024

# An InsertRows of fewer rows goes on as its rows, joining the run of changes around it:
# below this, the per-run cost of handing it on alone (the sink's grouping, an encoder
# call) outweighs building its rows, and under concurrent writers (InsertRuns cut by
# other transactions' records) runs stay as long as they were before InsertRows.
ROWS_ALONE = 256


class Replayer:
    """Replay and streaming for one `ReorderBuffer`, on the state it shares with it."""

    __slots__ = ("_state",)

    def __init__(self, state: ReorderBufferState) -> None:
        self._state = state

    # --- streaming ------------------------------------------------------------------

    def stream_txn(self, txn: ReorderBufferTXN) -> None:
        """ReorderBufferStreamTXN: send what the transaction has so far."""
        if not txn.streamed and not txn.has_base:
            return
        was_streamed = txn.streamed
        stream_bytes = txn.total_size
        self._process_txn(txn, streaming=True, commit_lsn=0)
        self._truncate_txn(txn)
        txn.streamed = True
        stats = self._state.stats
        stats.stream_count += 1
        stats.stream_bytes += stream_bytes
        if not was_streamed:
            stats.stream_txns += 1

    def _truncate_txn(self, txn: ReorderBufferTXN) -> None:
        """ReorderBufferTruncateTXN: drop the changes already handed on, keep the txn."""
        for sub in txn.subtxns:
            self._truncate_txn(sub)
        if txn.changes:
            size, count = held(txn.changes)
            txn.changes.clear()
            self._state.release(txn, size, count)
        if txn.serialized:
            self._state.spill.remove(txn.xid)
            txn.serialized = False
            txn.serialized_clear = True
        txn.spilled = 0
        txn.nentries = 0

    # --- replay ---------------------------------------------------------------------

    def _iter_txn(
        self, txn: ReorderBufferTXN, whole: Callable[[InsertRows], bool]
    ) -> Iterator[tuple[ReorderBufferTXN, Change, int]]:
        """ReorderBufferIterTXNInit/Next: LSN-ordered k-way merge over txn and children.

        Yields (owner, change, size); the change is still accounted to its owner, and
        the consumer releases it. Restoring the next batch waits until the consumer
        resumes the iterator, so a released change never overlaps the next batch. An
        InsertRows comes whole when `whole` says so at the moment it is due (asked
        after the consumer has taken everything before it), else as its rows one by
        one, each with its own size: the sizes add up to the entry's.
        """
        state = self._state
        if txn.serialized:
            state.serialize_txn(txn)  # serialize remaining changes (all children too)
        inputs = [t for t in (txn, *txn.subtxns) if t.nentries > 0]
        readers: dict[int, Iterator[object]] = {}
        for t in inputs:
            if t.serialized:
                state.serialize_txn(t)
                readers[t.xid] = state.spill.read(t.xid, t.spilled)
        if len(inputs) == 1:
            t = inputs[0]
            changes = t.changes
            while True:
                if not changes and not (t.xid in readers and self._restore(t, readers)):
                    return
                change = changes.popleft()
                if type(change) is InsertRows and not whole(change):
                    for row in change:
                        yield t, row, change_size(row)
                else:
                    yield t, change, change_size(change)
        heap: list[tuple[int, int]] = []
        for index, t in enumerate(inputs):
            if t.changes or (t.xid in readers and self._restore(t, readers)):
                heap.append((t.changes[0].lsn, index))
        heapq.heapify(heap)
        while heap:
            index = heap[0][1]
            t = inputs[index]
            change = t.changes.popleft()
            # No change of another input lies between an InsertRows' first and last row.
            if type(change) is InsertRows and not whole(change):
                for row in change:
                    yield t, row, change_size(row)
            else:
                yield t, change, change_size(change)
            if t.changes or (t.xid in readers and self._restore(t, readers)):
                heapq.heapreplace(heap, (t.changes[0].lsn, index))
            else:
                heapq.heappop(heap)

    def _restore(self, txn: ReorderBufferTXN, readers: dict[int, Iterator[object]]) -> bool:
        """ReorderBufferRestoreChanges: load the next batch of txn's spilled changes.

        A spilled InsertRows is one record, read back whole (`service.reorder.spill`,
        tag 2), but it is restored as its rows would be one by one: the rows up to the
        one that reaches `restore_batch` or `work_mem` join the batch (a window, counted
        as its rows, accounted with their `change_size`), and the rest of the record
        waits for the next batch, unaccounted but compact (native rows: at most one run
        per spilled input). So batches, sizes, counts and `peak` are those of the same
        changes spilled and restored one by one."""
        reader = readers[txn.xid]
        state = self._state
        limit = state.settings.restore_batch
        work_mem = state.settings.work_mem
        overhead = state.settings.change_overhead
        top = txn.top
        loaded = 0
        for obj in reader:
            change: Change = obj  # type: ignore[assignment]
            n = 1
            if type(change) is InsertRows:
                # As the rows one by one: stop at the row whose loading brings the batch
                # to `limit` rows or the held memory to work_mem (`fill`, as queue_run).
                n = change.nrows
                end, _ = change.rows.fill(
                    0, work_mem - state.held, _ROW_BASE, overhead, TUPLE_OVERHEAD
                )
                end = min(end, limit - loaded)
                if end < n:
                    rest = change.window(end, n)
                    change = change.window(0, end)
                    n = end
                    if type(reader) is not _Pending:
                        reader = readers[txn.xid] = _Pending(reader)
                    reader.rest = rest
            size = change_size(change)
            txn.changes.append(change)
            txn.size += size
            top.total_size += size
            state.size += size
            state.count += n
            state.peak = max(state.peak, state.size)
            loaded += n
            if loaded >= limit or state.held >= work_mem:
                break
        if loaded == 0:
            del readers[txn.xid]
        return loaded > 0

    def _process_txn(self, txn: ReorderBufferTXN, streaming: bool, commit_lsn: int) -> None:
        """ReorderBufferProcessTXN: hand the transaction's changes to the sink."""
        state = self._state
        sink = state.sink
        release = state.release
        toast_of = state.toast_of
        was_streamed = txn.streamed
        if not streaming:
            if txn.prepared:
                sink.begin_prepare(txn)
            else:
                sink.begin(txn)
        spec: tuple[ReorderBufferTXN, HeapChange, int] | None = None
        toast = _ToastState()
        started = False
        last_lsn = 0
        stats = state.stats
        apply = sink.stream_change if streaming else sink.change
        # Plain main-table changes with no TOAST held go to the sink in runs
        # (sink.changes); the run is handed on before anything else reaches the sink.
        run: list[HeapChange] | None = None if streaming else []
        # The toast check of the last relation seen: the history does not change while
        # a transaction is replayed (its commit was applied before), nor does the answer.
        checked: RelFileLocator | None = None
        is_toast = False

        def whole(rows: InsertRows) -> bool:
            # As its rows would go: none of a toast relation, and either no chunk among
            # them nor held (all into the run), or chunks among them (`toast_replay`:
            # the native ReorderBufferToastAppendChunk, going on from the chunks held
            # before it, and handing back those held after it); else the rows go one
            # by one, down the branches below, its chunks to `toast` and each main row
            # with them.
            if run is None or toast_of(rows.locator):
                return False
            if rows.bares and not toast_of(rows.rows.toast_locator):
                # bare deletes of a table (no replica identity): one by one, as queued
                return False
            if rows.kind is _DELETE:
                # a delete run, its bare deletes (if any) a toast relation's chunk
                # deletes, which are not decoded: its main rows into the run
                return not toast.held
            return bool(rows.chunks) or not toast.held

        for owner, change, size in self._iter_txn(txn, whole):
            stats.total_bytes += size
            if streaming:
                if not started:
                    sink.stream_start(txn, change.lsn)
                    started = True
                owner.streamed = True
            last_lsn = change.lsn
            if isinstance(change, HeapChange):
                kind = change.kind
                if kind in _PLAIN:  # first: once per replayed row
                    locator = change.locator
                    if locator is not checked:
                        checked, is_toast = locator, toast_of(locator)
                    if change.on_toast_relation or is_toast:
                        if kind is _INSERT:
                            toast.append(owner, change, size)  # held until reset
                        else:
                            release(owner, size)  # toast deletions are not decoded
                    elif run is not None and not toast.held:
                        release(owner, size)
                        run.append(change)
                        if len(run) >= RUN_MAX:
                            sink.changes(txn, run)
                            run = []
                    else:
                        release(owner, size)
                        if run:
                            sink.changes(txn, run)
                            run = []
                        apply(
                            txn,
                            ReplayChange(change, toast.mapping() if toast.held else EMPTY_TOAST),
                        )
                        if change.clear_toast_afterwards and toast.held:
                            toast.reset(state)
                    if spec is not None:  # the speculative insertion was not confirmed
                        release(spec[0], spec[2])
                        spec = None
                elif kind is _SPEC_CONFIRM:
                    if run:  # the confirmed insertion is handed on (_apply) after it
                        sink.changes(txn, run)
                        run = []
                    if spec is None:
                        raise DecodeError(
                            "invalid ordering of speculative insertion changes",
                            lsn=change.lsn,
                            xid=change.xid,
                        )
                    release(owner, size)
                    emit = dataclasses.replace(spec[1], kind=_INSERT)
                    release(spec[0], spec[2])
                    spec = None
                    self._apply(txn, emit, toast, streaming)
                    if emit.clear_toast_afterwards:
                        toast.reset(state)
                elif kind is _SPEC_ABORT:
                    release(owner, size)
                    if spec is not None:
                        toast.reset(state)
                        release(spec[0], spec[2])
                        spec = None
                elif kind is _SPEC_INSERT:
                    if spec is not None:
                        release(spec[0], spec[2])
                    spec = (owner, change, size)
            elif type(change) is InsertRows and change.chunks and change.kind is not _DELETE:
                # whole(change): an insert or update run with its TOAST chunks (and, an
                # update run, the bare deletes of the chunks of the values it replaced)
                assert run is not None  # whole(): not streaming
                # Each main row as the branches above hand it on: with the chunks held
                # for it (ReorderBufferToastReplace's input) alone, else into the run;
                # a refused chunk raises after the rows before it. The chunks still
                # held after it stay accounted until their reset, as one by one.
                rows, error, was_reset, rest, lens = change.rows.toast_replay(toast.export())
                kept = [_ROW_BASE + n for n in lens]
                release(owner, size - sum(kept), change.nrows - len(kept))
                if spec is not None:  # the speculative insertion was not confirmed
                    release(spec[0], spec[2])
                    spec = None
                for row, held_toast in rows:
                    if held_toast is None:
                        run.append(row)
                        if len(run) >= RUN_MAX:
                            sink.changes(txn, run)
                            run = []
                        continue
                    if run:
                        sink.changes(txn, run)
                        run = []
                    sink.change(txn, ReplayChange(row, MappingProxyType(held_toast)))
                if error is not None:
                    raise error
                if was_reset:  # what was held before it went with a row's reset
                    toast.reset(state)
                toast.take_over(owner, rest, kept)
            elif type(change) is InsertRows:  # whole(change): the run, in pieces
                release(owner, size, change.nrows)
                if spec is not None:  # the speculative insertion was not confirmed
                    release(spec[0], spec[2])
                    spec = None
                pieces = change
                if change.chunks:
                    # a delete run's bare deletes, a toast relation's (whole()): released
                    # as they would be one by one (toast deletions are not decoded), its
                    # other rows on as the run
                    mains = change.mains()
                    if mains is None:
                        continue
                    pieces = mains
                n = pieces.nrows
                assert run is not None  # whole(): not streaming
                if n < ROWS_ALONE:
                    # A short piece (its InsertRun cut by other transactions' records)
                    # joins the run as its rows: runs stay long under concurrent writers.
                    for row in pieces:
                        run.append(row)
                        if len(run) >= RUN_MAX:
                            sink.changes(txn, run)
                            run = []
                else:
                    if run:
                        sink.changes(txn, run)
                        run = []
                    for at in range(0, n, RUN_MAX):
                        end = min(at + RUN_MAX, n)
                        sink.changes(txn, pieces if n <= RUN_MAX else pieces.window(at, end))
            else:
                release(owner, size)
                if run:
                    sink.changes(txn, run)
                    run = []
                wrapped = ReplayChange(change, EMPTY_TOAST)
                if isinstance(change, TruncateEvent):
                    (sink.stream_truncate if streaming else sink.truncate)(txn, wrapped)
                elif isinstance(change, MessageEvent):
                    (sink.stream_message if streaming else sink.message)(txn, wrapped)
                else:
                    sink.internal(txn, wrapped)
        if run:
            sink.changes(txn, run)
        if spec is not None:  # a pending speculative insertion never confirmed
            release(spec[0], spec[2])
        toast.reset(state)
        if not was_streamed:
            stats.total_txns += 1
        if streaming:
            if started:
                sink.stream_stop(txn, last_lsn)
        elif txn.prepared:
            sink.prepare(txn, commit_lsn)
            txn.prepare_sent = True
        else:
            sink.commit(txn, commit_lsn)

    def _apply(
        self, txn: ReorderBufferTXN, change: HeapChange, toast: _ToastState, streaming: bool
    ) -> None:
        wrapped = ReplayChange(change, toast.mapping())
        if streaming:
            self._state.sink.stream_change(txn, wrapped)
        else:
            self._state.sink.change(txn, wrapped)

    def replay(
        self,
        txn: ReorderBufferTXN,
        commit_lsn: int,
        end_lsn: int,
        commit_time: int,
        origin: int | None,
    ) -> None:
        """ReorderBufferReplay, up to its cleanup: stream the rest, or replay it whole.

        The caller (the buffer) then forgets txn unless `txn.prepared`: a decoded
        prepare is kept, truncated, until COMMIT/ROLLBACK PREPARED.
        """
        sink = self._state.sink
        txn.final_lsn = commit_lsn
        txn.end_lsn = end_lsn
        txn.commit_time = commit_time
        txn.origin = origin
        if txn.streamed:
            self.stream_txn(txn)  # ReorderBufferStreamCommit
            if txn.prepared:
                sink.stream_prepare(txn, commit_lsn)
                txn.prepare_sent = True
                self._truncate_txn(txn)
            else:
                sink.stream_commit(txn, commit_lsn)
            return
        if not txn.has_base:
            return
        self._process_txn(txn, streaming=False, commit_lsn=commit_lsn)
        if txn.prepared:
            self._truncate_txn(txn)


class _Pending:
    """A spill reader with the rest of an InsertRows record that `_restore` split: that
    rest comes first, then the reader's next records."""

    __slots__ = ("reader", "rest")

    def __init__(self, reader: Iterator[object]) -> None:
        self.reader = reader
        self.rest: InsertRows | None = None

    def __iter__(self) -> _Pending:
        return self

    def __next__(self) -> object:
        rest = self.rest
        if rest is not None:
            self.rest = None
            return rest
        return next(self.reader)


class _ToastState:
    """Per-replay TOAST chunks (the ReorderBufferToastEnt hash), held until reset."""

    __slots__ = ("_cached", "_chunks", "_held", "_last_seq", "held")

    def __init__(self) -> None:
        self._chunks: dict[int, bytearray] = {}
        self._last_seq: dict[int, int] = {}
        self._held: list[tuple[ReorderBufferTXN, int]] = []
        self._cached: Mapping[int, bytes] | None = None
        # Whether any chunk arrived since the last reset: without one, `mapping` is
        # EMPTY_TOAST and `reset` has nothing to do (the replay loop asks per change).
        self.held = False

    def append(self, owner: ReorderBufferTXN, change: HeapChange, size: int) -> None:
        """ReorderBufferToastAppendChunk: chunks of one value arrive in seq order."""
        chunk_id, seq, data = toast_chunk(change)
        last = self._last_seq.get(chunk_id)
        expected = 0 if last is None else last + 1
        if seq != expected:
            raise DecodeError(
                f"got sequence entry {seq} for toast chunk {chunk_id} instead of seq {expected}",
                lsn=change.lsn,
                xid=change.xid,
            )
        if last is None:
            self._chunks[chunk_id] = bytearray(data)
        else:
            self._chunks[chunk_id] += data
        self._last_seq[chunk_id] = seq
        self._held.append((owner, size))
        self._cached = None
        self.held = True

    def export(self) -> list[tuple[int, int, bytes]]:
        """The held values as (chunk_id, last chunk_seq, data so far), in the order
        they came: where the native collection (`HeapRows.toast_replay`) goes on."""
        return [(k, self._last_seq[k], bytes(v)) for k, v in self._chunks.items()]

    def take_over(
        self, owner: ReorderBufferTXN, values: list[tuple[int, int, bytes]], sizes: list[int]
    ) -> None:
        """Hold `values` (as `export` gives them) instead of what is held now, and
        `sizes`, more accounted chunks of owner's, until the next reset: where the
        native collection (`HeapRows.toast_replay`) stopped."""
        self._chunks = {k: bytearray(v) for k, _, v in values}
        self._last_seq = {k: seq for k, seq, _ in values}
        self._held.extend((owner, size) for size in sizes)
        self._cached = None
        self.held = bool(self._held)

    def mapping(self) -> Mapping[int, bytes]:
        if not self._chunks:
            return EMPTY_TOAST
        if self._cached is None:
            self._cached = MappingProxyType({k: bytes(v) for k, v in self._chunks.items()})
        return self._cached

    def reset(self, state: ReorderBufferState) -> None:
        """ReorderBufferToastReset: free the chunks (and their accounted memory)."""
        if self._held:
            for owner, size in self._held:
                state.release(owner, size)
            self._held.clear()
        self._chunks.clear()
        self._last_seq.clear()
        self._cached = None
        self.held = False
