"""The avro plugin's native row plans: which columns the Rust row encoder writes, and
how (the `RowPlan` compiled per table definition).

Receives: a table definition (`TableDef`: attlen, attalign, dropped, atthasmissing per
column), its `RelationInfo` (each column's `ColumnMeta`: type, kind, element, domain,
extension, enum labels, composite fields; the missing datums; the catalog name cache)
and the Avro `_Table` with the Value fields the Python schema builder chose.
Hands on: `compile_plan` gives (`service._native.RowPlan`, "") or (None, why there is
none); `NativeRows` (connectors.avro.native_rows) encodes rows with it. Each varlena
field with Debezium's placeholder for an unchanged TOAST value (a string, bytes or
string-array field) carries it encoded (`placeholder_field`), so the Rust encoder
writes such rows too.
Guarantees: a field gets a native kind only when its mapping is exactly the one the
Python path encodes with (checked by identity or by schema), so the Rust encoder writes
the same bytes; any other table has no plan and all its rows stay on the Python path.

- A plan (`RowPlan`) is compiled once per table definition (per `_Table`, i.e. per
  relation oid and `defined_at`) from the definition's `ColumnDef`s (attlen, attalign,
  dropped, atthasmissing) and, per Value field, the encoding the Python schema builder
  chose (`field_kind`):
  - exactly the mapping `connectors.avro.schema.type_mapping` gives a built-in type of
    `NATIVE_TYPES` (the same object): the integers, floats, texts, json and jsonb, xml,
    dates and times, interval, timetz, uuid, "char", inet, cidr, macaddr, macaddr8,
    point (the Point record), and the types published as their output text: tid, the
    other geometric types, tsvector, tsquery, jsonpath, the built-in ranges and multiranges,
    and user-defined ones over a built-in range's subtype or over int2, oid, float4,
    float8, text, varchar, bpchar, time, timetz, interval, inet, cidr, uuid, bytea,
    macaddr, macaddr8, bool, "char", name, money, bit, varbit, tid, pg_lsn, xid8 or an
    enum (its bounds printed from the column's labels), and domains over those
    (`user_range_kind`);
    the reg* types and aclitem (15's 12-byte form and 16+'s; `NAMED_TYPES`), as their
    text from the catalog names the resolver put in `RelationInfo.name_cache`, which the
    plan shares (a table with such a column and no cache has no plan);
  - by schema: numeric and money in each decimal.handling.mode (precise: Decimal or
    VariableScaleDecimal; string: the output text; double), bit and varbit (Bits;
    bit(1) a boolean), an enum (Enum: the label of the stored pg_enum OID, from the
    column's `enum_oids`);
  - a domain over one of those base types, as its base type (with the domain's typmod),
    and a domain over a built-in range, as the range;
  - the extension types hstore (Json, or the map in hstore.handling.mode=map), ltree
    (Ltree), lquery, cube, earth, seg and the isn types (their text), PostGIS geometry
    and geography (Geometry / Geography {wkb, srid}), pgvector's vector, halfvec and
    sparsevec (DoubleVector, FloatVector, SparseDoubleVector);
  - a composite whose fields are built-in types the text plugin prints
    (`service.output.native_text.composite_spec`), the reg* types and aclitem among
    them, in nested composites too (their text from the plan's name cache, as for a
    column): the string of record_out's text;
  - an array of any of those, a domain over such an array (as the array), and an array
    of a domain over one of them (`element_spec`: its header names the domain, its
    items are the base type's, with the domain's typmod); not nested; with the
    element's layout from `service.types.registry.builtin_layout` (aclitem's, which
    differs between 15 and 16+, told by the array column's attalign), an extension
    type's from `native_text.EXT_LAYOUTS` (checked against the array's attalign): hstore[]
    (either hstore.handling.mode), ltree[], lquery[], cube[], seg[], the isn types'
    arrays, geometry[], geography[], vector[], halfvec[], sparsevec[], each item the
    column's encoding of its element; citext[] and arrays of a domain over citext
    (`ColumnMeta.elem_textout`), each item the string of its text; an array of a domain
    over an extension type (earth[]) as the base type's array.
  A table with any other mapped column (composites of other fields, ranges of other
  subtypes (an enum), arrays of other types, ...) gets no plan: the Python path handles
  all its rows (`not_native` names why).
"""

from __future__ import annotations

import io
from dataclasses import replace
from typing import Any

import fastavro

from connectors.avro.schema import (
    FieldPlan,
    decimal_schema,
    field_schema,
    type_mapping,
    unchanged_toast_datum,
)
from connectors.avro.table import Table as _Table
from connectors.schemas import load_static
from service.errors import DecodeError, SchemaMismatchError
from service.output.api import ColumnMeta, RelationInfo
from service.output.native_text import (
    EXT_KINDS,
    NAMED_KINDS,
    NAMED_TYPES,
    OUTPUT_TYPES,
    RANGES,
    CompositeSpec,
    composite_spec,
    enum_labels,
    ext_element_layout,
    names_a_field,
    range_labels,
    stored_form,
    user_range_kind,
)
from service.schema.tabledef import TableDef
from service.types.deform import TYPALIGN_BYTES
from service.types.registry import builtin_layout

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
    column has none, as type_mapping resolves it), a built-in range's for a domain over
    one; None for anything else."""
    if meta.ext or meta.stored_bytes_type:
        return None
    if meta.kind == "b" or (meta.kind == "r" and meta.type_oid in RANGES):
        return meta.type_oid, meta.typmod
    if meta.kind == "d" and meta.elem_type_oid and meta.elem_kind == "b":
        return meta.elem_type_oid, meta.typmod if meta.typmod >= 0 else meta.elem_typmod
    if meta.kind == "d" and meta.elem_kind == "r" and meta.elem_type_oid in RANGES:
        # a domain over a built-in range: its datums are the range's (they store the
        # range's OID), its mapping the range's string
        return meta.elem_type_oid, -1
    return None


def _ext_element(
    meta: ColumnMeta, elem: ColumnMeta, decimal_mode: str, array_align: str, hstore_mode: str
) -> ElemSpec | None:
    """The element of an array of an extension type (`element_spec`), or of a domain over
    one (earth[]: the header names the domain, the items are the base type's): the
    column's own encoding of it (`_extension_kind`), with `EXT_LAYOUTS`' layout."""
    if elem.kind != "b":
        return None
    layout = ext_element_layout(meta.ext, array_align)
    if layout is None:
        return None
    mapping = type_mapping(elem, decimal_mode, _noop_warn, hstore_mode=hstore_mode)
    found = _extension_kind(elem, mapping, decimal_mode)
    if found is None or found[3] != layout[0]:
        return None
    return found[0], 0, 0, meta.elem_stored_oid or elem.type_oid, layout[0], layout[1]


def element_spec(
    meta: ColumnMeta, decimal_mode: str, array_align: str = "", hstore_mode: str = "json"
) -> ElemSpec | None:
    """The element of an array column whose items the native encoder writes (a built-in
    type of `NATIVE_TYPES`, numeric, money, bit strings, or an enum; or a domain over
    one; an extension type of `EXT_LAYOUTS`, hstore in `hstore_mode`), or None.
    `array_align`, the array column's attalign, tells the layout of an element type
    whose layout differs between versions (aclitem: `builtin_layout`) and is checked
    against an extension type's; without it an array of one has no spec."""
    if meta.kind != "a" or meta.stored_bytes_type or not meta.elem_type_oid:
        return None
    elem = meta.element()  # as type_mapping maps the items
    if meta.ext:
        return _ext_element(meta, elem, decimal_mode, array_align, hstore_mode)
    # The OID the array's header names: a domain's for an array of one (its elements are
    # stored as the domain's base type, whose layout and mapping they take).
    header = meta.elem_stored_oid or elem.type_oid
    if elem.kind == "e":
        return ("enum", 0, 0, header, 4, 4) if elem.enum_by_oid() else None
    if elem.kind == "c":
        # items: each composite's record_out text (a row type: typlen -1, typalign d)
        return ("composite", 0, 0, header, -1, 8) if composite_spec(meta, True) else None
    layout = builtin_layout(elem.type_oid, array_align)
    mapping = type_mapping(elem, decimal_mode, _noop_warn)
    if layout is None and meta.elem_textout:
        # citext[]: items stored as text's, each the string of its text (`field_kind`
        # takes the element's output function, which `element()` does not carry)
        layout, elem = (-1, "i"), replace(elem, output_src="textout")
    if layout is None or TYPALIGN_BYTES.get(layout[1]) is None:
        return None
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


def hstore_mode(meta: ColumnMeta, mapping: Any, decimal_mode: str) -> str:
    """The hstore.handling.mode an hstore[] column's mapping was built in ("map" when its
    schema is the map mode's), "json" for any other column."""
    if meta.ext != "hstore" or meta.kind != "a":
        return "json"
    as_map = type_mapping(meta, decimal_mode, _noop_warn, hstore_mode="map")
    return "map" if mapping.schema == as_map.schema else "json"


def field_kind(
    meta: ColumnMeta, plan: FieldPlan, decimal_mode: str, array_align: str = ""
) -> FieldKind | None:
    """(kind, scale, precision, attlen) of the native encoding of one Value field, or None
    when the field's mapping is not one the native encoder writes byte-identically.
    `array_align`: an array column's attalign (`element_spec`)."""
    mapping = plan.mapping
    if meta.ext and meta.kind != "a":
        return _extension_kind(meta, mapping, decimal_mode)
    if meta.kind == "c" or (meta.kind == "d" and meta.elem_kind == "c"):
        # A composite (or a domain over one, mapped as its root type): the string of its
        # record_out text.
        if composite_spec(meta, True) is None:
            return None
        if mapping is not type_mapping(meta, decimal_mode, _noop_warn):
            return None
        return "composite", 0, 0, -1
    if meta.kind == "a":
        # An Avro array of ["null", item]; the items as the element's own mapping.
        mode = hstore_mode(meta, mapping, decimal_mode)
        if mapping.kind != "array":
            return None
        if element_spec(meta, decimal_mode, array_align, mode) is None:
            return None
        if mapping.schema != type_mapping(meta, decimal_mode, _noop_warn, hstore_mode=mode).schema:
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
    # a column prints catalog names, or a composite field does (the plan gets
    # `rel.name_cache`)
    named = False
    index: dict[str, int] = {}
    labels: dict[int, dict[int, str]] = {}  # an enum column's index -> its labels
    elements: dict[int, ElemSpec] = {}  # an array column's index -> its element
    composites: dict[int, CompositeSpec] = {}  # a composite column's index -> its fields
    # a column added with a default -> attmissingval's stored datum (getmissingattr)
    stored_missing = dict(rel.missing_datums)
    missing: dict[int, bytes] = {}
    # a varlena column's field holding Debezium's placeholder (an unchanged TOAST value)
    placeholders: dict[int, bytes] = {}
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
            if kind.startswith("enum") and kind != "enum" and meta is not None:
                # a range or multirange over an enum: its bounds' labels
                labels[len(specs)] = range_labels(meta) or {}
            if kind == "composite" and meta is not None:
                comp = composite_spec(meta, True)
                if comp is None:
                    return None, f"column {c.name}: fields are not native"
                composites[len(specs)] = comp
            if kind == "array" and meta is not None:
                mode = hstore_mode(meta, plan.mapping, decimal_mode)
                elem = element_spec(meta, decimal_mode, c.attalign, mode)
                if elem is None:
                    return None, f"column {c.name}: element type is not native"
                elements[len(specs)] = elem
                if elem[0] == "composite":
                    comp = composite_spec(meta, True)
                    if comp is None:
                        return None, f"column {c.name}: fields are not native"
                    composites[len(specs)] = comp
                if elem[0] == "enum":
                    labels[len(specs)] = dict(zip(meta.enum_oids, meta.enum_labels, strict=True))
                kind_named = elem[0] in NAMED_KINDS
            comp = composites.get(len(specs))
            if kind in NAMED_KINDS or kind_named or (comp is not None and names_a_field(comp)):
                if rel.name_cache is None:
                    return None, f"column {c.name}: no catalog name cache"
                named = True
        datum = stored_missing.get(c.attnum)
        if datum is not None and c.has_missing and not c.dropped:
            missing[len(specs)] = datum
        field = None if plan is None or c.attlen != -1 else placeholder_field(plan)
        if field is not None:
            placeholders[len(specs)] = field
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
        placeholders,
    )
    return plan_obj, ""


def placeholder_field(plan: FieldPlan) -> bytes | None:
    """The Value field `plan` as the Python path writes it for an unchanged TOAST value
    of its column (`schema.unchanged_toast_datum`; the `["null", T]` union's branch
    included), encoded by fastavro once per plan; None when the type has no placeholder
    (such a row stays the Python path's, which warns)."""
    datum = unchanged_toast_datum(plan.mapping)
    if datum is None:
        return None
    record = {"type": "record", "name": "Placeholder", "fields": [field_schema(plan)]}
    out = io.BytesIO()
    fastavro.schemaless_writer(out, fastavro.parse_schema(record), {plan.field: datum})
    return out.getvalue()
