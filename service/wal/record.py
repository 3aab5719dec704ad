"""One parsed WAL record: the contract between the XLog reader and the decoder.

The reader (`service.wal.reader`) produces `XLogRecord` values in LSN order, each with
its CRC already verified and its block references parsed (`DecodeXLogRecord` in
xlogreader.c). The decoder (`service.decode`) consumes them and never looks at raw page
bytes. Everything here is immutable after construction.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(slots=True, frozen=True)
class RelFileLocator:
    """A relation's physical identity (`RelFileLocator`; `RelFileNode` before PG16)."""

    spc_oid: int
    db_oid: int
    rel_number: int  # relfilenode, not the pg_class oid


@dataclass(slots=True, frozen=True)
class BlockRef:
    """A block reference of a record (`DecodedBkpBlock`).

    Invariant: `image`, when present, is a full BLCKSZ page with its hole filled with
    zeros and decompressed (pglz, lz4); `data` is the rmgr's per-block payload or b"".
    """

    block_id: int
    locator: RelFileLocator
    fork: int
    block: int
    flags: int  # fork_flags byte as written (BKPBLOCK_*)
    data: bytes
    image: bytes | None
    apply_image: bool  # BKPIMAGE_APPLY: the image is needed for redo, not only for hints
    # How the image was stored (all 0 when there is no image): its length in the record
    # (compressed, without the hole), the hole, and the raw bimg_info bits.
    image_len: int = 0
    hole_offset: int = 0
    hole_length: int = 0
    bimg_info: int = 0


@dataclass(slots=True, frozen=True)
class XLogRecord:
    """A verified WAL record (`XLogRecord` header + decoded body).

    `lsn` is where the record starts (`ReadRecPtr`); `end_lsn` is `EndRecPtr`: where the
    next record is read, i.e. just past the record's last byte rounded up to MAXALIGN
    (for a record that crosses pages, counted on its last page; for XLOG_SWITCH, the
    next segment start). It is the value decode.c hands on as a commit's end_lsn.
    `total_len` is xl_tot_len (headers included, page headers and padding excluded).
    `toplevel_xid` is set only on the first record of a subtransaction that carries
    XLR_BLOCK_ID_TOPLEVEL_XID (252); `origin` only when XLR_BLOCK_ID_ORIGIN (253) is present.
    """

    lsn: int
    end_lsn: int
    total_len: int
    xid: int
    prev: int
    info: int  # full xl_info byte; the rmgr-specific part is info & 0xF0
    rmid: int
    crc: int
    main_data: bytes
    blocks: tuple[BlockRef, ...]
    toplevel_xid: int | None
    origin: int | None

    @property
    def rmgr_info(self) -> int:
        """The rmgr-specific bits of xl_info (`XLogRecGetInfo(r) & ~XLR_INFO_MASK`)."""
        return self.info & 0xF0

    def block(self, block_id: int) -> BlockRef | None:
        """The block reference with this id, as `XLogRecGetBlockTag` finds it."""
        for ref in self.blocks:
            if ref.block_id == block_id:
                return ref
        return None
