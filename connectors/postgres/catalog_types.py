"""Catalog stage, type part: pg_type, pg_enum, pg_range and pg_attribute into TypeInfo.

Receives: a psycopg2 connection to the source database and type OIDs to describe.
Hands on: `TypeInfo` records (service.types.registry), cached by OID, including
everything the type decoders need transitively: a domain's base type, an array's
element type, a range's subtype, a composite's field types. The cache is explicit:
`invalidate(oid)` or `invalidate_all()` forget what it holds; nothing expires by
itself, and the worker calls neither, so a session keeps what it read first (the
reg* names included: service.types.regtypes).

This module does I/O (SQL) and is kept out of the pure decoders on purpose. Run as
`python -m connectors.postgres.catalog_types [DSN...]` it regenerates the built-in type table
in `service/types/registry.py` from the live servers (by default pg15..pg18 of
deploy/local/services.py), with a comment at each type whose facts differ by version.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterable
from pathlib import Path
from types import MappingProxyType
from typing import Any

import psycopg2
import psycopg2.extensions

from service.impl import native_name_cache
from service.types.acl import role_text
from service.types.deform import Column
from service.types.registry import TypeInfo, TypeRegistry

_TYPE_SQL = """
SELECT t.oid, t.typname, t.typlen, t.typbyval, t.typalign, t.typtype, p.prosrc,
       t.typelem, t.typdelim, t.typbasetype, t.typtypmod, t.typrelid,
       COALESCE(r.rngsubtype, 0), COALESCE(m.rngtypid, 0)
FROM pg_catalog.pg_type t
JOIN pg_catalog.pg_proc p ON p.oid = t.typoutput
LEFT JOIN pg_catalog.pg_range r ON r.rngtypid = t.oid
LEFT JOIN pg_catalog.pg_range m ON m.rngmultitypid = t.oid
WHERE t.oid = ANY(%s)
"""

_ENUM_SQL = """
SELECT enumtypid, oid, enumlabel FROM pg_catalog.pg_enum WHERE enumtypid = ANY(%s)
"""

_FIELDS_SQL = """
SELECT a.attrelid, a.attnum, a.attname, a.atttypid, a.atttypmod, a.attlen, a.attbyval,
       a.attalign, a.attnotnull, a.attisdropped
FROM pg_catalog.pg_attribute a
WHERE a.attrelid = ANY(%s) AND a.attnum > 0
ORDER BY a.attrelid, a.attnum
"""

_BUILTIN_SQL = """
SELECT t.oid, t.typname, t.typlen, t.typbyval, t.typalign, t.typtype, p.prosrc,
       t.typelem, t.typdelim, COALESCE(r.rngsubtype, 0), COALESCE(m.rngtypid, 0)
FROM pg_catalog.pg_type t
JOIN pg_catalog.pg_proc p ON p.oid = t.typoutput
LEFT JOIN pg_catalog.pg_range r ON r.rngtypid = t.oid
LEFT JOIN pg_catalog.pg_range m ON m.rngmultitypid = t.oid
WHERE t.oid < 16384 AND t.typtype IN ('b', 'r', 'm')
  AND t.typnamespace = 'pg_catalog'::regnamespace
  AND NOT EXISTS (SELECT 1 FROM pg_catalog.pg_type e
                  WHERE e.oid = t.typelem AND e.typtype NOT IN ('b', 'r', 'm'))
ORDER BY t.oid
"""


class CatalogTypes:
    """Reads type facts on demand and keeps them in a `TypeRegistry` (the cache)."""

    __slots__ = ("_conn", "names", "registry")

    def __init__(self, conn: psycopg2.extensions.connection, registry: TypeRegistry | None = None):
        self._conn = conn
        self.names = CatalogNames(conn)
        self.registry = (
            registry
            if registry is not None
            else TypeRegistry(
                version=conn.server_version // 10000,
                oid_names=self.names,
                name_cache=self.names.native,
            )
        )

    def ensure(self, oids: Iterable[int]) -> TypeRegistry:
        """Load every OID in `oids`, and the types they depend on, if not cached."""
        pending = {o for o in oids if o and o not in self.registry}
        while pending:
            loaded = self._load(sorted(pending))
            pending = set()
            for info in loaded:
                deps = [info.typelem, info.typbasetype, info.range_subtype, info.multirange_range]
                deps += [f.typid for f in info.fields if not f.dropped]
                pending.update(d for d in deps if d and d not in self.registry)
        return self.registry

    def get(self, oid: int) -> TypeInfo:
        self.ensure([oid])
        return self.registry.get(oid)

    def invalidate(self, oid: int) -> None:
        """Forget one type (after ALTER TYPE ... ADD VALUE, ALTER TYPE ... ADD ATTRIBUTE)."""
        fresh = TypeRegistry()
        if oid in fresh:
            return  # built-in types never change
        self.registry = _without(self.registry, oid)

    def invalidate_all(self) -> None:
        self.names.clear()
        self.registry = self.registry.fresh()

    def _load(self, oids: list[int]) -> list[TypeInfo]:
        with self._conn.cursor() as cur:
            cur.execute(_TYPE_SQL, (oids,))
            rows = cur.fetchall()
            enum_oids = [r[0] for r in rows if r[5] == "e"]
            labels: dict[int, dict[int, str]] = {o: {} for o in enum_oids}
            if enum_oids:
                cur.execute(_ENUM_SQL, (enum_oids,))
                for typid, label_oid, label in cur.fetchall():
                    labels[typid][label_oid] = label
            relids = [r[11] for r in rows if r[5] == "c" and r[11]]
            fields: dict[int, list[Column]] = {r: [] for r in relids}
            if relids:
                cur.execute(_FIELDS_SQL, (relids,))
                for relid, attnum, name, typid, typmod, ln, byval, al, nn, dropped in cur:
                    fields[relid].append(
                        Column(attnum, name, typid, typmod, ln, byval, al, nn, dropped)
                    )
        out: list[TypeInfo] = []
        for row in rows:
            (
                oid,
                name,
                typlen,
                byval,
                al,
                typtype,
                src,
                elem,
                delim,
                base,
                typmod,
                relid,
                sub,
                multi,
            ) = row
            info = TypeInfo(
                oid=oid,
                name=name,
                typlen=typlen,
                typbyval=byval,
                typalign=al,
                typtype=typtype,
                output_src=src,
                typelem=elem,
                typdelim=delim,
                typbasetype=base,
                typtypmod=typmod,
                enum_labels=MappingProxyType(labels.get(oid, {})),
                fields=tuple(fields.get(relid, ())),
                range_subtype=sub,
                multirange_range=multi,
            )
            self.registry.add(info)
            out.append(info)
        return out


# The SQL type each reg* output function prints (service.types.regtypes.REG_OUTPUTS).
_REG_CASTS = {
    "regprocout": "regproc",
    "regprocedureout": "regprocedure",
    "regoperout": "regoper",
    "regoperatorout": "regoperator",
    "regclassout": "regclass",
    "regtypeout": "regtype",
    "regroleout": "regrole",
    "regnamespaceout": "regnamespace",
    "regconfigout": "regconfig",
    "regdictionaryout": "regdictionary",
    "regcollationout": "regcollation",
}


class CatalogNames:
    """`service.types.regtypes.OidNames` over the catalog connection, cached.

    A reg* value's text is what the server's own output function prints for the OID
    (with this connection's search_path, the default one, as a test_decoding session
    has), so it is exact for every object as the catalog holds it now. `role` gives a
    role's raw name (aclitem quotes it itself). The cache lives until `clear()` (the
    catalog stage's invalidate_all).

    `native` is the cache's image for the native row encoder (service._native.NameCache,
    when service.impl selects that encoder; else None): each name resolved here is put
    there too, as the text its type prints (a role's as aclitemout prints it,
    service.types.acl.role_text; a reg* name only when there is one), and it is cleared
    with this cache, so the encoder prints exactly what this resolver would now, and
    leaves a value whose name is not there yet to the Python path, which resolves it.
    """

    __slots__ = ("_cache", "_conn", "native")

    def __init__(self, conn: psycopg2.extensions.connection) -> None:
        self._conn = conn
        self._cache: dict[tuple[str, int], str | None] = {}
        self.native: Any = native_name_cache()

    def clear(self) -> None:
        self._cache.clear()
        if self.native is not None:
            self.native.clear()

    def __call__(self, kind: str, oid: int) -> str | None:
        key = (kind, oid)
        if key in self._cache:
            return self._cache[key]
        with self._conn.cursor() as cur:
            if kind == "role":
                cur.execute("SELECT rolname FROM pg_catalog.pg_roles WHERE oid = %s", (oid,))
            elif kind in _REG_CASTS:
                cur.execute(
                    f"SELECT %s::pg_catalog.oid::pg_catalog.{_REG_CASTS[kind]}::text", (oid,)
                )
            else:
                raise ValueError(f"no catalog name of kind {kind!r}")
            row = cur.fetchone()
        text = None if row is None else str(row[0])
        self._cache[key] = text
        if self.native is not None:
            if kind == "role":
                self.native.put(kind, oid, role_text(oid, text))
            elif text is not None:
                self.native.put(kind, oid, text)
        return text


def _without(registry: TypeRegistry, oid: int) -> TypeRegistry:
    fresh = registry.fresh()
    for info in registry.user_types():
        if info.oid != oid:
            fresh.add(info)
    return fresh


# Why a built-in type's facts or stored form differ between the majors, by type OID:
# each is printed as a comment at the type's entry in the generated table. A row that
# differs between the servers and has no note here stops the generator, so every
# difference is explained where the table holds it.
_VERSION_NOTES: dict[int, str] = {
    1033: "aclitem is {Oid grantee; Oid grantor; AclMode ai_privs} (utils/acl.h): AclMode"
    " is uint32 on 15 (typlen 12, align i) and uint64 from 16 (typlen 16, align d). The"
    " entry holds 16+'s; registry.BEFORE_16 gives 15 its own, and service.types.acl"
    " tells the layout from the datum's length.",
    1034: "_aclitem: align follows its element, i on 15 and d from 16 (see aclitem).",
    4072: "jsonpath's stored items are JsonPathItemType codes (utils/jsonpath.h); 17 appends"
    " jpiBigint, jpiBoolean, jpiDate, jpiDecimal, jpiInteger, jpiNumber, jpiStringFunc,"
    " jpiTime, jpiTimeTz, jpiTimestamp, jpiTimestampTz after jpiLikeRegex (the"
    " .bigint() ... .timestamp_tz() methods; 15 and 16 reject them), so 15/16 paths read"
    " the same under 17+. pg_type is the same in all four; service.types.jsonpath reads"
    " both sets of item kinds.",
}


def render_builtin_table(dsns: list[str]) -> str:
    """The generated region of registry.py: one TypeInfo per built-in type of any server.

    Where the servers disagree on a type, the newest server's row is kept and the
    type's `_VERSION_NOTES` entry is printed above it (ValueError if it has none)."""
    by_version: dict[int, dict[int, Any]] = {}
    for dsn in dsns:
        with psycopg2.connect(dsn) as conn, conn.cursor() as cur:
            cur.execute("SELECT current_setting('server_version_num')::int / 10000")
            found = cur.fetchone()
            assert found is not None
            version = int(found[0])
            cur.execute(_BUILTIN_SQL)
            by_version[version] = {row[0]: row for row in cur.fetchall()}
        conn.close()
    versions = sorted(by_version)
    by_oid: dict[int, Any] = {}
    for version in versions:  # the newest server's row wins
        by_oid.update(by_version[version])
    lines = [
        f"# From the servers of PostgreSQL {', '.join(map(str, versions))}.",
        "BUILTIN_TYPES: tuple[TypeInfo, ...] = (",
    ]
    for oid in sorted(by_oid):
        seen = {by_version[v].get(oid) for v in versions}
        note = _VERSION_NOTES.get(oid)
        if len(seen) > 1 and note is None:
            raise ValueError(f"type OID {oid} differs between the servers: {seen}; explain it")
        if note is not None:
            lines += [f"    # {line}" for line in _wrap(note, 92)]
        _, name, typlen, byval, al, typtype, src, elem, delim, sub, multi = by_oid[oid]
        extra = ""
        if elem:
            extra += f", typelem={elem}"
        if delim != ",":
            extra += f', typdelim="{delim}"'
        if sub:
            extra += f", range_subtype={sub}"
        if multi:
            extra += f", multirange_range={multi}"
        args = f'{oid}, "{name}", {typlen}, {byval}, "{al}", "{typtype}", "{src}"{extra}'
        if len(args) > 84:
            lines.append(f"    TypeInfo(\n        {args}\n    ),")
        else:
            lines.append(f"    TypeInfo({args}),")
    lines.append(")")
    return "\n".join(lines)


def _wrap(text: str, width: int) -> list[str]:
    out: list[str] = []
    line = ""
    for word in text.split():
        if line and len(line) + 1 + len(word) > width:
            out.append(line)
            line = word
        else:
            line = f"{line} {word}" if line else word
    return [*out, line] if line else out


def main(argv: list[str]) -> int:
    dsns = argv[1:] or [
        f"host=127.0.0.1 port={port} user=postgres" for port in (55415, 55416, 55417, 55418)
    ]
    target = Path(__file__).resolve().parents[2] / "service" / "types" / "registry.py"
    text = target.read_text()
    table = render_builtin_table(dsns)
    new = re.sub(
        r"(# BEGIN GENERATED[^\n]*\n).*?(\n# END GENERATED)",
        lambda m: m.group(1) + table + m.group(2),
        text,
        flags=re.S,
    )
    target.write_text(new)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
