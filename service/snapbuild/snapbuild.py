"""Snapshot builder: when decoding is consistent, and which transactions are emitted.

This mirrors the state machine of PostgreSQL's snapbuild.c, reduced to what pgcdc needs.
PostgreSQL also builds historic MVCC snapshots of its catalog here; pgcdc does not read
the catalog under a historic snapshot (see `service.schema.history`, which keeps table
definitions versioned by LSN instead), so this module tracks no committed catalog xids.
What it keeps is exactly what decides *which transactions are emitted*:

- `state`, driven only by `RUNNING_XACTS` (`process_running_xacts`, as
  SnapBuildProcessRunningXacts / SnapBuildFindSnapshot):

      START --running_xacts #1--> BUILDING_SNAPSHOT --#2, xacts of #1 done--> FULL_SNAPSHOT
        |                             |                                          |
        +--- running_xacts with no running transactions (oldest == next) -------+--> CONSISTENT
                                                  FULL_SNAPSHOT --xacts of #2 done--^

  `next_phase_at` is the `nextXid` recorded at the last phase change: a phase is
  complete once a later record's `oldestRunningXid` is not before it.
- `start_decoding_at`: commits whose commit record *starts* before this LSN are never
  emitted (SnapBuildXactNeedsSkip). It starts at the LSN the caller gives (0 for a
  fresh start, the confirmed LSN on restart) and is pushed past every commit seen while
  not yet CONSISTENT (SnapBuildCommitTxn), and past the consistent point itself.

Caller protocol (the decoder, as decode.c):

1. Every `RunningXactsEvent` goes to `process_running_xacts` first, then the caller
   calls the reorder buffer's `abort_old(ev.oldest_running_xid)`.
2. Before `decodes_changes` is true (state < FULL_SNAPSHOT), heap, HEAP2, logical
   message and XACT records are not handed to the reorder buffer at all (only their xid
   is registered), exactly as DecodeHeapOp/DecodeXactOp bail out.
3. A heap change or transactional message of `xid` at `lsn` is queued only if
   `process_change(xid, lsn)` is true (SnapBuildProcessChange). A non-transactional
   message is emitted only if `message_allowed(lsn)`.
4. On a commit record: `commit(xid, lsn)` first (SnapBuildCommitTxn), then
   `xact_needs_skip(lsn)` (with the commit record's start LSN) decides between the
   reorder buffer's `commit` and `forget` (DecodeTXNNeedSkip's LSN rule).

Guarantee, which follows from the above and which the tests check: a transaction is
emitted only if it commits after the consistent point *and* after the start LSN, and
then every change of it (and of its subtransactions) was queued, because every
transaction with an xid before `next_phase_at` of FULL_SNAPSHOT has finished (so has
committed, and been skipped) before CONSISTENT is reached. Nothing partial is emitted;
nothing committed at or before the start point is emitted.

Restarting from stored offsets uses `SnapBuilder.restored(confirmed_lsn)`: consistent at
once, emitting every transaction whose commit record starts at or after the confirmed
LSN (the end LSN of the last published commit). The caller must resume reading at a
restart LSN no later than the first LSN of every transaction not yet published.

Pure: no I/O. xids are compared modulo 2**32 as TransactionIdPrecedes does.
"""

from __future__ import annotations

from collections.abc import Callable
from enum import IntEnum

from service.decode.events import RunningXactsEvent
from service.errors import DecodeError

_XID_MASK = 0xFFFFFFFF
FIRST_NORMAL_XID = 3


class SnapState(IntEnum):
    """`SnapBuildState` (snapbuild.h), with the same values."""

    START = -1
    BUILDING_SNAPSHOT = 0
    FULL_SNAPSHOT = 1
    CONSISTENT = 2


def xid_precedes(a: int, b: int) -> bool:
    """True if xid `a` is logically before `b` (TransactionIdPrecedes).

    Permanent xids (< 3) are compared as plain integers, normal ones modulo 2**32.
    """
    if a < FIRST_NORMAL_XID or b < FIRST_NORMAL_XID:
        return a < b
    diff = (a - b) & _XID_MASK
    return diff >= 0x80000000


class SnapBuilder:
    """The snapshot-builder state machine of one decoding session."""

    __slots__ = (
        "_committed_running",
        "_consistent_at",
        "_next_phase_at",
        "_start_decoding_at",
        "_state",
        "_visible",
    )

    def __init__(self, start_lsn: int = 0) -> None:
        """A builder for a fresh start; commits starting before `start_lsn` are skipped."""
        self._state = SnapState.START
        # Invariant: 0 unless state is BUILDING_SNAPSHOT or FULL_SNAPSHOT, where it is the
        # nextXid of the RUNNING_XACTS record that started the phase.
        self._next_phase_at = 0
        # Invariant: never decreases.
        self._start_decoding_at = start_lsn
        # LSN of the record at which CONSISTENT was reached (None before).
        self._consistent_at: int | None = None
        # With a data snapshot taken at the consistent point: its visibility test. A
        # transaction visible in it is already in that snapshot and is never emitted.
        self._visible: Callable[[int], bool] | None = None
        # Until CONSISTENT: the xids whose commit record was decoded but which the last
        # RUNNING_XACTS record still listed as running (or committed after it); at the
        # consistent point, those still listed there (`must_see`).
        self._committed_running: set[int] = set()

    @classmethod
    def restored(cls, confirmed_lsn: int) -> SnapBuilder:
        """A builder resuming from stored offsets: consistent at once.

        Every transaction whose commit record starts at or after `confirmed_lsn` is
        emitted; everything before it was published already.
        """
        builder = cls(confirmed_lsn)
        builder._state = SnapState.CONSISTENT
        builder._consistent_at = confirmed_lsn
        return builder

    # --- state ---------------------------------------------------------------------

    @property
    def state(self) -> SnapState:
        return self._state

    @property
    def is_consistent(self) -> bool:
        return self._state == SnapState.CONSISTENT

    @property
    def decodes_changes(self) -> bool:
        """Whether changes and xact records are decoded at all (state >= FULL_SNAPSHOT)."""
        return self._state >= SnapState.FULL_SNAPSHOT

    @property
    def next_phase_at(self) -> int:
        return self._next_phase_at

    @property
    def start_decoding_at(self) -> int:
        return self._start_decoding_at

    @property
    def consistent_at(self) -> int | None:
        """The LSN of the RUNNING_XACTS record that made decoding consistent."""
        return self._consistent_at

    # --- RUNNING_XACTS -------------------------------------------------------------

    def process_running_xacts(self, ev: RunningXactsEvent) -> bool:
        """Advance the state machine (SnapBuildProcessRunningXacts/SnapBuildFindSnapshot).

        Returns True if the state changed. Once consistent, records change nothing here;
        the caller still passes `ev.oldest_running_xid` to the reorder buffer's
        `abort_old`.
        """
        if self._state == SnapState.CONSISTENT:
            return False
        lsn = ev.lsn
        # Committed in the WAL, yet still in the proc array when this record was logged.
        self._committed_running.intersection_update(ev.xids)
        if ev.oldest_running_xid == ev.next_xid:
            # (a) nothing was running: everything after this record is decodable.
            if self._start_decoding_at <= lsn:
                self._start_decoding_at = lsn + 1
            self._become_consistent(lsn)
            return True
        match self._state:
            case SnapState.START:
                # (c) wait for the transactions running now to finish.
                self._state = SnapState.BUILDING_SNAPSHOT
                self._next_phase_at = ev.next_xid
                return True
            case SnapState.BUILDING_SNAPSHOT:
                if xid_precedes(ev.oldest_running_xid, self._next_phase_at):
                    return False
                # Every transaction starting from here on is seen whole.
                self._state = SnapState.FULL_SNAPSHOT
                self._next_phase_at = ev.next_xid
                return True
            case SnapState.FULL_SNAPSHOT:
                if xid_precedes(ev.oldest_running_xid, self._next_phase_at):
                    return False
                # The partially seen transactions have all finished.
                if self._start_decoding_at <= lsn:
                    self._start_decoding_at = lsn + 1
                self._become_consistent(lsn)
                return True
            case _:
                raise DecodeError(f"snapshot builder in unknown state {self._state!r}", lsn=lsn)

    def _become_consistent(self, lsn: int) -> None:
        self._state = SnapState.CONSISTENT
        self._next_phase_at = 0
        self._consistent_at = lsn

    # --- per-record gates ----------------------------------------------------------

    def process_change(self, xid: int, lsn: int) -> bool:
        """May a change of `xid` at `lsn` be queued? (SnapBuildProcessChange)

        False before FULL_SNAPSHOT, and for transactions that began before the full
        snapshot (their earlier changes were not collected) until CONSISTENT.
        `lsn` is not needed for the decision; it is taken for symmetry with PostgreSQL
        and for error context.
        """
        del lsn
        if self._state < SnapState.FULL_SNAPSHOT:
            return False
        return not (self._state < SnapState.CONSISTENT and xid_precedes(xid, self._next_phase_at))

    def message_allowed(self, lsn: int) -> bool:
        """May a non-transactional logical message at `lsn` be emitted? (DecodeLogicalMsgOp)"""
        return self._state == SnapState.CONSISTENT and not self.xact_needs_skip(lsn)

    def commit(self, xid: int, lsn: int) -> None:
        """A commit record of `xid` starting at `lsn` (SnapBuildCommitTxn).

        While not yet consistent, pushes `start_decoding_at` past this commit, so that
        only transactions committing after the consistent point are replayed, and notes
        `xid` for `must_see`.
        """
        if self._state < SnapState.CONSISTENT:
            self._committed_running.add(xid)
            if self._start_decoding_at <= lsn:
                self._start_decoding_at = lsn + 1

    @property
    def must_see(self) -> frozenset[int]:
        """The xids a data snapshot aligned at the consistent point must see as committed.

        Transactions whose commit record lies before the consistent point are never
        emitted, yet the RUNNING_XACTS record that made decoding consistent may still
        list some of them: a backend writes its commit record before it leaves the proc
        array (RecordTransactionCommit, then ProcArrayEndTransaction; a synchronous
        standby's wait lies between). A live snapshot taken while one of them is still
        there does not see it, and its rows would be in neither the snapshot nor the
        stream. PostgreSQL's snapshot builder waits for such transactions
        (SnapBuildWaitSnapshot); the caller retakes its snapshot until it sees these.
        Empty before CONSISTENT and for a builder restored from offsets.
        """
        if self._state != SnapState.CONSISTENT:
            return frozenset()
        return frozenset(self._committed_running)

    def xact_needs_skip(self, commit_lsn: int, xid: int | None = None) -> bool:
        """Must the transaction whose commit record starts at `commit_lsn` be skipped?

        As SnapBuildXactNeedsSkip: true iff `commit_lsn < start_decoding_at`; and, once
        `skip_visible_in` installed a snapshot's visibility test, also when `xid` is
        visible in that snapshot (its effects were read with it).
        """
        if commit_lsn < self._start_decoding_at:
            return True
        return xid is not None and self.in_aligned_snapshot(xid)

    def in_aligned_snapshot(self, xid: int) -> bool:
        """Is `xid` visible in the snapshot `skip_visible_in` installed (False before)?
        A top-level xid: a snapshot's xip lists no subtransactions."""
        return self._visible is not None and self._visible(xid)

    def skip_visible_in(self, visible: Callable[[int], bool]) -> None:
        """Install the visibility test of a snapshot taken at the consistent point.

        This is how an exported snapshot lines up with the stream in PostgreSQL: every
        transaction is either visible in the snapshot (and read through it) or decoded
        from the WAL, never both and never neither. Only valid once CONSISTENT.
        """
        if self._state != SnapState.CONSISTENT:
            raise DecodeError("a data snapshot can only be aligned at the consistent point")
        self._visible = visible
