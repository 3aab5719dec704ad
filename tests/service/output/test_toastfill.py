"""Pure tests of the unchanged-TOAST fill's parts: finding pointers in a logged tuple,
the bounded cache of WAL values, the batched fill and the xmin hold (issue 32). The
TOAST-table reader and the hold's feedback run against a real server in
tests/integration/test_toast_fill.py."""

from __future__ import annotations

import dataclasses
import struct
from collections.abc import Mapping, Sequence

from service.decode.events import ChangeKind, HeapChange, RawTuple
from service.output.api import RelationInfo
from service.output.toastfill import Placeholder, ToastFill, ToastValueCache
from service.output.xminhold import XminHold, epoch_of
from service.schema.tabledef import TableDef
from service.types.deform import Column, deform, toast_pointers
from service.types.varlena import ToastPointer
from service.wal.record import RelFileLocator

INT4 = Column(1, "id", 23, -1, 4, True, "i")
TEXT = Column(2, "doc", 25, -1, -1, False, "i")
NOTE = Column(3, "note", 25, -1, -1, False, "i")


def pointer(valueid: int, toastrelid: int = 9000, size: int = 6000) -> bytes:
    """An on-disk TOAST pointer (varatt_external) of an uncompressed value."""
    return b"\x01\x12" + struct.pack("<iIII", size + 4, size, valueid, toastrelid)


def short(data: bytes) -> bytes:
    return bytes([((len(data) + 1) << 1) | 1]) + data


def row(*varlenas: bytes, key: int = 7) -> RawTuple:
    """id int4, then text columns: data starts at offset 23, hoff 24 (one pad byte)."""
    return RawTuple(
        1 + len(varlenas), 0, 0, 24, b"\x00" + struct.pack("<i", key) + b"".join(varlenas)
    )


def test_toast_pointers_finds_exactly_the_pointers_deform_finds() -> None:
    """The header-only walk yields the same pointers, in attnum order, as the full
    deform, skipping inline values (including bytes that merely look like a pointer)."""
    raw = row(pointer(41), short(b"\x01\x12 not a pointer"), key=5)
    cols = [INT4, TEXT, NOTE]
    expected = [d for d in deform(raw, cols) if isinstance(d, ToastPointer)]
    assert toast_pointers(raw, cols) == expected == [ToastPointer(6004, 6000, 41, 9000)]
    assert toast_pointers(row(short(b"a"), short(b"b")), cols) == []


def test_cache_is_bounded_by_bytes_and_evicts_least_recently_used() -> None:
    """Values beyond `max_bytes` evict the least recently used; a read refreshes; a
    value larger than the bound is not kept."""
    cache = ToastValueCache(10)
    cache.put((1, 1), b"aaaa")
    cache.put((1, 2), b"bbbb")
    assert cache.get((1, 1)) == b"aaaa"  # now (1, 2) is the oldest
    cache.put((1, 3), b"cccc")
    assert cache.get((1, 2)) is None and cache.get((1, 1)) == b"aaaa"
    assert cache.size == 8 and cache.evicted == 1
    cache.put((1, 4), b"x" * 11)
    assert cache.get((1, 4)) is None and cache.size == 8


class _Rows:
    """The resolver's two answers the fill needs, for one table."""

    def __init__(self, toast_relid: int = 9000) -> None:
        self.table = TableDef.__new__(TableDef)
        object.__setattr__(self.table, "schema", "public")
        object.__setattr__(self.table, "name", "docs")
        object.__setattr__(self.table, "toast_relid", toast_relid)
        object.__setattr__(self.table, "columns", (INT4, TEXT, NOTE))
        self.walked: list[int] = []  # the LSNs of the changes whose tuple was walked

    def relation(self, change: HeapChange, top_xid: int) -> RelationInfo | None:
        return RelationInfo.__new__(RelationInfo)

    def toast_pointers(
        self, relation: RelationInfo, change: HeapChange, top_xid: int
    ) -> tuple[TableDef, list[ToastPointer]]:
        assert change.new_tuple is not None
        self.walked.append(change.lsn)
        return self.table, toast_pointers(change.new_tuple, [INT4, TEXT, NOTE])

    def definition(self, relation: RelationInfo, change: HeapChange, top_xid: int) -> TableDef:
        return self.table


class _Source:
    """A TOAST table holding some values; records each batch it is asked."""

    def __init__(self, values: Mapping[tuple[int, int], bytes]) -> None:
        self.values = values
        self.asked: list[dict[int, list[int]]] = []

    def fetch(self, wanted: Mapping[int, Sequence[int]], lsn: int) -> dict[tuple[int, int], bytes]:
        self.asked.append({k: list(v) for k, v in wanted.items()})
        return {
            (rel, vid): self.values[(rel, vid)]
            for rel, ids in wanted.items()
            for vid in ids
            if (rel, vid) in self.values
        }


def update(lsn: int, *varlenas: bytes) -> HeapChange:
    return HeapChange(
        lsn,
        700,
        ChangeKind.UPDATE,
        RelFileLocator(1663, 5, 16384),
        0,
        1,
        row(*varlenas),
        None,
        False,
    )


def test_fill_batches_one_read_uses_wal_values_and_reports_what_is_gone() -> None:
    """A batch asks the source once for every value neither the change nor the cache
    has; a value the WAL carried is learnt and serves a later UPDATE without a read;
    a value the source lacks is reported as a placeholder with table and LSN."""
    source = _Source({(9000, 42): b"B" * 6000})
    gone: list[Placeholder] = []
    fill = ToastFill(source, ToastValueCache(1 << 20), on_placeholder=gone.append)
    carried = update(100, pointer(41))
    batch = [
        (carried, {41: b"A" * 6000}),  # inserted in the WAL with this change
        (update(200, pointer(41), pointer(42)), {}),
        (update(300, pointer(42), pointer(43)), {}),
    ]
    out = fill.fill(_Rows(), 700, batch)
    assert source.asked == [{9000: [42, 43]}]
    assert out[0] == {41: b"A" * 6000}
    assert out[1] == {41: b"A" * 6000, 42: b"B" * 6000}
    assert out[2] == {42: b"B" * 6000}
    assert gone == [Placeholder("public.docs", 300, 9000, 43)]
    assert fill.filled == 3 and fill.fetched == 1


def insert(lsn: int, *varlenas: bytes) -> HeapChange:
    return dataclasses.replace(update(lsn, *varlenas), kind=ChangeKind.INSERT)


def test_an_insert_is_learnt_from_its_chunks_without_walking_its_tuple() -> None:
    """An INSERT holding at most one value per column is learnt from its chunks under
    its table's TOAST relation, its tuple not walked, and a later UPDATE is filled from
    that without a read. One holding more (a multi-insert's rows share every row's
    chunks) or of a table without a TOAST relation is walked as before, learning only
    its own values."""
    source = _Source({})
    fill = ToastFill(source, ToastValueCache(1 << 20))
    rows = _Rows()
    batch = [
        (insert(100, pointer(41), pointer(44)), {41: b"A" * 6000, 44: b"C" * 6000}),
        (update(200, pointer(44)), {}),
    ]
    out = fill.fill(rows, 700, batch)
    assert rows.walked == [200] and source.asked == []
    assert out == [batch[0][1], {44: b"C" * 6000}] and fill.filled == 1
    shared = {41: b"A" * 6000, 50: b"D", 51: b"E", 52: b"F"}  # 4 values, 3 columns
    fill = ToastFill(source, ToastValueCache(1 << 20))
    rows = _Rows()
    fill.fill(rows, 700, [(insert(300, pointer(41)), shared)])
    assert rows.walked == [300] and len(fill.cache) == 1 and fill.cache.get((9000, 41))
    fill = ToastFill(source, ToastValueCache(1 << 20))
    rows = _Rows(toast_relid=0)
    fill.fill(rows, 700, [(insert(400, pointer(41)), {41: b"A" * 6000})])
    assert rows.walked == [400] and fill.cache.get((9000, 41)) == b"A" * 6000


def test_placeholder_mode_reads_nothing_and_reports_every_pointer() -> None:
    """Without a source (toast.unchanged = placeholder) nothing is filled and every
    missing value is reported."""
    gone: list[Placeholder] = []
    fill = ToastFill(None, ToastValueCache(0), on_placeholder=gone.append)
    out = fill.fill(_Rows(), 700, [(update(10, pointer(5)), {})])
    assert out == [{}] and [p.valueid for p in gone] == [5]


def test_candidate_needs_the_pointer_head() -> None:
    """Only an INSERT/UPDATE whose new tuple holds bytes 01 12 goes through the fill."""
    assert ToastFill.candidate(update(1, pointer(5)))
    assert not ToastFill.candidate(update(1, short(b"plain")))


def test_hold_follows_confirmation_and_is_released_past_the_cap() -> None:
    """The xmin held is the oldest running xid of the newest RUNNING_XACTS at or
    before the confirmed LSN; older than max_hold_s it is released (None), once
    counted, and a newer one within the cap is held again once confirmed."""
    hold = XminHold(max_hold_s=60)
    assert hold.xmin(0) is None
    hold.observe(1000, 500, now=0)
    hold.observe(2000, 510, now=10)
    hold.observe(3000, 520, now=100)
    assert hold.xmin(20) == 500  # nothing confirmed yet: the oldest known
    hold.confirm(2500)
    assert hold.xmin(20) == 510
    assert hold.xmin(71) is None and hold.xmin(80) is None and hold.released == 1
    hold.confirm(3000)
    assert hold.xmin(120) == 520


def test_assumed_start_is_held_until_a_record_at_or_before_confirmed_is_known() -> None:
    """`assume` gives the hold an xmin before any RUNNING_XACTS: held while the first
    records decoded lie past the confirmed LSN (a deleter may have committed before
    them), given way once the confirmed LSN passes one; ignored once one is known."""
    hold = XminHold(max_hold_s=60)
    hold.assume(300, now=0)
    assert hold.xmin(1) == 300
    hold.observe(1000, 500, now=2)
    assert hold.xmin(3) == 300  # 1000 not confirmed yet
    hold.confirm(999)
    assert hold.xmin(3) == 300
    hold.confirm(1000)
    assert hold.xmin(3) == 500
    hold.assume(100, now=4)
    assert hold.xmin(5) == 500
    late = XminHold(max_hold_s=60)
    late.assume(300, now=0)
    assert late.xmin(61) is None and late.released == 1  # the cap applies to it too


def test_epoch_of_an_xid_before_wraparound() -> None:
    """An xid above the next xid's low 32 bits belongs to the previous epoch."""
    assert epoch_of(100, (3 << 32) | 200) == 3
    assert epoch_of(0xFFFFFF00, (3 << 32) | 200) == 2
