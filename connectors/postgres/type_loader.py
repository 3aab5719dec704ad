"""The session's on-demand catalog questions about types (the catalog stage's type part).

`TypeLoader` keeps one connection of its own and answers, with a cache behind it
(`CatalogTypes`): the facts of type OIDs the row decoder meets for the first time,
their `format_type()` names, and `MissingSend` for columns filled from attmissingval
(ADD COLUMN ... DEFAULT), read as the initial snapshot reads values (COPY BINARY).
A deadlock, serialization failure or lock timeout of these queries is retried with
backoff (`server.retry_transient`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import psycopg2

from connectors.postgres.catalog_types import CatalogTypes
from connectors.postgres.copy_binary import CopyRows
from connectors.postgres.server import connect, retry_transient
from service.errors import DecodeError
from service.types.registry import TypeRegistry


class TypeLoader:
    """The catalog's type facts and format_type() names, loaded on demand and cached."""

    def __init__(self, dsn: str) -> None:
        self._conn = connect(dsn, "pgcdc-types")
        self._types = CatalogTypes(self._conn)

    def types(self, oids: Sequence[int]) -> TypeRegistry:
        # ensure() skips what it has cached, so running it again after a failure is safe.
        return retry_transient("type query", lambda: self._types.ensure(oids))

    def names(self, oids: Sequence[int]) -> Mapping[int, str]:
        def attempt() -> Mapping[int, str]:
            with self._conn.cursor() as cur:
                cur.execute(
                    "SELECT oid, pg_catalog.format_type(oid, NULL) FROM pg_catalog.pg_type "
                    "WHERE oid = ANY(%s)",
                    (list(oids),),
                )
                return {int(oid): str(name) for oid, name in cur.fetchall()}

        return retry_transient("type name query", attempt)

    def missing_send(self, type_oid: int, typmod: int, literal: str) -> bytes | None:
        """`service.types.rowdecode.MissingSend`: attmissingval's element as the type, in send
        format (COPY BINARY, as the snapshot reads values; UTF-8 like the stored text)."""
        fields: list[bytes | None] = []

        def attempt() -> None:
            fields.clear()
            with self._conn.cursor() as cur:
                if self._conn.encoding != "UTF8":
                    self._conn.set_client_encoding("UTF8")
                cur.execute(
                    "SELECT pg_catalog.format_type(%s, %s), "
                    "typdelim = ',' OR typcategory = 'A' "
                    "FROM pg_catalog.pg_type WHERE oid = %s",
                    (type_oid, typmod if typmod >= 0 else None, type_oid),
                )
                row = cur.fetchone()
                assert row is not None
                # attmissingval prints with the type's own delimiter (box: ';'), which a
                # text[] would split on ',': read such a literal as an array of the type.
                array = "pg_catalog.text[]" if row[1] else f"{row[0]}[]"
                sql = cur.mogrify(
                    f"COPY (SELECT ((%s::{array})[1])::{row[0]}) TO STDOUT (FORMAT binary)",
                    (literal,),
                ).decode()
                target = CopyRows(1, fields.extend)
                cur.copy_expert(sql, target)
                target.close()

        try:
            retry_transient("attmissingval query", attempt)
        except (psycopg2.DataError, psycopg2.ProgrammingError) as exc:
            raise DecodeError(
                f"the server cannot read {literal!r} as type {type_oid}: {exc}".strip()
            ) from exc
        if len(fields) != 1:
            raise DecodeError(f"attmissingval {literal!r} read as {len(fields)} values")
        return fields[0]

    def close(self) -> None:
        self._conn.close()
