"""The text plugin's native fast path: a run of row changes straight from the heap
tuples to test_decoding's lines, through the Rust text writer (service._native.TextPlan).

Receives: from `TestDecodingPlugin.changes`, a run of a transaction's row changes. A
`service.types.rowdecode.RowRun` (one table definition, one op, no TOAST chunks, no
UPDATE with an old tuple) carries each change's logged tuple (`raws`) and the
`TableDef` it is deformed against; any other run is a list of `RowChange`s.
Hands on: through `ctx.write`, exactly the lines `TestDecodingPlugin.change` writes for
each change, in order, with `ctx.write_lsn` at each change's LSN. The rows of a
RowRun go to Rust at once (`TextPlan.lines`); a row it leaves to the Python path (a
typed fallback: an external TOAST pointer, a missing attribute whose default is not a
stored datum (`RelationInfo.missing_datums`; a stored one is deformed in Rust),
NaN/±Infinity numerics, a float whose shortest decimal is a rounding bound, text that is
not UTF-8, an xml value with a declaration, a stored form the Python reference rejects,
a reg* or aclitem value naming an OID whose name is not in the name cache yet (the
Python path resolves it, which puts it there: the next row with that OID is native);
counted in `fallbacks`) is written by
`TestDecodingPlugin.change`, never half of each, and the run goes on natively after it.
A list goes through `change` row by row.

How: a `TextPlan` is compiled once per table definition (per relation oid and
`defined_at`, and the `TableDef` itself) from the definition's `ColumnDef`s (attlen,
attalign, dropped, atthasmissing) and, per printed column, its head (` name[type]:`,
quote_identifier of the plugin's server version) and the built-in type's kind
(`TEXT_KINDS`: the integers, floats, numeric, texts, json and jsonb, xml, bytea, uuid,
dates and times, interval, timetz, money, "char", bit and varbit, inet, cidr, macaddr
and macaddr8; an enum, whose label the plan maps from its pg_enum OID: `enum_oids`; and
an array of any of these (box[] with its delimiter `;`; of a domain over one too, its
header naming the domain), printed as array_out, with its element's layout from
`service.types.registry.builtin_layout`; tid, the geometric types, tsvector, tsquery,
jsonpath, the built-in ranges and multiranges, and user-defined ones over a built-in
range's subtype or over int2, oid, float4, float8, text, varchar, bpchar, time,
timetz, interval, inet, cidr, uuid, bytea, macaddr, macaddr8, bool, "char", name, money,
bit, varbit, tid, pg_lsn, xid8 or an enum (`range_labels`), and domains over those
(`user_range_kind`); a
domain over a built-in scalar type of these, a built-in range, a reg* type or aclitem
(`_domain_kind`: printed as its base type, always quoted, as print_literal quotes a
type that is no built-in one); a
composite whose fields are built-in types of TEXT_KINDS, domains over them, enums,
arrays of these or of composites, or composites of these (nested; `composite_spec`),
printed as record_out; the
contrib extension types, PostGIS geometry and geography, pgvector's types: `EXT_KINDS`,
and arrays of them and of domains over them (earth[]), array_out with the element type's
delimiter (`:` for PostGIS'), their layout from `EXT_LAYOUTS`; citext[] and arrays of a
domain over citext (`ColumnMeta.elem_textout`: items stored and printed as text's); the
reg* types and
aclitem (`NAMED_TYPES`, 15's 12-byte aclitem and 16+'s) and arrays of them (aclitem's
layout told by the array column's attalign), printed from the catalog names the resolver
put in `RelationInfo.name_cache`, which the plan shares: a table with such a column and
no cache has no plan; as a field of a composite column or of an array of composites too,
nested composites' fields included). A relation with a column of any other type (arrays
of other types, ranges over other subtypes (an enum), other composites, other
extension types, ...) gets no plan: the Python path prints all its rows (`reason`
says why).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

import structlog

from service.errors import DecodeError, SchemaMismatchError
from service.output.api import (
    ChangeOp,
    ColumnMeta,
    PluginContext,
    RelationInfo,
    RowChange,
    TxnInfo,
)
from service.schema.tabledef import TableDef
from service.types.deform import TYPALIGN_BYTES
from service.types.registry import builtin_layout
from service.types.rowdecode import RowRun

log = structlog.get_logger(__name__)

# Built-in types both plugins publish as their output text (types::outtext), by OID:
# (kind, attlen of the stored form). The geometric types but point, tsvector, tsquery, the
# built-in ranges and multiranges, pg_lsn, xid, cid, xid8, tid, txid_snapshot and
# pg_snapshot, int2vector and oidvector, jsonpath.
OUTPUT_TYPES: dict[int, tuple[str, int]] = {
    601: ("lseg", 32),
    602: ("path", -1),
    603: ("box", 32),
    604: ("polygon", -1),
    628: ("line", 24),
    718: ("circle", 24),
    3614: ("tsvector", -1),
    3615: ("tsquery", -1),
    3904: ("int4range", -1),
    3906: ("numrange", -1),
    3908: ("tsrange", -1),
    3910: ("tstzrange", -1),
    3912: ("daterange", -1),
    3926: ("int8range", -1),
    4451: ("int4multirange", -1),
    4532: ("nummultirange", -1),
    4533: ("tsmultirange", -1),
    4534: ("tstzmultirange", -1),
    4535: ("datemultirange", -1),
    4536: ("int8multirange", -1),
    28: ("xid", 4),
    29: ("xid", 4),  # cid
    3220: ("pg_lsn", 8),
    5069: ("xid8", 8),
    27: ("tid", 6),  # tidout: (block,offset)
    2970: ("pg_snapshot", -1),  # txid_snapshot: pg_snapshot_out
    5038: ("pg_snapshot", -1),
    22: ("int2vector", -1),  # int2vectorout
    30: ("oidvector", -1),  # oidvectorout
    4072: ("jsonpath", -1),  # jsonpath_out (printJsonPathItem), every server's item types
}
RANGES = frozenset({3904, 3906, 3908, 3910, 3912, 3926})
# A range's subtype -> the name of the built-in range over it, less "range"; from
# float8 on the built-in types that only user ranges are over (float8: PostgreSQL's
# floatrange example), named by their own prefix (types::outtext's SUBS, whose
# types::range writes each bound with the subtype's output function, quoted as
# range_bound_escape quotes it). varchar and bpchar are stored and printed as text,
# varbit as bit.
_RANGE_SUBTYPES = {
    23: "int4",
    20: "int8",
    1700: "num",
    1082: "date",
    1114: "ts",
    1184: "tstz",
    701: "float8",
    21: "int2",
    26: "oid",
    700: "float4",
    25: "text",
    1043: "text",
    1083: "time",
    1266: "timetz",
    1186: "interval",
    869: "inet",
    650: "cidr",
    1042: "text",
    2950: "uuid",
    17: "bytea",
    829: "macaddr",
    774: "macaddr8",
    16: "bool",
    18: "char",
    19: "name",
    790: "money",
    1560: "bit",
    1562: "bit",
    27: "tid",
    3220: "pg_lsn",
    5069: "xid8",
}


def user_range_kind(meta: ColumnMeta) -> str | None:
    """A user-defined range (CREATE TYPE ... AS RANGE) or its multirange over the subtype
    of a built-in range or another subtype of `_RANGE_SUBTYPES`: the kind of the range
    over that subtype with the type's own OID (`int4range@16401`, `textrange@16402`: its
    datums store that OID, and print as range_out prints them), or over an enum
    (`enumrange@<oid>`: its bounds print from the column's labels, `range_labels`),
    also for a domain over such a type; None for any other type."""
    if meta.ext or meta.stored_bytes_type or meta.type_oid in OUTPUT_TYPES:
        return None
    prefix = _RANGE_SUBTYPES.get(meta.range_subtype)
    if prefix is None and range_labels(meta) is not None:
        prefix = "enum"  # over an enum: its bounds print from the column's labels
    if prefix is None:
        return None
    kind, oid = meta.kind, meta.type_oid
    if kind == "d":
        # a domain over a user-defined range or multirange: that type's kind and OID
        # (its datums are the base type's, storing its OID; a domain, like the user
        # type, is printed quoted); one over a built-in range is `_domain_kind`'s
        if meta.elem_type_oid in OUTPUT_TYPES:  # the built-in ranges among them
            return None
        kind, oid = meta.elem_kind, meta.elem_type_oid
    if kind == "r":
        return f"{prefix}range@{oid}"
    if kind == "b":  # a multirange (ColumnMeta.kind names no 'm')
        return f"{prefix}multirange@{oid}"
    return None


# Built-in types the native writer prints, by OID: (kind, attlen of the stored form).
TEXT_KINDS: dict[int, tuple[str, int]] = {
    16: ("bool", 1),
    17: ("bytea", -1),
    19: ("name", 64),
    20: ("int8", 8),
    21: ("int2", 2),
    23: ("int4", 4),
    25: ("text", -1),
    26: ("oid", 4),
    114: ("text", -1),  # json: its stored text, quoted
    700: ("float4", 4),
    701: ("float8", 8),
    1042: ("text", -1),  # bpchar
    1043: ("text", -1),  # varchar
    1082: ("date", 4),
    1083: ("time", 8),
    1114: ("timestamp", 8),
    1184: ("timestamptz", 8),
    1700: ("numeric", -1),
    2950: ("uuid", 16),
    18: ("char", 1),  # "char": charout, quoted
    142: ("xml", -1),  # xml_out (a declaration falls back)
    650: ("cidr", -1),
    869: ("inet", -1),
    774: ("macaddr8", 8),
    829: ("macaddr", 6),
    790: ("money", 8),  # cash_out, lc_monetary C
    1186: ("interval", 16),  # IntervalStyle postgres
    1266: ("timetz", 12),
    1560: ("bits", -1),  # bit: B'…'
    1562: ("bits", -1),  # varbit: B'…'
    3802: ("jsonb", -1),
    600: ("point", 16),
    **OUTPUT_TYPES,
}
# The types whose text is a catalog object's name, by OID: (kind, attlen of the stored
# form), for both plugins: the reg* types (regproc.c: regprocout .. regcollationout) and
# aclitem (acl.c: aclitemout), printed from the names the catalog stage's resolver put
# in the plan's name cache (`RelationInfo.name_cache`; a name not there yet is its row's
# fallback). A column of one or an array of one, never a composite's field (record_out
# is printed without the cache). aclitem is 16 bytes from 16 on; 15's 12-byte form is
# `ACLITEM_15` (`stored_form` tells them by the stored length).
NAMED_TYPES: dict[int, tuple[str, int]] = {
    24: ("regproc", 4),
    2202: ("regprocedure", 4),
    2203: ("regoper", 4),
    2204: ("regoperator", 4),
    2205: ("regclass", 4),
    2206: ("regtype", 4),
    4096: ("regrole", 4),
    4089: ("regnamespace", 4),
    3734: ("regconfig", 4),
    3769: ("regdictionary", 4),
    4191: ("regcollation", 4),
    1033: ("aclitem", 16),
}
ACLITEM_15 = ("aclitem_pg15", 12)  # AclMode was a uint32 on 15 (service.types.acl)
# The kinds whose text is a catalog name: a column of one (or an array of one) needs the
# plan's name cache.
NAMED_KINDS = frozenset({kind for kind, _ in NAMED_TYPES.values()} | {ACLITEM_15[0]})


def stored_form(found: tuple[str, int], attlen: int) -> tuple[str, int]:
    """The (kind, attlen) of a value of the kind `found` names stored in `attlen` bytes:
    aclitem's 12-byte form is PostgreSQL 15's (`ACLITEM_15`, AclMode a uint32 in acl.h);
    any other as `found` (whose attlen the caller checks)."""
    if found == NAMED_TYPES[1033] and attlen == ACLITEM_15[1]:
        return ACLITEM_15
    return found


# Extension types, by service.types.extensions' name: (kind, attlen of the stored form).
EXT_KINDS: dict[str, tuple[str, int]] = {
    "hstore": ("hstore", -1),
    "ltree": ("ltree", -1),
    "lquery": ("lquery", -1),
    "cube": ("cube", -1),
    "seg": ("seg", 12),
    **{name: (name, 8) for name in ("ean13", "isbn13", "ismn13", "issn13")},
    **{name: (name, 8) for name in ("isbn", "ismn", "issn", "upc")},
    "geometry": ("geometry", -1),  # the hex EWKB
    "geography": ("geography", -1),
    "vector": ("vector", -1),
    "halfvec": ("halfvec", -1),
    "sparsevec": ("sparsevec", -1),
}
# The extension types' layouts (typlen, typalign) as their CREATE TYPE gives them, for
# their arrays' elements: hstore, ltree, lquery, seg and pgvector's types take the
# default int4 alignment, cube (ALIGNMENT = double), PostGIS (alignment = double) and the
# isn types (LIKE = pg_catalog.int8) double's.
EXT_LAYOUTS: dict[str, tuple[int, str]] = {
    "hstore": (-1, "i"),
    "ltree": (-1, "i"),
    "lquery": (-1, "i"),
    "cube": (-1, "d"),
    "seg": (12, "i"),
    **{name: (8, "d") for name in ("ean13", "isbn13", "ismn13", "issn13")},
    **{name: (8, "d") for name in ("isbn", "ismn", "issn", "upc")},
    "geometry": (-1, "d"),
    "geography": (-1, "d"),
    "vector": (-1, "i"),
    "halfvec": (-1, "i"),
    "sparsevec": (-1, "i"),
}


def ext_element_layout(ext: str, array_align: str) -> tuple[int, int] | None:
    """(typlen, typalign in bytes) of an array of extension type `ext`'s elements, when
    the array column's attalign agrees with it (an array type is double-aligned exactly
    when its element is, else int4-aligned: TypeCreate's array type); else None."""
    found = EXT_LAYOUTS.get(ext)
    if found is None or (array_align == "d") != (found[1] == "d"):
        return None
    return found[0], TYPALIGN_BYTES[found[1]]


_OPS = {ChangeOp.INSERT: " INSERT:", ChangeOp.UPDATE: " UPDATE:", ChangeOp.DELETE: " DELETE:"}

TextSpec = tuple[str, int, int, bool, bool, str, str]
ElemSpec = tuple[str, int, int, int]  # an array's element: kind, type OID, typlen, typalign
_ENUM, _ARRAY, _COMPOSITE = "enum", "array", "composite"
_DOMAIN = "domain:"  # a domain's kind: this, then its base type's
_TEXTOUT = ("text", -1)  # a base type printed by textout (citext): as text


# A composite field: name, attlen, typalign in bytes, dropped, its kind ("" when dropped),
# an enum field's labels by pg_enum OID, an array field's element, a composite field's
# (or a composite element's) own spec.
FieldSpec = tuple[
    str, int, int, bool, str, "dict[int, str] | None", "ElemSpec | None", "CompositeSpec | None"
]
CompositeSpec = tuple[int, list[FieldSpec]]
# A composite type's stored form: typlen -1, typalign d (AddNewRelationType makes every
# row type double-aligned).
_ROW_LAYOUT = (-1, "d")
_NO_FIELD = ("", 0, 0, False)


def range_labels(meta: ColumnMeta) -> dict[int, str] | None:
    """A range's (or multirange's, or a domain's over either) enum subtype's labels by
    pg_enum OID, which `type_meta` gives such a column; None for any other column and
    where the labels' OIDs are not known."""
    if not meta.range_subtype or meta.kind not in ("r", "b", "d"):
        return None
    if not meta.enum_oids or len(meta.enum_oids) != len(meta.enum_labels):
        return None
    return dict(zip(meta.enum_oids, meta.enum_labels, strict=True))


def enum_labels(meta: ColumnMeta) -> dict[int, str] | None:
    """An enum's (or a domain over one's) labels by pg_enum OID; None for any other type
    and where the labels' OIDs are not known."""
    if meta.ext or meta.stored_bytes_type:
        return None
    if meta.kind != "e" and not (meta.kind == "d" and meta.elem_kind == "e"):
        return None
    if not meta.enum_oids or len(meta.enum_oids) != len(meta.enum_labels):
        return None
    return dict(zip(meta.enum_oids, meta.enum_labels, strict=True))


def _field(
    meta: ColumnMeta, named: bool = False
) -> tuple[tuple[int, str] | None, FieldSpec] | None:
    """(stored layout to check, or None for a kind whose attlen alone is checked; the
    field's spec, its name and layout left blank) of a composite field printed as
    record_out prints it (its type's output function, a domain's base type's), or None
    when the Python path prints it. `named`: a nested composite may have fields of
    `NAMED_TYPES` (`composite_spec`)."""
    labels = enum_labels(meta)
    if labels is not None:
        return None, (*_NO_FIELD, _ENUM, labels, None, None)
    elem = _element(meta)
    if elem is not None:
        nested = composite_spec(meta) if elem[0] == _COMPOSITE else None
        elabels = None
        if elem[0] == _ENUM:
            elabels = dict(zip(meta.enum_oids, meta.enum_labels, strict=True))
        return None, (*_NO_FIELD, _ARRAY, elabels, elem, nested)
    if meta.kind == "c":
        nested = composite_spec(meta, named)
        if nested is None:
            return None
        return _ROW_LAYOUT, (*_NO_FIELD, _COMPOSITE, None, None, nested)
    if meta.ext or meta.stored_bytes_type or meta.kind not in ("b", "d", "r"):
        return None
    if meta.kind == "d" and meta.elem_kind != "b":
        return None
    # a domain prints as its base type (what its datums store)
    oid = meta.elem_type_oid if meta.kind == "d" else meta.type_oid
    found = TEXT_KINDS.get(oid)
    layout = builtin_layout(oid)
    if found is None or layout is None or found[1] != layout[0]:
        return None
    return layout, (*_NO_FIELD, found[0], None, None, None)


def composite_spec(meta: ColumnMeta, named: bool = False) -> CompositeSpec | None:
    """A composite column's (or an array of composites' element's, or the composite's a
    domain column is over) type OID and fields (`FieldSpec`), when every live field is
    printed natively: a built-in type of
    TEXT_KINDS or a domain over one, an enum (or a domain over one), an array of these
    or of composites (array_out), a composite of these (record_out, nested); with
    `named` (the text plugin's composite column, whose plan carries the name cache) also
    a reg* type or aclitem (`NAMED_TYPES`, aclitem's form told by the field's attlen:
    `stored_form`), in a nested composite too; None otherwise, and where the fields' own
    ColumnMetas are not known."""
    if meta.ext or meta.stored_bytes_type or not meta.fields:
        return None
    if meta.kind != "c" and not (meta.kind in ("a", "d") and meta.elem_kind == "c"):
        return None
    if len(meta.field_metas) != len(meta.fields):
        return None
    # the OID the datums store: a domain's over a composite are the composite's
    oid = meta.type_oid if meta.kind == "c" else meta.elem_stored_oid or meta.elem_type_oid
    fields: list[FieldSpec] = []
    for (name, _typid, attlen, typalign, dropped), fmeta in zip(
        meta.fields, meta.field_metas, strict=True
    ):
        align = TYPALIGN_BYTES.get(typalign)
        if align is None or (fmeta is None) != dropped:
            return None
        if fmeta is None:
            fields.append((name, attlen, align, True, "", None, None, None))
            continue
        reg = NAMED_TYPES.get(fmeta.type_oid) if named and fmeta.kind == "b" else None
        if reg is not None:
            kind, stored = stored_form(reg, attlen)
            if stored != attlen:
                return None
            fields.append((name, attlen, align, False, kind, None, None, None))
            continue
        found = _field(fmeta, named)
        if found is None:
            return None
        layout, spec = found
        if layout is None and attlen != (4 if spec[4] == _ENUM else -1):
            return None
        if layout is not None and layout != (attlen, typalign):
            return None
        fields.append((name, attlen, align, False, *spec[4:]))
    return oid, fields


def _element(meta: ColumnMeta, array_align: str = "") -> ElemSpec | None:
    """The element of an array column the native writer prints (a built-in type of
    TEXT_KINDS, an enum whose label OIDs are known, or a composite `composite_spec`
    prints: record_out), or None. `array_align` is given for a column of the table (its
    attalign; "" for a composite's array field): its elements may also be a type of
    `NAMED_TYPES` (the plan carries the name cache), whose layout when it differs
    between versions (aclitem) the array's alignment tells (`builtin_layout`), or
    composites with such fields (`composite_spec(named=True)`)."""
    if meta.kind != "a" or meta.ext or meta.stored_bytes_type or not meta.elem_type_oid:
        return None
    # the OID the array's header names: an array of a domain names the domain, its
    # elements stored (and printed) as the domain's base type's
    header = meta.elem_stored_oid or meta.elem_type_oid
    if meta.elem_kind == "e":
        known = meta.enum_oids and len(meta.enum_oids) == len(meta.enum_labels)
        return (_ENUM, header, 4, 4) if known else None
    if meta.elem_kind == "c":
        # a column's array of composites may have reg* and aclitem fields (the plan
        # carries the name cache); a composite's array field not
        if composite_spec(meta, bool(array_align)) is None:
            return None
        return (_COMPOSITE, header, -1, 8)
    found = TEXT_KINDS.get(meta.elem_type_oid)
    layout = builtin_layout(meta.elem_type_oid, array_align)
    if found is None and layout is None and meta.elem_textout:
        found, layout = _TEXTOUT, (-1, "i")  # citext[]: items stored and printed as text's
    named = NAMED_TYPES.get(meta.elem_type_oid) if array_align else None
    if named is not None and layout is not None:
        found = stored_form(named, layout[0])
    ranged = meta.elem_kind == "r" and meta.elem_type_oid in RANGES
    if (
        (meta.elem_kind != "b" and not ranged)
        or found is None
        or layout is None
        or layout[0] != found[1]
    ):
        return None
    align = TYPALIGN_BYTES.get(layout[1])
    return None if align is None else (found[0], header, found[1], align)


def _ext_element(meta: ColumnMeta, array_align: str) -> ElemSpec | None:
    """The element of an array of an extension type of `EXT_LAYOUTS` (its `EXT_KINDS`
    kind, `ext_element_layout`'s layout), or of a domain over one (earthdistance's
    earth[]: the header names the domain, the items are the base type's and print as
    its; a domain keeps its base type's delimiter); else None."""
    if meta.elem_kind != "b":
        return None
    layout = ext_element_layout(meta.ext, array_align)
    found = EXT_KINDS.get(meta.ext)
    if layout is None or found is None or found[1] != layout[0]:
        return None
    return found[0], meta.elem_stored_oid or meta.elem_type_oid, layout[0], layout[1]


@dataclass(slots=True)
class _Parts:
    """What a TextPlan takes beside its column specs, by column index."""

    labels: dict[int, dict[int, str]] = field(default_factory=dict)  # an enum's labels
    elements: dict[int, ElemSpec] = field(default_factory=dict)  # an array's element
    composites: dict[int, CompositeSpec] = field(default_factory=dict)  # a composite's fields


def _kind(meta: ColumnMeta, at: int, parts: _Parts, attalign: str) -> tuple[str, int] | None:
    """(kind, attlen) of how the native writer prints a column of this type (its
    attalign `attalign`), recording in `parts` what the kind needs; None when the Python
    path prints it."""
    if meta.stored_bytes_type:
        return None
    if meta.ext and meta.kind == "a":
        # an array of an extension type (or of a domain over one): array_out of its
        # elements' texts, the element's delimiter (`:` for PostGIS')
        ext = _ext_element(meta, attalign)
        if ext is None:
            return None
        parts.elements[at] = ext
        return _ARRAY, -1
    if meta.ext:
        # an extension type (or a domain over one: earthdistance's earth over cube)
        found = EXT_KINDS.get(meta.ext)
        return found if meta.kind in ("b", "d") else None
    enum = enum_labels(meta)  # an enum, or a domain over one (printed as its label)
    if enum is not None:
        parts.labels[at] = enum
        return _ENUM, 4
    elem = _element(meta, attalign)
    if elem is not None:
        parts.elements[at] = elem
        if elem[0] == _ENUM:
            parts.labels[at] = dict(zip(meta.enum_oids, meta.enum_labels, strict=True))
        if elem[0] == _COMPOSITE:
            spec = composite_spec(meta, named=True)
            if spec is None:
                return None
            parts.composites[at] = spec
        return _ARRAY, -1
    comp = composite_spec(meta, named=True)
    if comp is not None:
        parts.composites[at] = comp
        return _COMPOSITE, -1
    if meta.kind == "r" and meta.type_oid in RANGES:
        return TEXT_KINDS[meta.type_oid]
    user = user_range_kind(meta)
    if user is not None:
        if user.startswith("enum"):
            parts.labels[at] = range_labels(meta) or {}
        return user, -1
    if meta.kind == "d":
        return _domain_kind(meta)
    if meta.kind != "b":
        return None
    named = NAMED_TYPES.get(meta.type_oid)
    if named is not None:
        return named  # the caller fits it to the stored length (`stored_form`)
    return TEXT_KINDS.get(meta.type_oid, _TEXTOUT if meta.output_src == "textout" else None)


def names_a_field(spec: CompositeSpec) -> bool:
    """Does a field of the composite (or of one nested in it) print a catalog name?"""
    return any(f[4] in NAMED_KINDS or (f[7] is not None and names_a_field(f[7])) for f in spec[1])


def _domain_kind(meta: ColumnMeta) -> tuple[str, int] | None:
    """(kind, attlen) of a domain over a built-in scalar type of TEXT_KINDS, a built-in
    range, a reg* type or aclitem (`NAMED_TYPES`: printed from the plan's name cache; the
    caller fits aclitem to its stored length), or over such a domain:
    `domain:<the base type's kind>`, its value the base type's output text, always
    quoted (test_decoding's print_literal switches on the column's type OID, the
    domain's, so even a domain over int4 or bool is quoted, and over bit not B'...'). A
    domain over an enum or an array is printed before this (as the enum or the array);
    over anything else (a composite, a user-defined range) None."""
    if not meta.elem_type_oid:
        return None
    if meta.elem_kind == "r":
        found = TEXT_KINDS.get(meta.elem_type_oid) if meta.elem_type_oid in RANGES else None
    elif meta.elem_kind == "b":
        found = NAMED_TYPES.get(meta.elem_type_oid) or TEXT_KINDS.get(meta.elem_type_oid)
    else:
        found = None
    if found is None:
        return None
    return f"{_DOMAIN}{found[0]}", found[1]


def compile_text_plan(
    table: TableDef, rel: RelationInfo, head: Callable[[str, str], str], native: ModuleType
) -> tuple[Any | None, str]:
    """(the TextPlan of a table definition, "") or (None, why it has none). `head` gives
    a column's printed head from its name and type name."""
    metas = {m.name: m for m in rel.columns}
    specs: list[TextSpec] = []
    printed: list[str] = []
    parts = _Parts()
    # a column added with a default -> attmissingval's stored datum (getmissingattr)
    stored_missing = dict(rel.missing_datums)
    missing: dict[int, bytes] = {}
    named = False  # a column prints catalog names (the plan gets `rel.name_cache`)
    for c in table.columns:
        align = TYPALIGN_BYTES.get(c.attalign)
        if align is None:
            return None, f"column {c.name}: attalign {c.attalign!r}"
        meta = None if c.dropped else metas.get(c.name)
        kind, shown = "", ""
        if meta is not None:
            at = len(specs)
            found = _kind(meta, at, parts, c.attalign) if meta.type_oid == c.type_oid else None
            if found is None:
                return None, f"column {c.name}: type {c.type_oid} is not native"
            # a domain's kind is its base type's, prefixed (`_domain_kind`)
            base = found[0].removeprefix(_DOMAIN)
            fitted = stored_form((base, found[1]), c.attlen)
            found = (found[0][: len(found[0]) - len(base)] + fitted[0], fitted[1])
            if found[1] != c.attlen:
                return None, f"column {c.name}: attlen {c.attlen}"
            elem = parts.elements.get(at)
            comp = parts.composites.get(at) if found[0] in (_COMPOSITE, _ARRAY) else None
            if (
                fitted[0] in NAMED_KINDS
                or (elem is not None and elem[0] in NAMED_KINDS)
                or (comp is not None and names_a_field(comp))
            ):
                if rel.name_cache is None:
                    return None, f"column {c.name}: no catalog name cache"
                named = True
            kind, shown = found[0], head(meta.name, meta.type_name)
            printed.append(c.name)
        datum = stored_missing.get(c.attnum)
        if datum is not None and c.has_missing and not c.dropped:
            missing[len(specs)] = datum
        specs.append((c.name, c.attlen, align, c.dropped, c.has_missing, shown, kind))
    if printed != [m.name for m in rel.columns]:
        return None, "printed columns are not the relation's, in attnum order"
    relation = f"{table.schema}.{table.name}"
    plan = native.TextPlan(
        specs,
        relation,
        SchemaMismatchError,
        DecodeError,
        parts.labels,
        parts.elements,
        parts.composites,
        missing,
        rel.name_cache if named else None,
    )
    return plan, ""


class NativeText:
    """The native fast path of one TestDecodingPlugin (see the module docstring)."""

    def __init__(self, plugin: Any, native: ModuleType) -> None:
        """`plugin`: the TestDecodingPlugin; `native`: the extension module."""
        self.plugin = plugin
        self._native = native
        # (oid, defined_at) -> (the TableDef, its plan or None)
        self._plans: dict[tuple[int, int], tuple[TableDef, Any | None]] = {}
        self.native = 0  # rows written natively
        self.fallbacks: Counter[str] = Counter()  # rows left to Python, by reason

    def _plan(self, rel: RelationInfo, table: TableDef) -> Any | None:
        key = (rel.oid, rel.defined_at)
        found = self._plans.get(key)
        if found is not None and found[0] is table:
            return found[1]
        plan, reason = compile_text_plan(table, rel, self.plugin.column_head, self._native)
        if plan is None:
            log.info("text_native_off", relation=f"{rel.schema}.{rel.name}", reason=reason)
        self._plans[key] = (table, plan)
        return plan

    def write(self, ctx: PluginContext, txn: TxnInfo, run: RowRun) -> None:
        """The lines of every change of `run`, in order (see the module docstring)."""
        p = self.plugin
        plan = self._plan(run.relation, run.table)
        n = len(run)
        if plan is None:
            self._python(ctx, txn, run, 0, n)
            return
        if run.with_old:  # updates with their old tuples: the lines name both
            self._python(ctx, txn, run, 0, n)
            return
        prefix = p.table_prefix(run.relation) + _OPS[run.op]
        skip_nulls = run.op is ChangeOp.DELETE
        raws, lsns = run.raws, run.lsns
        i = 0
        while i < n:
            if isinstance(raws, list):
                lines, reason = plan.lines(raws, lsns, i, prefix, skip_nulls)
            else:  # an InsertRows' rows, read where they are
                lines, reason = plan.rows_lines(raws, i, prefix, skip_nulls)
            done = len(lines)
            if done:
                self.native += done
                p.maybe_begin(ctx, txn)
                write = ctx.write
                for lsn, line in zip(lsns[i : i + done], lines, strict=True):
                    ctx.write_lsn = lsn
                    write(line)
            i += done
            if reason is not None:
                self.fallbacks[reason] += 1
                self._python(ctx, txn, run, i, i + 1)
                i += 1

    def _python(self, ctx: PluginContext, txn: TxnInfo, run: RowRun, i: int, j: int) -> None:
        """run[i:j] through the plugin's `change`."""
        change = self.plugin.change
        for k in range(i, j):
            row: RowChange = run[k]
            ctx.write_lsn = row.lsn
            change(ctx, txn, row)
