"""Send format → stored form for the type families added after sendform.py was written.

Registered into `service.types.sendform`'s table (by output function) so the initial
snapshot's COPY BINARY values of these types run through the same decoders as the
WAL's: geometric types, tsvector, tsquery, pg_snapshot/txid_snapshot and the reg*
family (a uint32 OID). Types whose stored form cannot be rebuilt from their send form
(jsonpath: its send form is its text, and the stored tree needs the jsonpath parser;
and aclitem, which has no send function) and the reg* types are read by the snapshot as
their output text, which is their Python value too (`TEXT_VALUED`). Extension types
(recognised by name and output function) have their own table: hstore, PostGIS and
pgvector are rewritten, the others are text-valued (`text_valued`).

Pure; malformed input raises `DecodeError`.
"""

from __future__ import annotations

from collections.abc import Callable

from service.errors import DecodeError
from service.types import geometric, hstore, pgvector, postgis, snapshot_types, tsearch
from service.types.extensions import extension_type
from service.types.registry import TypeInfo, TypeRegistry
from service.types.regtypes import REG_OUTPUTS

Rewrite = Callable[[bytes, TypeInfo, TypeRegistry], bytes]


def _geo(src: str) -> Rewrite:
    def rewrite(data: bytes, info: TypeInfo, registry: TypeRegistry) -> bytes:
        return geometric.fixed_send_to_stored(src, data)

    return rewrite


def _oid(data: bytes, info: TypeInfo, registry: TypeRegistry) -> bytes:
    if len(data) != 4:
        raise DecodeError(f"{info.name} send value has {len(data)} bytes, not 4")
    return data[::-1]


FIXED: dict[str, Rewrite] = {
    **{src: _geo(src) for src in geometric.FIXED_FLOATS},
    "path_out": lambda d, i, r: geometric.path_send_to_stored(d),
    "poly_out": lambda d, i, r: geometric.poly_send_to_stored(d),
    "tsvectorout": lambda d, i, r: tsearch.tsvector_send_to_stored(d),
    "tsqueryout": lambda d, i, r: tsearch.tsquery_send_to_stored(d),
    "pg_snapshot_out": lambda d, i, r: snapshot_types.snapshot_send_to_stored(d),
    **dict.fromkeys(REG_OUTPUTS, _oid),
}

EXTENSION_FIXED: dict[str, Rewrite] = {
    "hstore_out": lambda d, i, r: hstore.hstore_send_to_stored(d),
    "LWGEOM_out": lambda d, i, r: postgis.ewkb_to_gserialized(d, geodetic=False),
    "geography_out": lambda d, i, r: postgis.ewkb_to_gserialized(d, geodetic=True),
    "vector_out": lambda d, i, r: pgvector.vector_send_to_stored(d),
    "halfvec_out": lambda d, i, r: pgvector.halfvec_send_to_stored(d),
    "sparsevec_out": lambda d, i, r: pgvector.sparsevec_send_to_stored(d),
}
"""Rewrites of extension types (by output function), for a type that
`service.types.extensions.extension_type` recognises only."""


def extension_rewrite(info: TypeInfo) -> Rewrite | None:
    """The send → stored rewrite of a recognised extension (base) type, if it has one."""
    return EXTENSION_FIXED.get(info.output_src) if extension_type(info) else None


TEXT_VALUED = frozenset({"jsonpath_out", "aclitemout"}) | REG_OUTPUTS
"""Decodable output functions whose Python value is their text, which the snapshot
reads with `::text` instead of rewriting a send value. The reg* types are among them
although their send form is a plain OID: their text needs a catalog query, which
cannot run on the snapshot's connection while its COPY is streaming."""

EXTENSION_TEXT_VALUED = frozenset(
    {"ltree_out", "lquery_out", "isn_out", "ean13_out", "cube_out", "seg_out"}
)
"""Extension output functions whose Python value is their text: the snapshot reads them
as `::text` (isn and seg have no send function; ltree/lquery send their text; cube's
value is its text)."""


def text_valued(info: TypeInfo) -> bool:
    """Is this (base) type's Python value its output text, read by the snapshot as
    `::text`? TEXT_VALUED, and the recognised extension types of EXTENSION_TEXT_VALUED."""
    src = info.output_src
    return src in TEXT_VALUED or (src in EXTENSION_TEXT_VALUED and bool(extension_type(info)))
