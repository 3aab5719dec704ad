"""What is captured: `settings.filters` and the message-prefix filter, compiled once.

Every filter is a list of regular expressions matched against the whole name
(`re.fullmatch`): schemas against the schema name, tables against `schema.table`,
columns against `schema.table.column`, message prefixes against the prefix. An empty
include list includes everything; an exclude always wins over an include. The avro
plugin and the initial snapshot ask the same `TableFilter`, so a table is either
snapshotted and streamed or neither. A pattern that does not compile is a
`ConfigError` naming the field.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from service.config import FilterSettings
from service.errors import ConfigError


def patterns(items: Sequence[str], field: str = "filters") -> tuple[re.Pattern[str], ...]:
    """The compiled `items` (`ConfigError` naming `field` for one that does not compile)."""
    try:
        return tuple(re.compile(p) for p in items)
    except re.error as exc:
        raise ConfigError(f"bad filter pattern: {exc}", field=field) from exc


def matches(pats: Sequence[re.Pattern[str]], name: str) -> bool:
    """True when any pattern matches the whole of `name`."""
    return any(p.fullmatch(name) for p in pats)


class TableFilter:
    """`filters.include/exclude_schemas/tables/columns` of the settings, compiled."""

    __slots__ = ("exc_columns", "exc_schemas", "exc_tables", "inc_schemas", "inc_tables")

    def __init__(self, filters: FilterSettings) -> None:
        self.inc_schemas = patterns(filters.include_schemas, "filters.include_schemas")
        self.exc_schemas = patterns(filters.exclude_schemas, "filters.exclude_schemas")
        self.inc_tables = patterns(filters.include_tables, "filters.include_tables")
        self.exc_tables = patterns(filters.exclude_tables, "filters.exclude_tables")
        self.exc_columns = patterns(filters.exclude_columns, "filters.exclude_columns")

    def __call__(self, schema: str, name: str) -> bool:
        """Is table `schema.name` captured?"""
        if self.inc_schemas and not matches(self.inc_schemas, schema):
            return False
        if matches(self.exc_schemas, schema):
            return False
        qualified = f"{schema}.{name}"
        if self.inc_tables and not matches(self.inc_tables, qualified):
            return False
        return not matches(self.exc_tables, qualified)

    def excluded_columns(self, schema: str, name: str, columns: Sequence[str]) -> frozenset[str]:
        """The columns of table `schema.name` that `filters.exclude_columns` drops."""
        qualified = f"{schema}.{name}"
        return frozenset(c for c in columns if matches(self.exc_columns, f"{qualified}.{c}"))
