"""Rewrites inside a transaction (`SchemaHistory._find_swaps`), on synthetic WAL events.

The event sequences follow what PostgreSQL logs for CLUSTER (make_new_heap, then
finish_heap_swap): smgr CREATE of the transient heap N and the pg_class row inserting
relation N with `relrewrite` set; the same for its toast table; then the swap's pg_class
updates, pointing the table (and its toast table) at the new relfilenodes and the
transient ones at the old. The rows are what the historic pg_class
(`service.schema.pgclass`) rebuilds off the WAL.
"""

from __future__ import annotations

from service.decode.events import PrepareEvent
from service.schema.history import RelClass, SchemaHistory
from service.schema.tabledef import CatalogSnapshot
from tests.service.schema.schema_history_support import (
    DB,
    class_lost,
    class_row,
    commit,
    create,
    loc,
    table,
)

T = table(500, 500, toast=(501, 501))
U = table(600, 600)
XID = 900


def _history() -> SchemaHistory:
    snap = CatalogSnapshot(DB, 0, 800, 800, frozenset(), (T, U))
    return SchemaHistory.from_catalog_snapshot(snap)


def _prepare(lsn: int) -> PrepareEvent:
    return PrepareEvent(lsn, lsn + 8, XID, 0, DB, "g", (), (), 0, 0, None, ())


def _cluster(h: SchemaHistory, at: int, heap: int, toast: int, old: tuple[int, int]) -> int:
    """CLUSTER of T into relfilenodes (heap, toast), from `old`; returns the swap's LSN."""
    h.apply(create(at, XID, heap))
    h.apply(class_row(at + 1, XID, heap, heap, rewrite=T.oid))
    h.apply(create(at + 20, XID, toast))
    h.apply(class_row(at + 21, XID, toast, toast, kind="t"))
    h.apply(class_row(at + 100, XID, T.oid, heap))
    h.apply(class_row(at + 101, XID, heap, old[0], rewrite=T.oid))
    h.apply(class_row(at + 102, XID, T.toast_relid, toast, kind="t"))
    h.apply(class_row(at + 103, XID, toast, old[1], kind="t"))
    return at + 100


def test_rows_after_cluster_are_the_tables_at_prepare() -> None:
    """Decoded at PREPARE: the transient heap's writes are rewrite output up to the swap
    row, the table's after it, its toast relfilenode the table's toast, and a rebuilt
    index (no table's row) is no table's."""
    h = _history()
    swap = _cluster(h, 1000, 700, 703, (500, 501))
    h.apply(create(1200, XID, 704))  # the rebuilt index
    h.apply(class_row(1201, XID, 502, 704, kind="i"))
    h.apply(_prepare(2000))
    before = h.classify(loc(700), XID, swap - 1)
    after = h.classify(loc(700), XID, swap + 1)
    assert before.kind is RelClass.REWRITE  # the transient heap's until the swap
    assert after.kind is RelClass.TABLE and after.table is not None
    assert after.table.oid == T.oid
    toast = h.classify(loc(703), XID, swap + 5)
    assert toast.kind is RelClass.TOAST and toast.table is not None
    assert toast.table.oid == T.oid
    assert h.classify(loc(704), XID, 1300).kind is RelClass.REWRITE


def test_a_transient_heap_never_swapped_stays_rewrite_output() -> None:
    """A relfilenode only a transient heap (relrewrite set) ever had: rewrite output."""
    h = _history()
    h.apply(create(1000, XID, 700))
    h.apply(class_row(1001, XID, 700, 700, rewrite=T.oid))
    h.apply(_prepare(2000))
    assert h.classify(loc(700), XID, 1500).kind is RelClass.REWRITE


def test_a_relfilenode_no_row_names_is_unknown_not_guessed() -> None:
    """Some pg_class row of the transaction was lost: a relfilenode no rebuilt row names
    is UNKNOWN, whatever the invalidations or unlinks suggest."""
    h = _history()
    h.apply(create(1000, XID, 700))
    h.apply(class_lost(1050, XID))
    h.apply(_prepare(2000))
    assert h.classify(loc(700), XID, 1100).kind is RelClass.UNKNOWN


def test_cluster_twice_in_one_transaction_at_commit() -> None:
    """CLUSTER twice in one transaction: the first new relfilenode is gone by the commit
    (as it is from the live catalog); its rows in between are still the table's."""
    h = _history()
    first = _cluster(h, 1000, 700, 703, (500, 501))
    second = _cluster(h, 3000, 710, 713, (700, 703))
    h.apply(commit(5000, XID))
    got = h.classify(loc(700), XID, first + 1)
    assert got.kind is RelClass.TABLE and got.table is not None and got.table.oid == T.oid
    got = h.classify(loc(710), XID, second + 1)
    assert got.kind is RelClass.TABLE and got.table is not None and got.table.oid == T.oid
    assert h.classify(loc(710), XID, second - 1).kind is RelClass.REWRITE
    # later transactions see the table in its last relfilenode
    later = h.classify(loc(710), XID + 1, 6000)
    assert later.kind is RelClass.TABLE and later.table is not None
    assert later.table.relfilenode == 710 and later.table.toast_relfilenode == 713
    assert h.classify(loc(700), XID + 1, 6000).kind is RelClass.UNKNOWN
