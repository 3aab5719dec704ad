"""Fuzz the native row encoder (service._native.RowPlan), or with `--text` the native
text writer (service._native.TextPlan), with damaged heap tuples.

    python tests/perf/fuzz_native_rows.py [--count N] [--seed S] [--python-every K] [--text]

Seeds: tuples laid out as heap_form_tuple lays them out (null bitmap, alignment, 1-byte
and 4-byte varlena headers, an inline pglz- and an lz4-compressed text, a dropped
column, on-disk TOAST pointers without their chunks in text and bytea columns, which the
plan writes as its placeholder) over a plan with every native kind (a composite with
enum, array and nested composite fields, pg_snapshot, int2vector, oidvector, a jsonpath
of a random item tree, tid, user ranges over text and bytea (bounds range_bound_escape quotes),
interval, tid and xid8, domains over int4 and bool, and cube[] (an extension type's array,
its elements double-aligned) among them, and a last column added
with a default, which seeds of fewer attributes read from the plan's attmissingval),
with random values and NULLs. Each case damages one seed: flip a bit, set a byte,
truncate, insert or delete bytes, or change natts, infomask's HEAP_HASNULL or t_hoff;
then calls `RowPlan.encode`.

The only acceptable outcomes are an encoding (bytes), a fallback reason (str), or a
typed error: SchemaMismatchError or DecodeError carrying the case's lsn and the
table. Anything else is a failure: another exception, and a Rust panic (which the
boundary turns into a DecodeError "internal error in the native row encoder", so it is
recognised by that message). Every K-th case (`--python-every`) is also deformed by the
Python reference (service.types.deform.deform); where the Python deformer raises, the
native side must raise the same class or fall back, and where the native side raises,
the Python deformer must raise the same class. Undamaged seeds must encode or fall back
(never raise). The exit status is 1 if there was any failure.

With `--text` each case goes through `TextPlan.lines` over the same layout, with the
same rules; and where the Python deformer
and each column's Python output function (service.types.convert.to_text, then
print_literal) succeed on a case the native writer printed, the line must be exactly
the Python one (a difference is a failure).
"""

from __future__ import annotations

import argparse
import random
import struct
import sys
import time
from collections import Counter
from pathlib import Path

import lz4.block

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from service import _native  # noqa: E402
from service.decode.events import RawTuple  # noqa: E402
from service.errors import DecodeError, SchemaMismatchError  # noqa: E402
from service.output.text import print_literal  # noqa: E402
from service.types.convert import to_text  # noqa: E402
from service.types.deform import Column, deform  # noqa: E402
from service.types.registry import TypeInfo, TypeRegistry  # noqa: E402
from tests.service.types import stored_forms as forms  # noqa: E402

PANIC = "internal error in the native row encoder"
TEXT_PANIC = "internal error in the native text writer"
RELATION = "public.fuzzed"
LSN = 0x1_2345_6789

# (name, attlen, typalign, kind, dropped)
COLUMNS = [
    ("id", 8, "d", "int8", False),
    ("b", 1, "c", "bool", False),
    ("s", 2, "s", "int2", False),
    ("t", -1, "i", "text", False),
    ("gone", 8, "d", "", True),
    ("i", 4, "i", "int4", False),
    ("o", 4, "i", "oid", False),
    ("f4", 4, "i", "float4", False),
    ("f8", 8, "d", "float8", False),
    ("nm", 64, "c", "name", False),
    ("by", -1, "i", "bytea", False),
    ("u", 16, "c", "uuid", False),
    ("d", 4, "i", "date", False),
    ("tm", 8, "d", "time", False),
    ("ts", 8, "d", "timestamp", False),
    ("tz", 8, "d", "timestamptz", False),
    ("n", -1, "i", "decimal", False),
    ("nv", -1, "i", "variable_decimal", False),
    ("big", -1, "i", "text", False),
    ("iv", 16, "d", "interval", False),
    ("tt", 12, "d", "timetz", False),
    ("mo", 8, "d", "money", False),
    ("ch", 1, "c", "char", False),
    ("ip", -1, "i", "inet", False),
    ("mc", 6, "i", "macaddr", False),
    ("vb", -1, "i", "bits", False),
    ("jb", -1, "i", "jsonb", False),
    ("x", -1, "i", "xml", False),
    ("en", 4, "i", "enum", False),
    ("ai", -1, "i", "array_int4", False),
    ("at", -1, "i", "array_text", False),
    ("pt", 16, "d", "point_record", False),
    ("bx", 32, "d", "box", False),
    ("pa", -1, "d", "path", False),
    ("rz", -1, "d", "tstzrange", False),
    ("r4", -1, "i", "int4range", False),
    ("cp", -1, "d", "composite_rich", False),
    ("ps", -1, "d", "pg_snapshot", False),
    ("i2v", -1, "i", "int2vector", False),
    ("ov", -1, "i", "oidvector", False),
    ("jp", -1, "i", "jsonpath", False),
    # user-defined ranges over text and interval (CREATE TYPE ... AS RANGE), printed by
    # range_out with range_bound_escape's quoting
    ("utr", -1, "i", "textrange@16430", False),
    ("uir", -1, "d", "intervalrange@16431", False),
    # tid (tidout), and user ranges over bytea (varlena bounds, always quoted) and tid
    # (6-byte bounds at 2-byte alignment)
    ("tid", 6, "s", "tid", False),
    ("ubr", -1, "i", "bytearange@16432", False),
    ("udr", -1, "i", "tidrange@16433", False),
    # a user range over xid8 (8-byte bounds at 8-byte alignment, xid8out's unsigned text)
    ("ux8", -1, "d", "xid8range@16434", False),
    ("uen", -1, "i", "enumrange@16435", False),
    # domains over int4 and bool: the text writer quotes their base type's text
    # (`domain:<kind>`), the Avro encoder writes the base type
    ("dom", 4, "i", "domain_int4", False),
    ("dbo", 1, "c", "domain_bool", False),
    # cube[] (an extension type's array: double-aligned varlena elements, cube_out's
    # text in array_out for the text writer, each cube's text an Avro string item)
    ("cba", -1, "d", "array_cube", False),
    # added with a default after the seeds that lack it were written: read from the
    # plan's attmissingval datum (getmissingattr)
    ("late", 4, "i", "int4", False),
]
MISSING = {len(COLUMNS) - 1: struct.pack("<i", 42)}
# The composite column's type: an enum field, an int4[] field and a nested composite
# (int4, text), registered for the Python reference as a catalog would describe them.
ENUM_OID, INNER_OID, OUTER_OID = 16_400, 16_410, 16_420
TEXT_RANGE_OID, INTERVAL_RANGE_OID, BYTEA_RANGE_OID, TID_RANGE_OID = range(16_430, 16_434)
XID8_RANGE_OID = 16_434
ENUM_RANGE_OID = 16_435
DOM_INT4_OID, DOM_BOOL_OID = 16_440, 16_441
_DOMAINS = {"domain_int4": "int4", "domain_bool": "bool"}  # the kind -> its base's kind
ENUM_LABELS = {16_500: "sad", 16_501: "it's", 16_502: ""}
# An array column's element (kind, OID, typlen, typalign in bytes), by the column's kind.
CUBE_OID, CUBE_ARRAY_OID = 16_450, 16_451
_ARRAYS = {
    "array_int4": ("int4", 23, 4, 4),
    "array_text": ("text", 25, -1, 4),
    "array_cube": ("cube", CUBE_OID, -1, 8),
}
_ALIGN = {"c": 1, "s": 2, "i": 4, "d": 8}
# The text writer's kind and the type OID of each printed column (by the Avro kind).
_TEXT = {
    "int8": ("int8", 20),
    "bool": ("bool", 16),
    "int2": ("int2", 21),
    "text": ("text", 25),
    "int4": ("int4", 23),
    "oid": ("oid", 26),
    "float4": ("float4", 700),
    "float8": ("float8", 701),
    "name": ("name", 19),
    "bytea": ("bytea", 17),
    "uuid": ("uuid", 2950),
    "date": ("date", 1082),
    "time": ("time", 1083),
    "timestamp": ("timestamp", 1114),
    "timestamptz": ("timestamptz", 1184),
    "decimal": ("numeric", 1700),
    "variable_decimal": ("numeric", 1700),
    "interval": ("interval", 1186),
    "timetz": ("timetz", 1266),
    "money": ("money", 790),
    "char": ("char", 18),
    "inet": ("inet", 869),
    "macaddr": ("macaddr", 829),
    "bits": ("bits", 1562),
    "jsonb": ("jsonb", 3802),
    "xml": ("xml", 142),
    "enum": ("enum", 0),  # no built-in OID: not compared with Python
    "array_int4": ("array", 1007),
    "array_text": ("array", 1009),
    "array_cube": ("array", CUBE_ARRAY_OID),
    "point_record": ("point", 600),
    "box": ("box", 603),
    "path": ("path", 602),
    "tstzrange": ("tstzrange", 3910),
    "int4range": ("int4range", 3904),
    "composite_rich": ("composite", OUTER_OID),
    "pg_snapshot": ("pg_snapshot", 5038),
    "int2vector": ("int2vector", 22),
    "oidvector": ("oidvector", 30),
    "jsonpath": ("jsonpath", 4072),
    "textrange@16430": ("textrange@16430", TEXT_RANGE_OID),
    "intervalrange@16431": ("intervalrange@16431", INTERVAL_RANGE_OID),
    "tid": ("tid", 27),
    "bytearange@16432": ("bytearange@16432", BYTEA_RANGE_OID),
    "tidrange@16433": ("tidrange@16433", TID_RANGE_OID),
    "xid8range@16434": ("xid8range@16434", XID8_RANGE_OID),
    "enumrange@16435": ("enumrange@16435", ENUM_RANGE_OID),
    "domain_int4": ("domain:int4", DOM_INT4_OID),
    "domain_bool": ("domain:bool", DOM_BOOL_OID),
}
REGISTRY = TypeRegistry(version=18)
REGISTRY.add(TypeInfo(ENUM_OID, "mood", 4, True, "i", "e", "enum_out", enum_labels=ENUM_LABELS))
REGISTRY.add(TypeInfo(CUBE_OID, "cube", -1, False, "d", "b", "cube_out"))
REGISTRY.add(TypeInfo(CUBE_ARRAY_OID, "_cube", -1, False, "d", "b", "array_out", typelem=CUBE_OID))
REGISTRY.add(TypeInfo(TEXT_RANGE_OID, "utr", -1, False, "i", "r", "range_out", range_subtype=25))
REGISTRY.add(TypeInfo(DOM_INT4_OID, "posint", 4, True, "i", "d", "int4out", typbasetype=23))
REGISTRY.add(TypeInfo(DOM_BOOL_OID, "flag", 1, True, "c", "d", "boolout", typbasetype=16))
REGISTRY.add(TypeInfo(BYTEA_RANGE_OID, "ubr", -1, False, "i", "r", "range_out", range_subtype=17))
REGISTRY.add(TypeInfo(TID_RANGE_OID, "udr", -1, False, "i", "r", "range_out", range_subtype=27))
REGISTRY.add(TypeInfo(XID8_RANGE_OID, "ux8", -1, False, "d", "r", "range_out", range_subtype=5069))
REGISTRY.add(
    TypeInfo(ENUM_RANGE_OID, "uen", -1, False, "i", "r", "range_out", range_subtype=ENUM_OID)
)
REGISTRY.add(
    TypeInfo(INTERVAL_RANGE_OID, "uir", -1, False, "d", "r", "range_out", range_subtype=1186)
)
REGISTRY.add(
    TypeInfo(
        INNER_OID,
        "inner",
        -1,
        False,
        "d",
        "c",
        "record_out",
        fields=(Column(1, "a", 23, -1, 4, True, "i"), Column(2, "t", 25, -1, -1, False, "i")),
    )
)
REGISTRY.add(
    TypeInfo(
        OUTER_OID,
        "rich",
        -1,
        False,
        "d",
        "c",
        "record_out",
        fields=(
            Column(1, "e", ENUM_OID, -1, 4, True, "i"),
            Column(2, "ai", 1007, -1, -1, False, "i"),
            Column(3, "inn", INNER_OID, -1, -1, False, "d"),
        ),
    )
)
# composite_spec's form of the composite column (connectors.avro.native_rows)
COMPOSITE_SPEC = (
    OUTER_OID,
    [
        ("e", 4, 4, False, "enum", ENUM_LABELS, None, None),
        ("ai", -1, 4, False, "array", None, ("int4", 23, 4, 4), None),
        (
            "inn",
            -1,
            8,
            False,
            "composite",
            None,
            None,
            (
                INNER_OID,
                [
                    ("a", 4, 4, False, "int4", None, None, None),
                    ("t", -1, 4, False, "text", None, None, None),
                ],
            ),
        ),
    ],
)


def _row(typeid: int, fields: list[tuple[int, bytes] | None]) -> bytes:
    """A composite datum's payload (from datum_typmod on): its header, null bitmap and
    fields `(align, stored bytes)` aligned from the header start (heap_form_tuple)."""
    nulls = any(f is None for f in fields)
    bitmap = bytearray((len(fields) + 7) // 8 if nulls else 0)
    for i, f in enumerate(fields):
        if f is not None and nulls:
            bitmap[i >> 3] |= 1 << (i & 7)
    hoff = (23 + len(bitmap) + 7) & ~7
    out = bytearray(struct.pack("<iI6sHHB", -1, typeid, b"", len(fields), int(nulls), hoff))
    out += bitmap
    out += b"\0" * (hoff - 4 - len(out))
    for f in fields:
        if f is None:
            continue
        a, data = f
        out += b"\0" * ((-(len(out) + 4)) % a)
        out += data
    return bytes(out)


def _long(payload: bytes) -> bytes:
    """A varlena with a 4-byte header."""
    return struct.pack("<I", (len(payload) + 4) << 2) + payload


def _numeric(rng: random.Random) -> bytes:
    """A long-form numeric datum: sign, dscale, weight, base-10000 digits."""
    ndig = rng.randint(0, 5)
    weight = rng.randint(-3, 4)
    dscale = rng.randint(0, 2)
    sign = 0x4000 if rng.random() < 0.5 else 0
    if rng.random() < 0.05:
        return struct.pack("<H", rng.choice([0xC000, 0xD000, 0xF000]))
    digits = [rng.randint(0, 9999) for _ in range(ndig)]
    return struct.pack(f"<Hh{ndig}h", sign | dscale, weight, *digits)


# the kinds whose seeds may hold an unchanged TOAST pointer, which the plan writes as a
# placeholder
_PLACEHOLDER_KINDS = frozenset({"text", "bytea"})


def _pglz_literals(raw: bytes) -> bytes:
    """A valid pglz stream of literals only (control byte 0 before each 8 bytes)."""
    out = bytearray()
    for k in range(0, len(raw), 8):
        out.append(0)
        out += raw[k : k + 8]
    return bytes(out)


def _varlena(payload: bytes, rng: random.Random, compress: bool) -> bytes:
    if compress:
        if rng.random() < 0.5:
            body, method = _pglz_literals(payload), 0
        else:
            body, method = lz4.block.compress(payload, store_size=False), 1
        tcinfo = len(payload) | (method << 30)
        return struct.pack("<II", ((8 + len(body)) << 2) | 0x02, tcinfo) + body
    if len(payload) + 1 <= 127 and rng.random() < 0.8:
        return bytes([((len(payload) + 1) << 1) | 1]) + payload
    return struct.pack("<I", (len(payload) + 4) << 2) + payload


def _user_range(kind: str, rng: random.Random) -> bytes:
    """A user range's payload (range_serialize) over text (bounds of characters
    range_bound_escape quotes, in short or aligned 4-byte varlenas), bytea (random
    bytes, the same varlenas), interval, tid, xid8 or an enum (pg_enum OIDs)."""
    text = kind.startswith(("text", "bytea"))
    oids = {
        "text": TEXT_RANGE_OID,
        "bytea": BYTEA_RANGE_OID,
        "tid": TID_RANGE_OID,
        "xid8": XID8_RANGE_OID,
        "enum": ENUM_RANGE_OID,
    }
    oid = oids.get(kind.split("range", maxsplit=1)[0], INTERVAL_RANGE_OID)
    out = bytearray(struct.pack("<I", oid))
    flags = rng.choice([0, 2, 4, 6, 1])
    for absent in (0x08, 0x10):
        if flags & 0x01 or rng.random() < 0.2:
            flags |= 0 if flags & 0x01 else absent
            continue
        if kind.startswith("tid"):
            out += bytes((-(len(out) + 4)) % 2)
            out += _value("tid", rng)
            continue
        if kind.startswith("xid8"):
            out += bytes((-(len(out) + 4)) % 8)
            out += rng.randbytes(8)
            continue
        if kind.startswith("enum"):  # a label's pg_enum OID, rarely one not known
            out += bytes((-(len(out) + 4)) % 4)
            known = rng.random() < 0.95
            out += struct.pack("<I", rng.choice([*ENUM_LABELS]) if known else 99)
            continue
        if not text:
            out += bytes((-(len(out) + 4)) % 8)
            out += _value("interval", rng)
            continue
        bound = "".join(rng.choice('ab "\\,()[]\té') for _ in range(rng.randint(0, 6))).encode()
        if kind.startswith("bytea"):
            bound = rng.randbytes(rng.randint(0, 6))
        if rng.random() < 0.5:
            out += bytes([((len(bound) + 1) << 1) | 1]) + bound
        else:
            out += bytes((-(len(out) + 4)) % 4)
            out += struct.pack("<I", (len(bound) + 4) << 2) + bound
    return bytes(out + bytes([flags]))


def _payload(kind: str, rng: random.Random) -> bytes:
    """The varlena payload of one value of a variable-length kind."""
    if kind == "inet":
        v6 = rng.random() < 0.5
        size = 16 if v6 else 4
        return bytes([3 if v6 else 2, rng.randint(0, 8 * size)]) + rng.randbytes(size)
    if kind == "bits":
        n = rng.randint(0, 40)
        return struct.pack("<i", n) + rng.randbytes((n + 7) // 8)
    if kind == "jsonb":
        return forms.jsonb_datum(forms.random_json(rng, 3))
    if kind == "xml":
        return rng.choice(["<a>é</a>", "\n<b/>", "", '<?xml version="1.0"?><c/>']).encode()
    if kind == "array_int4":
        items = [
            None if rng.random() < 0.2 else _value("int4", rng) for _ in range(rng.randint(0, 9))
        ]
        return forms.array_datum(23, 4, 4, items, [len(items)], [rng.choice([1, 0, -2])])
    if kind == "array_text":
        items = [
            None if rng.random() < 0.2 else rng.choice([b"", b"a b", b"NULL", b'q"', "é".encode()])
            for _ in range(rng.randint(0, 6))
        ]
        return forms.array_datum(25, -1, 4, items)
    if kind == "array_cube":
        # cubedata.h: a uint32 header (dimensions, the point flag in the high bit), then
        # the corners' coordinates (a point's once)
        cubes: list[bytes | None] = []
        for _ in range(rng.randint(0, 4)):
            if rng.random() < 0.2:
                cubes.append(None)
                continue
            dim, point = rng.randint(0, 3), rng.random() < 0.3
            n = dim if point else 2 * dim
            coords = [rng.choice([rng.uniform(-1e6, 1e6), -0.0, 0.1, 1e-300]) for _ in range(n)]
            head = dim | (0x8000_0000 if point else 0)
            cubes.append(struct.pack(f"<I{n}d", head, *coords))
        return forms.array_datum(CUBE_OID, -1, 8, cubes)
    if kind == "path":
        n = rng.randint(0, 4)
        return struct.pack(
            f"<iii{2 * n}d", n, rng.randint(0, 1), 0, *(rng.uniform(-9, 9) for _ in range(2 * n))
        )
    if kind == "composite_rich":
        ints = [
            None if rng.random() < 0.2 else _value("int4", rng) for _ in range(rng.randint(0, 4))
        ]
        inner = _row(
            INNER_OID,
            [
                None if rng.random() < 0.2 else (4, _value("int4", rng)),
                None if rng.random() < 0.2 else (4, _long(rng.choice([b"", b"a,b", b'q"(x)']))),
            ],
        )
        return _row(
            OUTER_OID,
            [
                None if rng.random() < 0.2 else (4, _value("enum", rng)),
                None if rng.random() < 0.2 else (4, _long(forms.array_datum(23, 4, 4, ints))),
                None if rng.random() < 0.2 else (8, _long(inner)),
            ],
        )
    if kind == "pg_snapshot":
        xips = [rng.getrandbits(64) for _ in range(rng.randint(0, 3))]
        return struct.pack(f"<iQQ{len(xips)}Q", len(xips), 5, 2**64 - 1, *xips)
    if kind in ("int2vector", "oidvector"):
        n = rng.randint(0, 5)
        if kind == "int2vector":
            items = [_value("int2", rng) for _ in range(n)]
            return forms.array_datum(21, 2, 2, items, [n], [0])
        items = [_value("oid", rng) for _ in range(n)]
        return forms.array_datum(26, 4, 4, items, [n], [0])
    if kind == "jsonpath":
        # a random item tree of any item kind (flattenJsonPathParseItem's layout)
        return forms.jsonpath_datum(forms.random_jsonpath(rng, 3), rng.random() < 0.5)
    if kind in (
        "textrange@16430",
        "intervalrange@16431",
        "bytearange@16432",
        "tidrange@16433",
        "xid8range@16434",
        "enumrange@16435",
    ):
        return _user_range(kind, rng)
    if kind in ("tstzrange", "int4range"):
        oid = 3910 if kind == "tstzrange" else 3904
        bound = (
            (lambda: rng.randint(-(10**15), 10**15))
            if oid == 3910
            else (lambda: rng.randint(-99, 99))
        )
        lo = None if rng.random() < 0.2 else bound()
        hi = None if rng.random() < 0.2 else bound()
        return forms.range_datum(oid, lo, hi, rng.choice([0, 2, 4, 6, 1]))
    return _numeric(rng)


def _value(kind: str, rng: random.Random) -> bytes:
    kind = _DOMAINS.get(kind, kind)
    if kind == "interval":
        return struct.pack(
            "<qii", rng.randint(-(10**12), 10**12), rng.randint(-99, 99), rng.randint(-99, 99)
        )
    if kind == "timetz":
        return struct.pack("<qi", rng.randint(0, 86_400_000_000), rng.randint(-57_599, 57_599))
    if kind == "money":
        return struct.pack("<q", rng.randint(-(2**63), 2**63 - 1))
    if kind == "char":
        return bytes([rng.randint(0, 255)])
    if kind == "macaddr":
        return rng.randbytes(6)
    if kind == "enum":
        return struct.pack("<I", rng.choice([*ENUM_LABELS, 99]))
    if kind in ("point_record", "box"):
        n = 2 if kind == "point_record" else 4
        return struct.pack(
            f"<{n}d", *(rng.choice([rng.uniform(-1e6, 1e6), -0.0, 1.5]) for _ in range(n))
        )
    if kind in ("int8", "time", "ts", "timestamp", "timestamptz", "float8"):
        return struct.pack("<q", rng.randint(-(2**63), 2**63 - 1))
    if kind in ("int4", "oid", "date", "float4"):
        return struct.pack("<i", rng.randint(-(2**31), 2**31 - 1))
    if kind == "int2":
        return struct.pack("<h", rng.randint(-(2**15), 2**15 - 1))
    if kind == "bool":
        return bytes([rng.randint(0, 1)])
    if kind == "name":
        text = "n" * rng.randint(0, 63)
        return text.encode().ljust(64, b"\0")
    if kind == "uuid":
        return rng.randbytes(16)
    if kind == "tid":
        return rng.randbytes(6)
    raise AssertionError(kind)


def seed_tuple(rng: random.Random) -> RawTuple:
    """A tuple as heap_form_tuple writes it, over COLUMNS."""
    natts = len(COLUMNS) if rng.random() < 0.9 else rng.randint(0, len(COLUMNS))
    nulls = [rng.random() < 0.15 for _ in range(natts)]
    has_nulls = any(nulls)
    bitmap = b""
    if has_nulls:
        bits = bytearray((natts + 7) // 8)
        for i, null in enumerate(nulls):
            if not null:
                bits[i >> 3] |= 1 << (i & 7)
        bitmap = bytes(bits)
    hoff = (23 + len(bitmap) + 7) & ~7
    data = bytearray(bitmap + b"\0" * (hoff - 23 - len(bitmap)))
    off = hoff
    for i in range(natts):
        if nulls[i]:
            continue
        _name, attlen, align, kind, _dropped = COLUMNS[i]
        if attlen == -1:
            if kind == "text":
                payload = "".join(rng.choice("aé✓x ") for _ in range(rng.randint(0, 60))).encode()
                compress = _name == "big" and rng.random() < 0.7
                if compress:
                    payload = payload * 20 + b"z"
            elif kind == "bytea":
                payload = rng.randbytes(rng.randint(0, 40))
                compress = False
            else:
                payload = _payload(kind, rng)
                compress = False
            datum = _varlena(payload, rng, compress)
            if kind in _PLACEHOLDER_KINDS and rng.random() < 0.15:
                # an on-disk TOAST pointer whose chunks the change lacks (unchanged): the
                # plan's placeholder (varattrib_1b_e: unaligned)
                datum = bytes([0x01, 18]) + struct.pack(
                    "<iIII", 5000, 4000, rng.randrange(1 << 32), 16_400
                )
            if datum[0] & 1 == 0:  # 4-byte header: aligned
                a = _ALIGN[align]
                pad = (-off) % a
                data += b"\0" * pad
                off += pad
        else:
            a = _ALIGN[align]
            pad = (-off) % a
            data += b"\0" * pad
            off += pad
            datum = _value(kind or "int8", rng)
        data += datum
        off += len(datum)
    return RawTuple(natts, 1 if has_nulls else 0, natts, hoff, bytes(data))


def damage(t: RawTuple, rng: random.Random) -> tuple[str, RawTuple]:
    data = bytearray(t.data)
    how = rng.choice(["flip", "byte", "truncate", "insert", "delete", "natts", "nulls", "hoff"])
    natts, infomask, hoff = t.natts, t.infomask, t.hoff
    if how in ("flip", "byte", "delete") and not data:
        how = "natts"
    if how == "flip":
        k = rng.randrange(len(data))
        data[k] ^= 1 << rng.randrange(8)
    elif how == "byte":
        data[rng.randrange(len(data))] = rng.randrange(256)
    elif how == "truncate":
        del data[rng.randint(0, len(data)) :]
    elif how == "insert":
        k = rng.randint(0, len(data))
        data[k:k] = rng.randbytes(rng.randint(1, 8))
    elif how == "delete":
        k = rng.randrange(len(data))
        del data[k : k + rng.randint(1, 8)]
    elif how == "natts":
        natts = rng.randint(0, len(COLUMNS) + 3)
    elif how == "nulls":
        infomask ^= 1
    else:
        hoff = rng.randint(23, 23 + 40)
    return how, RawTuple(natts, infomask, natts, hoff, bytes(data))


def make_plan() -> tuple[object, list[Column]]:
    specs = []
    columns = []
    labels: dict[int, dict[int, str]] = {}
    elements: dict[int, tuple[str, int, int, int, int, int]] = {}
    for k, (name, attlen, align, kind, dropped) in enumerate(COLUMNS):
        avro_kind = "array" if kind in _ARRAYS else kind
        avro_kind = "composite" if kind == "composite_rich" else avro_kind
        avro_kind = _DOMAINS.get(avro_kind, avro_kind)
        has_missing = k in MISSING
        specs.append(
            (name, attlen, _ALIGN[align], dropped, has_missing, avro_kind, 2, 12, k % 3 != 0)
        )
        if kind == "enum" or kind.startswith("enumrange"):
            labels[k] = ENUM_LABELS
        if kind in _ARRAYS:
            ekind, oid, elen, ealign = _ARRAYS[kind]
            elements[k] = (ekind, 0, 0, oid, elen, ealign)
        columns.append(
            Column(
                k + 1,
                name,
                0 if dropped else 23,
                -1,
                attlen,
                attlen > 0,
                align,
                dropped=dropped,
                missing=MISSING.get(k),
            )
        )
    composites = {k: COMPOSITE_SPEC for k, c in enumerate(COLUMNS) if c[3] == "composite_rich"}
    # an unchanged TOAST value's field (any bytes: the encoder writes them as given)
    placeholders = {
        k: b"\x02\x06abc"
        for k, c in enumerate(COLUMNS)
        if c[1] == -1 and c[3] in _PLACEHOLDER_KINDS and not c[4]
    }
    plan = _native.RowPlan(
        specs,
        [0, 3],
        RELATION,
        SchemaMismatchError,
        DecodeError,
        labels,
        elements,
        composites,
        MISSING,
        None,
        placeholders,
    )
    return plan, columns


def make_text_plan() -> object:
    specs = []
    labels: dict[int, dict[int, str]] = {}
    elements: dict[int, tuple[str, int, int, int]] = {}
    for k, (name, attlen, align, kind, dropped) in enumerate(COLUMNS):
        text_kind = "" if dropped or kind not in _TEXT else _TEXT[kind][0]
        head = f" {name}[{kind}]:" if text_kind else ""
        specs.append((name, attlen, _ALIGN[align], dropped, k in MISSING, head, text_kind))
        if kind == "enum" or kind.startswith("enumrange"):
            labels[k] = ENUM_LABELS
        if kind in _ARRAYS:
            elements[k] = _ARRAYS[kind]
    composites = {k: COMPOSITE_SPEC for k, c in enumerate(COLUMNS) if c[3] == "composite_rich"}
    return _native.TextPlan(
        specs,
        RELATION,
        SchemaMismatchError,
        DecodeError,
        labels,
        elements,
        composites,
        MISSING,
    )


def _python_line(columns: list[Column], t: RawTuple) -> str | None:
    """The line the Python path prints for `t`, or None where it raises."""
    try:
        datums = deform(t, columns, relation=RELATION)
        parts = ["p:"]
        for (name, _attlen, _align, kind, dropped), datum in zip(COLUMNS, datums, strict=True):
            if dropped or kind not in _TEXT:
                continue
            oid = _TEXT[kind][1]
            if oid == 0:  # an enum: its labels are the plan's, not a registry's
                label = None if datum is None else ENUM_LABELS.get(struct.unpack("<I", datum)[0])
                if datum is not None and label is None:
                    return None
                parts.append(
                    f" {name}[{kind}]:" + ("null" if label is None else print_literal(oid, label))
                )
                continue
            if datum is None:
                parts.append(f" {name}[{kind}]:null")
                continue
            if not isinstance(datum, bytes):
                return None
            text = to_text(datum, REGISTRY.get(oid), REGISTRY)
            parts.append(f" {name}[{kind}]:" + print_literal(oid, text))
    except Exception:
        return None
    return "".join(parts)


def _text_outcome(plan: object, t: RawTuple) -> tuple[str, type | None, str | None]:
    try:
        lines, reason = plan.lines([t], [LSN], 0, "p:", False)  # type: ignore[attr-defined]
    except (SchemaMismatchError, DecodeError) as exc:
        if TEXT_PANIC in exc.message:
            return "FAIL panic", None, None
        if exc.lsn != LSN or exc.relation != RELATION:
            return "FAIL error without context", None, None
        return f"error {type(exc).__name__}", type(exc), None
    except Exception as exc:
        return f"FAIL untyped {type(exc).__name__}: {exc}", None, None
    if reason is not None:
        return f"fallback {reason}", None, None
    if len(lines) != 1 or not isinstance(lines[0], str):
        return "FAIL result is not one line", None, None
    return "encoded", None, lines[0]


def _outcome(plan: object, t: RawTuple) -> tuple[str, type | None]:
    try:
        out = plan.encode(t.natts, t.infomask, t.hoff, t.data, LSN, True)  # type: ignore[attr-defined]
    except (SchemaMismatchError, DecodeError) as exc:
        if PANIC in exc.message:
            return "FAIL panic", None
        if exc.lsn != LSN or exc.relation != RELATION:
            return "FAIL error without context", None
        return f"error {type(exc).__name__}", type(exc)
    except Exception as exc:
        return f"FAIL untyped {type(exc).__name__}: {exc}", None
    if isinstance(out, str):
        return f"fallback {out}", None
    value, key = out
    if not isinstance(value, bytes) or not isinstance(key, bytes):
        return "FAIL result is not bytes", None
    return "encoded", None


def _python_class(columns: list[Column], t: RawTuple) -> type | None:
    try:
        deform(t, columns, relation=RELATION)
    except (SchemaMismatchError, DecodeError) as exc:
        return type(exc)
    except Exception:
        return Exception
    return None


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--count", type=int, default=1_000_000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--python-every", type=int, default=100)
    ap.add_argument("--text", action="store_true", help="fuzz TextPlan.lines instead")
    a = ap.parse_args()
    rng = random.Random(a.seed)
    plan, columns = make_plan()
    text_plan = make_text_plan()
    counts: Counter[str] = Counter()

    def outcome(t: RawTuple, check: bool) -> tuple[str, type | None]:
        if not a.text:
            return _outcome(plan, t)
        what, raised, line = _text_outcome(text_plan, t)
        if check and line is not None:
            expected = _python_line(columns, t)
            if expected is None:
                return "DIFF python raised, native printed", None
            if expected != line:
                return f"FAIL text differs: {line[:200]!r} != {expected[:200]!r}", None
            counts["python printed the same line"] += 1
        return what, raised

    seeds = [seed_tuple(rng) for _ in range(500)]
    for s in seeds:
        what, _ = outcome(s, True)
        counts["seed " + what if not what.startswith("error") else "FAIL seed raised"] += 1
    started = time.perf_counter()
    for n in range(a.count):
        how, t = damage(seeds[n % len(seeds)], rng)
        check = bool(a.python_every) and n % a.python_every == 0 and t.hoff >= 23
        what, raised = outcome(t, check)
        counts[what] += 1
        if check:
            py = _python_class(columns, t)
            if py is not None and raised is not None and py is not raised:
                counts[
                    f"FAIL class differs ({how}): python {py.__name__}, native {raised.__name__}"
                ] += 1
            elif py is None and raised is not None:
                counts[f"FAIL native raised, python did not ({how})"] += 1
            elif py is not None and raised is None and what == "encoded":
                counts[f"DIFF python raised {py.__name__}, native encoded ({how})"] += 1
            else:
                counts["python agreed"] += 1
    took = time.perf_counter() - started
    print(
        f"inputs: {a.count} damaged tuples through "
        f"{'TextPlan.lines' if a.text else 'RowPlan.encode'} in {took:.0f}s "
        f"({a.count / took:,.0f}/s), plus {len(seeds)} undamaged seeds"
    )
    for k, v in sorted(counts.items(), key=lambda kv: -kv[1]):
        print(f"{v:9d}  {k}")
    fails = sum(v for k, v in counts.items() if k.startswith("FAIL"))
    print(f"failures: {fails}")
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
