//! contrib/isn (isn.c ean2string, hyphenate, weight_checkdig and ean2ISBN / ean2ISMN /
//! ean2ISSN / ean2UPC): ean13, isbn13, ismn13, issn13, isbn, ismn, issn and upc.
//!
//! Receives: the 8-byte datum (uint64, little-endian): the 13-digit EAN number shifted
//! left by one, its low bit set when it was entered with a wrong check digit in weak
//! mode (printed with a trailing `!`).
//!
//! Hands on, as service.types.isn (ean13_text, isn_text): ean13_out's full EAN13
//! hyphenated by the range tables (`978-0-393-04002-9`) for the `*13` types and ean13;
//! isn_out's short form of the number's own kind (by prefix: 978/979 ISBN, 977 ISSN,
//! 9790 ISMN, 0 UPC), with its own check digit, for isbn, ismn, issn and upc.
//!
//! ean2string works in place on one C buffer, binary-searching the range table of the
//! number's prefix and shifting the digits as it inserts hyphens; `Buf` replays the
//! Python's replay of those steps (its `_Buf`): the same u32 index arithmetic, the same
//! lazily read bytes, Python's negative indexing where the Python would use it.
//!
//! Errors: a datum not of 8 bytes, a number over 13 digits (ean2string refuses it),
//! and any read or write the Python would fail (IndexError, a missing NUL). Pure, no
//! panics: the buffer is fixed and every access is checked.

use super::atomic;
use super::isn_ranges::{self as ranges, Table};

const MAXEAN13LEN: i64 = 18;
const BUF_LEN: usize = 18 + 8;
const MAX_EAN: u64 = 9_999_999_999_999;
/// More search steps than any table needs: beyond, Python decides.
const MAX_STEPS: usize = 10_000;

const SIZE: &str = "isn datum is not 8 bytes";
const RANGE: &str = "isn value is out of range for EAN13/UPC/ISxN";
const BUFFER: &str = "isn buffer Python decides";

/// The isn type a column is, for its output function.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IsnKind {
    Ean13,
    Isbn13,
    Ismn13,
    Issn13,
    Isbn,
    Ismn,
    Issn,
    Upc,
}

impl IsnKind {
    /// The kind of the pg_type named `name`, None for another type.
    pub fn from_name(name: &str) -> Option<IsnKind> {
        Some(match name {
            "ean13" => IsnKind::Ean13,
            "isbn13" => IsnKind::Isbn13,
            "ismn13" => IsnKind::Ismn13,
            "issn13" => IsnKind::Issn13,
            "isbn" => IsnKind::Isbn,
            "ismn" => IsnKind::Ismn,
            "issn" => IsnKind::Issn,
            "upc" => IsnKind::Upc,
            _ => return None,
        })
    }

    /// Whether its output function is isn_out (the short form), not ean13_out.
    pub fn short(self) -> bool {
        matches!(
            self,
            IsnKind::Isbn | IsnKind::Ismn | IsnKind::Issn | IsnKind::Upc
        )
    }
}

/// What the number is, by prefix.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Found {
    Ean13,
    Isbn,
    Ismn,
    Issn,
    Upc,
}

/// The output text of the isn value `d` as `kind`'s output function prints it.
pub fn isn_text(out: &mut String, d: &[u8], kind: IsnKind) -> Result<(), &'static str> {
    let bytes: [u8; 8] = d.try_into().map_err(|_| SIZE)?;
    let buf = ean_string(u64::from_le_bytes(bytes), kind.short())?;
    let text = buf.cstr(0)?;
    if !text.is_ascii() {
        return Err(BUFFER);
    }
    atomic(out, |out| {
        out.extend(text.iter().map(|&c| char::from(c)));
        Ok(())
    })
}

fn is_digit(c: u8) -> bool {
    c.is_ascii_digit()
}

/// Python's `seq[i]`: a negative `i` counts from the end.
fn py_index(len: usize, i: i64) -> Option<usize> {
    let len = i64::try_from(len).ok()?;
    let at = if i < 0 { i.checked_add(len)? } else { i };
    (0..len).contains(&at).then_some(at as usize)
}

/// `s.encode() + b"\0"` read at `p`: the NUL at the end, an IndexError past it.
fn nul_str_at(s: &str, p: usize) -> Result<u8, &'static str> {
    match p.cmp(&s.len()) {
        std::cmp::Ordering::Less => s.as_bytes().get(p).copied().ok_or(BUFFER),
        std::cmp::Ordering::Equal => Ok(0),
        std::cmp::Ordering::Greater => Err(BUFFER),
    }
}

/// The C string buffer ean2string works in.
struct Buf([u8; BUF_LEN]);

impl Buf {
    fn at(&self, i: i64) -> Result<u8, &'static str> {
        let at = py_index(BUF_LEN, i).ok_or(BUFFER)?;
        self.0.get(at).copied().ok_or(BUFFER)
    }

    fn set(&mut self, i: i64, v: u8) -> Result<(), &'static str> {
        let at = py_index(BUF_LEN, i).ok_or(BUFFER)?;
        *self.0.get_mut(at).ok_or(BUFFER)? = v;
        Ok(())
    }

    fn cstr(&self, at: usize) -> Result<&[u8], &'static str> {
        let rest = self.0.get(at..).ok_or(BUFFER)?;
        let end = rest.iter().position(|&c| c == 0).ok_or(BUFFER)?;
        rest.get(..end).ok_or(BUFFER)
    }

    /// hyphenate() without a table: copy the string at `i` to `o`.
    fn copy(&mut self, mut o: i64, mut i: i64) -> Result<i64, &'static str> {
        let mut ret = 0;
        loop {
            let c = self.at(i)?;
            if c == 0 {
                break;
            }
            self.set(o, c)?;
            (o, i, ret) = (o + 1, i + 1, ret + 1);
        }
        self.set(o, 0)?;
        Ok(ret + 1)
    }

    /// hyphenate(): copy the digits at `i` to `o`, adding the hyphens of the range in
    /// `table` that holds them; the characters written, or 0 when no range does.
    fn hyphenate(&mut self, o: i64, i: i64, table: Option<&Table>) -> Result<i64, &'static str> {
        let Some(table) = table else {
            return self.copy(o, i);
        };
        match self.find_range(i, table)? {
            Some(pattern) => self.insert_hyphens(o, i, pattern),
            None => Ok(0),
        }
    }

    /// hyphenate()'s binary search of `table` for the range holding the digits at `i`:
    /// its lower bound (the hyphen pattern), None when there is none.
    fn find_range<'t>(&self, i: i64, table: &'t Table) -> Result<Option<&'t str>, &'static str> {
        let digit = i64::from(self.at(i)?) - 48;
        let row = py_index(table.index.len(), digit)
            .and_then(|k| table.index.get(k))
            .ok_or(BUFFER)?;
        let mut upper = row.0.wrapping_add(row.1);
        let mut lower = row.0.wrapping_sub(1);
        let mut step = upper.wrapping_sub(lower) / 2;
        if step == 0 {
            return Ok(None);
        }
        let mut search = lower.wrapping_add(step);
        let pair = |search: u32| table.ranges.get(search as usize).ok_or(BUFFER);
        let (mut lo, mut hi) = *pair(search)?;
        let (mut first, mut p) = (i, 0usize);
        let (mut in1, mut in2) = (false, false);
        for _ in 0..MAX_STEPS {
            let c = self.at(first)?;
            // the Python's `and` / `or` read lo[p] and hi[p] lazily, and so does this
            let low_ok = in1 || c >= nul_str_at(lo, p)?;
            if low_ok && (in2 || c <= nul_str_at(hi, p)?) {
                in1 |= c > nul_str_at(lo, p)?;
                in2 |= c < nul_str_at(hi, p)?;
                if in1 && in2 {
                    return Ok(Some(lo));
                }
                (first, p) = (first + 1, p + 1);
                if !(nul_str_at(lo, p)? != 0 && nul_str_at(hi, p)? != 0 && self.at(first)? != 0) {
                    return Ok(Some(lo));
                }
                if !is_digit(nul_str_at(lo, p)?) {
                    p += 1;
                }
            } else {
                if c < nul_str_at(lo, p)? && !in1 {
                    upper = search;
                } else {
                    lower = search;
                }
                step = upper.wrapping_sub(lower) / 2;
                if step == 0 {
                    return Ok(None);
                }
                search = lower.wrapping_add(step);
                (first, in1, in2, p) = (i, false, false, 0);
                (lo, hi) = *pair(search)?;
            }
        }
        Err(BUFFER)
    }

    /// The copy of the digits at `i` to `o` after the range's `pattern` (its lower
    /// bound), a hyphen where it has one, then a hyphen and the lookahead character.
    fn insert_hyphens(&mut self, o: i64, i: i64, pattern: &str) -> Result<i64, &'static str> {
        let (mut a1, mut a2, mut ret) = (o, i, 0i64);
        for &k in pattern.as_bytes() {
            if self.at(a2)? == 0 {
                break;
            }
            if k != b'-' {
                let c = self.at(a2)?;
                self.set(a1, c)?;
                a2 += 1;
            } else {
                self.set(a1, b'-')?;
            }
            (a1, ret) = (a1 + 1, ret + 1);
        }
        self.set(a1, b'-')?;
        let look = self.at(a2)?;
        self.set(a1 + 1, look)?;
        Ok(ret + 1)
    }

    /// strncmp(literal, buffer, n) == 0.
    fn strneq(&self, literal: &[u8], n: i64) -> Result<bool, &'static str> {
        for k in 0..n.max(0) {
            let a = usize::try_from(k)
                .ok()
                .and_then(|k| literal.get(k))
                .copied()
                .unwrap_or(0);
            if a != self.at(k)? {
                return Ok(false);
            }
            if a == 0 {
                return Ok(true);
            }
        }
        Ok(true)
    }

    /// The digits at `i` and after, copied to `o` without the hyphens.
    fn dehyphenate(&mut self, mut o: i64, mut i: i64) -> Result<(), &'static str> {
        loop {
            let c = self.at(i)?;
            if c == 0 {
                break;
            }
            if is_digit(c) {
                self.set(o, c)?;
                o += 1;
            }
            i += 1;
        }
        self.set(o, 0)
    }
}

/// weight_checkdig(): the mod-11 check digit of the first size - 1 digits of `text`.
fn weight_checkdig(text: &[u8], mut size: i64) -> i64 {
    let mut weight = 0i64;
    for &c in text {
        if size <= 1 {
            break;
        }
        if is_digit(c) {
            weight += size * i64::from(c - b'0');
            size -= 1;
        }
    }
    weight %= 11;
    if weight != 0 {
        11 - weight
    } else {
        0
    }
}

fn check_char(check: i64) -> u8 {
    if check == 10 {
        b'X'
    } else {
        // 0..=9 here: weight_checkdig's result is 0..=10
        b'0' + (check.clamp(0, 9) as u8)
    }
}

/// ean2string(): the hyphenated EAN13 in the buffer, shortened when `short`.
fn ean_string(word: u64, short: bool) -> Result<Buf, &'static str> {
    let valid = if word & 1 != 0 { b'!' } else { 0 };
    let mut ean = word >> 1;
    if ean > MAX_EAN {
        return Err(RANGE);
    }
    let mut buf = Buf([0; BUF_LEN]);
    let mut aux = MAXEAN13LEN;
    buf.set(aux, 0)?;
    aux -= 1;
    buf.set(aux, valid)?;
    let mut search = 0;
    loop {
        let digit = (ean % 10) as u8;
        ean /= 10;
        aux -= 1;
        buf.set(aux, digit + b'0')?;
        if search == 0 {
            aux -= 1;
            buf.set(aux, b'-')?;
        }
        let more = ean != 0 && search < 13;
        search += 1;
        if !more {
            break;
        }
    }
    while search < 13 {
        aux -= 1;
        buf.set(aux, b'0')?;
        search += 1;
    }
    let found = classify_and_hyphenate(&mut buf)?;
    if short {
        shorten(&mut buf, found)?;
    }
    Ok(buf)
}

/// The EAN13 prefix hyphenated, then the rest by the table of the kind it names.
fn classify_and_hyphenate(buf: &mut Buf) -> Result<Found, &'static str> {
    let search = buf.hyphenate(0, 3, Some(&ranges::EAN13))?;
    if search == 0 {
        buf.hyphenate(0, 3, None)?;
        return Ok(Found::Ean13);
    }
    let (found, table) = if buf.strneq(b"978-", search)? {
        (Found::Isbn, Some(&ranges::ISBN))
    } else if buf.strneq(b"977-", search)? {
        (Found::Issn, Some(&ranges::ISSN))
    } else if buf.strneq(b"979-0", search + 1)? {
        (Found::Ismn, Some(&ranges::ISMN))
    } else if buf.strneq(b"979-", search)? {
        (Found::Isbn, Some(&ranges::ISBN_NEW))
    } else if buf.at(0)? == b'0' {
        (Found::Upc, Some(&ranges::UPC))
    } else {
        (Found::Ean13, None)
    };
    if buf.hyphenate(search, search + 2, table)? == 0 {
        buf.hyphenate(search, search + 2, None)?;
    }
    Ok(found)
}

/// ean2ISBN / ean2ISMN / ean2ISSN / ean2UPC: the old short forms, in place.
fn shorten(buf: &mut Buf, found: Found) -> Result<(), &'static str> {
    match found {
        Found::Isbn => {
            if buf.0.get(..4) == Some(b"978-".as_slice()) {
                buf.hyphenate(0, 4, None)?;
                let text = buf.cstr(0)?;
                let check = weight_checkdig(text, 10);
                let mut last = text.len() as i64 - 1;
                while !is_digit(buf.at(last)?) {
                    last -= 1;
                }
                buf.set(last, check_char(check))?;
            }
        }
        Found::Ismn => {
            buf.hyphenate(0, 4, None)?;
            buf.set(0, b'M')?;
        }
        Found::Issn => {
            buf.hyphenate(0, 4, None)?;
            let check = weight_checkdig(buf.cstr(0)?, 8);
            buf.set(8, check_char(check))?;
            buf.set(9, 0)?;
        }
        Found::Upc => {
            buf.dehyphenate(0, 1)?;
            buf.set(12, 0)?;
        }
        Found::Ean13 => {}
    }
    Ok(())
}
