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
//! the digits come from `{:e}`, unless the candidate is exactly a bound (checked in
//! integers: `on_bound`) or a tie, a value exactly halfway between two shortest
//! candidates (`tie`: Ryu's d2s/f2s round such a value to the even one, `{:e}` takes the
//! one above). Then `open_shortest` searches the open interval as
//! service.types.numeric._shortest does: for each precision from one digit up, the
//! decimals just below and above the value (exact comparisons in `Big` integers),
//! the nearest of those strictly inside, ties to the even one.
//!
//! Layout: NaN, Infinity, -Infinity; a signed zero as 0 or -0; fixed notation for a
//! decimal exponent in [-4, 15) (float4: [-4, 6)), else d.ddde±XX.

use std::cmp::Ordering;
use std::fmt::Write;

/// Why a value is the Python path's: `{:e}` gave no digits this module reads, or the
/// open interval held no decimal of at most 17 digits (neither happens for a finite
/// value; kept typed rather than a panic).
pub const ON_BOUND: &str = "float Python decides";

/// float8out's text, appended to `out`; Err(ON_BOUND) leaves `out` as it was.
pub fn float8(out: &mut String, v: f64) -> Result<(), &'static str> {
    let special = Special::of(v.is_nan(), v.is_infinite(), v.is_sign_negative(), v == 0.0);
    let shortest = format!("{:e}", v.abs());
    write(
        out,
        special,
        15,
        &shortest,
        binary(v.to_bits(), 52, 11),
        v.abs(),
    )
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
        f64::from(v.abs()),
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
/// magnitude `magnitude`) and whose binary form is `binary`.
fn write(
    out: &mut String,
    special: Special,
    fixed_below: i32,
    shortest: &str,
    binary: (u64, i32, bool),
    magnitude: f64,
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
    let (digits, exp) = if on_bound(d, k, m, e, half_below) || tie(d, k, m, e) {
        let (d, k) = open_shortest(magnitude, binary).ok_or(ON_BOUND)?;
        let digits = d.to_string();
        let exp = k + digits.len() as i32 - 1;
        (digits, exp)
    } else {
        (digits, exp)
    };
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

/// The shortest decimal d × 10^k (d without trailing zeros) strictly inside the rounding
/// interval of `magnitude` = m × 2^e (`binary`), nearest to it, ties to the even digit:
/// what Ryu prints without accepting bounds (d2s.c / f2s.c, acceptBounds = false), as
/// service.types.numeric._shortest finds it. None: no such decimal of at most 17 digits
/// (not a finite positive value).
fn open_shortest(magnitude: f64, (m, e, half_below): (u64, i32, bool)) -> Option<(u64, i32)> {
    // In units of 2^(e - 2): the value is 4m, the bounds 4m + 2 and 4m - 2 (4m - 1 where
    // the gap below is half the gap above).
    let q = e - 2;
    let value = 4 * m;
    let (lo, hi) = (value - if half_below { 1 } else { 2 }, value + 2);
    let inside = |d: u64, k: i32| {
        cmp_dec_bin(d, k, lo, q) == Ordering::Greater && cmp_dec_bin(d, k, hi, q) == Ordering::Less
    };
    for p in 1..=17usize {
        // the value rounded to p digits, then its neighbours at that precision
        let r = format!("{:.*e}", p - 1, magnitude);
        let (mantissa, exp) = r.split_once('e')?;
        let d: u64 = mantissa.replace('.', "").parse().ok()?;
        let k = exp.parse::<i32>().ok()? - (p as i32 - 1);
        let (floor, ceil) = match cmp_dec_bin(d, k, value, q) {
            Ordering::Equal => return Some(strip(d, k)),
            Ordering::Less => ((d, k), (d + 1, k)),
            // below a power of ten the grid one digit finer is the p-digit one
            Ordering::Greater if d == 10u64.pow(p as u32 - 1) => ((10 * d - 1, k - 1), (d, k)),
            Ordering::Greater => ((d - 1, k), (d, k)),
        };
        let pick = match (inside(floor.0, floor.1), inside(ceil.0, ceil.1)) {
            (false, false) => continue,
            (true, false) => floor,
            (false, true) => ceil,
            (true, true) => {
                // nearer of the two; the sum against twice the value (8m × 2^q)
                let (sum, at) = if floor.1 == ceil.1 {
                    (floor.0 + ceil.0, ceil.1)
                } else {
                    (floor.0 + 10 * ceil.0, floor.1)
                };
                match cmp_dec_bin(sum, at, 2 * value, q) {
                    Ordering::Less => ceil,
                    Ordering::Greater => floor,
                    Ordering::Equal if floor.0 % 2 == 0 => floor,
                    Ordering::Equal => ceil,
                }
            }
        };
        return Some(strip(pick.0, pick.1));
    }
    None
}

fn strip(mut d: u64, mut k: i32) -> (u64, i32) {
    while d != 0 && d % 10 == 0 {
        d /= 10;
        k += 1;
    }
    (d, k)
}

/// d × 10^k against n × 2^q, exactly: both sides brought to integers.
fn cmp_dec_bin(d: u64, k: i32, n: u64, q: i32) -> Ordering {
    let mut left = Big::from(d);
    let mut right = Big::from(n);
    for _ in 0..k.max(0) {
        left.mul_small(10);
    }
    for _ in 0..(-k).max(0) {
        right.mul_small(10);
    }
    left.shl(q.min(0).unsigned_abs());
    right.shl(q.max(0).unsigned_abs());
    left.cmp(&right)
}

/// A non-negative integer as little-endian 32-bit limbs, enough of one for the exact
/// comparisons of `open_shortest` (at most a few thousand bits).
#[derive(PartialEq, Eq)]
struct Big(Vec<u32>);

impl Big {
    fn from(v: u64) -> Big {
        let mut b = Big(vec![v as u32, (v >> 32) as u32]);
        b.trim();
        b
    }
    fn trim(&mut self) {
        while self.0.last() == Some(&0) {
            self.0.pop();
        }
    }
    fn mul_small(&mut self, f: u32) {
        let mut carry = 0u64;
        for limb in &mut self.0 {
            let x = u64::from(*limb) * u64::from(f) + carry;
            *limb = x as u32;
            carry = x >> 32;
        }
        if carry != 0 {
            self.0.push(carry as u32);
        }
    }
    fn shl(&mut self, bits: u32) {
        if self.0.is_empty() {
            return;
        }
        let (words, bits) = ((bits / 32) as usize, bits % 32);
        if bits != 0 {
            let mut carry = 0u32;
            for limb in &mut self.0 {
                let x = (u64::from(*limb) << bits) | u64::from(carry);
                *limb = x as u32;
                carry = (x >> 32) as u32;
            }
            if carry != 0 {
                self.0.push(carry);
            }
        }
        self.0.splice(0..0, std::iter::repeat_n(0, words));
    }
}

impl Ord for Big {
    fn cmp(&self, other: &Big) -> Ordering {
        self.0
            .len()
            .cmp(&other.0.len())
            .then_with(|| self.0.iter().rev().cmp(other.0.iter().rev()))
    }
}

impl PartialOrd for Big {
    fn partial_cmp(&self, other: &Big) -> Option<Ordering> {
        Some(self.cmp(other))
    }
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

    /// A bound (1e23: exactly halfway between two doubles; the even one below reads
    /// back from "1e23", which PostgreSQL's open interval does not accept) and a tie
    /// (2^47 + 1/8, halfway between ...328.12 and ...328.13) are searched in the open
    /// interval: the longer digits, and the even one of a tie, as float8out prints them.
    #[test]
    fn bounds_and_ties_search_the_open_interval() {
        let below = 99_999_999_999_999_991_611_392.0f64;
        assert_eq!(format!("{below:e}"), "1e23");
        assert_eq!(f8(below).unwrap(), "9.999999999999999e+22");
        let v = (1u64 << 47) as f64 + 0.125;
        assert_eq!(f8(v).unwrap(), "140737488355328.12");
        assert_eq!(f8(-v).unwrap(), "-140737488355328.12");
        assert_eq!(f8(140_737_488_355_328.25).unwrap(), "140737488355328.25");
        // 2^-149 (the smallest float4) and a float4 tie: 1.5 * 2^-126 widened from a half
        assert_eq!(f4(f32::from_bits(1)).unwrap(), "1e-45");
        assert_eq!(f4(f32::MAX).unwrap(), "3.4028235e+38");
        assert_eq!(f8(f64::MAX).unwrap(), "1.7976931348623157e+308");
    }

    #[test]
    fn big_compares_exactly() {
        // 15 * 10^-1 against 3 * 2^-1; 4 * 10^1 against 5 * 2^3; a thousand-bit shift
        assert_eq!(cmp_dec_bin(15, -1, 3, -1), Ordering::Equal);
        assert_eq!(cmp_dec_bin(4, 1, 5, 3), Ordering::Equal);
        assert_eq!(cmp_dec_bin(4, 1, 5, 4), Ordering::Less);
        assert_eq!(cmp_dec_bin(1, 300, 1, 996), Ordering::Greater);
        assert_eq!(cmp_dec_bin(1, 300, 1, 997), Ordering::Less);
        assert_eq!(cmp_dec_bin(5, -324, 1, -1074), Ordering::Greater);
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
