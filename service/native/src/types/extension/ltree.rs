//! ltree and lquery (ltree.h, ltree_io.c ltree_out / lquery_out).
//!
//! Receives: the varlena payload; offsets are the C structs' minus the 4-byte varlena
//! header, every struct MAXALIGNed (8) from the datum's start.
//! - ltree: uint16 numlevel at 0, the levels from 4: uint16 len and the label, the next
//!   level MAXALIGN(len + 2) further.
//! - lquery: uint16 numlevel at 0, the levels from 12: uint16 totallen, flag, numvar,
//!   low, high, the variants from 16 on (the next level MAXALIGN(totallen) further); a
//!   variant: int32 crc, uint16 len, uint8 flag, the label at 7 (the next variant
//!   MAXALIGN(len) + 8 further).
//!
//! Hands on: ltree_out's labels joined by `.`; lquery_out's levels joined by `.`: `!`
//! (LQL_NOT), the variants joined by `|`, each followed by `%` (LVAR_SUBLEXEME), `@`
//! (LVAR_INCASE), `*` (LVAR_ANYEND); `*` for a level without variants; the counts
//! `{n}`, `{,m}`, `{n,}`, `{n,m}` or `{,}` when LQL_COUNT (always for `*`, which prints
//! none for the default {0,65535}). As service.types.ltree (ltree_text, lquery_text).
//!
//! Errors: a short datum, a level or variant or label past its end, a zero-length
//! lquery level, a label that is not UTF-8. Pure, no panics.

use std::fmt::Write;

use super::{atomic, maxalign, u16_at};

const LVAR_ANYEND: u8 = 0x01;
const LVAR_INCASE: u8 = 0x02;
const LVAR_SUBLEXEME: u8 = 0x04;
const LQL_NOT: u16 = 0x10;
const LQL_COUNT: u16 = 0x20;
const LTREE_MAX_LEVELS: u16 = 0xFFFF;

const SHORT: &str = "ltree datum is too short";
const OVERRUN: &str = "ltree level runs out of its datum";
const LABEL_OVERRUN: &str = "ltree label runs out of its datum";
const NOT_UTF8: &str = "ltree label is not UTF-8";
const ZERO_LEVEL: &str = "lquery level of length 0";

fn label(d: &[u8], at: usize, n: usize) -> Result<&str, &'static str> {
    let end = at.checked_add(n).ok_or(LABEL_OVERRUN)?;
    let bytes = d.get(at..end).ok_or(LABEL_OVERRUN)?;
    std::str::from_utf8(bytes).map_err(|_| NOT_UTF8)
}

fn next(at: usize, by: usize) -> Result<usize, &'static str> {
    maxalign(by).and_then(|n| at.checked_add(n)).ok_or(OVERRUN)
}

/// ltree_out's text, appended to `out`.
pub fn ltree_text(out: &mut String, d: &[u8]) -> Result<(), &'static str> {
    let numlevel = u16_at(d, 0).ok_or(SHORT)?;
    atomic(out, |out| {
        let mut at = 4usize;
        for i in 0..numlevel {
            let n = usize::from(u16_at(d, at).ok_or(OVERRUN)?);
            if i > 0 {
                out.push('.');
            }
            out.push_str(label(d, at + 2, n)?);
            at = next(at, n + 2)?;
        }
        Ok(())
    })
}

/// The repeat counts of a level (_counts).
fn counts(out: &mut String, low: u16, high: u16, numvar: u16) {
    let _ = if low == high {
        write!(out, "{{{low}}}")
    } else if low == 0 {
        if high == LTREE_MAX_LEVELS {
            if numvar != 0 {
                out.push_str("{,}");
            }
            Ok(())
        } else {
            write!(out, "{{,{high}}}")
        }
    } else if high == LTREE_MAX_LEVELS {
        write!(out, "{{{low},}}")
    } else {
        write!(out, "{{{low},{high}}}")
    };
}

/// One lquery variant at `at`: its text and flags appended; returns where the next is.
fn variant(out: &mut String, d: &[u8], at: usize) -> Result<usize, &'static str> {
    let head = d
        .get(at..at.checked_add(7).ok_or(OVERRUN)?)
        .ok_or(OVERRUN)?;
    let n = usize::from(u16::from_le_bytes([head[4], head[5]]));
    let flag = head[6];
    out.push_str(label(d, at + 7, n)?);
    if flag & LVAR_SUBLEXEME != 0 {
        out.push('%');
    }
    if flag & LVAR_INCASE != 0 {
        out.push('@');
    }
    if flag & LVAR_ANYEND != 0 {
        out.push('*');
    }
    next(at, n)?.checked_add(8).ok_or(OVERRUN)
}

/// One lquery level at `at`: appended; returns where the next level is.
fn level(out: &mut String, d: &[u8], at: usize) -> Result<usize, &'static str> {
    let field = |k: usize| u16_at(d, at + 2 * k).ok_or(OVERRUN);
    // check the whole 10-byte header before reading any of it, as the Python does
    d.get(at..at.checked_add(10).ok_or(OVERRUN)?)
        .ok_or(OVERRUN)?;
    let (totallen, flag, numvar, low, high) =
        (field(0)?, field(1)?, field(2)?, field(3)?, field(4)?);
    if numvar != 0 {
        if flag & LQL_NOT != 0 {
            out.push('!');
        }
        let mut vat = at + 16;
        for v in 0..numvar {
            if v > 0 {
                out.push('|');
            }
            vat = variant(out, d, vat)?;
        }
    } else {
        out.push('*');
    }
    if flag & LQL_COUNT != 0 || numvar == 0 {
        counts(out, low, high, numvar);
    }
    if totallen == 0 {
        return Err(ZERO_LEVEL);
    }
    next(at, usize::from(totallen))
}

/// lquery_out's text, appended to `out`.
pub fn lquery_text(out: &mut String, d: &[u8]) -> Result<(), &'static str> {
    if d.len() < 6 {
        return Err(SHORT);
    }
    let numlevel = u16_at(d, 0).ok_or(SHORT)?;
    atomic(out, |out| {
        let mut at = 12usize;
        for i in 0..numlevel {
            if i > 0 {
                out.push('.');
            }
            at = level(out, d, at)?;
        }
        Ok(())
    })
}
