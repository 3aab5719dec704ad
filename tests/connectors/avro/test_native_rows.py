"""The native row encoder against the Python path, row by row, without a server.

Random rows over every natively covered type (and a dropped column, a column added
later, NOT NULL and nullable fields, a key out of attnum order) are laid out as
heap_form_tuple lays them out: null bitmap, alignment, 1-byte and 4-byte varlena
headers, inline pglz- and lz4-compressed text. Each tuple goes through

- the Python path: `service.types.deform.deform`, `StoredValue`s with the row decoder's
  codecs, `connectors.avro.codec.RowEncoder` / `KeyFromValue` datums, fastavro's
  `schemaless_writer` with the table's Value and Key schemas;
- the native path: `connectors.avro.native_plan.compile_plan` and `RowPlan.encode`;

and the Value and Key bytes must be equal wherever the native side does not fall back,
while the edge values the Python path decides (NaN numerics, float4 NaN, external TOAST
pointers, a missing default the relation does not carry as a stored datum) must fall
back, and one it carries is read natively. `service._native.envelope` is checked
against fastavro writing the whole Envelope, with the source record's parts written by
fastavro from sub-records of the Source schema.
"""

from __future__ import annotations

import io
import random
import struct
import uuid
from decimal import Decimal
from types import SimpleNamespace
from typing import Any

import fastavro
import lz4.block
import pytest

from connectors.avro.codec import KeyFromValue, RowEncoder
from connectors.avro.native_plan import compile_plan
from connectors.avro.plugin import transaction_datum
from connectors.avro.schema import (
    UNAVAILABLE_BYTES,
    build_table_plan,
    source_schema,
    static_with_refs,
)
from service import _native
from service.decode.events import RawTuple
from service.errors import DecodeError, PluginError, SchemaMismatchError
from service.output.api import (
    UNCHANGED_TOAST,
    ColumnCodec,
    ColumnMeta,
    ColumnValue,
    RelationInfo,
    StoredValue,
)
from service.schema.tabledef import ColumnDef, TableDef
from service.types.convert import simple_functions, to_python, to_text
from service.types.deform import Column, deform
from service.types.registry import TypeRegistry
from service.types.varlena import ToastPointer
from tests.connectors.avro.test_codec import (
    numeric_typmod,
    random_decimal,
    random_stamp,
    stored,
)
from tests.service.types.stored_forms import array_datum, jsonb_datum, random_json

# The extension itself, whatever PGCDC_IMPL selects: this test is about the encoder.
NATIVE = _native

REGISTRY = TypeRegistry()
INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1

# name, oid, typmod, notnull, attlen, attalign, dropped
COLUMNS: list[tuple[str, int, int, bool, int, str, bool]] = [
    ("id", 20, -1, True, 8, "d", False),
    ("b", 16, -1, False, 1, "c", False),
    ("s", 21, -1, False, 2, "s", False),
    ("code", 25, -1, True, -1, "i", False),
    ("gone", 0, -1, False, 8, "d", True),
    ("i", 23, -1, False, 4, "i", False),
    ("o", 26, -1, False, 4, "i", False),
    ("f4", 700, -1, False, 4, "i", False),
    ("f8", 701, -1, False, 8, "d", False),
    ("vc", 1043, 24, False, -1, "i", False),
    ("bp", 1042, 9, False, -1, "i", False),
    ("nm", 19, -1, False, 64, "c", False),
    ("by", 17, -1, False, -1, "i", False),
    ("u", 2950, -1, False, 16, "c", False),
    ("d", 1082, -1, False, 4, "i", False),
    ("d_nn", 1082, -1, True, 4, "i", False),
    ("tm", 1083, -1, False, 8, "d", False),
    ("ts", 1114, -1, False, 8, "d", False),
    ("tz", 1184, -1, False, 8, "d", False),
    ("tz_nn", 1184, -1, True, 8, "d", False),
    ("n12", 1700, numeric_typmod(12, 2), False, -1, "i", False),
    ("n30", 1700, numeric_typmod(30, 6), True, -1, "i", False),
    ("nv", 1700, -1, False, -1, "i", False),
    ("j", 114, -1, False, -1, "i", False),
    ("iv", 1186, -1, False, 16, "d", False),
    ("tt", 1266, -1, False, 12, "d", False),
    ("mo", 790, -1, False, 8, "d", False),
    ("mo_nn", 790, -1, True, 8, "d", False),
    ("ch", 18, -1, False, 1, "c", False),
    ("ip", 869, -1, False, -1, "i", False),
    ("cd", 650, -1, False, -1, "i", False),
    ("mc", 829, -1, False, 6, "i", False),
    ("m8", 774, -1, False, 8, "i", False),
    ("bt", 1560, 10, False, -1, "i", False),
    ("b1", 1560, 1, True, -1, "i", False),
    ("vb", 1562, -1, False, -1, "i", False),
    ("jb", 3802, -1, False, -1, "i", False),
    ("x", 142, -1, False, -1, "i", False),
    ("ai", 1007, -1, False, -1, "i", False),  # int4[]
    ("at", 1009, -1, True, -1, "i", False),  # text[] NOT NULL: NULL is the empty array
    ("an", 1231, numeric_typmod(8, 3), False, -1, "i", False),  # numeric(8,3)[]
    ("az", 1185, -1, False, -1, "d", False),  # timestamptz[]
    ("aj", 3807, -1, False, -1, "i", False),  # jsonb[]
    ("tid", 27, -1, False, 6, "s", False),  # tidout's text, a string
    ("atid", 1010, -1, False, -1, "i", False),  # tid[]
    ("late", 23, -1, False, 4, "i", False),
]
KEY = ("code", "id")  # index order differs from attnum order
_ALIGN = {"c": 1, "s": 2, "i": 4, "d": 8}


def _table(missing_default: bool = False) -> TableDef:
    cols = tuple(
        ColumnDef(
            attnum=k,
            name=name if not dropped else f"........pg.dropped.{k}........",
            type_oid=oid,
            typmod=typmod,
            not_null=notnull,
            dropped=dropped,
            generated="",
            attlen=attlen,
            attbyval=attlen in (1, 2, 4, 8),
            attalign=align,
            attstorage="x" if attlen == -1 else "p",
            has_missing=missing_default and name == "late",
            missing_text="{7}" if missing_default and name == "late" else None,
        )
        for k, (name, oid, typmod, notnull, attlen, align, dropped) in enumerate(COLUMNS, 1)
    )
    key = tuple(next(c.attnum for c in cols if c.name == k) for k in KEY)
    return TableDef(16_500, 16_501, 1663, 0, 0, "public", "natives", "r", "d", cols, key)


# Array columns: array OID -> (element OID, typlen, typalign in bytes).
ARRAYS = {
    1007: (23, 4, 4),
    1009: (25, -1, 4),
    1231: (1700, -1, 4),
    1185: (1184, 8, 8),
    3807: (3802, -1, 4),
    1010: (27, 6, 2),
}


def _meta(c: ColumnDef) -> ColumnMeta:
    if c.type_oid in ARRAYS:
        elem = ARRAYS[c.type_oid][0]
        return ColumnMeta(
            c.name,
            c.attnum,
            c.type_oid,
            str(c.type_oid),
            c.typmod,
            c.not_null,
            kind="a",
            elem_type_oid=elem,
        )
    return ColumnMeta(c.name, c.attnum, c.type_oid, str(c.type_oid), c.typmod, c.not_null)


LATE_DEFAULT = struct.pack("<i", 7)  # `late`'s attmissingval, "{7}", as a stored datum


def _rel(table: TableDef, stored_default: bool = False) -> RelationInfo:
    """The relation as the row decoder describes it; `stored_default`: with `late`'s
    attmissingval as the stored datum it resolves (RelationInfo.missing_datums)."""
    metas = tuple(_meta(c) for c in table.columns if not c.dropped)
    missing = tuple(
        (c.attnum, LATE_DEFAULT) for c in table.columns if stored_default and c.has_missing
    )
    return RelationInfo(
        table.oid, table.schema, table.name, "d", KEY, metas, 0x100, missing_datums=missing
    )


def _codec(oid: int, name: str) -> ColumnCodec:
    info = REGISTRY.get(oid)
    if oid in ARRAYS:  # an array's value and text need the registry (its element type)
        return ColumnCodec(
            name,
            oid,
            str(oid),
            lambda b: to_python(b, info, REGISTRY),
            lambda b: to_text(b, info, REGISTRY),
        )
    fns = simple_functions(info, REGISTRY)
    assert fns is not None, oid
    return ColumnCodec(name, oid, str(oid), fns[0], fns[1])


def _value(name: str, oid: int, rng: random.Random) -> bytes:
    """A stored datum of the column's type, edge values included."""
    match oid:
        case 20:
            return struct.pack(
                "<q", rng.choice([-(2**63), 2**63 - 1, rng.randrange(-(2**40), 2**40)])
            )
        case 16:
            return stored(16, rng.random() < 0.5, rng)
        case 21:
            return struct.pack("<h", rng.choice([-32768, 32767, 0, rng.randrange(-999, 999)]))
        case 23:
            return struct.pack("<i", rng.choice([INT32_MIN, INT32_MAX, rng.randrange(-9999, 9999)]))
        case 26:
            return struct.pack("<I", rng.choice([0, 2**32 - 1, rng.randrange(2**32)]))
        case 700:
            v = rng.choice([0.0, -0.0, 1.5, 1e-45, 3.4028235e38, float("inf"), float("nan")])
            return struct.pack("<f", v)
        case 701:
            v = rng.choice([-0.0, 5e-324, 1e308, float("-inf"), float("nan"), rng.random()])
            return struct.pack("<d", v)
        case 25 | 1043 | 114:
            text = rng.choice(["", "a", "héllo wörld ✓ 😀", "x" * 40, "tab\tnl\n", '{"k": [1]}'])
            if rng.random() < 0.2:
                text = text * 300 + "end"  # long: compressed below
            return text.encode()
        case 1042:
            return rng.choice(["ä".ljust(9), "abcdefghi", " " * 9]).encode()
        case 19:
            return rng.choice(["", "name", "ñame_✓"]).encode().ljust(64, b"\0")
        case 17:
            return rng.randbytes(rng.choice([0, 1, 7, 200]))
        case 2950:
            return uuid.UUID(int=rng.getrandbits(128)).bytes
        case 1082:
            days = rng.choice([INT32_MIN, INT32_MAX, 0, -2_451_545, 2_147_483_494 - 2_451_545])
            return struct.pack("<i", rng.choice([days, rng.randrange(-(10**6), 10**6)]))
        case 1083:
            return struct.pack("<q", rng.choice([0, 86_400_000_000, rng.randrange(86_400_000_000)]))
        case 1114 | 1184:
            micros = random_stamp(rng)
            if rng.random() < 0.05:  # past 294247-01-10: MicroTimestamp's clamp
                micros = 9_222_425_352_054_775_806 + rng.randrange(-5, 10**12)
            return struct.pack("<q", micros)
        case 1700:
            typmod = next(c[2] for c in COLUMNS if c[0] == name)
            if rng.random() < 0.08:
                return stored(1700, rng.choice(["NaN", "Infinity", "-Infinity"]), rng)
            if typmod < 0:
                d = Decimal(rng.choice(["0", "-0.000001", "1e30", "-128", "128", "1.500"]))
                if rng.random() < 0.5:
                    d = Decimal(rng.randrange(-(10**40), 10**40)).scaleb(-rng.randrange(0, 20))
                return stored(1700, d, rng)
            precision, scale = ((typmod - 4) >> 16) & 0xFFFF, (typmod - 4) & 0x7FF
            return stored(1700, random_decimal(rng, precision, scale), rng)
        case 1186:
            return struct.pack(
                "<qii",
                *rng.choice(
                    [
                        (
                            rng.randrange(-(10**12), 10**12),
                            rng.randrange(-99, 99),
                            rng.randrange(-30, 30),
                        ),
                        (2**63 - 1, INT32_MAX, INT32_MAX),  # infinity: clamped
                        (-(2**63), INT32_MIN, INT32_MIN),
                        (rng.randrange(-(2**63), 2**63), INT32_MAX, rng.randrange(-(2**31), 2**31)),
                    ]
                ),
            )
        case 1266:
            return struct.pack(
                "<qi", rng.randrange(0, 86_400_000_001), rng.choice([0, -3600, 19_800, -50_403])
            )
        case 790:
            return struct.pack(
                "<q", rng.choice([0, -1, 2**63 - 1, -(2**63), rng.randrange(-(10**9), 10**9)])
            )
        case 18:
            return bytes([rng.choice([0, 65, 0x7F, 0x80, 0xE9, rng.randrange(256)])])
        case 869 | 650:
            if rng.random() < 0.5:
                bits = rng.randrange(0, 33)
                addr = rng.randbytes(4)
                family, full = 2, 32
            else:
                bits = rng.randrange(0, 129)
                addr = rng.choice(
                    [bytes(16), bytes(10) + b"\xff\xff" + rng.randbytes(4), rng.randbytes(16)]
                )
                family, full = 3, 128
            if oid == 650:  # cidr: no bits right of the mask
                n = int.from_bytes(addr, "big") >> (full - bits) << (full - bits) if bits else 0
                addr = n.to_bytes(len(addr), "big")
            return bytes([family, bits]) + addr
        case 829 | 774:
            return rng.randbytes(6 if oid == 829 else 8)
        case 1560 | 1562:
            typmod = next(c[2] for c in COLUMNS if c[0] == name)
            nbits = typmod if typmod > 0 else rng.randrange(0, 70)
            return struct.pack("<i", nbits) + rng.randbytes((nbits + 7) // 8)
        case 3802:
            return jsonb_datum(random_json(rng, 3), short_numeric_headers=rng.random() < 0.5)
        case 27:
            # ItemPointerData: bi_hi, bi_lo, offset (block 2^32 - 1 and offset 65535 too)
            block = rng.choice([0, 1, 65_536, 2**32 - 1, rng.randrange(2**32)])
            offset = rng.choice([0, 1, 65_535, rng.randrange(2**16)])
            return struct.pack("<HHH", block >> 16, block & 0xFFFF, offset)
        case 1007 | 1009 | 1231 | 1185 | 3807 | 1010:
            elem, typlen, align = ARRAYS[oid]
            elem_name = {1231: "an"}.get(oid, "")
            items = [
                None if rng.random() < 0.15 else _value(elem_name or name, elem, rng)
                for _ in range(rng.choice([0, 1, 3, 8]))
            ]
            if elem == 25:
                items = [None if i is None else i[:50] for i in items]  # no compression
            if len(items) == 8 and rng.random() < 0.5:
                return array_datum(elem, typlen, align, items, [2, 4], [1, 1])
            lbound = rng.choice([1, 1, 0, -5])
            return array_datum(elem, typlen, align, items, [len(items)], [lbound])
        case 142:
            return rng.choice(["", "<a>é</a>", "\n<b/>", '<?xml version="1.0"?><c/>']).encode()
    raise AssertionError(oid)


def _pglz_literals(raw: bytes) -> bytes:
    out = bytearray()
    for k in range(0, len(raw), 8):
        out.append(0)  # control byte: 8 literals
        out += raw[k : k + 8]
    return bytes(out)


def _varlena(payload: bytes, rng: random.Random) -> bytes:
    """The on-disk varlena of a payload: short, long, or inline compressed when long."""
    if len(payload) > 500:
        if rng.random() < 0.5:
            body, method = _pglz_literals(payload), 0
        else:
            body, method = lz4.block.compress(payload, store_size=False), 1
        return struct.pack("<II", ((8 + len(body)) << 2) | 0x02, len(payload) | method << 30) + body
    if len(payload) < 127 and rng.random() < 0.8:
        return bytes([((len(payload) + 1) << 1) | 1]) + payload
    return struct.pack("<I", (len(payload) + 4) << 2) + payload


def form_tuple(
    datums: list[bytes | None], rng: random.Random, raw: dict[int, bytes] | None = None
) -> RawTuple:
    """heap_form_tuple's layout of these datums (None: NULL) over COLUMNS; `raw` gives
    some columns' stored bytes as they are (header included)."""
    given = raw or {}
    natts = len(datums)
    nulls = any(d is None for d in datums)
    bitmap = bytearray((natts + 7) // 8) if nulls else bytearray()
    for k, d in enumerate(datums):
        if nulls and d is not None:
            bitmap[k >> 3] |= 1 << (k & 7)
    hoff = (23 + len(bitmap) + 7) & ~7
    data = bytearray(bitmap) + bytes(hoff - 23 - len(bitmap))
    off = hoff
    for k, ((_n, _o, _t, _nn, attlen, align, _d), d) in enumerate(
        zip(COLUMNS, datums, strict=False)
    ):
        if d is None:
            continue
        stored_bytes = given.get(k) or (_varlena(d, rng) if attlen == -1 else d)
        if attlen != -1 or stored_bytes[0] & 1 == 0:
            pad = (-off) % _ALIGN[align]
            data += bytes(pad)
            off += pad
        data += stored_bytes
        off += len(stored_bytes)
    return RawTuple(natts, 1 if nulls else 0, natts, hoff, bytes(data))


def random_row(rng: random.Random) -> list[bytes | None]:
    out: list[bytes | None] = []
    for name, oid, _t, notnull, attlen, _a, dropped in COLUMNS:
        if dropped:
            out.append(None if rng.random() < 0.5 else bytes(attlen))
        elif rng.random() < (0.02 if notnull else 0.15):
            out.append(None)  # NULL: a required field's zero value
        else:
            out.append(_value(name, oid, rng))
    if rng.random() < 0.1:
        out.pop()  # written before `late` was added: natts one short
    return out


class Python:
    """The Python path for one table definition."""

    def __init__(
        self, table: TableDef, excluded: frozenset[str] = frozenset(), decimal_mode: str = "precise"
    ) -> None:
        self.warnings: list[tuple[str, str]] = []
        self.rel = _rel(table)
        self.decimal_mode = decimal_mode
        self.plan = build_table_plan("native", self.rel, excluded, decimal_mode, self._warn)
        self.columns = [
            Column(
                c.attnum,
                c.name,
                c.type_oid,
                c.typmod,
                c.attlen,
                c.attbyval,
                c.attalign,
                c.not_null,
                c.dropped,
                LATE_DEFAULT if c.has_missing else None,
            )
            for c in table.columns
        ]
        self.codecs = {m.name: _codec(m.type_oid, m.name) for m in self.rel.columns}
        self.rows = RowEncoder(self.plan.fields, self._warn)
        self.key_of = KeyFromValue(self.plan.key_fields, self.plan.fields)
        envelope = self.plan.envelope_schema
        self.value_schema = fastavro.parse_schema(envelope["fields"][0]["type"][1])
        assert self.plan.key_schema is not None
        self.key_schema = fastavro.parse_schema(self.plan.key_schema)

    def _warn(self, event: str, column: str) -> None:
        self.warnings.append((event, column))

    def encode(self, raw: RawTuple) -> tuple[bytes, bytes]:
        row: list[ColumnValue] = []
        for col, datum in zip(self.columns, deform(raw, self.columns), strict=True):
            if col.dropped:
                continue
            codec = self.codecs[col.name]
            if datum is None:
                row.append(ColumnValue.constant(codec, None, None))
            elif isinstance(datum, ToastPointer):  # its chunks not in the change
                row.append(ColumnValue.constant(codec, UNCHANGED_TOAST, None))
            else:
                assert isinstance(datum, bytes)
                row.append(StoredValue(codec, datum))
        value = self.rows.datum(row)
        out = []
        for schema, datum in (
            (self.value_schema, value),
            (self.key_schema, self.key_of.datum(value)),
        ):
            buf = io.BytesIO()
            fastavro.schemaless_writer(buf, schema, datum)
            out.append(buf.getvalue())
        return out[0], out[1]


def _native_plan(table: TableDef, py: Python, stored_default: bool = False) -> Any:
    t = SimpleNamespace(plan=py.plan)
    rel = _rel(table, stored_default)
    plan, reason = compile_plan(table, rel, t, py.decimal_mode, NATIVE)  # type: ignore[arg-type]
    assert plan is not None, reason
    return plan


@pytest.mark.parametrize(
    ("excluded", "decimal_mode"),
    [
        (frozenset(), "precise"),
        (frozenset({"f4", "nm", "nv", "late"}), "precise"),
        (frozenset(), "string"),
        (frozenset(), "double"),
    ],
    ids=["all columns", "column filter", "decimals as strings", "decimals as doubles"],
)
def test_native_rows_equal_the_python_path(excluded: frozenset[str], decimal_mode: str) -> None:
    """2,000 random rows: equal Value and Key bytes, or a fallback the edges explain.
    Columns a filter excludes are deformed past and never written. Numeric and money
    columns are written in each decimal.handling.mode."""
    rng = random.Random(12)
    table = _table()
    py = Python(table, excluded, decimal_mode)
    plan = _native_plan(table, py)
    encoded = dropped = 0
    reasons: dict[str, int] = {}
    for n in range(2000):
        raw = form_tuple(random_row(rng), rng)
        out = plan.encode(raw.natts, raw.infomask, raw.hoff, raw.data, 0x1000 + n, True)
        natively_dropped = plan.take_dropped()
        if isinstance(out, str):
            reasons[out] = reasons.get(out, 0) + 1
            continue
        encoded += 1
        py.warnings.clear()
        assert out == py.encode(raw), n
        # the columns whose NaN/±Infinity became null: the ones Python warned about
        warned = [c for e, c in py.warnings if e == "numeric_special_value_dropped"]
        assert sorted(natively_dropped) == sorted(warned), n
        dropped += bool(warned)
        assert plan.take_dropped() == []  # taken once
    assert encoded > 300, (encoded, reasons)
    # NaN/±Infinity: precise mode writes null for a nullable column (n12, nv), as Python
    # does, and leaves a NOT NULL one (n30) to Python, which raises naming it; the string
    # and double modes keep them, natively.
    assert ("numeric Python decides" in reasons) == (decimal_mode == "precise"), reasons
    assert (dropped > 0) == (decimal_mode == "precise"), dropped
    assert ("float4 NaN" in reasons) == ("f4" not in excluded), reasons
    assert "xml declaration Python decides" in reasons, reasons


def test_missing_default_and_external_toast_fall_back() -> None:
    """A tuple written before `late` was added with a default reads attmissingval's
    stored datum natively (equal to the Python path) when the relation carries it, and
    falls back when it does not; an external TOAST pointer without its chunks (an
    unchanged value) is Debezium's placeholder, equal to the Python path, in a string
    or bytes field, and falls back in a key field."""
    table = _table(missing_default=True)
    py = Python(table)
    plan = _native_plan(table, py)
    stored = _native_plan(table, py, stored_default=True)
    for seed in range(100):  # a row without an edge value of its own (NaN, ...)
        rng = random.Random(seed)
        row = [None if c[6] else _value(c[0], c[1], rng) for c in COLUMNS]
        full = form_tuple(row, rng)
        out = plan.encode(full.natts, full.infomask, full.hoff, full.data, 1, True)
        if not isinstance(out, str):
            break
    assert not isinstance(out, str), out
    assert out == py.encode(full)
    older = form_tuple(row[:-1], rng)  # written before `late` was added with a default
    assert plan.encode(older.natts, older.infomask, older.hoff, older.data, 1, True) == (
        "attribute missing with a default"
    )
    native = stored.encode(older.natts, older.infomask, older.hoff, older.data, 1, True)
    assert native == py.encode(older) == py.encode(form_tuple([*row[:-1], LATE_DEFAULT], rng))
    # `code` as an on-disk TOAST pointer (varatt_external: 0x01, tag 18, 16 bytes)
    pointer = bytes([0x01, 18]) + struct.pack("<iIII", 100, 96, 4242, 16_400)
    external = form_tuple(row, rng, raw={3: pointer})
    assert (
        plan.encode(external.natts, external.infomask, external.hoff, external.data, 1, True)
        == "unchanged TOAST value in the key"
    )
    # varchar and bytea, not in the key: the placeholder's string and bytes
    names = [c[0] for c in COLUMNS]
    external = form_tuple(row, rng, raw={names.index("vc"): pointer, names.index("by"): pointer})
    native = plan.encode(external.natts, external.infomask, external.hoff, external.data, 1, True)
    assert not isinstance(native, str), native
    assert native == py.encode(external)
    assert native[0].count(UNAVAILABLE_BYTES) == 2


def test_bad_tuples_raise_the_python_classes() -> None:
    rng = random.Random(7)
    table = _table()
    py = Python(table)
    plan = _native_plan(table, py)
    raw = form_tuple(random_row(rng), rng)
    too_many = len(COLUMNS) + 1
    with pytest.raises(SchemaMismatchError) as native:
        plan.encode(too_many, raw.infomask, raw.hoff, raw.data, 0xABC, True)
    assert native.value.lsn == 0xABC
    assert native.value.relation == "public.natives"
    with pytest.raises(SchemaMismatchError) as python:
        deform(RawTuple(too_many, raw.infomask, too_many, raw.hoff, raw.data), py.columns)
    assert native.value.message == python.value.message
    for cut in range(len(raw.data) - 1, len(raw.data) // 2, -7):
        short = raw.data[:cut]
        try:
            deform(RawTuple(raw.natts, raw.infomask, raw.natts, raw.hoff, short), py.columns)
            expected: type[Exception] | None = None
        except (SchemaMismatchError, DecodeError) as exc:
            expected = type(exc)
        try:
            out = plan.encode(raw.natts, raw.infomask, raw.hoff, short, 1, True)
        except (SchemaMismatchError, DecodeError) as exc:
            assert type(exc) is expected, cut
        else:
            assert expected is None or isinstance(out, str), cut


def _record(fields: list[dict[str, Any]], name: str) -> Any:
    return fastavro.parse_schema({"type": "record", "name": name, "fields": fields})


def test_envelope_equals_fastavros() -> None:
    """`envelope` over parts equals fastavro writing the whole Envelope."""
    assert NATIVE is not None
    rng = random.Random(3)
    table = _table()
    py = Python(table)
    envelope = fastavro.parse_schema(py.plan.envelope_schema)
    src = source_schema()["fields"]
    names = [f["name"] for f in src]
    head = _record(src[: names.index("sequence")], "Head")
    mid = _record(src[names.index("sequence") + 1 : names.index("lsn")], "Mid")
    tail = _record(src[names.index("lsn") + 1 :], "Tail")
    checked = 0
    for n in range(200):
        raw = form_tuple(random_row(rng), rng)
        try:
            value_bytes, _key = py.encode(raw)
        except PluginError:
            continue  # NaN in a NOT NULL numeric: no record to wrap
        checked += 1
        value = fastavro.schemaless_reader(io.BytesIO(value_bytes), py.value_schema, None)
        lsn = rng.randrange(2**40)
        xid = rng.randrange(2**32)
        ts_ns = rng.randrange(2**62)
        last = rng.choice([None, rng.randrange(2**40)])
        seq_head = f'[{"null" if last is None else chr(34) + str(last) + chr(34)},"'
        source = {
            "version": "3.6.1.Final-pgcdc",
            "connector": "postgresql",
            "name": "ñative",
            "ts_ms": ts_ns // 10**6 - 5,
            "snapshot": "false",
            "db": "db",
            "sequence": f'{seq_head}{lsn}"]',
            "ts_us": ts_ns // 1000 - 5000,
            "ts_ns": ts_ns - 5_000_000,
            "schema": "public",
            "table": "natives",
            "txId": xid,
            "lsn": lsn,
            "xmin": None,
            "origin": None,
            "origin_lsn": None,
        }
        op = rng.choice(["c", "u", "d"])
        block = (
            None
            if rng.random() < 0.2
            else {"id": f"{xid}:{lsn}", "total_order": n + 1, "data_collection_order": n // 2 + 1}
        )
        datum = {
            "before": value if op == "d" else None,
            "after": None if op == "d" else value,
            "source": source,
            "transaction": block,
            "op": op,
            "ts_ms": ts_ns // 10**6,
            "ts_us": ts_ns // 1000,
            "ts_ns": ts_ns,
        }
        want = io.BytesIO()
        fastavro.schemaless_writer(want, envelope, datum)

        def part(schema: Any, source: dict[str, Any] = source) -> bytes:
            buf = io.BytesIO()
            fastavro.schemaless_writer(buf, schema, source)
            return buf.getvalue()

        got = NATIVE.envelope(
            b"HDR",
            value_bytes if op == "d" else None,
            None if op == "d" else value_bytes,
            part(head),
            seq_head.encode(),
            lsn,
            part(mid),
            part(tail),
            None if block is None else f"{xid}:".encode(),
            0 if block is None else block["total_order"],
            0 if block is None else block["data_collection_order"],
            op,
            ts_ns,
        )
        assert got == b"HDR" + want.getvalue(), n
    assert checked > 150


def test_transaction_value_and_avro_primitives_equal_fastavros() -> None:
    """`transaction_value`, `avro_long` and `avro_string` write what fastavro writes for
    TransactionMetadataValue and for longs and strings (BEGIN's nulls, END's counts,
    empty and many collections, non-ASCII names, extreme longs)."""
    schema = fastavro.parse_schema(static_with_refs("transaction_value"))
    rng = random.Random(5)
    header = b"\x00\x00\x00\x00\x07"
    cases: list[tuple[str, str, int | None, list[tuple[str, int]] | None, int]] = [
        ("BEGIN", "1:2", None, None, 0),
        ("END", "1:2", 0, [], -1),
        ("END", "4294967295:18446744073709551615", 2**63 - 1, [("ñ.public.tâble", 1)], -(2**63)),
    ]
    for _ in range(200):
        names = [
            f"p.s{rng.randrange(50)}.t{'é' * rng.randrange(3)}" for _ in range(rng.randrange(6))
        ]
        cases.append(
            (
                rng.choice(["BEGIN", "END"]),
                f"{rng.randrange(2**32)}:{rng.randrange(2**40)}",
                rng.choice([None, rng.randrange(2**40)]),
                rng.choice([None, [(n, rng.randrange(1, 10**6)) for n in names]]),
                rng.randrange(-(2**40), 2**42),
            )
        )
    for status, txn_id, count, collections, ts_ms in cases:
        want = io.BytesIO()
        datum = transaction_datum(status, txn_id, count, collections, ts_ms)
        fastavro.schemaless_writer(want, schema, datum)
        got = _native.transaction_value(header, status, txn_id, count, collections, ts_ms)
        assert got == header + want.getvalue(), datum
    for n in [
        0,
        1,
        -1,
        63,
        64,
        -64,
        -65,
        2**31,
        2**63 - 1,
        -(2**63),
        *(rng.randrange(-(2**62), 2**62) for _ in range(50)),
    ]:
        buf = io.BytesIO()
        fastavro.schemaless_writer(buf, "long", n)
        assert _native.avro_long(n) == buf.getvalue(), n
    for s in ["", "a", "ñative", "x" * 200, "\U0001f600"]:
        buf = io.BytesIO()
        fastavro.schemaless_writer(buf, "string", s)
        assert _native.avro_string(s) == buf.getvalue(), s
