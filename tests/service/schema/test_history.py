"""Tests of the schema history: versions by LSN, own-transaction visibility, aborts,
relfilenode classification (rewrites, TRUNCATE, VACUUM FULL) and the catalog fallback."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from structlog.testing import capture_logs

from service.decode.events import AssignmentEvent, MessageEvent
from service.errors import DecodeError
from service.schema.history import REWRITE, UNKNOWN, RelClass, SchemaHistory
from service.schema.store import LocalFileSchemaStore
from service.schema.tabledef import CatalogSnapshot
from tests.service.schema.schema_history_support import (
    DB,
    FakeCatalog,
    abort,
    class_lost,
    class_row,
    commit,
    create,
    ddl,
    drop,
    insert,
    loc,
    new_cid,
    relcache,
    running,
    table,
    truncate,
)

T1 = table(100, 100, ncols=1, toast=(101, 101))


def base(*tables: object, catalog: FakeCatalog | None = None) -> SchemaHistory:
    snap = CatalogSnapshot(DB, 50, 10, 10, frozenset(), tuple(tables))  # type: ignore[arg-type]
    return SchemaHistory.from_catalog_snapshot(snap, catalog)


def test_ddl_visible_to_own_transaction_from_its_lsn_and_to_others_at_commit() -> None:
    """ALTER in xid 20 at LSN 200: xid 20 sees it from 200, everyone else from the commit."""
    h = base(T1)
    t2 = replace(T1, columns=(*T1.columns, *table(1, 1, ncols=2).columns[1:]))
    h.apply(ddl(200, 20, t2))
    assert h.by_oid(100, 150, 20) == T1
    assert h.by_oid(100, 250, 20) == t2
    assert h.by_oid(100, 250, 21) == T1
    h.apply(commit(300, 20))
    assert h.by_oid(100, 250, 20) == t2  # replay of xid 20 after its commit
    assert h.by_oid(100, 299) == T1
    assert h.by_oid(100, 300) == t2
    assert h.by_oid(100, 400, 22) == t2
    assert h.version == 1


def test_aborted_transaction_and_subtransaction_drop_their_ddl() -> None:
    """DDL of an aborted transaction, or of a rolled-back subtransaction, never applies."""
    h = base(T1)
    h.apply(ddl(200, 20, table(100, 100, ncols=2)))
    h.apply(abort(210, 20))
    assert h.by_oid(100, 1000) == T1
    # xid 30 with subtransactions 31 (rolled back) and 32 (released)
    h.apply(AssignmentEvent(300, 30, (31, 32)))
    h.apply(ddl(310, 31, table(100, 100, ncols=3)))
    assert h.by_oid(100, 315, 30) == table(100, 100, ncols=3)  # visible inside the txn
    h.apply(abort(320, 31))
    assert h.by_oid(100, 325, 30) == T1
    h.apply(ddl(330, 32, table(100, 100, ncols=4)))
    h.apply(commit(400, 30, subxids=(32,)))
    assert h.by_oid(100, 401) == table(100, 100, ncols=4)
    assert h.by_oid(100, 335, 30) == table(100, 100, ncols=4)
    assert h.by_oid(100, 335, 32) == table(100, 100, ncols=4)
    assert h.pending_xids() == []


def test_subtransaction_missing_from_commit_is_dropped() -> None:
    """A known subtransaction the commit does not list was rolled back (no abort record
    needed): its DDL is dropped."""
    h = base(T1)
    h.assign_child(40, 41)
    h.apply(ddl(410, 41, table(100, 100, ncols=5)))
    h.apply(commit(500, 40))
    assert h.by_oid(100, 600) == T1


def test_rewrite_output_is_classified_rewrite() -> None:
    """ALTER ... TYPE: inserts into the new relfilenode before the message are rewrite
    output; after the message and for later transactions it is the table."""
    h = base(T1)
    h.apply(create(200, 20, 555))
    h.apply(create(201, 20, 556))  # new toast relfilenode
    assert h.classify(loc(555), 20, 210) == REWRITE
    assert h.classify(loc(556), 20, 211) == REWRITE
    assert h.classify(loc(555), 21, 210) == UNKNOWN
    rewritten = table(100, 555, ncols=1, toast=(557, 556))
    h.apply(ddl(220, 20, rewritten))
    h.apply(commit(300, 20))
    assert h.classify(loc(555), 20, 210) == REWRITE  # replayed after commit: still rewrite
    hit = h.classify(loc(555), 20, 230)
    assert hit.kind is RelClass.TABLE and hit.table == rewritten
    assert h.classify(loc(556), 20, 230).kind is RelClass.TOAST
    assert h.classify(loc(555), 21, 310).table == rewritten
    assert h.classify(loc(100), 21, 290).table == T1  # the old relfilenode until the commit
    assert h.classify(loc(100), 21, 310) == UNKNOWN  # and nothing after
    assert h.is_toast(loc(101), 290) and not h.is_toast(loc(101), 310)


def test_create_table_as_rows_before_the_message_are_real() -> None:
    """CREATE TABLE AS writes its rows before ddl_command_end: they belong to the table."""
    h = base()
    h.apply(create(200, 20, 700))
    new = table(700, 700)
    h.apply(ddl(260, 20, new))
    h.apply(commit(300, 20))
    assert h.classify(loc(700), 20, 210).table == new


def test_truncate_maps_new_relfilenodes_from_the_wal() -> None:
    """TRUNCATE (no event trigger): the pg_class rows it writes (read off the WAL) map
    the new relfilenodes at commit, with no live catalog at all; inserts after the row
    in the same transaction are the table's."""
    h = base(T1)
    h.apply(create(200, 20, 800))
    h.apply(class_row(203, 20, 100, 800))
    h.apply(create(204, 20, 801))  # toast
    h.apply(class_row(205, 20, 101, 801, kind="t"))
    h.apply(create(206, 20, 802))  # an index
    h.apply(class_row(207, 20, 102, 802, kind="i"))
    h.apply(truncate(210, 20, 100))
    h.apply(insert(220, 20, 800))
    h.apply(commit(300, 20, invals=(relcache(100),)))
    assert h.classify(loc(800), 20, 220).table is not None
    assert h.classify(loc(800), 20, 220).kind is RelClass.TABLE
    assert h.classify(loc(801), 20, 220).kind is RelClass.TOAST
    assert h.classify(loc(802), 20, 220) == REWRITE  # an index: no table's
    assert h.classify(loc(800), 21, 310).kind is RelClass.TABLE
    assert h.classify(loc(100), 21, 310) == UNKNOWN
    assert h.classify(loc(100), 21, 250).kind is RelClass.TABLE
    assert h.by_oid(100, 310) == replace(T1, relfilenode=800, toast_relfilenode=801)


def test_relfilenode_no_rebuilt_row_names_is_unknown() -> None:
    """A pg_class row of the transaction could not be rebuilt (its page never seen
    whole): the relfilenode it would have named is UNKNOWN, an error at replay, never
    rewrite output dropped in silence; the commit logs it."""
    h = base(T1)
    h.apply(create(200, 20, 800))
    h.apply(class_lost(203, 20))
    h.apply(truncate(210, 20, 100))
    h.apply(insert(220, 20, 800))
    with capture_logs() as logs:
        h.apply(commit(300, 20, invals=(relcache(100),)))
    assert h.classify(loc(800), 20, 220) == UNKNOWN
    unresolved = [e for e in logs if e["event"] == "relfilenode_unresolved"]
    assert unresolved and unresolved[0]["lost_rows"] == 1


def test_truncate_then_alter_in_one_transaction() -> None:
    """TRUNCATE then ALTER ADD COLUMN in one transaction: inserts between the two are the
    table's (old shape), inserts after the ALTER have the new shape."""
    h = base(T1)
    h.apply(create(200, 20, 900))
    h.apply(truncate(210, 20, 100))
    altered = table(100, 900, ncols=2, toast=(101, 101))
    h.apply(ddl(240, 20, altered))
    h.apply(commit(300, 20))
    between = h.classify(loc(900), 20, 220)
    assert between.kind is RelClass.TABLE and between.table == T1
    assert h.classify(loc(900), 20, 250).table == altered


def test_vacuum_full_remaps_from_the_swap_row() -> None:
    """VACUUM FULL: no message, a new relfilenode first of a transient heap (relrewrite
    set: its writes are rewrite output), then swapped to the table by its pg_class row;
    later transactions find the table there."""
    h = base(T1)
    h.apply(create(200, 20, 950))
    h.apply(class_row(201, 20, 950, 950, rewrite=100))  # make_new_heap
    h.apply(new_cid(202, 20))
    h.apply(class_row(206, 20, 100, 950))  # swap_relation_files
    h.apply(class_row(207, 20, 950, 100, rewrite=100))
    with capture_logs() as logs:
        h.apply(commit(300, 20, invals=(relcache(100),)))
    assert h.classify(loc(950), 20, 203) == REWRITE
    assert h.classify(loc(950), 20, 210).table == T1
    assert h.classify(loc(950), 21, 310).table == replace(T1, relfilenode=950)
    assert any(e["event"] == "relfilenode_remapped" for e in logs)


def test_fallback_refreshes_from_the_catalog_with_a_warning() -> None:
    """A catalog change with no DDL message (trigger missing): the invalidated table is
    re-read from the live catalog, effective at the commit, with a warning."""
    cat = FakeCatalog()
    cat.put(T1)
    h = base(T1, catalog=cat)
    widened = table(100, 100, ncols=3, toast=(101, 101))
    cat.put(widened)
    h.apply(new_cid(200, 20))
    with capture_logs() as logs:
        h.apply(commit(300, 20, invals=(relcache(100),)))
    assert h.by_oid(100, 299) == T1
    assert h.by_oid(100, 300) == widened
    warnings = [e for e in logs if e["event"] == "schema_refreshed_from_catalog"]
    assert warnings and warnings[0]["log_level"] == "warning" and warnings[0]["oid"] == 100
    # Unchanged definitions are not logged.
    h.apply(new_cid(400, 21))
    with capture_logs() as logs:
        h.apply(commit(500, 21, invals=(relcache(100),)))
    assert logs == []


def test_transactions_visible_in_the_initial_snapshot_are_not_reapplied() -> None:
    """A DDL transaction the catalog snapshot already reflects is not applied again."""
    snap = CatalogSnapshot(DB, 50, xmin=15, xmax=25, xip=frozenset({18}), tables=(T1,))
    h = SchemaHistory.from_catalog_snapshot(snap)
    h.apply(ddl(100, 12, table(100, 100, ncols=7)))  # committed before the snapshot
    h.apply(commit(110, 12))
    h.apply(ddl(120, 18, table(100, 100, ncols=2)))  # running when the snapshot was taken
    h.apply(commit(130, 18))
    assert h.by_oid(100, 1000) == table(100, 100, ncols=2)


def test_drop_and_running_xacts_cleanup() -> None:
    """DROP TABLE hides the table from its commit on; RUNNING_XACTS forgets crashed xids."""
    h = base(T1)
    h.apply(drop(200, 20, 100))
    h.apply(commit(300, 20))
    assert h.by_oid(100, 299) == T1
    assert h.by_oid(100, 300) is None
    assert h.classify(loc(100), 21, 310) == UNKNOWN
    h.apply(ddl(400, 30, table(200, 200)))
    h.apply(running(500, oldest=31, next_xid=35))
    assert h.pending_xids() == []
    h.apply(commit(600, 30))  # cannot happen on a real server; shows the state is gone
    assert h.by_oid(200, 700) is None


def test_malformed_ddl_message_is_an_error_with_the_lsn() -> None:
    """A pgcdc.ddl payload that is not the expected JSON raises DecodeError naming the LSN."""
    h = base(T1)
    with pytest.raises(DecodeError, match="lsn=0/3E8"):
        h.apply(MessageEvent(1000, 20, DB, True, "pgcdc.ddl", b"{not json"))
    h.apply(MessageEvent(1000, 20, DB, True, "other.prefix", b"{not json"))
    h.apply(MessageEvent(1000, 20, DB + 1, True, "pgcdc.ddl", b"{not json"))


def test_persisted_history_round_trips_and_is_idempotent(tmp_path: Path) -> None:
    """Saved and reloaded, the history answers the same; re-reading WAL from before the
    save does not apply committed DDL twice."""
    h = base(T1)
    h.apply(create(200, 20, 555))
    h.apply(ddl(220, 20, table(100, 555, ncols=2)))
    h.apply(commit(300, 20))
    store = LocalFileSchemaStore(tmp_path / "history.json")
    assert store.load_latest() is None
    store.save(h.version, h.to_snapshot())
    version, doc = store.load_latest() or (0, {})
    assert version == 1
    again = SchemaHistory.from_snapshot(doc)
    for lsn, xid in ((210, 20), (230, 20), (299, 21), (300, 21)):
        assert again.classify(loc(555), xid, lsn) == h.classify(loc(555), xid, lsn)
        assert again.by_oid(100, lsn, xid) == h.by_oid(100, lsn, xid)
    # replay from a restart LSN before the commit
    again.apply(create(200, 20, 555))
    again.apply(ddl(220, 20, table(100, 555, ncols=2)))
    again.apply(commit(300, 20))
    assert again.version == 1
    assert again.pending_xids() == []
    assert list(tmp_path.iterdir()) == [tmp_path / "history.json"]


def test_prune_keeps_what_is_in_force() -> None:
    """Pruning drops superseded versions but keeps the one in force at the horizon."""
    h = base(T1)
    for i, lsn in enumerate((300, 500, 700)):
        h.apply(ddl(lsn - 50, 20 + i, table(100, 100, ncols=i + 2)))
        h.apply(commit(lsn, 20 + i))
    h.prune(600)
    assert h.by_oid(100, 650) == table(100, 100, ncols=3)
    assert h.by_oid(100, 800) == table(100, 100, ncols=4)
    assert h.classify(loc(100), 30, 650).kind is RelClass.TABLE


# --- property: random DDL transactions against a simple model -------------------------


@given(
    st.lists(
        st.tuples(
            st.sampled_from(["commit", "abort", "sub_abort", "sub_commit"]),
            st.integers(1, 6),
        ),
        max_size=25,
    )
)
def test_every_lsn_sees_the_last_committed_definition(
    txns: list[tuple[str, int]],
) -> None:
    """Whatever mix of committed, aborted and savepoint-rolled-back DDL: at every LSN,
    others see the definition of the last commit before it, and a transaction sees its
    own surviving DDL from the message on."""
    h = base(T1)
    model: list[tuple[int, object]] = [(0, T1)]  # (commit_lsn, definition)
    own_checks: list[tuple[int, int, object]] = []
    lsn, xid = 1000, 100
    for outcome, ncols in txns:
        xid += 2
        sub = xid + 1
        defn = table(100, 100, ncols=ncols)
        writer = sub if outcome.startswith("sub") else xid
        if writer == sub:
            h.apply(AssignmentEvent(lsn, xid, (sub,)))
        lsn += 10
        h.apply(ddl(lsn, writer, defn))
        msg_lsn = lsn
        lsn += 10
        if outcome == "sub_abort":
            h.apply(abort(lsn, sub))
            lsn += 10
        if outcome == "abort":
            h.apply(abort(lsn, xid))
        else:
            h.apply(commit(lsn, xid, subxids=(sub,) if outcome == "sub_commit" else ()))
            if outcome != "sub_abort":
                model.append((lsn, defn))
                own_checks.append((msg_lsn, xid, defn))
        lsn += 10
    for probe in range(0, lsn + 20, 5):
        expected = [d for c, d in model if c <= probe][-1]
        assert h.by_oid(100, probe) == expected
    for msg_lsn, owner, defn in own_checks:
        assert h.by_oid(100, msg_lsn, owner) == defn
    assert h.pending_xids() == []
