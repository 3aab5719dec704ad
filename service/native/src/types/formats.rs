//! Output-function text of the smaller built-in types, and the Debezium values derived
//! from their stored form: interval, timetz, money, "char", bit and varbit.
//!
//! Receives: a type's stored bytes (a fixed-length datum, or a varlena's payload).
//! Hands on: appended to a String, the text the type's output function prints under
//! the settings service.types.convert names (IntervalStyle postgres, lc_monetary C); or
//! the value connectors.avro.schema's mapping writes (MicroDuration, ZonedTime, Bits).
//! A stored form the Python path must judge (a wrong size, a bit length that disagrees
//! with its bytes) is `Err(reason)`: the row falls back and Python raises its typed error.
//!
//! Each function names the PostgreSQL function and the Python reference it mirrors
//! (service.types.datetime, service.types.numeric, service.types.text,
//! service.types.bits, connectors.avro.schema). Pure, no panics.

use std::fmt::Write;

use super::datetime::{pg_clock, USECS_PER_DAY};
use super::fixed;

const USECS_PER_HOUR: i64 = 3_600_000_000;
const USECS_PER_MINUTE: i64 = 60_000_000;
const USECS_PER_SEC: i64 = 1_000_000;
/// Debezium's DAYS_PER_MONTH_AVG (30.4375 days) in µs (connectors.avro.schema).
const MICROS_PER_MONTH: i128 = 2_629_800_000_000;

/// An interval as stored (Interval: time µs, then day, then month).
pub fn interval_parts(d: &[u8]) -> Result<(i64, i32, i32), &'static str> {
    let b: [u8; 16] = fixed(d)?;
    let time = i64::from_le_bytes(b[0..8].try_into().unwrap_or_default());
    let day = i32::from_le_bytes(b[8..12].try_into().unwrap_or_default());
    let month = i32::from_le_bytes(b[12..16].try_into().unwrap_or_default());
    Ok((time, day, month))
}

/// MicroDuration.durationMicros with DAYS_PER_MONTH_AVG, clamped to a long
/// (connectors.avro.schema._duration_micros).
pub fn duration_micros(d: &[u8]) -> Result<i64, &'static str> {
    let (time, day, month) = interval_parts(d)?;
    let total =
        month as i128 * MICROS_PER_MONTH + day as i128 * USECS_PER_DAY as i128 + time as i128;
    Ok(total.clamp(i64::MIN as i128, i64::MAX as i128) as i64)
}

/// One `N unit[s]` part of EncodeInterval (INTSTYLE_POSTGRES), signed as it signs it.
fn interval_part(out: &mut String, value: i64, unit: &str, before: &mut bool) {
    if value == 0 {
        return;
    }
    if !out.is_empty() {
        out.push(' ');
    }
    let plus = if *before && value > 0 { "+" } else { "" };
    let s = if value == 1 { "" } else { "s" };
    let _ = write!(out, "{plus}{value} {unit}{s}");
    *before = value < 0;
}

/// interval_out with IntervalStyle postgres (EncodeInterval, INTSTYLE_POSTGRES;
/// service.types.datetime.interval_text).
pub fn interval_text(out: &mut String, d: &[u8]) -> Result<(), &'static str> {
    let (time, day, month) = interval_parts(d)?;
    if (month, day, time) == (i32::MAX, i32::MAX, i64::MAX) {
        out.push_str("infinity");
        return Ok(());
    }
    if (month, day, time) == (i32::MIN, i32::MIN, i64::MIN) {
        out.push_str("-infinity");
        return Ok(());
    }
    // The parts are written into their own String: `interval_part` spaces them.
    let mut parts = String::new();
    let mut before = false;
    let month = month as i64;
    interval_part(&mut parts, month / 12, "year", &mut before);
    interval_part(&mut parts, month % 12, "mon", &mut before);
    interval_part(&mut parts, day as i64, "day", &mut before);
    // C's truncating division, as EncodeInterval's time2tm-free arithmetic.
    let hour = time / USECS_PER_HOUR;
    let rest = time - hour * USECS_PER_HOUR;
    let minute = rest / USECS_PER_MINUTE;
    let rest = rest - minute * USECS_PER_MINUTE;
    let sec = rest / USECS_PER_SEC;
    let fsec = rest - sec * USECS_PER_SEC;
    if parts.is_empty() || hour != 0 || minute != 0 || sec != 0 || fsec != 0 {
        let minus = hour < 0 || minute < 0 || sec < 0 || fsec < 0;
        if !parts.is_empty() {
            parts.push(' ');
        }
        parts.push_str(if minus {
            "-"
        } else if before {
            "+"
        } else {
            ""
        });
        let _ = write!(
            parts,
            "{:02}:{:02}:{:02}",
            hour.unsigned_abs(),
            minute.unsigned_abs(),
            sec.unsigned_abs()
        );
        let us = fsec.unsigned_abs();
        if us != 0 {
            let mark = parts.len();
            let _ = write!(parts, ".{us:06}");
            let kept = parts[mark..].trim_end_matches('0').len();
            parts.truncate(mark + kept);
        }
    }
    out.push_str(&parts);
    Ok(())
}

/// A timetz as stored (TimeTzADT: time µs, then the zone in seconds west of UTC).
fn timetz_parts(d: &[u8]) -> Result<(i64, i32), &'static str> {
    let b: [u8; 12] = fixed(d)?;
    let time = i64::from_le_bytes(b[0..8].try_into().unwrap_or_default());
    let zone = i32::from_le_bytes(b[8..12].try_into().unwrap_or_default());
    Ok((time, zone))
}

/// timetz_out (EncodeTimeOnly then EncodeTimezone; service.types.datetime.timetz_text).
pub fn timetz_text(out: &mut String, d: &[u8]) -> Result<(), &'static str> {
    let (time, zone) = timetz_parts(d)?;
    pg_clock(out, time);
    let offset = -(zone as i64);
    out.push(if offset >= 0 { '+' } else { '-' });
    let a = offset.unsigned_abs();
    let (hour, minute, sec) = (a / 3600, (a / 60) % 60, a % 60);
    let _ = if sec != 0 {
        write!(out, "{hour:02}:{minute:02}:{sec:02}")
    } else if minute != 0 {
        write!(out, "{hour:02}:{minute:02}")
    } else {
        write!(out, "{hour:02}")
    };
    Ok(())
}

/// ZonedTime text: the time moved to UTC, `HH:MM:SS[.f]Z` (connectors.avro.schema.
/// _zoned_time).
pub fn zoned_time(out: &mut String, d: &[u8]) -> Result<(), &'static str> {
    let (time, zone) = timetz_parts(d)?;
    let utc = (time as i128 + zone as i128 * USECS_PER_SEC as i128)
        .rem_euclid(USECS_PER_DAY as i128) as i64;
    pg_clock(out, utc);
    out.push('Z');
    Ok(())
}

/// money's stored cents.
pub fn money_cents(d: &[u8]) -> Result<i64, &'static str> {
    Ok(i64::from_le_bytes(fixed(d)?))
}

/// The money value as a plain decimal, `-1234.56` (service.types.numeric.money_value).
pub fn money_decimal(out: &mut String, d: &[u8]) -> Result<(), &'static str> {
    let cents = money_cents(d)?;
    let sign = if cents < 0 { "-" } else { "" };
    let a = cents.unsigned_abs();
    let _ = write!(out, "{sign}{}.{:02}", a / 100, a % 100);
    Ok(())
}

/// cash_out under lc_monetary=C: `-$1,234.56` (service.types.numeric.money_text).
pub fn money_text(out: &mut String, d: &[u8]) -> Result<(), &'static str> {
    let cents = money_cents(d)?;
    if cents < 0 {
        out.push('-');
    }
    let a = cents.unsigned_abs();
    let (whole, frac) = (a / 100, a % 100);
    out.push('$');
    let digits = whole.to_string();
    let lead = digits.len() % 3;
    for (i, ch) in digits.chars().enumerate() {
        if i > 0 && (i + 3 - lead) % 3 == 0 {
            out.push(',');
        }
        out.push(ch);
    }
    let _ = write!(out, ".{frac:02}");
    Ok(())
}

/// Avro decimal bytes of the unscaled `n`, sized as fastavro's decimal writer sizes
/// them (the Python reference): the magnitude's bit length plus a sign bit, rounded up to
/// whole bytes, so a negative power of two keeps a leading 0xFF (-128 is FF 80).
pub fn unscaled(n: i64) -> Vec<u8> {
    let magnitude_bits = 128 - (n as i128).unsigned_abs().leading_zeros() as usize;
    let size = (magnitude_bits + 1).div_ceil(8);
    (n as i128).to_be_bytes()[16 - size..].to_vec()
}

/// uuid_out (uuid.c): the 16 bytes in hex, `-` after the 4th, 6th, 8th and 10th
/// (service.types.text.uuid_text).
pub fn uuid_text(out: &mut String, d: &[u8]) -> Result<(), &'static str> {
    let b: [u8; 16] = fixed(d)?;
    for (i, byte) in b.iter().enumerate() {
        if matches!(i, 4 | 6 | 8 | 10) {
            out.push('-');
        }
        let _ = write!(out, "{byte:02x}");
    }
    Ok(())
}

/// byteaout (varlena.c) with bytea_output=hex: `\x` and two lower-case hex digits a
/// byte (service.types.text.bytea_text).
pub fn bytea_text(out: &mut String, d: &[u8]) {
    out.push_str("\\x");
    for b in d {
        let _ = write!(out, "{b:02x}");
    }
}

/// charout: NUL prints nothing, a high-bit byte as `\ooo` (service.types.text.char_text).
pub fn char_text(out: &mut String, d: &[u8]) -> Result<(), &'static str> {
    let [b] = fixed::<1>(d)?;
    if b & 0x80 != 0 {
        let _ = write!(out, "\\{b:03o}");
    } else if b != 0 {
        out.push(b as char);
    }
    Ok(())
}

/// xml_out of a value without an XML declaration (xml_out_internal: parse_xml_decl finds
/// none, print_xml_decl prints none, and one leading newline is eaten; service.types.text.
/// xml_text). A declaration is Python's to parse.
pub fn xml_text(out: &mut String, d: &[u8]) -> Result<(), &'static str> {
    let s = std::str::from_utf8(d).map_err(|_| "text is not UTF-8")?;
    if s.starts_with("<?xml") {
        return Err("xml declaration Python decides");
    }
    out.push_str(s.strip_prefix('\n').unwrap_or(s));
    Ok(())
}

/// A bit string as stored (VarBit): its bit length and the bits, most significant first,
/// with exactly as many bytes as the length needs (service.types.bits.bits_text).
fn bit_parts(d: &[u8]) -> Result<(usize, &[u8]), &'static str> {
    let head: [u8; 4] = d
        .get(..4)
        .and_then(|h| h.try_into().ok())
        .ok_or("bit string Python decides")?;
    let nbits = i32::from_le_bytes(head);
    let body = &d[4..];
    if nbits < 0 || body.len() != (nbits as usize).div_ceil(8) {
        return Err("bit string Python decides");
    }
    Ok((nbits as usize, body))
}

fn bit_at(body: &[u8], i: usize) -> bool {
    body[i / 8] >> (7 - i % 8) & 1 == 1
}

/// bit_out / varbit_out: one `0` or `1` per bit.
pub fn bits_text(out: &mut String, d: &[u8]) -> Result<(), &'static str> {
    let (nbits, body) = bit_parts(d)?;
    out.extend((0..nbits).map(|i| if bit_at(body, i) { '1' } else { '0' }));
    Ok(())
}

/// The Bits value (java.util.BitSet.toByteArray of the text, whose last character is
/// bit 0: connectors.avro.schema._bits): little-endian, (nbits + 7) / 8 bytes.
pub fn bits_bytes(d: &[u8]) -> Result<Vec<u8>, &'static str> {
    let (nbits, body) = bit_parts(d)?;
    let mut out = vec![0u8; nbits.div_ceil(8)];
    for k in 0..nbits {
        // bit k of the number is the text's character nbits - 1 - k
        if bit_at(body, nbits - 1 - k) {
            out[k / 8] |= 1 << (k % 8);
        }
    }
    Ok(out)
}

/// bit(1) as Debezium's boolean: the text is `1`.
pub fn bit_bool(d: &[u8]) -> Result<bool, &'static str> {
    let (nbits, body) = bit_parts(d)?;
    if nbits != 1 {
        return Err("bit string Python decides");
    }
    Ok(bit_at(body, 0))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn interval(time: i64, day: i32, month: i32) -> Vec<u8> {
        let mut v = time.to_le_bytes().to_vec();
        v.extend_from_slice(&day.to_le_bytes());
        v.extend_from_slice(&month.to_le_bytes());
        v
    }

    fn text(f: fn(&mut String, &[u8]) -> Result<(), &'static str>, d: &[u8]) -> String {
        let mut s = String::new();
        f(&mut s, d).unwrap();
        s
    }

    #[test]
    fn intervals_print_as_interval_out() {
        // values as `SELECT '…'::interval` prints them with IntervalStyle postgres
        let cases: &[(i64, i32, i32, &str)] = &[
            (0, 0, 0, "00:00:00"),
            (3_723_000_000, 0, 14, "1 year 2 mons 01:02:03"),
            (0, 1, 1, "1 mon 1 day"),
            (-1, 0, 0, "-00:00:00.000001"),
            (1_500_000, -3, 0, "-3 days +00:00:01.5"),
            (-90_000_000, 2, -13, "-1 years -1 mons +2 days -00:01:30"),
            (i64::MAX, i32::MAX, i32::MAX, "infinity"),
            (i64::MIN, i32::MIN, i32::MIN, "-infinity"),
        ];
        for &(t, d, m, want) in cases {
            assert_eq!(text(interval_text, &interval(t, d, m)), want);
        }
        assert_eq!(
            duration_micros(&interval(1, 1, 1)).unwrap(),
            2_629_800_000_000 + 86_400_000_000 + 1
        );
        assert_eq!(
            duration_micros(&interval(i64::MAX, i32::MAX, i32::MAX)).unwrap(),
            i64::MAX
        );
        assert!(interval_text(&mut String::new(), &[0; 15]).is_err());
    }

    #[test]
    fn timetz_text_and_zoned_time() {
        let tz = |t: i64, z: i32| {
            let mut v = t.to_le_bytes().to_vec();
            v.extend_from_slice(&z.to_le_bytes());
            v
        };
        assert_eq!(
            text(timetz_text, &tz(45_296_500_000, -3600)),
            "12:34:56.5+01"
        );
        assert_eq!(text(timetz_text, &tz(0, 19_800)), "00:00:00-05:30");
        assert_eq!(text(timetz_text, &tz(0, -50_403)), "00:00:00+14:00:03");
        assert_eq!(text(zoned_time, &tz(45_296_500_000, -3600)), "11:34:56.5Z");
        assert_eq!(text(zoned_time, &tz(0, 19_800)), "05:30:00Z");
        assert_eq!(text(zoned_time, &tz(86_400_000_000, -7200)), "22:00:00Z");
    }

    #[test]
    fn money_and_char() {
        let m = |c: i64| text(money_text, &c.to_le_bytes());
        assert_eq!(m(0), "$0.00");
        assert_eq!(m(-123_456_789), "-$1,234,567.89");
        assert_eq!(m(100_000), "$1,000.00");
        assert_eq!(m(i64::MIN), "-$92,233,720,368,547,758.08");
        assert_eq!(unscaled(0), vec![0]);
        assert_eq!(unscaled(128), vec![0, 128]);
        assert_eq!(unscaled(-128), vec![0xFF, 0x80]);
        assert_eq!(unscaled(-127), vec![0x81]);
        assert_eq!(unscaled(-129), vec![0xFF, 0x7F]);
        let mut min = vec![0xFF];
        min.extend_from_slice(&i64::MIN.to_be_bytes());
        assert_eq!(unscaled(i64::MIN), min);
        assert_eq!(unscaled(i64::MAX), i64::MAX.to_be_bytes().to_vec());
        assert_eq!(text(char_text, b"a"), "a");
        assert_eq!(text(char_text, b"\0"), "");
        assert_eq!(text(char_text, &[0xE9]), "\\351");
        assert_eq!(text(xml_text, b"\n\n<a/>"), "\n<a/>");
        assert_eq!(text(xml_text, b"<a>\xc3\xa9</a>"), "<a>\u{e9}</a>");
        assert!(xml_text(&mut String::new(), b"<?xml version=\"1.0\"?><a/>").is_err());
    }

    #[test]
    fn bits() {
        let b = |n: i32, body: &[u8]| {
            let mut v = n.to_le_bytes().to_vec();
            v.extend_from_slice(body);
            v
        };
        assert_eq!(text(bits_text, &b(0, &[])), "");
        assert_eq!(
            text(bits_text, &b(10, &[0b1011_0000, 0b0100_0000])),
            "1011000001"
        );
        // int("1011000001", 2) = 705 = 0x2C1, little-endian in 2 bytes
        assert_eq!(
            bits_bytes(&b(10, &[0b1011_0000, 0b0100_0000])).unwrap(),
            vec![0xC1, 0x02]
        );
        assert_eq!(bits_bytes(&b(3, &[0b1000_0000])).unwrap(), vec![0b100]);
        assert!(bit_bool(&b(1, &[0x80])).unwrap());
        assert!(bits_text(&mut String::new(), &b(9, &[0])).is_err());
        assert!(bits_text(&mut String::new(), &b(-1, &[])).is_err());
        assert!(bits_text(&mut String::new(), &[1, 0]).is_err());
    }
}
