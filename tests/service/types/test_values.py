"""Pure tests of the per-type output functions and of to_python/to_text dispatch."""

from __future__ import annotations

import datetime as dt
import math
import struct
from decimal import Decimal
from types import MappingProxyType

import pytest
from hypothesis import given
from hypothesis import strategies as st

from service.errors import DecodeError, UnknownTypeError
from service.types.array import PgArray
from service.types.convert import to_python, to_text, undecodable_part
from service.types.datetime import Interval, PgDate, PgTime, PgTimestamp
from service.types.numeric import float_text
from service.types.range import Range
from service.types.registry import TypeInfo, TypeRegistry
from service.types.varlena import UNCHANGED_TOAST, ToastPointer

REG = TypeRegistry()


def t(oid: int, data: bytes) -> str:
    return to_text(data, REG.get(oid), REG)


def py(oid: int, data: bytes) -> object:
    return to_python(data, REG.get(oid), REG)


@given(st.floats(allow_nan=False, allow_infinity=False))
def test_float8_text_round_trips(x: float) -> None:
    """float8 text parses back to the same double, with no more than 17 digits."""
    text = float_text(x, single=False)
    assert float(text) == x and math.copysign(1, float(text)) == math.copysign(1, x)


@given(st.floats(width=32, allow_nan=False, allow_infinity=False))
def test_float4_text_round_trips(x: float) -> None:
    """float4 text rounds back to the same single-precision value."""
    text = float_text(x, single=True)
    assert struct.pack("<f", float(text)) == struct.pack("<f", x)


def test_float_special_and_notation() -> None:
    """NaN, infinities, -0 and the fixed/scientific switch points print as PostgreSQL."""
    assert [float_text(v, single=False) for v in (math.nan, math.inf, -math.inf, -0.0)] == [
        "NaN",
        "Infinity",
        "-Infinity",
        "-0",
    ]
    assert float_text(1e15, single=False) == "1e+15"
    assert float_text(123456789012345.0, single=False) == "123456789012345"
    assert float_text(1e6, single=True) == "1e+06" and float_text(123456.0, single=True) == "123456"
    assert (
        float_text(0.0001, single=False) == "0.0001" and float_text(1e-5, single=False) == "1e-05"
    )


def numeric(sign: int, weight: int, dscale: int, digits: list[int]) -> bytes:
    return struct.pack(f"<Hh{len(digits)}h", sign | dscale, weight, *digits)


def test_numeric_forms() -> None:
    """Long and short forms, dscale padding/truncation, and the special values."""
    assert t(1700, numeric(0x4000, 0, 3, [12, 3400])) == "-12.340"
    assert t(1700, numeric(0, 1, 0, [1])) == "10000"
    assert t(1700, numeric(0, -2, 10, [5])) == "0.0000000500"
    # Short form: weight in the header's low bits, digits follow directly.
    assert t(1700, struct.pack("<Hh", 0x8000 | (2 << 7), 12)) == "12.00"
    assert t(1700, struct.pack("<Hh", 0x8000 | 0x2000 | (4 << 7) | 0x7F, 5)) == "-0.0005"
    assert [t(1700, struct.pack("<H", h)) for h in (0xC000, 0xD000, 0xF000)] == [
        "NaN",
        "Infinity",
        "-Infinity",
    ]
    assert py(1700, struct.pack("<H", 0xD000)) == Decimal("Infinity")
    assert py(1700, struct.pack("<H", 0xC000)).is_nan()  # type: ignore[attr-defined]
    with pytest.raises(DecodeError):
        t(1700, struct.pack("<H", 0xE000))


def test_money_text() -> None:
    """cash_out under lc_monetary=C."""
    assert t(790, struct.pack("<q", -123456)) == "-$1,234.56"
    assert t(790, struct.pack("<q", 5)) == "$0.05"
    assert py(790, struct.pack("<q", 5)) == Decimal("0.05")


def test_dates_times_and_intervals() -> None:
    """BC years, infinities, 24:00 and the postgres interval style."""
    assert t(1082, struct.pack("<i", -730485)) == "0001-01-01 BC"
    assert py(1082, struct.pack("<i", 2**31 - 1)) == PgDate(2**31 - 1)
    assert py(1082, struct.pack("<i", 0)) == dt.date(2000, 1, 1)
    assert t(1114, struct.pack("<q", -1)) == "1999-12-31 23:59:59.999999"
    assert t(1184, struct.pack("<q", 2**63 - 1)) == "infinity"
    assert isinstance(py(1114, struct.pack("<q", -(2**63))), PgTimestamp)
    assert py(1184, struct.pack("<q", 0)) == dt.datetime(2000, 1, 1, tzinfo=dt.UTC)
    assert t(1083, struct.pack("<q", 86_400_000_000)) == "24:00:00"
    assert py(1083, struct.pack("<q", 86_400_000_000)) == PgTime(86_400_000_000)
    assert t(1266, struct.pack("<qi", 0, 19800)) == "00:00:00-05:30"
    iv = struct.pack("<qii", -3_723_000_001, 3, -14)
    assert t(1186, iv) == "-1 years -2 mons +3 days -01:02:03.000001"
    assert py(1186, iv) == Interval(-14, 3, -3_723_000_001)
    assert t(1186, struct.pack("<qii", 0, 0, 0)) == "00:00:00"


def test_network_and_bits() -> None:
    """inet/cidr text rules and bit strings."""
    v6 = bytes([3, 128]) + bytes(10) + b"\xff\xff" + bytes([1, 2, 3, 4])
    assert t(869, v6) == "::ffff:1.2.3.4"
    assert t(650, bytes([2, 8, 10, 0, 0, 0])) == "10.0.0.0/8"
    assert t(869, bytes([2, 32, 1, 2, 3, 4])) == "1.2.3.4"
    assert str(py(869, bytes([2, 24, 1, 2, 3, 4]))) == "1.2.3.4/24"
    assert t(1562, struct.pack("<i", 3) + b"\xa0") == "101"
    assert t(829, bytes(range(6))) == "00:01:02:03:04:05"


def _array(
    elemtype: int, dims: list[int], lbounds: list[int], items: list[bytes | None], align: int = 4
) -> bytes:
    ndim = len(dims)
    nulls = any(i is None for i in items)
    head = 16 + 8 * ndim
    bitmap = b""
    if nulls:
        bits = sum(1 << i for i, v in enumerate(items) if v is not None)
        bitmap = bits.to_bytes((len(items) + 7) // 8, "little")
    dataoffset = (head + len(bitmap) + 7) & ~7
    body = b""
    for v in items:
        if v is not None:
            body += b"\x00" * ((-(dataoffset + len(body))) % align) + v
    hdr = struct.pack(
        f"<iiI{2 * ndim}i", ndim, dataoffset if nulls else 0, elemtype, *dims, *lbounds
    )
    payload = (hdr + bitmap).ljust(dataoffset - 4, b"\x00") + body
    return payload


def _text4(s: str) -> bytes:
    data = s.encode()
    return struct.pack("<I", (len(data) + 4) << 2) + data


def test_array_text_quoting_and_bounds() -> None:
    """Quoting rules of array_out, NULLs, and the dimension prefix for lower bounds != 1."""
    items = [_text4(s) for s in ("a b", "", "NULL", 'x"y', "ok")] + [None]
    assert t(1009, _array(25, [6], [1], items)) == '{"a b","",NULL,"x\\"y",ok,NULL}'.replace(
        ",NULL,", ',"NULL",', 1
    )
    ints = [struct.pack("<i", i) for i in (1, 2, 3, 4)]
    assert t(1007, _array(23, [2, 2], [0, 1], ints)) == "[0:1][1:2]={{1,2},{3,4}}"
    value = py(1007, _array(23, [2, 2], [0, 1], ints))
    assert isinstance(value, PgArray) and value == [[1, 2], [3, 4]]
    assert value.lower_bounds == (0, 1)
    assert t(1007, struct.pack("<iiI", 0, 0, 23)) == "{}"


def test_composite_enum_domain_range_dispatch() -> None:
    """Registry-driven types: enum label, domain base, composite fields, range bounds."""
    reg = TypeRegistry(
        [
            TypeInfo(
                90001,
                "mood",
                4,
                True,
                "i",
                "e",
                "enum_out",
                enum_labels=MappingProxyType({555: "happy"}),
            ),
            TypeInfo(90002, "posint", 4, True, "i", "d", "int4out", typbasetype=23),
        ]
    )
    assert to_text(struct.pack("<I", 555), reg.get(90001), reg) == "happy"
    with pytest.raises(UnknownTypeError):
        to_text(struct.pack("<I", 556), reg.get(90001), reg)
    assert to_python(struct.pack("<i", 7), reg.get(90002), reg) == 7
    rng = struct.pack("<Iii", 3904, 1, 10) + bytes([0x02])
    assert to_text(rng, reg.get(3904), reg) == "[1,10)"
    assert to_python(rng, reg.get(3904), reg) == Range(1, 10, True, False)
    assert to_text(struct.pack("<I", 3904) + bytes([0x01]), reg.get(3904), reg) == "empty"


def test_unknown_types_and_markers() -> None:
    """Unknown output functions raise naming the column, whatever the bytes look like
    (a varlena that happens to be valid UTF-8 is not taken for text)."""
    reg = TypeRegistry(
        [
            TypeInfo(90003, "weird", -1, False, "i", "b", "weird_out"),
            TypeInfo(90004, "fixed", 8, False, "d", "b", "fixed_out"),
        ]
    )
    with pytest.raises(UnknownTypeError) as info:
        to_text(b"abc", reg.get(90003), reg, column="w")
    assert info.value.field == "w"
    with pytest.raises(UnknownTypeError):
        to_python(b"abc", reg.get(90003), reg)
    with pytest.raises(UnknownTypeError):
        to_text(bytes(8), reg.get(90004), reg)
    assert undecodable_part(reg.get(90003), reg) is reg.get(90003)
    assert to_python(UNCHANGED_TOAST, REG.get(25), REG) is UNCHANGED_TOAST
    assert to_python(None, REG.get(25), REG) is None
    with pytest.raises(DecodeError):
        to_text(ToastPointer(10, 6, 1, 2), REG.get(25), REG)  # type: ignore[arg-type]
