"""ReorderBuffer.queue_run against queue_change of each change in turn (differential):
the same spills (what was written, when, for whom), counters, accounted sizes and peak,
and the same replay, for random runs of plain inserts between other transactions'
changes, under memory limits from one change to unlimited, with and without the
per-change overhead; toast relations and streaming sinks take queue_change's path."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from service.decode.events import ChangeKind, InsertRows
from service.errors import DecodeError
from service.reorder.buffer import ReorderBuffer
from service.reorder.replay import ROWS_ALONE, RUN_MAX
from service.wal.record import RelFileLocator
from tests.service.reorder.reorderbuffer_support import (
    MAIN,
    TOAST,
    CountingStore,
    RecordingSink,
    heap,
    insert_rows,
    make_buffer,
    toast_insert,
)

# (xid, run length, row size, relation); xids 100 and 101 interleave
_STEPS = st.lists(
    st.tuples(
        st.sampled_from([100, 101]),
        st.integers(1, 40),
        st.one_of(st.sampled_from([0, 72]), st.integers(0, 300)),  # 128 and 200 bytes
        st.sampled_from([MAIN, MAIN, MAIN, TOAST]),
    ),
    min_size=1,
    max_size=12,
)


def _state(rb: ReorderBuffer, sink: RecordingSink, store: CountingStore) -> dict[str, Any]:
    st_ = rb._state
    return {
        "held": (st_.size, st_.count, st_.peak),
        "stats": rb.stats,
        "writes": [(xid, [c.lsn for c in batch]) for xid, batch in store.writes],  # type: ignore[attr-defined]
        "txns": sorted(
            (t.xid, t.size, t.total_size, t.nentries, t.spilled) for t in rb._by_xid.values()
        ),
        "log": list(sink.log),
    }


def _run(
    tmp: Path, steps: list[Any], work_mem: int, overhead: int, stream: bool, batched: bool
) -> dict[str, Any]:
    rb, sink, store = make_buffer(
        tmp, work_mem=work_mem, change_overhead=overhead, can_stream=stream
    )
    lsn = 1000
    for xid, n, width, rel in steps:
        changes = []
        for _ in range(n):
            lsn += 10
            payload = b"x" * width
            changes.append(
                toast_insert(xid, lsn, lsn, 0, payload)
                if rel is TOAST
                else heap(xid, lsn, data=payload, locator=rel)
            )
        rb.process_xid(xid, changes[0].lsn)
        rb.set_base_snapshot(xid, changes[0].lsn, object())
        if batched:
            rb.queue_run(xid, changes[0].lsn, insert_rows(changes))
        else:
            for c in changes:
                rb.queue_change(xid, c.lsn, c)
    before = _state(rb, sink, store)
    for xid in (100, 101):
        if xid in rb._by_xid:
            lsn += 10
            rb.commit(xid, lsn, lsn + 8, commit_time=0, origin=None)
    return {"before": before, "after": _state(rb, sink, store)}


@settings(max_examples=300, deadline=None)
@given(
    steps=_STEPS,
    # 1280 and 2000: a limit reached exactly (128- and 200-byte changes, no overhead)
    work_mem=st.sampled_from([1, 200, 1280, 1500, 2000, 6000, 40_000, 1 << 30]),
    overhead=st.sampled_from([0, 80]),
    stream=st.booleans(),
)
def test_queue_run_is_queue_change_of_each(
    steps: list[Any], work_mem: int, overhead: int, stream: bool
) -> None:
    with tempfile.TemporaryDirectory() as a, tempfile.TemporaryDirectory() as b:
        one = _run(Path(a), steps, work_mem, overhead, stream, batched=False)
        run = _run(Path(b), steps, work_mem, overhead, stream, batched=True)
    assert run == one


def test_a_run_crossing_the_limit_spills_where_each_change_would() -> None:
    """A 100-insert run under a limit of a few changes: it spills mid-run, as often as
    one change at a time would, and the peak stays within the limit plus one change."""
    rel = RelFileLocator(MAIN.spc_oid, MAIN.db_oid, MAIN.rel_number)
    with tempfile.TemporaryDirectory() as d:
        rb, _sink, store = make_buffer(Path(d), work_mem=2000)
        changes = [heap(100, 1000 + 10 * i, data=b"y" * 100, locator=rel) for i in range(100)]
        rb.process_xid(100, 1000)
        rb.queue_run(100, 1000, insert_rows(changes))
        size = 80 + 47 + 101
        assert len(store.writes) == 100 // (2000 // size + 1)
        assert rb._state.peak < 2000 + size


def _replayed(tmp: Path, queue: list[tuple[str, int, Any]], batched: bool) -> dict[str, Any]:
    """Queue `queue` ((what, xid, payload) steps) into a fresh buffer, commit top-level
    xid 100, and return what the sink saw and the runs it was handed."""
    rb, sink, store = make_buffer(tmp)
    rb.process_xid(100, 1000)
    rb.set_base_snapshot(100, 1000, object())
    for what, xid, payload in queue:
        if what == "child":
            rb.assign_child(100, xid, payload)
        elif what == "one":
            rb.process_xid(xid, payload.lsn)
            rb.queue_change(xid, payload.lsn, payload)
        else:
            rb.process_xid(xid, payload[0].lsn)
            if batched:
                rb.queue_run(xid, payload[0].lsn, insert_rows(payload))
            else:
                for c in payload:
                    rb.queue_change(xid, c.lsn, c)
    rb.commit(100, 90_000, 90_008, commit_time=0, origin=None, subxids=[101, 102])
    return {"log": list(sink.log), "held": (rb._state.size, rb._state.count), "store": store}


def _inserts(xid: int, lsn: int, n: int) -> list[Any]:
    return [heap(xid, lsn + 10 * i, data=bytes([i % 251]) * 9) for i in range(n)]


def test_rows_after_a_pending_speculative_insert_drop_it_as_each_row_would() -> None:
    """An InsertRows replayed while a SPEC_INSERT waits for its confirmation drops the
    speculative insertion, as its first row does when queued alone, and releases it."""
    spec = heap(100, 1005, ChangeKind.SPEC_INSERT)
    queue = [("one", 100, spec), ("rows", 100, _inserts(100, 1010, 5))]
    with tempfile.TemporaryDirectory() as a, tempfile.TemporaryDirectory() as b:
        one = _replayed(Path(a), queue, batched=False)
        run = _replayed(Path(b), queue, batched=True)
    assert run["log"] == one["log"]
    assert all(entry[0] != "change" or entry[2] is not spec for entry in run["log"])
    assert run["held"] == one["held"] == (0, 0)
    # The rows dropped it: a confirmation after them has nothing to confirm, either way.
    confirm = heap(100, 1100, ChangeKind.SPEC_CONFIRM)
    for batched in (False, True):
        with tempfile.TemporaryDirectory() as d, pytest.raises(DecodeError, match="ordering"):
            _replayed(Path(d), [*queue, ("one", 100, confirm)], batched=batched)


def test_rows_of_subtransactions_merge_by_lsn_as_their_rows_would() -> None:
    """InsertRows of a transaction and two subtransactions, interleaved in WAL order,
    replay in LSN order exactly as their rows queued one by one (the k-way merge places
    an entry by its first row: no other change lies between its first and last)."""
    queue: list[tuple[str, int, Any]] = [
        ("child", 101, 1001),
        ("child", 102, 1002),
        ("rows", 100, _inserts(100, 1010, 3)),
        ("rows", 101, _inserts(101, 1100, 4)),
        ("one", 102, heap(102, 1150, ChangeKind.DELETE)),
        ("rows", 100, _inserts(100, 1200, 2)),
        ("rows", 102, _inserts(102, 1300, 6)),
        ("rows", 101, _inserts(101, 1400, 1)),
    ]
    with tempfile.TemporaryDirectory() as a, tempfile.TemporaryDirectory() as b:
        one = _replayed(Path(a), queue, batched=False)
        run = _replayed(Path(b), queue, batched=True)
    assert run["log"] == one["log"]
    lsns = [entry[2].lsn for entry in run["log"] if entry[0] == "change"]
    assert lsns == sorted(lsns) and len(lsns) == 17
    assert run["held"] == (0, 0)


def test_rows_longer_than_a_run_go_on_in_windows_of_run_max() -> None:
    """An InsertRows of more rows than RUN_MAX reaches the sink whole, in windows of at
    most RUN_MAX rows, in order; the sink is handed InsertRows, not HeapChange lists."""
    n = 2 * RUN_MAX + 7
    with tempfile.TemporaryDirectory() as d:
        rb, sink, _store = make_buffer(Path(d))
        seen: list[object] = []
        plain = sink.changes

        def spy(txn: Any, changes: Any) -> None:
            seen.append(changes)
            plain(txn, changes)

        sink.changes = spy  # type: ignore[method-assign]
        rb.process_xid(100, 1000)
        rb.set_base_snapshot(100, 1000, object())
        rows = _inserts(100, 1000, n)
        rb.queue_run(100, 1000, insert_rows(rows))
        rb.commit(100, 90_000, 90_008, commit_time=0, origin=None)
    assert [len(x) for x in seen] == [RUN_MAX, RUN_MAX, 7]  # type: ignore[arg-type]
    assert all(type(x) is InsertRows for x in seen)
    assert [entry[2] for entry in sink.log if entry[0] == "change"] == rows


def test_rows_that_cannot_dump_are_spilled_row_by_row_and_restored() -> None:
    """An InsertRows entry whose rows have no `dump` (ListRows, the pure-Python double)
    is handed to the store whole, written as its HeapChanges, one record each (so the
    file's record count, `spilled`, is its rows), counted as its rows, and replays the
    same rows. (Native rows spill as one record: test_spill_rows.py.)"""
    with tempfile.TemporaryDirectory() as d:
        rb, sink, store = make_buffer(Path(d), work_mem=3000)
        rb.process_xid(100, 1000)
        rb.set_base_snapshot(100, 1000, object())
        rows = _inserts(100, 1000, 60)
        rb.queue_run(100, 1000, insert_rows(rows))
        entries = [c for _xid, batch in store.entries for c in batch]
        assert entries and all(type(c) is InsertRows for c in entries)
        written = [c for _xid, batch in store.writes for c in batch]
        assert written == rows[: len(written)]
        assert rb._by_xid[100].spilled == sum(store.records) == len(written)
        rb.commit(100, 90_000, 90_008, commit_time=0, origin=None)
    assert [entry[2] for entry in sink.log if entry[0] == "change"] == rows
    assert rb._state.size == rb._state.count == 0


def test_short_rows_join_the_run_around_them() -> None:
    """InsertRows shorter than ROWS_ALONE (InsertRuns cut by other transactions' records)
    go on as their rows, joining one run with the plain changes around them; a long one
    still goes whole."""
    with tempfile.TemporaryDirectory() as d:
        rb, sink, _store = make_buffer(Path(d))
        seen: list[object] = []
        plain = sink.changes

        def spy(txn: Any, changes: Any) -> None:
            seen.append(changes)
            plain(txn, changes)

        sink.changes = spy  # type: ignore[method-assign]
        rb.process_xid(100, 1000)
        rb.set_base_snapshot(100, 1000, object())
        short = [_inserts(100, 1000 + 1000 * k, ROWS_ALONE - 1) for k in range(3)]
        for rows in short:
            rb.queue_run(100, rows[0].lsn, insert_rows(rows))
        one = heap(100, 5000, ChangeKind.DELETE)
        rb.queue_change(100, one.lsn, one)
        long = _inserts(100, 6000, ROWS_ALONE)
        rb.queue_run(100, long[0].lsn, insert_rows(long))
        rb.commit(100, 90_000, 90_008, commit_time=0, origin=None)
    assert [type(x) for x in seen] == [list, InsertRows]
    assert seen[0] == [c for rows in short for c in rows] + [one]
    assert list(seen[1]) == long  # type: ignore[call-overload]
