//! The page/record walk: fed WAL bytes in, a batch of verified records out
//! (XLogDecodeNextRecord, ValidXLogRecordHeader, ValidXLogRecord and the
//! XLogFindNextRecord start rule of xlogreader.c; the native twin of
//! `service.wal.reader.XLogReader`'s walk, `_check_header` and `_assemble`).
//!
//! Receives: `feed(data, at_lsn)` exactly as the Python reader: contiguous chunks, the
//! first one at or before the start position (possibly mid-page), later ones either
//! appended or restarting at or before the position once all fed bytes were consumed.
//! Hands on: `walk(headers_only)` returns every complete record available, in LSN order,
//! and the error that stopped the walk after them, if any. A walk stops without error
//! when it needs more bytes, or at the end of WAL (`end_of_wal`, sticky: a zero
//! xl_tot_len at a record boundary, or an all-zero page header where the walk next needs
//! a page: where a record would start, or a page a record continues on. That is the
//! live tail of pg_wal, a pre-allocated or recycled segment zero-filled past what
//! PostgreSQL wrote; recovery ends the WAL where XLogReaderValidatePageHeader rejects
//! such a page. The position then stays at the record that is not complete. A page
//! header that is not all zeros but has a bad magic stays an error.)
//!
//! Guarantees (those of the Python reader, check for check):
//! - Every page header a record touches is validated (`page::PageState::check_page`),
//!   except the header of the page the first chunk starts in when it starts past it.
//! - Every record header passes ValidXLogRecordHeader (length, rmgr id, xl_prev equal to
//!   the previous record's LSN, or below the record's own LSN for the first one) and
//!   every CRC32C is verified before the record is decoded.
//! - Continuation pages carry XLP_FIRST_IS_CONTRECORD with xlp_rem_len equal to what the
//!   record still lacks.
//! - After XLOG_SWITCH the next record is read at the next segment start.
//! - On an error the position is the failing record (a decode error, as in Python, is
//!   raised after the position moved past the record).
//! - `rewind(n)` puts the reader back exactly where the Python reader stands after
//!   yielding the n-th record of the last batch: the glue calls it when a caller stops
//!   iterating early. To make that possible the walk drops consumed bytes at the start
//!   of the next walk, not at its end; `buffered_bytes` reports what the Python reader
//!   would hold.
//! - Memory: the unconsumed tail plus the last batch's bytes.

use super::format::{
    WalFormat, DEFAULT_FORMAT, PAGE_MASK, RM_XLOG_ID, SIZE_OF_LONG_PHD, SIZE_OF_SHORT_PHD,
    SIZE_OF_XLOG_RECORD, XLOG_BLCKSZ, XLOG_RECORD_MAX_SIZE, XLOG_SWITCH, XLP_FIRST_IS_CONTRECORD,
    XL_CRC_OFFSET,
};
use super::page::PageState;
use super::record::{decode, Body, Header};
use super::{format_lsn, maxalign, u32_at, u64_at, Result, WalError};

const BAD_CRC: &str = "incorrect resource manager data checksum";

/// Where a walked record's bytes are: in the reader's buffer, or reassembled from pages.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Bytes {
    /// `buf[off..off + total_len]` of the reader, valid until the next `feed`/`walk`.
    InBuffer(usize),
    /// A record that crossed pages, gathered without the page headers.
    Assembled(Vec<u8>),
}

/// One walked record: its header, its decoded body (None in a headers-only walk) and
/// where its bytes are.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Walked {
    pub header: Header,
    pub body: Option<Body>,
    pub bytes: Bytes,
}

/// The reader's position after a record, as the Python reader has it at the `yield`.
#[derive(Debug, Clone, Copy)]
struct Mark {
    prev: u64,
    next: u64,
    valid_upto: u64,
    tli: u32,
}

/// XLogReaderState for one stream. Field invariants are those of the Python reader.
#[derive(Debug)]
pub struct WalReader {
    verify_crc: bool,
    buf: Vec<u8>,
    /// LSN of buf[0].
    buf_lsn: u64,
    /// LSN just past the last byte fed (None before the first feed).
    fed_end: Option<u64>,
    /// NextRecPtr: where the next record (or page header) is read.
    next: u64,
    /// ReadRecPtr of the previous record, when known.
    prev: Option<u64>,
    /// A page-aligned start skips a continuation at the top of its page.
    find_first: bool,
    /// Pages below this LSN have been validated.
    valid_upto: u64,
    pages: PageState,
    end_of_wal: bool,
    /// The position after each record of the last walk (for `rewind`).
    marks: Vec<Mark>,
}

impl WalReader {
    /// A reader positioned at `start_lsn` (XLogBeginRead).
    pub fn new(
        start_lsn: u64,
        segment_size: u64,
        prev_lsn: Option<u64>,
        verify_crc: bool,
    ) -> Result<Self> {
        if segment_size < XLOG_BLCKSZ || !segment_size.is_power_of_two() {
            return Err(WalError::wal(
                format!("invalid WAL segment size {segment_size}"),
                start_lsn,
            ));
        }
        let page_off = start_lsn & PAGE_MASK;
        if start_lsn & 7 != 0 || (0 < page_off && page_off < SIZE_OF_SHORT_PHD) {
            return Err(WalError::wal(
                "start position is not a possible record start",
                start_lsn,
            ));
        }
        Ok(WalReader {
            verify_crc,
            buf: Vec::new(),
            buf_lsn: start_lsn,
            fed_end: None,
            next: start_lsn,
            prev: prev_lsn,
            find_first: page_off == 0,
            valid_upto: start_lsn & !PAGE_MASK,
            pages: PageState::new(segment_size),
            end_of_wal: false,
            marks: Vec::new(),
        })
    }

    /// LSN just past the last byte fed (None before the first feed).
    pub fn fed_end(&self) -> Option<u64> {
        self.fed_end
    }

    pub fn end_of_wal(&self) -> bool {
        self.end_of_wal
    }

    pub fn next_lsn(&self) -> u64 {
        self.next
    }

    pub fn last_lsn(&self) -> Option<u64> {
        self.prev
    }

    pub fn format(&self) -> Option<&'static WalFormat> {
        self.pages.fmt
    }

    /// How many fed bytes the Python reader would still hold here (it trims at the end
    /// of each walk; this reader trims at the start of the next one).
    pub fn buffered_bytes(&self) -> usize {
        self.buf.len() - self.trim_point().min(self.buf.len())
    }

    /// The bytes of a record of the last walk.
    pub fn record_bytes<'a>(&'a self, rec: &'a Walked) -> &'a [u8] {
        match &rec.bytes {
            Bytes::InBuffer(off) => &self.buf[*off..*off + rec.header.total_len as usize],
            Bytes::Assembled(v) => v,
        }
    }

    /// Append raw WAL bytes that start at `at_lsn` (XLogReader.feed).
    pub fn feed(&mut self, data: &[u8], at_lsn: u64) -> Result<()> {
        if let Some(end) = self.fed_end {
            if at_lsn == end {
                self.buf.extend_from_slice(data);
                self.fed_end = Some(end + data.len() as u64);
                return Ok(());
            }
        }
        if at_lsn > self.next {
            return Err(WalError::wal(
                format!(
                    "WAL chunk starts at {}, after the reader's position",
                    format_lsn(at_lsn)
                ),
                self.next,
            ));
        }
        if let Some(end) = self.fed_end {
            if end > self.next {
                return Err(WalError::wal(
                    format!(
                        "WAL chunk at {} is not contiguous with the bytes fed up to {}",
                        format_lsn(at_lsn),
                        format_lsn(end)
                    ),
                    self.next,
                ));
            }
        }
        // Restarting inside the page of the position, past its header: that header was
        // never fed, so the page is trusted.
        let page = self.next & !PAGE_MASK;
        if self.next & PAGE_MASK != 0 && at_lsn > page && self.valid_upto <= page {
            self.valid_upto = page + XLOG_BLCKSZ;
        }
        self.buf.clear();
        self.buf.extend_from_slice(data);
        self.buf_lsn = at_lsn;
        self.fed_end = Some(at_lsn + data.len() as u64);
        self.marks.clear();
        Ok(())
    }

    /// Put the position back to just after the `n`-th record (1-based) of the last walk.
    pub fn rewind(&mut self, n: usize) {
        if n == 0 || n > self.marks.len() {
            return;
        }
        let m = self.marks[n - 1];
        self.prev = Some(m.prev);
        self.next = m.next;
        self.valid_upto = m.valid_upto;
        self.pages.tli = m.tli;
        self.find_first = false;
        self.end_of_wal = false;
        self.marks.truncate(n);
    }

    // Keep the header of a page not yet validated (XLogReader._trim).
    fn trim_point(&self) -> usize {
        let keep = if self.next < self.valid_upto {
            self.next
        } else {
            self.next & !PAGE_MASK
        };
        keep.saturating_sub(self.buf_lsn) as usize
    }

    fn trim(&mut self) {
        let drop = self.trim_point().min(self.buf.len());
        if drop > 0 {
            self.buf.drain(..drop);
            self.buf_lsn += drop as u64;
        }
    }

    fn fmt(&self) -> &'static WalFormat {
        self.pages.fmt.unwrap_or(DEFAULT_FORMAT)
    }

    // ValidXLogRecordHeader (the rmgr id and xl_prev checks; the length was checked).
    fn check_header(&self, lsn: u64, prev: u64, rmid: u8) -> Result<()> {
        if !self.fmt().rmid_is_valid(rmid) {
            return Err(WalError::corruption(
                format!("invalid resource manager ID {rmid}"),
                lsn,
            ));
        }
        match self.prev {
            None if prev >= lsn => Err(WalError::corruption(
                format!("record with incorrect prev-link {}", format_lsn(prev)),
                lsn,
            )),
            Some(expected) if prev != expected => Err(WalError::corruption(
                format!(
                    "record with incorrect prev-link {}, expected {}",
                    format_lsn(prev),
                    format_lsn(expected)
                ),
                lsn,
            )),
            _ => Ok(()),
        }
    }

    /// Walk every complete record available (XLogDecodeNextRecord, repeatedly).
    pub fn walk(&mut self, headers_only: bool) -> (Vec<Walked>, Option<WalError>) {
        let mut out = Vec::new();
        self.marks.clear();
        if self.end_of_wal {
            return (out, None);
        }
        self.trim();
        let err = self.walk_into(&mut out, headers_only).err();
        (out, err)
    }

    fn walk_into(&mut self, out: &mut Vec<Walked>, headers_only: bool) -> Result<()> {
        let base = self.buf_lsn;
        let blen = self.buf.len() as u64;
        let seg = self.pages.seg;
        let mut pos = self.next;
        loop {
            if pos >= self.valid_upto {
                // First touch of this page: validate its header.
                let page = pos & !PAGE_MASK;
                if page < base {
                    return Err(WalError::wal("page header needed but not fed", page));
                }
                let hoff = page - base;
                let need = if page % seg == 0 {
                    SIZE_OF_LONG_PHD
                } else {
                    SIZE_OF_SHORT_PHD
                };
                if hoff + need > blen {
                    return Ok(());
                }
                let h = hoff as usize;
                if self.is_zero_page(h) {
                    self.end_of_wal = true;
                    return Ok(());
                }
                let (info, rem_len, hsize) = self.pages.check_page(&self.buf, h, page)?;
                self.valid_upto = page + XLOG_BLCKSZ;
                if pos == page {
                    pos = page + hsize;
                    if info & XLP_FIRST_IS_CONTRECORD != 0 {
                        if !self.find_first {
                            return Err(WalError::corruption(
                                "page starts with a continuation record where a new record \
                                 was expected",
                                page,
                            ));
                        }
                        // XLogFindNextRecord: skip the tail of a record begun earlier.
                        let rem = u64::from(rem_len);
                        pos = if rem >= XLOG_BLCKSZ - hsize {
                            page + XLOG_BLCKSZ
                        } else {
                            page + hsize + maxalign(rem)
                        };
                        self.next = pos;
                        continue;
                    }
                }
                self.find_first = false;
                self.next = pos;
            }
            let off = pos - base;
            let poff = pos & PAGE_MASK;
            let o = off as usize;
            let (tot_len, mut xid, mut prev, mut info, mut rmid, mut crc);
            if poff <= XLOG_BLCKSZ - SIZE_OF_XLOG_RECORD {
                // The whole record header is on this page (the common case).
                if off + SIZE_OF_XLOG_RECORD > blen {
                    return Ok(());
                }
                (tot_len, xid, prev, info, rmid, crc) = unpack_header(&self.buf, o);
            } else {
                if off + 8 > blen {
                    return Ok(());
                }
                tot_len = u32_at(&self.buf, o);
                (xid, prev, info, rmid, crc) = (0, 0, 0, 0, 0);
            }
            let tl = u64::from(tot_len);
            if !(SIZE_OF_XLOG_RECORD..=XLOG_RECORD_MAX_SIZE).contains(&tl) {
                if tot_len == 0 {
                    self.end_of_wal = true;
                    return Ok(());
                }
                return Err(WalError::corruption(
                    format!("invalid record length {tot_len}"),
                    pos,
                ));
            }
            let mut nxt;
            let bytes;
            if poff + tl <= XLOG_BLCKSZ {
                // The whole record lies on this page.
                let end = off + tl;
                if end > blen {
                    return Ok(());
                }
                if Some(prev) != self.prev || rmid > self.fmt().rm_max_builtin_id {
                    self.check_header(pos, prev, rmid)?;
                }
                if self.verify_crc {
                    let e = end as usize;
                    let body = crc32c::crc32c(&self.buf[o + SIZE_OF_XLOG_RECORD as usize..e]);
                    let got = crc32c::crc32c_append(body, &self.buf[o..o + XL_CRC_OFFSET]);
                    if got != crc {
                        return Err(WalError::corruption(BAD_CRC, pos));
                    }
                }
                nxt = (pos + tl + 7) & !7;
                bytes = Bytes::InBuffer(o);
            } else {
                let Some((rec, n)) = self.assemble(pos, tl)? else {
                    // More bytes needed, or the end of WAL (assemble set it).
                    return Ok(());
                };
                nxt = n;
                (_, xid, prev, info, rmid, crc) = unpack_header(&rec, 0);
                self.check_header(pos, prev, rmid)?;
                if self.verify_crc {
                    let body = crc32c::crc32c(&rec[SIZE_OF_XLOG_RECORD as usize..]);
                    if crc32c::crc32c_append(body, &rec[..XL_CRC_OFFSET]) != crc {
                        return Err(WalError::corruption(BAD_CRC, pos));
                    }
                }
                bytes = Bytes::Assembled(rec);
            }
            if rmid == RM_XLOG_ID && info & 0xF0 == XLOG_SWITCH {
                // Pretend the switch record extends to the end of the segment.
                nxt = (nxt + seg - 1) & !(seg - 1);
                self.valid_upto = nxt;
            }
            self.prev = Some(pos);
            self.next = nxt;
            self.marks.push(Mark {
                prev: pos,
                next: nxt,
                valid_upto: self.valid_upto,
                tli: self.pages.tli,
            });
            let header = Header {
                lsn: pos,
                end_lsn: nxt,
                total_len: tot_len,
                xid,
                prev,
                info,
                rmid,
                crc,
            };
            let mut walked = Walked {
                header,
                body: None,
                bytes,
            };
            if !headers_only {
                // As in Python, a decode error comes after the position moved on.
                walked.body = Some(decode(self.fmt(), self.record_bytes(&walked), pos)?);
            }
            out.push(walked);
            pos = nxt;
        }
    }

    /// Whether the page header at `buf[hoff..]` is all zeros: the zero-filled tail of a
    /// pre-allocated or recycled segment (XLogReader._is_zero_page). The caller has
    /// checked that SIZE_OF_SHORT_PHD bytes are there.
    fn is_zero_page(&self, hoff: usize) -> bool {
        self.buf[hoff..hoff + SIZE_OF_SHORT_PHD as usize]
            .iter()
            .all(|&b| b == 0)
    }

    /// Gather a record that crosses page boundaries; None if bytes are missing, or at
    /// the end of WAL (an all-zero continuation page, once the pages before it are
    /// validated: `end_of_wal` is then set and the position stays at `lsn`).
    /// Returns the record bytes and NextRecPtr (XLogReader._assemble).
    fn assemble(&mut self, lsn: u64, tot_len: u64) -> Result<Option<(Vec<u8>, u64)>> {
        let base = self.buf_lsn;
        let avail_end = base + self.buf.len() as u64;
        let seg = self.pages.seg;
        let first = XLOG_BLCKSZ - (lsn & PAGE_MASK);
        // Cheap availability check first, so that a huge record fed in small chunks is
        // not re-assembled once per chunk. It stops early at a zero page.
        let mut zero_page = None;
        let mut got = first;
        let mut page = (lsn & !PAGE_MASK) + XLOG_BLCKSZ;
        while got < tot_len {
            if page + SIZE_OF_SHORT_PHD <= avail_end && self.is_zero_page((page - base) as usize) {
                zero_page = Some(page);
                break;
            }
            let hsize = if page % seg == 0 {
                SIZE_OF_LONG_PHD
            } else {
                SIZE_OF_SHORT_PHD
            };
            let take = (tot_len - got).min(XLOG_BLCKSZ - hsize);
            if page + hsize + take > avail_end {
                return Ok(None);
            }
            got += take;
            page += XLOG_BLCKSZ;
        }
        let off = (lsn - base) as usize;
        let mut rec = Vec::with_capacity(tot_len as usize);
        rec.extend_from_slice(&self.buf[off..off + first as usize]);
        let mut got = first;
        let mut page = (lsn & !PAGE_MASK) + XLOG_BLCKSZ;
        let mut nxt = page;
        while got < tot_len {
            if zero_page == Some(page) {
                self.end_of_wal = true;
                return Ok(None);
            }
            let hoff = (page - base) as usize;
            let (info, rem_len, hsize) = self.pages.check_page(&self.buf, hoff, page)?;
            if info & XLP_FIRST_IS_CONTRECORD == 0 {
                return Err(WalError::corruption(
                    format!("there is no contrecord flag at {}", format_lsn(page)),
                    lsn,
                ));
            }
            if u64::from(rem_len) != tot_len - got {
                return Err(WalError::corruption(
                    format!(
                        "invalid contrecord length {rem_len} (expected {}) at {}",
                        tot_len - got,
                        format_lsn(page)
                    ),
                    lsn,
                ));
            }
            let take = (tot_len - got).min(XLOG_BLCKSZ - hsize);
            let from = hoff + hsize as usize;
            rec.extend_from_slice(&self.buf[from..from + take as usize]);
            got += take;
            self.valid_upto = page + XLOG_BLCKSZ;
            nxt = page + hsize + maxalign(take);
            page += XLOG_BLCKSZ;
        }
        Ok(Some((rec, nxt)))
    }
}

/// The 24-byte XLogRecord header: (tot_len, xid, prev, info, rmid, crc).
fn unpack_header(b: &[u8], off: usize) -> (u32, u32, u64, u8, u8, u32) {
    let byte = |i: usize| b.get(off + i).copied().unwrap_or(0);
    (
        u32_at(b, off),
        u32_at(b, off + 4),
        u64_at(b, off + 8),
        byte(16),
        byte(17),
        u32_at(b, off + 20),
    )
}
