"""The avro plugin's native fast path: WAL rows straight from the heap tuple to the
Envelope's wire-format bytes, through the Rust row encoder (service._native.RowPlan).

Receives: from `AvroPlugin.change` (when `service.impl.native_rows()` selected the
native core at startup), each row change with its registered `_Table`; from
`AvroPlugin.changes`, a run of a transaction's row changes. The rows come
from the WAL row decoder as `service.types.rowdecode.DecodedRow`s, which keep the
logged `RawTuple` and the `TableDef` they were decoded against.
Hands on: through `ctx.write`, exactly the `OutputRecord`s the Python path
(`AvroPlugin._event`, fastavro) writes for that change, byte for byte: key, value,
headers, and the DELETE's tombstone. `change` returns False, having done nothing, for
every change it leaves to the Python path. `changes` writes the same records, in the
same order, the events of consecutive changes of one table definition and op as one
`RecordRun` of ready bytes (`ctx.write_run`, one Rust call per run:
`RowPlan.encode_events`), a DELETE's event followed by its tombstone when
`kafka.tombstones_on_delete`; the events of one run share one clock reading.

How:
- A plan (`RowPlan`) is compiled once per table definition (per `_Table`, i.e. per
  relation oid and `defined_at`) from the definition's `ColumnDef`s (attlen, attalign,
  dropped, atthasmissing) and, per Value field, the encoding the Python schema builder
  chose (`field_kind`):
  - exactly the mapping `connectors.avro.schema.type_mapping` gives a built-in type of
    `NATIVE_TYPES` (the same object): the integers, floats, texts, json and jsonb, xml,
    dates and times, interval, timetz, uuid, "char", inet, cidr, macaddr, macaddr8,
    point (the Point record), and the types published as their output text: the other
    geometric types, tsvector, tsquery, jsonpath, the built-in ranges and multiranges,
    and user-defined ones over a built-in range's subtype or over int2, oid, float4,
    float8, text, varchar, time, timetz, interval, inet or cidr (`user_range_kind`);
    the reg* types and aclitem (15's 12-byte form and 16+'s; `NAMED_TYPES`), as their
    text from the catalog names the resolver put in `RelationInfo.name_cache`, which the
    plan shares (a table with such a column and no cache has no plan);
  - by schema: numeric and money in each decimal.handling.mode (precise: Decimal or
    VariableScaleDecimal; string: the output text; double), bit and varbit (Bits;
    bit(1) a boolean), an enum (Enum: the label of the stored pg_enum OID, from the
    column's `enum_oids`);
  - a domain over one of those base types, as its base type (with the domain's typmod);
  - the extension types hstore (Json, or the map in hstore.handling.mode=map), ltree
    (Ltree), lquery, cube, earth, seg and the isn types (their text), PostGIS geometry
    and geography (Geometry / Geography {wkb, srid}), pgvector's vector, halfvec and
    sparsevec (DoubleVector, FloatVector, SparseDoubleVector);
  - a composite whose fields are built-in types the text plugin prints
    (`service.output.native_text.composite_spec`): the string of record_out's text;
  - an array of any of those, a domain over such an array (as the array), and an array
    of a domain over one of them (`element_spec`: its header names the domain, its
    items are the base type's, with the domain's typmod); not nested; with the
    element's layout from `service.types.registry.builtin_layout` (aclitem's, which
    differs between 15 and 16+, told by the array column's attalign).
  A table with any other mapped column (composites of other fields, ranges of other
  subtypes, arrays of extension
  types, arrays of other types, domains over enums, ...)
  gets no plan: the Python path handles all its rows (`not_native` names why).
- Per row, Rust deforms the tuple (heap_deform_tuple) and writes the Value and Key
  records, or says why the row is Python's (a typed fallback: a `str` reason, counted in
  `fallbacks`): an external or unchanged TOAST pointer, a missing attribute whose
  default the row decoder does not read as a stored datum (`RelationInfo.missing_datums`:
  attmissingval of a jsonb or text-valued type; the stored ones are deformed in Rust, as
  getmissingattr), NaN/±Infinity numerics in `precise` mode in a NOT NULL column (where
  Python raises naming it; in a nullable column Rust writes null as Python does, and
  `_warn_dropped` gives Python's `numeric_special_value_dropped` warning; the string and
  double modes write them natively), text that is not UTF-8, a value outside its Avro
  type, an xml value with an XML declaration, a stored form the Python reference
  rejects (a damaged jsonb, inet or bit string, an enum OID without a label: Python
  raises its typed error), a reg* or aclitem value naming an OID whose name is not in the
  name cache yet (the Python path resolves it, which puts it there: the next row with
  that OID is native). A fallback row is encoded entirely by the Python path, never
  mixed.
- An UPDATE carrying an old tuple (REPLICA IDENTITY FULL, or a key logged with an
  external value) is native when both tuples encode and the key did not change: the old
  tuple's Key record is byte-equal to the new one's (`_encode_update`). Byte equality is
  the Python path's value comparison (`schema.key_values`) only for key columns whose
  values compare by their bytes (`EXACT_KEY_TYPES`: no floats, where NaN differs from
  itself, and no numeric, where 1.0 equals 1.00); a table with another key type leaves
  such updates to Python. A key change goes to Python as a whole (a DELETE, its
  tombstone and a CREATE, with the `__debezium.newkey`/`oldkey` headers).
- Changes the Python path decides as a whole stay there: a key change, a DELETE
  without an old tuple, snapshot reads handed over as changes, rows not decoded from
  WAL, transactions without a commit time.
- Snapshot reads of a chunk the native core split (`snapshot_rows`, called by
  connectors.tablesnap.snapshotter with the chunk's `CopyChunk`): the same plan, its
  columns read from the COPY rows' send format (`RowPlan.encode_copy`, tablesnap::copy),
  events as `change_python` writes a read (op "r", no transaction block, the snapshot
  marker in `source`); a table with a column the COPY rewrite does not cover is the
  Python path's (`avro_native_snapshot_off`, counted in `fallbacks`). A snapshot
  reader's thread may encode a chunk's records ahead (`snapshot_prepare`, the GIL
  released), once a chunk of the same table definition was published: publication then
  only writes each row's Envelope around its record (`snapshot_rows(prepared=...)`).
- The Envelope is concatenated (an Avro record is its fields in order): the
  before/after unions and records, the `source` record from parts built once per
  transaction and table (`_source_parts`: everything but `sequence` and `lsn`), the
  transaction block, op and the ts fields, behind the Confluent header of the
  registered schema id (`service._native.envelope`).

The transaction bookkeeping (BEGIN, event counts, the source cache) is the plugin's
own (`_begin_once`, `_count`, `_row_source`), called in the order `_event` calls it, so
native and Python events interleave within one transaction.
"""

from __future__ import annotations

from bisect import bisect_left
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

import structlog

from connectors.avro.codec import AvroEncoder, wire_header
from connectors.avro.schema import FieldPlan, decimal_schema, type_mapping
from connectors.avro.table import Table as _Table
from connectors.schemas import load_static
from service.errors import DecodeError, SchemaMismatchError
from service.output.api import (
    ChangeOp,
    ColumnMeta,
    ColumnValue,
    OutputRecord,
    PluginContext,
    RecordRun,
    RelationInfo,
    RowChange,
    TxnInfo,
)
from service.output.native_text import (
    EXT_KINDS,
    NAMED_KINDS,
    NAMED_TYPES,
    OUTPUT_TYPES,
    RANGES,
    CompositeSpec,
    composite_spec,
    enum_labels,
    stored_form,
    user_range_kind,
)
from service.pgconst import UNIX_EPOCH_USECS
from service.schema.tabledef import TableDef
from service.tablesnap.markers import is_initial
from service.types.deform import TYPALIGN_BYTES
from service.types.registry import builtin_layout
from service.types.rowdecode import DecodedRow, RowRun

if TYPE_CHECKING:
    from service._native import HeapRows  # an InsertRows' rows in the native core

log = structlog.get_logger(__name__)

# Built-in types the native encoder writes, by OID: (kind, attlen of the stored form).
# Each kind writes exactly the value its `type_mapping` mapping converts (checked by
# identity with that mapping in `field_kind`).
NATIVE_TYPES: dict[int, tuple[str, int]] = {
    16: ("bool", 1),
    17: ("bytea", -1),
    18: ("char", 1),  # "char": charout's text
    19: ("name", 64),
    20: ("int8", 8),
    21: ("int2", 2),
    23: ("int4", 4),
    25: ("text", -1),
    26: ("oid", 4),
    114: ("text", -1),  # json: stored as its text
    142: ("xml", -1),  # xml_out's text (a declaration falls back)
    650: ("cidr", -1),  # cidr_out's text
    700: ("float4", 4),
    701: ("float8", 8),
    774: ("macaddr8", 8),
    829: ("macaddr", 6),
    869: ("inet", -1),  # inet_out's text
    1042: ("text", -1),  # bpchar
    1043: ("text", -1),  # varchar
    1082: ("date", 4),
    1083: ("time", 8),
    1114: ("timestamp", 8),
    1184: ("timestamptz", 8),
    1186: ("interval", 16),  # MicroDuration
    1266: ("timetz", 12),  # ZonedTime
    2950: ("uuid", 16),
    3802: ("jsonb", -1),  # jsonb_out's text
    600: ("point_record", 16),  # io.debezium.data.geometry.Point
    **OUTPUT_TYPES,  # published as their output text
    # The reg* types (regproc.c: regprocout ... regcollationout) and aclitem (acl.c:
    # aclitemout): their text, from the catalog names the resolver put in the plan's
    # name cache (`RelationInfo.name_cache`). aclitem is 16 bytes from 16 on; 15's
    # 12-byte form is `ACLITEM_15` (`stored_form` tells them by the stored length).
    **NAMED_TYPES,
}
_NUMERIC, _MONEY, _BIT, _VARBIT = 1700, 790, 1560, 1562

ColumnSpec = tuple[str, int, int, bool, bool, str, int, int, bool]
FieldKind = tuple[str, int, int, int]  # kind, scale, precision, attlen of the stored form
# An array's element: kind, scale, precision, the type OID its header names, typlen,
# typalign in bytes.
ElemSpec = tuple[str, int, int, int, int, int]


# Key column types whose Python values are equal exactly when their Avro encodings are
# (`_encode_update`): bool, bytea, "char", name, int8, int2, int4, text, oid, bpchar,
# varchar, date, time, timestamp, timestamptz, uuid.
EXACT_KEY_TYPES = frozenset(
    {16, 17, 18, 19, 20, 21, 23, 25, 26, 1042, 1043, 1082, 1083, 1114, 1184, 2950}
)


def _noop_warn(event: str, column: str) -> None:
    """type_mapping's warn for probing a mapping (only the numeric converters warn)."""


def _base(meta: ColumnMeta) -> tuple[int, int] | None:
    """(type OID, typmod) whose stored form a column holds: its own for a built-in base
    type, the base type's for a domain over one (with the domain's typmod when the
    column has none, as type_mapping resolves it); None for anything else."""
    if meta.ext or meta.stored_bytes_type:
        return None
    if meta.kind == "b" or (meta.kind == "r" and meta.type_oid in RANGES):
        return meta.type_oid, meta.typmod
    if meta.kind == "d" and meta.elem_type_oid and meta.elem_kind == "b":
        return meta.elem_type_oid, meta.typmod if meta.typmod >= 0 else meta.elem_typmod
    return None


def element_spec(meta: ColumnMeta, decimal_mode: str, array_align: str = "") -> ElemSpec | None:
    """The element of an array column whose items the native encoder writes (a built-in
    type of `NATIVE_TYPES`, numeric, money, bit strings, or an enum; or a domain over
    one), or None. `array_align`, the array column's attalign, tells the layout of an
    element type whose layout differs between versions (aclitem: `builtin_layout`);
    without it an array of one has no spec."""
    if meta.kind != "a" or meta.ext or meta.stored_bytes_type or not meta.elem_type_oid:
        return None
    elem = ColumnMeta(
        meta.name,
        meta.attnum,
        meta.elem_type_oid,
        meta.type_name,
        # an array's typmod is its elements' (numeric(10,3)[], bit(4)[]), else a domain's
        # (as type_mapping)
        meta.typmod if meta.typmod >= 0 else meta.elem_typmod,
        False,
        kind=meta.elem_kind,
        enum_labels=meta.enum_labels,
        enum_oids=meta.enum_oids,
    )
    # The OID the array's header names: a domain's for an array of one (its elements are
    # stored as the domain's base type, whose layout and mapping they take).
    header = meta.elem_stored_oid or elem.type_oid
    if elem.kind == "e":
        return ("enum", 0, 0, header, 4, 4) if elem.enum_by_oid() else None
    if elem.kind == "c":
        # items: each composite's record_out text (a row type: typlen -1, typalign d)
        return ("composite", 0, 0, header, -1, 8) if composite_spec(meta) else None
    layout = builtin_layout(elem.type_oid, array_align)
    if layout is None or TYPALIGN_BYTES.get(layout[1]) is None:
        return None
    mapping = type_mapping(elem, decimal_mode, _noop_warn)
    found = field_kind(elem, FieldPlan(elem.name, elem.name, mapping, True), decimal_mode)
    if found is None or found[0] == "array":
        return None
    kind, attlen = stored_form((found[0], found[3]), layout[0])
    if attlen != layout[0]:
        return None
    return kind, found[1], found[2], header, attlen, TYPALIGN_BYTES[layout[1]]


# Extension types whose Debezium value is not their text: the native kind writing it.
_EXT_RECORDS = {
    "geometry": "geometry_record",  # {wkb, srid}
    "geography": "geography_record",  # the same record; its snapshot rewrite is geodetic
    "vector": "double_vector",
    "halfvec": "float_vector",
    "sparsevec": "sparse_vector",
}


def _extension_kind(meta: ColumnMeta, mapping: Any, decimal_mode: str) -> FieldKind | None:
    """An extension type's native encoding (or a domain's over one): hstore as Json or
    as the map (`hstore.handling.mode`, read off the mapping), ltree as Ltree, lquery,
    cube, earth, seg and the isn types as their text, PostGIS as Geometry / Geography,
    pgvector as DoubleVector, FloatVector, SparseDoubleVector; None for anything else."""
    if meta.stored_bytes_type or meta.kind not in ("b", "d"):
        return None
    if meta.ext == "hstore":
        mode = "map" if mapping.kind == "map" else "json"
        expected = type_mapping(meta, decimal_mode, _noop_warn, hstore_mode=mode)
        if mapping.schema != expected.schema:
            return None
        return f"hstore_{mode}", 0, 0, -1
    found = EXT_KINDS.get(meta.ext)
    if found is None:
        return None
    if mapping.schema != type_mapping(meta, decimal_mode, _noop_warn).schema:
        return None
    return _EXT_RECORDS.get(meta.ext, found[0]), 0, 0, found[1]


def field_kind(
    meta: ColumnMeta, plan: FieldPlan, decimal_mode: str, array_align: str = ""
) -> FieldKind | None:
    """(kind, scale, precision, attlen) of the native encoding of one Value field, or None
    when the field's mapping is not one the native encoder writes byte-identically.
    `array_align`: an array column's attalign (`element_spec`)."""
    mapping = plan.mapping
    if meta.ext:
        return _extension_kind(meta, mapping, decimal_mode)
    if meta.kind == "c":
        # A composite: the string of its record_out text.
        if composite_spec(meta) is None:
            return None
        if mapping is not type_mapping(meta, decimal_mode, _noop_warn):
            return None
        return "composite", 0, 0, -1
    if meta.kind == "a":
        # An Avro array of ["null", item]; the items as the element's own mapping.
        if element_spec(meta, decimal_mode, array_align) is None or mapping.kind != "array":
            return None
        if mapping.schema != type_mapping(meta, decimal_mode, _noop_warn).schema:
            return None
        return "array", 0, 0, -1
    if enum_labels(meta) is not None:
        # io.debezium.data.Enum: the label, a string (the schema names the allowed ones);
        # a domain over an enum maps as the enum (its root type), its datums the enum's
        if mapping.schema == type_mapping(meta, decimal_mode, _noop_warn).schema:
            return "enum", 0, 0, 4
        return None
    user = user_range_kind(meta)
    if user is not None:
        # a user-defined range or multirange: the string of its text, as a built-in's
        return (user, 0, 0, -1) if mapping is type_mapping(meta, decimal_mode, _noop_warn) else None
    base = _base(meta)
    if base is None:
        return None
    oid, typmod = base
    probe = ColumnMeta(meta.name, meta.attnum, oid, meta.type_name, typmod, False)
    if oid in (_NUMERIC, _MONEY) and decimal_mode != "precise":
        # decimal.handling.mode=string: the output text; =double: the nearest double.
        name = "numeric" if oid == _NUMERIC else "money"
        attlen = -1 if oid == _NUMERIC else 8
        if decimal_mode == "string" and mapping.schema == "string" and mapping.use_text:
            return f"{name}_text", 0, 0, attlen
        if decimal_mode == "double" and mapping.schema == "double" and not mapping.use_text:
            return f"{name}_double", 0, 0, attlen
        return None
    if oid == _NUMERIC:
        schema = mapping.schema
        if mapping.kind == "bytes" and typmod >= 4:
            precision, scale = ((typmod - 4) >> 16) & 0xFFFF, (typmod - 4) & 0x7FF
            if schema == decimal_schema(precision, scale, True):
                return "decimal", scale, precision, -1
            return None
        if mapping.kind == "record" and schema == load_static("variable_scale_decimal"):
            return "variable_decimal", 0, 0, -1
        return None
    if oid == _MONEY:
        # Decimal(64, 2) of the cents in precise mode.
        if mapping.schema == decimal_schema(64, 2, False):
            return "money", 0, 0, 8
        return None
    if oid in (_BIT, _VARBIT):
        # bit(1) is a boolean, any other length io.debezium.data.Bits of its length.
        if mapping.schema != type_mapping(probe, decimal_mode, _noop_warn).schema:
            return None
        return ("bit1" if mapping.kind == "boolean" else "bits"), 0, 0, -1
    found = NATIVE_TYPES.get(oid)
    probe = ColumnMeta(meta.name, meta.attnum, oid, meta.type_name, -1, False)
    if found is None and meta.kind == "b" and meta.output_src == "textout":
        # An extension's type whose output is textout (citext): its stored form is text's,
        # and its mapping the string of its text.
        if mapping is type_mapping(probe, decimal_mode, _noop_warn) and mapping.use_text:
            return "text", 0, 0, -1
        return None
    if found is None:
        return None
    if mapping is not type_mapping(probe, decimal_mode, _noop_warn):
        return None
    return found[0], 0, 0, found[1]


def compile_plan(
    table: TableDef,
    rel: RelationInfo,
    t: _Table,
    decimal_mode: str,
    native: Any,
) -> tuple[Any | None, str]:
    """(the RowPlan of a table definition, "") or (None, why it has none)."""
    rel_columns = {m.name: m for m in rel.columns}
    fields = {p.column: p for p in t.plan.fields}
    specs: list[ColumnSpec] = []
    named = False  # a column prints catalog names (the plan gets `rel.name_cache`)
    index: dict[str, int] = {}
    labels: dict[int, dict[int, str]] = {}  # an enum column's index -> its labels
    elements: dict[int, ElemSpec] = {}  # an array column's index -> its element
    composites: dict[int, CompositeSpec] = {}  # a composite column's index -> its fields
    # a column added with a default -> attmissingval's stored datum (getmissingattr)
    stored_missing = dict(rel.missing_datums)
    missing: dict[int, bytes] = {}
    for c in table.columns:
        align = TYPALIGN_BYTES.get(c.attalign)
        if align is None:
            return None, f"column {c.name}: attalign {c.attalign!r}"
        kind, scale, precision, optional = "", 0, 0, False
        kind_named = False  # an array of a kind in NAMED_KINDS
        plan = None if c.dropped else fields.get(c.name)
        if plan is not None:
            meta = rel_columns.get(c.name)
            found = None if meta is None else field_kind(meta, plan, decimal_mode, c.attalign)
            if found is None:
                return None, f"column {c.name}: type {c.type_oid} is not native"
            kind, scale, precision, attlen = found
            kind, attlen = stored_form((kind, attlen), c.attlen)
            if attlen != c.attlen:
                return None, f"column {c.name}: attlen {c.attlen}"
            optional = plan.optional
            if kind == "enum" and meta is not None:
                labels[len(specs)] = enum_labels(meta) or {}
            if kind == "composite" and meta is not None:
                comp = composite_spec(meta)
                if comp is None:
                    return None, f"column {c.name}: fields are not native"
                composites[len(specs)] = comp
            if kind == "array" and meta is not None:
                elem = element_spec(meta, decimal_mode, c.attalign)
                if elem is None:
                    return None, f"column {c.name}: element type is not native"
                elements[len(specs)] = elem
                if elem[0] == "composite":
                    comp = composite_spec(meta)
                    if comp is None:
                        return None, f"column {c.name}: fields are not native"
                    composites[len(specs)] = comp
                if elem[0] == "enum":
                    labels[len(specs)] = dict(zip(meta.enum_oids, meta.enum_labels, strict=True))
                kind_named = elem[0] in NAMED_KINDS
            if kind in NAMED_KINDS or kind_named:
                if rel.name_cache is None:
                    return None, f"column {c.name}: no catalog name cache"
                named = True
        datum = stored_missing.get(c.attnum)
        if datum is not None and c.has_missing and not c.dropped:
            missing[len(specs)] = datum
        index[c.name] = len(specs)
        specs.append(
            (c.name, c.attlen, align, c.dropped, c.has_missing, kind, scale, precision, optional)
        )
    if [p.column for p in t.plan.fields] != [s[0] for s in specs if s[5]]:
        return None, "value fields are not in attnum order"
    key = [index[p.column] for p in t.plan.key_fields]
    relation = f"{table.schema}.{table.name}"
    plan_obj = native.RowPlan(
        specs,
        key,
        relation,
        SchemaMismatchError,
        DecodeError,
        labels,
        elements,
        composites,
        missing,
        rel.name_cache if named else None,
    )
    return plan_obj, ""


def _header(serialize: Callable[[Any], bytes] | None) -> bytes | None:
    """The wire header of a registered serializer (an AvroEncoder's bound encode)."""
    owner = getattr(serialize, "__self__", None)
    if isinstance(owner, AvroEncoder):
        return wire_header(owner.schema_id)
    return None


def _with_tombstones(
    keys: list[bytes | None], values: list[bytes | None], lsns: list[int]
) -> tuple[list[bytes | None], list[bytes | None], list[int]]:
    """The DELETE events `keys`/`values`, each followed by its tombstone (same key, null
    value), as `AvroPlugin._tombstone` writes one after each DELETE when
    `kafka.tombstones_on_delete`."""
    n = len(values)
    both_keys: list[bytes | None] = [None] * (2 * n)
    both_keys[0::2] = keys
    both_keys[1::2] = keys
    both_values: list[bytes | None] = [None] * (2 * n)
    both_values[0::2] = values
    both_lsns = [0] * (2 * n)
    both_lsns[0::2] = lsns
    both_lsns[1::2] = lsns
    return both_keys, both_values, both_lsns


def _encoded_row(change: RowChange) -> Sequence[ColumnValue] | None:
    """The row whose record an event of `change` carries natively: the old row of a
    DELETE, the new one of an INSERT or UPDATE, None for an UPDATE with its old tuple
    (a key change or REPLICA IDENTITY FULL: the Python path's key comparison)."""
    if change.op is ChangeOp.DELETE:
        return change.old
    return change.new if change.old is None else None


def _op_code(op: ChangeOp) -> str:
    """The Envelope's op of a change: compared, not looked up (an Enum hashes in Python)."""
    return "d" if op is ChangeOp.DELETE else "c" if op is ChangeOp.INSERT else "u"


class _Entry:
    """A `_Table`'s compiled native plan (or why it has none) and its headers."""

    __slots__ = (
        "drops",
        "key_exact",
        "key_header",
        "plan",
        "reason",
        "table",
        "value_header",
        "want_key",
    )

    def __init__(self, table: TableDef, plan: Any | None, reason: str, t: _Table) -> None:
        self.table = table
        self.plan = plan
        self.reason = reason
        self.value_header = _header(t.value)
        self.key_header = _header(t.key) if t.key is not None else None
        self.want_key = t.key is not None and t.key_of is not None
        types = {c.name: c.type_oid for c in table.columns if not c.dropped}
        # An UPDATE's old and new Key records compare by their bytes (`_encode_update`).
        self.key_exact = all(types.get(p.column) in EXACT_KEY_TYPES for p in t.plan.key_fields)
        # A nullable field that may be a decimal (bytes: Decimal, record:
        # VariableScaleDecimal; a superset): the encoder may drop a NaN there
        # (`NativeRows._warn_dropped`).
        self.drops = any(
            f.optional and f.mapping.kind in ("bytes", "record") for f in t.plan.fields
        )


# snapshot_rows' compiled table: the _Table, the TableDef, the entry, each column's COPY
# field, and why the table is not native ("" when it is)
_CopyEntry = tuple[_Table, TableDef, "_Entry", list[int], str]


class CopyPrepared(NamedTuple):
    """A chunk's records encoded ahead of publication (`NativeRows.snapshot_prepare`):
    by `plan` (the entry's RowPlan), with the columns at `spec` and a Key record when
    `want_key`; `records` is the `CopyRecords`. Publication uses it only when its own
    plan, spec and key choice are these."""

    plan: Any
    spec: list[int]
    want_key: bool
    records: Any


class _Hot:
    """What the changes of one table definition in one transaction share (`_hot_for`):
    checked by identity per change, rebuilt when the transaction, the `_Table` or the
    definition differs from the last change's."""

    __slots__ = ("entry", "parts", "st", "t", "table")

    def __init__(
        self,
        st: Any,
        t: _Table,
        table: TableDef,
        entry: _Entry,
        parts: tuple[bytes, bytes, bytes, bytes, bytes] | None,
    ) -> None:
        self.st = st
        self.t = t
        self.table = table
        self.entry = entry
        self.parts = parts


class NativeRows:
    """The native fast path of one AvroPlugin (see the module docstring)."""

    def __init__(self, plugin: Any, native: Any, clock: Callable[[], int]) -> None:
        """`native`: the extension module; `clock`: the wall clock in ns (the plugin's)."""
        self.plugin = plugin
        self._clock = clock
        self._native = native
        self._envelope = native.envelope
        self._transaction_value = native.transaction_value
        self._entries: dict[int, tuple[_Table, _Entry]] = {}
        self._parts_for: object = None  # the _TxnState the parts below belong to
        self._parts: dict[str, tuple[bytes, bytes, bytes, bytes, bytes]] = {}
        self._txn_parts: tuple[bytes, bytes, bytes, bytes] = (b"",) * 4
        self._by_table: dict[str, tuple[bytes, bytes, bytes]] = {}  # _table_parts
        # transaction_record's last serializers, with their wire headers
        self._tx_headers: tuple[object, bytes | None, bytes | None] | None = None
        self._last: tuple[_Table, _Entry] | None = None  # the entry of the last change
        # snapshot_rows' plans by (id(_Table), id(TableDef)): the _Table, the TableDef,
        # the entry, each column's COPY field, and why the table is not native ("" when
        # it is)
        self._copy_entries: dict[tuple[int, int], _CopyEntry] = {}
        # the last native plan published per TableDef (by id, the TableDef kept to check
        # it), with its spec and key choice: what `snapshot_prepare` encodes ahead with
        self._copy_ahead: dict[int, tuple[TableDef, Any, list[int], bool]] = {}
        self._hot: _Hot | None = None  # what the last change's transaction and table share
        self.native = 0  # rows written natively
        self.ahead = 0  # of those, snapshot rows whose record `snapshot_prepare` made
        # of those, rows with TOAST chunks encoded in groups (PluginSink._flush_toasted)
        self.toasted = 0
        self.fallbacks: Counter[str] = Counter()  # rows left to Python, by reason

    def _entry(self, t: _Table, rel: RelationInfo, table: TableDef) -> _Entry:
        found = self._entries.get(id(t))
        if found is not None and found[0] is t and found[1].table is table:
            return found[1]
        entry = self._compile(t, rel, table)
        if entry.plan is None:
            log.info("avro_native_rows_off", topic=t.plan.topic, reason=entry.reason)
        self._entries[id(t)] = (t, entry)
        return entry

    def _compile(self, t: _Table, rel: RelationInfo, table: TableDef) -> _Entry:
        """The `_Entry` of `t` as `table` defines it (its plan, or why it has none)."""
        plan, reason = compile_plan(table, rel, t, self.plugin.decimal_mode, self._native)
        entry = _Entry(table, plan, reason, t)
        if plan is not None and (
            entry.value_header is None or (t.key is not None and entry.key_header is None)
        ):
            entry.plan, entry.reason = None, "serializer is not an AvroEncoder"
        return entry

    def _source_parts(
        self, st: Any, txn: TxnInfo, t: _Table, lsn: int
    ) -> tuple[bytes, bytes, bytes, bytes, bytes]:
        """The `source` record of this transaction and table around its two changing
        fields: (fields before `sequence`, the sequence text before this LSN, fields
        between `sequence` and `lsn`, fields after `lsn`), and the transaction block's
        id before its LSN ("<xid>:"). Joined from a part per table (`_table_parts`) and
        one per transaction (`_transaction_parts`)."""
        if self._parts_for is not st:
            self._parts_for, self._parts = st, {}
            self._txn_parts = self._transaction_parts(st, txn)
        found = self._parts.get(t.collection)
        if found is not None:
            return found
        ts_ms, ts_mid, xid, block_head = self._txn_parts
        ident, db, names = self._table_parts(t)
        # The sequence's last commit, as `_row_source` takes it: at the table's first event.
        last = self.plugin._last_commit_lsn
        prefix = b'[null,"' if last is None else f'["{last}","'.encode()
        found = (ident + ts_ms + db, prefix, ts_mid + names + xid, b"\x00\x00\x00", block_head)
        self._parts[t.collection] = found
        return found

    def _table_parts(self, t: _Table) -> tuple[bytes, bytes, bytes]:
        """What `AvroPlugin._source` gives every streamed event of table `t`, encoded:
        (version, connector, name), (snapshot "false", db), (schema, table). The source's
        xmin, origin and origin_lsn are always null in pgcdc: the parts' tail."""
        found = self._by_table.get(t.collection)
        if found is not None:
            return found
        const = self.plugin._source(None, t.schema, t.table, 0)
        if any(const[k] is not None for k in ("xmin", "origin", "origin_lsn")):
            raise AssertionError("source xmin/origin are always null in pgcdc")
        _string = self._native.avro_string
        found = (
            b"".join(_string(const[k]) for k in ("version", "connector", "name")),
            b"\x00" + _string("false") + _string(const["db"]),  # ["string", "null"]: branch 0
            _string(const["schema"]) + _string(const["table"]),
        )
        self._by_table[t.collection] = found
        return found

    def _transaction_parts(self, st: Any, txn: TxnInfo) -> tuple[bytes, bytes, bytes, bytes]:
        """What `AvroPlugin._source` gives every event of this committed transaction,
        encoded: ts_ms, (ts_us, ts_ns), txId, and the transaction block's id before its
        LSN."""
        _long = self._native.avro_long
        commit_us = txn.commit_time + UNIX_EPOCH_USECS
        return (
            _long(commit_us // 1000),
            b"\x02" + _long(commit_us) + b"\x02" + _long(commit_us * 1000),
            b"\x02" + _long(txn.xid),
            f"{st.xid}:".encode(),
        )

    def _hot_for(
        self, st: Any, txn: TxnInfo, t: _Table, rel: RelationInfo, table: TableDef, lsn: int
    ) -> _Hot:
        """What every change of `t` (as defined by `table`) in transaction `st` shares:
        its plan and headers, and the `source` parts (the per-transaction work, done at
        the first such change)."""
        last = self._last
        if last is not None and last[0] is t and last[1].table is table:
            entry = last[1]
        else:
            entry = self._entry(t, rel, table)
            self._last = (t, entry)
        parts = None if entry.plan is None else self._source_parts(st, txn, t, lsn)
        hot = _Hot(st, t, table, entry, parts)
        self._hot = hot
        return hot

    def _hot_of(
        self, txn: TxnInfo, t: _Table, rel: RelationInfo, table: TableDef, lsn: int
    ) -> _Hot:
        """The current transaction's state with `t` as defined by `table` (`_Hot`), the
        last change's when it is the same."""
        p = self.plugin
        st = p._txn
        if st is None:
            st = p._txn_state(lsn)  # raises: a change outside a transaction
        hot = self._hot
        if hot is None or hot.st is not st or hot.t is not t or hot.table is not table:
            hot = self._hot_for(st, txn, t, rel, table, lsn)
        return hot

    def change(self, ctx: PluginContext, txn: TxnInfo, t: _Table, change: RowChange) -> bool:
        """Write `change` natively; False (nothing written) leaves it to Python."""
        out = self._encode(ctx, txn, t, change)
        if out is None:
            return False
        code, key, value = out
        p = self.plugin
        ctx.write(OutputRecord(t.plan.topic, key, value, p.context_headers, code))
        if code == "d" and p._tombstones():
            p._tombstone(ctx, t, key)
        return True

    def changes(self, ctx: PluginContext, txn: TxnInfo, changes: Sequence[RowChange]) -> None:
        """`AvroPlugin.change` for each of a run of changes, in order. Consecutive
        changes of one table definition and op go to the Rust encoder at once
        (`_group`: `RowPlan.encode_events`), their events out as one `RecordRun`
        (`ctx.write_run`); a change it cannot take goes the single way
        (`AvroPlugin.change`: a DELETE with its tombstone, an UPDATE with an old tuple,
        a snapshot read, a table without a plan) or is the Python path's (a fallback).
        A `RowRun` is one such group already: its raw tuples go to Rust as they are,
        and a row of it is built only for the Python path."""
        p = self.plugin
        plain = bool(txn.commit_time) and not isinstance(ctx.state.get("snapshot"), str)
        if not plain or type(changes) is not RowRun:
            self._rows(ctx, txn, changes, plain)
            return
        op, rel = changes.op, changes.relation
        t = p._table(rel)  # once per run
        if t is None:
            return  # not published
        ctx.write_lsn = changes.lsns[0]
        done = self._group(ctx, txn, t, rel, changes.table, op, changes.raws, changes.lsns)
        if done < 0:  # no plan: every row is the Python path's
            self._python(ctx, txn, t, changes, 0, len(changes))
        elif done < len(changes):  # row `done` fell back; the rest go on as a list
            self._python(ctx, txn, t, changes, done, done + 1)
            self._rows(ctx, txn, changes[done + 1 :], plain)

    def _python(
        self,
        ctx: PluginContext,
        txn: TxnInfo,
        t: _Table,
        changes: Sequence[RowChange],
        i: int,
        j: int,
    ) -> None:
        """changes[i:j] (of table `t`) through the Python path."""
        p = self.plugin
        for k in range(i, j):
            change = changes[k]
            ctx.write_lsn = change.lsn
            p.change_python(ctx, txn, t, change)

    def _rows(
        self, ctx: PluginContext, txn: TxnInfo, changes: Sequence[RowChange], plain: bool
    ) -> None:
        """`changes`, grouped here: consecutive rows of one table definition and op to
        `_group`, any other one the single way."""
        p = self.plugin
        tables, table_of = p._tables, p._table
        n, i = len(changes), 0
        while i < n:
            change = changes[i]
            ctx.write_lsn = change.lsn
            op = change.op
            row = _encoded_row(change)
            if not plain or type(row) is not DecodedRow:
                p.change(ctx, txn, change)
                i += 1
                continue
            rel = change.relation
            cached = (rel.oid, rel.defined_at)
            t = tables[cached] if cached in tables else table_of(rel)
            if t is None:
                i += 1
                continue
            table = row.table
            tuples, lsns = [row.raw], [change.lsn]
            # each row's TOAST chunks, for a group that starts with a row holding some
            # (PluginSink hands on inserts with theirs in a list); a row with chunks
            # after one without starts a group of its own
            toasts: list[Mapping[int, bytes] | None] | None = [row.toast] if row.toast else None
            j = i + 1
            while j < n:
                c = changes[j]
                if c.relation is not rel or c.op is not op:
                    break
                r = _encoded_row(c)
                if type(r) is not DecodedRow or r.table is not table:
                    break
                if toasts is not None:
                    toasts.append(r.toast or None)
                elif r.toast:
                    break
                tuples.append(r.raw)
                lsns.append(c.lsn)
                j += 1
            done = self._group(ctx, txn, t, rel, table, op, tuples, lsns, toasts)
            if done < 0:  # no plan: the whole group is the Python path's
                self._python(ctx, txn, t, changes, i, j)
                i = j
            elif done < j - i:  # change i + done is the Python path's
                i += done
                self._python(ctx, txn, t, changes, i, i + 1)
                i += 1
            else:
                i = j

    def _group(
        self,
        ctx: PluginContext,
        txn: TxnInfo,
        t: _Table,
        rel: RelationInfo,
        table: TableDef,
        op: ChangeOp,
        tuples: list[Any] | HeapRows,
        lsns: list[int],
        toasts: list[Mapping[int, bytes] | None] | None = None,
    ) -> int:
        """Encode and write the events of consecutive changes of `t` (defined by
        `table`) with op `op`, logged at `lsns`, as one RecordRun; how many it wrote,
        stopping before the first fallback row (counted in `fallbacks`); -1, having done
        nothing, when the definition has no native plan. `toasts`: each row's TOAST
        chunks (of a list of `tuples` only)."""
        p = self.plugin
        hot = self._hot_of(txn, t, rel, table, lsns[0])
        st, entry = hot.st, hot.entry
        plan, parts, value_header = entry.plan, hot.parts, entry.value_header
        if plan is None or parts is None or value_header is None:
            return -1
        code = _op_code(op)
        total, order = p._next_order(st, t.collection)
        key_header = entry.key_header if entry.want_key else None
        if isinstance(tuples, list):
            keys, values, reason = plan.encode_events(
                tuples,
                lsns,
                value_header,
                key_header,
                parts,
                total,
                order,
                code,
                self._clock(),
                toasts,
            )
        elif tuples.olds:  # updates with their old tuples (HeapRows): both encoded
            keys, values, reason = plan.encode_update_rows(
                tuples,
                value_header,
                key_header,
                parts,
                total,
                order,
                self._clock(),
                entry.key_exact,
            )
        else:  # an InsertRows' rows (HeapRows), read where they are
            keys, values, reason = plan.encode_rows(
                tuples, value_header, key_header, parts, total, order, code, self._clock()
            )
        if reason is not None:
            self.fallbacks[reason] += 1
        if entry.drops:
            self._warn_dropped(plan)
        done = len(values)
        if done:
            self.native += done
            if toasts is not None:
                self.toasted += sum(1 for held in toasts[:done] if held)
            if not st.began:
                p._begin_once(ctx, st, lsns[0])
            p._order(st, t.collection, done)
            lsns = lsns[:done]
            if code == "d" and p._tombstones():
                keys, values, lsns = _with_tombstones(keys, values, lsns)
            run = RecordRun(t.plan.topic, keys, values, lsns, p.context_headers, code)
            ctx.write_run(run)
        return done

    def _encode(
        self, ctx: PluginContext, txn: TxnInfo, t: _Table, change: RowChange
    ) -> tuple[str, bytes | None, bytes] | None:
        """(op, key, value) of `change`'s event, written by the native encoder and
        counted in its transaction (BEGIN written first if it is the first event); None,
        having done nothing, when the change is the Python path's."""
        if not txn.commit_time or isinstance(ctx.state.get("snapshot"), str):
            return None
        if change.op is ChangeOp.UPDATE and change.old is not None:
            return self._encode_update(ctx, txn, t, change)
        row = _encoded_row(change)
        if type(row) is not DecodedRow:
            return None
        lsn = change.lsn
        hot = self._hot_of(txn, t, change.relation, row.table, lsn)
        entry = hot.entry
        plan = entry.plan
        if plan is None:
            return None
        out = self._row(plan, row, lsn, entry.want_key)
        if out is None:
            return None
        record, key_record = out
        self.native += 1
        code = _op_code(change.op)
        deleting = code == "d"
        before, after = (record, None) if deleting else (None, record)
        return (code, *self._wrap(ctx, hot, before, after, key_record, lsn, code))

    def _encode_update(
        self, ctx: PluginContext, txn: TxnInfo, t: _Table, change: RowChange
    ) -> tuple[str, bytes | None, bytes] | None:
        """(op "u", key, value) of an UPDATE that carries its old tuple, both tuples
        encoded natively; None, having done nothing, when either is the Python path's
        (a fallback row, a key type not compared by bytes) or the key changed (the
        Python path writes a DELETE and a CREATE). The old tuple is the event's
        `before` unless it is only the old key (`old_is_key`: before is null)."""
        new, old = change.new, change.old
        if type(new) is not DecodedRow or type(old) is not DecodedRow:
            return None
        if old.table is not new.table:
            self.fallbacks["old tuple of another definition"] += 1
            return None
        lsn = change.lsn
        hot = self._hot_of(txn, t, change.relation, new.table, lsn)
        entry = hot.entry
        plan = entry.plan
        if plan is None:
            return None
        want_key = entry.want_key
        if want_key and not entry.key_exact:
            self.fallbacks["update key compared in Python"] += 1
            return None
        out = self._row(plan, new, lsn, want_key)
        if out is None:
            return None
        old_out = self._row(plan, old, lsn, want_key)
        if old_out is None:
            return None
        record, key_record = out
        if old_out[1] != key_record:
            self.fallbacks["update changes the key"] += 1
            return None
        before = None if change.old_is_key else old_out[0]
        self.native += 1
        return ("u", *self._wrap(ctx, hot, before, record, key_record, lsn, "u"))

    def _warn_dropped(self, plan: Any) -> None:
        """The Python path's `numeric_special_value_dropped` warning (once per column, by
        `AvroPlugin._warn`) for each nullable decimal column whose NaN/±Infinity the
        encoder wrote as null since the last look (`RowPlan.take_dropped`)."""
        for column in plan.take_dropped():
            self.plugin._warn("numeric_special_value_dropped", column)

    def _row(
        self, plan: Any, row: DecodedRow, lsn: int, want_key: bool
    ) -> tuple[bytes, bytes | None] | None:
        """`row`'s (Value record, Key record) from `plan`; None, counted in `fallbacks`
        by its reason, when the row is the Python path's."""
        raw = row.raw
        out = plan.encode(
            raw.natts, raw.infomask, raw.hoff, raw.data, lsn, want_key, row.toast or None
        )
        self._warn_dropped(plan)
        if type(out) is str:
            self.fallbacks[out] += 1
            return None
        record, key_record = out
        return record, key_record

    def _wrap(
        self,
        ctx: PluginContext,
        hot: _Hot,
        before: bytes | None,
        after: bytes | None,
        key_record: bytes | None,
        lsn: int,
        code: str,
    ) -> tuple[bytes | None, bytes]:
        """(key, value) of one event of `hot`'s table: the Envelope around the encoded
        `before` and `after` records, counted in its transaction (BEGIN first if it is
        the first event)."""
        p, st, entry = self.plugin, hot.st, hot.entry
        key_header = entry.key_header
        key = None if key_record is None or key_header is None else key_header + key_record
        if not st.began:
            p._begin_once(ctx, st, lsn)
        total, order = p._order(st, hot.t.collection)
        parts = hot.parts
        assert parts is not None  # built whenever the entry has a plan
        head, sequence_head, mid, tail, block_head = parts
        value = self._envelope(
            entry.value_header,
            before,
            after,
            head,
            sequence_head,
            lsn,
            mid,
            tail,
            block_head,
            total,
            order,
            code,
            self._clock(),
        )
        return key, value

    def snapshot_rows(
        self,
        ctx: PluginContext,
        txn: TxnInfo,
        rel: RelationInfo,
        table: TableDef,
        chunk: Any,
        fields: Mapping[str, int],
        rows: Sequence[int],
        start: int,
        marker: Callable[[int], str],
        prepared: CopyPrepared | None = None,
    ) -> int:
        """The snapshot reads of rows `rows[start:]` of a native COPY chunk
        (`service._native.CopyChunk`, connectors.tablesnap.chunks) of table `rel` as
        `table` defines it, written as one RecordRun: what `change_python` writes for
        each (op "r", no transaction block, uncounted, `source.snapshot` = `marker(n)`
        of the row's position n in `rows`, `sequence` as `AvroPlugin._source` gives a
        snapshot row), encoded by `RowPlan.encode_copy` with the table's plan (the WAL
        rows' converters) from the rows' send format. `fields`: each live column's field
        in a COPY row (-1: always NULL). Returns how many rows it wrote, stopping before
        the first one the Python path must take (counted in `fallbacks`); -1, having
        done nothing, when the table has no native plan or a column no native send form
        (logged once per table definition, counted per call). `prepared`: the chunk's
        records from `snapshot_prepare`, used when made with this call's plan."""
        p = self.plugin
        t = p._table(rel)
        if t is None:
            return len(rows) - start  # not published: nothing to write, as `change`
        key = (id(t), id(table))
        found = self._copy_entries.get(key)
        if found is None or found[0] is not t or found[1] is not table:
            entry = self._compile(t, rel, table)
            spec = [-1 if c.dropped else fields.get(c.name, -1) for c in table.columns]
            reason = entry.reason
            if entry.plan is not None:
                reason = entry.plan.copy_fallback(spec, chunk.ncols) or ""
            if reason:
                log.info("avro_native_snapshot_off", topic=t.plan.topic, reason=reason)
            found = (t, table, entry, spec, reason)
            self._copy_entries[key] = found
        entry, spec, reason = found[2], found[3], found[4]
        plan = entry.plan
        if reason or plan is None or entry.value_header is None:
            self.fallbacks[reason or "no plan"] += 1
            return -1
        lsn = txn.final_lsn
        end = len(rows) - 1
        parts = (
            self._snapshot_parts(txn, t, marker(0)),
            self._snapshot_parts(txn, t, marker(min(1, end))),
            self._snapshot_parts(txn, t, marker(end)),
        )
        key_header = entry.key_header if entry.want_key else None
        self._copy_ahead[id(table)] = (table, plan, spec, key_header is not None)
        ahead = None
        if (
            prepared is not None
            and prepared.plan is plan
            and prepared.spec == spec
            and prepared.want_key == (key_header is not None)
        ):
            ahead = prepared.records
            self.ahead += max(0, bisect_left(rows, len(ahead), start) - start)
        keys, values, why = plan.encode_copy(
            chunk,
            spec,
            list(rows),
            start,
            entry.value_header,
            key_header,
            parts,
            "r",
            lsn,
            self._clock(),
            ahead,
        )
        if why is not None:
            self.fallbacks[why] += 1
        if entry.drops:
            self._warn_dropped(plan)
        done = len(values)
        if done:
            self.native += done
            ctx.write_run(
                RecordRun(t.plan.topic, keys, values, [lsn] * done, p.context_headers, "r")
            )
        return done

    def snapshot_prepare(
        self, table: TableDef, chunk: Any, fields: Mapping[str, int]
    ) -> CopyPrepared | None:
        """The records of `chunk`'s rows (table `table`, columns at `fields` as
        `snapshot_rows` takes them), encoded now with the plan the last published chunk
        of `table` used, for `snapshot_rows(prepared=...)`; None when no chunk of it was
        published natively yet. Safe on a reader's thread while the worker's runs: it
        reads one entry of a dict, and the encoding holds no state of the plugin."""
        found = self._copy_ahead.get(id(table))
        if found is None or found[0] is not table:
            return None
        _, plan, spec, want_key = found
        if spec != [-1 if c.dropped else fields.get(c.name, -1) for c in table.columns]:
            return None
        return CopyPrepared(plan, spec, want_key, plan.prepare_copy(chunk, spec, want_key))

    def _snapshot_parts(
        self, txn: TxnInfo, t: _Table, marker: str
    ) -> tuple[bytes, bytes, bytes, bytes, None]:
        """The `source` parts of a snapshot read of `t` with `marker` (as
        `AvroPlugin._source` gives it: the commit time, or the clock without one; the
        sequence's last commit null for an initial snapshot's markers), and no
        transaction block."""
        _long, _string = self._native.avro_long, self._native.avro_string
        commit_us = txn.commit_time + UNIX_EPOCH_USECS if txn.commit_time else self._clock() // 1000
        const = self.plugin._source(txn, t.schema, t.table, txn.final_lsn, marker)
        ident, _db, names = self._table_parts(t)
        last = None if is_initial(marker) else self.plugin._last_commit_lsn
        prefix = b'[null,"' if last is None else f'["{last}","'.encode()
        head = ident + _long(commit_us // 1000) + b"\x00" + _string(marker) + _string(const["db"])
        mid = b"\x02" + _long(commit_us) + b"\x02" + _long(commit_us * 1000) + names
        mid += b"\x02" + _long(txn.xid)
        return head, prefix, mid, b"\x00\x00\x00", None

    def transaction_record(
        self,
        serializers: tuple[Callable[[Any], bytes], Callable[[Any], bytes]],
        status: str,
        txn_id: str,
        event_count: int | None,
        collections: list[tuple[str, int]] | None,
        ts_ms: int,
    ) -> tuple[bytes, bytes] | None:
        """A transaction metadata event's (key, value) wire bytes, equal to what the
        `serializers` (the topic's AvroEncoders) write for the same datums; None when
        they are not AvroEncoders."""
        cached = self._tx_headers
        if cached is not None and cached[0] is serializers:
            key_header, value_header = cached[1], cached[2]
        else:
            key_header, value_header = _header(serializers[0]), _header(serializers[1])
            self._tx_headers = (serializers, key_header, value_header)
        if key_header is None or value_header is None:
            return None
        native = self._native
        value = self._transaction_value(
            value_header, status, txn_id, event_count, collections, ts_ms
        )
        return key_header + native.avro_string(txn_id), value
