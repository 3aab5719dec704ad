//! Per-version WAL format facts: the tables the reader consults, and nothing else
//! (the native twin of service/walformat.py).
//!
//! Receives: a page magic (`xlp_magic`) read from a WAL page header.
//! Hands on: the `WalFormat` of that PostgreSQL major version, or an
//! `UnsupportedVersionError` naming the LSN. A version with no table is never read by
//! guesswork. Sources: xlog_internal.h, xlogrecord.h, xlogdefs.h, rmgrlist.h of
//! REL_15_STABLE .. REL_18_STABLE. Keep this table and walformat.py's equal.

use super::{ErrorKind, WalError};

pub const XLOG_BLCKSZ: u64 = 8192;
pub const BLCKSZ: usize = 8192;
pub const PAGE_MASK: u64 = XLOG_BLCKSZ - 1;
pub const DEFAULT_SEGMENT_SIZE: u64 = 16 * 1024 * 1024;

pub const SIZE_OF_SHORT_PHD: u64 = 24;
pub const SIZE_OF_LONG_PHD: u64 = 40;
pub const SIZE_OF_XLOG_RECORD: u64 = 24;
/// offsetof(XLogRecord, xl_crc): the CRC covers the header up to here.
pub const XL_CRC_OFFSET: usize = 20;
/// XLogRecordMaxSize (PG16+); PG15 never writes more either (see walformat.py).
pub const XLOG_RECORD_MAX_SIZE: u64 = 1020 * 1024 * 1024;

pub const XLP_FIRST_IS_CONTRECORD: u16 = 0x0001;
pub const XLP_LONG_HEADER: u16 = 0x0002;
pub const XLP_ALL_FLAGS: u16 = 0x000F;

pub const XLR_MAX_BLOCK_ID: u8 = 32;
pub const XLR_BLOCK_ID_DATA_SHORT: u8 = 255;
pub const XLR_BLOCK_ID_DATA_LONG: u8 = 254;
pub const XLR_BLOCK_ID_ORIGIN: u8 = 253;
pub const XLR_BLOCK_ID_TOPLEVEL_XID: u8 = 252;

pub const BKPBLOCK_FORK_MASK: u8 = 0x0F;
pub const BKPBLOCK_HAS_IMAGE: u8 = 0x10;
pub const BKPBLOCK_HAS_DATA: u8 = 0x20;
pub const BKPBLOCK_SAME_REL: u8 = 0x80;

pub const RM_XLOG_ID: u8 = 0;
pub const XLOG_SWITCH: u8 = 0x40;
pub const RM_MIN_CUSTOM_ID: u8 = 128;

/// The facts of one major version's WAL that the reader needs (WalFormat in Python).
#[derive(Debug, PartialEq, Eq)]
pub struct WalFormat {
    pub version: u32,
    pub page_magic: u16,
    /// RM_MAX_BUILTIN_ID: ids above it are valid only in the custom range 128..=255.
    pub rm_max_builtin_id: u8,
    pub bkpimage_has_hole: u8,
    pub bkpimage_apply: u8,
    pub bkpimage_compress_pglz: u8,
    pub bkpimage_compress_lz4: u8,
    pub bkpimage_compress_zstd: u8,
}

impl WalFormat {
    /// The bits of bimg_info that mean "compressed" (BKPIMAGE_COMPRESSED()).
    pub fn compressed_mask(&self) -> u8 {
        self.bkpimage_compress_pglz | self.bkpimage_compress_lz4 | self.bkpimage_compress_zstd
    }

    /// RmgrIdIsValid: a built-in id of this version, or the custom range.
    pub fn rmid_is_valid(&self, rmid: u8) -> bool {
        rmid <= self.rm_max_builtin_id || rmid >= RM_MIN_CUSTOM_ID
    }
}

// BKPIMAGE bits as redefined in PG15 (pglz/lz4/zstd split), unchanged through PG18;
// 22 built-in rmgrs (XLOG .. LogicalMessage) in all four.
const fn format(version: u32, page_magic: u16) -> WalFormat {
    WalFormat {
        version,
        page_magic,
        rm_max_builtin_id: 21,
        bkpimage_has_hole: 0x01,
        bkpimage_apply: 0x02,
        bkpimage_compress_pglz: 0x04,
        bkpimage_compress_lz4: 0x08,
        bkpimage_compress_zstd: 0x10,
    }
}

pub static FORMATS: [WalFormat; 4] = [
    format(15, 0xD110),
    format(16, 0xD113),
    format(17, 0xD116),
    format(18, 0xD118),
];

/// The format of records read before any page header was seen (a stream that starts
/// mid-page): every supported version shares the record layout, so this is exact.
pub static DEFAULT_FORMAT: &WalFormat = &FORMATS[3];

/// The WalFormat for a page magic, or UnsupportedVersionError naming `lsn`
/// (format_for_magic).
pub fn format_for_magic(magic: u16, lsn: u64) -> Result<&'static WalFormat, WalError> {
    match FORMATS.iter().find(|f| f.page_magic == magic) {
        Some(f) => Ok(f),
        None => {
            let supported: Vec<String> = FORMATS
                .iter()
                .map(|f| format!("{} 0x{:04X}", f.version, f.page_magic))
                .collect();
            Err(WalError {
                kind: ErrorKind::Unsupported,
                message: format!(
                    "WAL page magic 0x{magic:04X} is not a supported PostgreSQL version \
                     (supported: {})",
                    supported.join(", ")
                ),
                lsn,
            })
        }
    }
}
