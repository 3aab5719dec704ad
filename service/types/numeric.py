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

Floats print the shortest digits that lie strictly inside the value's rounding interval
(Ryu as built by PostgreSQL 12+ for extra_float_digits > 0, without STRICTLY_SHORTEST):
fixed notation when the decimal exponent is in [-4, 15) for float8 and [-4, 6) for
float4, otherwise `d.ddde+XX` (d2s.c/f2s.c to_chars). Money prints as cash_out does with
lc_monetary=C: `$1,234.56`, `-$1,234.56`.

Pure; malformed input raises `DecodeError`.
"""

from __future__ import annotations

import math
import struct
from decimal import ROUND_CEILING, ROUND_FLOOR, ROUND_HALF_EVEN, Decimal, localcontext

from service._binary import I16, I64, U16, U32
from service.errors import DecodeError

_F4 = struct.Struct("<f")
_F8 = struct.Struct("<d")

NUMERIC_SIGN_MASK = 0xC000
NUMERIC_NEG = 0x4000
NUMERIC_SHORT = 0x8000
NUMERIC_SPECIAL = 0xC000
NUMERIC_NAN = 0xC000
NUMERIC_PINF = 0xD000
NUMERIC_NINF = 0xF000


def parse(buf: bytes) -> tuple[str, bool, int, int, list[int]]:
    """(special, negative, weight, dscale, digits); special is '' for a finite value."""
    if len(buf) < 2:
        raise DecodeError(f"numeric of {len(buf)} bytes is too short")
    header = U16.unpack_from(buf, 0)[0]
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
        weight = I16.unpack_from(buf, 2)[0]
        start = 4
    if (len(buf) - start) % 2:
        raise DecodeError("numeric digits have an odd byte count")
    digits = list(_digits_struct((len(buf) - start) >> 1).unpack_from(buf, start))
    return "", negative, weight, dscale, digits


def scaled_integer(buf: bytes, scale: int, precision: int) -> tuple[int, bool] | None:
    """A stored finite numeric as (|unscaled integer| at `scale` places, negative), or None
    where it is not exactly that: NaN/±Infinity, more places than `scale` (dscale), more
    than `precision` digits, a digit out of base-10000 range, a malformed datum.

    The value numeric_out prints is the base-10000 digits truncated to dscale places; the
    integer is those decimal digits times 10^(scale - dscale), as numeric(p, s) holds it.
    """
    try:
        special, negative, weight, dscale, digits = parse(buf)
    except DecodeError:
        return None
    if special or dscale > scale:
        return None
    unscaled = 0
    for d in digits:
        if not 0 <= d < 10_000:
            return None
        unscaled = unscaled * 10_000 + d
    shift = 4 * (weight + 1 - len(digits)) + dscale
    if shift >= 0:
        unscaled *= _pow10(shift)
    else:
        unscaled //= _pow10(-shift)
    if unscaled >= _pow10(precision):
        return None
    if scale != dscale:
        unscaled *= _pow10(scale - dscale)
    return unscaled, negative


_POW10: tuple[int, ...] = tuple(10**i for i in range(64))


def _pow10(n: int) -> int:
    return _POW10[n] if n < 64 else 10**n


_CACHED_UP_TO = 64  # digit counts beyond this are rare: not kept
_DIGITS: dict[int, struct.Struct] = {}
_GROUPS: dict[int, str] = {}


def _digits_struct(n: int) -> struct.Struct:
    """`n` int16 base-10000 digits in one unpack (cached per count)."""
    found = _DIGITS.get(n)
    if found is None:
        found = struct.Struct(f"<{n}h")
        if n <= _CACHED_UP_TO:
            _DIGITS[n] = found
    return found


def _groups_format(n: int) -> str:
    """`%d` then `%04d` for each further group: digit groups printed in one format."""
    found = _GROUPS.get(n)
    if found is None:
        found = "%d" + "%04d" * (n - 1)
        if n <= _CACHED_UP_TO:
            _GROUPS[n] = found
    return found


def numeric_text(buf: bytes) -> str:
    """The text numeric_out prints."""
    special, negative, weight, dscale, digits = parse(buf)
    if special:
        return special
    if digits and (min(digits) < 0 or max(digits) >= 10000):
        bad = next(d for d in digits if not 0 <= d < 10000)
        raise DecodeError(f"numeric digit {bad} out of range")
    # Group i has weight `weight - i`; groups outside `digits` are zero.
    n = len(digits)
    if weight < 0:
        text = "0"
    else:
        groups = digits[: weight + 1]
        if n < weight + 1:
            groups += [0] * (weight + 1 - n)
        text = _groups_format(weight + 1) % tuple(groups)
    if dscale:
        first = weight + 1
        count = (dscale + 3) // 4
        frac = [digits[i] if 0 <= i < n else 0 for i in range(first, first + count)]
        text = f"{text}.{(('%04d' * count) % tuple(frac))[:dscale]}"
    return f"-{text}" if negative and any(digits) else text


def numeric_value(buf: bytes) -> Decimal:
    return Decimal(numeric_text(buf))


def _neighbours(value: float, single: bool) -> tuple[float, float]:
    """The adjacent representable values below and above `value` (> 0, finite)."""
    if single:
        bits = U32.unpack(_F4.pack(value))[0]
        below = _F4.unpack(U32.pack(bits - 1))[0]
        above = _F4.unpack(U32.pack(bits + 1))[0] if bits + 1 < 0x7F800000 else math.inf
        return float(below), float(above)
    return math.nextafter(value, 0.0), math.nextafter(value, math.inf)


def _shortest(value: float, single: bool) -> tuple[str, int]:
    """Shortest digits strictly inside the rounding interval, and the first digit's exponent.

    PostgreSQL builds Ryu without STRICTLY_SHORTEST (d2s.c/f2s.c: acceptBounds = false),
    so a decimal lying exactly halfway to a neighbour never qualifies, unlike Python's
    repr. Among the shortest candidates the one nearest the exact value wins, ties to even.
    """
    below, above = _neighbours(value, single)
    with localcontext() as ctx:
        ctx.prec = 1200  # exact for every double and every midpoint between doubles
        exact = Decimal(value)
        lo = (exact + Decimal(below)) / 2
        if above == math.inf:  # the largest finite value: the gap above mirrors the one below
            hi = exact + (exact - Decimal(below)) / 2
        else:
            hi = (exact + Decimal(above)) / 2
        if not single:
            fast = Decimal(repr(value))  # shortest with bounds accepted: usually the answer
            if lo < fast < hi:
                return _digits(fast)
        for prec in range(1, 18):
            ctx.prec = prec
            picks = []
            for rounding in (ROUND_HALF_EVEN, ROUND_FLOOR, ROUND_CEILING):
                ctx.rounding = rounding
                picks.append(+exact)
            nearest = picks[0]
            ctx.prec = 1200
            if lo < nearest < hi:
                return _digits(nearest)
            inside = [c for c in picks if lo < c < hi]
            if inside:
                return _digits(min(inside, key=lambda c: abs(c - exact)))
    raise DecodeError(f"no shortest decimal found for {value!r}")


def _digits(value: Decimal) -> tuple[str, int]:
    digits = "".join(map(str, value.as_tuple().digits)).rstrip("0") or "0"
    return digits, value.adjusted()


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
    return int(I64.unpack(buf)[0])


def money_value(buf: bytes) -> Decimal:
    return Decimal(money_cents(buf)).scaleb(-2)


def money_text(buf: bytes) -> str:
    """cash_out under lc_monetary=C: `$`, `,` every three digits, `.`, two decimals."""
    cents = money_cents(buf)
    sign = "-" if cents < 0 else ""
    whole, frac = divmod(abs(cents), 100)
    return f"{sign}${whole:,}.{frac:02d}"
