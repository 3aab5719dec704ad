"""The start-time type check: every captured column whose type pgcdc cannot decode.

Receives: a connection to the source database and the table filters. Hands on:
`UndecodableColumn`s (table, column, the column's type, and the inner type that is
unknown: the column's own, or an array element, domain base, composite field or range
subtype somewhere inside it), found by `service.types.convert.undecodable_part` over
the catalog's type facts. `pgcdc setup` reports them; nothing here decides what to do.

This module does I/O (SQL, read-only).
"""

from __future__ import annotations

from dataclasses import dataclass

import psycopg2.extensions

from connectors.postgres.catalog_types import CatalogTypes
from service.config import FilterSettings
from service.output.filters import TableFilter
from service.types.convert import undecodable_part

_COLUMNS_SQL = """
SELECT n.nspname, c.relname, a.attname, a.atttypid,
       pg_catalog.format_type(a.atttypid, a.atttypmod)
FROM pg_catalog.pg_attribute a
JOIN pg_catalog.pg_class c ON c.oid = a.attrelid
JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
WHERE c.relkind IN ('r', 'p') AND a.attnum > 0 AND NOT a.attisdropped
  AND n.nspname NOT IN ('pg_catalog', 'information_schema', 'pgcdc')
  AND n.nspname NOT LIKE 'pg_toast%%' AND n.nspname NOT LIKE 'pg_temp%%'
ORDER BY n.nspname, c.relname, a.attnum
"""


@dataclass(slots=True, frozen=True)
class UndecodableColumn:
    """A captured column pgcdc cannot decode, and the type inside it that is unknown."""

    table: str  # schema.name
    column: str
    type_name: str  # format_type of the column
    unknown_type: str  # the undecodable type (the column's own, or one inside it)
    output_function: str
    schema: str = ""  # the table's schema and name, apart
    name: str = ""

    def describe(self) -> str:
        inner = "" if self.unknown_type == self.type_name else f" (inside: {self.unknown_type})"
        return (
            f"{self.table}.{self.column}: type {self.type_name}{inner}, output function "
            f"{self.output_function}, cannot be decoded"
        )


def undecodable_columns(
    conn: psycopg2.extensions.connection, filters: FilterSettings
) -> list[UndecodableColumn]:
    """Every column of every captured table whose values pgcdc could not decode."""
    included = TableFilter(filters)
    with conn.cursor() as cur:
        cur.execute(_COLUMNS_SQL)
        rows = [r for r in cur.fetchall() if included(r[0], r[1])]
    types = CatalogTypes(conn)
    registry = types.ensure({int(r[3]) for r in rows})
    out = []
    for schema, table, column, typid, type_name in rows:
        found = undecodable_part(registry.get(int(typid), column=column), registry)
        if found is not None:
            out.append(
                UndecodableColumn(
                    f"{schema}.{table}",
                    column,
                    str(type_name),
                    found.name,
                    found.output_src,
                    schema,
                    table,
                )
            )
    return out
