//! cube (cubedata.h, cube.c cube_out) and seg (segdata.h, seg.c seg_out, restore).
//!
//! Receives:
//! - cube: the varlena payload: uint32 header (POINT_BIT 0x80000000, the dimension count
//!   in the low 31 bits), then float8 coordinates: `dim` of them for a point, else the
//!   lower-left corner's `dim` then the upper-right's.
//! - seg: the 12-byte datum: float4 lower, upper, int8 l_sigd, u_sigd, char l_ext, u_ext.
//!
//! Hands on, as service.types.cube (cube_text, seg_text):
//! - cube_out: `(x1, x2, ...)` for a point or a box whose corners compare equal
//!   (IEEE: -0 equals 0, NaN equals nothing), else `(ll...),(ur...)`; each coordinate as
//!   float8out prints it (`super::super::float::float8`, shortest digits);
//! - seg_out: each bound with its stored significant digits (restore(), replayed on
//!   the same 25-char buffer as the C code, from C's `%.*e`), the `<`, `>` or `~`
//!   extension characters, ` .. ` between distinct bounds, the text cut at a NUL.
//!
//! Errors: a short cube, a seg not of 12 bytes, and a coordinate whose shortest digits
//! `float8` leaves to Python (its Err). Pure, no panics.

use super::super::float::float8;
use super::{atomic, f64_at, u32_at};

const POINT_BIT: u32 = 0x8000_0000;
const DIM_MASK: u32 = 0x7FFF_FFFF;
const FLT_DIG: i8 = 6;

const CUBE_SHORT: &str = "cube datum is too short";
const SEG_SIZE: &str = "seg datum is not 12 bytes";
const SEG_BUFFER: &str = "seg restore() Python decides";

fn coords(out: &mut String, xs: &[f64]) -> Result<(), &'static str> {
    out.push('(');
    for (i, &x) in xs.iter().enumerate() {
        if i > 0 {
            out.push_str(", ");
        }
        float8(out, x)?;
    }
    out.push(')');
    Ok(())
}

/// cube_out's text, appended to `out`.
pub fn cube_text(out: &mut String, d: &[u8]) -> Result<(), &'static str> {
    let header = u32_at(d, 0).ok_or(CUBE_SHORT)?;
    let dim = (header & DIM_MASK) as usize;
    let point = header & POINT_BIT != 0;
    let n = if point { Some(dim) } else { dim.checked_mul(2) };
    let need = n.and_then(|n| n.checked_mul(8)?.checked_add(4));
    let (Some(n), Some(need)) = (n, need) else {
        return Err(CUBE_SHORT);
    };
    if d.len() < need {
        return Err(CUBE_SHORT);
    }
    let xs = (0..n)
        .map(|i| f64_at(d, 4 + 8 * i).ok_or(CUBE_SHORT))
        .collect::<Result<Vec<f64>, _>>()?;
    let (ll, ur) = xs
        .split_at_checked(if point { n } else { dim })
        .ok_or(CUBE_SHORT)?;
    // a point's upper corner is its lower one, the same list: equal even with NaN
    let same = point || ll.iter().zip(ur).all(|(a, b)| a == b);
    atomic(out, |out| {
        coords(out, ll)?;
        if !same {
            out.push(',');
            coords(out, ur)?;
        }
        Ok(())
    })
}

/// C's `%.*e` of `v` with `prec` digits after the point, as Python's `%` prints it:
/// `nan`, `inf`, `-inf`, or d.ddde±XX (two exponent digits at least).
fn c_exp(v: f64, prec: usize) -> String {
    if v.is_nan() {
        return "nan".into();
    }
    if v.is_infinite() {
        return if v > 0.0 { "inf" } else { "-inf" }.into();
    }
    // Rust's exact formatting rounds the binary value half to even, as C and Python do
    let rust = format!("{v:.prec$e}");
    let Some((mantissa, exp)) = rust.split_once('e') else {
        return rust;
    };
    let (sign, digits) = match exp.strip_prefix('-') {
        Some(d) => ('-', d),
        None => ('+', exp),
    };
    let pad = if digits.len() < 2 { "0" } else { "" };
    format!("{mantissa}e{sign}{pad}{digits}")
}

/// The C char buffer restore() works in: 24 '0's, then NULs.
struct CBuf([u8; 33]);

impl CBuf {
    fn set(&mut self, at: usize, v: u8) -> Result<(), &'static str> {
        *self.0.get_mut(at).ok_or(SEG_BUFFER)? = v;
        Ok(())
    }

    fn put(&mut self, at: usize, s: &[u8]) -> Result<(), &'static str> {
        for (k, &c) in s.iter().enumerate() {
            self.set(at + k, c)?;
        }
        Ok(())
    }

    /// for k in 23 down to dp + 1: buf[k] = buf[k - 1].
    fn shift_right_from(&mut self, dp: usize) {
        if dp < 23 {
            self.0.copy_within(dp..23, dp + 1);
        }
    }

    /// The NUL-terminated string at `at`.
    fn cstr(&self, at: usize) -> Result<String, &'static str> {
        let rest = self.0.get(at..).ok_or(SEG_BUFFER)?;
        let end = rest.iter().position(|&c| c == 0).ok_or(SEG_BUFFER)?;
        String::from_utf8(rest[..end].to_vec()).map_err(|_| SEG_BUFFER)
    }
}

/// seg.c's restore(): `val` with `sigd` significant digits (service.types.cube._restore).
fn restore(val: f64, sigd: i8) -> Result<String, &'static str> {
    let n = if sigd <= 0 {
        FLT_DIG
    } else {
        sigd.min(FLT_DIG)
    } as usize;
    let sign = usize::from(val < 0.0);
    let result = c_exp(val, n - 1);
    let Some(p) = result.find('e') else {
        return Ok(result); // inf, nan
    };
    let exp: i32 = result[p + 1..].parse().map_err(|_| SEG_BUFFER)?;
    if exp == 0 {
        return Ok(result[..p].to_string());
    }
    if exp.abs() > 4 {
        return Ok(result);
    }
    let mut buf = CBuf([0; 33]);
    buf.0[..24].fill(b'0');
    let (mut i, mut dp) = (10usize, 0usize);
    for &ch in result.as_bytes().get(sign..p).ok_or(SEG_BUFFER)? {
        buf.set(i, ch)?;
        if ch == b'.' {
            dp = i;
            i -= 1;
        }
        i += 1;
    }
    if dp == 0 {
        dp = i;
    }
    if exp > 0 {
        positive(&mut buf, dp, exp as usize, n, sign == 1)
    } else {
        negative(&mut buf, dp, exp.unsigned_abs() as usize, n, sign == 1)
    }
}

/// restore() for a decimal exponent of 1 to 4: the point moved right, or d.ddd e N when
/// the integer digits would exceed the significant ones.
fn positive(
    buf: &mut CBuf,
    dp: usize,
    exp: usize,
    n: usize,
    neg: bool,
) -> Result<String, &'static str> {
    let int_digits = (dp + exp).checked_sub(10).ok_or(SEG_BUFFER)?;
    if int_digits >= n {
        let e = int_digits - n;
        buf.set(10 + n, 0)?;
        let tail = format!("e{}\0", e + n - 1);
        if n > 1 {
            buf.shift_right_from(11);
            buf.set(11, b'.')?;
            buf.put(11 + n, tail.as_bytes())?;
        } else {
            buf.put(11, tail.as_bytes())?;
        }
    } else {
        let dp = dp + exp;
        buf.shift_right_from(dp);
        buf.set(11 + n, 0)?;
        buf.set(dp, b'.')?;
    }
    if neg {
        buf.set(9, b'-')?;
        return buf.cstr(9);
    }
    buf.cstr(10)
}

/// restore() for a decimal exponent of -1 to -4 (`below`: its magnitude): leading
/// zeros after `0.`.
fn negative(
    buf: &mut CBuf,
    dp: usize,
    below: usize,
    n: usize,
    neg: bool,
) -> Result<String, &'static str> {
    let dp = dp.checked_sub(below + 1).ok_or(SEG_BUFFER)?;
    buf.set(10 + n, 0)?;
    buf.set(dp, b'.')?;
    if neg {
        let at = dp.checked_sub(2).ok_or(SEG_BUFFER)?;
        buf.set(at, b'-')?;
        return buf.cstr(at);
    }
    buf.cstr(dp.checked_sub(1).ok_or(SEG_BUFFER)?)
}

/// seg_out's text, appended to `out`.
pub fn seg_text(out: &mut String, d: &[u8]) -> Result<(), &'static str> {
    let d: &[u8; 12] = d.try_into().map_err(|_| SEG_SIZE)?;
    let lower = f64::from(f32::from_le_bytes([d[0], d[1], d[2], d[3]]));
    let upper = f64::from(f32::from_le_bytes([d[4], d[5], d[6], d[7]]));
    let (l_sigd, u_sigd) = (d[8] as i8, d[9] as i8);
    let (l_ext, u_ext) = (d[10], d[11]);
    let mut text = String::new();
    if matches!(l_ext, b'>' | b'<' | b'~') {
        text.push(char::from(l_ext));
    }
    if lower == upper && l_ext == u_ext {
        text.push_str(&restore(lower, l_sigd)?);
    } else {
        if l_ext != b'-' {
            text.push_str(&restore(lower, l_sigd)?);
            text.push(' ');
        }
        text.push_str("..");
        if u_ext != b'-' {
            text.push(' ');
            if matches!(u_ext, b'>' | b'<') || l_ext == b'~' {
                text.push(char::from(u_ext)); // latin-1; a NUL ends the C string
            }
            text.push_str(&restore(upper, u_sigd)?);
        }
    }
    let end = text.find('\0').unwrap_or(text.len());
    out.push_str(&text[..end]);
    Ok(())
}
