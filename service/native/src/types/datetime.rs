//! Debezium's time encodings of stored date/time datums, as connectors.avro.codec and
//! connectors.avro.schema compute them from the same bytes.
//!
//! - `date_days`: io.debezium.time.Date, days since 1970 (∓infinity stay INT32_MIN/MAX);
//! - `micro_timestamp`: io.debezium.time.MicroTimestamp, µs since 1970, ∓infinity as
//!   INT64_MIN/MAX, a finite value past int64 clamped to INT64_MAX - 1 (clamp_micros:
//!   timestamps after 294247-01-10 04:00:54.775807);
//! - `zoned_timestamp`: io.debezium.time.ZonedTimestamp text, UTC with six fraction
//!   digits and `Z`. Years are java.time's ISO year, as Debezium's
//!   ISO_OFFSET_DATE_TIME prints them (`_iso_year`: `0005`, `0000`, `-0001`, `+10000`).
//!
//! - `pg_date`, `pg_clock`, `pg_timestamp`: the text date_out, time_out and
//!   timestamp(tz)_out print with DateStyle=ISO and TimeZone=UTC (test_decoding's text,
//!   output::text), as service.types.datetime prints them.
//!
//! The calendar is timestamp2tm's: µs floored into days, days since 2000-01-01 turned
//! into a proleptic Gregorian (year, month, day) with year 0 = 1 BC (j2date).

pub const UNIX_EPOCH_DAYS: i64 = 10_957; // 1970-01-01 .. 2000-01-01
pub const UNIX_EPOCH_USECS: i64 = UNIX_EPOCH_DAYS * USECS_PER_DAY;
pub const USECS_PER_DAY: i64 = 86_400_000_000;

/// Date field value; None when days + offset leaves int32 (Avro `int`).
pub fn date_days(days: i32) -> Option<i32> {
    if days == i32::MIN || days == i32::MAX {
        return Some(days);
    }
    i32::try_from(days as i64 + UNIX_EPOCH_DAYS).ok()
}

pub fn micro_timestamp(micros: i64) -> i64 {
    if micros == i64::MIN || micros == i64::MAX {
        return micros;
    }
    let shifted = micros as i128 + UNIX_EPOCH_USECS as i128;
    shifted.min((i64::MAX - 1) as i128) as i64
}

/// (year, month, day) of a day number since 2000-01-01 (civil-from-days, 400-year eras).
pub fn ymd(days_since_2000: i64) -> (i64, u32, u32) {
    let z = days_since_2000 + UNIX_EPOCH_DAYS + 719_468; // days since 0000-03-01
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

/// The longest ZonedTimestamp text: a sign, six year digits (i64 µs reach year
/// 294276) and the 23 bytes of `-MM-DDTHH:MM:SS.ffffffZ`, rounded up.
pub const ZONED_MAX: usize = 40;

/// Writes `n` as `width` decimal digits at `buf[at..]` (n < 10^width); the end.
fn digits(buf: &mut [u8; ZONED_MAX], at: usize, mut n: u64, width: usize) -> usize {
    for i in (at..at + width).rev() {
        buf[i] = b'0' + (n % 10) as u8;
        n /= 10;
    }
    at + width
}

/// ZonedTimestamp text of a stored timestamptz (µs since 2000-01-01 UTC), written into
/// `buf`; its length. The year has at least four digits, `+` before one past 9999 and
/// `-` before one BC (as java.time's ISO format prints it). Written digit by digit:
/// this runs once per timestamptz value on the native row path.
pub fn zoned_timestamp_to(buf: &mut [u8; ZONED_MAX], micros: i64) -> usize {
    let special: &[u8] = match micros {
        i64::MAX => b"infinity",
        i64::MIN => b"-infinity",
        _ => b"",
    };
    if !special.is_empty() {
        buf[..special.len()].copy_from_slice(special);
        return special.len();
    }
    let days = micros.div_euclid(USECS_PER_DAY);
    let rest = micros.rem_euclid(USECS_PER_DAY);
    let (year, month, day) = ymd(days);
    let secs = (rest / 1_000_000) as u64;
    let us = (rest % 1_000_000) as u64;
    let mut at = 0;
    if year > 9999 {
        buf[0] = b'+';
        at = 1;
    } else if year < 0 {
        buf[0] = b'-';
        at = 1;
    }
    let y = year.unsigned_abs();
    let width = if y >= 100_000 {
        6
    } else if y >= 10_000 {
        5
    } else {
        4
    };
    at = digits(buf, at, y, width);
    for (sep, value, width) in [
        (b'-', month as u64, 2),
        (b'-', day as u64, 2),
        (b'T', secs / 3600, 2),
        (b':', secs / 60 % 60, 2),
        (b':', secs % 60, 2),
        (b'.', us, 6),
    ] {
        buf[at] = sep;
        at = digits(buf, at + 1, value, width);
    }
    buf[at] = b'Z';
    at + 1
}

/// `zoned_timestamp_to` as a String.
pub fn zoned_timestamp(micros: i64) -> String {
    let mut buf = [0u8; ZONED_MAX];
    let n = zoned_timestamp_to(&mut buf, micros);
    String::from_utf8_lossy(&buf[..n]).into_owned()
}

/// The fraction `_fraction` prints: `.` and six digits with trailing zeros cut; nothing
/// for zero.
fn fraction(out: &mut String, us: i64) {
    use std::fmt::Write;
    if us != 0 {
        let mark = out.len();
        let _ = write!(out, ".{us:06}");
        let kept = out[mark..].trim_end_matches('0').len();
        out.truncate(mark + kept);
    }
}

/// time_out of µs since midnight: HH:MM:SS and the fraction (service.types.datetime.
/// _clock, floored as Python's divmod).
pub fn pg_clock(out: &mut String, micros: i64) {
    use std::fmt::Write;
    let secs = micros.div_euclid(1_000_000);
    let us = micros.rem_euclid(1_000_000);
    let (mins, sec) = (secs.div_euclid(60), secs.rem_euclid(60));
    let (hour, minute) = (mins.div_euclid(60), mins.rem_euclid(60));
    let _ = write!(out, "{hour:02}:{minute:02}:{sec:02}");
    fraction(out, us);
}

/// The date part `_date_part` prints (YYYY-MM-DD, the year of a BC date counted back
/// from 1); whether it is BC.
fn pg_date_part(out: &mut String, days: i64) -> bool {
    use std::fmt::Write;
    let (year, month, day) = ymd(days);
    let bc = year <= 0;
    let shown = if bc { 1 - year } else { year };
    let _ = write!(out, "{shown:04}-{month:02}-{day:02}");
    bc
}

/// date_out with DateStyle ISO (service.types.datetime.date_text).
pub fn pg_date(out: &mut String, days: i32) {
    match days {
        i32::MIN => out.push_str("-infinity"),
        i32::MAX => out.push_str("infinity"),
        _ => {
            if pg_date_part(out, days as i64) {
                out.push_str(" BC");
            }
        }
    }
}

/// timestamp_out (or, `with_tz`, timestamptz_out with TimeZone UTC) with DateStyle ISO
/// (service.types.datetime._timestamp_text).
pub fn pg_timestamp(out: &mut String, micros: i64, with_tz: bool) {
    match micros {
        i64::MIN => out.push_str("-infinity"),
        i64::MAX => out.push_str("infinity"),
        _ => {
            let bc = pg_date_part(out, micros.div_euclid(USECS_PER_DAY));
            out.push(' ');
            pg_clock(out, micros.rem_euclid(USECS_PER_DAY));
            if with_tz {
                out.push_str("+00");
            }
            if bc {
                out.push_str(" BC");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn calendar_matches_known_days() {
        assert_eq!(ymd(0), (2000, 1, 1));
        assert_eq!(ymd(-1), (1999, 12, 31));
        assert_eq!(ymd(59), (2000, 2, 29));
        assert_eq!(ymd(-730_119), (1, 1, 1)); // 0001-01-01
        assert_eq!(ymd(-730_120), (0, 12, 31)); // 1 BC
    }

    #[test]
    fn zoned_text_forms() {
        assert_eq!(zoned_timestamp(0), "2000-01-01T00:00:00.000000Z");
        assert_eq!(zoned_timestamp(-1), "1999-12-31T23:59:59.999999Z");
        assert_eq!(zoned_timestamp(i64::MAX), "infinity");
        assert_eq!(zoned_timestamp(i64::MIN), "-infinity");
        // year 5: four digits, as java.time prints it
        let d = -728_658;
        assert_eq!(
            zoned_timestamp(d * USECS_PER_DAY),
            "0005-01-01T00:00:00.000000Z"
        );
        assert_eq!(
            zoned_timestamp((-730_120) * USECS_PER_DAY),
            "0000-12-31T00:00:00.000000Z"
        );
    }

    #[test]
    fn zoned_text_equals_the_formatted_text() {
        // the digit writer against std's formatting, over the whole i64 range's years
        let formatted = |micros: i64| {
            let days = micros.div_euclid(USECS_PER_DAY);
            let rest = micros.rem_euclid(USECS_PER_DAY);
            let (year, month, day) = ymd(days);
            let (secs, us) = (rest / 1_000_000, rest % 1_000_000);
            let year_text = if year > 9999 {
                format!("+{year}")
            } else if year < 0 {
                format!("-{:04}", -year)
            } else {
                format!("{year:04}")
            };
            format!(
                "{year_text}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{us:06}Z",
                secs / 3600,
                secs / 60 % 60,
                secs % 60
            )
        };
        let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
        let mut samples = vec![i64::MAX - 1, i64::MIN + 1, 0, -1, 1];
        for _ in 0..20_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            samples.push(x as i64);
            samples.push((x as i64) >> (x % 40)); // nearer 2000 too
        }
        for m in samples {
            assert_eq!(zoned_timestamp(m), formatted(m), "{m}");
        }
    }

    #[test]
    fn timestamps_clamp_before_infinity() {
        assert_eq!(micro_timestamp(0), UNIX_EPOCH_USECS);
        assert_eq!(micro_timestamp(i64::MAX - 5), i64::MAX - 1);
        assert_eq!(micro_timestamp(i64::MAX), i64::MAX);
        assert_eq!(date_days(i32::MAX - 5), None);
        assert_eq!(date_days(0), Some(10_957));
    }
}
