"""ReorderBuffer.queue_run against queue_change of each change in turn (differential):
the same spills (what was written, when, for whom), counters, accounted sizes and peak,
and the same replay, for random runs of plain inserts between other transactions'
changes, under memory limits from one change to unlimited, with and without the
per-change overhead; toast relations and streaming sinks take queue_change's path."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from service.reorder.buffer import ReorderBuffer
from service.wal.record import RelFileLocator
from tests.service.reorder.reorderbuffer_support import (
    MAIN,
    TOAST,
    CountingStore,
    RecordingSink,
    heap,
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
            rb.queue_run(xid, changes[0].lsn, changes)
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
        rb.queue_run(100, 1000, changes)
        size = 80 + 47 + 101
        assert len(store.writes) == 100 // (2000 // size + 1)
        assert rb._state.peak < 2000 + size
