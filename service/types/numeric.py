"""Numbers: numeric, float4/float8 and money, as numeric_out, float4out/float8out and cash_out.

Receives: a datum's bytes (numeric: the varlena payload; the others: their fixed-size
little-endian image). Hands on: a Python value (`Decimal`, including `Decimal('NaN')`
and `Decimal('Infinity')`/`Decimal('-Infinity')` for numeric's special values; `float`;
money as a `Decimal` with two places) or the exact text PostgreSQL prints.

Numeric layout (numeric.c): a uint16 header, then base-10000 int16 digits.
- `header & 0xC000 == 0xC000`: special; `header & 0xF000` is NaN 0xC000, +Inf 0xD000,
  -Inf 0xF000.
- `header & 0xC000 == 0x8000`: short form; sign bit 0x2000, dscale in bits 7..12,
  weight in the low 7 bits as a sign-extended 7-bit number.
- otherwise long form: sign 0x4000 (negative) or 0, dscale in the low 14 bits, then an
  int16 weight.
The value is sum(digit[i] * 10000^(weight - i)); the text shows exactly `dscale`
fractional digits (get_str_from_var).

Floats print the shortest round-trip digits (extra_float_digits > 0, PostgreSQL 12+):
fixed notation when the decimal exponent is in [-4, 15) for float8 and [-4, 6) for
float4, otherwise `d.ddde+XX` (d2s.c/f2s.c to_chars). Money prints as cash_out does with
lc_monetary=C: `$1,234.56`, `-$1,234.56`.

Pure; malformed input raises `DecodeError`.
"""

from __future__ import annotations

import math
import struct
from decimal import Decimal

from service.errors import DecodeError

_U16 = struct.Struct("<H")
_I16 = struct.Struct("<h")
_F4 = struct.Struct("<f")
_F8 = struct.Struct("<d")
_I64 = struct.Struct("<q")

NUMERIC_SIGN_MASK = 0xC000
NUMERIC_NEG = 0x4000
NUMERIC_SHORT = 0x8000
NUMERIC_SPECIAL = 0xC000
NUMERIC_NAN = 0xC000
NUMERIC_PINF = 0xD000
NUMERIC_NINF = 0xF000


def _parse(buf: bytes) -> tuple[str, bool, int, int, list[int]]:
    """(special, negative, weight, dscale, digits); special is '' for a finite value."""
    if len(buf) < 2:
        raise DecodeError(f"numeric of {len(buf)} bytes is too short")
    header = _U16.unpack_from(buf, 0)[0]
    kind = header & NUMERIC_SIGN_MASK
    if kind == NUMERIC_SPECIAL:
        ext = header & 0xF000
        if ext == NUMERIC_NAN:
            return "NaN", False, 0, 0, []
        if ext == NUMERIC_PINF:
            return "Infinity", False, 0, 0, []
        if ext == NUMERIC_NINF:
            return "-Infinity", True, 0, 0, []
        raise DecodeError(f"numeric special header {header:#06x} is not NaN or infinity")
    if kind == NUMERIC_SHORT:
        negative = bool(header & 0x2000)
        dscale = (header & 0x1F80) >> 7
        weight = header & 0x003F
        if header & 0x0040:
            weight -= 64
        start = 2
    else:
        if len(buf) < 4:
            raise DecodeError("long numeric without weight")
        negative = kind == NUMERIC_NEG
        if kind not in (0, NUMERIC_NEG):
            raise DecodeError(f"numeric sign {kind:#06x} is invalid")
        dscale = header & 0x3FFF
        weight = _I16.unpack_from(buf, 2)[0]
        start = 4
    if (len(buf) - start) % 2:
        raise DecodeError("numeric digits have an odd byte count")
    digits = [_I16.unpack_from(buf, i)[0] for i in range(start, len(buf), 2)]
    return "", negative, weight, dscale, digits


def numeric_text(buf: bytes) -> str:
    """The text numeric_out prints."""
    special, negative, weight, dscale, digits = _parse(buf)
    if special:
        return special
    for d in digits:
        if not 0 <= d < 10000:
            raise DecodeError(f"numeric digit {d} out of range")
    # Group i has weight `weight - i`; groups outside `digits` are zero.
    n = len(digits)
    if weight < 0:
        text = "0"
    else:
        groups = [digits[i] if i < n else 0 for i in range(weight + 1)]
        text = str(groups[0]) + "".join(f"{g:04d}" for g in groups[1:])
    if dscale:
        first = weight + 1
        frac = "".join(
            f"{digits[i]:04d}" if 0 <= i < n else "0000"
            for i in range(first, first + (dscale + 3) // 4)
        )
        text = f"{text}.{frac[:dscale]}"
    return f"-{text}" if negative and any(digits) else text


def numeric_value(buf: bytes) -> Decimal:
    return Decimal(numeric_text(buf))


def _shortest(value: float, single: bool) -> tuple[str, int]:
    """Shortest round-trip digits (no trailing zeros) and the decimal exponent of the first."""
    if single:
        target = _F4.pack(value)
        for prec in range(1, 10):
            text = f"{value:.{prec - 1}e}"
            if _F4.pack(float(text)) == target:
                break
    else:
        text = f"{Decimal(repr(value)):e}"  # repr is the shortest round-trip form
    mantissa, _, exp = text.partition("e")
    digits = mantissa.replace(".", "").replace("-", "").rstrip("0") or "0"
    return digits, int(exp)


def float_text(value: float, *, single: bool) -> str:
    """The text float4out/float8out prints with extra_float_digits=1 (shortest)."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    sign = "-" if math.copysign(1.0, value) < 0 else ""
    if value == 0:
        return f"{sign}0"
    digits, exp = _shortest(abs(value), single)
    if -4 <= exp < (6 if single else 15):
        if exp < 0:
            body = "0." + "0" * (-exp - 1) + digits
        elif len(digits) <= exp + 1:
            body = digits + "0" * (exp + 1 - len(digits))
        else:
            body = f"{digits[: exp + 1]}.{digits[exp + 1 :]}"
    else:
        frac = f".{digits[1:]}" if len(digits) > 1 else ""
        esign = "-" if exp < 0 else "+"
        body = f"{digits[0]}{frac}e{esign}{abs(exp):02d}"
    return sign + body


def float4_value(buf: bytes) -> float:
    return float(_F4.unpack(buf)[0])


def float8_value(buf: bytes) -> float:
    return float(_F8.unpack(buf)[0])


def money_cents(buf: bytes) -> int:
    return int(_I64.unpack(buf)[0])


def money_value(buf: bytes) -> Decimal:
    return Decimal(money_cents(buf)).scaleb(-2)


def money_text(buf: bytes) -> str:
    """cash_out under lc_monetary=C: `$`, `,` every three digits, `.`, two decimals."""
    cents = money_cents(buf)
    sign = "-" if cents < 0 else ""
    whole, frac = divmod(abs(cents), 100)
    return f"{sign}${whole:,}.{frac:02d}"
