"""The native text writer (service._native.TextPlan) against the Python reference.

For random datums of every kind the writer prints (service.output.native_text.TEXT_KINDS),
a one-column tuple's native text must be exactly what the Python path prints for the
same datum: the type's output function (service.types.convert.to_text) then
print_literal. A datum the native side leaves to Python (NaN numerics, text that is not
UTF-8) must come back as a typed fallback, never as different text; a tuple that does not
fit its definition raises the deformer's typed error with the LSN and relation. The
line-for-line comparison with a real test_decoding slot, in both modes, is
tests/integration/test_native_text.py.
"""

from __future__ import annotations

import struct
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from service.decode.events import RawTuple
from service.errors import DecodeError, SchemaMismatchError
from service.output.native_text import TEXT_KINDS
from service.output.text import print_literal
from service.types.convert import to_text
from service.types.registry import TypeRegistry
from tests.service.types import stored_forms as forms

native = pytest.importorskip("service._native")

REGISTRY = TypeRegistry(version=18)
ALIGN = {
    1: 1,
    2: 2,
    4: 4,
    6: 4,
    8: 8,
    12: 8,
    16: 1,
    24: 8,
    32: 8,
    64: 1,
    -1: 4,
}  # attlen -> attalign
HEAD = " c[t]:"


def plan_of(oid: int) -> Any:
    kind, attlen = TEXT_KINDS[oid]
    spec = ("c", attlen, ALIGN[attlen], False, False, HEAD, kind)
    return native.TextPlan([spec], "public.t", SchemaMismatchError, DecodeError)


def tuple_of(attlen: int, datum: bytes) -> RawTuple:
    """A one-column heap tuple (t_hoff 24, no nulls) holding `datum`: the payload of a
    varlena gets a 1-byte header when it fits one, else a 4-byte one."""
    if attlen == -1:
        if len(datum) + 1 <= 0x7F:
            stored = bytes([((len(datum) + 1) << 1) | 1]) + datum
        else:
            stored = struct.pack("<I", (len(datum) + 4) << 2) + datum
    else:
        stored = datum
    return RawTuple(natts=1, infomask=0, infomask2=1, hoff=24, data=b"\x00" + stored)


def python_text(oid: int, datum: bytes) -> str:
    return HEAD + print_literal(oid, to_text(datum, REGISTRY.get(oid), REGISTRY))


def numeric_datum(negative: bool, weight: int, dscale: int, digits: list[int]) -> bytes:
    header = (0x4000 if negative else 0) | dscale
    return struct.pack(f"<Hh{len(digits)}h", header, weight, *digits)


def _fixed(fmt: str) -> st.SearchStrategy[bytes]:
    size = struct.calcsize(fmt)
    return st.binary(min_size=size, max_size=size)


_U64 = st.integers(0, 2**64 - 1)
_DATUMS: dict[int, st.SearchStrategy[bytes]] = {
    16: st.sampled_from([b"\x00", b"\x01"]),
    17: st.binary(max_size=300),
    19: st.text(max_size=20).map(lambda s: s.encode()[:63].ljust(64, b"\x00")),
    20: _fixed("<q"),
    21: _fixed("<h"),
    23: _fixed("<i"),
    25: st.text(max_size=200).map(str.encode),
    26: _fixed("<I"),
    700: st.one_of(_fixed("<f"), st.floats(width=32).map(lambda f: struct.pack("<f", f))),
    701: st.one_of(_fixed("<d"), st.floats().map(lambda f: struct.pack("<d", f))),
    114: st.text(alphabet="{}[]'\":,ab1 ", max_size=60).map(str.encode),
    1042: st.text(max_size=10).map(str.encode),
    1043: st.text(max_size=10).map(str.encode),
    1082: st.one_of(
        st.integers(-(2**31), 2**31 - 1).map(lambda d: struct.pack("<i", d)),
        st.integers(-3_000_000, 3_000_000).map(lambda d: struct.pack("<i", d)),
    ),
    1083: st.integers(0, 86_400_000_000).map(lambda t: struct.pack("<q", t)),
    1114: st.one_of(
        _fixed("<q"),
        st.integers(-(10**17), 10**17).map(lambda t: struct.pack("<q", t)),
    ),
    1184: st.integers(-(10**17), 10**17).map(lambda t: struct.pack("<q", t)),
    1700: st.builds(
        numeric_datum,
        st.booleans(),
        st.integers(-6, 6),
        st.integers(0, 30),
        st.lists(st.integers(0, 9999), max_size=8),
    ),
    2950: _fixed("16s"),
    18: forms.CHAR,
    142: forms.XML,
    650: forms.INET,  # cidr prints the same payload with its mask always
    869: forms.INET,
    774: forms.MACADDR8,
    829: forms.MACADDR,
    790: forms.MONEY,
    1186: forms.INTERVAL,
    1266: forms.TIMETZ,
    1560: forms.VARBIT,
    1562: forms.VARBIT,
    3802: forms.JSONB,
    600: forms.POINT,
    601: forms.LSEG,
    602: forms.PATH,
    603: forms.BOX,
    604: forms.POLYGON,
    628: forms.LINE,
    718: forms.CIRCLE,
    3904: forms.ranges_of(3904),
    3926: forms.ranges_of(3926),
    3912: forms.ranges_of(3912),
    3908: forms.ranges_of(3908),
    3910: forms.ranges_of(3910),
    27: _fixed("<HHH"),  # tid: bi_hi, bi_lo, offset
    28: _fixed("<I"),
    29: _fixed("<I"),
    3220: _fixed("<Q"),
    5069: _fixed("<Q"),
    2970: st.builds(
        lambda xmin, xmax, xips: struct.pack(f"<iQQ{len(xips)}Q", len(xips), xmin, xmax, *xips),
        _U64,
        _U64,
        st.lists(_U64, max_size=5),
    ),
    5038: st.lists(_U64, min_size=2, max_size=7).map(
        lambda v: struct.pack(f"<i{len(v)}Q", len(v) - 2, *v)
    ),
    22: st.lists(st.integers(-(2**15), 2**15 - 1), max_size=8).map(
        lambda v: forms.array_datum(21, 2, 2, [struct.pack("<h", x) for x in v], [len(v)], [0])
    ),
    30: st.lists(st.integers(0, 2**32 - 1), max_size=8).map(
        lambda v: forms.array_datum(26, 4, 4, [struct.pack("<I", x) for x in v], [len(v)], [0])
    ),
    4072: st.builds(
        lambda rng, lax: forms.jsonpath_datum(forms.random_jsonpath(rng, 4), lax),
        st.randoms(use_true_random=False),
        st.booleans(),
    ),
}
# Kinds whose stored forms only the server makes here (their own Rust tests hold golden
# server datums; tests/integration/test_native_text.py compares them on real WAL).
_SERVER_ONLY = frozenset({3614, 3615, 3906, 4451, 4532, 4533, 4534, 4535, 4536})
# What the native writer leaves to Python by design, per kind (the test below requires
# every other datum to print natively).
_PYTHONS = {142: "xml declaration Python decides"}


@pytest.mark.parametrize(
    "oid", sorted(set(TEXT_KINDS) - _SERVER_ONLY), ids=lambda o: TEXT_KINDS[o][0] + str(o)
)
@settings(max_examples=150, deadline=None)
@given(data=st.data())
def test_native_text_is_the_python_text(oid: int, data: st.DataObject) -> None:
    datum = data.draw(_DATUMS[oid])
    plan = plan_of(oid)
    raw = tuple_of(TEXT_KINDS[oid][1], datum)
    lines, reason = plan.lines([raw], [16], 0, "", False)
    if reason is not None and reason == _PYTHONS.get(oid):
        return
    assert reason is None, (datum, reason)
    assert lines == [python_text(oid, datum)], datum


def test_float_bounds_and_ties_print_natively() -> None:
    """A double whose shortest round-trip decimal is exactly a rounding bound (1e23 lies
    halfway between two doubles) prints float8out's longer text, a tie (2^47 + 1/8) the
    even one, natively; and every finite half widened to float4 (1024 of the positive
    ones are ties of the shortest digits) and float4's extremes print as the Python
    reference prints them."""
    cases = [
        (701, struct.pack("<d", 99_999_999_999_999_991_611_392.0)),
        (701, struct.pack("<d", 2.0**47 + 0.125)),
        (701, struct.pack("<d", -(2.0**47) - 0.125)),
        (700, struct.pack("<I", 1)),
        (700, struct.pack("<I", 0x7F7FFFFF)),
    ]
    halves = [struct.unpack("<e", struct.pack("<H", bits))[0] for bits in range(0x7C00)]
    cases += [(700, struct.pack("<f", sign * h)) for h in halves for sign in (1.0, -1.0)]
    for oid, datum in cases:
        raw = tuple_of(TEXT_KINDS[oid][1], datum)
        assert plan_of(oid).lines([raw], [1], 0, "", False) == ([python_text(oid, datum)], None)
    assert python_text(701, cases[0][1]) == HEAD + "9.999999999999999e+22"
    assert python_text(701, cases[1][1]) == HEAD + "140737488355328.12"


def test_special_numerics_and_bad_text_fall_back() -> None:
    """What the Python path decides comes back as a fallback, not as text."""
    for special in (0xC000, 0xD000, 0xF000):  # NaN, +Infinity, -Infinity
        raw = tuple_of(-1, struct.pack("<H", special))
        assert plan_of(1700).lines([raw], [1], 0, "", False) == ([], "numeric Python decides")
    raw = tuple_of(-1, b"\xff\xfe")
    assert plan_of(25).lines([raw], [1], 0, "", False) == ([], "text is not UTF-8")


def test_lines_start_and_stop_at_a_fallback() -> None:
    """`start` skips the rows already written; the run stops before a fallback row."""
    plan = plan_of(25)
    raws = [tuple_of(-1, b"a"), tuple_of(-1, b"\xff"), tuple_of(-1, b"c'd")]
    assert plan.lines(raws, [1, 2, 3], 0, "p:", False) == (["p: c[t]:'a'"], "text is not UTF-8")
    assert plan.lines(raws, [1, 2, 3], 2, "p:", False) == (["p: c[t]:'c''d'"], None)


def test_a_bad_tuple_raises_the_deformers_error() -> None:
    plan = plan_of(23)
    short = RawTuple(natts=1, infomask=0, infomask2=1, hoff=24, data=b"\x00\x01\x02")
    with pytest.raises(SchemaMismatchError) as info:
        plan.lines([short], [0x1234], 0, "", False)
    assert info.value.lsn == 0x1234 and "public.t" in str(info.value)
    wide = RawTuple(natts=2, infomask=0, infomask2=2, hoff=24, data=b"\x00" + bytes(8))
    with pytest.raises(SchemaMismatchError, match="2 attributes"):
        plan.lines([wide], [1], 0, "", False)
    # a short varlena header promising 63 bytes, with none after it
    bad = RawTuple(natts=1, infomask=0, infomask2=1, hoff=24, data=b"\x00\x7f")
    with pytest.raises(DecodeError):
        plan_of(25).lines([bad], [1], 0, "", False)


_DAMAGEABLE = {
    3802: forms.JSONB,
    869: forms.INET,
    1562: forms.VARBIT,
    1186: forms.INTERVAL,
    4072: _DATUMS[4072],
}


@pytest.mark.parametrize("oid", sorted(_DAMAGEABLE))
@settings(max_examples=300, deadline=None)
@given(data=st.data())
def test_damaged_forms_fall_back_or_print_the_same(oid: int, data: st.DataObject) -> None:
    """A stored form cut short, extended or with a byte changed: where the Python reference
    raises its typed error the native writer must fall back (so Python raises it), and
    where Python prints text the native writer prints the same or falls back."""
    datum = bytearray(data.draw(_DAMAGEABLE[oid]))
    how = data.draw(st.sampled_from(["cut", "extend", "flip"]))
    if how == "cut" and datum:
        del datum[data.draw(st.integers(0, len(datum) - 1)) :]
    elif how == "extend":
        datum += data.draw(st.binary(min_size=1, max_size=8))
    elif datum:
        datum[data.draw(st.integers(0, len(datum) - 1))] ^= data.draw(st.integers(1, 255))
    attlen = TEXT_KINDS[oid][1]
    if attlen > 0 and len(datum) != attlen:
        return  # a fixed-length column's size is the deformer's, tested above
    lines, reason = plan_of(oid).lines([tuple_of(attlen, bytes(datum))], [1], 0, "", False)
    try:
        expected = python_text(oid, bytes(datum))
    except DecodeError:
        assert lines == [] and reason is not None, (datum, lines)
        return
    assert lines in ([expected], []), datum
    assert (reason is None) == (lines == [expected]), (datum, reason)


def test_enum_labels_print_quoted_and_unknown_oids_fall_back() -> None:
    """An enum prints the label of its stored pg_enum OID, quoted; an OID the plan has no
    label for is left to Python (whose registry may know it, or which raises)."""
    spec = ("c", 4, 4, False, False, HEAD, "enum")
    labels = {0: {16_500: "it's", 16_501: "ok"}}
    plan = native.TextPlan([spec], "public.t", SchemaMismatchError, DecodeError, labels)
    rows = [tuple_of(4, struct.pack("<I", oid)) for oid in (16_501, 16_500, 99)]
    assert plan.lines(rows, [1, 2, 3], 0, "p:", False) == (
        ["p: c[t]:'ok'", "p: c[t]:'it''s'"],
        "enum label Python decides",
    )


# Array types whose elements the native writer prints: array OID -> element OID.
_ARRAYS = {
    1000: 16,
    1002: 18,
    1003: 19,
    1005: 21,
    1007: 23,
    1009: 25,
    1016: 20,
    1022: 701,
    1231: 1700,
    1182: 1082,
    1185: 1184,
    1187: 1186,
    1270: 1266,
    1041: 869,
    1040: 829,
    1563: 1562,
    2951: 2950,
    3807: 3802,
    1001: 17,
    143: 142,
    791: 790,
}


@pytest.mark.parametrize("array_oid", sorted(_ARRAYS))
@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_native_array_text_is_the_python_text(array_oid: int, data: st.DataObject) -> None:
    """An array of random elements (NULLs, 2-D shapes, lower bounds other than 1) prints
    as the Python path prints it: array_out of each element's output text, quoted."""
    elem = _ARRAYS[array_oid]
    info = REGISTRY.get(elem)
    kind, attlen = TEXT_KINDS[elem]
    align = {"c": 1, "s": 2, "i": 4, "d": 8}[info.typalign]
    items = data.draw(st.lists(st.one_of(st.none(), _DATUMS[elem]), max_size=12))
    dims, lbounds = [len(items)], [data.draw(st.sampled_from([1, 1, 0, -3]))]
    if len(items) % 2 == 0 and items and data.draw(st.booleans()):
        dims, lbounds = [2, len(items) // 2], [1, 1]
    datum = forms.array_datum(elem, info.typlen, align, items, dims, lbounds)
    spec = ("c", -1, 4, False, False, HEAD, "array")
    plan = native.TextPlan(
        [spec], "public.t", SchemaMismatchError, DecodeError, None, {0: (kind, elem, attlen, align)}
    )
    lines, reason = plan.lines([tuple_of(-1, datum)], [1], 0, "", False)
    if reason is not None:
        assert reason == _PYTHONS.get(elem), (items, reason)
        return
    assert lines == [python_text(array_oid, datum)], items
