"""DBLog's watermark window: which rows of a snapshot chunk the stream overrides.

A chunk of table T is read while the stream keeps flowing (DBLog, as Debezium's
incremental snapshots and Flink CDC do it):

1. the snapshotter writes a *low* watermark into the WAL (a logical message);
2. it takes a fresh MVCC snapshot S and reads the chunk's rows in it;
3. it writes a *high* watermark;
4. when decoding reaches the high watermark, the chunk's rows are published there, in
   stream order, minus every row whose key a transaction committed between the two
   watermarks changed: that transaction's event, already published, is at least as
   new as the row read, so the stream's change wins.

This module is that bookkeeping, and nothing else: `WindowTracker` receives, in WAL
order, what the decoder replays (`change` per row change with its key(s), `truncate`,
`commit` per transaction, as the output plugin sees them at commit), plus `low` and
`high` for the watermarks, and says at `high` which chunk rows survive. It does no I/O
and knows nothing of PostgreSQL's types: keys and rows are opaque hashables / values.

The one race the textbook method misses. A transaction's commit record enters the
WAL before the transaction leaves PostgreSQL's proc array (XLogFlush, and with
synchronous replication SyncRepWaitForLSN, lie between the two in
RecordTransactionCommit). So a transaction X can commit *before* the low watermark in
the WAL and still be invisible to S, which is taken after it: X's event was published
before the window opened, and S's stale row would overwrite it. Such an X is in S's
`xip` (it was running when S was taken). `high` therefore also receives S's in-progress
xids, and the tracker remembers the xids (and tables) of the last `ring_size` commits:
if one of S's in-progress xids committed before the low watermark and changed T, the
chunk is not published but re-read (`Outcome.retry`).

S's xip alone does not name every such X. GetSnapshotData sets xmax to
latestCompletedXid + 1 and leaves out of xip every running xid at or past it: they
are invisible all the same (XidInMVCCSnapshot). X is often the newest xid there is (a
single writer's next transaction), so while it waits between its commit record and
the proc array, no xid at or past its own has completed, and X is not in xip. A
commit before the low watermark whose xid is at or past S's xmax is therefore such an
X as well. Every transaction that completed before S has an xid below S's xmax, so
this never re-reads a chunk that was read correctly. The tracker keeps the newest
committed xid, so `high` looks through the ring for these only when the newest xid
committed before the window is at or past S's xmax.

(A commit older than the ring, which means one stuck between its commit record and
the proc array for more than `ring_size` later commits, is not detected: documented,
not guessed away.)

Tables without a usable key (chunked by CTID): any change of T inside the window, or
a TRUNCATE of T, makes every row suspect (`all_changed`), and the chunk is re-read.
The stream gives no key, and pgcdc's decoded changes carry no TID, so the window cannot
be narrowed to the chunk's pages: under constant writes every read would be re-read
again. DBLog and Debezium require a key (or a surrogate one) for this reason. pgcdc
bounds the re-reads instead: after `KEYLESS_OPTIMISTIC_READS` (connectors.tablesnap.snapshotter)
the chunk is read under a SHARE lock of T, whose window no change of T can enter
(connectors.tablesnap.chunks, `ChunkReader._locked`).
A TRUNCATE of a keyed table drops every row read so far; rows inserted after it in the
window are dropped by key like any other change.

Unchanged TOAST. An UPDATE that leaves a TOASTed value unchanged logs only the rest of
the row: its event carries a placeholder for that column (Debezium's
`__debezium_unavailable_value`), and a consumer keeps the value it had. A row the
window drops was never published before, so the consumer has no value to keep, and
the row would end as the placeholder. The tracker therefore keeps, per key changed in
a window, the latest state the stream gave it (`Latest`: the values, merged over the
window's changes of that key, and the positions no change in the window logged) and
the key whose chunk row holds what is missing (the old key, across a key change). At
`high`, every such state with positions still missing whose chunk row was read is
handed back (`Outcome.filled`): the caller publishes it, the missing positions taken
from the chunk row, after the stream's event. The chunk row's value is the latest
one: no change inside the window logged that column, so none changed it, and a change
before the window is in S.

Memory: per open window, the set of keys changed in it and their latest states
(bounded by the stream's volume on T during one chunk read); the commit ring:
`ring_size` entries.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Collection, Hashable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from service.reorder.buffer import xid_precedes

Row = TypeVar("Row")

RING_SIZE = 65536


@dataclass(slots=True)
class Latest:
    """The latest state the stream gave one key inside a window (see Unchanged TOAST)."""

    values: list[Any]
    missing: frozenset[int]  # positions no change of the key in the window logged
    fill_key: Hashable  # whose chunk row holds the missing positions


@dataclass(slots=True)
class ChunkWindow:
    """One open window: from a chunk's low watermark to its high watermark."""

    chunk_id: str
    table: int
    keyed: bool
    # The commit sequence number when the low watermark was decoded: commits numbered
    # at or below it came before the window.
    opened_seq: int
    # The newest xid committed before the window (0: none yet).
    newest_before: int = 0
    changed: set[Hashable] = field(default_factory=set)  # keys changed inside the window
    all_changed: bool = False  # a TRUNCATE, or any change of a keyless table
    truncated: bool = False
    latest: dict[Hashable, Latest] = field(default_factory=dict)


@dataclass(slots=True)
class Outcome(Generic[Row]):
    """What `high` decided for a chunk."""

    kept: list[Row]
    dropped: int
    retry: str | None = None  # why the chunk must be read again (kept is then empty)
    # Dropped rows whose stream state lacks unchanged-TOAST values: (the stream's latest
    # values, the positions to take from the chunk row, the chunk row), in chunk order.
    filled: list[tuple[list[Any], frozenset[int], Row]] = field(default_factory=list)


class WindowTracker:
    """Open windows plus the recent-commit ring (see the module docstring)."""

    def __init__(self, ring_size: int = RING_SIZE) -> None:
        self.ring_size = ring_size
        self.commit_seq = 0
        self.newest_xid = 0  # the newest committed xid (TransactionIdPrecedes order)
        # xid -> (commit sequence number, tables it changed); oldest first.
        self._recent: OrderedDict[int, tuple[int, frozenset[int]]] = OrderedDict()
        self._open: dict[str, ChunkWindow] = {}
        self._by_table: dict[int, list[ChunkWindow]] = {}
        self._txn_tables: set[int] = set()  # tables of the transaction being replayed

    # --- the stream -------------------------------------------------------------------

    def watches(self, table: int) -> bool:
        """Does a window on `table` want the keys of its changes?"""
        return table in self._by_table

    def touch(self, table: int) -> None:
        """A row change of `table`, which no window watches (`watches` is False): what
        `change` does then, without its arguments (once per replayed row)."""
        self._txn_tables.add(table)

    def change(
        self,
        table: int,
        keys: Iterable[Hashable] | None,
        *,
        old_key: Hashable | None = None,
        new_key: Hashable | None = None,
        values: Sequence[Any] | None = None,
        missing: Collection[int] = (),
    ) -> None:
        """A row change of `table` (in a transaction being replayed at its commit).

        `keys`: the row's key before and after (one or two); None when the table has
        no key or the key cannot be told (every row of a window on it is then suspect).
        For the unchanged-TOAST fill, an INSERT or UPDATE also gives `new_key`, its new
        row's `values` and the positions among them that were `missing` (unchanged
        TOAST), and an UPDATE whose key changed its `old_key`; a DELETE gives only
        `old_key`.
        """
        self._txn_tables.add(table)
        for window in self._by_table.get(table, ()):
            if keys is None or not window.keyed:
                window.all_changed = True
                continue
            window.changed.update(keys)
            latest = window.latest
            if new_key is None or values is None:
                if old_key is not None:
                    latest.pop(old_key, None)  # deleted: its delete event is final
                continue
            prev = latest.pop(old_key, None) if old_key is not None else None
            if prev is None:
                prev = latest.get(new_key)
            gaps = frozenset(missing)
            if prev is None:
                latest[new_key] = Latest(
                    list(values), gaps, new_key if old_key is None else old_key
                )
            else:
                merged = [prev.values[i] if i in gaps else v for i, v in enumerate(values)]
                latest[new_key] = Latest(merged, gaps & prev.missing, prev.fill_key)

    def truncate(self, table: int) -> None:
        self._txn_tables.add(table)
        for window in self._by_table.get(table, ()):
            window.truncated = True
            window.latest.clear()  # rows before the TRUNCATE are gone: nothing to fill
            if not window.keyed:
                window.all_changed = True

    def commit(self, xid: int) -> None:
        """The transaction whose changes were just replayed has committed."""
        self.commit_seq += 1
        if xid:
            if not self.newest_xid or xid_precedes(self.newest_xid, xid):
                self.newest_xid = xid
            self._recent[xid] = (self.commit_seq, frozenset(self._txn_tables))
            self._recent.move_to_end(xid)
            while len(self._recent) > self.ring_size:
                self._recent.popitem(last=False)
        self._txn_tables.clear()

    # --- the watermarks ---------------------------------------------------------------

    def low(self, chunk_id: str, table: int, *, keyed: bool) -> None:
        """The chunk's low watermark was decoded: its window opens."""
        if chunk_id in self._open:
            raise ValueError(f"window {chunk_id} is already open")
        window = ChunkWindow(chunk_id, table, keyed, self.commit_seq, self.newest_xid)
        self._open[chunk_id] = window
        self._by_table.setdefault(table, []).append(window)

    def is_open(self, chunk_id: str) -> bool:
        return chunk_id in self._open

    def needs_keys(self, chunk_id: str) -> bool:
        """Does `high` for this open window read the rows' keys? Only when the stream
        changed a key of its table inside it (`changed`, or a row to fill): the rows of
        a quiet window are all kept whatever their keys, so their keys need not be
        decoded."""
        window = self._open.get(chunk_id)
        return window is None or bool(window.changed) or bool(window.latest)

    def high(
        self,
        chunk_id: str,
        rows: Sequence[tuple[Hashable, Row]],
        in_progress: Collection[int],
        xmax: int,
    ) -> Outcome[Row]:
        """The chunk's high watermark was decoded: close the window and filter `rows`.

        `rows` are (key, row) as read under S; `in_progress` and `xmax` are S's xip and
        xmax (32-bit xids).
        """
        window = self._open.pop(chunk_id, None)
        if window is None:
            raise ValueError(f"no open window {chunk_id}")
        siblings = self._by_table[window.table]
        siblings.remove(window)
        if not siblings:
            del self._by_table[window.table]
        for xid in self._unseen(window, in_progress, xmax):
            seen = self._recent.get(xid)
            if seen is not None and seen[0] <= window.opened_seq and window.table in seen[1]:
                return Outcome(
                    [], 0, f"xid {xid} committed before the low watermark but not in the read"
                )
        if window.all_changed:
            return Outcome([], 0, "the keyless table changed while the chunk was read")
        if window.truncated:
            return Outcome([], len(rows))
        changed = window.changed
        kept = [row for key, row in rows if key not in changed]
        filled: list[tuple[list[Any], frozenset[int], Row]] = []
        gaps = {st.fill_key: st for st in window.latest.values() if st.missing}
        if gaps:
            for key, row in rows:
                st = gaps.get(key)
                if st is not None:
                    filled.append((st.values, st.missing, row))
        return Outcome(kept, len(rows) - len(kept), filled=filled)

    def _unseen(
        self, window: ChunkWindow, in_progress: Collection[int], xmax: int
    ) -> Iterable[int]:
        """The xids S could not see that may have committed before the window: its xip,
        and, when the newest commit before the window is at or past S's xmax, the
        ring's xids at or past it (module docstring)."""
        newest = window.newest_before
        if not newest or xid_precedes(newest, xmax):
            return in_progress
        late = [xid for xid in self._recent if not xid_precedes(xid, xmax)]
        return [*in_progress, *late]

    def abandon(self, chunk_id: str) -> None:
        """Forget a window whose chunk will not be published (stop, or a failed read)."""
        window = self._open.pop(chunk_id, None)
        if window is not None:
            siblings = self._by_table[window.table]
            siblings.remove(window)
            if not siblings:
                del self._by_table[window.table]

    @property
    def open_windows(self) -> int:
        return len(self._open)
