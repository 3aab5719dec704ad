//! WAL page header validation (XLogReaderValidatePageHeader in xlogreader.c; the native
//! twin of `XLogReader._check_page`).
//!
//! Receives: the bytes of one page header (short or long, the caller has checked that
//! they are all there) and the LSN of the page.
//! Hands on: `(xlp_info, xlp_rem_len, header size)`, after checking, in this order: the
//! magic (pins the version; an unknown magic is `UnsupportedVersionError`, a change of
//! magic is corruption), the info bits, the long header exactly on segment starts (with
//! segment size, block size and system identifier cross-checked), xlp_pageaddr, and a
//! timeline that never goes backwards.
//! State: `PageState` remembers the version, system identifier and timeline seen so far.
//! As in the Python reader it is updated as each check passes, so a header that fails a
//! later check may already have pinned the version or system identifier.

use super::format::{
    format_for_magic, WalFormat, SIZE_OF_LONG_PHD, SIZE_OF_SHORT_PHD, XLOG_BLCKSZ, XLP_ALL_FLAGS,
    XLP_LONG_HEADER,
};
use super::{format_lsn, u16_at, u32_at, u64_at, Result, WalError};

/// What page validation remembers between pages (XLogReaderState's latest page fields).
#[derive(Debug, Clone)]
pub struct PageState {
    /// The segment size the reader was opened with; every long header must agree.
    pub seg: u64,
    /// None until the first page header: then the version of the whole stream.
    pub fmt: Option<&'static WalFormat>,
    /// xlp_sysid of the first long header seen.
    pub sysid: Option<u64>,
    /// The highest timeline seen (0 before any page).
    pub tli: u32,
}

impl PageState {
    pub fn new(seg: u64) -> Self {
        PageState {
            seg,
            fmt: None,
            sysid: None,
            tli: 0,
        }
    }

    /// Validate the page header at `buf[hoff..]` for WAL page `page`.
    pub fn check_page(&mut self, buf: &[u8], hoff: usize, page: u64) -> Result<(u16, u32, u64)> {
        let magic = u16_at(buf, hoff);
        let info = u16_at(buf, hoff + 2);
        let tli = u32_at(buf, hoff + 4);
        let pageaddr = u64_at(buf, hoff + 8);
        let rem_len = u32_at(buf, hoff + 16);
        let fmt = format_for_magic(magic, page)?;
        match self.fmt {
            None => self.fmt = Some(fmt),
            Some(seen) if !std::ptr::eq(seen, fmt) => {
                return Err(WalError::corruption(
                    format!(
                        "page magic 0x{magic:04X} differs from 0x{:04X} seen earlier",
                        seen.page_magic
                    ),
                    page,
                ))
            }
            Some(_) => {}
        }
        if info & !XLP_ALL_FLAGS != 0 {
            return Err(WalError::corruption(
                format!("invalid info bits {info:04X} in page header"),
                page,
            ));
        }
        let seg_start = page % self.seg == 0;
        let hsize = if info & XLP_LONG_HEADER != 0 {
            if !seg_start {
                return Err(WalError::corruption(
                    "long page header not at a segment start",
                    page,
                ));
            }
            let sysid = u64_at(buf, hoff + 24);
            let seg_size = u32_at(buf, hoff + 32);
            let blcksz = u32_at(buf, hoff + 36);
            if u64::from(seg_size) != self.seg {
                return Err(WalError::corruption(
                    format!(
                        "WAL segment size {seg_size} in page header, reader expects {}",
                        self.seg
                    ),
                    page,
                ));
            }
            if u64::from(blcksz) != XLOG_BLCKSZ {
                return Err(WalError::corruption(
                    format!("WAL block size {blcksz} is not supported"),
                    page,
                ));
            }
            match self.sysid {
                None => self.sysid = Some(sysid),
                Some(seen) if seen != sysid => {
                    return Err(WalError::corruption(
                        format!("WAL belongs to system {sysid}, earlier pages to {seen}"),
                        page,
                    ))
                }
                Some(_) => {}
            }
            SIZE_OF_LONG_PHD
        } else if seg_start {
            return Err(WalError::corruption(
                "first page of a segment lacks a long header",
                page,
            ));
        } else {
            SIZE_OF_SHORT_PHD
        };
        if pageaddr != page {
            return Err(WalError::corruption(
                format!("unexpected pageaddr {}", format_lsn(pageaddr)),
                page,
            ));
        }
        if tli < self.tli {
            return Err(WalError::corruption(
                format!("out-of-sequence timeline ID {tli} (after {})", self.tli),
                page,
            ));
        }
        self.tli = tli;
        Ok((info, rem_len, hsize))
    }
}
