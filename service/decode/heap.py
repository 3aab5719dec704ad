"""Heap and Heap2 record parsers for the decoder (DecodeInsert .. DecodeMultiInsert).

Receives: an `XLogRecord` of rmgr Heap or Heap2 whose op the caller has already
looked up in the version's table as DECODED.
Hands on: the events decode.c would queue in the reorder buffer or hand the snapshot
builder, in record order: `HeapChange` (one per tuple; a multi-insert gives one per
tuple, all with the record's LSN), `TruncateEvent`, `InplaceEvent`, `NewCidEvent`.
Pure: no I/O, no state.

Tuples stay raw (`RawTuple`): `xl_heap_header` (t_infomask2, t_infomask, t_hoff;
SizeOfHeapHeader = 5) and the bytes after it, which start where
`HeapTupleHeaderData.t_bits` starts (offset 23), as DecodeXLogTuple copies them.

Errors (`DecodeError`, always with the LSN): main data shorter than its struct, a
missing block 0 where the record needs one, a tuple shorter than its header, a
multi-insert whose tuples overrun the block data, and a new tuple that is
prefix/suffix-compressed against the old page (XLH_UPDATE_PREFIX/SUFFIX_FROM_OLD):
the old page is not available outside the server, and PostgreSQL never compresses
tuples of logically-logged tables, so meeting one means the input is not what it
should be.
"""

from __future__ import annotations

import struct

from service._binary import I32, U16
from service.decode.events import (
    ChangeKind,
    Event,
    HeapChange,
    InplaceEvent,
    Invalidation,
    NewCidEvent,
    RawTuple,
    TruncateEvent,
)
from service.decode.xact import SIZE_OF_INVAL_MSG, parse_invalidations
from service.errors import DecodeError
from service.wal.record import BlockRef, RelFileLocator, XLogRecord

XLH_INSERT_LAST_IN_MULTI = 1 << 1
XLH_INSERT_IS_SPECULATIVE = 1 << 2
XLH_INSERT_CONTAINS_NEW_TUPLE = 1 << 3
XLH_INSERT_ON_TOAST_RELATION = 1 << 4

XLH_UPDATE_CONTAINS_OLD_TUPLE = 1 << 2
XLH_UPDATE_CONTAINS_OLD_KEY = 1 << 3
XLH_UPDATE_CONTAINS_NEW_TUPLE = 1 << 4
XLH_UPDATE_PREFIX_FROM_OLD = 1 << 5
XLH_UPDATE_SUFFIX_FROM_OLD = 1 << 6

XLH_DELETE_CONTAINS_OLD_TUPLE = 1 << 1
XLH_DELETE_CONTAINS_OLD_KEY = 1 << 2
XLH_DELETE_IS_SUPER = 1 << 3

XLH_TRUNCATE_CASCADE = 1 << 0
XLH_TRUNCATE_RESTART_SEQS = 1 << 1

XLOG_HEAP_INIT_PAGE = 0x80

SIZE_OF_HEAP_HEADER = 5
SIZE_OF_HEAP_INSERT = 3
SIZE_OF_HEAP_DELETE = 8
SIZE_OF_HEAP_UPDATE = 14
SIZE_OF_HEAP_TRUNCATE = 12  # offsetof(xl_heap_truncate, relids)
SIZE_OF_HEAP_CONFIRM = 2
SIZE_OF_HEAP_INPLACE_15 = 2  # PG15..17: offnum only
MIN_SIZE_OF_HEAP_INPLACE_18 = 20  # PG18: offnum, dbId, tsId, relcacheInitFileInval, nmsgs
SIZE_OF_HEAP_MULTI_INSERT = 4  # offsetof(xl_heap_multi_insert, offsets)
SIZE_OF_MULTI_INSERT_TUPLE = 7
SIZE_OF_HEAP_NEW_CID = 34
HEAP_NATTS_MASK = 0x07FF
FIRST_OFFSET_NUMBER = 1

_HEAP_HEADER = struct.Struct("<HHB")  # t_infomask2, t_infomask, t_hoff
_INSERT = struct.Struct("<HB")  # offnum, flags
_DELETE = struct.Struct("<IHBB")  # xmax, offnum, infobits_set, flags
# old_xmax, old_offnum, old_infobits_set, flags, new_xmax, new_offnum
_UPDATE = struct.Struct("<IHBBIH")
_TRUNCATE = struct.Struct("<IIB")  # dbId, nrelids, flags
_MULTI = struct.Struct("<BxH")  # flags, ntuples
_MULTI_TUPLE = struct.Struct("<HHHB")  # datalen, t_infomask2, t_infomask, t_hoff
# top_xid, cmin, cmax, combocid, spcOid, dbOid, relNumber, bi_hi, bi_lo, posid
_NEW_CID = struct.Struct("<IIIIIIIHHH")

_unpack_header = _HEAP_HEADER.unpack_from
_unpack_insert = _INSERT.unpack_from
_INSERT_KIND = ChangeKind.INSERT
_SPEC_INSERT = ChangeKind.SPEC_INSERT


def _short(record: XLogRecord, size: int, what: str) -> DecodeError:
    return DecodeError(
        f"{what} record truncated: main data has {len(record.main_data)} bytes, needs {size}",
        lsn=record.lsn,
    )


def _block0(record: XLogRecord, what: str) -> BlockRef:
    blocks = record.blocks
    if blocks and blocks[0].block_id == 0:
        return blocks[0]
    ref = record.block(0)
    if ref is None:
        raise DecodeError(f"{what} record has no block reference 0", lsn=record.lsn)
    return ref


def decode_tuple(data: bytes, start: int, record: XLogRecord, what: str) -> RawTuple:
    """`xl_heap_header` + tuple bytes from `data[start:]`, as DecodeXLogTuple."""
    if len(data) - start < SIZE_OF_HEAP_HEADER:
        raise DecodeError(
            f"{what}: tuple shorter than xl_heap_header ({len(data) - start} bytes)",
            lsn=record.lsn,
        )
    infomask2, infomask, hoff = _unpack_header(data, start)
    return RawTuple(
        natts=infomask2 & HEAP_NATTS_MASK,
        infomask=infomask,
        infomask2=infomask2,
        hoff=hoff,
        data=data[start + SIZE_OF_HEAP_HEADER :],
    )


def decode_insert(record: XLogRecord) -> list[Event]:
    """XLOG_HEAP_INSERT, as DecodeInsert."""
    main = record.main_data
    if len(main) < SIZE_OF_HEAP_INSERT:
        raise _short(record, SIZE_OF_HEAP_INSERT, "heap insert")
    offnum, flags = _unpack_insert(main)
    # raw_heap_insert (rewrites) and catalogs log no tuple: nothing to queue
    if not flags & XLH_INSERT_CONTAINS_NEW_TUPLE:
        return []
    blocks = record.blocks
    ref = blocks[0] if blocks and not blocks[0].block_id else _block0(record, "heap insert")
    kind = _SPEC_INSERT if flags & XLH_INSERT_IS_SPECULATIVE else _INSERT_KIND
    data = ref.data
    if len(data) < SIZE_OF_HEAP_HEADER:
        raise DecodeError(
            f"heap insert: tuple shorter than xl_heap_header ({len(data)} bytes)", lsn=record.lsn
        )
    infomask2, infomask, hoff = _unpack_header(data)
    return [
        HeapChange(
            record.lsn,
            record.xid,
            kind,
            ref.locator,
            ref.block,
            offnum,
            RawTuple(
                infomask2 & HEAP_NATTS_MASK, infomask, infomask2, hoff, data[SIZE_OF_HEAP_HEADER:]
            ),
            None,
            False,
            True,
            flags & XLH_INSERT_ON_TOAST_RELATION != 0,
            record.origin,
        )
    ]


def decode_update(record: XLogRecord) -> list[Event]:
    """XLOG_HEAP_UPDATE and XLOG_HEAP_HOT_UPDATE (same layout), as DecodeUpdate."""
    main = record.main_data
    if len(main) < SIZE_OF_HEAP_UPDATE:
        raise _short(record, SIZE_OF_HEAP_UPDATE, "heap update")
    _old_xmax, _old_off, _infobits, flags, _new_xmax, new_offnum = _UPDATE.unpack_from(main)
    ref = _block0(record, "heap update")
    new_tuple = None
    if flags & XLH_UPDATE_CONTAINS_NEW_TUPLE:
        if flags & (XLH_UPDATE_PREFIX_FROM_OLD | XLH_UPDATE_SUFFIX_FROM_OLD):
            raise DecodeError(
                f"heap update new tuple is prefix/suffix-compressed against the old page "
                f"(flags 0x{flags:02X}); its bytes cannot be rebuilt without that page",
                lsn=record.lsn,
            )
        new_tuple = decode_tuple(ref.data, 0, record, "heap update new tuple")
    old_tuple = None
    if flags & (XLH_UPDATE_CONTAINS_OLD_TUPLE | XLH_UPDATE_CONTAINS_OLD_KEY):
        # caution, as in DecodeUpdate: the old tuple follows xl_heap_update unaligned
        old_tuple = decode_tuple(main, SIZE_OF_HEAP_UPDATE, record, "heap update old tuple")
    return [
        HeapChange(
            record.lsn,
            record.xid,
            ChangeKind.UPDATE,
            ref.locator,
            ref.block,
            new_offnum,
            new_tuple,
            old_tuple,
            old_tuple is not None and not flags & XLH_UPDATE_CONTAINS_OLD_TUPLE,
            True,
            False,
            record.origin,
        )
    ]


def decode_delete(record: XLogRecord) -> list[Event]:
    """XLOG_HEAP_DELETE, as DecodeDelete (XLH_DELETE_IS_SUPER: speculative abort)."""
    main = record.main_data
    if len(main) < SIZE_OF_HEAP_DELETE:
        raise _short(record, SIZE_OF_HEAP_DELETE, "heap delete")
    _xmax, offnum, _infobits, flags = _DELETE.unpack_from(main)
    ref = _block0(record, "heap delete")
    old_tuple = None
    if flags & (XLH_DELETE_CONTAINS_OLD_TUPLE | XLH_DELETE_CONTAINS_OLD_KEY):
        old_tuple = decode_tuple(main, SIZE_OF_HEAP_DELETE, record, "heap delete old tuple")
    kind = ChangeKind.SPEC_ABORT if flags & XLH_DELETE_IS_SUPER else ChangeKind.DELETE
    return [
        HeapChange(
            record.lsn,
            record.xid,
            kind,
            ref.locator,
            ref.block,
            offnum,
            None,
            old_tuple,
            old_tuple is not None and not flags & XLH_DELETE_CONTAINS_OLD_TUPLE,
            True,
            False,
            record.origin,
        )
    ]


def decode_confirm(record: XLogRecord) -> list[Event]:
    """XLOG_HEAP_CONFIRM, as DecodeSpecConfirm."""
    main = record.main_data
    if len(main) < SIZE_OF_HEAP_CONFIRM:
        raise _short(record, SIZE_OF_HEAP_CONFIRM, "heap confirm")
    ref = _block0(record, "heap confirm")
    return [
        HeapChange(
            record.lsn,
            record.xid,
            ChangeKind.SPEC_CONFIRM,
            ref.locator,
            ref.block,
            U16.unpack_from(main)[0],
            None,
            None,
            False,
            True,
            False,
            record.origin,
        )
    ]


def decode_truncate(record: XLogRecord) -> list[Event]:
    """XLOG_HEAP_TRUNCATE, as DecodeTruncate: relation OIDs, not relfilenodes."""
    main = record.main_data
    if len(main) < SIZE_OF_HEAP_TRUNCATE:
        raise _short(record, SIZE_OF_HEAP_TRUNCATE, "heap truncate")
    db_oid, nrelids, flags = _TRUNCATE.unpack_from(main)
    need = SIZE_OF_HEAP_TRUNCATE + 4 * nrelids
    if len(main) < need:
        raise _short(record, need, "heap truncate")
    relids: tuple[int, ...] = struct.unpack_from(f"<{nrelids}I", main, SIZE_OF_HEAP_TRUNCATE)
    return [
        TruncateEvent(
            lsn=record.lsn,
            xid=record.xid,
            db_oid=db_oid,
            relids=relids,
            cascade=bool(flags & XLH_TRUNCATE_CASCADE),
            restart_seqs=bool(flags & XLH_TRUNCATE_RESTART_SEQS),
            origin=record.origin,
        )
    ]


def decode_inplace(record: XLogRecord) -> list[Event]:
    """XLOG_HEAP_INPLACE: a catalog tuple updated in place (PG18: with its invals)."""
    main = record.main_data
    if len(main) < SIZE_OF_HEAP_INPLACE_15:
        raise _short(record, SIZE_OF_HEAP_INPLACE_15, "heap inplace")
    ref = _block0(record, "heap inplace")
    invals: tuple[Invalidation, ...] = ()
    if len(main) >= MIN_SIZE_OF_HEAP_INPLACE_18:
        nmsgs = I32.unpack_from(main, 16)[0]
        need = MIN_SIZE_OF_HEAP_INPLACE_18 + SIZE_OF_INVAL_MSG * nmsgs
        if nmsgs < 0 or len(main) < need:
            raise _short(record, need, "heap inplace")
        invals = parse_invalidations(main, MIN_SIZE_OF_HEAP_INPLACE_18, nmsgs)
    return [
        InplaceEvent(
            lsn=record.lsn,
            xid=record.xid,
            locator=ref.locator,
            block=ref.block,
            offset=U16.unpack_from(main)[0],
            invalidations=invals,
        )
    ]


def decode_multi_insert(record: XLogRecord) -> list[Event]:
    """XLOG_HEAP2_MULTI_INSERT, as DecodeMultiInsert: one HeapChange per tuple."""
    main = record.main_data
    if len(main) < SIZE_OF_HEAP_MULTI_INSERT:
        raise _short(record, SIZE_OF_HEAP_MULTI_INSERT, "heap multi-insert")
    flags, ntuples = _MULTI.unpack_from(main)
    # catalogs and unlogged-for-logical relations: no tuple data to decode
    if not flags & XLH_INSERT_CONTAINS_NEW_TUPLE:
        return []
    init_page = bool(record.info & XLOG_HEAP_INIT_PAGE)
    if init_page:
        # heap_xlog_multi_insert: on a fresh page the offsets are implicit and not logged
        offsets: tuple[int, ...] = tuple(range(FIRST_OFFSET_NUMBER, FIRST_OFFSET_NUMBER + ntuples))
    else:
        need = SIZE_OF_HEAP_MULTI_INSERT + 2 * ntuples
        if len(main) < need:
            raise _short(record, need, "heap multi-insert")
        offsets = struct.unpack_from(f"<{ntuples}H", main, SIZE_OF_HEAP_MULTI_INSERT)
    ref = _block0(record, "heap multi-insert")
    data = ref.data
    size = len(data)
    locator: RelFileLocator = ref.locator
    block = ref.block
    lsn = record.lsn
    xid = record.xid
    origin = record.origin
    last_clears = bool(flags & XLH_INSERT_LAST_IN_MULTI)
    out: list[Event] = []
    pos = 0
    unpack = _MULTI_TUPLE.unpack_from
    for i in range(ntuples):
        pos = (pos + 1) & ~1  # SHORTALIGN: each xl_multi_insert_tuple is 2-aligned
        body = pos + SIZE_OF_MULTI_INSERT_TUPLE
        if body > size:
            raise DecodeError(
                f"heap multi-insert tuple {i} of {ntuples} overruns block data ({size} bytes)",
                lsn=lsn,
            )
        datalen, infomask2, infomask, hoff = unpack(data, pos)
        end = body + datalen
        if end > size:
            raise DecodeError(
                f"heap multi-insert tuple {i} of {ntuples} overruns block data ({size} bytes)",
                lsn=lsn,
            )
        tup = RawTuple(infomask2 & HEAP_NATTS_MASK, infomask, infomask2, hoff, data[body:end])
        # only the last tuple of the last record of one heap_multi_insert() call
        # ends the toast reassembly window
        clear = last_clears and i + 1 == ntuples
        out.append(
            HeapChange(
                lsn,
                xid,
                ChangeKind.INSERT,
                locator,
                block,
                offsets[i],
                tup,
                None,
                False,
                clear,
                False,
                origin,
            )
        )
        pos = end
    return out


def decode_new_cid(record: XLogRecord) -> list[Event]:
    """XLOG_HEAP2_NEW_CID (`xl_heap_new_cid`), for SnapBuildProcessNewCid."""
    main = record.main_data
    if len(main) < SIZE_OF_HEAP_NEW_CID:
        raise _short(record, SIZE_OF_HEAP_NEW_CID, "heap2 new_cid")
    top_xid, cmin, cmax, combocid, spc, db, rel, bi_hi, bi_lo, posid = _NEW_CID.unpack_from(main)
    return [
        NewCidEvent(
            lsn=record.lsn,
            xid=record.xid,
            locator=RelFileLocator(spc, db, rel),
            block=(bi_hi << 16) | bi_lo,
            offset=posid,
            cmin=cmin,
            cmax=cmax,
            combocid=combocid,
            top_xid=top_xid,
        )
    ]
