"""The xmin the physical slot holds for the unchanged-TOAST fill (issue 32).

The fill may read a TOAST value from its table long after the UPDATE that referenced
it, and a later transaction may have deleted that value since (the row was deleted, or
the value replaced). VACUUM removes such chunks once their deleting xid is older than
every xmin the server must respect; the physical slot's xmin, set by hot-standby
feedback (`connectors.postgres.stream`, XLogWalRcvSendHSFeedback on a standby), is one
of them. This stage says which xmin to send.

Receives: every RUNNING_XACTS record decoded, in WAL order (`observe`: its LSN and
`oldestRunningXid`, with the monotonic time it was decoded), and the LSN up to which
every transaction is published each time Kafka confirms one (`confirm`). Hands on
(`xmin(now)`): the oldest running xid of the newest RUNNING_XACTS at or before the
confirmed LSN, or, before one such is known, the oldest observed. A value an unpublished
event needs is referenced by a transaction that commits after the confirmed LSN; a
transaction deleting it must update that very row version, so it waits for that commit
and commits after the confirmed LSN too: it was running at that RUNNING_XACTS record or
began after it, and its xid is at or above the xmin held. VACUUM keeps the chunks such
a transaction deleted (GetOldestNonRemovableTransactionId respects the slot's xmin).
Replays from the restart LSN after a restart skip what was confirmed, so they need no
more.

Before the first RUNNING_XACTS at or before the confirmed LSN is known (at start, the
restart LSN may lie well before the next such record), `assume(xid)` gives the hold a
start: an xid the caller knows to be no newer than any xid that may still delete a
value an unpublished event needs (connectors.postgres.toast.SqlToastSource.start_xmin:
the hold a previous run left on the slot, else the database's datfrozenxid, which no
unremoved dead tuple's deleter precedes). It counts as a horizon at LSN 0, so it gives
way, as any horizon does, once the confirmed LSN passes a RUNNING_XACTS record: a
deleter that committed before the first record decoded need not be running at it.

Cap: an xmin held for longer than `max_hold_s` (since its record was decoded) is
released: `xmin` returns None (the feedback then clears the slot's xmin) until the
confirmed position reaches a record decoded within the cap; `released` counts the
releases. Values VACUUM removes meanwhile fall back to the placeholder (counted by the
fill). Memory: one entry per RUNNING_XACTS record not yet confirmed past. Pure: the
caller passes the time.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass


@dataclass(slots=True, frozen=True)
class _Horizon:
    lsn: int  # the RUNNING_XACTS record's LSN
    xid: int  # its oldestRunningXid (32 bits)
    seen: float  # monotonic seconds when it was decoded


class XminHold:
    """See the module docstring. Invariant: `_horizons` is in LSN order, and only its
    first entry may be at or before the confirmed LSN."""

    __slots__ = ("_confirmed", "_horizons", "_was_released", "max_hold_s", "released")

    def __init__(self, max_hold_s: float) -> None:
        self.max_hold_s = max_hold_s
        self._horizons: deque[_Horizon] = deque()
        self._confirmed = 0
        self._was_released = False
        self.released = 0  # times the cap released the hold

    def observe(self, lsn: int, oldest_running_xid: int, now: float) -> None:
        """A RUNNING_XACTS record at `lsn` was decoded at `now`."""
        last = self._horizons[-1] if self._horizons else None
        if last is not None and (lsn <= last.lsn or last.xid == oldest_running_xid):
            return  # nothing newer to hold (a replayed record, or the same horizon)
        self._horizons.append(_Horizon(lsn, oldest_running_xid, now))
        self._trim()

    def assume(self, xid: int, now: float) -> None:
        """Hold `xid` until a RUNNING_XACTS record at or before the confirmed LSN is
        known (module docstring); only before anything was observed."""
        if not self._horizons:
            self._horizons.append(_Horizon(0, xid, now))

    def confirm(self, confirmed_lsn: int) -> None:
        """Every transaction committed before `confirmed_lsn` is published for good."""
        self._confirmed = max(self._confirmed, confirmed_lsn)
        self._trim()

    def _trim(self) -> None:
        horizons = self._horizons
        while len(horizons) > 1 and horizons[1].lsn <= self._confirmed:
            horizons.popleft()

    def xmin(self, now: float) -> int | None:
        """The xmin to hold now, or None for no hold (none known, or past the cap)."""
        if not self._horizons:
            return None
        first = self._horizons[0]
        if now - first.seen > self.max_hold_s:
            if not self._was_released:
                self._was_released = True
                self.released += 1
            return None
        self._was_released = False
        return first.xid

    @property
    def holding_since(self) -> float | None:
        """When the record of the xmin held was decoded (None: nothing held)."""
        return self._horizons[0].seen if self._horizons else None


def epoch_of(xid: int, next_full_xid: int) -> int:
    """The epoch of a 32-bit xid in the recent past of `next_full_xid` (as
    TransactionIdInRecentPast expects it in hot-standby feedback)."""
    epoch = next_full_xid >> 32
    if xid > next_full_xid & 0xFFFFFFFF:
        epoch -= 1
    return max(epoch, 0)
