//! hstore (hstore.h, hstore_io.c hstore_out) and its Debezium values.
//!
//! Receives: the varlena payload: uint32 size_ (HS_FLAG_NEWVERSION 0x80000000, the pair
//! count in the low 28 bits), 2 × count HEntry (uint32: ISFIRST 0x80000000, ISNULL
//! 0x40000000, the end offset in the low 30 bits), key then value of each pair, then the
//! strings; an entry starts where the previous one ended (at 0 when flagged ISFIRST).
//! An empty payload is an empty hstore.
//!
//! Hands on:
//! - `hstore_text`: `"k"=>"v", "k2"=>NULL` in stored order, `"` and `\` escaped with a
//!   backslash (service.types.hstore.hstore_text);
//! - `hstore_json`: `{"k":"v","k2":null}` (connectors.avro.extension_types.hstore_json
//!   of hstore_value): Jackson's compact JSON in java.util.HashMap iteration order;
//! - `hstore_pairs`: the same pairs in the same order (hstore_map), a NULL as None.
//!
//! hstore_value is a Python dict: a key stored twice (only in a damaged datum) keeps its
//! first place and takes its last value; so do `hstore_json` and `hstore_pairs`.
//!
//! Errors: the pre-9.0 layout (no NEWVERSION flag), a short datum, an entry outside the
//! datum, a key or value that is not UTF-8. Pure, no panics.

use std::collections::HashMap;
use std::fmt::Write;

use super::{atomic, u32_at};

const HS_FLAG_NEWVERSION: u32 = 0x8000_0000;
const HS_COUNT_MASK: u32 = 0x0FFF_FFFF;
const HENTRY_ISFIRST: u32 = 0x8000_0000;
const HENTRY_ISNULL: u32 = 0x4000_0000;
const HENTRY_POSMASK: u32 = 0x3FFF_FFFF;

const SHORT: &str = "hstore datum is too short";
const OLD_LAYOUT: &str = "hstore in the pre-9.0 layout";
const OVERRUN: &str = "hstore entry runs out of its datum";
const NOT_UTF8: &str = "hstore string is not UTF-8";

type RawPair<'a> = (&'a [u8], Option<&'a [u8]>);

/// The stored pairs, key and value bytes (None for a NULL value), in stored order.
fn raw_pairs(d: &[u8]) -> Result<Vec<RawPair<'_>>, &'static str> {
    if d.is_empty() {
        return Ok(Vec::new());
    }
    let size = u32_at(d, 0).ok_or(SHORT)?;
    if size & HS_FLAG_NEWVERSION == 0 {
        return Err(OLD_LAYOUT);
    }
    let count = (size & HS_COUNT_MASK) as usize;
    let base = count
        .checked_mul(8)
        .and_then(|n| n.checked_add(4))
        .ok_or(SHORT)?;
    if d.len() < base {
        return Err(SHORT);
    }
    let mut pairs = Vec::with_capacity(count);
    let mut prev_end = 0usize;
    let mut entry_at = 4usize;
    for _ in 0..count {
        let (key, _) = entry(d, base, entry_at, &mut prev_end)?;
        let (value, null) = entry(d, base, entry_at + 4, &mut prev_end)?;
        pairs.push((key, (!null).then_some(value)));
        entry_at += 8;
    }
    Ok(pairs)
}

/// The string of the HEntry at `at` and whether it is flagged NULL; `prev_end` moves on.
fn entry<'a>(
    d: &'a [u8],
    base: usize,
    at: usize,
    prev_end: &mut usize,
) -> Result<(&'a [u8], bool), &'static str> {
    let word = u32_at(d, at).ok_or(OVERRUN)?;
    let start = if word & HENTRY_ISFIRST != 0 {
        0
    } else {
        *prev_end
    };
    let end = (word & HENTRY_POSMASK) as usize;
    if end < start {
        return Err(OVERRUN);
    }
    let from = base.checked_add(start).ok_or(OVERRUN)?;
    let to = base.checked_add(end).ok_or(OVERRUN)?;
    let bytes = d.get(from..to).ok_or(OVERRUN)?;
    *prev_end = end;
    Ok((bytes, word & HENTRY_ISNULL != 0))
}

fn utf8(b: &[u8]) -> Result<&str, &'static str> {
    std::str::from_utf8(b).map_err(|_| NOT_UTF8)
}

/// `"` + the text with `\` and `"` backslashed + `"`.
fn quoted(out: &mut String, text: &str) {
    out.push('"');
    for ch in text.chars() {
        if ch == '\\' || ch == '"' {
            out.push('\\');
        }
        out.push(ch);
    }
    out.push('"');
}

/// hstore_out's text, appended to `out`.
pub fn hstore_text(out: &mut String, d: &[u8]) -> Result<(), &'static str> {
    let pairs = raw_pairs(d)?;
    atomic(out, |out| {
        for (i, (key, value)) in pairs.iter().enumerate() {
            if i > 0 {
                out.push_str(", ");
            }
            quoted(out, utf8(key)?);
            out.push_str("=>");
            match value {
                None => out.push_str("NULL"),
                Some(v) => quoted(out, utf8(v)?),
            }
        }
        Ok(())
    })
}

/// hstore_value: the pairs as a Python dict holds them (a repeated key keeps its first
/// place and its last value).
fn value_pairs(d: &[u8]) -> Result<Vec<(&str, Option<&str>)>, &'static str> {
    let raw = raw_pairs(d)?;
    let mut pairs: Vec<(&str, Option<&str>)> = Vec::with_capacity(raw.len());
    let mut seen: HashMap<&str, usize> = HashMap::new();
    for (key, value) in raw {
        let key = utf8(key)?;
        let value = value.map(utf8).transpose()?;
        match seen.get(key) {
            Some(&at) => {
                if let Some(slot) = pairs.get_mut(at) {
                    slot.1 = value;
                }
            }
            None => {
                seen.insert(key, pairs.len());
                pairs.push((key, value));
            }
        }
    }
    Ok(pairs)
}

/// The dict's pairs in java.util.HashMap iteration order (_hstore_pairs).
fn hash_ordered(d: &[u8]) -> Result<Vec<(&str, Option<&str>)>, &'static str> {
    let pairs = value_pairs(d)?;
    let hashes: Vec<u32> = pairs.iter().map(|(k, _)| java_string_hash(k)).collect();
    let order = java_hash_order(&hashes, None);
    Ok(order
        .iter()
        .filter_map(|&i| pairs.get(i).copied())
        .collect())
}

/// The Debezium JSON of the hstore (hstore.handling.mode=json), appended to `out`.
pub fn hstore_json(out: &mut String, d: &[u8]) -> Result<(), &'static str> {
    let pairs = hash_ordered(d)?;
    out.push('{');
    for (i, (key, value)) in pairs.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        json_string(out, key);
        out.push(':');
        match value {
            None => out.push_str("null"),
            Some(v) => json_string(out, v),
        }
    }
    out.push('}');
    Ok(())
}

/// The Debezium map of the hstore (hstore.handling.mode=map): its pairs in HashMap order.
pub fn hstore_pairs(d: &[u8]) -> Result<Vec<(String, Option<String>)>, &'static str> {
    Ok(hash_ordered(d)?
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.map(str::to_string)))
        .collect())
}

/// A JSON string as Jackson writes it (_json_string): `"`, `\` and the control
/// characters with a short escape backslashed, the other controls `\u00XX`.
fn json_string(out: &mut String, text: &str) {
    out.push('"');
    for ch in text.chars() {
        match ch {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\u{8}' => out.push_str("\\b"),
            '\t' => out.push_str("\\t"),
            '\n' => out.push_str("\\n"),
            '\u{c}' => out.push_str("\\f"),
            '\r' => out.push_str("\\r"),
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04X}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

/// java.lang.String.hashCode: over the UTF-16 code units, int32 arithmetic (as u32).
pub fn java_string_hash(text: &str) -> u32 {
    text.encode_utf16().fold(0u32, |h, unit| {
        h.wrapping_mul(31).wrapping_add(u32::from(unit))
    })
}

/// HashMap.tableSizeFor: the least power of two at least `n` (1 for 0).
fn table_size_for(n: usize) -> u64 {
    (n as u64).checked_next_power_of_two().unwrap_or(1 << 63)
}

/// The indices of keys (inserted in order, all distinct, with these hashCodes) in the
/// order a java.util.HashMap iterates them (java_hash_order): by bucket of the final
/// table, insertion order within a bucket. The table starts at 16 buckets (or
/// tableSizeFor(initial_capacity)), doubles when a key lands in a bin already holding 8
/// while under 64 buckets (treeifyBin's resize), and when the size passes 3/4 of it.
pub fn java_hash_order(hashes: &[u32], initial_capacity: Option<usize>) -> Vec<usize> {
    let mut cap = initial_capacity.map_or(16, table_size_for).max(1);
    let spread: Vec<u64> = hashes.iter().map(|&h| u64::from(h ^ (h >> 16))).collect();
    for (size, &last_spread) in (1u64..).zip(&spread) {
        let mask = cap - 1;
        let last = last_spread & mask;
        if cap < 64 {
            let before = spread.get(..(size - 1) as usize).unwrap_or(&[]);
            if before.iter().filter(|&&s| s & mask == last).count() >= 8 {
                cap <<= 1;
            }
        }
        if size > cap * 3 / 4 {
            cap <<= 1;
        }
    }
    let mask = cap - 1;
    let mut order: Vec<usize> = (0..spread.len()).collect();
    order.sort_by_key(|&i| spread.get(i).map_or(0, |s| s & mask));
    order
}
