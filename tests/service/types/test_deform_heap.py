"""deform_heap (the row decoder's fast deformer) against deform, on arbitrary tuples."""

from __future__ import annotations

import struct

from hypothesis import given, settings
from hypothesis import strategies as st

from service.decode.events import RawTuple
from service.errors import PgcdcError
from service.types.deform import Column, compile_layout, deform, deform_heap

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


def _outcome(fn: object, *args: object) -> object:
    try:
        return ("ok", fn(*args, relation="t"))  # type: ignore[operator]
    except PgcdcError as exc:
        return ("error", type(exc).__name__, exc.message, exc.field, exc.relation)


@settings(max_examples=400, deadline=None)
@given(st.data())
def test_deform_heap_equals_deform(data: st.DataObject) -> None:
    """Same datums, or the same error (type, message, field, relation), as deform."""
    cols = data.draw(columns())
    raw = data.draw(tuples(cols))
    layout = compile_layout(cols)
    assert layout is not None
    assert _outcome(deform_heap, raw, cols, layout) == _outcome(deform, raw, cols)


def test_compile_layout_refuses_what_deform_rejects() -> None:
    """An unknown typalign or an invalid typlen leaves the column to deform (None)."""
    assert compile_layout([Column(1, "a", 23, -1, 4, True, "x")]) is None
    assert compile_layout([Column(1, "a", 23, -1, 0, True, "i")]) is None
    assert compile_layout([Column(1, "a", 23, -1, -3, True, "i")]) is None
    assert compile_layout([Column(1, "a", 23, -1, 4, True, "i")]) == ((4, 3, False, None),)
