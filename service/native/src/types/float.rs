//! float4out / float8out with extra_float_digits = 1 (the default since PostgreSQL 12):
//! the shortest decimal that reads back as the same value, laid out as
//! service.types.numeric.float_text lays it out.
//!
//! PostgreSQL builds Ryu without accepting the rounding interval's bounds (d2s.c and
//! f2s.c: acceptBounds = false), so a decimal lying exactly halfway to a neighbouring
//! value never qualifies. Rust's shortest formatting (`{:e}`) accepts a bound when the
//! mantissa is even, as round-half-even reading does. The two agree everywhere else: a
//! candidate strictly inside the interval is also PostgreSQL's shortest (its interval is
//! the same one without the bounds), and both take the nearest among the shortest. So
//! the digits come from `{:e}`, and a candidate that is exactly a bound (checked in
//! integers: `on_bound`) is left to the Python path, which searches the open interval.
//! So is a tie, a value exactly halfway between two shortest candidates (`tie`):
//! PostgreSQL takes the even one, `{:e}` the one above.
//!
//! Layout: NaN, Infinity, -Infinity; a signed zero as 0 or -0; fixed notation for a
//! decimal exponent in [-4, 15) (float4: [-4, 6)), else d.ddde±XX.

use std::fmt::Write;

/// Why a value is the Python path's.
pub const ON_BOUND: &str = "float Python decides";

/// float8out's text, appended to `out`; Err(ON_BOUND) leaves `out` as it was.
pub fn float8(out: &mut String, v: f64) -> Result<(), &'static str> {
    let special = Special::of(v.is_nan(), v.is_infinite(), v.is_sign_negative(), v == 0.0);
    let shortest = format!("{:e}", v.abs());
    write(out, special, 15, &shortest, binary(v.to_bits(), 52, 11))
}

/// float4out's text, appended to `out`; Err(ON_BOUND) leaves `out` as it was.
pub fn float4(out: &mut String, v: f32) -> Result<(), &'static str> {
    let special = Special::of(v.is_nan(), v.is_infinite(), v.is_sign_negative(), v == 0.0);
    let shortest = format!("{:e}", v.abs());
    write(
        out,
        special,
        6,
        &shortest,
        binary(v.to_bits().into(), 23, 8),
    )
}

/// What a value is before its digits matter.
#[derive(Clone, Copy)]
enum Special {
    NaN,
    Infinity { negative: bool },
    Zero { negative: bool },
    Finite { negative: bool },
}

impl Special {
    fn of(nan: bool, infinite: bool, negative: bool, zero: bool) -> Special {
        if nan {
            Special::NaN
        } else if infinite {
            Special::Infinity { negative }
        } else if zero {
            Special::Zero { negative }
        } else {
            Special::Finite { negative }
        }
    }
}

/// (mantissa, binary exponent, whether the gap below is half the gap above: a power of
/// two above the smallest normal) of an IEEE 754 binary value's `bits`, with `frac`
/// fraction bits and `exp` exponent bits.
fn binary(bits: u64, frac: u32, exp: u32) -> (u64, i32, bool) {
    let field = ((bits >> frac) & ((1 << exp) - 1)) as i32;
    let fraction = bits & ((1 << frac) - 1);
    let bias = (1 << (exp - 1)) - 1 + frac as i32; // 1075 for binary64, 150 for binary32
    if field == 0 {
        (fraction, 1 - bias, false)
    } else {
        (
            fraction | (1 << frac),
            field - bias,
            fraction == 0 && field > 1,
        )
    }
}

/// The shared layout of a value whose shortest digits are `shortest` (`{:e}` of its
/// magnitude) and whose binary form is `binary`.
fn write(
    out: &mut String,
    special: Special,
    fixed_below: i32,
    shortest: &str,
    binary: (u64, i32, bool),
) -> Result<(), &'static str> {
    let negative = match special {
        Special::NaN => {
            out.push_str("NaN");
            return Ok(());
        }
        Special::Infinity { negative } => {
            out.push_str(if negative { "-Infinity" } else { "Infinity" });
            return Ok(());
        }
        Special::Zero { negative } => {
            out.push_str(if negative { "-0" } else { "0" });
            return Ok(());
        }
        Special::Finite { negative } => negative,
    };
    let sign = if negative { "-" } else { "" };
    let (mantissa, exp) = shortest.split_once('e').ok_or(ON_BOUND)?;
    let exp: i32 = exp.parse().map_err(|_| ON_BOUND)?;
    let digits: String = mantissa.chars().filter(|&c| c != '.').collect();
    let (m, e, half_below) = binary;
    // The candidate digits × 10^k; more digits than any shortest float: not ours.
    let Ok(d) = digits.parse::<u64>() else {
        return Err(ON_BOUND);
    };
    let k = exp - (digits.len() as i32 - 1);
    if on_bound(d, k, m, e, half_below) || tie(d, k, m, e) {
        return Err(ON_BOUND);
    }
    out.push_str(sign);
    let n = digits.len() as i32;
    if (-4..fixed_below).contains(&exp) {
        if exp < 0 {
            out.push_str("0.");
            for _ in 0..(-exp - 1) {
                out.push('0');
            }
            out.push_str(&digits);
        } else if n <= exp + 1 {
            out.push_str(&digits);
            for _ in 0..(exp + 1 - n) {
                out.push('0');
            }
        } else {
            let (int, rest) = digits.split_at(exp as usize + 1);
            out.push_str(int);
            out.push('.');
            out.push_str(rest);
        }
    } else {
        out.push_str(&digits[..1]);
        if n > 1 {
            out.push('.');
            out.push_str(&digits[1..]);
        }
        let _ = write!(out, "e{}{:02}", if exp < 0 { '-' } else { '+' }, exp.abs());
    }
    Ok(())
}

/// Whether the decimal d × 10^k is exactly one of the two bounds of
/// the rounding interval of m × 2^e: (2m ± 1) × 2^(e - 1), or below a power of two
/// whose gap below is half, (4m - 1) × 2^(e - 2).
fn on_bound(d: u64, k: i32, m: u64, e: i32, half_below: bool) -> bool {
    let below = if half_below {
        (4 * m - 1, e - 2)
    } else {
        (2 * m - 1, e - 1)
    };
    equals(d, k, 2 * m + 1, e - 1) || equals(d, k, below.0, below.1)
}

/// Whether m × 2^e lies exactly halfway between the decimal d × 10^k and one of its
/// neighbours at that precision: (2d ± 1) × 10^k == m × 2^(e + 1).
fn tie(d: u64, k: i32, m: u64, e: i32) -> bool {
    let tz = m.trailing_zeros() as i32;
    let (odd, p) = (m >> tz, e + 1 + tz);
    equals(2 * d - 1, k, odd, p) || equals(2 * d + 1, k, odd, p)
}

/// d × 10^k == odd × 2^p, exactly (odd is odd): the odd parts and the powers of two
/// must match, d × 10^k's odd part being odd(d) × 5^k (k >= 0) or odd(d) / 5^-k.
fn equals(d: u64, k: i32, odd: u64, p: i32) -> bool {
    if d == 0 {
        return false;
    }
    let tz = d.trailing_zeros() as i32;
    if tz + k != p {
        return false;
    }
    let d_odd = (d >> tz) as u128;
    let odd = odd as u128;
    let (mut small, large, times) = if k >= 0 {
        (d_odd, odd, k)
    } else {
        (odd, d_odd, -k)
    };
    for _ in 0..times {
        small *= 5;
        if small > large {
            return false;
        }
    }
    small == large
}

#[cfg(test)]
mod tests {
    use super::*;

    fn f8(v: f64) -> Result<String, &'static str> {
        let mut out = String::new();
        float8(&mut out, v).map(|()| out)
    }

    fn f4(v: f32) -> Result<String, &'static str> {
        let mut out = String::new();
        float4(&mut out, v).map(|()| out)
    }

    #[test]
    fn layouts_as_float8out() {
        assert_eq!(f8(0.1).unwrap(), "0.1");
        assert_eq!(f8(-0.0).unwrap(), "-0");
        assert_eq!(f8(1.0).unwrap(), "1");
        assert_eq!(f8(123456789012345.0).unwrap(), "123456789012345");
        assert_eq!(f8(1e15).unwrap(), "1e+15");
        assert_eq!(f8(0.0001).unwrap(), "0.0001");
        assert_eq!(f8(0.00001234).unwrap(), "1.234e-05");
        assert_eq!(f8(f64::MAX).unwrap(), "1.7976931348623157e+308");
        assert_eq!(f8(5e-324).unwrap(), "5e-324");
        assert_eq!(f8(f64::NAN).unwrap(), "NaN");
        assert_eq!(f8(f64::NEG_INFINITY).unwrap(), "-Infinity");
        assert_eq!(f4(1.5).unwrap(), "1.5");
        assert_eq!(f4(123456.0).unwrap(), "123456");
        assert_eq!(f4(1234567.0).unwrap(), "1.234567e+06");
        assert_eq!(f4(0.1).unwrap(), "0.1");
    }

    #[test]
    fn a_bound_is_left_to_python() {
        // 1e23 lies exactly halfway between two doubles; the even one below reads
        // back from "1e23", which PostgreSQL's open interval does not accept.
        let below = 99_999_999_999_999_991_611_392.0f64;
        assert_eq!(format!("{below:e}"), "1e23");
        assert_eq!(f8(below), Err(ON_BOUND));
        let mut out = String::from("kept");
        assert!(float8(&mut out, below).is_err());
        assert_eq!(out, "kept");
    }

    #[test]
    fn a_tie_is_left_to_python() {
        // 2^47 + 1/8 is halfway between ...328.12 and ...328.13 (17 digits each).
        let v = (1u64 << 47) as f64 + 0.125;
        assert_eq!(f8(v), Err(ON_BOUND));
        assert_eq!(f8(140_737_488_355_328.25).unwrap(), "140737488355328.25");
    }

    #[test]
    fn equals_is_exact() {
        // 3 * 2^-1 = 1.5 = 15 * 10^-1
        assert!(equals(15, -1, 3, -1));
        assert!(!equals(15, -1, 3, 0));
        // 5 * 2^3 = 40 = 4 * 10^1
        assert!(equals(4, 1, 5, 3));
        assert!(!equals(4, 1, 7, 3));
    }
}
