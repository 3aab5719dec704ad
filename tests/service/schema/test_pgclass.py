"""The historic pg_class (`service.schema.pgclass`) on synthetic records.

What real WAL cannot easily be made to show on demand: an update compressed against a
row the decoded WAL never saw (a lost row, not a guess), the relation map moving
pg_class (VACUUM FULL pg_class), which redo point a restart must go back to, and
damaged records (a typed error or a lost row, nothing else). Real WAL on 15 to 18 is
tests/integration/test_pgclass_vs_server.py.
"""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from service.decode.events import ClassRowEvent, ClassRowLostEvent
from service.errors import DecodeError
from service.schema.pgclass import LAYOUTS, HistoricClass
from service.wal import rmgr as rt
from service.wal.record import BlockRef, RelFileLocator, XLogRecord

PGC = RelFileLocator(1663, 5, 1259)
LAY = LAYOUTS[15]


def row_data(oid: int, relfilenode: int, *, rewrite: int = 0, name: bytes = b"t") -> bytes:
    """A pg_class row's data (after t_hoff) as far as the layout reads, plus a tail."""
    data = bytearray(LAY.min_len + 12)
    struct.pack_into("<I", data, 0, oid)
    data[4 : 4 + len(name)] = name
    struct.pack_into("<I", data, LAY.relfilenode, relfilenode)
    struct.pack_into("<I", data, LAY.reltoastrelid, oid + 1)
    data[LAY.relkind] = ord("r")
    struct.pack_into("<I", data, LAY.relrewrite, rewrite)
    return bytes(data)


HOFF = 24  # a 23-byte header, padded to MAXALIGN: one byte between t_bits and data


def tuple_bytes(data: bytes) -> bytes:
    """xl_heap_header (t_infomask2, t_infomask, t_hoff) + padding + data."""
    return struct.pack("<HHB", 33, 0, HOFF) + b"\0" * (HOFF - 23) + data


def block(data: bytes = b"", *, image: bytes | None = None, block_id: int = 0) -> BlockRef:
    return BlockRef(block_id, PGC, 0, 0, 0, data, image, image is not None)


def record(rmid: int, info: int, main: bytes, *blocks: BlockRef, lsn: int = 0x1000) -> XLogRecord:
    return XLogRecord(lsn, lsn + 64, 64, 700, 0, info, rmid, 0, main, blocks, None, None)


def insert(offnum: int, data: bytes, lsn: int = 0x1000) -> XLogRecord:
    return record(
        rt.RM_HEAP_ID,
        rt.XLOG_HEAP_INSERT,
        struct.pack("<HB", offnum, 0),
        block(tuple_bytes(data)),
        lsn=lsn,
    )


def update(old_off: int, new_off: int, payload: bytes, flags: int, lsn: int = 0x2000) -> XLogRecord:
    main = struct.pack("<IHBBIH", 700, old_off, 0, flags, 0, new_off)
    return record(rt.RM_HEAP_ID, rt.XLOG_HEAP_HOT_UPDATE, main, block(payload), lsn=lsn)


def compressed(old: bytes, new: bytes) -> tuple[bytes, int]:
    """What log_heap_update logs for `new` on the old row's page: prefix and suffix
    lengths, then xl_heap_header, the padding, and the bytes between."""
    prefix = 0
    while prefix < min(len(old), len(new)) and old[prefix] == new[prefix]:
        prefix += 1
    suffix = 0
    while suffix < min(len(old), len(new)) - prefix and old[-1 - suffix] == new[-1 - suffix]:
        suffix += 1
    flags = 0
    head = b""
    if prefix >= 3:
        flags |= 1 << 5
        head += struct.pack("<H", prefix)
    else:
        prefix = 0
    if suffix >= 3:
        flags |= 1 << 6
        head += struct.pack("<H", suffix)
    else:
        suffix = 0
    middle = new[prefix : len(new) - suffix]
    return head + struct.pack("<HHB", 33, 0, HOFF) + b"\0" * (HOFF - 23) + middle, flags


def test_insert_then_compressed_update_rebuilds_the_row() -> None:
    """A row inserted whole, then updated to a new relfilenode with only the changed
    middle logged: the update's row is rebuilt from the old one's prefix and suffix."""
    tracker = HistoricClass(15, PGC, 0)
    old = row_data(16400, 16400)
    new = row_data(16400, 16500)
    (first,) = tracker.observe(insert(3, old))
    assert isinstance(first, ClassRowEvent) and first.relfilenode == 16400
    payload, flags = compressed(old, new)
    assert flags  # really compressed
    (second,) = tracker.observe(update(3, 4, payload, flags))
    assert isinstance(second, ClassRowEvent)
    assert (second.oid, second.relfilenode, second.toast_relid) == (16400, 16500, 16401)
    assert (second.tablespace, second.relkind, second.relrewrite) == (1663, "r", 0)


def test_compressed_update_of_an_unseen_row_is_lost_not_guessed() -> None:
    """The old row was never shown: the new one is reported lost, and a later update
    compressed against *it* is lost too (never rebuilt from stale bytes)."""
    tracker = HistoricClass(15, PGC, 0)
    old, new = row_data(16400, 16400), row_data(16400, 16500)
    payload, flags = compressed(old, new)
    (ev,) = tracker.observe(update(3, 4, payload, flags))
    assert isinstance(ev, ClassRowLostEvent) and (ev.block, ev.offset) == (0, 4)
    payload2, flags2 = compressed(new, row_data(16400, 16600))
    (ev2,) = tracker.observe(update(4, 5, payload2, flags2, lsn=0x3000))
    assert isinstance(ev2, ClassRowLostEvent)


def _page(rows: dict[int, bytes]) -> bytes:
    """An 8 kB heap page holding `rows` (offnum -> data) as normal items."""
    page = bytearray(8192)
    upper = 8192
    n = max(rows)
    for off in range(1, n + 1):
        data = rows.get(off)
        if data is None:
            continue
        tup = bytearray(HOFF) + data
        tup[22] = HOFF
        upper -= len(tup)
        page[upper : upper + len(tup)] = tup
        word = upper | (1 << 15) | (len(tup) << 17)
        struct.pack_into("<I", page, 24 + 4 * (off - 1), word)
    struct.pack_into("<HH", page, 12, 24 + 4 * n, upper)
    return bytes(page)


def test_rows_read_off_a_full_page_image() -> None:
    """A catalog update under a full-page image logs no tuple: the new row is read off
    the image, and later compressed updates are rebuilt against it."""
    tracker = HistoricClass(15, PGC, 0)
    new = row_data(16400, 16500)
    image = _page({1: row_data(16401, 16401), 2: new})
    main = struct.pack("<IHBBIH", 700, 1, 0, 0, 0, 2)
    rec = record(rt.RM_HEAP_ID, rt.XLOG_HEAP_UPDATE, main, block(image=image))
    (ev,) = tracker.observe(rec)
    assert isinstance(ev, ClassRowEvent) and (ev.oid, ev.relfilenode) == (16400, 16500)
    payload, flags = compressed(new, row_data(16400, 16600))
    (ev2,) = tracker.observe(update(2, 3, payload, flags, lsn=0x3000))
    assert isinstance(ev2, ClassRowEvent) and ev2.relfilenode == 16600


def test_relation_map_moves_pg_class() -> None:
    """XLOG_RELMAP_UPDATE of this database naming pg_class elsewhere (VACUUM FULL
    pg_class): the tracker follows it, drops the old pages, tells the reader."""
    tracker = HistoricClass(15, PGC, 0)
    moved: list[RelFileLocator] = []
    tracker.on_move = moved.append
    mapping = struct.pack("<ii", 0x592717, 2) + struct.pack("<IIII", 1259, 40000, 1249, 1249)
    body = mapping + b"\0" * (8 * 62 + 4)
    main = struct.pack("<IIi", 5, 1663, len(body)) + body
    other_db = struct.pack("<IIi", 6, 1663, len(body)) + body
    tracker.observe(record(rt.RM_RELMAP_ID, 0, other_db))
    assert tracker.locator == PGC
    assert tracker.observe(record(rt.RM_RELMAP_ID, 0, main)) == []
    assert tracker.locator == RelFileLocator(1663, 5, 40000)
    assert moved == [RelFileLocator(1663, 5, 40000)]
    bad = struct.pack("<IIi", 5, 1663, 8) + struct.pack("<ii", 0x1234, 1)
    with pytest.raises(DecodeError, match="relation map"):
        tracker.observe(record(rt.RM_RELMAP_ID, 0, bad))


def test_redo_floor_is_the_newest_redo_point_before() -> None:
    """The restart point: the newest decoded redo point at or before the LSN, the start
    before any, never past the LSN itself."""
    tracker = HistoricClass(15, PGC, 100)
    assert tracker.redo_floor(500) == 100
    tracker.note_checkpoint(300)
    tracker.note_checkpoint(600)
    tracker.note_checkpoint(50)  # before the start: no use
    assert tracker.redo_floor(500) == 300
    assert tracker.redo_floor(600) == 600
    assert tracker.redo_floor(250) == 100
    assert tracker.redo_floor(80) == 80


@settings(max_examples=2000, deadline=None)
@given(
    main=st.binary(max_size=40),
    data=st.binary(max_size=300),
    op=st.sampled_from(
        [
            (rt.RM_HEAP_ID, rt.XLOG_HEAP_INSERT),
            (rt.RM_HEAP_ID, rt.XLOG_HEAP_UPDATE),
            (rt.RM_HEAP_ID, rt.XLOG_HEAP_HOT_UPDATE | 0x80),
            (rt.RM_HEAP_ID, rt.XLOG_HEAP_INPLACE),
            (rt.RM_HEAP2_ID, rt.XLOG_HEAP2_MULTI_INSERT),
            (rt.RM_HEAP2_ID, rt.XLOG_HEAP2_MULTI_INSERT | 0x80),
            (rt.RM_RELMAP_ID, 0),
        ]
    ),
    image=st.one_of(st.none(), st.binary(min_size=0, max_size=64)),
)
def test_damaged_records_give_typed_errors_only(
    main: bytes, data: bytes, op: tuple[int, int], image: bytes | None
) -> None:
    """Any bytes in a pg_class record's main data, block data or image: rows, lost rows
    or a DecodeError naming the LSN, never another exception."""
    tracker = HistoricClass(18, PGC, 0)
    tracker.observe(insert(1, row_data(16400, 16400)))
    rec = record(op[0], op[1], main, block(data, image=image))
    try:
        events = tracker.observe(rec)
    except DecodeError as exc:
        assert exc.lsn == rec.lsn
        return
    assert all(isinstance(e, ClassRowEvent | ClassRowLostEvent) for e in events)
