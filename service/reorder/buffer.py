"""The reorder buffer: reassembles transactions from WAL order (reorderbuffer.c).

Receives, in WAL order, from the decoder driver: every record's xid (`process_xid`),
subtransaction assignments (`assign_child`, from block 252 or XLOG_XACT_ASSIGNMENT),
the decoded changes of each (sub)transaction (`queue_change`: `HeapChange`,
`TruncateEvent`, transactional `MessageEvent`, or an `InternalChange` from the
snapshot/schema stage; `queue_run`: an InsertRun's plain inserts as one `InsertRows`,
queued as its rows would be one by one but held as few entries, its rows still in the
native core), catalog-change marks and invalidations, and the transaction
ends: `commit`, `abort`, `forget`, `prepare`, `finish_prepared`, and `abort_old` for
RUNNING_XACTS.

Hands on, to a `ReplaySink`, whole transactions in commit order: `begin`, then the
changes of the transaction and of its surviving subtransactions merged by LSN (a k-way
heap merge, as ReorderBufferIterTXNInit/Next), then `commit`. Aborted, forgotten and
timed-out transactions produce no callback (except `stream_abort` for what was already
streamed). Non-transactional messages are handed on at once.

Guarantees:

- **Ordering.** Within a transaction, changes come out in LSN order; changes of one
  multi-insert record (same LSN) keep their order. Transactions come out in the order
  their commit (or prepare) records are handed in.
- **Memory.** Every buffered change is accounted with `change_size` (a stable estimate
  shaped like ReorderBufferChangeSize: 80 bytes per change, plus 47 bytes and the data
  length per tuple, plus the prefix, payload and 16 bytes for a message, 4 bytes per
  truncated relation, or the stated size of an internal change). Whenever the total,
  plus `settings.change_overhead` per change held (0 unless the caller bounds real
  memory, see `ReorderBufferSettings`), reaches `work_mem`, the buffer evicts until
  it is below it again (ReorderBufferCheckMemoryLimit): it streams the largest complete top-level
  transaction if the sink can stream and `consistent` is set, otherwise it spills the
  largest (sub)transaction to the `SpillStore`. So while changes are queued, the total
  never exceeds `work_mem` plus one change. At replay, spilled changes are restored in
  batches of at most `restore_batch` changes and stop once the total reaches
  `work_mem`; each spilled merge input needs at least its head change, so replay
  stays within `work_mem` plus one change per spilled input, plus the TOAST chunks of
  the one row being reassembled. (A spilled InsertRows is one record: where a batch
  ends inside it, the rest of its rows waits unaccounted, in native form, for the next
  batch: at most one InsertRun per spilled input, see `service.reorder.replay`.)
- **TOAST.** Changes to a toast relation (`HeapChange.on_toast_relation`, or
  `toast_of(locator)` for the records that carry no such flag) are never handed on. At
  replay their chunks are collected per chunk_id in chunk_seq order
  (ReorderBufferToastAppendChunk) and attached, as raw concatenated chunk data (still
  compressed if the value was), to the next main-table change as `ReplayChange.toast`;
  they are dropped after a change with `clear_toast_afterwards`. A toast pointer whose
  chunk_id is absent from `toast` is a value the change did not log: unchanged.
- **Speculative insert.** A SPEC_INSERT is held until SPEC_CONFIRM (then handed on as
  an INSERT) or SPEC_ABORT (dropped), as ReorderBufferProcessTXN does.
- **Counters** (`stats`) follow pg_stat_replication_slots: `spill_count` counts each
  spill of a (sub)transaction that wrote something, `spill_bytes` the size of what was
  spilled, and `spill_txns` such a spill of a (sub)transaction not yet flagged
  `serialized` or `serialized_clear`. As in ReorderBufferSerializeTXN, a spill flags
  every (sub)transaction it visits (a top-level one visits all its known children),
  written or empty, and a streamed run turns `serialized` into `serialized_clear`
  (ReorderBufferTruncateTXN); so a child that was empty when its parent spilled is
  never counted, and `spill_txns` can be less than the number of xids written;
  `stream_txns`, `stream_count`, `stream_bytes` count streamed runs alike (a run also
  happens at the commit of a streamed transaction, as in ReorderBufferStreamCommit;
  `stream_bytes` counts the in-memory part, as PostgreSQL does); `total_txns` counts
  top-level transactions handed to the sink (a streamed one once), `total_bytes` the
  size of every change taken out of the buffer for the sink, streamed or spilled.
- **Errors.** An unknown change type, a SPEC_CONFIRM without a SPEC_INSERT or a
  malformed toast chunk raises `DecodeError` with the LSN. Spill I/O errors come from
  the store as `SpillFileError`.

Layout: this module holds the transaction table (by xid, top-level ones in first_lsn
order), queueing, the memory limit and the transaction ends. `ReorderBufferTXN`, the
`ReplaySink` protocol, the settings and stats (re-exported here), and
`ReorderBufferState`, the settings, sink, spill store, counters and memory accounting
(with ReorderBufferSerializeTXN) that the buffer shares with its replayer, live in
`service.reorder.txn`. The change types, `change_size` and `toast_chunk` live in
`service.reorder.changes`. Replay, the k-way merge, TOAST reassembly and streaming live
in `service.reorder.replay`: a `Replayer` the buffer holds, handed the same state; it
hands transactions on, and the buffer forgets them after (ReorderBufferCleanupTXN).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from service.decode.events import (
    ChangeKind,
    HeapChange,
    InsertRows,
    Invalidation,
    MessageEvent,
    TruncateEvent,
)
from service.errors import ConfigError, DecodeError
from service.reorder.changes import (
    CHANGE_OVERHEAD,
    EMPTY_TOAST,
    TUPLE_OVERHEAD,
    Change,
    InternalChange,
    ReplayChange,
    change_size,
    held,
)
from service.reorder.replay import Replayer
from service.reorder.spill import SpillStore
from service.reorder.txn import (
    PYTHON_CHANGE_OVERHEAD,
    ReorderBufferSettings,
    ReorderBufferState,
    ReorderBufferStats,
    ReorderBufferTXN,
    ReplaySink,
)
from service.wal.record import RelFileLocator

__all__ = [
    "PYTHON_CHANGE_OVERHEAD",
    "ReorderBuffer",
    "ReorderBufferSettings",
    "ReorderBufferStats",
    "ReorderBufferTXN",
    "ReplaySink",
    "xid_precedes",
]


def xid_precedes(a: int, b: int) -> bool:
    """TransactionIdPrecedes: modulo-2^32 comparison for normal xids (>= 3)."""
    if a < 3 or b < 3:
        return a < b
    diff = (a - b) & 0xFFFFFFFF
    return diff >= 0x80000000


# --- the buffer ---------------------------------------------------------------------

_INSERT = ChangeKind.INSERT
_UPDATE = ChangeKind.UPDATE
_SPEC_INSERT = ChangeKind.SPEC_INSERT
_SPEC_CONFIRM = ChangeKind.SPEC_CONFIRM
_SPEC_ABORT = ChangeKind.SPEC_ABORT


class ReorderBuffer:
    """Transactions by xid, with memory accounting and spill; replay and streaming are
    its `Replayer`'s, which shares its `ReorderBufferState`."""

    def __init__(
        self,
        settings: ReorderBufferSettings,
        sink: ReplaySink,
        spill: SpillStore,
        toast_of: Callable[[RelFileLocator], bool],
    ) -> None:
        if settings.work_mem < 1 or settings.restore_batch < 1:
            raise ConfigError("work_mem and restore_batch must be positive", field="reorder_buffer")
        self.settings = settings
        self._state = ReorderBufferState(settings, sink, spill, toast_of)
        # The state's own objects, never rebound, kept at hand for the hot path.
        self._work_mem = settings.work_mem
        self._overhead = settings.change_overhead
        self._sink = sink
        self._spill = spill
        self._toast_of = toast_of
        self._replayer = Replayer(self._state)
        self.consistent = False  # set by the snapshot builder; streaming needs it
        self.stats = self._state.stats  # the same object: the replayer counts into it
        self._by_xid: dict[int, ReorderBufferTXN] = {}
        self._toplevel: dict[int, ReorderBufferTXN] = {}  # in first_lsn order
        self._last_xid = 0
        self._last_txn: ReorderBufferTXN | None = None

    # --- introspection ------------------------------------------------------------

    @property
    def memory_bytes(self) -> int:
        return self._state.size

    @property
    def peak_memory_bytes(self) -> int:
        return self._state.peak

    @property
    def held_bytes(self) -> int:
        """What the memory limit counts: `memory_bytes` plus the settings'
        `change_overhead` for each change held in memory."""
        return self._state.held

    @property
    def held_changes(self) -> int:
        """How many changes are held in memory (each costs `change_overhead`)."""
        return self._state.count

    @property
    def txn_count(self) -> int:
        return len(self._by_xid)

    @property
    def txns_with_changes(self) -> int:
        """Transactions (top-level or sub) holding queued changes, in memory or spilled:
        unlike `txn_count`, not those only known by an xid seen in the WAL (another
        database's transaction still running, say)."""
        return sum(1 for t in self._by_xid.values() if t.nentries)

    def get_txn(self, xid: int) -> ReorderBufferTXN | None:
        """The transaction for xid, if the buffer knows it."""
        return self._by_xid.get(xid)

    def restart_lsn(self) -> int | None:
        """The first_lsn of the oldest top-level transaction in progress, if any."""
        for txn in self._toplevel.values():
            return txn.first_lsn
        return None

    # --- transaction lookup -------------------------------------------------------

    def _lookup(self, xid: int) -> ReorderBufferTXN | None:
        if xid == self._last_xid and self._last_txn is not None:
            return self._last_txn
        return self._by_xid.get(xid)

    def _txn_by_xid(self, xid: int, lsn: int, as_top: bool = True) -> ReorderBufferTXN:
        """ReorderBufferTXNByXid with create=true and the one-entry cache."""
        if xid == self._last_xid and self._last_txn is not None:
            return self._last_txn
        txn = self._by_xid.get(xid)
        if txn is None:
            if xid == 0:
                raise DecodeError("change without a transaction id", lsn=lsn)
            txn = ReorderBufferTXN(xid=xid, first_lsn=lsn)
            self._by_xid[xid] = txn
            if as_top:
                self._toplevel[xid] = txn
        self._last_xid = xid
        self._last_txn = txn
        return txn

    def set_toast_of(self, toast_of: Callable[[RelFileLocator], bool]) -> None:
        """Replace the toast check (the same answers, a cheaper callable)."""
        self._toast_of = toast_of
        self._state.toast_of = toast_of

    def process_xid(self, xid: int, lsn: int) -> None:
        """ReorderBufferProcessXid: note the first LSN at which xid appears."""
        # _txn_by_xid's one-entry cache, tested here first: most records repeat the xid
        if xid != 0 and (xid != self._last_xid or self._last_txn is None):
            self._txn_by_xid(xid, lsn)

    def assign_child(self, xid: int, subxid: int, lsn: int) -> None:
        """ReorderBufferAssignChild: subxid is a subtransaction of top-level xid."""
        top = self._txn_by_xid(xid, lsn)
        sub = self._by_xid.get(subxid)
        if sub is None:
            sub = self._txn_by_xid(subxid, lsn, as_top=False)
        elif sub.toptxn is not None:
            return
        else:
            if sub.subtxns:
                raise DecodeError(
                    f"xid {subxid} has subtransactions and cannot become one", lsn=lsn
                )
            self._toplevel.pop(subxid, None)
        sub.toptxn = top
        top.subtxns.append(sub)
        # Its changes now count against the parent (they were its own as a top-level).
        top.total_size += sub.size
        sub.total_size = 0
        top.has_changes |= sub.has_changes
        top.has_toast_insert |= sub.has_toast_insert
        top.has_spec_insert |= sub.has_spec_insert
        top.has_catalog_changes |= sub.has_catalog_changes
        top.invalidations.extend(sub.invalidations)
        sub.invalidations.clear()
        # ReorderBufferTransferSnapToParent
        if top.base_snapshot is None and sub.base_snapshot is not None:
            top.base_snapshot = sub.base_snapshot
        sub.base_snapshot = None

    def _commit_child(self, xid: int, subxid: int, commit_lsn: int, end_lsn: int) -> None:
        """ReorderBufferCommitChild."""
        sub = self._by_xid.get(subxid)
        if sub is None:
            return
        sub.final_lsn = commit_lsn
        sub.end_lsn = end_lsn
        self.assign_child(xid, subxid, commit_lsn)

    def set_base_snapshot(self, xid: int, lsn: int, snapshot: object) -> None:
        """ReorderBufferSetBaseSnapshot (on the top-level transaction if known)."""
        txn = self._txn_by_xid(xid, lsn).top
        if txn.base_snapshot is None:
            txn.base_snapshot = snapshot

    def set_has_catalog_changes(self, xid: int, lsn: int) -> None:
        """ReorderBufferXidSetCatalogChanges."""
        txn = self._txn_by_xid(xid, lsn)
        txn.has_catalog_changes = True
        txn.top.has_catalog_changes = True

    def add_invalidations(self, xid: int, lsn: int, invals: Sequence[Invalidation]) -> None:
        """ReorderBufferAddInvalidations: accumulate on the top-level transaction."""
        self._txn_by_xid(xid, lsn).top.invalidations.extend(invals)

    # --- queueing -----------------------------------------------------------------

    def queue_change(self, xid: int, lsn: int, change: Change) -> None:
        """ReorderBufferQueueChange: add a change, then enforce the memory limit."""
        txn = self._txn_by_xid(xid, lsn)
        kind = type(change)
        toast_insert = False
        if kind is HeapChange:
            assert isinstance(change, HeapChange)
            toast_insert = change.kind is _INSERT and (
                change.on_toast_relation or self._toast_of(change.locator)
            )
        elif kind is not TruncateEvent and kind is not MessageEvent and kind is not InternalChange:
            raise DecodeError(f"reorder buffer cannot queue a {kind.__name__}", lsn=lsn, xid=xid)
        size = change_size(change)
        txn.changes.append(change)
        txn.nentries += 1
        txn.has_changes = True
        txn.size += size
        top = txn.toptxn if txn.toptxn is not None else txn
        top.has_changes = True
        top.total_size += size
        state = self._state
        state.size += size
        state.count += 1
        state.peak = max(state.peak, state.size)
        if self._sink.can_stream:
            self._process_partial_change(txn, top, change, toast_insert)
        if state.size + state.count * self._overhead >= self._work_mem:
            self._check_memory_limit()

    def queue_run(self, xid: int, lsn: int, inserts: InsertRows) -> None:
        """`queue_change` of each of `inserts` in turn: an InsertRun's plain inserts of
        one relation (not a toast relation) and the TOAST chunk inserts among them
        (`inserts.chunks`: each a change of its own, sized as any insert), or its
        updates or deletes (each row sized as its change: one tuple, an UPDATE's new
        and old ones, or none for the bare deletes among a delete or update run's
        `chunks`, its `bares`), the first logged at `lsn`. The
        transaction is looked up and the toast check made once; the memory limit is
        still enforced after each change, as ReorderBufferQueueChange does. The rows up
        to each point where it is enforced are queued as one entry (a window of
        `inserts`), accounted as the changes they stand for."""
        if self._sink.can_stream or self._toast_of(inserts.locator):
            for change in inserts:
                self.queue_change(xid, change.lsn, change)
            return
        txn = self._txn_by_xid(xid, lsn)
        top = txn.toptxn if txn.toptxn is not None else txn
        state = self._state
        work_mem, overhead = self._work_mem, self._overhead
        base = CHANGE_OVERHEAD + TUPLE_OVERHEAD
        txn.has_changes = top.has_changes = True
        rows = inserts.rows
        at, n = 0, inserts.nrows
        while at < n:
            # The rows from `at` up to the first whose queueing reaches the limit
            # (state.held: the accounted size plus the per-change overhead), added at
            # once; the limit is then checked where queue_change would check it.
            room = work_mem - state.size - state.count * overhead
            end, added = rows.fill(at, room, base, overhead, TUPLE_OVERHEAD)
            txn.changes.append(inserts if at == 0 and end == n else inserts.window(at, end))
            txn.nentries += end - at
            txn.size += added
            top.total_size += added
            state.size += added
            state.count += end - at
            state.peak = max(state.peak, state.size)
            if state.size + state.count * overhead >= work_mem:
                self._check_memory_limit()
            at = end

    def _process_partial_change(
        self, txn: ReorderBufferTXN, top: ReorderBufferTXN, change: Change, toast_insert: bool
    ) -> None:
        """ReorderBufferProcessPartialChange: a toast or speculative row in progress
        cannot be streamed; once complete, a spilled transaction is streamed at once."""
        if isinstance(change, HeapChange):
            kind = change.kind
            if toast_insert:
                top.has_toast_insert = True
            elif (
                top.has_toast_insert
                and kind in (_INSERT, _UPDATE, _SPEC_INSERT)
                and change.clear_toast_afterwards
            ):
                top.has_toast_insert = False
            if kind is _SPEC_INSERT:
                top.has_spec_insert = True
            elif kind is _SPEC_CONFIRM or kind is _SPEC_ABORT:
                top.has_spec_insert = False
        if (
            self._can_start_streaming()
            and not (top.has_toast_insert or top.has_spec_insert)
            and txn.serialized
        ):
            self._replayer.stream_txn(top)

    def queue_message_nontransactional(self, xid: int, lsn: int, message: MessageEvent) -> None:
        """ReorderBufferQueueMessage(transactional=false): handed on at once."""
        txn = self._txn_by_xid(xid, lsn) if xid != 0 else None
        self._sink.message(txn, ReplayChange(message, EMPTY_TOAST))

    # --- memory limit: spill and stream ---------------------------------------------

    def _can_start_streaming(self) -> bool:
        return self.consistent and self._sink.can_stream

    def _check_memory_limit(self) -> None:
        """ReorderBufferCheckMemoryLimit: evict until under work_mem (the accounted
        size plus the settings' per-change overhead, `ReorderBufferState.held`)."""
        state = self._state
        while state.held >= self._work_mem:
            txn = self._largest_streamable_top() if self._can_start_streaming() else None
            if txn is not None:
                self._replayer.stream_txn(txn)
            else:
                state.serialize_txn(self._largest_txn())

    def _largest_txn(self) -> ReorderBufferTXN:
        """ReorderBufferLargestTXN: the (sub)transaction with the most memory."""
        return max(self._by_xid.values(), key=_txn_size)

    def _largest_streamable_top(self) -> ReorderBufferTXN | None:
        """ReorderBufferLargestStreamableTopTXN: complete, decodable, non-empty."""
        largest: ReorderBufferTXN | None = None
        for txn in self._toplevel.values():
            if (
                txn.total_size > 0
                and txn.has_base
                and not (txn.has_toast_insert or txn.has_spec_insert)
                and (largest is None or txn.total_size > largest.total_size)
            ):
                largest = txn
        return largest

    # --- transaction ends ---------------------------------------------------------

    def commit(
        self,
        xid: int,
        commit_lsn: int,
        end_lsn: int,
        commit_time: int,
        *,
        origin: int | None = None,
        subxids: Sequence[int] = (),
    ) -> None:
        """ReorderBufferCommitChild for each surviving subxid, then ReorderBufferCommit."""
        for subxid in subxids:
            self._commit_child(xid, subxid, commit_lsn, end_lsn)
        txn = self._lookup(xid)
        if txn is None:
            return
        self._replay(txn, commit_lsn, end_lsn, commit_time, origin)

    def prepare(
        self,
        xid: int,
        prepare_lsn: int,
        end_lsn: int,
        prepare_time: int,
        *,
        gid: str,
        origin: int | None = None,
        subxids: Sequence[int] = (),
    ) -> None:
        """ReorderBufferRememberPrepareInfo + ReorderBufferPrepare.

        With `sink.decode_at_prepare`, the transaction is handed on now
        (begin_prepare..prepare, or stream_prepare) and kept until COMMIT/ROLLBACK
        PREPARED; otherwise only the prepare information is kept.
        """
        for subxid in subxids:
            self._commit_child(xid, subxid, prepare_lsn, end_lsn)
        txn = self._lookup(xid)
        if txn is None:
            return
        txn.gid = gid
        txn.final_lsn = prepare_lsn
        txn.end_lsn = end_lsn
        txn.commit_time = prepare_time
        txn.origin = origin
        if not self._sink.decode_at_prepare or txn.skipped_prepare:
            return
        txn.prepared = True
        self._replay(txn, prepare_lsn, end_lsn, prepare_time, origin)

    def skip_prepared(self, xid: int) -> None:
        """ReorderBufferSkipPrepare: the prepare is not decoded (decode it at commit)."""
        txn = self._lookup(xid)
        if txn is not None:
            txn.skipped_prepare = True

    def finish_prepared(
        self,
        xid: int,
        commit_lsn: int,
        end_lsn: int,
        commit_time: int,
        *,
        is_commit: bool,
        origin: int | None = None,
        subxids: Sequence[int] = (),
    ) -> None:
        """ReorderBufferFinishPrepared (COMMIT PREPARED / ROLLBACK PREPARED).

        Without `decode_at_prepare` this is a plain commit (or an abort). With it,
        a transaction whose prepare was not decoded is decoded now, then
        commit_prepared; rollback_prepared is sent only for a decoded prepare.
        """
        if not self._sink.decode_at_prepare:
            if is_commit:
                self.commit(xid, commit_lsn, end_lsn, commit_time, origin=origin, subxids=subxids)
            else:
                for subxid in subxids:
                    self.abort(subxid, commit_lsn)
                self.abort(xid, commit_lsn)
            return
        txn = self._lookup(xid)
        if txn is None:
            return
        if is_commit and not txn.prepare_sent:
            txn.prepared = True
            if txn.final_lsn == 0:
                txn.final_lsn, txn.end_lsn, txn.commit_time = commit_lsn, end_lsn, commit_time
            self._replay(txn, txn.final_lsn, txn.end_lsn, txn.commit_time, txn.origin)
        prepare_end_lsn = txn.end_lsn
        prepare_time = txn.commit_time
        txn.final_lsn = commit_lsn
        txn.end_lsn = end_lsn
        txn.commit_time = commit_time
        txn.origin = origin
        if txn.prepare_sent:
            if is_commit:
                self._sink.commit_prepared(txn, commit_lsn)
            else:
                self._sink.rollback_prepared(txn, prepare_end_lsn, prepare_time)
        elif txn.streamed:
            self._sink.stream_abort(txn, commit_lsn, None)
        self._cleanup_txn(txn)

    def abort(self, xid: int, lsn: int) -> None:
        """ReorderBufferAbort: drop a (sub)transaction; stream_abort what was streamed."""
        txn = self._lookup(xid)
        if txn is None:
            return
        if txn.streamed:
            sub = txn.xid if txn.toptxn is not None else None
            self._sink.stream_abort(txn.top, lsn, sub)
        txn.final_lsn = lsn
        self._cleanup_txn(txn)

    def forget(self, xid: int, lsn: int) -> None:
        """ReorderBufferForget: drop a committed transaction we are not interested in."""
        self.abort(xid, lsn)

    def abort_old(self, oldest_running_xid: int) -> None:
        """ReorderBufferAbortOld: drop top-level transactions older than any running.

        Walks the top-level transactions in first_lsn order and stops at the first
        one still possibly running. A streamed one gets stream_abort with LSN 0
        (InvalidXLogRecPtr: there is no abort record).
        """
        for txn in list(self._toplevel.values()):
            if not xid_precedes(txn.xid, oldest_running_xid):
                return
            if txn.streamed:
                self._sink.stream_abort(txn, 0, None)
            self._cleanup_txn(txn)

    def _replay(
        self,
        txn: ReorderBufferTXN,
        commit_lsn: int,
        end_lsn: int,
        commit_time: int,
        origin: int | None,
    ) -> None:
        """ReorderBufferReplay: the replayer hands the transaction on (or streams the
        rest), then the buffer forgets it, unless it is a decoded prepare, which is kept
        until COMMIT/ROLLBACK PREPARED."""
        self._replayer.replay(txn, commit_lsn, end_lsn, commit_time, origin)
        if not txn.prepared:
            self._cleanup_txn(txn)

    def _cleanup_txn(self, txn: ReorderBufferTXN) -> None:
        """ReorderBufferCleanupTXN: forget txn and its children, memory and disk."""
        subs = txn.subtxns
        txn.subtxns = []
        for sub in subs:
            self._cleanup_txn(sub)
        if txn.changes:
            self._state.release(txn, *held(txn.changes))
            txn.changes.clear()
        if txn.toptxn is not None:
            parent = txn.toptxn
            if txn in parent.subtxns:
                parent.subtxns.remove(txn)
        else:
            self._toplevel.pop(txn.xid, None)
        self._by_xid.pop(txn.xid, None)
        if self._last_xid == txn.xid:
            self._last_xid = 0
            self._last_txn = None
        if txn.serialized or txn.spilled:
            self._spill.remove(txn.xid)
            txn.serialized = False
            txn.spilled = 0

    def close(self) -> None:
        """Forget everything and delete all spill files (ReorderBufferFree)."""
        self._by_xid.clear()
        self._toplevel.clear()
        self._last_xid = 0
        self._last_txn = None
        self._state.size = 0
        self._state.count = 0
        self._spill.close()


def _txn_size(txn: ReorderBufferTXN) -> int:
    return txn.size
