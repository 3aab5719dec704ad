"""Property tests of DBLog's watermark window (service.tablesnap.watermark).

A model database of a few keys runs random transactions while chunks of it are read
between low and high watermarks, in random interleavings, with transactions whose
commit record precedes their visibility (the proc-array race) and overlapping windows.
Snapshots are made as GetSnapshotData makes them (xmax and xip; module `Sim.snapshot`).
The events a consumer sees (stream changes at their commits, kept chunk rows at each
high watermark) are replayed per key; whatever the interleaving, the replay must equal
the model's final state, and no key may be read (op r) twice.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from hypothesis import given, settings
from hypothesis import strategies as st

from service.tablesnap.watermark import WindowTracker

TABLE = 1
KEYS = 12
FIRST_XID = 100
XMAX_ALL = 1 << 20  # past every xid a test commits: all completed


@dataclass
class Txn:
    xid: int
    ops: dict[int, int | None]  # key -> new value (None: delete)
    commit: int  # WAL position of the commit record
    visible: int  # from this tick on, snapshots see it (>= commit)


@dataclass
class Sim:
    """The model's timeline: transactions and chunk windows on one clock."""

    initial: dict[int, int]
    txns: list[Txn] = field(default_factory=list)

    def state_at(self, tick: int) -> dict[int, int]:
        """What an MVCC snapshot taken at `tick` sees."""
        state = dict(self.initial)
        for t in self.txns:  # commit order; same-key txns are serialized by row locks
            if t.visible <= tick:
                for k, v in t.ops.items():
                    if v is None:
                        state.pop(k, None)
                    else:
                        state[k] = v
        return state

    def snapshot(self, tick: int) -> tuple[set[int], int]:
        """(xip, xmax) of a snapshot taken at `tick`, as GetSnapshotData makes them:
        xmax is the newest completed xid + 1, and xip holds only the running xids below
        it. A transaction between its commit record and its visibility whose xid is
        the newest is therefore not in xip, only at or past xmax."""
        done = [t.xid for t in self.txns if t.visible <= tick]
        xmax = max(done, default=FIRST_XID - 1) + 1
        running = {t.xid for t in self.txns if t.visible > tick and t.xid < xmax}
        return running, xmax

    def final(self) -> dict[int, int]:
        return self.state_at(1 << 30)


@st.composite
def scenarios(draw: st.DrawFn) -> tuple[Sim, list[tuple[int, int, int, int, int]]]:
    """A random history plus chunk windows (lo, hi, low tick, read tick, high tick)."""
    initial = {k: -k for k in range(KEYS) if draw(st.booleans())}
    sim = Sim(initial)
    clock = 0
    last_visible = dict.fromkeys(range(KEYS), 0)
    for xid in range(FIRST_XID, FIRST_XID + draw(st.integers(0, 25))):
        keys = draw(st.sets(st.integers(0, KEYS - 1), min_size=1, max_size=3))
        # A row lock: a transaction touching k starts after the previous one on k ended.
        clock = max(clock, *(last_visible[k] for k in keys)) + draw(st.integers(1, 3))
        ops = {k: draw(st.one_of(st.none(), st.integers(0, 999))) for k in keys}
        visible = clock + draw(st.sampled_from([0, 0, 0, 1, 2, 5]))
        sim.txns.append(Txn(xid, ops, clock, visible))
        for k in keys:
            last_visible[k] = visible
    horizon = clock + 10
    # A partition of the keys into ranges, each read once in a random window.
    cuts = sorted(draw(st.sets(st.integers(1, KEYS - 1), max_size=4)))
    bounds = list(zip([0, *cuts], [*cuts, KEYS], strict=True))
    chunks = []
    for lo, hi in bounds:
        low = draw(st.integers(0, horizon))
        read = low + draw(st.integers(1, 6))
        high = read + draw(st.integers(1, 6))
        chunks.append((lo, hi, low, read, high))
    return sim, chunks


def run(sim: Sim, chunks: list[tuple[int, int, int, int, int]]) -> list[tuple[str, int, object]]:
    """Feed the tracker in WAL order; return the consumer's events (op, key, value)."""
    tracker = WindowTracker()
    # WAL positions: commit records at their tick; a low watermark just after its tick
    # (+0.5), the read after that (+0.6), the high watermark after it (+0.75).
    wal: list[tuple[float, str, object]] = [(t.commit, "commit", t) for t in sim.txns]
    for n, (_lo, _hi, low, _read, high) in enumerate(chunks):
        wal.append((low + 0.5, "low", n))
        wal.append((high + 0.75, "high", n))
    wal.sort(key=lambda e: (e[0], e[1] != "commit"))
    out: list[tuple[str, int, object]] = []
    reads: dict[int, tuple[list[tuple[int, tuple[int, int]]], tuple[set[int], int]]] = {}
    retries: list[tuple[int, int]] = []
    for _pos, kind, item in wal:
        if kind == "commit":
            assert isinstance(item, Txn)
            for k, v in item.ops.items():
                tracker.change(TABLE, [k])
                out.append(("d" if v is None else "u", k, v))
            tracker.commit(item.xid)
            continue
        assert isinstance(item, int)
        lo, hi, _low, read, _high = chunks[item]
        if kind == "low":
            tracker.low(str(item), TABLE, keyed=True)
            # The read's snapshot (taken after the low watermark, at `read`).
            state = sim.state_at(read)
            rows = [(k, (k, v)) for k, v in sorted(state.items()) if lo <= k < hi]
            reads[item] = (rows, sim.snapshot(read))
        else:
            rows, (xip, xmax) = reads.pop(item)
            outcome = tracker.high(str(item), rows, xip, xmax)
            if outcome.retry is not None:
                retries.append((lo, hi))
                continue
            out.extend(("r", k, v) for k, v in outcome.kept)
    # Retried chunks are read again once the history is over (no window conflicts).
    end = max([t.visible for t in sim.txns] + [0]) + 1
    for n, (lo, hi) in enumerate(retries):
        tracker.low(f"retry{n}", TABLE, keyed=True)
        state = sim.state_at(end)
        rows = [(k, (k, v)) for k, v in sorted(state.items()) if lo <= k < hi]
        xip, xmax = sim.snapshot(end)
        outcome = tracker.high(f"retry{n}", rows, xip, xmax)
        assert outcome.retry is None
        out.extend(("r", k, v) for k, v in outcome.kept)
    return out


def replay(events: list[tuple[str, int, object]]) -> tuple[dict[int, object], list[int]]:
    state: dict[int, object] = {}
    read_twice: list[int] = []
    read: set[int] = set()
    for op, k, v in events:
        if op == "d":
            state.pop(k, None)
        else:
            state[k] = v
        if op == "r":
            if k in read:
                read_twice.append(k)
            read.add(k)
    return state, read_twice


@settings(max_examples=400, deadline=None)
@given(scenarios())
def test_stream_wins_and_replay_equals_final_state(
    scenario: tuple[Sim, list[tuple[int, int, int, int, int]]],
) -> None:
    """Whatever the interleaving of transactions (some visible only after their commit
    record) and chunk windows, replaying stream events plus kept chunk rows gives the
    final state of every key, and no key is read twice."""
    sim, chunks = scenario
    state, read_twice = replay(run(sim, chunks))
    assert state == sim.final()
    assert not read_twice


def test_late_visible_commit_before_low_forces_retry() -> None:
    """A transaction whose commit record precedes the low watermark but which the
    chunk's snapshot did not see (it was in xip) makes the chunk be read again."""
    tracker = WindowTracker()
    tracker.change(TABLE, [3])
    tracker.commit(500)
    tracker.low("c", TABLE, keyed=True)
    outcome = tracker.high("c", [(3, "stale")], {500}, 501)
    assert outcome.retry is not None and outcome.kept == []


def test_newest_commit_before_low_at_or_past_xmax_forces_retry() -> None:
    """The race with a transaction that is not in xip: it is the newest xid, so no xid
    at or past it had completed when the snapshot was taken (xmax = latestCompletedXid
    + 1 <= its xid, GetSnapshotData), and xip leaves it out. Its commit record precedes
    the low watermark: the chunk is read again."""
    tracker = WindowTracker()
    tracker.change(TABLE, [3])
    tracker.commit(500)
    tracker.low("c", TABLE, keyed=True)
    outcome = tracker.high("c", [(3, "stale")], set(), 500)
    assert outcome.retry is not None and "500" in outcome.retry and outcome.kept == []
    # Completed before the snapshot (xmax past it): the read saw it, nothing to redo.
    tracker.low("d", TABLE, keyed=True)
    assert tracker.high("d", [(3, "row")], set(), 501).kept == ["row"]
    # Past xmax but committed inside the window: the window's key check covers it.
    tracker.low("e", TABLE, keyed=True)
    tracker.change(TABLE, [3])
    tracker.commit(501)
    outcome = tracker.high("e", [(3, "row"), (4, "four")], set(), 501)
    assert outcome.retry is None and outcome.kept == ["four"]


def test_xmax_comparison_wraps_around() -> None:
    """xids compare modulo 2^32 (TransactionIdPrecedes): a commit of xid 2^32 - 10 is
    below a snapshot xmax of 5 taken after the counter wrapped, and at or past it
    otherwise."""
    tracker = WindowTracker()
    tracker.change(TABLE, [1])
    tracker.commit(2**32 - 10)
    tracker.low("c", TABLE, keyed=True)
    assert tracker.high("c", [(1, "row")], set(), 5).retry is None
    tracker.low("d", TABLE, keyed=True)
    assert tracker.high("d", [(1, "row")], set(), 2**32 - 20).retry is not None


def test_in_progress_xid_of_another_table_does_not_retry() -> None:
    """The race check looks only at transactions that changed the chunk's table."""
    tracker = WindowTracker()
    tracker.change(2, [3])
    tracker.commit(500)
    tracker.low("c", TABLE, keyed=True)
    outcome = tracker.high("c", [(3, "row")], {500}, 501)
    assert outcome.retry is None and outcome.kept == ["row"]


def test_keyless_change_in_window_retries_and_truncate_drops_all() -> None:
    """A keyless table's change inside the window means a re-read; a TRUNCATE inside a
    keyed table's window drops every row read."""
    tracker = WindowTracker()
    tracker.low("k", TABLE, keyed=False)
    tracker.change(TABLE, None)
    tracker.commit(1)
    assert tracker.high("k", [(None, "x")], set(), 2).retry is not None
    tracker.low("t", TABLE, keyed=True)
    tracker.truncate(TABLE)
    tracker.commit(2)
    outcome = tracker.high("t", [(1, "a"), (2, "b")], set(), 3)
    assert outcome.kept == [] and outcome.dropped == 2 and outcome.retry is None


def test_ring_is_bounded() -> None:
    """The recent-commit ring keeps at most ring_size transactions."""
    tracker = WindowTracker(ring_size=10)
    for xid in range(1, 100):
        tracker.change(TABLE, [xid])
        tracker.commit(xid)
    tracker.low("c", TABLE, keyed=True)
    # xid 5 fell out of the ring: not detected (documented limit); xid 95 is detected.
    assert tracker.high("c", [], {5}, 100).retry is None
    tracker.low("d", TABLE, keyed=True)
    assert tracker.high("d", [], {95}, 100).retry is not None


def test_unchanged_toast_of_a_dropped_row_is_filled_from_the_chunk_row() -> None:
    """Values are (v, big); position 1 unchanged in an UPDATE. Key 1: one such update in
    the window: filled from the chunk row. Key 2: a full update, then one leaving big
    unchanged: merged, nothing to fill. Key 3: key changed to 30 by an update leaving
    big unchanged: filled from key 3's chunk row. Key 4: deleted: nothing."""
    t = WindowTracker()
    t.low("c", TABLE, keyed=True)
    t.change(TABLE, [1], new_key=1, values=["v1", "?"], missing=[1])
    t.change(TABLE, [2], new_key=2, values=["v2", "b2-new"], missing=[])
    t.change(TABLE, [2], new_key=2, values=["v2b", "?"], missing=[1])
    t.change(TABLE, [30, 3], old_key=3, new_key=30, values=["v3", "?"], missing=[1])
    t.change(TABLE, [4], new_key=4, values=["v4", "?"], missing=[1])
    t.change(TABLE, [4], old_key=4)
    t.commit(100)
    rows = [(k, f"row{k}") for k in (1, 2, 3, 4, 5)]
    out = t.high("c", rows, (), XMAX_ALL)
    assert out.kept == ["row5"] and out.dropped == 4
    assert out.filled == [
        (["v1", "?"], frozenset({1}), "row1"),
        (["v3", "?"], frozenset({1}), "row3"),
    ]
    t.low("d", TABLE, keyed=True)
    t.change(TABLE, [2], new_key=2, values=["v2c", "?"], missing=[1])
    t.truncate(TABLE)
    t.commit(101)
    assert t.high("d", [(2, "row2")], (), XMAX_ALL).filled == []


def test_quiet_window_needs_no_keys_and_keeps_every_row() -> None:
    """A window in which no key of its table changed does not need the rows' keys
    (`needs_keys` False) and keeps every row whatever key it is given; once a key
    changes inside it, the keys are needed and the changed row is dropped."""
    tracker = WindowTracker()
    tracker.low("q", TABLE, keyed=True)
    tracker.change(2, [7])  # another table
    tracker.commit(1)
    assert not tracker.needs_keys("q")
    assert tracker.high("q", [(None, "a"), (None, "b")], set(), XMAX_ALL).kept == ["a", "b"]
    tracker.low("c", TABLE, keyed=True)
    tracker.change(TABLE, [7])
    tracker.commit(2)
    assert tracker.needs_keys("c")
    assert tracker.high("c", [(6, "a"), (7, "b")], set(), XMAX_ALL).kept == ["a"]
