//! range_out and multirange_out text of the built-in ranges over int4, int8, numeric,
//! date, timestamp and timestamptz (int4range .. tstzrange, int4multirange ..
//! tstzmultirange), written from their stored datums.
//!
//! Receives: a range or multirange varlena payload (the bytes after the varlena header,
//! exactly what service.types.range.range_text / service.types.multirange.
//! multirange_text receive) and the subtype (`RangeSub`) of the column's built-in type.
//! Hands on: the text appended to a String, exactly as the Python reference prints it
//! (service.types.convert.to_text: DateStyle=ISO, TimeZone=UTC), which is what range_out,
//! multirange_out and range_bound_escape print:
//! - a range: `empty`, or `[`/`(`, the lower bound, `,`, the upper bound, `]`/`)`, an
//!   infinite bound printed as nothing; a bound is the subtype's output text
//!   (rows::numeric, rows::datetime, plain integers), double-quoted when empty or
//!   holding `"` `\` `(` `)` `[` `]` `,` or whitespace, with `"` and `\` doubled;
//! - a multirange: `{`, its ranges as above separated by `,`, `}`.
//!
//! Layout (service/types/range.py, service/types/multirange.py, checked as they check):
//! a range is the uint32 rangetypid, then the lower and the upper bound when present
//! (not empty, not infinite), each aligned to the subtype's typalign except a varlena
//! whose first byte is not zero (a short header), and as its last byte the flags
//! (0x01 empty, 0x02 lower inclusive, 0x04 upper inclusive, 0x08 lower infinite, 0x10
//! upper infinite). A multirange is the uint32 multirangetypid, the uint32 range count,
//! count - 1 uint32 items (high bit set: an offset; clear: a length from the previous
//! range), one flags byte per range, then from the next typalign boundary (counted
//! from the varlena header) each range's bounds as inside a range datum.
//!
//! Errors: `Err(reason)` with `out` as it was, wherever the Python reference raises
//! (too short, a bound or range overrunning its datum, a TOAST pointer, a malformed
//! numeric, ...), and where only Python can decide: a range whose rangetypid is not the
//! built-in range type of `sub` (Python looks the OID up in its registry), and an
//! inline-compressed numeric bound (Python decompresses it; PostgreSQL never stores
//! one inside a range). A multirange's own stored OID is not checked: Python takes the
//! range type from the column, not from the datum.
//!
//! Pure, no panics (no unchecked indexing, no overflowing arithmetic).

use std::fmt::Write;

use super::{datetime, numeric};

const RANGE_EMPTY: u8 = 0x01;
const RANGE_LB_INC: u8 = 0x02;
const RANGE_UB_INC: u8 = 0x04;
const RANGE_LB_INF: u8 = 0x08;
const RANGE_UB_INF: u8 = 0x10;

const VARHDRSZ: usize = 4;
const MULTIRANGE_ITEM_OFF_BIT: u32 = 0x8000_0000;

const NUMERIC_SPECIAL: u16 = 0xC000;
const NUMERIC_NAN: u16 = 0xC000;
const NUMERIC_PINF: u16 = 0xD000;
const NUMERIC_NINF: u16 = 0xF000;

/// The subtype of a built-in range (and of its multirange).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RangeSub {
    Int4,
    Int8,
    Numeric,
    Date,
    Timestamp,
    TimestampTz,
}

impl RangeSub {
    /// pg_type OID of the built-in range type over this subtype, the rangetypid its
    /// datums store.
    fn range_oid(self) -> u32 {
        match self {
            RangeSub::Int4 => 3904,
            RangeSub::Numeric => 3906,
            RangeSub::Timestamp => 3908,
            RangeSub::TimestampTz => 3910,
            RangeSub::Date => 3912,
            RangeSub::Int8 => 3926,
        }
    }

    /// The subtype's typlen (None: a varlena).
    fn typlen(self) -> Option<usize> {
        match self {
            RangeSub::Int4 | RangeSub::Date => Some(4),
            RangeSub::Int8 | RangeSub::Timestamp | RangeSub::TimestampTz => Some(8),
            RangeSub::Numeric => None,
        }
    }

    /// The subtype's typalign in bytes (int4, date, numeric: `i`; the rest `d`).
    fn typalign(self) -> usize {
        match self {
            RangeSub::Int4 | RangeSub::Date | RangeSub::Numeric => 4,
            RangeSub::Int8 | RangeSub::Timestamp | RangeSub::TimestampTz => 8,
        }
    }
}

/// range_out of a range payload (see the module docstring), appended to `out`.
pub fn range_text(out: &mut String, d: &[u8], sub: RangeSub) -> Result<(), &'static str> {
    undo_on_err(out, |out| write_range_datum(out, d, sub))
}

/// multirange_out of a multirange payload (see the module docstring), appended to `out`.
pub fn multirange_text(out: &mut String, d: &[u8], sub: RangeSub) -> Result<(), &'static str> {
    undo_on_err(out, |out| write_multirange(out, d, sub))
}

/// Runs `write`; on Err, `out` is cut back to what it was.
fn undo_on_err(
    out: &mut String,
    write: impl FnOnce(&mut String) -> Result<(), &'static str>,
) -> Result<(), &'static str> {
    let mark = out.len();
    let done = write(out);
    if done.is_err() {
        out.truncate(mark);
    }
    done
}

fn u32_at(d: &[u8], at: usize) -> Option<u32> {
    let bytes = d.get(at..at.checked_add(4)?)?;
    Some(u32::from_le_bytes(bytes.try_into().ok()?))
}

/// `at` rounded up to a multiple of `align` (a power of two).
fn align_up(at: usize, align: usize) -> Option<usize> {
    Some(at.checked_add(align - 1)? & !(align - 1))
}

/// A range datum: rangetypid, the bounds, the flags byte last.
fn write_range_datum(out: &mut String, d: &[u8], sub: RangeSub) -> Result<(), &'static str> {
    if d.len() < 5 {
        return Err("range datum is too short");
    }
    if u32_at(d, 0) != Some(sub.range_oid()) {
        return Err("range type OID is not the subtype's built-in range");
    }
    let (&flags, rest) = d.split_last().ok_or("range datum is too short")?;
    let body = rest.get(4..).ok_or("range datum is too short")?;
    write_range(out, body, flags, sub)
}

/// One range from its bounds' bytes (`body`, between the rangetypid and the flags) and
/// its flags. `body` starts 8 bytes into the varlena (header and rangetypid), a multiple
/// of every typalign, so a bound aligns at a multiple of typalign within it.
fn write_range(
    out: &mut String,
    body: &[u8],
    flags: u8,
    sub: RangeSub,
) -> Result<(), &'static str> {
    if flags & RANGE_EMPTY != 0 {
        out.push_str("empty");
        return Ok(());
    }
    let mut at = 0;
    out.push(if flags & RANGE_LB_INC != 0 { '[' } else { '(' });
    if flags & RANGE_LB_INF == 0 {
        let (value, next) = read_bound(body, at, sub)?;
        write_bound(out, value, sub)?;
        at = next;
    }
    out.push(',');
    if flags & RANGE_UB_INF == 0 {
        let (value, _) = read_bound(body, at, sub)?;
        write_bound(out, value, sub)?;
    }
    out.push(if flags & RANGE_UB_INC != 0 { ']' } else { ')' });
    Ok(())
}

/// The bound stored at or after `at` in `body`: (its value bytes, the offset past it).
fn read_bound(body: &[u8], at: usize, sub: RangeSub) -> Result<(&[u8], usize), &'static str> {
    const OVERRUN: &str = "range bound overruns its datum";
    let align = sub.typalign();
    let Some(size) = sub.typlen() else {
        let first = *body.get(at).ok_or(OVERRUN)?;
        let at = if first == 0 {
            align_up(at, align).ok_or(OVERRUN)?
        } else {
            at
        };
        return read_varlena(body, at);
    };
    let at = align_up(at, align).ok_or(OVERRUN)?;
    let end = at.checked_add(size).ok_or(OVERRUN)?;
    Ok((body.get(at..end).ok_or(OVERRUN)?, end))
}

/// The varlena at `at` in `body`: (its payload, the offset past it). A TOAST pointer
/// is an error, an inline-compressed one Python's to decompress.
fn read_varlena(body: &[u8], at: usize) -> Result<(&[u8], usize), &'static str> {
    const OVERRUN: &str = "range bound varlena overruns its datum";
    let first = *body.get(at).ok_or(OVERRUN)?;
    if first == 0x01 {
        return Err("TOAST pointer inside a range");
    }
    if first & 0x01 != 0 {
        let end = at + (first >> 1) as usize;
        let payload = body.get(at + 1..end).ok_or(OVERRUN)?;
        return Ok((payload, end));
    }
    let word = u32_at(body, at).ok_or(OVERRUN)?;
    let size = (word >> 2) as usize;
    let end = at.checked_add(size).ok_or(OVERRUN)?;
    if size < VARHDRSZ || end > body.len() {
        return Err(OVERRUN);
    }
    if first & 0x03 == 0x02 {
        return Err("inline-compressed range bound Python decompresses");
    }
    Ok((body.get(at + VARHDRSZ..end).ok_or(OVERRUN)?, end))
}

/// A bound's output text, quoted as range_bound_escape quotes it.
fn write_bound(out: &mut String, value: &[u8], sub: RangeSub) -> Result<(), &'static str> {
    let mut text = String::new();
    element_text(&mut text, value, sub)?;
    escape_bound(out, &text);
    Ok(())
}

/// The subtype's output text of one bound's bytes (service.types.convert.to_text).
fn element_text(out: &mut String, value: &[u8], sub: RangeSub) -> Result<(), &'static str> {
    const SIZE: &str = "range bound size differs from the subtype's";
    match sub {
        RangeSub::Int4 => {
            let v = i32::from_le_bytes(value.try_into().map_err(|_| SIZE)?);
            let _ = write!(out, "{v}");
        }
        RangeSub::Int8 => {
            let v = i64::from_le_bytes(value.try_into().map_err(|_| SIZE)?);
            let _ = write!(out, "{v}");
        }
        RangeSub::Date => {
            datetime::pg_date(out, i32::from_le_bytes(value.try_into().map_err(|_| SIZE)?));
        }
        RangeSub::Timestamp | RangeSub::TimestampTz => {
            let micros = i64::from_le_bytes(value.try_into().map_err(|_| SIZE)?);
            datetime::pg_timestamp(out, micros, sub == RangeSub::TimestampTz);
        }
        RangeSub::Numeric => numeric_text(out, value)?,
    }
    Ok(())
}

/// numeric_out (service.types.numeric.numeric_text): NaN and ±Infinity by the header
/// alone, a finite value by rows::numeric.
fn numeric_text(out: &mut String, value: &[u8]) -> Result<(), &'static str> {
    let header = match value {
        [a, b, ..] => u16::from_le_bytes([*a, *b]),
        _ => return Err("numeric bound is too short"),
    };
    if header & NUMERIC_SPECIAL != NUMERIC_SPECIAL {
        return numeric::text(out, value).ok_or("numeric bound is malformed");
    }
    out.push_str(match header & 0xF000 {
        NUMERIC_NAN => "NaN",
        NUMERIC_PINF => "Infinity",
        NUMERIC_NINF => "-Infinity",
        _ => return Err("numeric special header is not NaN or infinity"),
    });
    Ok(())
}

/// Whether range_bound_escape quotes a bound holding `c`.
fn needs_quotes(c: char) -> bool {
    matches!(
        c,
        '"' | '\\' | '(' | ')' | '[' | ']' | ',' | ' ' | '\t' | '\n' | '\r' | '\x0b' | '\x0c'
    )
}

/// range_bound_escape: `text` as is, or double-quoted with `"` and `\` doubled when it
/// is empty or holds a character `needs_quotes` names.
fn escape_bound(out: &mut String, text: &str) {
    if !text.is_empty() && !text.chars().any(needs_quotes) {
        out.push_str(text);
        return;
    }
    out.push('"');
    for c in text.chars() {
        if c == '"' || c == '\\' {
            out.push(c);
        }
        out.push(c);
    }
    out.push('"');
}

/// Where a multirange's ranges lie: the flags bytes and the bounds area.
struct MultirangeLayout {
    count: usize,
    flags_at: usize,
    bounds_at: usize,
}

/// The count, the flags' offset and the bounds' offset of a multirange payload (of at
/// least 8 bytes), checked as service.types.multirange._ranges checks them.
fn multirange_layout(d: &[u8], sub: RangeSub) -> Result<MultirangeLayout, &'static str> {
    const OVERRUN: &str = "multirange count overruns its datum";
    let count = u32_at(d, 4).ok_or("multirange datum is too short")? as usize;
    // count >= 1 here: 8 + 4 * (count - 1) items, then count flags bytes.
    let items = count.checked_sub(1).and_then(|n| n.checked_mul(4));
    let flags_at = items.and_then(|n| n.checked_add(8)).ok_or(OVERRUN)?;
    let flags_end = flags_at.checked_add(count).ok_or(OVERRUN)?;
    if flags_end > d.len() {
        return Err(OVERRUN);
    }
    // aligned counting from the varlena header, as the datum is laid out
    let bounds_at = align_up(flags_end + VARHDRSZ, sub.typalign()).ok_or(OVERRUN)? - VARHDRSZ;
    Ok(MultirangeLayout {
        count,
        flags_at,
        bounds_at,
    })
}

/// The offset of range `i + 1` from the bounds area, from item `i` and range `i`'s.
fn next_offset(d: &[u8], i: usize, prev: usize) -> Result<usize, &'static str> {
    let item = i
        .checked_mul(4)
        .and_then(|at| u32_at(d, at.checked_add(8)?))
        .ok_or("multirange item overruns its datum")?;
    if item & MULTIRANGE_ITEM_OFF_BIT != 0 {
        Ok((item & !MULTIRANGE_ITEM_OFF_BIT) as usize)
    } else {
        prev.checked_add(item as usize)
            .ok_or("multirange range overruns its datum")
    }
}

/// A multirange datum: multirangetypid, count, items, flags, the ranges' bounds.
fn write_multirange(out: &mut String, d: &[u8], sub: RangeSub) -> Result<(), &'static str> {
    const OVERRUN: &str = "multirange range overruns its datum";
    if d.len() < 8 {
        return Err("multirange datum is too short");
    }
    out.push('{');
    if u32_at(d, 4) == Some(0) {
        out.push('}');
        return Ok(());
    }
    let layout = multirange_layout(d, sub)?;
    let mut start = 0usize;
    for i in 0..layout.count {
        let last = i + 1 == layout.count;
        let next = if last { 0 } else { next_offset(d, i, start)? };
        let from = layout.bounds_at.checked_add(start).ok_or(OVERRUN)?;
        let to = if last {
            d.len()
        } else {
            layout.bounds_at.checked_add(next).ok_or(OVERRUN)?
        };
        if from > to || to > d.len() {
            return Err(OVERRUN);
        }
        let body = d.get(from..to).ok_or(OVERRUN)?;
        let flags = *d.get(layout.flags_at + i).ok_or(OVERRUN)?;
        if i > 0 {
            out.push(',');
        }
        write_range(out, body, flags, sub)?;
        start = next;
    }
    out.push('}');
    Ok(())
}
