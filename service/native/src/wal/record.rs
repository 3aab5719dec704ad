//! Record-body decoding: one verified record's bytes in, its parts out
//! (DecodeXLogRecord and RestoreBlockImage in xlogreader.c; the native twin of
//! `service.wal.recorddecode.RecordDecoder.decode` and `_restore_image`).
//!
//! Receives: from the walk (`reader`), the bytes of exactly one record (header included,
//! `tot_len` long) whose page headers, record header and CRC32C are already checked.
//! Hands on: a `Record` whose block data and main data are ranges into those bytes and
//! whose full-page images are restored to whole BLCKSZ pages (pglz or lz4 decompressed
//! at once; an uncompressed one when `Block::page` asks; hole zero-filled); the boundary
//! turns it into the same `XLogRecord` / `BlockRef` the Python decoder builds.
//!
//! Guarantees: the block headers are checked as DecodeXLogRecord checks them and as the
//! Python decoder does, in the same order with the same messages: block ids in range and
//! ascending, BKPBLOCK_HAS_DATA consistent with the data length, image headers
//! consistent, BKPBLOCK_SAME_REL only after a relation, and headers plus payloads
//! accounting for exactly `tot_len`. Failures are `WalCorruptionError` with the record's
//! LSN; a zstd image is `WalError`. Nothing is skipped.

use std::borrow::Cow;
use std::ops::Range;

use super::format::{
    WalFormat, BKPBLOCK_FORK_MASK, BKPBLOCK_HAS_DATA, BKPBLOCK_HAS_IMAGE, BKPBLOCK_SAME_REL,
    BLCKSZ, SIZE_OF_XLOG_RECORD, XLR_BLOCK_ID_DATA_LONG, XLR_BLOCK_ID_DATA_SHORT,
    XLR_BLOCK_ID_ORIGIN, XLR_BLOCK_ID_TOPLEVEL_XID, XLR_MAX_BLOCK_ID,
};
use super::{lz4, pglz, u16_at, u32_at, Result, WalError};

/// The header fields the walk has already unpacked (the XLogRecord struct).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header {
    pub lsn: u64,
    pub end_lsn: u64,
    pub total_len: u32,
    pub xid: u32,
    pub prev: u64,
    pub info: u8,
    pub rmid: u8,
    pub crc: u32,
}

/// A block reference (DecodedBkpBlock). `data` is a range of the record's bytes;
/// `image`, when present, is the restored BLCKSZ page. The image fields are all 0 when
/// there is no image, as in `service.wal.record.BlockRef`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Block {
    pub block_id: u8,
    /// (spc_oid, db_oid, rel_number)
    pub locator: (u32, u32, u32),
    pub fork: u8,
    pub block: u32,
    pub flags: u8,
    pub data: Range<usize>,
    /// A compressed image, decompressed (hole zero-filled) when the record is decoded,
    /// so that a damaged one is an error there; None otherwise.
    pub image: Option<Vec<u8>>,
    /// An uncompressed image's bytes in the record (nothing about it can fail once its
    /// header is checked): `page` builds its page only when asked, so a record whose
    /// image nobody reads (every record the decoder predecodes) copies nothing.
    pub raw_image: Option<Range<usize>>,
    pub apply_image: bool,
    pub image_len: u16,
    pub hole_offset: u16,
    pub hole_length: u16,
    pub bimg_info: u8,
}

/// The decoded body of one record: everything of `XLogRecord` but the header.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Body {
    pub main_data: Range<usize>,
    pub blocks: Vec<Block>,
    pub toplevel_xid: Option<u32>,
    pub origin: Option<u16>,
}

fn short(lsn: u64) -> WalError {
    WalError::corruption("record with invalid length (block headers overrun it)", lsn)
}

struct Head {
    block_id: u8,
    fork_flags: u8,
    data_len: usize,
    img_len: usize,
    hole_off: usize,
    hole_len: usize,
    bimg_info: u8,
    locator: (u32, u32, u32),
    block: u32,
}

/// DecodeXLogRecord over `rec` (exactly the record, header included).
pub fn decode(fmt: &WalFormat, rec: &[u8], lsn: u64) -> Result<Body> {
    let tot_len = rec.len() as i64;
    let mut p = SIZE_OF_XLOG_RECORD as usize;
    let mut remaining: i64 = tot_len - SIZE_OF_XLOG_RECORD as i64;
    let mut datatotal: i64 = 0;
    let mut origin = None;
    let mut toplevel = None;
    let mut main_len = 0usize;
    let mut max_block_id: i32 = -1;
    let mut last_loc: Option<(u32, u32, u32)> = None;
    let mut heads: Vec<Head> = Vec::new();
    while remaining > datatotal {
        let block_id = rec[p];
        p += 1;
        remaining -= 1;
        if block_id == XLR_BLOCK_ID_DATA_SHORT {
            if remaining < 1 {
                return Err(short(lsn));
            }
            main_len = usize::from(rec[p]);
            p += 1;
            remaining -= 1;
            datatotal += main_len as i64;
            break;
        }
        if block_id == XLR_BLOCK_ID_DATA_LONG {
            if remaining < 4 {
                return Err(short(lsn));
            }
            main_len = u32_at(rec, p) as usize;
            p += 4;
            remaining -= 4;
            datatotal += main_len as i64;
            break;
        }
        if block_id == XLR_BLOCK_ID_ORIGIN {
            if remaining < 2 {
                return Err(short(lsn));
            }
            origin = Some(u16_at(rec, p));
            p += 2;
            remaining -= 2;
            continue;
        }
        if block_id == XLR_BLOCK_ID_TOPLEVEL_XID {
            if remaining < 4 {
                return Err(short(lsn));
            }
            toplevel = Some(u32_at(rec, p));
            p += 4;
            remaining -= 4;
            continue;
        }
        if block_id > XLR_MAX_BLOCK_ID {
            return Err(WalError::corruption(
                format!("invalid block_id {block_id}"),
                lsn,
            ));
        }
        if i32::from(block_id) <= max_block_id {
            return Err(WalError::corruption(
                format!("out-of-order block_id {block_id}"),
                lsn,
            ));
        }
        max_block_id = i32::from(block_id);
        if remaining < 3 {
            return Err(short(lsn));
        }
        let fork_flags = rec[p];
        let data_len = usize::from(u16_at(rec, p + 1));
        p += 3;
        remaining -= 3;
        let has_data = fork_flags & BKPBLOCK_HAS_DATA != 0;
        if has_data && data_len == 0 {
            return Err(WalError::corruption(
                "BKPBLOCK_HAS_DATA set, but no data included",
                lsn,
            ));
        }
        if !has_data && data_len != 0 {
            return Err(WalError::corruption(
                format!("BKPBLOCK_HAS_DATA not set, but data length is {data_len}"),
                lsn,
            ));
        }
        datatotal += data_len as i64;
        let (mut img_len, mut hole_off, mut hole_len, mut bimg_info) = (0i64, 0i64, 0i64, 0u8);
        if fork_flags & BKPBLOCK_HAS_IMAGE != 0 {
            if remaining < 5 {
                return Err(short(lsn));
            }
            img_len = i64::from(u16_at(rec, p));
            hole_off = i64::from(u16_at(rec, p + 2));
            bimg_info = rec[p + 4];
            p += 5;
            remaining -= 5;
            let has_hole = bimg_info & fmt.bkpimage_has_hole != 0;
            let compressed = bimg_info & fmt.compressed_mask() != 0;
            let blcksz = BLCKSZ as i64;
            if has_hole && compressed {
                if remaining < 2 {
                    return Err(short(lsn));
                }
                hole_len = i64::from(u16_at(rec, p));
                p += 2;
                remaining -= 2;
            } else if has_hole {
                hole_len = blcksz - img_len;
            }
            datatotal += img_len;
            if (has_hole && (hole_off == 0 || hole_len <= 0 || img_len == blcksz))
                || (!has_hole && (hole_off != 0 || hole_len != 0))
                || (compressed && img_len == blcksz)
                || (!has_hole && !compressed && img_len != blcksz)
                || hole_off + hole_len > blcksz
                || img_len == 0
            {
                return Err(WalError::corruption(
                    format!(
                        "invalid block image header (length {img_len}, hole offset \
                         {hole_off}, hole length {hole_len}, flags 0x{bimg_info:02X}) \
                         for block_id {block_id}"
                    ),
                    lsn,
                ));
            }
        }
        let locator = if fork_flags & BKPBLOCK_SAME_REL == 0 {
            if remaining < 12 {
                return Err(short(lsn));
            }
            let loc = (u32_at(rec, p), u32_at(rec, p + 4), u32_at(rec, p + 8));
            p += 12;
            remaining -= 12;
            last_loc = Some(loc);
            loc
        } else {
            match last_loc {
                Some(loc) => loc,
                None => {
                    return Err(WalError::corruption(
                        "BKPBLOCK_SAME_REL set but no previous rel",
                        lsn,
                    ))
                }
            }
        };
        if remaining < 4 {
            return Err(short(lsn));
        }
        let block = u32_at(rec, p);
        p += 4;
        remaining -= 4;
        // The image checks above bound all three to 0..=BLCKSZ.
        heads.push(Head {
            block_id,
            fork_flags,
            data_len,
            img_len: img_len as usize,
            hole_off: hole_off as usize,
            hole_len: hole_len as usize,
            bimg_info,
            locator,
            block,
        });
    }
    if remaining != datatotal {
        return Err(short(lsn));
    }
    let mut blocks = Vec::with_capacity(heads.len());
    for h in heads {
        let (mut image, mut raw_image) = (None, None);
        if h.img_len != 0 {
            if h.bimg_info & fmt.compressed_mask() != 0 {
                image = Some(restore_image(
                    fmt,
                    &rec[p..p + h.img_len],
                    h.hole_off,
                    h.hole_len,
                    h.bimg_info,
                    lsn,
                    h.block_id,
                )?);
            } else {
                raw_image = Some(p..p + h.img_len);
            }
            p += h.img_len;
        }
        let data = p..p + h.data_len;
        p += h.data_len;
        blocks.push(Block {
            block_id: h.block_id,
            locator: h.locator,
            fork: h.fork_flags & BKPBLOCK_FORK_MASK,
            block: h.block,
            flags: h.fork_flags,
            data,
            image,
            raw_image,
            apply_image: h.bimg_info & fmt.bkpimage_apply != 0,
            image_len: h.img_len as u16,
            hole_offset: h.hole_off as u16,
            hole_length: h.hole_len as u16,
            bimg_info: h.bimg_info,
        });
    }
    Ok(Body {
        main_data: p..p + main_len,
        blocks,
        toplevel_xid: toplevel,
        origin,
    })
}

impl Block {
    /// The full BLCKSZ page of the block's image (RestoreBlockImage), or None when it
    /// has none; `rec` is the record's bytes the block was decoded from.
    pub fn page<'a>(&'a self, rec: &[u8]) -> Option<Cow<'a, [u8]>> {
        if let Some(page) = &self.image {
            return Some(Cow::Borrowed(page));
        }
        let at = self.raw_image.clone()?;
        let (off, len) = (usize::from(self.hole_offset), usize::from(self.hole_length));
        Some(Cow::Owned(with_hole(&rec[at], off, len)))
    }
}

/// An image's bytes with its hole (`hole_len` bytes at `hole_off`) zero-filled.
fn with_hole(raw: &[u8], hole_off: usize, hole_len: usize) -> Vec<u8> {
    let mut page = Vec::with_capacity(raw.len() + hole_len);
    page.extend_from_slice(&raw[..hole_off]);
    page.resize(hole_off + hole_len, 0);
    page.extend_from_slice(&raw[hole_off..]);
    page
}

/// The full BLCKSZ page of a compressed block image (one of `compressed_mask`'s bits
/// set): decompressed, hole zero-filled (RestoreBlockImage); an uncompressed one is
/// `Block::page`'s.
fn restore_image(
    fmt: &WalFormat,
    img: &[u8],
    hole_off: usize,
    hole_len: usize,
    bimg_info: u8,
    lsn: u64,
    block_id: u8,
) -> Result<Vec<u8>> {
    let want = BLCKSZ - hole_len;
    let raw = if bimg_info & fmt.bkpimage_compress_pglz != 0 {
        pglz::decompress(img, want).map_err(|msg| {
            WalError::corruption(
                format!("could not decompress pglz image of block_id {block_id}: {msg}"),
                lsn,
            )
        })?
    } else if bimg_info & fmt.bkpimage_compress_lz4 != 0 {
        let raw = lz4::decompress(img, want).map_err(|()| {
            WalError::corruption(
                format!("could not decompress lz4 image of block_id {block_id}"),
                lsn,
            )
        })?;
        if raw.len() != want {
            return Err(WalError::corruption(
                format!(
                    "lz4 image of block_id {block_id} is {} bytes, expected {want}",
                    raw.len()
                ),
                lsn,
            ));
        }
        raw
    } else {
        // zstd, the last of compressed_mask's bits
        return Err(WalError::wal(
            format!(
                "block_id {block_id} has a zstd-compressed image; pgcdc cannot decompress \
                 zstd (set wal_compression to pglz or lz4)"
            ),
            lsn,
        ));
    };
    if hole_len == 0 {
        return Ok(raw);
    }
    Ok(with_hole(&raw, hole_off, hole_len))
}
