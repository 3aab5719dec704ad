"""Date and time types: date, time, timetz, timestamp, timestamptz, interval.

Receives: the fixed-size little-endian image of one datum. Hands on: a Python value,
or the exact text date_out/time_out/timetz_out/timestamp_out/timestamptz_out/
interval_out print with DateStyle=ISO, IntervalStyle=postgres and TimeZone=UTC.

Storage (datetime.h, timestamp.h, date.h):
- date: int32 days since 2000-01-01; INT32_MIN is -infinity, INT32_MAX infinity.
- time: int64 microseconds since midnight, 0 .. 24:00:00 inclusive.
- timetz: int64 time, then int32 zone in seconds *west* of UTC (12 bytes).
- timestamp/timestamptz: int64 microseconds since 2000-01-01 00:00 (UTC for tz);
  INT64_MIN is -infinity, INT64_MAX infinity.
- interval: int64 time (µs), int32 day, int32 month; PostgreSQL 17+ writes infinity
  as all fields at their maximum and -infinity as all at their minimum.
The calendar is the proleptic Gregorian one (j2date) for every year, BC included;
year 0 is 1 BC.

Python values: `datetime.date`/`datetime.datetime`/`datetime.time` where Python can
hold them; otherwise the small value classes below, which keep the exact stored number
(infinities, BC years, years after 9999, 24:00:00). Timestamptz values are UTC-aware.
Intervals are always `Interval` (months and days do not fit `timedelta`).

Pure; malformed input raises `DecodeError`.
"""

from __future__ import annotations

import datetime as dt
import struct
from dataclasses import dataclass

from service._binary import I32, I64
from service.errors import DecodeError
from service.pgconst import PG_EPOCH, PG_EPOCH_DATE, PG_EPOCH_UTC, USECS_PER_DAY

_TIMETZ = struct.Struct("<qi")
_INTERVAL = struct.Struct("<qii")

INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
_PG_EPOCH_ORDINAL = PG_EPOCH_DATE.toordinal()
_DAYS_PER_400Y = 146_097


@dataclass(slots=True, frozen=True)
class PgDate:
    """A date Python cannot hold: infinite, BC, or after 9999. `days` since 2000-01-01."""

    days: int

    @property
    def infinite(self) -> int:
        """+1 for infinity, -1 for -infinity, 0 for a finite date."""
        return 1 if self.days == INT32_MAX else -1 if self.days == INT32_MIN else 0


@dataclass(slots=True, frozen=True)
class PgTimestamp:
    """A timestamp Python cannot hold. `micros` since 2000-01-01 00:00 (UTC if `with_tz`)."""

    micros: int
    with_tz: bool

    @property
    def infinite(self) -> int:
        return 1 if self.micros == INT64_MAX else -1 if self.micros == INT64_MIN else 0


@dataclass(slots=True, frozen=True)
class PgTime:
    """24:00:00 (which `datetime.time` cannot hold), with its zone for timetz.

    `zone` is seconds west of UTC as stored, or None for time without time zone.
    """

    micros: int
    zone: int | None = None


@dataclass(slots=True, frozen=True)
class Interval:
    """An interval exactly as stored: months, days and microseconds, each signed."""

    months: int
    days: int
    micros: int


def _tdiv(a: int, b: int) -> int:
    """C integer division (truncates toward zero)."""
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b > 0) else -q


def ymd(days: int) -> tuple[int, int, int]:
    """(year, month, day) of a day number since 2000-01-01; year <= 0 is BC (j2date)."""
    ordinal = _PG_EPOCH_ORDINAL + days
    cycles, rest = divmod(ordinal - 1, _DAYS_PER_400Y)
    d = dt.date.fromordinal(rest + 1)
    return d.year + 400 * cycles, d.month, d.day


_DATE_PARTS: dict[int, tuple[str, bool]] = {}
_DATE_PARTS_MAX = 8192


def _date_part(days: int) -> tuple[str, bool]:
    # Rows of a table tend to share dates: the printed date is kept per day number.
    found = _DATE_PARTS.get(days)
    if found is not None:
        return found
    year, month, day = ymd(days)
    bc = year <= 0
    found = f"{(1 - year) if bc else year:04d}-{month:02d}-{day:02d}", bc
    if len(_DATE_PARTS) >= _DATE_PARTS_MAX:
        _DATE_PARTS.clear()
    _DATE_PARTS[days] = found
    return found


def _fraction(us: int) -> str:
    return f".{us:06d}".rstrip("0") if us else ""


def _clock(micros: int) -> str:
    secs, us = divmod(micros, 1_000_000)
    mins, sec = divmod(secs, 60)
    hour, minute = divmod(mins, 60)
    return f"{hour:02d}:{minute:02d}:{sec:02d}{_fraction(us)}"


def _zone_text(zone: int) -> str:
    """EncodeTimezone: the offset east of UTC as +HH[:MM[:SS]]."""
    offset = -zone
    sign = "+" if offset >= 0 else "-"
    a = abs(offset)
    hour, minute, sec = a // 3600, (a // 60) % 60, a % 60
    if sec:
        return f"{sign}{hour:02d}:{minute:02d}:{sec:02d}"
    if minute:
        return f"{sign}{hour:02d}:{minute:02d}"
    return f"{sign}{hour:02d}"


def _check(buf: bytes, size: int, name: str) -> None:
    if len(buf) != size:
        raise DecodeError(f"{name} datum has {len(buf)} bytes, expected {size}")


def date_days(buf: bytes) -> int:
    """A stored date as it is: int32 days since 2000-01-01 (INT32_MIN/MAX are ∓infinity)."""
    _check(buf, 4, "date")
    days: int = I32.unpack(buf)[0]
    return days


def timestamp_usecs(buf: bytes) -> int:
    """A stored timestamp or timestamptz as it is: int64 µs since 2000-01-01 (UTC for
    timestamptz; INT64_MIN/MAX are ∓infinity)."""
    _check(buf, 8, "timestamp")
    usecs: int = I64.unpack(buf)[0]
    return usecs


# --- date ------------------------------------------------------------------------


def date_text(buf: bytes) -> str:
    """date_out with DateStyle ISO."""
    _check(buf, 4, "date")
    days = I32.unpack(buf)[0]
    if days == INT32_MIN:
        return "-infinity"
    if days == INT32_MAX:
        return "infinity"
    text, bc = _date_part(days)
    return f"{text} BC" if bc else text


def date_value(buf: bytes) -> dt.date | PgDate:
    _check(buf, 4, "date")
    days = I32.unpack(buf)[0]
    if days in (INT32_MIN, INT32_MAX):
        return PgDate(days)
    ordinal = _PG_EPOCH_ORDINAL + days
    if 1 <= ordinal <= dt.date.max.toordinal():
        return dt.date.fromordinal(ordinal)
    return PgDate(days)


# --- time and timetz ------------------------------------------------------------


def time_text(buf: bytes) -> str:
    _check(buf, 8, "time")
    return _clock(I64.unpack(buf)[0])


def time_value(buf: bytes) -> dt.time | PgTime:
    _check(buf, 8, "time")
    micros = I64.unpack(buf)[0]
    if not 0 <= micros < USECS_PER_DAY:
        return PgTime(micros)
    return _pytime(micros, None)


def _pytime(micros: int, tz: dt.tzinfo | None) -> dt.time:
    secs, us = divmod(micros, 1_000_000)
    mins, sec = divmod(secs, 60)
    hour, minute = divmod(mins, 60)
    return dt.time(hour, minute, sec, us, tzinfo=tz)


def timetz_text(buf: bytes) -> str:
    _check(buf, 12, "timetz")
    micros, zone = _TIMETZ.unpack(buf)
    return _clock(micros) + _zone_text(zone)


def timetz_value(buf: bytes) -> dt.time | PgTime:
    _check(buf, 12, "timetz")
    micros, zone = _TIMETZ.unpack(buf)
    if not 0 <= micros < USECS_PER_DAY:
        return PgTime(micros, zone)
    return _pytime(micros, dt.timezone(dt.timedelta(seconds=-zone)))


# --- timestamp and timestamptz ----------------------------------------------------


def _timestamp_text(buf: bytes, with_tz: bool) -> str:
    _check(buf, 8, "timestamp")
    micros = I64.unpack(buf)[0]
    if micros == INT64_MIN:
        return "-infinity"
    if micros == INT64_MAX:
        return "infinity"
    days, rest = divmod(micros, USECS_PER_DAY)  # timestamp2tm's TMODULO, floored
    date, bc = _date_part(days)
    text = f"{date} {_clock(rest)}{'+00' if with_tz else ''}"
    return f"{text} BC" if bc else text


def timestamp_text(buf: bytes) -> str:
    """timestamp_out with DateStyle ISO."""
    return _timestamp_text(buf, False)


def timestamptz_text(buf: bytes) -> str:
    """timestamptz_out with DateStyle ISO and TimeZone UTC."""
    return _timestamp_text(buf, True)


def _timestamp_value(buf: bytes, with_tz: bool) -> dt.datetime | PgTimestamp:
    _check(buf, 8, "timestamp")
    micros = I64.unpack(buf)[0]
    if micros in (INT64_MIN, INT64_MAX):
        return PgTimestamp(micros, with_tz)
    year = ymd(micros // USECS_PER_DAY)[0]
    if not 1 <= year <= 9999:
        return PgTimestamp(micros, with_tz)
    return (PG_EPOCH_UTC if with_tz else PG_EPOCH) + dt.timedelta(microseconds=micros)


def timestamp_value(buf: bytes) -> dt.datetime | PgTimestamp:
    return _timestamp_value(buf, False)


def timestamptz_value(buf: bytes) -> dt.datetime | PgTimestamp:
    return _timestamp_value(buf, True)


# --- interval ----------------------------------------------------------------------


def interval_value(buf: bytes) -> Interval:
    _check(buf, 16, "interval")
    micros, days, months = _INTERVAL.unpack(buf)
    return Interval(months, days, micros)


def interval_text(buf: bytes) -> str:
    """interval_out with IntervalStyle postgres (EncodeInterval, INTSTYLE_POSTGRES)."""
    iv = interval_value(buf)
    if (iv.months, iv.days, iv.micros) == (INT32_MAX, INT32_MAX, INT64_MAX):
        return "infinity"
    if (iv.months, iv.days, iv.micros) == (INT32_MIN, INT32_MIN, INT64_MIN):
        return "-infinity"
    parts: list[str] = []
    is_before = False
    for value, unit in (
        (_tdiv(iv.months, 12), "year"),
        (iv.months - 12 * _tdiv(iv.months, 12), "mon"),
        (iv.days, "day"),
    ):
        if value == 0:
            continue
        plus = "+" if is_before and value > 0 else ""
        parts.append(f"{plus}{value} {unit}{'' if value == 1 else 's'}")
        is_before = value < 0
    time = iv.micros
    hour = _tdiv(time, 3_600_000_000)
    time -= hour * 3_600_000_000
    minute = _tdiv(time, 60_000_000)
    time -= minute * 60_000_000
    sec = _tdiv(time, 1_000_000)
    fsec = time - sec * 1_000_000
    if not parts or hour or minute or sec or fsec:
        minus = hour < 0 or minute < 0 or sec < 0 or fsec < 0
        sign = "-" if minus else "+" if is_before else ""
        parts.append(
            f"{sign}{abs(hour):02d}:{abs(minute):02d}:{abs(sec):02d}{_fraction(abs(fsec))}"
        )
    return " ".join(parts)
