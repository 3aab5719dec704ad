"""Send format → stored form for the type families added after sendform.py was written.

Registered into `service.types.sendform`'s table (by output function) so the initial
snapshot's COPY BINARY values of these types run through the same decoders as the
WAL's: geometric types, tsvector, pg_snapshot/txid_snapshot and the reg* family (a
uint32 OID). Types whose stored form cannot be rebuilt from their send form (jsonpath:
its send form is its text, and the stored tree needs the jsonpath parser; tsquery; and
aclitem, which has no send function) and the reg* types are read by the snapshot as
their output text, which is their Python value too (`TEXT_VALUED`).

Pure; malformed input raises `DecodeError`.
"""

from __future__ import annotations

from collections.abc import Callable

from service.errors import DecodeError
from service.types import geometric, snapshot_types, tsearch
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
    "pg_snapshot_out": lambda d, i, r: snapshot_types.snapshot_send_to_stored(d),
    **dict.fromkeys(REG_OUTPUTS, _oid),
}

TEXT_VALUED = frozenset({"jsonpath_out", "tsqueryout", "aclitemout"}) | REG_OUTPUTS
"""Decodable output functions whose Python value is their text, which the snapshot
reads with `::text` instead of rewriting a send value. The reg* types are among them
although their send form is a plain OID: their text needs a catalog query, which
cannot run on the snapshot's connection while its COPY is streaming."""
