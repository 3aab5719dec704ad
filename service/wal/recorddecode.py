"""Record-body decoding: one verified WAL record's bytes in, an `XLogRecord` out
(DecodeXLogRecord, RestoreBlockImage in xlogreader.c).

Receives: from `XLogReader`'s walk (`service.wal.reader`), one record at a time in LSN
order: its LSN, its EndRecPtr and its bytes (header included, exactly `xl_tot_len`
long). The walk has already validated the record's page headers, its header
(`ValidXLogRecordHeader`) and its CRC32C.
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
- Memory: images are restored per record and not kept.
- Pure: no I/O. Not thread-safe.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

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

_REC_HDR = struct.Struct("<IIQBBxxI")  # XLogRecord
_IMG_HDR = struct.Struct("<HHB")  # XLogRecordBlockImageHeader
# RelFileLocator (spcOid, dbOid, relNumber): RelFileNode (spcNode, dbNode, relNode)
# up to 15, renamed in 16 with the same 12-byte layout.
_LOCATOR = struct.Struct("<III")

_ZERO_PAGE = bytes(BLCKSZ)


@dataclass(slots=True)
class _BlockHeader:
    """One block reference's header, read in the first pass of DecodeXLogRecord; its
    payloads (image, then data) follow all the headers."""

    block_id: int
    fork_flags: int
    data_len: int
    locator: RelFileLocator
    block: int
    img_len: int = 0
    hole_offset: int = 0
    hole_length: int = 0
    bimg_info: int = 0


class RecordDecoder:
    """The DecodeXLogRecord half of the reader: one per `XLogReader`.

    `fmt` is the WAL format of the stream (None until the reader has seen a page header,
    meaning the shared default); `XLogReader` sets it from the first page magic and it
    never changes after.
    """

    __slots__ = ("fmt",)

    def __init__(self) -> None:
        self.fmt: WalFormat | None = None

    # --- record body (DecodeXLogRecord) ----------------------------------------------

    def decode(self, lsn: int, end_lsn: int, record: bytes) -> XLogRecord:
        """The verified record `record` (header included) that starts at `lsn`."""
        fmt = self.fmt if self.fmt is not None else DEFAULT_FORMAT
        tot_len, xid, prev, info, rmid, crc = _REC_HDR.unpack_from(record)
        p = SIZE_OF_XLOG_RECORD
        remaining = tot_len - SIZE_OF_XLOG_RECORD
        datatotal = 0
        origin: int | None = None
        toplevel: int | None = None
        main_len = 0
        max_block_id = -1
        last_loc: RelFileLocator | None = None
        heads: list[_BlockHeader] = []
        # First pass: the headers, up to the main data length.
        while remaining > datatotal:
            block_id = record[p]
            p += 1
            remaining -= 1
            if block_id == XLR_BLOCK_ID_DATA_SHORT:
                if remaining < 1:
                    raise _short(lsn)
                main_len = record[p]
                p += 1
                remaining -= 1
                datatotal += main_len
                break
            if block_id == XLR_BLOCK_ID_DATA_LONG:
                if remaining < 4:
                    raise _short(lsn)
                main_len = U32.unpack_from(record, p)[0]
                p += 4
                remaining -= 4
                datatotal += main_len
                break
            if block_id == XLR_BLOCK_ID_ORIGIN:
                if remaining < 2:
                    raise _short(lsn)
                origin = U16.unpack_from(record, p)[0]
                p += 2
                remaining -= 2
                continue
            if block_id == XLR_BLOCK_ID_TOPLEVEL_XID:
                if remaining < 4:
                    raise _short(lsn)
                toplevel = U32.unpack_from(record, p)[0]
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
            fork_flags = record[p]
            data_len = U16.unpack_from(record, p + 1)[0]
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
                img_len, hole_off, bimg_info = _IMG_HDR.unpack_from(record, p)
                p += 5
                remaining -= 5
                has_hole = bimg_info & fmt.bkpimage_has_hole
                compressed = bimg_info & fmt.bkpimage_compressed_mask
                if has_hole and compressed:
                    if remaining < 2:
                        raise _short(lsn)
                    hole_len = U16.unpack_from(record, p)[0]
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
                loc = RelFileLocator(*_LOCATOR.unpack_from(record, p))
                p += 12
                remaining -= 12
                last_loc = loc
            elif last_loc is None:
                raise WalCorruptionError("BKPBLOCK_SAME_REL set but no previous rel", lsn=lsn)
            else:
                loc = last_loc
            if remaining < 4:
                raise _short(lsn)
            blk = U32.unpack_from(record, p)[0]
            p += 4
            remaining -= 4
            heads.append(
                _BlockHeader(
                    block_id, fork_flags, data_len, loc, blk, img_len, hole_off, hole_len, bimg_info
                )
            )
        if remaining != datatotal:
            raise _short(lsn)
        # Second pass: each block's image and data, in header order, then the main data.
        blocks: list[BlockRef] = []
        for h in heads:
            image: bytes | None = None
            if h.img_len:
                image = _restore_image(
                    fmt,
                    record[p : p + h.img_len],
                    hole_off=h.hole_offset,
                    hole_len=h.hole_length,
                    bimg_info=h.bimg_info,
                    lsn=lsn,
                    block_id=h.block_id,
                )
                p += h.img_len
            data = record[p : p + h.data_len]
            p += h.data_len
            blocks.append(
                BlockRef(
                    block_id=h.block_id,
                    locator=h.locator,
                    fork=h.fork_flags & BKPBLOCK_FORK_MASK,
                    block=h.block,
                    flags=h.fork_flags,
                    data=data,
                    image=image,
                    apply_image=bool(h.bimg_info & fmt.bkpimage_apply),
                    image_len=h.img_len,
                    hole_offset=h.hole_offset,
                    hole_length=h.hole_length,
                    bimg_info=h.bimg_info,
                )
            )
        return XLogRecord(
            lsn=lsn,
            end_lsn=end_lsn,
            total_len=tot_len,
            xid=xid,
            prev=prev,
            info=info,
            rmid=rmid,
            crc=crc,
            main_data=record[p : p + main_len],
            blocks=tuple(blocks),
            toplevel_xid=toplevel,
            origin=origin,
        )


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
