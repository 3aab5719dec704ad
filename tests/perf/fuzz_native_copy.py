"""Fuzz the native COPY BINARY parser and snapshot row encoder (service._native.CopyChunk,
RowPlan.encode_copy) with damaged COPY streams.

    python tests/perf/fuzz_native_copy.py [--count N] [--seed S] [--python-every K]

Seeds: whole `COPY ... TO STDOUT (FORMAT binary)` streams (signature, header, rows,
trailer) of a few rows over a plan with every kind the COPY encoder rewrites (tablesnap::copy:
the integers, floats, texts, name, bytea, uuid, dates and times, numeric in both
mappings, interval, timetz, money, "char", inet, macaddr(8), bit strings, jsonb, xml, an
enum, point, arrays of int4 and text; and tablesnap::sendform's: line, lseg, box,
circle, path, polygon, ranges and multiranges over int4, int8, numeric, date and
timestamptz, ranges and multiranges over an enum, tsvector, tsquery, pg_lsn, xid,
tid, pg_snapshot, int2vector, oidvector,
arrays of jsonb, box and int4range; ltree and cube as their text; and
tablesnap::record's composite, of int4, a dropped attribute, text, jsonb, int4range,
timestamptz, box, an enum, int4[], jsonb[] and a nested composite of int4 and text;
and tablesnap::extension's hstore in both modes, vector, halfvec,
sparsevec, geometry and geography), with random
send-format values and NULLs. Each
case damages one seed: flip a bit, set a byte, truncate, insert or delete bytes,
rewrite a field's length, or a row's field count; then splits it
(`connectors.postgres.copy_binary.native_chunk`) and encodes every row (`encode_copy`).

The only acceptable outcomes are a split and an encoding (or a fallback reason), or a
typed error: DecodeError (the split's, naming the table; the encoder's, carrying the
case's lsn and the table) or SchemaMismatchError. Anything else is a failure: another
exception, and a Rust panic (which the boundary turns into a ValueError / DecodeError
"internal error in the native ...", recognised by that message). Every K-th case is
also split by the Python parser (`CopyRows`): both must fail, or both give the same
fields. Undamaged seeds must split and encode (or fall back), never raise. The exit
status is 1 if there was any failure.
"""

from __future__ import annotations

import argparse
import json
import random
import struct
import sys
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from connectors.postgres.copy_binary import CopyRows, native_chunk  # noqa: E402
from service import _native  # noqa: E402
from service.errors import DecodeError, SchemaMismatchError  # noqa: E402

PANIC = "internal error in the native"
RELATION = "public.fuzzed"
LSN = 0x1_2345_6789
SIGNATURE = b"PGCOPY\n\xff\r\n\x00"
LABELS = {16_500: "sad", 16_501: "it's", 16_502: ""}


def _text(r: random.Random) -> bytes:
    return "".join(r.choice("aé😀 \n'\"x") for _ in range(r.randrange(8))).encode()


def _numeric(r: random.Random, dscale: int) -> bytes:
    digits = [r.randrange(10000) for _ in range(r.randrange(4))]
    sign = r.choice([0, 0x4000, 0xC000])
    return struct.pack(">hhHH", len(digits), r.randrange(-2, 3), sign, dscale) + b"".join(
        struct.pack(">h", d) for d in digits
    )


def _array(r: random.Random, oid: int, item: Callable[[], bytes]) -> bytes:
    """array_send of a 1-D array (lower bound 1, some NULLs) of `item()`s."""
    n = r.randrange(4)
    out = struct.pack(">iiIii", 1, 0, oid, n, 1) if n else struct.pack(">iiI", 0, 0, oid)
    for _ in range(n):
        value = None if r.random() < 0.2 else item()
        out += struct.pack(">i", -1) if value is None else struct.pack(">i", len(value)) + value
    return out


def _floats(r: random.Random, n: int) -> bytes:
    return struct.pack(f">{n}d", *(r.choice([r.uniform(-1e9, 1e9), 0.5, -0.0]) for _ in range(n)))


def _path(r: random.Random) -> bytes:
    """path_send: closed byte, npts, the points."""
    n = r.randrange(4)
    return bytes([r.randrange(2)]) + struct.pack(">i", n) + _floats(r, 2 * n)


def _polygon(r: random.Random) -> bytes:
    """poly_send: npts (at least 1), the points."""
    n = r.randrange(1, 4)
    return struct.pack(">i", n) + _floats(r, 2 * n)


def _range(r: random.Random, bound: Callable[[], bytes]) -> bytes:
    """range_send: flags, then the bounds that are there (each length-prefixed)."""
    flags = r.choice([0x01, 0x02, 0x06, 0x08, 0x10, 0x18, 0x0A, 0x14])
    out = bytes([flags])
    for absent in (0x01 | 0x08, 0x01 | 0x10):
        if not flags & absent:
            b = bound()
            out += struct.pack(">i", len(b)) + b
    return out


def _multirange(r: random.Random, bound: Callable[[], bytes]) -> bytes:
    """multirange_send: the range count, each range length-prefixed."""
    ranges = [_range(r, bound) for _ in range(r.randrange(6))]
    return struct.pack(">i", len(ranges)) + b"".join(struct.pack(">i", len(x)) + x for x in ranges)


def _tsvector(r: random.Random) -> bytes:
    """tsvectorsend: the count, per lexeme its text, NUL, npos and the positions."""
    words = sorted({_text(r).replace(b"\x00", b"") or b"w" for _ in range(r.randrange(4))})
    out = struct.pack(">i", len(words))
    for w in words:
        npos = r.randrange(3)
        out += w + b"\x00" + struct.pack(">H", npos)
        out += b"".join(
            struct.pack(">H", r.randrange(1, 1 << 14) | r.randrange(4) << 14) for _ in range(npos)
        )
    return out


def _record(r: random.Random) -> bytes:
    """record_send of a COMPOSITE value: the live field count, per field its type OID,
    its length (-1: NULL) and its send bytes."""
    inner = [(23, struct.pack(">i", r.randrange(99))), (25, _text(r))]
    fields = [
        (23, struct.pack(">i", r.randrange(99))),
        (25, _text(r)),
        (3802, _jsonb(r)),
        (3904, _range(r, lambda: struct.pack(">i", r.randrange(99)))),
        (1184, _i8(r)),
        (603, _floats(r, 4)),
        (16_499, r.choice([*LABELS.values(), "unknown"]).encode()),
        (1007, _array(r, 23, lambda: struct.pack(">i", r.randrange(99)))),
        (3807, _array(r, 3802, lambda: _jsonb(r))),
        (77_002, _fields(r, inner)),
    ]
    return _fields(r, fields)


def _label(r: random.Random) -> bytes:
    """enum_send: a label, mostly one of LABELS."""
    return r.choice([*LABELS.values(), "unknown"]).encode()


def _jsonb(r: random.Random) -> bytes:
    return b"\x01" + json.dumps({"k": _text(r).decode()}).encode()


def _fields(r: random.Random, fields: list[tuple[int, bytes]]) -> bytes:
    """record_send's layout of `fields` (type OID, send bytes), some of them NULL."""
    out = struct.pack(">i", len(fields))
    for oid, value in fields:
        if r.random() < 0.2:
            out += struct.pack(">Ii", oid, -1)
        else:
            out += struct.pack(">Ii", oid, len(value)) + value
    return out


# The composite column's type: (OID, fields: name, attlen, align, dropped, kind, an enum
# field's labels, an array field's element, a composite field's spec; glue::avro's
# FieldSpec).
COMPOSITE = (
    77_001,
    [
        (name, attlen, align, dropped, kind, None, None, None)
        for name, attlen, align, dropped, kind in [
            ("a", 4, 4, False, "int4"),
            ("gone", 4, 4, True, ""),
            ("b", -1, 4, False, "text"),
            ("j", -1, 4, False, "jsonb"),
            ("r", -1, 4, False, "int4range"),
            ("t", 8, 8, False, "timestamptz"),
            ("bx", 32, 8, False, "box"),
        ]
    ]
    + [
        ("e", 4, 4, False, "enum", LABELS, None, None),
        ("xs", -1, 4, False, "array", None, ("int4", 23, 4, 4), None),
        ("js", -1, 4, False, "array", None, ("jsonb", 3802, -1, 4), None),
        (
            "n",
            -1,
            8,
            False,
            "composite",
            None,
            None,
            (
                77_002,
                [
                    ("a", 4, 4, False, "int4", None, None, None),
                    ("b", -1, 4, False, "text", None, None, None),
                ],
            ),
        ),
    ],
)


def _hstore(r: random.Random) -> bytes:
    """hstore_send: the pair count, per pair the key and the value (-1: NULL)."""
    keys = sorted({_text(r) for _ in range(r.randrange(4))}, key=lambda k: (len(k), k))
    out = struct.pack(">i", len(keys))
    for k in keys:
        out += struct.pack(">i", len(k)) + k
        v = None if r.random() < 0.3 else _text(r)
        out += struct.pack(">i", -1) if v is None else struct.pack(">i", len(v)) + v
    return out


def _vector(r: random.Random, code: str) -> bytes:
    """vector_send / halfvec_send: int16 dim, int16 unused, the elements."""
    n = r.randrange(4)
    return struct.pack(f">hh{n}{code}", n, 0, *(r.uniform(-9, 9) for _ in range(n)))


def _sparsevec(r: random.Random) -> bytes:
    """sparsevec_send: dim, nnz, unused, the indices, the values."""
    idx = sorted(r.sample(range(50), r.randrange(4)))
    vals = [r.uniform(-9, 9) for _ in idx]
    return struct.pack(f">iii{len(idx)}i{len(idx)}f", 50, len(idx), 0, *idx, *vals)


def _ewkb(r: random.Random, depth: int = 0) -> bytes:
    """geometry_send's EWKB: a point, a linestring, a polygon or a collection of them,
    in either byte order, sometimes with Z and an SRID."""
    order = r.choice("<>")
    z = r.random() < 0.3
    srid = depth == 0 and r.random() < 0.5
    kind = r.choice([1, 2, 3, 7] if depth < 2 else [1, 2, 3])
    word = kind | (0x80000000 if z else 0) | (0x20000000 if srid else 0)
    out = (b"\x01" if order == "<" else b"\x00") + struct.pack(order + "I", word)
    if srid:
        out += struct.pack(order + "i", r.choice([4326, 3857, 0]))
    dims = 3 if z else 2

    def pts(n: int) -> bytes:
        return struct.pack(f"{order}{n * dims}d", *(r.uniform(-90, 90) for _ in range(n * dims)))

    if kind == 1:
        return out + pts(1)
    if kind == 2:
        n = r.randrange(4)
        return out + struct.pack(order + "I", n) + pts(n)
    if kind == 3:
        rings = r.randrange(3)
        out += struct.pack(order + "I", rings)
        for _ in range(rings):
            out += struct.pack(order + "I", 4) + pts(4)
        return out
    members = [_ewkb(r, depth + 1) for _ in range(r.randrange(3))]
    return out + struct.pack(order + "I", len(members)) + b"".join(members)


def _tsquery_items(r: random.Random, depth: int) -> bytes:
    """One tsquerysend subtree in prefix order: an operand, or an operator (NOT with one
    operand; AND, OR, PHRASE with the right subtree, then the left)."""
    if depth > 3 or r.random() < 0.4:
        return (
            bytes([1, r.randrange(16), r.randrange(2)]) + _text(r).replace(b"\x00", b"") + b"\x00"
        )
    oper = r.randrange(1, 5)
    out = bytes([2, oper]) + (struct.pack(">h", r.randrange(1, 5)) if oper == 4 else b"")
    out += _tsquery_items(r, depth + 1)
    return out if oper == 1 else out + _tsquery_items(r, depth + 1)


def _tsquery(r: random.Random) -> bytes:
    """tsquerysend: the item count, then the items (none: the empty query)."""
    if r.random() < 0.1:
        return struct.pack(">i", 0)
    items = _tsquery_items(r, 0)
    count, at = 0, 0
    while at < len(items):  # count the items: an operand ends at its NUL
        count += 1
        if items[at] == 1:
            at = items.index(b"\x00", at + 3) + 1
        else:
            at += 4 if items[at + 1] == 4 else 2
    return struct.pack(">i", count) + items


def _snapshot(r: random.Random) -> bytes:
    """pg_snapshot_send: int32 nxip, xmin, xmax, the xips (int64s)."""
    xips = sorted(r.randrange(1, 2**40) for _ in range(r.randrange(4)))
    return struct.pack(f">iqq{len(xips)}q", len(xips), 1, 2**40, *xips)


def _vector_of(r: random.Random, elemtype: int, fmt: str) -> bytes:
    """int2vectorsend / oidvectorsend: array_send of one dimension, no NULLs."""
    n = r.randrange(4)
    width = struct.calcsize(fmt)
    lo, hi = (-(2**15), 2**15) if fmt == ">h" else (0, 2**32)
    items = b"".join(
        struct.pack(">i", width) + struct.pack(fmt, r.randrange(lo, hi)) for _ in range(n)
    )
    return struct.pack(">iiiii", 1, 0, elemtype, n, 0) + items


def _i8(r: random.Random) -> bytes:
    return struct.pack(">q", r.randrange(-(2**40), 2**40))


# (name, attlen, align, kind, scale, precision, send-format value maker)
COLUMNS = [
    ("id", 8, 8, "int8", 0, 0, lambda r: struct.pack(">q", r.randrange(-(2**63), 2**63))),
    ("b", 1, 1, "bool", 0, 0, lambda r: bytes([r.randrange(2)])),
    ("s", 2, 2, "int2", 0, 0, lambda r: struct.pack(">h", r.randrange(-(2**15), 2**15))),
    ("t", -1, 4, "text", 0, 0, _text),
    ("i", 4, 4, "int4", 0, 0, lambda r: struct.pack(">i", r.randrange(-(2**31), 2**31))),
    ("o", 4, 4, "oid", 0, 0, lambda r: struct.pack(">I", r.randrange(2**32))),
    ("f4", 4, 4, "float4", 0, 0, lambda r: struct.pack(">f", r.uniform(-1e6, 1e6))),
    ("f8", 8, 8, "float8", 0, 0, lambda r: struct.pack(">d", r.uniform(-1e300, 1e300))),
    ("nm", 64, 1, "name", 0, 0, lambda r: _text(r)[:60]),
    ("by", -1, 4, "bytea", 0, 0, lambda r: r.randbytes(r.randrange(6))),
    ("u", 16, 1, "uuid", 0, 0, lambda r: r.randbytes(16)),
    ("d", 4, 4, "date", 0, 0, lambda r: struct.pack(">i", r.randrange(-(2**31), 2**31))),
    ("tm", 8, 8, "time", 0, 0, lambda r: struct.pack(">q", r.randrange(86_400_000_001))),
    ("ts", 8, 8, "timestamp", 0, 0, lambda r: struct.pack(">q", r.randrange(-(2**62), 2**62))),
    ("tz", 8, 8, "timestamptz", 0, 0, lambda r: struct.pack(">q", r.randrange(-(2**62), 2**62))),
    ("n", -1, 4, "decimal", 2, 12, lambda r: _numeric(r, 2)),
    ("nv", -1, 4, "variable_decimal", 0, 0, lambda r: _numeric(r, r.randrange(6))),
    (
        "iv",
        16,
        8,
        "interval",
        0,
        0,
        lambda r: struct.pack(">qii", r.randrange(-(2**40), 2**40), r.randrange(-99, 99), 3),
    ),
    ("tt", 12, 8, "timetz", 0, 0, lambda r: struct.pack(">qi", r.randrange(86_400_000_000), -3600)),
    ("mo", 8, 8, "money", 0, 0, lambda r: struct.pack(">q", r.randrange(-(2**40), 2**40))),
    ("ch", 1, 1, "char", 0, 0, lambda r: bytes([r.randrange(256)])),
    ("ip", -1, 4, "inet", 0, 0, lambda r: bytes([2, r.randrange(33), 0, 4]) + r.randbytes(4)),
    ("mc", 6, 4, "macaddr", 0, 0, lambda r: r.randbytes(6)),
    ("m8", 8, 4, "macaddr8", 0, 0, lambda r: r.randbytes(8)),
    ("vb", -1, 4, "bits", 0, 0, lambda r: struct.pack(">i", 12) + r.randbytes(2)),
    ("jb", -1, 4, "jsonb", 0, 0, lambda r: b"\x01" + json.dumps({"a": r.random()}).encode()),
    ("x", -1, 4, "xml", 0, 0, lambda r: b"<a>" + _text(r) + b"</a>"),
    ("en", 4, 4, "enum", 0, 0, lambda r: r.choice(list(LABELS.values())).encode()),
    ("pt", 16, 8, "point_record", 0, 0, lambda r: struct.pack(">dd", r.random(), -r.random())),
    (
        "ai",
        -1,
        4,
        "array",
        0,
        0,
        lambda r: _array(r, 23, lambda: struct.pack(">i", r.randrange(99))),
    ),
    ("at", -1, 4, "array", 0, 0, lambda r: _array(r, 25, lambda: _text(r))),
    # tablesnap::sendform's kinds, and jsonb[] (its elements' text)
    ("ln", 24, 8, "line", 0, 0, lambda r: _floats(r, 3)),
    ("ls", 32, 8, "lseg", 0, 0, lambda r: _floats(r, 4)),
    ("bx", 32, 8, "box", 0, 0, lambda r: _floats(r, 4)),
    ("ci", 24, 8, "circle", 0, 0, lambda r: _floats(r, 3)),
    ("pa", -1, 8, "path", 0, 0, _path),
    ("po", -1, 8, "polygon", 0, 0, _polygon),
    (
        "r4",
        -1,
        4,
        "int4range",
        0,
        0,
        lambda r: _range(r, lambda: struct.pack(">i", r.randrange(99))),
    ),
    ("rn", -1, 4, "numrange", 0, 0, lambda r: _range(r, lambda: _numeric(r, 2))),
    ("rz", -1, 8, "tstzrange", 0, 0, lambda r: _range(r, lambda: _i8(r))),
    ("m8", -1, 8, "int8multirange", 0, 0, lambda r: _multirange(r, lambda: _i8(r))),
    ("mn", -1, 4, "nummultirange", 0, 0, lambda r: _multirange(r, lambda: _numeric(r, 1))),
    (
        "md",
        -1,
        4,
        "datemultirange",
        0,
        0,
        lambda r: _multirange(r, lambda: struct.pack(">i", r.randrange(-9999, 9999))),
    ),
    ("tv", -1, 4, "tsvector", 0, 0, _tsvector),
    ("tq", -1, 4, "tsquery", 0, 0, _tsquery),
    ("lsn", 8, 8, "pg_lsn", 0, 0, _i8),
    ("xd", 4, 4, "xid", 0, 0, lambda r: struct.pack(">I", r.randrange(2**32))),
    ("td", 6, 2, "tid", 0, 0, lambda r: struct.pack(">IH", r.randrange(2**32), r.randrange(2**16))),
    # ranges and multiranges over an enum: labels (one unknown now and then), mapped back
    # to the column's pg_enum OIDs
    ("er", -1, 4, "enumrange@16510", 0, 0, lambda r: _range(r, lambda: _label(r))),
    ("em", -1, 4, "enummultirange@16511", 0, 0, lambda r: _multirange(r, lambda: _label(r))),
    ("cw", -1, 8, "composite", 0, 0, _record),
    ("sn", -1, 8, "pg_snapshot", 0, 0, _snapshot),
    ("i2v", -1, 4, "int2vector", 0, 0, lambda r: _vector_of(r, 21, ">h")),
    ("oiv", -1, 4, "oidvector", 0, 0, lambda r: _vector_of(r, 26, ">I")),
    # the extension types selected as their text (tablesnap::copy's text_read)
    ("lt", -1, 4, "ltree", 0, 0, lambda r: b"a." + _text(r)),
    ("cu", -1, 8, "cube", 0, 0, lambda r: b"(" + _text(r) + b")"),
    # tablesnap::extension's kinds
    ("hs", -1, 4, "hstore_json", 0, 0, _hstore),
    ("hm", -1, 4, "hstore_map", 0, 0, _hstore),
    ("vec", -1, 4, "double_vector", 0, 0, lambda r: _vector(r, "f")),
    ("hv", -1, 4, "float_vector", 0, 0, lambda r: _vector(r, "e")),
    ("sv", -1, 4, "sparse_vector", 0, 0, _sparsevec),
    ("geo", -1, 8, "geometry_record", 0, 0, _ewkb),
    ("geg", -1, 8, "geography_record", 0, 0, _ewkb),
    (
        "aj",
        -1,
        4,
        "array",
        0,
        0,
        lambda r: _array(r, 3802, lambda: b"\x01" + json.dumps([r.random()]).encode()),
    ),
    ("abx", -1, 8, "array", 0, 0, lambda r: _array(r, 603, lambda: _floats(r, 4))),
    (
        "ar4",
        -1,
        4,
        "array",
        0,
        0,
        lambda r: _array(r, 3904, lambda: _range(r, lambda: struct.pack(">i", 5))),
    ),
]
# The array columns' elements: (kind, scale, precision, type OID, typlen, typalign).
ELEMENTS = {
    "ai": ("int4", 0, 0, 23, 4, 4),
    "at": ("text", 0, 0, 25, -1, 4),
    "aj": ("jsonb", 0, 0, 3802, -1, 4),
    "abx": ("box", 0, 0, 603, 32, 8),
    "ar4": ("int4range", 0, 0, 3904, -1, 4),
}
NCOLS = len(COLUMNS)
FIELDS = list(range(NCOLS))


def plan() -> _native.RowPlan:
    specs = [
        (n, attlen, align, False, False, k, s, p, n != "id")
        for n, attlen, align, k, s, p, _ in COLUMNS
    ]
    names = [c[0] for c in COLUMNS]
    elements = {names.index(n): e for n, e in ELEMENTS.items()}
    return _native.RowPlan(
        specs,
        [0],
        RELATION,
        SchemaMismatchError,
        DecodeError,
        {names.index(n): LABELS for n in ("en", "er", "em")},
        elements,
        {names.index("cw"): COMPOSITE},
    )


def seed(r: random.Random) -> bytes:
    out = bytearray(SIGNATURE + struct.pack(">ii", 0, 0))
    for _ in range(r.randrange(1, 4)):
        out += struct.pack(">h", NCOLS)
        for _name, *_rest, make in COLUMNS:
            if r.random() < 0.15:
                out += struct.pack(">i", -1)
            else:
                value = make(r)
                out += struct.pack(">i", len(value)) + value
    out += struct.pack(">h", -1)
    return bytes(out)


def damage(r: random.Random, data: bytes) -> bytes:
    b = bytearray(data)
    at = r.randrange(len(b))
    match r.randrange(7):
        case 0:
            b[at] ^= 1 << r.randrange(8)
        case 1:
            b[at] = r.randrange(256)
        case 2:
            del b[at:]
        case 3:
            b[at:at] = r.randbytes(r.randrange(1, 9))
        case 4:
            del b[at : at + r.randrange(1, 9)]
        case 5:  # a field's length word (any 4 bytes past the header)
            at = r.randrange(19, max(20, len(b) - 4))
            b[at : at + 4] = struct.pack(">i", r.choice([-2, -1, 0, 1, 7, 2**31 - 1]))
        case _:  # the first row's field count
            b[19:21] = struct.pack(">h", r.choice([-1, 0, NCOLS - 1, NCOLS + 1]))
    return bytes(b)


def python_fields(data: bytes) -> list[list[bytes | None]] | None:
    rows: list[list[bytes | None]] = []
    target = CopyRows(NCOLS, rows.append)
    try:
        target.write(data)
        target.close()
    except (DecodeError, struct.error):
        return None
    return rows


def run_case(p: _native.RowPlan, data: bytes, compare: bool, damaged: bool) -> str:
    """The case's outcome: "encoded", "fallback", "split-error", "encode-error"; raises
    AssertionError for a failure."""
    parts = (b"h", b'[null,"', b"m", b"\x00\x00\x00", None)
    try:
        chunk = native_chunk(_native, data, NCOLS, RELATION)
    except DecodeError as exc:
        assert PANIC not in str(exc), f"parser panic: {exc}"
        assert exc.relation == RELATION
        assert damaged, f"undamaged seed failed to split: {exc}"
        if compare:
            assert python_fields(data) is None, "Python split what native rejected"
        return "split-error"
    if compare:
        py = python_fields(data)
        assert py is not None, "native split what Python rejected"
        assert py == [chunk.row(i) for i in range(len(chunk))], "fields differ"
    try:
        keys, values, reason = p.encode_copy(
            chunk,
            FIELDS,
            list(range(len(chunk))),
            0,
            b"V",
            b"K",
            (parts, parts, parts),
            "r",
            LSN,
            0,
        )
    except (DecodeError, SchemaMismatchError) as exc:
        assert PANIC not in str(exc), f"encoder panic: {exc}"
        assert exc.lsn == LSN and exc.relation == RELATION, exc.__dict__
        assert damaged, f"undamaged seed failed to encode: {exc}"
        return "encode-error"
    assert len(keys) == len(values)
    return "encoded" if reason is None else "fallback"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--count", type=int, default=20000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--python-every", type=int, default=10)
    args = ap.parse_args()
    r = random.Random(args.seed)
    p = plan()
    outcomes: Counter[str] = Counter()
    failures: list[str] = []
    started = time.monotonic()
    for n in range(args.count):
        data = seed(r)
        damaged = n % 10 != 0
        if damaged:
            data = damage(r, data)
        try:
            outcomes[run_case(p, data, n % args.python_every == 0, damaged)] += 1
        except Exception as exc:  # every failure is reported, then the exit status says so
            failures.append(f"case {n}: {type(exc).__name__}: {exc}")
    took = time.monotonic() - started
    print(f"{args.count} cases in {took:.1f}s: {dict(outcomes)}; {len(failures)} failures")
    for f in failures[:20]:
        print(" ", f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
