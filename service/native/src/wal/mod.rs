//! The WAL stage of the native core: raw WAL bytes in, verified, decoded records out.
//!
//! Receives: contiguous raw WAL (page headers included) through `WalReader::feed`, in
//! LSN order, in chunks of any size, exactly as `service.wal.reader.XLogReader` does.
//! Hands on: `WalReader::walk` returns, per call, every complete record the bytes fed so
//! far contain, in LSN order, each CRC32C-checked and decoded, plus the error (if any)
//! that stopped the walk after them. The Python glue (`service.wal.native`) yields the
//! batch and then raises the error, so a caller sees exactly what the Python reader's
//! generator would have shown it.
//!
//! This is a port of the Python reference, not a second design: the same checks in the
//! same order, the same error kinds, messages and LSNs, the same position bookkeeping.
//! The differential tests (tests/service/wal/test_native_reader.py) hold the two to that.
//!
//! Modules, by the PostgreSQL function each mirrors:
//! - `format`: the per-version facts (service/walformat.py).
//! - `page`: XLogReaderValidatePageHeader.
//! - `reader`: XLogDecodeNextRecord, ValidXLogRecordHeader, ValidXLogRecord, and the
//!   XLogFindNextRecord start rule.
//! - `record`: DecodeXLogRecord and RestoreBlockImage.
//! - `pglz`, `lz4`: the two page-image decompressors (pglz_decompress,
//!   LZ4_decompress_safe).
//!
//! Errors: every failure is a `WalError` whose `kind` names the Python class it becomes
//! (`WalError`, `WalCorruptionError`, `UnsupportedVersionError`) and whose `lsn` is the
//! one the Python reader would name. Nothing here panics on any input; the boundary
//! (lib.rs) still catches a panic and turns it into a typed error.
//!
//! Pure: no I/O, no Python. Not thread-safe (one reader, one caller).

pub mod format;
pub mod lz4;
pub mod page;
pub mod pglz;
pub mod reader;
pub mod record;

use std::fmt;

/// Which class of `service.errors` a failure becomes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    /// `WalError`: WAL that is unusable for a reason other than damage (a zstd image,
    /// a chunk that does not line up, a bad argument).
    Wal,
    /// `WalCorruptionError`: a page header, record header, block header or CRC check
    /// failed.
    Corruption,
    /// `UnsupportedVersionError`: a page magic with no format table.
    Unsupported,
}

impl ErrorKind {
    /// The name the Python glue maps onto a class of `service.errors`.
    pub fn class_name(self) -> &'static str {
        match self {
            ErrorKind::Wal => "WalError",
            ErrorKind::Corruption => "WalCorruptionError",
            ErrorKind::Unsupported => "UnsupportedVersionError",
        }
    }
}

/// A typed failure of the WAL stage. `message` is the Python reader's message, word for
/// word; `lsn` is where it was found (a record start, or a page start for page-header
/// failures), as the Python reader names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WalError {
    pub kind: ErrorKind,
    pub message: String,
    pub lsn: u64,
}

impl WalError {
    pub fn corruption(message: impl Into<String>, lsn: u64) -> Self {
        WalError {
            kind: ErrorKind::Corruption,
            message: message.into(),
            lsn,
        }
    }

    pub fn wal(message: impl Into<String>, lsn: u64) -> Self {
        WalError {
            kind: ErrorKind::Wal,
            message: message.into(),
            lsn,
        }
    }
}

impl fmt::Display for WalError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}: {} (lsn={})",
            self.kind.class_name(),
            self.message,
            format_lsn(self.lsn)
        )
    }
}

impl std::error::Error for WalError {}

pub type Result<T> = std::result::Result<T, WalError>;

/// An LSN the way PostgreSQL prints it (as service.lsn.format_lsn).
pub fn format_lsn(lsn: u64) -> String {
    format!("{:X}/{:X}", lsn >> 32, lsn & 0xFFFF_FFFF)
}

/// Little-endian field readers. Callers have checked the bounds; `get` keeps even a
/// wrong caller from panicking (a short read yields zeros, which every check rejects).
pub(crate) fn u16_at(b: &[u8], off: usize) -> u16 {
    match b.get(off..off + 2) {
        Some(s) => u16::from_le_bytes([s[0], s[1]]),
        None => 0,
    }
}

pub(crate) fn u32_at(b: &[u8], off: usize) -> u32 {
    match b.get(off..off + 4) {
        Some(s) => u32::from_le_bytes([s[0], s[1], s[2], s[3]]),
        None => 0,
    }
}

pub(crate) fn u64_at(b: &[u8], off: usize) -> u64 {
    match b.get(off..off + 8) {
        Some(s) => u64::from_le_bytes([s[0], s[1], s[2], s[3], s[4], s[5], s[6], s[7]]),
        None => 0,
    }
}

/// MAXALIGN (8 on every platform PostgreSQL writes WAL for that pgcdc reads).
pub(crate) fn maxalign(n: u64) -> u64 {
    (n + 7) & !7
}

#[cfg(test)]
mod tests;
