"""Record-body decoding: one verified WAL record's bytes in, an `XLogRecord` out
(DecodeXLogRecord, RestoreBlockImage in xlogreader.c).

Receives: from `XLogReader`'s walk (`service.wal.reader`), one record at a time in LSN
order, as the buffer that holds it, the offset of its header, and the header fields the
walk already unpacked. The walk has already validated the record's page headers, its
header (`ValidXLogRecordHeader`) and its CRC32C; the bytes are those of exactly one
record (header included, `tot_len` long).
Hands on: an immutable `XLogRecord` whose `BlockRef`s carry the block data sliced out of
the record and any full-page image restored to a whole BLCKSZ page (decompressed with
pglz or lz4, hole zero-filled), plus main data, top-level xid and replication origin.

Guarantees:
- Block headers are checked as DecodeXLogRecord checks them: block ids in range and
  ascending, BKPBLOCK_HAS_DATA consistent with the data length, image headers
  consistent (hole, compression, length), BKPBLOCK_SAME_REL only after a relation, and
  the headers plus payloads accounting for exactly `tot_len`. Any inconsistency raises
  `WalCorruptionError` with the record's `lsn`; a zstd-compressed image raises
  `WalError` (pgcdc cannot decompress zstd). Nothing is skipped.
- The result equals what the dataclass constructors would build; the construction
  twins below are only a faster way to build it.
- Memory: a cache of `RelFileLocator`s keyed by their 12 WAL bytes, capped at 4096
  entries per decoder; images are restored per record and not kept.
- Pure: no I/O. Not thread-safe.

Speed: the commonest record shape (one block with data and its own relation, short main
data, no image) is parsed by one unpack; every other shape takes the general loop.
"""

from __future__ import annotations

import struct
from dataclasses import fields
from typing import cast

import lz4.block

from service._binary import U16, U32
from service.errors import DecodeError, WalCorruptionError, WalError
from service.wal import pglz
from service.wal.format import (
    BKPBLOCK_FORK_MASK,
    BKPBLOCK_HAS_DATA,
    BKPBLOCK_HAS_IMAGE,
    BKPBLOCK_SAME_REL,
    BLCKSZ,
    DEFAULT_FORMAT,
    SIZE_OF_XLOG_RECORD,
    XLR_BLOCK_ID_DATA_LONG,
    XLR_BLOCK_ID_DATA_SHORT,
    XLR_BLOCK_ID_ORIGIN,
    XLR_BLOCK_ID_TOPLEVEL_XID,
    XLR_MAX_BLOCK_ID,
    WalFormat,
)
from service.wal.record import BlockRef, RelFileLocator, XLogRecord

_BLK_HDR = struct.Struct("<BBH")  # XLogRecordBlockHeader (id, fork_flags, data_length)
_IMG_HDR = struct.Struct("<HHB")  # XLogRecordBlockImageHeader
# RelFileLocator (spcOid, dbOid, relNumber): RelFileNode (spcNode, dbNode, relNode)
# up to 15, renamed in 16 with the same 12-byte layout.
_LOCATOR = struct.Struct("<III")

_ZERO_PAGE = bytes(BLCKSZ)


# Construction twins. XLogRecord and BlockRef are frozen slotted dataclasses, whose
# __init__ sets each field through object.__setattr__ (~0.9 us per object, the largest
# cost of records()). A twin has the same __slots__, so its plain __init__ stores fast
# and then retypes the instance (__class__ assignment between layout-identical slotted
# classes): the result is an ordinary, immutable XLogRecord / BlockRef, equal to one
# built by the dataclass __init__. The twins take the classes' own __slots__; the check
# below fails the import if walrecord.py gains a field without the twin following.
class _XLogRecordInit:
    __slots__ = XLogRecord.__slots__

    def __init__(
        self,
        lsn: int,
        end_lsn: int,
        total_len: int,
        xid: int,
        prev: int,
        info: int,
        rmid: int,
        crc: int,
        main_data: bytes,
        blocks: tuple[BlockRef, ...],
        toplevel_xid: int | None,
        origin: int | None,
    ) -> None:
        self.lsn = lsn
        self.end_lsn = end_lsn
        self.total_len = total_len
        self.xid = xid
        self.prev = prev
        self.info = info
        self.rmid = rmid
        self.crc = crc
        self.main_data = main_data
        self.blocks = blocks
        self.toplevel_xid = toplevel_xid
        self.origin = origin
        # Retype to the layout-identical frozen class (see above).
        self.__class__ = XLogRecord  # type: ignore[assignment]


class _BlockRefInit:
    __slots__ = BlockRef.__slots__

    def __init__(
        self,
        block_id: int,
        locator: RelFileLocator,
        fork: int,
        block: int,
        flags: int,
        data: bytes,
        image: bytes | None,
        apply_image: bool,
        image_len: int,
        hole_offset: int,
        hole_length: int,
        bimg_info: int,
    ) -> None:
        self.block_id = block_id
        self.locator = locator
        self.fork = fork
        self.block = block
        self.flags = flags
        self.data = data
        self.image = image
        self.apply_image = apply_image
        self.image_len = image_len
        self.hole_offset = hole_offset
        self.hole_length = hole_length
        self.bimg_info = bimg_info
        self.__class__ = BlockRef  # type: ignore[assignment]


def _check_twin(twin: type, cls: type) -> None:
    code = twin.__dict__["__init__"].__code__
    params = list(code.co_varnames[1 : code.co_argcount])
    if params != [f.name for f in fields(cls)]:
        raise RuntimeError(f"{twin.__name__} no longer matches the fields of {cls.__name__}")


_check_twin(_XLogRecordInit, XLogRecord)
_check_twin(_BlockRefInit, BlockRef)
_new_record = cast("type[XLogRecord]", _XLogRecordInit)
_new_blockref = cast("type[BlockRef]", _BlockRefInit)


class RecordDecoder:
    """The DecodeXLogRecord half of the reader: one per `XLogReader`.

    `fmt` is the WAL format of the stream (None until the reader has seen a page header,
    meaning the shared default); `XLogReader` sets it from the first page magic and it
    never changes after. `_locators` maps 12 WAL bytes to their RelFileLocator (capped
    at 4096 entries).
    """

    __slots__ = ("_locators", "fmt")

    def __init__(self) -> None:
        self.fmt: WalFormat | None = None
        self._locators: dict[bytes, RelFileLocator] = {}

    # --- record body (DecodeXLogRecord) ----------------------------------------------

    def decode(
        self,
        lsn: int,
        end_lsn: int,
        tot_len: int,
        xid: int,
        prev: int,
        info: int,
        rmid: int,
        crc: int,
        buf: bytes,
        off: int,
    ) -> XLogRecord:
        # The verified record at buf[off:off + tot_len] (header included).
        p = off + SIZE_OF_XLOG_RECORD
        if tot_len >= _MIN_ONE_BLOCK:
            # The commonest shape (a heap insert/update/delete without page image):
            # block 0 with data and its own relation, then short main data, nothing
            # else. One unpack parses every header; tot_len must then account for
            # exactly the two payloads, which is the general path's final check.
            block_id, flags, data_len, key, blk, main_id, main_len = _unpack_one_block(buf, p)
            if (
                not block_id
                and main_id == XLR_BLOCK_ID_DATA_SHORT
                and flags & _ONE_BLOCK_FLAGS_MASK == BKPBLOCK_HAS_DATA
                and data_len
                and tot_len == _MIN_ONE_BLOCK + data_len + main_len
            ):
                locators = self._locators
                loc = locators.get(key)
                if loc is None:
                    loc = RelFileLocator(*_LOCATOR.unpack(key))
                    if len(locators) < 4096:
                        locators[key] = loc
                p += _ONE_BLOCK_HEADERS
                data_end = p + data_len
                return _new_record(
                    lsn,
                    end_lsn,
                    tot_len,
                    xid,
                    prev,
                    info,
                    rmid,
                    crc,
                    buf[data_end : data_end + main_len] if main_len else b"",
                    (
                        _new_blockref(
                            0,
                            loc,
                            flags & BKPBLOCK_FORK_MASK,
                            blk,
                            flags,
                            buf[p:data_end],
                            None,
                            False,
                            0,
                            0,
                            0,
                            0,
                        ),
                    ),
                    None,
                    None,
                )
        fmt = self.fmt if self.fmt is not None else DEFAULT_FORMAT
        remaining = tot_len - SIZE_OF_XLOG_RECORD
        datatotal = 0
        origin: int | None = None
        toplevel: int | None = None
        main_len = 0
        max_block_id = -1
        last_loc: RelFileLocator | None = None
        # (block_id, fork_flags, data_len, img_len, hole_off, hole_len, bimg_info, loc, blk)
        heads: list[tuple[int, int, int, int, int, int, int, RelFileLocator, int]] = []
        locators = self._locators
        while remaining > datatotal:
            block_id = buf[p]
            p += 1
            remaining -= 1
            if block_id == XLR_BLOCK_ID_DATA_SHORT:
                if remaining < 1:
                    raise _short(lsn)
                main_len = buf[p]
                p += 1
                remaining -= 1
                datatotal += main_len
                break
            if block_id == XLR_BLOCK_ID_DATA_LONG:
                if remaining < 4:
                    raise _short(lsn)
                main_len = U32.unpack_from(buf, p)[0]
                p += 4
                remaining -= 4
                datatotal += main_len
                break
            if block_id == XLR_BLOCK_ID_ORIGIN:
                if remaining < 2:
                    raise _short(lsn)
                origin = U16.unpack_from(buf, p)[0]
                p += 2
                remaining -= 2
                continue
            if block_id == XLR_BLOCK_ID_TOPLEVEL_XID:
                if remaining < 4:
                    raise _short(lsn)
                toplevel = U32.unpack_from(buf, p)[0]
                p += 4
                remaining -= 4
                continue
            if block_id > XLR_MAX_BLOCK_ID:
                raise WalCorruptionError(f"invalid block_id {block_id}", lsn=lsn)
            if block_id <= max_block_id:
                raise WalCorruptionError(f"out-of-order block_id {block_id}", lsn=lsn)
            max_block_id = block_id
            if remaining < 3:
                raise _short(lsn)
            fork_flags = buf[p]
            data_len = U16.unpack_from(buf, p + 1)[0]
            p += 3
            remaining -= 3
            has_data = fork_flags & BKPBLOCK_HAS_DATA
            if has_data and data_len == 0:
                raise WalCorruptionError("BKPBLOCK_HAS_DATA set, but no data included", lsn=lsn)
            if not has_data and data_len != 0:
                raise WalCorruptionError(
                    f"BKPBLOCK_HAS_DATA not set, but data length is {data_len}", lsn=lsn
                )
            datatotal += data_len
            img_len = hole_off = hole_len = bimg_info = 0
            if fork_flags & BKPBLOCK_HAS_IMAGE:
                if remaining < 5:
                    raise _short(lsn)
                img_len, hole_off, bimg_info = _IMG_HDR.unpack_from(buf, p)
                p += 5
                remaining -= 5
                has_hole = bimg_info & fmt.bkpimage_has_hole
                compressed = bimg_info & fmt.bkpimage_compressed_mask
                if has_hole and compressed:
                    if remaining < 2:
                        raise _short(lsn)
                    hole_len = U16.unpack_from(buf, p)[0]
                    p += 2
                    remaining -= 2
                elif has_hole:
                    hole_len = BLCKSZ - img_len
                datatotal += img_len
                if (
                    (has_hole and (hole_off == 0 or hole_len <= 0 or img_len == BLCKSZ))
                    or (not has_hole and (hole_off != 0 or hole_len != 0))
                    or (compressed and img_len == BLCKSZ)
                    or (not has_hole and not compressed and img_len != BLCKSZ)
                    or hole_off + hole_len > BLCKSZ
                    or img_len == 0
                ):
                    raise WalCorruptionError(
                        f"invalid block image header (length {img_len}, hole offset "
                        f"{hole_off}, hole length {hole_len}, flags 0x{bimg_info:02X}) "
                        f"for block_id {block_id}",
                        lsn=lsn,
                    )
            if not fork_flags & BKPBLOCK_SAME_REL:
                if remaining < 12:
                    raise _short(lsn)
                key = buf[p : p + 12]
                loc = locators.get(key)
                if loc is None:
                    loc = RelFileLocator(*_LOCATOR.unpack_from(buf, p))
                    if len(locators) < 4096:
                        locators[key] = loc
                p += 12
                remaining -= 12
                last_loc = loc
            elif last_loc is None:
                raise WalCorruptionError("BKPBLOCK_SAME_REL set but no previous rel", lsn=lsn)
            else:
                loc = last_loc
            if remaining < 4:
                raise _short(lsn)
            blk = U32.unpack_from(buf, p)[0]
            p += 4
            remaining -= 4
            heads.append(
                (block_id, fork_flags, data_len, img_len, hole_off, hole_len, bimg_info, loc, blk)
            )
        if remaining != datatotal:
            raise _short(lsn)
        blocks: list[BlockRef] = []
        for (
            block_id,
            fork_flags,
            data_len,
            img_len,
            hole_off,
            hole_len,
            bimg_info,
            loc,
            blk,
        ) in heads:
            image: bytes | None = None
            if img_len:
                image = _restore_image(
                    fmt,
                    buf[p : p + img_len],
                    hole_off=hole_off,
                    hole_len=hole_len,
                    bimg_info=bimg_info,
                    lsn=lsn,
                    block_id=block_id,
                )
                p += img_len
            data = buf[p : p + data_len] if data_len else b""
            p += data_len
            blocks.append(
                _new_blockref(
                    block_id,
                    loc,
                    fork_flags & BKPBLOCK_FORK_MASK,
                    blk,
                    fork_flags,
                    data,
                    image,
                    bool(bimg_info & fmt.bkpimage_apply),
                    img_len,
                    hole_off,
                    hole_len,
                    bimg_info,
                )
            )
        main_data = buf[p : p + main_len] if main_len else b""
        return _new_record(
            lsn,
            end_lsn,
            tot_len,
            xid,
            prev,
            info,
            rmid,
            crc,
            main_data,
            tuple(blocks),
            toplevel,
            origin,
        )


# XLogRecordBlockHeader (id, fork_flags, data_length), RelFileLocator (kept as the
# 12-byte cache key), BlockNumber, then XLR_BLOCK_ID_DATA_SHORT and its length byte.
_ONE_BLOCK = struct.Struct("<BBH12sIBB")
_unpack_one_block = _ONE_BLOCK.unpack_from
_ONE_BLOCK_HEADERS = _ONE_BLOCK.size  # 22
_MIN_ONE_BLOCK = SIZE_OF_XLOG_RECORD + _ONE_BLOCK_HEADERS
_ONE_BLOCK_FLAGS_MASK = BKPBLOCK_HAS_IMAGE | BKPBLOCK_HAS_DATA | BKPBLOCK_SAME_REL


def _short(lsn: int) -> WalCorruptionError:
    return WalCorruptionError("record with invalid length (block headers overrun it)", lsn=lsn)


def _restore_image(
    fmt: WalFormat,
    img: bytes,
    *,
    hole_off: int,
    hole_len: int,
    bimg_info: int,
    lsn: int,
    block_id: int,
) -> bytes:
    """The full BLCKSZ page of a block image: decompressed, hole zero-filled
    (RestoreBlockImage)."""
    want = BLCKSZ - hole_len
    if bimg_info & fmt.bkpimage_compress_pglz:
        try:
            raw = pglz.decompress(img, want, lsn=lsn)
        except DecodeError as exc:
            raise WalCorruptionError(
                f"could not decompress pglz image of block_id {block_id}: {exc.message}", lsn=lsn
            ) from exc
    elif bimg_info & fmt.bkpimage_compress_lz4:
        try:
            raw = lz4.block.decompress(img, uncompressed_size=want)
        except lz4.block.LZ4BlockError as exc:
            raise WalCorruptionError(
                f"could not decompress lz4 image of block_id {block_id}", lsn=lsn
            ) from exc
        if len(raw) != want:
            raise WalCorruptionError(
                f"lz4 image of block_id {block_id} is {len(raw)} bytes, expected {want}",
                lsn=lsn,
            )
    elif bimg_info & fmt.bkpimage_compress_zstd:
        raise WalError(
            f"block_id {block_id} has a zstd-compressed image; pgcdc cannot decompress zstd "
            "(set wal_compression to pglz or lz4)",
            lsn=lsn,
        )
    else:
        raw = img
    if hole_len == 0:
        return raw
    return raw[:hole_off] + _ZERO_PAGE[:hole_len] + raw[hole_off:]
