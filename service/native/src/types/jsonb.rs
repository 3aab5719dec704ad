//! jsonb_out: a jsonb datum's binary containers printed as the server prints them.
//!
//! Receives: a jsonb varlena's payload (jsonb.h: a container is a uint32 header, count in
//! the low 28 bits, 0x10000000 scalar, 0x20000000 object, 0x40000000 array; then one
//! uint32 JEntry per element, an object's keys before its values; then the data).
//! Hands on: appended to a String, the text jsonb_out (JsonbToCString) prints: `", "` and
//! `": "` separators, keys in stored order, numbers as numeric_out (types::numeric::text),
//! strings as escape_json. Mirrors service.types.jsonb.jsonb_text check for check.
//!
//! Errors: anything the Python reference would reject (an entry that overruns its
//! container, an unknown type, a key that is not a string, text that is not UTF-8, a
//! nested numeric with a varlena header it does not read) is `Err(reason)`: the row falls
//! back and Python raises its typed DecodeError. Depth is bounded by the datum's size
//! (each level takes at least 4 bytes), and no index is unchecked. Pure, no panics.

use std::fmt::Write;

use super::{nested_varlena, numeric};

const JB_CMASK: u32 = 0x0FFF_FFFF;
const JB_FSCALAR: u32 = 0x1000_0000;
const JB_FOBJECT: u32 = 0x2000_0000;
const JB_FARRAY: u32 = 0x4000_0000;
const JENTRY_OFFLENMASK: u32 = 0x0FFF_FFFF;
const JENTRY_TYPEMASK: u32 = 0x7000_0000;
const JENTRY_HAS_OFF: u32 = 0x8000_0000;
const JENTRY_ISSTRING: u32 = 0x0000_0000;
const JENTRY_ISNUMERIC: u32 = 0x1000_0000;
const JENTRY_ISBOOL_FALSE: u32 = 0x2000_0000;
const JENTRY_ISBOOL_TRUE: u32 = 0x3000_0000;
const JENTRY_ISNULL: u32 = 0x4000_0000;
const JENTRY_ISCONTAINER: u32 = 0x5000_0000;
/// Deeper than this, Python's recursion decides (the server's limit is far lower in
/// practice: check_stack_depth).
const MAX_DEPTH: usize = 512;

const BAD: &str = "jsonb Python decides";

fn u32_at(buf: &[u8], at: usize) -> Result<u32, &'static str> {
    let b = buf.get(at..at + 4).ok_or(BAD)?;
    Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
}

fn intalign(n: usize) -> usize {
    (n + 3) & !3
}

/// Does `b` need an escape in a JSON string (a control character, `"` or `\`)?
fn needs_escape(b: u8) -> bool {
    b < 0x20 || b == b'"' || b == b'\\'
}

const ONES: u64 = 0x0101_0101_0101_0101;
const HIGHS: u64 = 0x8080_8080_8080_8080;

/// Are the 8 bytes of `w` all free of `needs_escape`? Word-at-a-time: a byte below 0x20
/// sets its high bit in `w - 0x20..` where `!w` has it set too (exact for a bound up to
/// 0x80), and a byte equal to `c` is a zero byte of `w ^ c..`, found the same way.
fn plain_word(w: u64) -> bool {
    let below = |v: u64, n: u64| v.wrapping_sub(ONES * n) & !v & HIGHS;
    let quote = w ^ (ONES * u64::from(b'"'));
    let backslash = w ^ (ONES * u64::from(b'\\'));
    (below(w, 0x20) | below(quote, 1) | below(backslash, 1)) == 0
}

/// escape_json (json.c): the quoted string. The text is copied in runs between the
/// bytes that need an escape, all ASCII, so a run never splits a multi-byte character;
/// the runs are found 8 bytes at a time (`plain_word`).
pub fn escape_json(out: &mut String, text: &str) {
    out.reserve(text.len() + 2);
    out.push('"');
    let bytes = text.as_bytes();
    let (mut start, mut i) = (0, 0);
    while i < bytes.len() {
        if let Some(word) = bytes.get(i..i + 8) {
            let mut w = [0u8; 8];
            w.copy_from_slice(word);
            if plain_word(u64::from_le_bytes(w)) {
                i += 8;
                continue;
            }
        }
        let b = bytes[i];
        i += 1;
        if !needs_escape(b) {
            continue;
        }
        out.push_str(&text[start..i - 1]);
        start = i;
        match b {
            0x08 => out.push_str("\\b"),
            0x0c => out.push_str("\\f"),
            b'\n' => out.push_str("\\n"),
            b'\r' => out.push_str("\\r"),
            b'\t' => out.push_str("\\t"),
            b'"' => out.push_str("\\\""),
            b'\\' => out.push_str("\\\\"),
            c => {
                let _ = write!(out, "\\u{:04x}", c);
            }
        }
    }
    out.push_str(&text[start..]);
    out.push('"');
}

/// (type, start, length) of one entry, relative to its container's data.
type Span = (u32, usize, usize);

struct Reader<'a> {
    buf: &'a [u8],
}

impl Reader<'_> {
    fn container(
        &self,
        out: &mut String,
        pos: usize,
        end: usize,
        depth: usize,
    ) -> Result<(), &'static str> {
        if depth > MAX_DEPTH || pos + 4 > end || end > self.buf.len() {
            return Err(BAD);
        }
        let header = u32_at(self.buf, pos)?;
        let count = (header & JB_CMASK) as usize;
        let is_object = header & JB_FOBJECT != 0;
        if is_object == (header & JB_FARRAY != 0) {
            return Err(BAD);
        }
        let nentries = if is_object { 2 * count } else { count };
        let base = pos
            .checked_add(4)
            .and_then(|p| nentries.checked_mul(4).and_then(|n| p.checked_add(n)))
            .ok_or(BAD)?;
        if base > end {
            return Err(BAD);
        }
        let mut spans: Vec<Span> = Vec::with_capacity(nentries);
        let mut offset = 0usize;
        for i in 0..nentries {
            let je = u32_at(self.buf, pos + 4 + 4 * i)?;
            let offlen = (je & JENTRY_OFFLENMASK) as usize;
            let stop = if je & JENTRY_HAS_OFF != 0 {
                offlen
            } else {
                offset + offlen
            };
            if stop < offset || base + stop > end {
                return Err(BAD);
            }
            spans.push((je & JENTRY_TYPEMASK, offset, stop - offset));
            offset = stop;
        }
        if header & JB_FSCALAR != 0 {
            if is_object || count != 1 {
                return Err(BAD);
            }
            return self.scalar(out, base, spans[0], depth);
        }
        if is_object {
            out.push('{');
            for i in 0..count {
                if i > 0 {
                    out.push_str(", ");
                }
                let (kind, start, length) = spans[i];
                if kind != JENTRY_ISSTRING {
                    return Err(BAD);
                }
                escape_json(out, self.str_at(base + start, length)?);
                out.push_str(": ");
                self.scalar(out, base, spans[count + i], depth)?;
            }
            out.push('}');
        } else {
            out.push('[');
            for (i, span) in spans.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                self.scalar(out, base, *span, depth)?;
            }
            out.push(']');
        }
        Ok(())
    }

    fn str_at(&self, at: usize, length: usize) -> Result<&str, &'static str> {
        let b = self.buf.get(at..at + length).ok_or(BAD)?;
        std::str::from_utf8(b).map_err(|_| BAD)
    }

    fn scalar(
        &self,
        out: &mut String,
        base: usize,
        (kind, start, length): Span,
        depth: usize,
    ) -> Result<(), &'static str> {
        match kind {
            JENTRY_ISSTRING => escape_json(out, self.str_at(base + start, length)?),
            JENTRY_ISNUMERIC => {
                let at = base + intalign(start);
                let stop = base + start + length;
                let datum = self.buf.get(at..stop).ok_or(BAD)?;
                let (payload, _) = nested_varlena(datum, 0).map_err(|_| BAD)?;
                numeric::text(out, payload).ok_or(BAD)?;
            }
            JENTRY_ISBOOL_FALSE => out.push_str("false"),
            JENTRY_ISBOOL_TRUE => out.push_str("true"),
            JENTRY_ISNULL => out.push_str("null"),
            JENTRY_ISCONTAINER => self.container(
                out,
                base + intalign(start),
                base + start + length,
                depth + 1,
            )?,
            _ => return Err(BAD),
        }
        Ok(())
    }
}

/// jsonb_out of a payload.
pub fn text(out: &mut String, payload: &[u8]) -> Result<(), &'static str> {
    let mark = out.len();
    let done = Reader { buf: payload }.container(out, 0, payload.len(), 0);
    if done.is_err() {
        out.truncate(mark);
    }
    done
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(kind: u32, len: usize) -> u32 {
        kind | len as u32
    }

    /// `{"a": 1, "bb": [true, null, "x\n"]}` laid out as convertToJsonb lays it out.
    fn sample() -> Vec<u8> {
        // inner array [true, null, "x\n"]
        let mut inner = (JB_FARRAY | 3).to_le_bytes().to_vec();
        for je in [
            entry(JENTRY_ISBOOL_TRUE, 0),
            entry(JENTRY_ISNULL, 0),
            entry(JENTRY_ISSTRING, 2),
        ] {
            inner.extend_from_slice(&je.to_le_bytes());
        }
        inner.extend_from_slice(b"x\n");
        // numeric 1: NumericShort header (weight 0, dscale 0), one digit, short varlena
        let num = [0x0b, 0x00, 0x80, 0x01, 0x00];
        let mut data = Vec::new();
        data.extend_from_slice(b"a");
        data.extend_from_slice(b"bb");
        data.push(0); // pad the numeric to 4
        data.extend_from_slice(&num);
        let num_len = 1 + num.len();
        while data.len() % 4 != 0 {
            data.push(0);
        }
        let pad = data.len() - 3 - num_len;
        data.extend_from_slice(&inner);
        let mut out = (JB_FOBJECT | 2).to_le_bytes().to_vec();
        for je in [
            entry(JENTRY_ISSTRING, 1),
            entry(JENTRY_ISSTRING, 2),
            entry(JENTRY_ISNUMERIC, num_len),
            entry(JENTRY_ISCONTAINER, pad + inner.len()),
        ] {
            out.extend_from_slice(&je.to_le_bytes());
        }
        out.extend_from_slice(&data);
        out
    }

    #[test]
    fn prints_as_jsonb_out() {
        let mut s = String::new();
        text(&mut s, &sample()).unwrap();
        assert_eq!(s, r#"{"a": 1, "bb": [true, null, "x\n"]}"#);
        let mut s = String::new();
        escape_json(&mut s, "q\"\\\u{1}é");
        assert_eq!(s, "\"q\\\"\\\\\\u0001é\"");
    }

    /// The run-copying escape_json against a char-by-char one (json.c's loop): every
    /// ASCII character alone and between multi-byte ones, and every code point below
    /// 0x3000 in one string.
    #[test]
    fn escape_json_equals_the_char_loop() {
        fn reference(text: &str) -> String {
            let mut out = String::from('"');
            for ch in text.chars() {
                match ch {
                    '\u{8}' => out.push_str("\\b"),
                    '\u{c}' => out.push_str("\\f"),
                    '\n' => out.push_str("\\n"),
                    '\r' => out.push_str("\\r"),
                    '\t' => out.push_str("\\t"),
                    '"' => out.push_str("\\\""),
                    '\\' => out.push_str("\\\\"),
                    c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
                    c => out.push(c),
                }
            }
            out.push('"');
            out
        }
        let mut cases: Vec<String> = (0u8..0x80)
            .flat_map(|b| {
                let c = char::from(b);
                [c.to_string(), format!("é{c}€{c}{c}😀"), format!("{c}plain")]
            })
            .collect();
        cases.push((0u32..0x3000).filter_map(char::from_u32).collect());
        // each escaped byte at every offset of a 20-byte run, and bytes 0x80..0xFF (in
        // multi-byte characters) next to it: the word test must find it wherever it is
        for special in [
            '"', '\\', '\n', '\u{1f}', '\u{0}', ' ', '\u{7f}', 'ÿ', '\u{ff}',
        ] {
            for at in 0..20 {
                let mut t: String = "abcdefghijklmnopqrst".into();
                t.insert(at, special);
                cases.push(t);
            }
        }
        cases.push(String::new());
        // random strings over a palette of escaped, plain and multi-byte characters
        let palette = [
            'a', '"', '\\', '\n', '\u{1}', '\u{1f}', ' ', '~', 'é', '€', '😀', '\u{7f}',
        ];
        let mut seed: u64 = 0x9E37_79B9_7F4A_7C15;
        for _ in 0..5000 {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            let len = (seed % 40) as usize;
            cases.push(
                (0..len)
                    .map(|k| palette[((seed >> (k % 50)) as usize + k * 7) % palette.len()])
                    .collect(),
            );
        }
        for text in &cases {
            let mut s = String::from("keep");
            escape_json(&mut s, text);
            assert_eq!(s, format!("keep{}", reference(text)), "{text:?}");
        }
    }

    #[test]
    fn damage_is_an_error_never_a_panic() {
        let good = sample();
        for cut in 0..good.len() {
            let mut s = String::from("keep");
            let _ = text(&mut s, &good[..cut]);
            assert!(s == "keep" || text(&mut String::new(), &good[..cut]).is_ok());
        }
        for i in 0..good.len() {
            for flip in [0x01u8, 0x80, 0xFF] {
                let mut bad = good.clone();
                bad[i] ^= flip;
                let _ = text(&mut String::new(), &bad);
            }
        }
        // a container nested past MAX_DEPTH
        let mut deep = Vec::new();
        for _ in 0..(MAX_DEPTH + 2) {
            deep.extend_from_slice(&(JB_FARRAY | 1).to_le_bytes());
            deep.extend_from_slice(&entry(JENTRY_ISCONTAINER, 0).to_le_bytes());
        }
        assert!(text(&mut String::new(), &deep).is_err());
    }
}
