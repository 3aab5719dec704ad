"""Stored forms of built-in types, for tests that feed datums to both the Python
reference and the native core: hypothesis strategies and a jsonb builder.

Each strategy draws the bytes a heap tuple stores for the type (a varlena's payload for
the variable-length ones), edge values included. `jsonb_datum` lays a JSON value out as
convertToJsonb (jsonb_util.c) does: a top-level scalar as a one-element array flagged
scalar, object keys sorted by length then bytes, a JEntry's offset (instead of its length)
at every JB_OFFSET_STRIDE-th entry, numerics and nested containers padded to 4 bytes.
Numerics are written with a 4-byte varlena header (as numeric_in makes them) or, with
`short_numeric_headers`, a 1-byte one. The native-versus-Python tests use these; that
the layouts are the server's is shown on real WAL by tests/integration/test_native_text.py
and tests/connectors/avro/test_native_rows_pipeline.py.
"""

from __future__ import annotations

import random
import struct
from typing import Any

from hypothesis import strategies as st

JB_FSCALAR, JB_FOBJECT, JB_FARRAY = 0x10000000, 0x20000000, 0x40000000
JENTRY_HAS_OFF = 0x80000000
JSTRING, JNUMERIC, JFALSE, JTRUE, JNULL, JCONTAINER = (k << 28 for k in range(6))
JB_OFFSET_STRIDE = 32
INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1


def numeric_payload(n: int, dscale: int = 0) -> bytes:
    """The numeric of the integer `n` shown with `dscale` zero decimals, in the short
    format make_result picks when weight and dscale fit it (NUMERIC_SHORT: sign, dscale
    and weight in one uint16), else the long one."""
    digits: list[int] = []
    a = abs(n)
    while a:
        a, d = divmod(a, 10_000)
        digits.insert(0, d)
    weight = len(digits) - 1 if digits else 0
    if dscale <= 0x3F and -64 <= weight <= 63:
        header = 0x8000 | (0x2000 if n < 0 else 0) | (dscale << 7) | (weight & 0x7F)
        return struct.pack(f"<H{len(digits)}h", header, *digits)
    header = (0x4000 if n < 0 else 0) | dscale
    return struct.pack(f"<Hh{len(digits)}h", header, weight, *digits)


def _pad4(buf: bytearray) -> int:
    pad = (-len(buf)) % 4
    buf += bytes(pad)
    return pad


class _Builder:
    def __init__(self, short_numeric_headers: bool) -> None:
        self.short = short_numeric_headers

    def scalar(self, value: Any, data: bytearray) -> int:
        """Appends one child's data; returns its JEntry type."""
        if value is None:
            return JNULL
        if value is True:
            return JTRUE
        if value is False:
            return JFALSE
        if isinstance(value, str):
            data += value.encode()
            return JSTRING
        if isinstance(value, int):
            _pad4(data)
            payload = numeric_payload(value)
            if self.short and len(payload) + 1 < 0x7F:
                data += bytes([((len(payload) + 1) << 1) | 1]) + payload
            else:
                data += struct.pack("<I", (len(payload) + 4) << 2) + payload
            return JNUMERIC
        _pad4(data)
        data += self.container(value, scalar=False)
        return JCONTAINER

    def container(self, value: Any, scalar: bool) -> bytes:
        if isinstance(value, dict):
            keys = sorted(value, key=lambda k: (len(k.encode()), k.encode()))
            children: list[Any] = [*keys, *(value[k] for k in keys)]
            header = JB_FOBJECT | len(keys)
        else:
            children = list(value)
            header = JB_FARRAY | len(children) | (JB_FSCALAR if scalar else 0)
        # Entries first, then each child's data; a numeric or container is padded to 4
        # bytes from the container's start, which is itself 4-aligned in its parent (as
        # padBufferToInt pads the one shared buffer).
        buf = bytearray(struct.pack("<I", header)) + bytes(4 * len(children))
        base = len(buf)
        entries: list[int] = []
        for i, child in enumerate(children):
            start = len(buf)
            kind = self.scalar(child, buf)
            if i % JB_OFFSET_STRIDE == 0:
                entries.append(kind | JENTRY_HAS_OFF | (len(buf) - base))
            else:
                entries.append(kind | (len(buf) - start))
        struct.pack_into(f"<{len(entries)}I", buf, 4, *entries)
        return bytes(buf)


def jsonb_datum(value: Any, *, short_numeric_headers: bool = False) -> bytes:
    """The jsonb payload of a JSON value (dict, list, str, int, bool, None)."""
    builder = _Builder(short_numeric_headers)
    if isinstance(value, dict | list):
        return builder.container(value, scalar=False)
    return builder.container([value], scalar=True)


_KEYS = st.text(alphabet='ab"\\\n\té✓\x01', max_size=6)
_LEAVES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(10**20), 10**20),
    st.text(alphabet='ab"\\\n\t\x08\x0c\x1fé😀 ', max_size=12),
)
JSON_VALUES = st.recursive(
    _LEAVES,
    lambda inner: st.one_of(
        st.lists(inner, max_size=40), st.dictionaries(_KEYS, inner, max_size=40)
    ),
    max_leaves=60,
)
JSONB = st.builds(jsonb_datum, JSON_VALUES, short_numeric_headers=st.booleans())


def random_json(rng: random.Random, depth: int) -> Any:
    """A random JSON value (for jsonb_datum) from `rng`, nested at most `depth` deep."""
    pick = rng.randrange(7 if depth else 4)
    if pick == 0:
        return rng.choice([None, True, False])
    if pick == 1:
        return rng.randrange(-(10**20), 10**20)
    if pick in (2, 3):
        return rng.choice(["", 'q"b\\', "é😀", "\n\t\x01", "x" * rng.randrange(40)])
    if pick in (4, 5):
        keys = [rng.choice("abcdefg") * rng.randrange(1, 4) for _ in range(rng.randrange(5))]
        return {k: random_json(rng, depth - 1) for k in keys}
    return [random_json(rng, depth - 1) for _ in range(rng.randrange(40))]


def _interval(micros: int, days: int, months: int) -> bytes:
    return struct.pack("<qii", micros, days, months)


INTERVAL = st.one_of(
    st.builds(
        _interval,
        st.integers(-(10**13), 10**13),
        st.integers(-400, 400),
        st.integers(-30, 30),
    ),
    st.builds(
        _interval,
        st.integers(INT64_MIN, INT64_MAX),
        st.integers(INT32_MIN, INT32_MAX),
        st.integers(INT32_MIN, INT32_MAX),
    ),
    st.sampled_from(
        [_interval(INT64_MAX, INT32_MAX, INT32_MAX), _interval(INT64_MIN, INT32_MIN, INT32_MIN)]
    ),
)
TIMETZ = st.builds(
    lambda t, z: struct.pack("<qi", t, z),
    st.integers(0, 86_400_000_000),
    st.one_of(st.integers(-57_599, 57_599), st.sampled_from([0, -3600, 19_800, -50_403])),
)
MONEY = st.integers(INT64_MIN, INT64_MAX).map(lambda c: struct.pack("<q", c))
CHAR = st.binary(min_size=1, max_size=1)
MACADDR = st.binary(min_size=6, max_size=6)
MACADDR8 = st.binary(min_size=8, max_size=8)


def _inet(v6: bool, bits: int, addr: bytes) -> bytes:
    return bytes([3 if v6 else 2, bits]) + addr


_V6_WORDS = st.lists(
    st.sampled_from([0, 0, 0, 1, 0xFFFF, 0x0DB8, 0x2001, 0xABCD]), min_size=8, max_size=8
).map(lambda ws: struct.pack(">8H", *ws))
INET = st.one_of(
    st.builds(_inet, st.just(False), st.integers(0, 32), st.binary(min_size=4, max_size=4)),
    st.builds(_inet, st.just(True), st.integers(0, 128), _V6_WORDS),
    st.builds(_inet, st.just(True), st.integers(0, 128), st.binary(min_size=16, max_size=16)),
)


def _bits(nbits: int, body: bytes) -> bytes:
    return struct.pack("<i", nbits) + body[: (nbits + 7) // 8].ljust((nbits + 7) // 8, b"\0")


def bits_of(nbits: int) -> st.SearchStrategy[bytes]:
    """A bit string of exactly `nbits` bits (bit(n)); padding bits may be set."""
    return st.binary(min_size=(nbits + 7) // 8, max_size=(nbits + 7) // 8).map(
        lambda b: _bits(nbits, b)
    )


VARBIT = st.integers(0, 70).flatmap(bits_of)
XML = st.one_of(
    st.text(alphabet="<>/ab\n é&;'", max_size=30).map(str.encode),
    st.sampled_from([b"\n<a/>", b"\n\n<b>x</b>", b'<?xml version="1.0"?><a/>', b""]),
)


def array_datum(
    elem_oid: int,
    typlen: int,
    typalign: int,
    items: list[bytes | None],
    dims: list[int] | None = None,
    lbounds: list[int] | None = None,
) -> bytes:
    """An array's payload as construct_md_array lays it out: the header, the null bitmap
    when any item is NULL, then the items row-major, each aligned to `typalign` from the
    4-byte varlena header (a varlena item as its payload behind a 4-byte header)."""
    dims = [len(items)] if dims is None else dims
    lbounds = [1] * len(dims) if lbounds is None else lbounds
    if not items:
        dims, lbounds = [], []
    ndim = len(dims)
    nulls = any(item is None for item in items)
    head = 4 + 12 + 8 * ndim
    bitmap = (len(items) + 7) // 8 if nulls else 0
    data_at = (head + bitmap + 7) & ~7
    out = bytearray(struct.pack("<iiI", ndim, data_at if nulls else 0, elem_oid))
    out += struct.pack(f"<{2 * ndim}i", *dims, *lbounds)
    if nulls:
        bits = bytearray(bitmap)
        for i, item in enumerate(items):
            if item is not None:
                bits[i >> 3] |= 1 << (i & 7)
        out += bits
    out += bytes(data_at - 4 - len(out))
    for item in items:
        if item is None:
            continue
        out += bytes((-(len(out) + 4)) % typalign)
        out += struct.pack("<I", (len(item) + 4) << 2) + item if typlen == -1 else item
    return bytes(out)


_FLOATS = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([0.0, -0.0, 1.5, -2.25, 1e-300, 1e300, 0.1]),
)


def _points(n: int) -> st.SearchStrategy[bytes]:
    return st.lists(_FLOATS, min_size=2 * n, max_size=2 * n).map(
        lambda fs: struct.pack(f"<{len(fs)}d", *fs)
    )


POINT, LSEG, BOX = _points(1), _points(2), _points(2)
LINE = CIRCLE = st.lists(_FLOATS, min_size=3, max_size=3).map(lambda fs: struct.pack("<3d", *fs))
PATH = st.integers(0, 6).flatmap(
    lambda n: st.builds(
        lambda closed, pts: struct.pack("<iii", n, closed, 0) + pts,
        st.sampled_from([0, 1]),
        _points(n),
    )
)
POLYGON = st.integers(0, 6).flatmap(
    lambda n: st.builds(lambda box, pts: struct.pack("<i", n) + box + pts, _points(2), _points(n))
)

# Built-in ranges over fixed-length subtypes: OID -> (struct format, typalign, values).
_RANGE_SUBS: dict[int, tuple[str, int, st.SearchStrategy[int]]] = {
    3904: ("<i", 4, st.integers(INT32_MIN, INT32_MAX)),  # int4range
    3926: ("<q", 8, st.integers(INT64_MIN, INT64_MAX)),  # int8range
    3912: ("<i", 4, st.integers(-3_000_000, 3_000_000)),  # daterange
    3908: ("<q", 8, st.integers(-(10**17), 10**17)),  # tsrange
    3910: ("<q", 8, st.integers(-(10**17), 10**17)),  # tstzrange
}


def range_datum(oid: int, lower: int | None, upper: int | None, flags: int) -> bytes:
    """A range payload (range_serialize): rangetypid, the present bounds aligned to the
    subtype's typalign from the 4-byte varlena header, the flags byte. `None` for a
    bound is an infinite one; flags 0x01 (empty) drops both."""
    fmt, align, _ = _RANGE_SUBS[oid]
    if flags & 0x01:
        lower = upper = None
    flags |= (0x08 if lower is None else 0) | (0x10 if upper is None else 0)
    if flags & 0x01:
        flags &= ~0x18
    out = bytearray(struct.pack("<I", oid))
    for bound in (lower, upper):
        if bound is not None:
            out += bytes((-(len(out) + 4)) % align)
            out += struct.pack(fmt, bound)
    return bytes(out + bytes([flags]))


def ranges_of(oid: int) -> st.SearchStrategy[bytes]:
    values = _RANGE_SUBS[oid][2]
    return st.builds(
        range_datum,
        st.just(oid),
        st.one_of(st.none(), values),
        st.one_of(st.none(), values),
        st.sampled_from([0, 0x02, 0x04, 0x06, 0x01]),
    )


# jsonpath (jsonpath.h): JsonPathItemType numbers by shape, as the Python reference
# service.types.jsonpath names them (15/16's 0..42, 17's 43..53).
_JP_BINARY = (4, 5, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 41)
_JP_UNARY = (6, 7, 19, 20, 29, 30)  # NOT, IS_UNKNOWN, PLUS, MINUS, FILTER, EXISTS
_JP_METHODS = (31, 32, 33, 34, 35, 36, 38, 43, 44, 45, 47, 48, 49)
_JP_ONE_ARG = (37, 50, 51, 52, 53)  # .datetime(fmt), .time(p) .. .timestamp_tz(p)
_JP_DECIMAL, _JP_INDEX, _JP_ANY, _JP_LIKE = 46, 23, 24, 42
_JP_STRINGS = (1, 25, 28)  # STRING, KEY, VARIABLE
_JP_BARE = (0, 21, 22, 26, 27, 40)  # NULL, ANY_ARRAY, ANY_KEY, CURRENT, ROOT, LAST
_JP_TEXTS = ["a", "", 'k "q"', "é\n\t\x01\\", "HH24:MI"]
# A jsonpath item: (type, payload, next item or None); the payload by type: the
# string's text, the numeric's (n, dscale), the bool, argument items (None: absent),
# subscripts [(from, to or None)], (first, last) levels, or like_regex's (flags, expr,
# pattern).
JsonPathItem = tuple[int, Any, "JsonPathItem | None"]


def random_jsonpath(rng: random.Random, depth: int) -> JsonPathItem:
    """A random jsonpath item tree (an expression, then a chain of accessors), `depth`
    levels of arguments at most: any item kind, not only those the parser combines."""

    def leaf() -> JsonPathItem:
        kind = rng.choice((2, 3, *_JP_STRINGS, *_JP_BARE))
        if kind == 2:
            return 2, (rng.randint(-(10**9), 10**9), rng.choice([0, 0, 2, 5])), None
        if kind == 3:
            return 3, rng.random() < 0.5, None
        if kind in _JP_STRINGS:
            return kind, rng.choice(_JP_TEXTS), None
        return kind, None, None

    def chain(head: JsonPathItem, d: int) -> JsonPathItem:
        links = rng.randint(0, 3)
        if links == 0:
            return head
        node: JsonPathItem | None = None
        for _ in range(links):
            node = (*accessor(d)[:2], node)
        return head[0], head[1], node

    def accessor(d: int) -> JsonPathItem:
        kind = rng.choice(
            (25, 21, 22, _JP_INDEX, _JP_ANY, 29, *_JP_METHODS, *_JP_ONE_ARG, _JP_DECIMAL)
        )
        if kind == 25:
            return 25, rng.choice(_JP_TEXTS), None
        if kind == _JP_INDEX:
            subs = [
                (expr(d - 1), expr(d - 1) if rng.random() < 0.4 else None)
                for _ in range(rng.randint(1, 3))
            ]
            return kind, subs, None
        if kind == _JP_ANY:
            level = rng.choice([0, 1, 2, 0xFFFFFFFF])
            return kind, (level, rng.choice([level, 3, 0xFFFFFFFF])), None
        if kind == 29:
            return kind, [expr(d - 1)], None
        if kind in _JP_ONE_ARG:
            arg = (1, "HH24", None) if kind == 37 else (2, (rng.randint(0, 6), 0), None)
            return kind, [arg if rng.random() < 0.6 else None], None
        if kind == _JP_DECIMAL:
            p, s = (2, (rng.randint(1, 20), 0), None), (2, (rng.randint(0, 5), 0), None)
            return kind, rng.choice([[None, None], [p, None], [p, s]]), None
        return kind, None, None

    def expr(d: int) -> JsonPathItem:
        if d <= 0 or rng.random() < 0.3:
            return chain(leaf(), 0)
        r = rng.random()
        if r < 0.45:
            node: JsonPathItem = rng.choice(_JP_BINARY), [expr(d - 1), expr(d - 1)], None
        elif r < 0.7:
            node = rng.choice(_JP_UNARY), [expr(d - 1)], None
        elif r < 0.8:
            flags, pattern = rng.randint(0, 0x1F), rng.choice(_JP_TEXTS)
            node = _JP_LIKE, (flags, expr(d - 1), pattern), None
        else:
            node = leaf()
        return chain(node, d - 1)

    return expr(depth)


def _jsonpath_flatten(buf: bytearray, item: JsonPathItem) -> int:
    """Appends `item` as flattenJsonPathParseItem lays it out (its type byte, padding to
    4, the next offset, the payload, then its arguments, then its next item; offsets
    relative to the item); returns its position."""
    kind, payload, nxt = item
    pos = len(buf)
    buf.append(kind)
    _pad4(buf)
    next_at = len(buf)
    buf += bytes(4)

    def args_at(at: int, args: list[JsonPathItem | None]) -> None:
        for i, arg in enumerate(args):
            if arg is not None:
                struct.pack_into("<i", buf, at + 4 * i, _jsonpath_flatten(buf, arg) - pos)

    if kind in _JP_STRINGS:
        text = payload.encode()
        buf += struct.pack("<i", len(text)) + text + b"\0"
    elif kind == 2:
        num = numeric_payload(*payload)
        buf += struct.pack("<I", (len(num) + 4) << 2) + num
    elif kind == 3:
        buf.append(int(payload))
    elif kind in (*_JP_BINARY, _JP_DECIMAL, *_JP_UNARY, *_JP_ONE_ARG):
        at = len(buf)
        buf += bytes(4 * len(payload))
        args_at(at, payload)
    elif kind == _JP_INDEX:
        buf += struct.pack("<i", len(payload))
        at = len(buf)
        buf += bytes(8 * len(payload))
        args_at(at, [x for pair in payload for x in pair])
    elif kind == _JP_ANY:
        buf += struct.pack("<II", *payload)
    elif kind == _JP_LIKE:
        flags, expr, pattern = payload
        text = pattern.encode()
        at = len(buf)
        buf += struct.pack("<IiI", flags, 0, len(text)) + text + b"\0"
        args_at(at + 4, [expr])
    if nxt is not None:
        struct.pack_into("<i", buf, next_at, _jsonpath_flatten(buf, nxt) - pos)
    return pos


def jsonpath_datum(item: JsonPathItem, lax: bool = True) -> bytes:
    """A jsonpath's varlena payload: the header (version 1, the lax flag), the items."""
    items = bytearray()
    _jsonpath_flatten(items, item)
    return struct.pack("<I", 1 | (0x80000000 if lax else 0)) + bytes(items)
