"""Unit tests of Heap / Heap2 decoding on hand-built records (DecodeInsert .. NEW_CID)."""

from __future__ import annotations

import struct

import pytest

from service.decode.dispatch import decode
from service.decode.events import ChangeKind, HeapChange, InplaceEvent, NewCidEvent, TruncateEvent
from service.errors import DecodeError
from service.wal.record import RelFileLocator
from tests.service.decode.decode_support import LOC, LSN, block, heap_tuple, inval, record

HEAP, HEAP2 = 10, 9


@pytest.mark.parametrize("version", [15, 18])
def test_insert_yields_raw_tuple(version: int) -> None:
    """INSERT with XLH_INSERT_CONTAINS_NEW_TUPLE: one INSERT change with the raw tuple."""
    tup = heap_tuple(b"\x00" + b"abcd", natts=2, infomask=0x0803, hoff=24)
    rec = record(HEAP, 0x00, struct.pack("<HB", 2, 0x08), (block(tup),))
    [ev] = decode(rec, version)
    assert isinstance(ev, HeapChange)
    assert (ev.kind, ev.lsn, ev.xid, ev.locator, ev.block, ev.offset) == (
        ChangeKind.INSERT,
        LSN,
        735,
        LOC,
        7,
        2,
    )
    assert ev.new_tuple is not None and ev.old_tuple is None
    assert (ev.new_tuple.natts, ev.new_tuple.infomask, ev.new_tuple.hoff) == (2, 0x0803, 24)
    assert ev.new_tuple.data == b"\x00abcd" and ev.new_tuple.has_nulls
    assert ev.clear_toast_afterwards and not ev.on_toast_relation


def test_insert_init_page_speculative_and_toast_flags() -> None:
    """INSERT+INIT with IS_SPECULATIVE|ON_TOAST_RELATION: SPEC_INSERT, toast flag set."""
    rec = record(HEAP, 0x80, struct.pack("<HB", 1, 0x08 | 0x04 | 0x10), (block(heap_tuple(b"x")),))
    [ev] = decode(rec, 15)
    assert isinstance(ev, HeapChange)
    assert ev.kind is ChangeKind.SPEC_INSERT and ev.offset == 1 and ev.on_toast_relation


def test_insert_without_tuple_flag_is_skipped() -> None:
    """INSERT without CONTAINS_NEW_TUPLE (catalog, rewrite) queues nothing, as DecodeInsert."""
    assert decode(record(HEAP, 0x00, struct.pack("<HB", 3, 0x00)), 18) == []


def test_insert_errors_name_the_lsn() -> None:
    """Short main data, a missing block 0, and a tuple shorter than its header all fail."""
    with pytest.raises(DecodeError, match="0/150A3C8"):
        decode(record(HEAP, 0x00, b"\x01\x00"), 15)
    with pytest.raises(DecodeError, match="no block reference 0"):
        decode(record(HEAP, 0x00, struct.pack("<HB", 1, 0x08)), 15)
    with pytest.raises(DecodeError, match="shorter than xl_heap_header"):
        decode(record(HEAP, 0x00, struct.pack("<HB", 1, 0x08), (block(b"\x01\x00"),)), 15)


def _update_main(flags: int, old: bytes = b"") -> bytes:
    # old_xmax, old_offnum, old_infobits_set, flags, new_xmax, new_offnum
    return struct.pack("<IHBBIH", 735, 4, 0, flags, 0, 9) + old


@pytest.mark.parametrize("info", [0x20, 0x40, 0xA0, 0xC0])
def test_update_and_hot_update_with_old_key(info: int) -> None:
    """UPDATE / HOT_UPDATE (+INIT): new tuple from block 0, old key after xl_heap_update."""
    old = heap_tuple(b"key", natts=1, infomask=0x0002, hoff=24)
    rec = record(HEAP, info, _update_main(0x10 | 0x08, old), (block(heap_tuple(b"new")),))
    [ev] = decode(rec, 18)
    assert isinstance(ev, HeapChange)
    assert ev.kind is ChangeKind.UPDATE and ev.offset == 9 and ev.block == 7
    assert ev.new_tuple is not None and ev.new_tuple.data == b"new"
    assert ev.old_tuple is not None and ev.old_tuple.data == b"key" and ev.old_is_key


def test_update_old_tuple_full_and_no_new_tuple() -> None:
    """CONTAINS_OLD_TUPLE (REPLICA IDENTITY FULL) is not a key; no new tuple flag → None."""
    old = heap_tuple(b"whole row")
    [ev] = decode(record(HEAP, 0x20, _update_main(0x04, old), (block(),)), 15)
    assert isinstance(ev, HeapChange)
    assert ev.new_tuple is None and ev.old_tuple is not None and not ev.old_is_key


@pytest.mark.parametrize("flag", [0x20, 0x40])
def test_update_prefix_suffix_compression_is_refused(flag: int) -> None:
    """A new tuple compressed against the old page cannot be rebuilt: DecodeError."""
    rec = record(HEAP, 0x20, _update_main(0x10 | flag), (block(b"\x03\x00" + heap_tuple(b"x")),))
    with pytest.raises(DecodeError, match="prefix/suffix"):
        decode(rec, 15)


def test_update_truncated() -> None:
    """xl_heap_update shorter than 14 bytes is a DecodeError."""
    with pytest.raises(DecodeError, match="heap update record truncated"):
        decode(record(HEAP, 0x20, b"\x00" * 13, (block(),)), 18)


def test_delete_with_old_key_and_super_delete() -> None:
    """DELETE gives the old key; XLH_DELETE_IS_SUPER gives SPEC_ABORT."""
    old = heap_tuple(b"k1", natts=1)
    [ev] = decode(record(HEAP, 0x10, struct.pack("<IHBB", 735, 3, 0, 0x04) + old, (block(),)), 15)
    assert isinstance(ev, HeapChange)
    assert ev.kind is ChangeKind.DELETE and ev.offset == 3 and ev.new_tuple is None
    assert ev.old_tuple is not None and ev.old_tuple.data == b"k1" and ev.old_is_key
    [sup] = decode(record(HEAP, 0x10, struct.pack("<IHBB", 735, 3, 0, 0x08), (block(),)), 18)
    assert isinstance(sup, HeapChange)
    assert sup.kind is ChangeKind.SPEC_ABORT and sup.old_tuple is None
    with pytest.raises(DecodeError, match="heap delete record truncated"):
        decode(record(HEAP, 0x10, b"\x00" * 7, (block(),)), 18)


def test_confirm() -> None:
    """HEAP_CONFIRM becomes SPEC_CONFIRM at the confirmed offset."""
    [ev] = decode(record(HEAP, 0x50, struct.pack("<H", 6), (block(),)), 18)
    assert isinstance(ev, HeapChange)
    assert ev.kind is ChangeKind.SPEC_CONFIRM and ev.offset == 6 and ev.new_tuple is None


def test_truncate_relids_and_flags() -> None:
    """XLOG_HEAP_TRUNCATE carries relation OIDs and the cascade/restart flags."""
    main = struct.pack("<IIB3x", 5, 2, 0x03) + struct.pack("<II", 16384, 16390)
    [ev] = decode(record(HEAP, 0x30, main), 15)
    assert isinstance(ev, TruncateEvent)
    assert (ev.db_oid, ev.relids, ev.cascade, ev.restart_seqs) == (5, (16384, 16390), True, True)
    with pytest.raises(DecodeError, match="needs 20"):
        decode(record(HEAP, 0x30, main[:-4]), 15)


def test_inplace_pg15_and_pg18_layouts() -> None:
    """INPLACE: offnum only on PG15; on PG18 also the invalidation messages."""
    [ev15] = decode(record(HEAP, 0x70, struct.pack("<H", 4), (block(),), xid=0), 15)
    assert isinstance(ev15, InplaceEvent) and ev15.offset == 4 and ev15.invalidations == ()
    main18 = struct.pack("<H2xII?3xi", 4, 5, 1663, False, 1) + inval(-2, 5, 1259)
    [ev18] = decode(record(HEAP, 0x70, main18, (block(),), xid=0), 18)
    assert isinstance(ev18, InplaceEvent)
    assert [(i.kind, i.db_oid, i.rel_oid) for i in ev18.invalidations] == [(-2, 5, 1259)]


def test_lock_is_irrelevant() -> None:
    """XLOG_HEAP_LOCK is listed as irrelevant: no events, no error."""
    assert decode(record(HEAP, 0x60, b"\x00" * 8, (block(),)), 18) == []


def _multi_block(tuples: list[bytes]) -> bytes:
    out = b""
    for t in tuples:
        if len(out) % 2:
            out += b"\x00"  # SHORTALIGN before each xl_multi_insert_tuple
        out += struct.pack("<HHHB", len(t), 3, 0x0802, 24) + t
    return out


def test_multi_insert_offsets_alignment_and_toast_window() -> None:
    """MULTI_INSERT: one change per tuple, SHORTALIGNed headers, offsets from the array."""
    tuples = [b"abc", b"defgh", b"ij"]
    main = struct.pack("<BxH", 0x08 | 0x02, 3) + struct.pack("<3H", 5, 6, 8)
    evs = decode(record(HEAP2, 0x50, main, (block(_multi_block(tuples)),)), 15)
    assert [e.offset for e in evs if isinstance(e, HeapChange)] == [5, 6, 8]
    assert [e.new_tuple.data for e in evs if isinstance(e, HeapChange) and e.new_tuple] == tuples
    assert [e.clear_toast_afterwards for e in evs if isinstance(e, HeapChange)] == [
        False,
        False,
        True,
    ]
    assert all(isinstance(e, HeapChange) and e.new_tuple and e.new_tuple.natts == 3 for e in evs)


def test_multi_insert_init_page_has_implicit_offsets() -> None:
    """MULTI_INSERT+INIT logs no offsets: they are 1..n."""
    main = struct.pack("<BxH", 0x08, 2)
    evs = decode(record(HEAP2, 0xD0, main, (block(_multi_block([b"a", b"bb"])),)), 18)
    assert [e.offset for e in evs if isinstance(e, HeapChange)] == [1, 2]
    assert not any(isinstance(e, HeapChange) and e.clear_toast_afterwards for e in evs)


def test_multi_insert_errors_and_catalog_skip() -> None:
    """Overrunning tuples and short offset arrays fail; no tuple flag means no events."""
    main = struct.pack("<BxH", 0x08, 2) + struct.pack("<2H", 1, 2)
    with pytest.raises(DecodeError, match="overruns block data"):
        decode(record(HEAP2, 0x50, main, (block(_multi_block([b"a"])),)), 15)
    with pytest.raises(DecodeError, match="needs 8"):
        decode(record(HEAP2, 0x50, main[:-2], (block(),)), 15)
    assert decode(record(HEAP2, 0x50, struct.pack("<BxH", 0, 2)), 15) == []


def test_new_cid() -> None:
    """NEW_CID: target locator and tid (block hi/lo + posid), cids and top xid."""
    main = struct.pack("<IIIIIIIHHH", 734, 0, 0xFFFFFFFF, 0xFFFFFFFF, 1663, 5, 1249, 1, 2, 45)
    [ev] = decode(record(HEAP2, 0x70, main), 15)
    assert isinstance(ev, NewCidEvent)
    assert ev.locator == RelFileLocator(1663, 5, 1249)
    assert (ev.block, ev.offset, ev.cmin, ev.cmax, ev.top_xid) == (65538, 45, 0, 0xFFFFFFFF, 734)
    with pytest.raises(DecodeError, match="new_cid record truncated"):
        decode(record(HEAP2, 0x70, main[:-1]), 15)


@pytest.mark.parametrize("version", [15, 18])
@pytest.mark.parametrize("info", [0x00, 0x10, 0x20, 0x30, 0x40, 0x60])
def test_heap2_physical_records_are_irrelevant(version: int, info: int) -> None:
    """REWRITE, PRUNE*/VACUUM/FREEZE_PAGE, VISIBLE, LOCK_UPDATED: no events in either version."""
    assert decode(record(HEAP2, info, b"\x00" * 4), version) == []
