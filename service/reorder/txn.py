"""Reorder buffer transactions, and the state the buffer shares with its replayer.

Part of the reorder buffer stage; the stage's contract (what it receives, hands on and
guarantees) is the docstring of `service.reorder.buffer`. This module holds what
`ReorderBuffer` (`service.reorder.buffer`) and `Replayer` (`service.reorder.replay`)
both use, so that neither imports the other's module for it:

- `ReorderBufferTXN`, one (sub)transaction (ReorderBufferTXN in reorderbuffer.h);
- `ReplaySink`, the callbacks the changes are handed to (the plugin wrappers);
- `ReorderBufferSettings` and `ReorderBufferStats` (pg_stat_replication_slots);
- `ReorderBufferState`, the one object both are handed: the settings, the sink, the
  spill store, the toast test, the counters, and the memory accounting (`size`,
  `peak`, `release`) with the spill that keeps it under `work_mem` (`serialize_txn`,
  ReorderBufferSerializeTXN), which the buffer calls at its memory limit and the
  replayer before it reads a spilled transaction back.

`service.reorder.buffer` re-exports the first four as part of its public API.
Pure: no I/O except through the `SpillStore` interface.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from service.decode.events import HeapChange, InsertRows, Invalidation
from service.reorder.changes import Change, ReplayChange, held
from service.reorder.spill import SpillStore
from service.wal.record import RelFileLocator


@dataclass(slots=True, eq=False)
class ReorderBufferTXN:
    """One (sub)transaction (ReorderBufferTXN).

    Invariants: `changes` holds the in-memory changes in LSN order, all later than the
    ones on disk; `nentries` counts both, as changes (an InsertRows entry as its rows),
    while `spilled` counts the records in the spill file (an InsertRows may be one).
    `size` is the accounted size of `changes` (plus changes taken out at replay and
    still held); `total_size`, on a top-level transaction, is that summed over it and
    its subtransactions. A known subtransaction has `toptxn` set and sits in its
    parent's `subtxns`, never in the top-level list.
    """

    xid: int
    first_lsn: int
    toptxn: ReorderBufferTXN | None = None
    subtxns: list[ReorderBufferTXN] = field(default_factory=list)
    final_lsn: int = 0  # commit/prepare/abort LSN once known
    end_lsn: int = 0
    commit_time: int = 0  # TimestampTz (prepare time until COMMIT PREPARED)
    origin: int | None = None
    gid: str | None = None
    has_catalog_changes: bool = False
    invalidations: list[Invalidation] = field(default_factory=list)
    base_snapshot: object | None = None  # filled by the snapshot builder
    has_changes: bool = False  # a change was ever queued here (or in a child, for a top)
    serialized: bool = False  # has changes on disk (RBTXN_IS_SERIALIZED)
    serialized_clear: bool = False  # was serialized before a streamed run
    streamed: bool = False  # part of it went to the sink through stream callbacks
    prepared: bool = False  # decoded as two-phase (RBTXN_PREPARE)
    prepare_sent: bool = False  # begin_prepare..prepare (or stream_prepare) was called
    skipped_prepare: bool = False
    has_toast_insert: bool = False  # toast chunks queued, main row not yet (partial)
    has_spec_insert: bool = False  # SPEC_INSERT queued, not yet confirmed (partial)
    changes: deque[Change] = field(default_factory=deque)
    nentries: int = 0
    spilled: int = 0  # records (not changes) in this xid's spill file
    size: int = 0
    total_size: int = 0

    @property
    def is_known_subxact(self) -> bool:
        return self.toptxn is not None

    @property
    def top(self) -> ReorderBufferTXN:
        """The top-level transaction (itself if it is one)."""
        return self.toptxn if self.toptxn is not None else self

    @property
    def has_base(self) -> bool:
        """Whether there is anything to decode (ReorderBufferReplay's base_snapshot test)."""
        return self.base_snapshot is not None or self.has_changes


class ReplaySink(Protocol):
    """The callbacks the reorder buffer calls (the plugin wrappers implement these)."""

    can_stream: bool
    decode_at_prepare: bool

    def begin(self, txn: ReorderBufferTXN) -> None: ...
    def change(self, txn: ReorderBufferTXN, change: ReplayChange) -> None: ...
    # A run of consecutive main-table changes with no TOAST chunks held: the same as
    # `change(txn, ReplayChange(c, EMPTY_TOAST))` for each, in order.
    def changes(self, txn: ReorderBufferTXN, changes: list[HeapChange] | InsertRows) -> None: ...
    def truncate(self, txn: ReorderBufferTXN, change: ReplayChange) -> None: ...
    def message(self, txn: ReorderBufferTXN | None, change: ReplayChange) -> None: ...
    def internal(self, txn: ReorderBufferTXN, change: ReplayChange) -> None: ...
    def commit(self, txn: ReorderBufferTXN, commit_lsn: int) -> None: ...
    def stream_start(self, txn: ReorderBufferTXN, first_lsn: int) -> None: ...
    def stream_change(self, txn: ReorderBufferTXN, change: ReplayChange) -> None: ...
    def stream_truncate(self, txn: ReorderBufferTXN, change: ReplayChange) -> None: ...
    def stream_message(self, txn: ReorderBufferTXN, change: ReplayChange) -> None: ...
    def stream_stop(self, txn: ReorderBufferTXN, last_lsn: int) -> None: ...
    def stream_abort(self, txn: ReorderBufferTXN, abort_lsn: int, subxid: int | None) -> None: ...
    def stream_commit(self, txn: ReorderBufferTXN, commit_lsn: int) -> None: ...
    def stream_prepare(self, txn: ReorderBufferTXN, prepare_lsn: int) -> None: ...
    def begin_prepare(self, txn: ReorderBufferTXN) -> None: ...
    def prepare(self, txn: ReorderBufferTXN, prepare_lsn: int) -> None: ...
    def commit_prepared(self, txn: ReorderBufferTXN, commit_lsn: int) -> None: ...
    def rollback_prepared(self, txn: ReorderBufferTXN, end_lsn: int, prepare_time: int) -> None: ...


@dataclass(slots=True, frozen=True)
class ReorderBufferSettings:
    """`work_mem`: bytes of buffered changes before eviction (logical_decoding_work_mem).
    `restore_batch`: most changes restored from disk at once per merge input (a
    spilled InsertRows, one record, counts as its rows: where a batch ends inside it,
    the rest waits, read but not yet accounted, for the next batch; at most one run of
    1024 WAL records per merge input, see `service.reorder.replay`).
    `change_overhead`: bytes each change held in memory costs beyond its accounted size
    (ReorderBufferChangeSize), counted against `work_mem` only: the Python objects of a
    decoded change (`PYTHON_CHANGE_OVERHEAD`, measured). 0, the default, makes every
    spill and stream decision PostgreSQL's at the same logical_decoding_work_mem; the
    worker sets it so that `work_mem` bounds the process's real memory (issue 12)."""

    work_mem: int = 64 * 1024 * 1024
    restore_batch: int = 4096
    change_overhead: int = 0


# What a decoded heap change held in the buffer costs in Python beyond its accounted
# size: the HeapChange and RawTuple objects, the tuple's bytes header, its int fields
# and the deque slot. Measured with tracemalloc on 50,000 queued 5-column inserts
# (247 bytes per change); RSS grew by ~263 bytes per change more than accounted.
PYTHON_CHANGE_OVERHEAD = 256


@dataclass(slots=True)
class ReorderBufferStats:
    """The pg_stat_replication_slots counters, cumulative since construction."""

    spill_txns: int = 0
    spill_count: int = 0
    spill_bytes: int = 0
    stream_txns: int = 0
    stream_count: int = 0
    stream_bytes: int = 0
    total_txns: int = 0
    total_bytes: int = 0


@dataclass(slots=True, eq=False)
class ReorderBufferState:
    """What `ReorderBuffer` and its `Replayer` share; one per buffer.

    Invariants: `size` is the accounted size (`change_size`) of every change the buffer
    holds in memory, in a transaction's `changes` or taken out at replay and not yet
    released: the sum of the top-level transactions' `total_size`. `count` is how many
    such changes there are (each costs `settings.change_overhead` more, see `held`).
    `peak` is the highest `size` reached. Whoever adds a change to a transaction's
    `changes` adds its size to the transaction's `size`, the top-level `total_size`
    and `size`, adds one to `count` and raises `peak`; whoever lets go of it calls
    `release`. `stats` is the object the buffer exposes as `ReorderBuffer.stats`.
    """

    settings: ReorderBufferSettings
    sink: ReplaySink
    spill: SpillStore
    toast_of: Callable[[RelFileLocator], bool]  # is this relfilenode a toast relation?
    stats: ReorderBufferStats = field(default_factory=ReorderBufferStats)
    size: int = 0
    peak: int = 0
    count: int = 0

    @property
    def held(self) -> int:
        """What the memory limit compares with `work_mem`: the accounted size plus each
        held change's overhead (equal to `size` when `change_overhead` is 0)."""
        return self.size + self.count * self.settings.change_overhead

    def release(self, txn: ReorderBufferTXN, size: int, count: int = 1) -> None:
        """ReorderBufferChangeMemoryUpdate (subtracting): `count` changes of txn's,
        `size` bytes accounted, are gone."""
        txn.size -= size
        txn.top.total_size -= size
        self.size -= size
        self.count -= count

    def serialize_txn(self, txn: ReorderBufferTXN) -> None:
        """ReorderBufferSerializeTXN: spill its (and its children's) in-memory changes.

        Every (sub)transaction visited is flagged, even with nothing to write, and
        spill_txns skips a flagged one later, as PostgreSQL does (pg_stat_replication_slots
        agrees; tests/integration/test_reorderbuffer_spill_txns_vs_pg.py shows it). An
        InsertRows entry may be written as one record (`service.reorder.spill`, tag 2):
        `spilled` grows by the records written, the state's `count` falls by the changes
        held (`held`); spill_count and spill_bytes are the same either way.
        """
        for sub in txn.subtxns:
            self.serialize_txn(sub)
        if txn.changes:
            size = txn.size
            # The store may write an InsertRows entry as one record for all its rows:
            # `spilled` counts the file's records (what `read` needs), while the state's
            # `count` (and `nentries`, unchanged) count the changes they stand for.
            _, count = held(txn.changes)
            txn.spilled += self.spill.write(txn.xid, txn.changes)
            txn.changes.clear()
            self.release(txn, size, count)
            self.stats.spill_count += 1
            self.stats.spill_bytes += size
            if not (txn.serialized or txn.serialized_clear):
                self.stats.spill_txns += 1
        txn.serialized = True
