//! numeric datums as Debezium's Avro decimals (precise mode), without a Decimal.
//!
//! Receives: a numeric varlena payload (numeric.c's NumericData: a uint16 header, an
//! int16 weight in the long form, then base-10000 int16 digits; the layout is described
//! in service/types/numeric.py, whose `parse` this mirrors check for check).
//! Hands on:
//! - `fixed`: the bytes fastavro writes for a `bytes`/`decimal(precision, scale)` field:
//!   the value's digits at `scale` places as big-endian two's complement, sized from the
//!   magnitude (`(|n|.bit_length() + 8) // 8` bytes, fastavro's prepare_bytes_decimal),
//!   exactly where service.types.numeric.scaled_integer gives a result;
//! - `variable`: Debezium's VariableScaleDecimal {scale, value}: the scale is the datum's
//!   dscale, the value the unscaled integer in the fewest bytes
//!   (java.math.BigInteger.toByteArray, connectors.avro.schema.unscaled_bytes).
//!
//! - `text`: the text numeric_out prints (test_decoding's text plugin, output::text).
//!
//! `None` means "not mine": NaN/±Infinity, more places than the column's scale, more
//! digits than its precision, a digit outside 0..9999, a malformed datum, or more than
//! `MAX_DIGITS` decimal digits. The caller then falls back to the Python path, which
//! warns, raises or converts as it always did. The value numeric_out prints is the
//! digits truncated to dscale places (get_str_from_var), which `unscaled_digits` follows.

const NUMERIC_SIGN_MASK: u16 = 0xC000;
const NUMERIC_NEG: u16 = 0x4000;
const NUMERIC_SHORT: u16 = 0x8000;
const NUMERIC_SPECIAL: u16 = 0xC000;

/// Decimal digits beyond which the native path leaves the value to Python (a bound on
/// the quadratic conversion below, far above numeric(1000)).
pub const MAX_DIGITS: usize = 4096;

/// A finite numeric's (negative, weight, dscale, digits), as service.types.numeric.parse.
fn parse(buf: &[u8]) -> Option<(bool, i32, u32, Vec<i16>)> {
    if buf.len() < 2 {
        return None;
    }
    let header = u16::from_le_bytes([buf[0], buf[1]]);
    let kind = header & NUMERIC_SIGN_MASK;
    let (negative, dscale, weight, start) = if kind == NUMERIC_SPECIAL {
        return None;
    } else if kind == NUMERIC_SHORT {
        let mut weight = (header & 0x003F) as i32;
        if header & 0x0040 != 0 {
            weight -= 64;
        }
        (
            header & 0x2000 != 0,
            ((header & 0x1F80) >> 7) as u32,
            weight,
            2,
        )
    } else {
        if buf.len() < 4 || (kind != 0 && kind != NUMERIC_NEG) {
            return None;
        }
        let weight = i16::from_le_bytes([buf[2], buf[3]]) as i32;
        (kind == NUMERIC_NEG, (header & 0x3FFF) as u32, weight, 4)
    };
    let rest = &buf[start..];
    if rest.len() % 2 != 0 {
        return None;
    }
    let digits: Vec<i16> = rest
        .chunks_exact(2)
        .map(|c| i16::from_le_bytes([c[0], c[1]]))
        .collect();
    if digits.iter().any(|&d| !(0..10_000).contains(&d)) {
        return None;
    }
    Some((negative, weight, dscale, digits))
}

/// The decimal digits of the value times 10^dscale, truncated (no leading zeros; empty
/// for zero), or None past MAX_DIGITS.
fn unscaled_digits(weight: i32, dscale: u32, digits: &[i16]) -> Option<Vec<u8>> {
    let mut dec: Vec<u8> = Vec::with_capacity(digits.len() * 4);
    for &d in digits {
        let d = d as u16;
        dec.extend_from_slice(&[
            (d / 1000) as u8,
            (d / 100 % 10) as u8,
            (d / 10 % 10) as u8,
            (d % 10) as u8,
        ]);
    }
    let shift = 4 * (weight as i64 + 1 - digits.len() as i64) + dscale as i64;
    if shift >= 0 {
        if dec.len() as i64 + shift > MAX_DIGITS as i64 {
            // Only zeros would make it long: then the value is zero.
            if dec.iter().all(|&d| d == 0) {
                return Some(Vec::new());
            }
            return None;
        }
        dec.extend(std::iter::repeat_n(0u8, shift as usize));
    } else {
        let cut = (-shift) as u64;
        if cut >= dec.len() as u64 {
            dec.clear();
        } else {
            dec.truncate(dec.len() - cut as usize);
        }
    }
    let first = dec.iter().position(|&d| d != 0).unwrap_or(dec.len());
    dec.drain(..first);
    if dec.len() > MAX_DIGITS {
        return None;
    }
    Some(dec)
}

/// Little-endian base-2^32 limbs of a decimal digit string.
fn limbs(dec: &[u8]) -> Vec<u32> {
    let mut out: Vec<u32> = Vec::new();
    for chunk in dec.chunks(9) {
        let mut mul: u64 = 1;
        let mut add: u64 = 0;
        for &d in chunk {
            mul *= 10;
            add = add * 10 + d as u64;
        }
        let mut carry = add;
        for limb in out.iter_mut() {
            let v = *limb as u64 * mul + carry;
            *limb = v as u32;
            carry = v >> 32;
        }
        if carry != 0 {
            out.push(carry as u32);
        }
    }
    out
}

fn bit_length(l: &[u32]) -> u64 {
    match l.iter().rposition(|&x| x != 0) {
        None => 0,
        Some(i) => i as u64 * 32 + (32 - l[i].leading_zeros()) as u64,
    }
}

fn is_power_of_two(l: &[u32]) -> bool {
    l.iter().map(|x| x.count_ones()).sum::<u32>() == 1
}

/// `size` bytes, big-endian two's complement, of the magnitude `l` negated if asked.
fn twos_complement(l: &[u32], negative: bool, size: usize) -> Vec<u8> {
    let mut out = vec![0u8; size];
    for (i, byte) in out.iter_mut().rev().enumerate() {
        let limb = l.get(i / 4).copied().unwrap_or(0);
        *byte = (limb >> (8 * (i % 4))) as u8;
    }
    if negative {
        for b in out.iter_mut() {
            *b = !*b;
        }
        for b in out.iter_mut().rev() {
            let (v, overflow) = b.overflowing_add(1);
            *b = v;
            if !overflow {
                break;
            }
        }
    }
    out
}

/// Avro decimal bytes of a numeric(precision, scale) datum (see the module docstring).
pub fn fixed(buf: &[u8], scale: u32, precision: u32) -> Option<Vec<u8>> {
    let (negative, weight, dscale, digits) = parse(buf)?;
    if dscale > scale {
        return None;
    }
    let mut dec = unscaled_digits(weight, dscale, &digits)?;
    if dec.len() as u64 > precision as u64 {
        return None; // unscaled >= 10^precision
    }
    if !dec.is_empty() {
        let more = (scale - dscale) as usize;
        if dec.len() + more > MAX_DIGITS {
            return None;
        }
        dec.extend(std::iter::repeat_n(0u8, more));
    }
    let l = limbs(&dec);
    let size = ((bit_length(&l) + 8) / 8) as usize;
    Some(twos_complement(&l, negative && !dec.is_empty(), size))
}

/// VariableScaleDecimal (dscale, unscaled bytes) of an unconstrained numeric datum.
pub fn variable(buf: &[u8]) -> Option<(u32, Vec<u8>)> {
    let (negative, weight, dscale, digits) = parse(buf)?;
    let dec = unscaled_digits(weight, dscale, &digits)?;
    let l = limbs(&dec);
    let negative = negative && !dec.is_empty();
    let bits = bit_length(&l);
    // (n if n >= 0 else ~n).bit_length(): ~(-m) = m - 1.
    let width = if negative && is_power_of_two(&l) {
        bits - 1
    } else {
        bits
    };
    let size = ((width + 8) / 8) as usize;
    Some((dscale, twos_complement(&l, negative, size)))
}

/// numeric_out's text of a special value (service.types.numeric: NaN 0xC000, +Infinity
/// 0xD000, -Infinity 0xF000 in the header's top bits), None for a finite datum or a
/// malformed one. Python prints them as `str(Decimal)` does, the same words.
pub fn special(buf: &[u8]) -> Option<&'static str> {
    let header = u16::from_le_bytes([*buf.first()?, *buf.get(1)?]);
    if header & NUMERIC_SIGN_MASK != NUMERIC_SPECIAL {
        return None;
    }
    match header & 0xF000 {
        0xC000 => Some("NaN"),
        0xD000 => Some("Infinity"),
        0xF000 => Some("-Infinity"),
        _ => None,
    }
}

/// numeric_out's text of a finite datum, appended to `out` (service.types.numeric.
/// numeric_text, step for step: the integer groups `%d` then `%04d`, the fraction's
/// groups cut at dscale digits, `-` only before a value with a non-zero digit). None,
/// with `out` untouched, for NaN/±Infinity or a malformed datum: Python decides.
pub fn text(out: &mut String, buf: &[u8]) -> Option<()> {
    use std::fmt::Write;
    let (negative, weight, dscale, digits) = parse(buf)?;
    let n = digits.len() as i64;
    let weight = weight as i64;
    let at = |i: i64| {
        if (0..n).contains(&i) {
            digits[i as usize]
        } else {
            0
        }
    };
    if negative && digits.iter().any(|&d| d != 0) {
        out.push('-');
    }
    if weight < 0 {
        out.push('0');
    } else {
        let _ = write!(out, "{}", at(0));
        for i in 1..=weight {
            let _ = write!(out, "{:04}", at(i));
        }
    }
    if dscale > 0 {
        out.push('.');
        let mark = out.len();
        let count = (dscale as i64 + 3) / 4;
        for i in weight + 1..weight + 1 + count {
            let _ = write!(out, "{:04}", at(i));
        }
        out.truncate(mark + dscale as usize);
    }
    Some(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A long-form numeric datum.
    fn long_form(negative: bool, weight: i16, dscale: u16, digits: &[i16]) -> Vec<u8> {
        let header = if negative { NUMERIC_NEG } else { 0 } | dscale;
        let mut out = header.to_le_bytes().to_vec();
        out.extend_from_slice(&weight.to_le_bytes());
        for d in digits {
            out.extend_from_slice(&d.to_le_bytes());
        }
        out
    }

    #[test]
    fn fixed_sizes_by_magnitude_as_fastavro() {
        // 12.34 at scale 2: 1234 = 0x04d2
        let d = long_form(false, 0, 2, &[12, 3400]);
        assert_eq!(fixed(&d, 2, 10), Some(vec![0x04, 0xd2]));
        // -1.28 at scale 2: |n| = 128 needs (8 + 8) // 8 = 2 bytes: 0xff80
        let d = long_form(true, 0, 2, &[1, 2800]);
        assert_eq!(fixed(&d, 2, 10), Some(vec![0xff, 0x80]));
        // zero: one zero byte
        let d = long_form(false, 0, 0, &[]);
        assert_eq!(fixed(&d, 3, 10), Some(vec![0x00]));
        // scale beyond dscale multiplies: 5 at scale 3 = 5000 = 0x1388
        let d = long_form(false, 0, 0, &[5]);
        assert_eq!(fixed(&d, 3, 10), Some(vec![0x13, 0x88]));
    }

    #[test]
    fn fixed_leaves_what_python_decides() {
        assert_eq!(fixed(&0xC000u16.to_le_bytes(), 2, 10), None); // NaN
        assert_eq!(special(&0xC000u16.to_le_bytes()), Some("NaN"));
        assert_eq!(special(&0xD000u16.to_le_bytes()), Some("Infinity"));
        assert_eq!(special(&0xF000u16.to_le_bytes()), Some("-Infinity"));
        assert_eq!(special(&0xE000u16.to_le_bytes()), None); // not a special value
        assert_eq!(special(&0x8000u16.to_le_bytes()), None); // short: finite zero
        assert_eq!(special(&[0xC0]), None);
        assert_eq!(fixed(&0xD000u16.to_le_bytes(), 2, 10), None); // +Infinity
        let d = long_form(false, 0, 3, &[1, 2345]);
        assert_eq!(fixed(&d, 2, 10), None); // more places than the scale
        let d = long_form(false, 2, 0, &[1, 0, 0]);
        assert_eq!(fixed(&d, 0, 8), None); // 100000000 has 9 digits
        assert_eq!(fixed(&d, 0, 9), Some(vec![0x05, 0xf5, 0xe1, 0x00]));
        let d = long_form(false, 0, 0, &[10_000]);
        assert_eq!(fixed(&d, 0, 9), None); // digit out of range
        assert_eq!(fixed(&[0, 0, 0], 0, 9), None); // odd digit bytes
    }

    #[test]
    fn variable_is_minimal_twos_complement() {
        // -128 fits one byte in BigInteger.toByteArray
        let d = long_form(true, 0, 0, &[128]);
        assert_eq!(variable(&d), Some((0, vec![0x80])));
        let d = long_form(false, 0, 0, &[128]);
        assert_eq!(variable(&d), Some((0, vec![0x00, 0x80])));
        // 0.000 keeps its scale
        let d = long_form(false, 0, 3, &[]);
        assert_eq!(variable(&d), Some((3, vec![0x00])));
        // -0.000001: weight -2, digit 0100, dscale 6 -> -1
        let d = long_form(true, -2, 6, &[100]);
        assert_eq!(variable(&d), Some((6, vec![0xff])));
        // 10000^7 = 1e28 with dscale 0
        let d = long_form(false, 7, 0, &[1]);
        let (s, v) = variable(&d).unwrap();
        assert_eq!(s, 0);
        assert_eq!(v.len(), 12); // 2^93 < 1e28 < 2^94, plus a sign bit
    }

    #[test]
    fn short_form_is_read() {
        // short: 0x8000 | dscale 2 << 7 | weight 0 ; digits 12, 3400 -> 12.34
        let header: u16 = 0x8000 | (2 << 7);
        let mut d = header.to_le_bytes().to_vec();
        d.extend_from_slice(&12i16.to_le_bytes());
        d.extend_from_slice(&3400i16.to_le_bytes());
        assert_eq!(variable(&d), Some((2, vec![0x04, 0xd2])));
        // negative weight: 0x0040 set, weight = (low 6 bits) - 64
        let header: u16 = 0x8000 | 0x2000 | (6 << 7) | 0x0040 | 62; // weight -2, negative
        let mut d = header.to_le_bytes().to_vec();
        d.extend_from_slice(&100i16.to_le_bytes());
        assert_eq!(variable(&d), Some((6, vec![0xff])));
    }
}
