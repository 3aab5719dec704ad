"""Schema history lookups used on the replay hot path: classify_span and is_toast's cache."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from service.decode.events import AssignmentEvent
from service.schema.history import SchemaHistory
from service.schema.tabledef import CatalogSnapshot
from tests.service.schema.schema_history_support import (
    DB,
    abort,
    commit,
    create,
    ddl,
    insert,
    loc,
    running,
    table,
)

T1 = table(100, 100, ncols=1, toast=(101, 101))
END = (1 << 64) - 1


def base(*tables: object) -> SchemaHistory:
    snap = CatalogSnapshot(DB, 50, 10, 10, frozenset(), tuple(tables))  # type: ignore[arg-type]
    return SchemaHistory.from_catalog_snapshot(snap)


def _rewrite_history() -> SchemaHistory:
    """xid 20 rewrites T1 into relfilenode 555 (toast 556), DDL at 220, commit at 300;
    xid 30 rewrites it again into 777 inside a subtransaction that commits at 500."""
    h = base(T1)
    h.apply(create(200, 20, 555))
    h.apply(create(201, 20, 556))
    h.apply(ddl(220, 20, table(100, 555, ncols=1, toast=(557, 556))))
    h.apply(commit(300, 20))
    h.apply(AssignmentEvent(400, 30, (31,)))
    h.apply(create(410, 31, 777))
    h.apply(ddl(430, 31, table(100, 777, ncols=2)))
    h.apply(commit(500, 30, subxids=(31,)))
    return h


def test_classify_span_answer_holds_over_its_range() -> None:
    """For every relfilenode, xid and LSN probed, classify_span returns classify's answer
    and a range containing the LSN on which classify gives that same answer."""
    h = _rewrite_history()
    for rel in (100, 101, 555, 556, 777, 999):
        for xid in (20, 30, 31, 40):
            for lsn in range(0, 620, 7):
                found, lo, hi = h.classify_span(loc(rel), xid, lsn)
                assert found == h.classify(loc(rel), xid, lsn)
                assert lo <= lsn < hi
                for probe in range(lo, min(hi, 640)):
                    assert h.classify(loc(rel), xid, probe) == found, (rel, xid, lsn, probe)


def test_classify_span_ranges_end_at_the_changes() -> None:
    """The range ends where the answer changes: the rewrite's DDL (own) and commit (others)."""
    h = _rewrite_history()
    _, lo, hi = h.classify_span(loc(555), 20, 210)
    assert (lo, hi) == (200, 220)  # rewrite output from its create until the message
    _, lo, hi = h.classify_span(loc(100), 40, 250)
    assert lo <= 250 < hi == 300  # others see the old relfilenode until the commit
    _, lo, hi = h.classify_span(loc(555), 40, 450)
    assert lo == 300 and hi == 500


def test_classify_span_other_database_is_unknown_everywhere() -> None:
    """A relfilenode of another database is UNKNOWN at every LSN."""
    h = _rewrite_history()
    found, lo, hi = h.classify_span(loc(100, db=DB + 1), 20, 250)
    assert found == h.classify(loc(100, db=DB + 1), 20, 250)
    assert (lo, hi) == (0, END)


def test_is_toast_cache_follows_commits_and_aborts() -> None:
    """is_toast for everyone (xid None) is cached, yet sees each commit that remaps a toast
    relfilenode, ignores pending and aborted DDL, and agrees with the uncached lookup."""
    h = base(T1)
    assert h.is_toast(loc(101), END) and not h.is_toast(loc(100), END)
    h.apply(create(200, 20, 556))
    h.apply(ddl(220, 20, table(100, 100, ncols=1, toast=(557, 556))))
    assert not h.is_toast(loc(556), END)  # pending: not for everyone yet
    assert h.is_toast(loc(556), END, 20)  # but for its own transaction
    h.apply(commit(300, 20))
    assert h.is_toast(loc(556), END) and not h.is_toast(loc(101), END)
    assert h.is_toast(loc(101), 299)
    h.apply(ddl(320, 21, table(100, 100, ncols=1, toast=(558, 888))))
    h.apply(abort(330, 21))
    assert h.is_toast(loc(556), END) and not h.is_toast(loc(888), END)


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(st.sampled_from(["commit", "abort", "sub"]), st.integers(1, 4), st.booleans()),
        max_size=12,
    )
)
def test_is_toast_cached_equals_uncached(steps: list[tuple[str, int, bool]]) -> None:
    """Whatever DDL sequence (toast relfilenodes moving, aborted, in subtransactions),
    the cached is_toast equals the lookup it caches, at every step."""
    h = base(T1)
    lsn, xid, toast_rel = 1000, 100, 101
    probes = [loc(r) for r in (100, 101, *range(2000, 2030))]
    for outcome, ncols, moves in steps:
        xid += 2
        writer = xid + 1 if outcome == "sub" else xid
        if writer != xid:
            h.apply(AssignmentEvent(lsn, xid, (writer,)))
        new_toast = 2000 + (lsn // 10 + ncols) % 30 if moves else toast_rel
        lsn += 10
        h.apply(ddl(lsn, writer, table(100, 100, ncols=ncols, toast=(557, new_toast))))
        lsn += 10
        if outcome == "abort":
            h.apply(abort(lsn, xid))
        else:
            h.apply(commit(lsn, xid, subxids=(writer,) if writer != xid else ()))
            toast_rel = new_toast
        lsn += 10
        for p in probes:
            for at in (END, lsn - 15):
                uncached = h._lookup(p, at, None)
                assert h.is_toast(p, at) == (
                    uncached is not None and uncached.kind.value == "toast"
                )


def _answers(h: SchemaHistory, xids: list[int], lsns: list[int]) -> list[object]:
    """Every lookup replay can ask, for the probe relfilenodes, xids and LSNs."""
    out: list[object] = []
    for r in (100, 101, 555, 556, 777, 900, 901):
        for at in lsns:
            out.append(h.is_toast(loc(r), at))
            for x in xids:
                cls, lo, hi = h.classify_span(loc(r), x, at)
                out.append((cls.kind, cls.table, lo, hi))
    return out


_STEP = st.tuples(
    st.sampled_from(["dml", "ddl", "rewrite", "sub_ddl", "running"]),
    st.sampled_from(["commit", "abort"]),
    st.integers(0, 3),
)


@settings(max_examples=80, deadline=None)
@given(st.lists(_STEP, min_size=1, max_size=10))
def test_inert_events_change_no_answer_and_strangers_share_them(
    steps: list[tuple[str, str, int]],
) -> None:
    """Whatever interleaving of plain transactions, DDL (in subtransactions too),
    rewrites into new relfilenodes, aborts and RUNNING_XACTS: an event the history calls
    inert leaves every lookup's answer (classification, its LSN span, is_toast) as it
    was, and every two transactions outside `owner_xids()` get the same answers, so
    HistoryRows may share its classification cache between them."""
    h = base(T1)
    lsn, xid = 1000, 100
    owners_seen: set[int] = set()
    pending: list[object] = []  # events of the transaction in progress, then its end
    for kind, end, ncols in steps:
        xid += 3
        writer = xid + 1 if kind == "sub_ddl" else xid
        events: list[object] = []
        if writer != xid:
            events.append(AssignmentEvent(lsn, xid, (writer,)))
        if kind in ("ddl", "sub_ddl"):
            events.append(ddl(lsn + 1, writer, table(100, 100, ncols=ncols + 1, toast=(101, 101))))
        elif kind == "rewrite":
            target = (555, 777, 900)[ncols % 3]
            events.append(create(lsn + 1, xid, target))
            events.append(ddl(lsn + 2, xid, table(100, target, ncols=1, toast=(101, 101))))
        elif kind == "running":
            events.append(running(lsn + 1, xid - 4, xid + 10))
        events.append(insert(lsn + 3, xid, 100))
        subxids = (writer,) if writer != xid else ()
        if end == "commit":
            events.append(commit(lsn + 5, xid, subxids=subxids))
        else:
            events.append(abort(lsn + 5, xid, subxids=subxids))
        pending.extend(events)
        lsn += 10
    probe_lsns = [999, 1004, lsn - 3, END]
    strangers = [1, 2]  # xids no event names
    for ev in pending:
        probe_xids = [*strangers, *sorted(owners_seen)[:4]]
        inert = h.inert(ev)  # type: ignore[arg-type]
        before = _answers(h, probe_xids, probe_lsns) if inert else None
        h.apply(ev)  # type: ignore[arg-type]
        if before is not None:
            assert _answers(h, probe_xids, probe_lsns) == before, ev
        owners = h.owner_xids()
        owners_seen |= owners
        assert not owners & set(strangers)
        outside = [x for x in range(100, xid + 2) if x not in owners][:6]
        for r in (100, 555, 777, 900):
            for at in probe_lsns:
                seen = {h.classify_span(loc(r), x, at) for x in [*strangers, *outside]}
                assert len(seen) == 1, (r, at, seen)


def test_a_plain_commit_is_inert_and_keeps_the_toast_cache() -> None:
    """The commit of a transaction without schema state (plain DML) changes nothing a
    lookup answers, so the history neither calls it a change nor empties is_toast's
    cache; a DDL transaction's commit is a change."""
    h = base(T1)
    assert h.is_toast(loc(101), END)
    plain = commit(200, 40)
    assert h.inert(plain)
    h.apply(plain)
    assert h._toast_cache, "a plain commit emptied the cache"
    h.apply(ddl(210, 41, table(100, 100, ncols=2, toast=(101, 101))))
    with_ddl = commit(220, 41)
    assert not h.inert(with_ddl)
    h.apply(with_ddl)
    assert not h._toast_cache
    assert h.owner_xids() >= {41} and 40 not in h.owner_xids()
