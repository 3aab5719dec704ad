"""`decoding.unknown_types`: what a column of a type pgcdc cannot decode becomes.

Receives: the configured mode and each captured column whose type (or a type inside it:
array element, domain base, composite field, range or multirange subtype, as
`service.types.convert.undecodable_part` follows them) no decoder knows. Hands on the
decision, taken when a table definition is first used (the worker's start check, the
initial snapshot, or a definition that appears later in the schema history), before
any row of it is published:

- `fail` (the default): `UnknownTypeError` listing every such column (table, column,
  type) and naming the setting to change; the worker stops before the Kafka
  transaction that would carry a row of the table commits;
- `omit`: the column is left out of the relation and of every row (Avro schema and
  value, the text plugin's line);
- `bytes`: the column is published as its stored bytes (the datum as the heap holds
  it, TOAST resolved and decompressed, without the varlena header: what `deform` hands
  on), Avro `bytes` with the schema parameter `__pgcdc.type` naming the type.

`on_column(mode, column)` is called once per (table, column) with `omit` and
`bytes`, so that the caller logs a warning and sets a metric. `covers(schema, table,
column)` says which columns are published (the worker: its table and column filters);
a column it excludes is never decided, its values never read (a read would raise
`UnknownTypeError`).
Pure; no I/O.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from service.errors import UnknownTypeError

MODES = ("fail", "omit", "bytes")
SETTING = "decoding.unknown_types"
TYPE_PARAMETER = "__pgcdc.type"
"""The Avro schema parameter (connect.parameters) naming the type of a `bytes` column."""


@dataclass(slots=True, frozen=True)
class UnknownColumn:
    """A captured column whose values pgcdc cannot decode."""

    table: str  # schema.name
    column: str
    type_name: str  # the column's type, as format_type prints it
    unknown_type: str  # the undecodable type: the column's own, or one inside it

    def describe(self) -> str:
        inner = "" if self.unknown_type == self.type_name else f" (inside: {self.unknown_type})"
        return f"{self.table}.{self.column} {self.type_name}{inner}"


def unknown_types_error(
    columns: Sequence[UnknownColumn], *, lsn: int | None = None
) -> UnknownTypeError:
    """The `fail` error: every column listed, and the setting that decides."""
    listed = "; ".join(c.describe() for c in columns)
    first = columns[0] if columns else None
    return UnknownTypeError(
        f"pgcdc cannot decode the type of {len(columns)} captured column(s): {listed}. "
        f"Set {SETTING} to 'omit' (leave the columns out) or 'bytes' (publish their "
        "stored bytes), or exclude the tables with filters",
        lsn=lsn,
        relation=first.table if first is not None and len(columns) == 1 else None,
        field=SETTING,
    )


class UnknownTypePolicy:
    """The configured mode, and the columns already reported under it."""

    __slots__ = ("_seen", "covers", "mode", "on_column")

    def __init__(
        self,
        mode: str = "fail",
        on_column: Callable[[str, UnknownColumn], None] | None = None,
        covers: Callable[[str, str, str], bool] | None = None,
    ) -> None:
        if mode not in MODES:
            raise UnknownTypeError(f"{SETTING} must be one of {MODES}, not {mode!r}", field=SETTING)
        self.mode = mode
        self.on_column = on_column
        self.covers = covers or _everything
        self._seen: set[tuple[str, str]] = set()  # (table, column)

    def decide(self, columns: Sequence[UnknownColumn], *, lsn: int | None = None) -> str:
        """'omit' or 'bytes' for these columns (reported once each), or raise (`fail`)."""
        if not columns:
            return self.mode
        if self.mode == "fail":
            raise unknown_types_error(columns, lsn=lsn)
        for col in columns:
            if (col.table, col.column) not in self._seen:
                self._seen.add((col.table, col.column))
                if self.on_column is not None:
                    self.on_column(self.mode, col)
        return self.mode


def _everything(schema: str, table: str, column: str) -> bool:
    return True
