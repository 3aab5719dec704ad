"""decoding.unknown_types at the worker's start: the check, the warning, the metric.

Receives: the settings (and the worker's metrics). Hands on: the `UnknownTypePolicy`
every row decoder of the process shares (the stream's `HistoryRows`, the initial
snapshot's reader, the chunked snapshot's readers), whose `omit`/`bytes` decisions log
`unknown_type_column` (a structlog warning: table, column, type, mode) once per column
and set `pgcdc_omitted_columns{slot,table,column,type}` (omit) or
`pgcdc_bytes_columns{...}` (bytes) to 1; and `check_at_start`, which runs the check
`pgcdc setup` runs (connectors.postgres.type_check) over every captured column before
streaming or the snapshot begins: with `fail` it raises `UnknownTypeError` listing every
such column, otherwise each is reported through the policy.

This module does I/O (one read-only catalog query at start).
"""

from __future__ import annotations

from typing import Any, Protocol

import structlog

from connectors.postgres.server import connect
from connectors.postgres.type_check import undecodable_columns
from service.config import Settings
from service.output.filters import TableFilter
from service.types.unknown import UnknownColumn, UnknownTypePolicy

log = structlog.get_logger(__name__)


class _Labelled(Protocol):
    def labels(self, *values: str) -> Any: ...


class UnknownTypeMetrics(Protocol):
    @property
    def omitted_columns(self) -> _Labelled: ...
    @property
    def bytes_columns(self) -> _Labelled: ...


def make_policy(
    settings: Settings,
    metrics: UnknownTypeMetrics | None = None,
    *,
    filtered: bool = True,
) -> UnknownTypePolicy:
    """The process's policy: settings.decoding.unknown_types, reporting as above;
    `filtered`: only the tables and columns settings.filters captures are decided (the
    Avro plugin publishes no other; `pgcdc peek` prints everything: False)."""
    slot = settings.source.slot

    def report(mode: str, col: UnknownColumn) -> None:
        log.warning(
            "unknown_type_column",
            mode=mode,
            table=col.table,
            column=col.column,
            type=col.type_name,
            unknown_type=col.unknown_type,
            setting="decoding.unknown_types",
        )
        if metrics is not None:
            gauge = metrics.omitted_columns if mode == "omit" else metrics.bytes_columns
            gauge.labels(slot, col.table, col.column, col.type_name).set(1)

    tables = TableFilter(settings.filters)

    def covers(schema: str, table: str, column: str) -> bool:
        """Captured by filters.include/exclude_*: the table, and the column."""
        return tables(schema, table) and not tables.excluded_columns(schema, table, [column])

    return UnknownTypePolicy(settings.decoding.unknown_types, report, covers if filtered else None)


def check_at_start(settings: Settings, policy: UnknownTypePolicy) -> list[UnknownColumn]:
    """Every captured column of a type pgcdc cannot decode, decided by `policy` (raises
    `UnknownTypeError` with `fail`)."""
    # Through `connect`: a refused or missing role or database is fatal, an unreachable
    # server is retried within source.retry_budget_s.
    conn = connect(settings.source.dsn(), "pgcdc-type-check")
    try:
        conn.set_session(readonly=True, autocommit=True)
        found = [
            UnknownColumn(c.table, c.column, c.type_name, c.unknown_type)
            for c in undecodable_columns(conn, settings.filters)
            if policy.covers(c.schema, c.name, c.column)  # excluded columns: never read
        ]
    finally:
        conn.close()
    policy.decide(found)
    return found
