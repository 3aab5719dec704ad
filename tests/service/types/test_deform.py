"""deform on arbitrary (also damaged) heap tuples: a datum per column, or a typed error."""

from __future__ import annotations

import struct

from hypothesis import given, settings
from hypothesis import strategies as st

from service.decode.events import RawTuple
from service.errors import PgcdcError, SchemaMismatchError
from service.types.deform import Column, deform
from service.types.varlena import ToastPointer

# (typlen, typalign) shapes a column can have, one of them with a bad typalign
SHAPES = [
    (1, "c"),
    (2, "s"),
    (4, "i"),
    (8, "d"),
    (-1, "i"),
    (-1, "d"),
    (-1, "c"),
    (-2, "c"),
    (6, "s"),
    (64, "c"),
]


@st.composite
def columns(draw: st.DrawFn) -> list[Column]:
    n = draw(st.integers(1, 8))
    out = []
    for i in range(n):
        typlen, typalign = draw(st.sampled_from(SHAPES))
        dropped = draw(st.booleans()) and draw(st.booleans())
        missing = draw(st.one_of(st.none(), st.binary(max_size=4)))
        out.append(
            Column(
                i + 1,
                f"c{i + 1}",
                0 if dropped else 23,
                -1,
                typlen,
                typlen > 0,
                typalign,
                dropped=dropped,
                missing=missing,
            )
        )
    return out


@st.composite
def tuples(draw: st.DrawFn, cols: list[Column]) -> RawTuple:
    natts = draw(st.integers(0, len(cols) + 1))
    nulls = draw(st.booleans())
    bitmap = draw(st.binary(min_size=(natts + 7) // 8, max_size=(natts + 7) // 8)) if nulls else b""
    hoff = (23 + len(bitmap) + 7) & ~7
    body = b""
    for col in cols[:natts]:
        kind = draw(st.integers(0, 4))
        if col.typlen > 0:
            body += b"\x00" * draw(st.integers(0, 7)) + draw(
                st.binary(min_size=col.typlen, max_size=col.typlen)
            )
        elif col.typlen == -2:
            body += draw(st.binary(max_size=5)).replace(b"\x00", b"a") + b"\x00"
        elif kind == 0:  # 4-byte header, aligned
            data = draw(st.binary(max_size=20))
            body += (
                b"\x00" * draw(st.integers(0, 3)) + struct.pack("<I", (len(data) + 4) << 2) + data
            )
        else:  # short header (or garbage when kind == 4)
            data = draw(st.binary(max_size=20))
            body += (
                bytes([((len(data) + 1) << 1) | 1]) + data
                if kind < 4
                else draw(st.binary(max_size=6))
            )
    body += draw(st.binary(max_size=3))
    cut = draw(st.integers(0, len(body)))
    if draw(st.booleans()):
        body = body[:cut]
    head = bitmap.ljust(hoff - 23, b"\x00")
    return RawTuple(natts, 1 if nulls else 0, natts, hoff, head + body)


@settings(max_examples=400, deadline=None)
@given(st.data())
def test_deform_gives_a_datum_per_column_or_a_typed_error(data: st.DataObject) -> None:
    """On any tuple, deform hands on one datum per column (None for dropped columns and
    for columns past natts without a missing value, the missing value otherwise,
    exactly typlen bytes for fixed-length ones), or raises a PgcdcError (a tuple that
    overruns its columns: SchemaMismatchError naming the relation; a damaged varlena
    header: DecodeError): never an IndexError or a wrong-length value."""
    cols = data.draw(columns())
    raw = data.draw(tuples(cols))
    try:
        datums = deform(raw, cols, relation="t")
    except SchemaMismatchError as exc:
        assert exc.relation == "t"
        return
    except PgcdcError:
        return
    assert len(datums) == len(cols)
    for i, (col, datum) in enumerate(zip(cols, datums, strict=True)):
        if col.dropped:
            assert datum is None
        elif i >= raw.natts:
            assert datum == col.missing
        elif datum is not None and col.typlen > 0:
            assert isinstance(datum, bytes) and len(datum) == col.typlen
        else:
            assert datum is None or isinstance(datum, bytes | ToastPointer)


def test_invalid_typlen_or_typalign_is_a_typed_error() -> None:
    """A column with an unknown typalign or an invalid typlen fails when it is reached,
    with a typed error (a tuple that ends before it still deforms)."""
    raw = RawTuple(1, 0, 1, 24, b"\x00" + b"\x01\x00\x00\x00")
    for bad in (Column(1, "a", 23, -1, 4, True, "x"), Column(1, "a", 23, -1, -3, True, "i")):
        try:
            deform(raw, [bad], relation="t")
        except PgcdcError as exc:
            assert exc.relation == "t" or "typalign" in exc.message
        else:
            raise AssertionError(f"{bad} was accepted")
    assert deform(RawTuple(0, 0, 0, 24, b"\x00"), [Column(1, "a", 23, -1, 0, True, "i")]) == [None]
