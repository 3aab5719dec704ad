"""Rewrites inside a transaction (`SchemaHistory._find_swaps`), on synthetic WAL events.

The event sequences follow what PostgreSQL logs for CLUSTER (seen with the WAL of
tests/integration/test_text_plugin_vs_test_decoding_more.py): smgr CREATE of the
transient heap N (relation N), of its toast table; then one XLOG_XACT_INVALIDATIONS
record naming the table, N, the table's toast and the transient toast (the swap); the
PREPARE or commit record unlinks the table's old relfilenodes.
"""

from __future__ import annotations

from dataclasses import replace

from service.decode.events import InvalidationsEvent, PrepareEvent
from service.schema.history import RelClass, SchemaHistory
from service.schema.tabledef import CatalogSnapshot
from tests.service.schema.schema_history_support import (
    DB,
    FakeCatalog,
    commit,
    create,
    loc,
    relcache,
    table,
)

T = table(500, 500, toast=(501, 501))
U = table(600, 600)
XID = 900


def _history(catalog: FakeCatalog | None = None) -> SchemaHistory:
    snap = CatalogSnapshot(DB, 0, 800, 800, frozenset(), (T, U))
    return SchemaHistory.from_catalog_snapshot(snap, catalog)


def _invals(lsn: int, *oids: int) -> InvalidationsEvent:
    return InvalidationsEvent(lsn, XID, tuple(relcache(o) for o in oids))


def _prepare(lsn: int, *dropped: int) -> PrepareEvent:
    return PrepareEvent(
        lsn, lsn + 8, XID, 0, DB, "g", (), (), 0, 0, None, tuple(loc(d) for d in dropped)
    )


def _cluster(h: SchemaHistory, at: int, heap: int, toast: int, *tables: int) -> int:
    """CLUSTER (of each of `tables` in one swap record: only to test ambiguity)."""
    h.apply(create(at, XID, heap))
    h.apply(_invals(at + 10, heap))  # make_new_heap's CommandCounterIncrement
    h.apply(create(at + 20, XID, toast))
    h.apply(_invals(at + 30, toast, heap))
    h.apply(_invals(at + 100, *tables, heap, 501, toast))  # swap_relation_files
    return at + 100


def test_rows_after_cluster_are_the_tables_at_prepare() -> None:
    h = _history()
    swap = _cluster(h, 1000, 700, 703, T.oid)
    h.apply(create(1200, XID, 704))  # the rebuilt index
    h.apply(_prepare(2000, 500, 501, 502))
    before = h.classify(loc(700), XID, swap - 1)
    after = h.classify(loc(700), XID, swap + 1)
    assert before.kind is RelClass.REWRITE  # the transient heap's until the swap
    assert after.kind is RelClass.TABLE and after.table is not None
    assert after.table.oid == T.oid
    assert h.classify(loc(703), XID, swap + 1).kind is RelClass.REWRITE  # its toast
    assert h.classify(loc(704), XID, 1300).kind is RelClass.REWRITE  # the rebuilt index


def test_no_swap_without_the_old_relfilenode_unlinked() -> None:
    h = _history()
    swap = _cluster(h, 1000, 700, 703, T.oid)
    h.apply(_prepare(2000))  # nothing unlinked: not a rewrite of a known table
    assert h.classify(loc(700), XID, swap + 1).kind is RelClass.REWRITE


def test_two_tables_in_one_swap_record_are_unknown_not_guessed() -> None:
    h = _history()
    swap = _cluster(h, 1000, 700, 703, T.oid, U.oid)
    h.apply(_prepare(2000, 500, 600))
    assert h.classify(loc(700), XID, swap + 1).kind is RelClass.UNKNOWN


def test_swap_at_commit_survives_a_relfilenode_replaced_again() -> None:
    """CLUSTER twice in one transaction: the first new relfilenode is gone from the
    live catalog at commit, its rows in between are still the table's."""
    catalog = FakeCatalog()
    catalog.put(T)
    catalog.put(U)
    h = _history(catalog)
    first = _cluster(h, 1000, 700, 703, T.oid)
    second = _cluster(h, 3000, 710, 713, T.oid)
    catalog.move(T.oid, 710, 713)
    h.apply(replace(commit(5000, XID), dropped_rels=(loc(500), loc(501), loc(700), loc(703))))
    got = h.classify(loc(700), XID, first + 1)
    assert got.kind is RelClass.TABLE and got.table is not None and got.table.oid == T.oid
    got = h.classify(loc(710), XID, second + 1)
    assert got.kind is RelClass.TABLE and got.table is not None and got.table.oid == T.oid
    assert h.classify(loc(710), XID, second - 1).kind is RelClass.REWRITE
    # later transactions see the table in its last relfilenode
    later = h.classify(loc(710), XID + 1, 6000)
    assert later.kind is RelClass.TABLE and later.table is not None
    assert h.classify(loc(700), XID + 1, 6000).kind is RelClass.UNKNOWN
