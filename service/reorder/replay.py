"""Reorder buffer replay: a transaction's changes, merged by LSN, to the sink
(ReorderBufferReplay, ReorderBufferProcessTXN, ReorderBufferIterTXNInit/Next,
ReorderBufferStreamTXN in reorderbuffer.c).

Part of the reorder buffer stage: `ReplayMixin` is a base class of
`service.reorder.buffer.ReorderBuffer`, which owns the state (transactions, memory
accounting, spill store, sink) and the module contract; this module holds the half
that takes changes out of the buffer.

Receives: a top-level `ReorderBufferTXN` at its commit or prepare (`_replay`), or when
the memory limit picks it for streaming (`_stream_txn`); its in-memory changes and
those of its known subtransactions, some possibly spilled.
Hands on, to the `ReplaySink`: `begin` (or `begin_prepare`), every change in LSN order
(a k-way heap merge over the transaction and its subtransactions, spilled ones restored
in batches), then `commit` (or `prepare`); or, streaming, `stream_start`, the changes
so far, `stream_stop`, and at the end `stream_commit` / `stream_prepare`.

Guarantees:
- Changes of one input keep their order; inputs are merged by LSN.
- TOAST: toast-relation inserts are never handed on; their chunks are collected per
  chunk_id in chunk_seq order (`_ToastState`, ReorderBufferToastAppendChunk) and
  attached to the next main-table change as `ReplayChange.toast`, and dropped after a
  change with `clear_toast_afterwards` (ReorderBufferToastReset).
- Speculative insert: SPEC_INSERT is held until SPEC_CONFIRM (handed on as INSERT) or
  SPEC_ABORT / any other change (dropped); SPEC_CONFIRM without SPEC_INSERT raises
  `DecodeError` with the LSN.
- Memory: each change is released from the accounting once handed on (TOAST chunks
  when reset); restoring from the spill store stops at `restore_batch` changes or at
  `work_mem`, and the next batch is read only when the merge needs it.
- Counters: `total_bytes`, `total_txns`, and the `stream_*` counters of `stats`, as
  described in `service.reorder.buffer`.
- Pure: no I/O except through the `SpillStore` interface.
"""

from __future__ import annotations

import dataclasses
import heapq
from collections.abc import Callable, Iterator, Mapping
from types import MappingProxyType
from typing import TYPE_CHECKING

from service.decode.events import ChangeKind, HeapChange, MessageEvent, TruncateEvent
from service.errors import DecodeError
from service.reorder.changes import EMPTY_TOAST, Change, ReplayChange, change_size, toast_chunk
from service.reorder.spill import SpillStore
from service.wal.record import RelFileLocator

if TYPE_CHECKING:
    from service.reorder.buffer import (
        ReorderBufferSettings,
        ReorderBufferStats,
        ReorderBufferTXN,
        ReplaySink,
    )

_INSERT = ChangeKind.INSERT
_SPEC_INSERT = ChangeKind.SPEC_INSERT
_SPEC_CONFIRM = ChangeKind.SPEC_CONFIRM
_SPEC_ABORT = ChangeKind.SPEC_ABORT


class ReplayMixin:
    """The replay and streaming methods of `ReorderBuffer` (its only subclass).

    The attributes and the three methods declared below belong to `ReorderBuffer`;
    they are declared here for the type checker only.
    """

    settings: ReorderBufferSettings
    stats: ReorderBufferStats
    _work_mem: int
    _sink: ReplaySink
    _spill: SpillStore
    _toast_of: Callable[[RelFileLocator], bool]
    _size: int  # accounted bytes of every change in memory
    _peak: int

    if TYPE_CHECKING:

        def _release(self, txn: ReorderBufferTXN, size: int) -> None: ...
        def _serialize_txn(self, txn: ReorderBufferTXN) -> None: ...
        def _cleanup_txn(self, txn: ReorderBufferTXN) -> None: ...

    # --- streaming ------------------------------------------------------------------

    def _stream_txn(self, txn: ReorderBufferTXN) -> None:
        """ReorderBufferStreamTXN: send what the transaction has so far."""
        if not txn.streamed and not txn.has_base:
            return
        was_streamed = txn.streamed
        stream_bytes = txn.total_size
        self._process_txn(txn, streaming=True, commit_lsn=0)
        self._truncate_txn(txn)
        txn.streamed = True
        self.stats.stream_count += 1
        self.stats.stream_bytes += stream_bytes
        if not was_streamed:
            self.stats.stream_txns += 1

    def _truncate_txn(self, txn: ReorderBufferTXN) -> None:
        """ReorderBufferTruncateTXN: drop the changes already handed on, keep the txn."""
        for sub in txn.subtxns:
            self._truncate_txn(sub)
        if txn.changes:
            size = sum(change_size(c) for c in txn.changes)
            txn.changes.clear()
            self._release(txn, size)
        if txn.serialized:
            self._spill.remove(txn.xid)
            txn.serialized = False
            txn.serialized_clear = True
        txn.spilled = 0
        txn.nentries = 0

    # --- replay ---------------------------------------------------------------------

    def _iter_txn(self, txn: ReorderBufferTXN) -> Iterator[tuple[ReorderBufferTXN, Change, int]]:
        """ReorderBufferIterTXNInit/Next: LSN-ordered k-way merge over txn and children.

        Yields (owner, change, size); the change is still accounted to its owner, and
        the consumer releases it. Restoring the next batch waits until the consumer
        resumes the iterator, so a released change never overlaps the next batch.
        """
        if txn.serialized:
            self._serialize_txn(txn)  # serialize remaining changes (all children too)
        inputs = [t for t in (txn, *txn.subtxns) if t.nentries > 0]
        readers: dict[int, Iterator[object]] = {}
        for t in inputs:
            if t.serialized:
                self._serialize_txn(t)
                readers[t.xid] = self._spill.read(t.xid, t.spilled)
        if len(inputs) == 1:
            t = inputs[0]
            changes = t.changes
            while True:
                if not changes and not (t.xid in readers and self._restore(t, readers)):
                    return
                change = changes.popleft()
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
            yield t, change, change_size(change)
            if t.changes or (t.xid in readers and self._restore(t, readers)):
                heapq.heapreplace(heap, (t.changes[0].lsn, index))
            else:
                heapq.heappop(heap)

    def _restore(self, txn: ReorderBufferTXN, readers: dict[int, Iterator[object]]) -> bool:
        """ReorderBufferRestoreChanges: load the next batch of txn's spilled changes."""
        reader = readers[txn.xid]
        limit = self.settings.restore_batch
        work_mem = self._work_mem
        top = txn.top
        loaded = 0
        for obj in reader:
            change: Change = obj  # type: ignore[assignment]
            size = change_size(change)
            txn.changes.append(change)
            txn.size += size
            top.total_size += size
            self._size += size
            self._peak = max(self._peak, self._size)
            loaded += 1
            if loaded >= limit or self._size >= work_mem:
                break
        if loaded == 0:
            del readers[txn.xid]
        return loaded > 0

    def _process_txn(self, txn: ReorderBufferTXN, streaming: bool, commit_lsn: int) -> None:
        """ReorderBufferProcessTXN: hand the transaction's changes to the sink."""
        sink = self._sink
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
        stats = self.stats
        for owner, change, size in self._iter_txn(txn):
            stats.total_bytes += size
            if streaming:
                if not started:
                    sink.stream_start(txn, change.lsn)
                    started = True
                owner.streamed = True
            last_lsn = change.lsn
            if isinstance(change, HeapChange):
                kind = change.kind
                if kind is _SPEC_CONFIRM:
                    if spec is None:
                        raise DecodeError(
                            "invalid ordering of speculative insertion changes",
                            lsn=change.lsn,
                            xid=change.xid,
                        )
                    self._release(owner, size)
                    emit = dataclasses.replace(spec[1], kind=_INSERT)
                    self._release(spec[0], spec[2])
                    spec = None
                    self._apply(txn, emit, toast, streaming)
                    if emit.clear_toast_afterwards:
                        toast.reset(self)
                elif kind is _SPEC_ABORT:
                    self._release(owner, size)
                    if spec is not None:
                        toast.reset(self)
                        self._release(spec[0], spec[2])
                        spec = None
                elif kind is _SPEC_INSERT:
                    if spec is not None:
                        self._release(spec[0], spec[2])
                    spec = (owner, change, size)
                else:
                    if change.on_toast_relation or self._toast_of(change.locator):
                        if kind is _INSERT:
                            toast.append(owner, change, size)  # held until reset
                        else:
                            self._release(owner, size)  # toast deletions are not decoded
                    else:
                        self._release(owner, size)
                        self._apply(txn, change, toast, streaming)
                        if change.clear_toast_afterwards:
                            toast.reset(self)
                    if spec is not None:  # the speculative insertion was not confirmed
                        self._release(spec[0], spec[2])
                        spec = None
            else:
                self._release(owner, size)
                wrapped = ReplayChange(change, EMPTY_TOAST)
                if isinstance(change, TruncateEvent):
                    (sink.stream_truncate if streaming else sink.truncate)(txn, wrapped)
                elif isinstance(change, MessageEvent):
                    (sink.stream_message if streaming else sink.message)(txn, wrapped)
                else:
                    sink.internal(txn, wrapped)
        if spec is not None:  # a pending speculative insertion never confirmed
            self._release(spec[0], spec[2])
        toast.reset(self)
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
            self._sink.stream_change(txn, wrapped)
        else:
            self._sink.change(txn, wrapped)

    def _replay(
        self,
        txn: ReorderBufferTXN,
        commit_lsn: int,
        end_lsn: int,
        commit_time: int,
        origin: int | None,
    ) -> None:
        """ReorderBufferReplay: stream the rest, or replay it whole."""
        txn.final_lsn = commit_lsn
        txn.end_lsn = end_lsn
        txn.commit_time = commit_time
        txn.origin = origin
        if txn.streamed:
            self._stream_txn(txn)  # ReorderBufferStreamCommit
            if txn.prepared:
                self._sink.stream_prepare(txn, commit_lsn)
                txn.prepare_sent = True
                self._truncate_txn(txn)
            else:
                self._sink.stream_commit(txn, commit_lsn)
                self._cleanup_txn(txn)
            return
        if not txn.has_base:
            if not txn.prepared:
                self._cleanup_txn(txn)
            return
        self._process_txn(txn, streaming=False, commit_lsn=commit_lsn)
        if txn.prepared:
            self._truncate_txn(txn)
        else:
            self._cleanup_txn(txn)


class _ToastState:
    """Per-replay TOAST chunks (the ReorderBufferToastEnt hash), held until reset."""

    __slots__ = ("_cached", "_chunks", "_held", "_last_seq")

    def __init__(self) -> None:
        self._chunks: dict[int, bytearray] = {}
        self._last_seq: dict[int, int] = {}
        self._held: list[tuple[ReorderBufferTXN, int]] = []
        self._cached: Mapping[int, bytes] | None = None

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

    def mapping(self) -> Mapping[int, bytes]:
        if not self._chunks:
            return EMPTY_TOAST
        if self._cached is None:
            self._cached = MappingProxyType({k: bytes(v) for k, v in self._chunks.items()})
        return self._cached

    def reset(self, rb: ReplayMixin) -> None:
        """ReorderBufferToastReset: free the chunks (and their accounted memory)."""
        if self._held:
            for owner, size in self._held:
                rb._release(owner, size)
            self._held.clear()
        self._chunks.clear()
        self._last_seq.clear()
        self._cached = None
