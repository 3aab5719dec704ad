"""Extension types pgcdc decodes, recognised by type name *and* output function.

Extension types get a new OID in every database they are created in, so they cannot be
told by OID. A type is taken for an extension's when its pg_type name (in any schema)
is one the extension defines and its output function's C symbol (pg_proc.prosrc) is
the extension's: `hstore` printed by `hstore_out`, `geometry` by `LWGEOM_out`, and so
on. A same-named type of another extension, or one whose output function is not the
expected one, is not recognised and stays undecodable (reported at start).

`extension_type(info)` gives the recognised type's name ("" for none); for a domain
pass its base type (earthdistance's `earth` is a domain over cube). citext needs no
entry: its output function is textout, which the built-in decoders know.

Pure; no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from service.types.registry import TypeInfo

EXTENSION_TYPES: Mapping[str, frozenset[str]] = MappingProxyType(
    {
        "hstore_out": frozenset({"hstore"}),
        "ltree_out": frozenset({"ltree"}),
        "lquery_out": frozenset({"lquery"}),
        "isn_out": frozenset({"isbn", "ismn", "issn", "upc"}),
        "ean13_out": frozenset({"ean13", "isbn13", "ismn13", "issn13"}),
        "cube_out": frozenset({"cube"}),
        "seg_out": frozenset({"seg"}),
        "LWGEOM_out": frozenset({"geometry"}),
        "geography_out": frozenset({"geography"}),
        "vector_out": frozenset({"vector"}),
        "halfvec_out": frozenset({"halfvec"}),
        "sparsevec_out": frozenset({"sparsevec"}),
    }
)
"""Output function (prosrc) → the extension type names it prints."""


def extension_type(info: TypeInfo) -> str:
    """The extension type `info` is, or "" when it is none pgcdc knows."""
    names = EXTENSION_TYPES.get(info.output_src)
    return info.name if names is not None and info.name in names else ""
