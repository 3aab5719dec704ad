"""The reg* types (regproc.c): an OID whose text is a catalog object's name.

Receives: the 4-byte OID image and the registry, whose `oid_names` is the catalog
stage's resolver (`connectors.postgres.catalog_types.CatalogNames`: the server's own
output function over the catalog connection, with the default search_path, cached by
(kind, OID)). Hands on: the name regclassout, regtypeout, regprocout, regprocedureout,
regoperout, regoperatorout, regroleout, regnamespaceout, regconfigout,
regdictionaryout and regcollationout print (schema-qualified when not visible on the
search path; `-` for OID 0; the bare number for a missing object). The text is also
the Python value (Debezium has no mapping for these types).

The names are the catalog's as the resolver first read them in this session, not the
historic catalog's: an object renamed or dropped after the change was written but
before the worker first met its OID prints its new name or its number, where
test_decoding would print the old name; one renamed after that keeps the name read
then until the worker restarts (nothing clears the resolver's cache while it runs:
`CatalogTypes.invalidate_all`, which would, has no caller).

Pure: no SQL here; without a resolver a value raises `UnknownTypeError`.
"""

from __future__ import annotations

from collections.abc import Callable

from service.errors import UnknownTypeError
from service.types.registry import TypeRegistry
from service.types.text import uint4_value

OidNames = Callable[[str, int], str | None]
"""(kind, oid) → text: kind is a reg* output function (`regclassout`, …), the text
it prints; or `role`, the raw role name (None when there is no such role)."""

REG_OUTPUTS = frozenset(
    {
        "regprocout",
        "regprocedureout",
        "regoperout",
        "regoperatorout",
        "regclassout",
        "regtypeout",
        "regroleout",
        "regnamespaceout",
        "regconfigout",
        "regdictionaryout",
        "regcollationout",
    }
)


def reg_text(buf: bytes, src: str, registry: TypeRegistry) -> str:
    oid = uint4_value(buf)
    names = registry.oid_names
    if names is None:
        raise UnknownTypeError(f"{src} needs the catalog: no resolver attached")
    text = names(src, oid)
    if text is None:
        raise UnknownTypeError(f"{src} could not resolve OID {oid}")
    return text
