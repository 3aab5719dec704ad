"""Per-version WAL format facts: the tables the XLog reader consults, and nothing else.

Receives: a page magic (`xlp_magic`) read from a WAL page header.
Hands on: the `WalFormat` for that PostgreSQL major version, or raises
`UnsupportedVersionError` naming the LSN. A version with no table here is never read
by guesswork.

The constants that are the same in every supported version (page and record header
sizes, block ids, BKPBLOCK flag bits) are module-level names; the ones that have ever
differed between versions (BKPIMAGE flag bits changed in PG15, the built-in rmgr
list) live in the per-version `WalFormat`. Sources: xlog_internal.h, xlogrecord.h,
xlogdefs.h, rmgrlist.h of REL_15_STABLE .. REL_18_STABLE.
"""

from __future__ import annotations

from dataclasses import dataclass

from service.errors import UnsupportedVersionError

# --- constants shared by PG15..PG18 ---------------------------------------------------

XLOG_BLCKSZ = 8192  # WAL page size; xlp_xlog_blcksz cross-checks it
BLCKSZ = 8192  # relation page size; restored page images have this length
DEFAULT_SEGMENT_SIZE = 16 * 1024 * 1024
MAXALIGN = 8

SIZE_OF_SHORT_PHD = 24  # MAXALIGN(sizeof(XLogPageHeaderData)) = MAXALIGN(20)
SIZE_OF_LONG_PHD = 40  # MAXALIGN(sizeof(XLogLongPageHeaderData)) = MAXALIGN(36)
SIZE_OF_XLOG_RECORD = 24  # offsetof(XLogRecord, xl_crc) + sizeof(pg_crc32c)
XL_CRC_OFFSET = 20  # offsetof(XLogRecord, xl_crc): the CRC covers the header up to here

# XLogRecordMaxSize (PG16+: 1020 MB). PG15 allowed up to MaxAllocSize, but its
# XLogRecordAssemble never produces more than this either, so one bound serves all.
XLOG_RECORD_MAX_SIZE = 1020 * 1024 * 1024

# xlp_info bits
XLP_FIRST_IS_CONTRECORD = 0x0001
XLP_LONG_HEADER = 0x0002
XLP_BKP_REMOVABLE = 0x0004
XLP_FIRST_IS_OVERWRITE_CONTRECORD = 0x0008
XLP_ALL_FLAGS = 0x000F

# xl_info masks
XLR_INFO_MASK = 0x0F
XLR_RMGR_INFO_MASK = 0xF0

# block ids (xlogrecord.h)
XLR_MAX_BLOCK_ID = 32
XLR_BLOCK_ID_DATA_SHORT = 255
XLR_BLOCK_ID_DATA_LONG = 254
XLR_BLOCK_ID_ORIGIN = 253
XLR_BLOCK_ID_TOPLEVEL_XID = 252

# fork_flags bits
BKPBLOCK_FORK_MASK = 0x0F
BKPBLOCK_HAS_IMAGE = 0x10
BKPBLOCK_HAS_DATA = 0x20
BKPBLOCK_WILL_INIT = 0x40
BKPBLOCK_SAME_REL = 0x80

# rmgr ids the reader itself needs
RM_XLOG_ID = 0
XLOG_SWITCH = 0x40  # XLOG rmgr info for a segment switch
RM_MIN_CUSTOM_ID = 128
RM_MAX_CUSTOM_ID = 255

_BUILTIN_RMGRS_15_18 = (
    "XLOG",
    "Transaction",
    "Storage",
    "CLOG",
    "Database",
    "Tablespace",
    "MultiXact",
    "RelMap",
    "Standby",
    "Heap2",
    "Heap",
    "Btree",
    "Hash",
    "Gin",
    "Gist",
    "Sequence",
    "SPGist",
    "BRIN",
    "CommitTs",
    "ReplicationOrigin",
    "Generic",
    "LogicalMessage",
)


@dataclass(frozen=True, slots=True)
class WalFormat:
    """The facts of one major version's WAL that the reader needs.

    `rmgr_names[i]` is the name pg_waldump prints for built-in rmgr id `i`; ids above
    `len(rmgr_names) - 1` are valid only in the custom range 128..255 (RmgrIdIsValid).
    The BKPIMAGE_* values are bit masks of `bimg_info`.
    """

    version: int
    page_magic: int
    rmgr_names: tuple[str, ...]
    bkpimage_has_hole: int
    bkpimage_apply: int
    bkpimage_compress_pglz: int
    bkpimage_compress_lz4: int
    bkpimage_compress_zstd: int

    @property
    def rm_max_builtin_id(self) -> int:
        """RM_MAX_BUILTIN_ID of this version."""
        return len(self.rmgr_names) - 1

    @property
    def bkpimage_compressed_mask(self) -> int:
        """The bits of bimg_info that mean "compressed" (BKPIMAGE_COMPRESSED())."""
        return (
            self.bkpimage_compress_pglz | self.bkpimage_compress_lz4 | self.bkpimage_compress_zstd
        )

    def rmid_is_valid(self, rmid: int) -> bool:
        """RmgrIdIsValid: a built-in id of this version, or the custom range."""
        return rmid <= self.rm_max_builtin_id or RM_MIN_CUSTOM_ID <= rmid <= RM_MAX_CUSTOM_ID

    def rmgr_name(self, rmid: int) -> str:
        """The rmgr name pg_waldump prints (custom rmgrs as `custom###`)."""
        if rmid <= self.rm_max_builtin_id:
            return self.rmgr_names[rmid]
        return f"custom{rmid:03d}"


def _format(version: int, magic: int) -> WalFormat:
    # BKPIMAGE bits as redefined in PG15 (pglz/lz4/zstd split); unchanged through PG18.
    return WalFormat(
        version=version,
        page_magic=magic,
        rmgr_names=_BUILTIN_RMGRS_15_18,
        bkpimage_has_hole=0x01,
        bkpimage_apply=0x02,
        bkpimage_compress_pglz=0x04,
        bkpimage_compress_lz4=0x08,
        bkpimage_compress_zstd=0x10,
    )


# XLOG_PAGE_MAGIC of each REL_n_STABLE's xlog_internal.h (measured on 15.18, 16.15,
# 17.10 and 18.6 too). What each bump changed, as far as pgcdc reads it: the page and
# record headers, block references and BKPIMAGE bits are the same in all four; the
# per-version record facts live where they are handled (service/wal/rmgr.py's tables,
# service/decode/xact.py's stats item, service/decode/heap.py's inplace record).
FORMATS: dict[int, WalFormat] = {
    # 15: BKPIMAGE_COMPRESS_PGLZ/LZ4/ZSTD replace BKPIMAGE_IS_COMPRESSED; custom rmgrs
    # (ids 128..255); xl_xact_* carry dropped stats (XACT_XINFO_HAS_DROPPED_STATS).
    0xD110: _format(15, 0xD110),
    # 16: RelFileNode renamed RelFileLocator (same 12 bytes: spcOid, dbOid, relNumber);
    # isCatalogRel added to the prune/freeze/visible and index-delete records (for
    # logical decoding on a standby), which pgcdc does not decode; XLogRecordMaxSize.
    0xD113: _format(16, 0xD113),
    # 17: HEAP2 prune/vacuum/freeze records merged into one xl_heap_prune with three
    # info values; XLOG_CHECKPOINT_REDO; xl_end_of_recovery gains wal_level; clog and
    # commit_ts truncate page numbers become int64.
    0xD116: _format(17, 0xD116),
    # 18: xl_xact_stats_item's objid becomes 64-bit; xl_heap_inplace carries the
    # catalog invalidations. (initdb turns data checksums on by default from 18, which
    # adds XLOG_FPI_FOR_HINT records but no format change.)
    0xD118: _format(18, 0xD118),
}

# The format used for records read before any page header has been seen (a stream
# that starts mid-page). Every supported version shares the record layout, so this
# is exact, and the first page header then pins the real version.
DEFAULT_FORMAT = FORMATS[0xD118]


def format_for_magic(magic: int, *, lsn: int) -> WalFormat:
    """The WalFormat for a page magic, or UnsupportedVersionError naming `lsn`."""
    fmt = FORMATS.get(magic)
    if fmt is None:
        raise UnsupportedVersionError(
            f"WAL page magic 0x{magic:04X} is not a supported PostgreSQL version "
            f"(supported: {', '.join(f'{f.version} 0x{m:04X}' for m, f in FORMATS.items())})",
            lsn=lsn,
        )
    return fmt


def format_for_version(version: int) -> WalFormat:
    """The WalFormat for a major version number, or UnsupportedVersionError."""
    for fmt in FORMATS.values():
        if fmt.version == version:
            return fmt
    raise UnsupportedVersionError(f"PostgreSQL {version} has no WAL format table")
