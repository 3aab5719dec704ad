"""The initial data snapshot in one transaction: every existing row of the captured
tables, read once.

The worker's initial snapshot reads chunks instead (connectors.tablesnap.chunks,
`SharedSnapshotReader`, with the column plans defined here); this single-transaction
reader remains the reference the tests prove against the WAL path and the server.

Receives (as `Session(snapshot_reader=...)` calls it at the consistent point): a cursor
inside the one REPEATABLE READ transaction that also read the catalog, and that
transaction's `CatalogSnapshot`. From then on the stream publishes exactly the
transactions *not* visible in that snapshot (`SnapBuilder.skip_visible_in`), so the rows
read here plus the stream give every row exactly once.

Hands on, through a `RowSink` (normally `PluginEmitter`, the output plugin via its
wrapper): `begin(snapshot, first_table)` (the OID of the first table read, empty or
not), then `row(relation, values)` per row, table after table in OID order, then `end()`.
`PluginEmitter` makes that one pseudo-transaction begin → change(INSERT)* → commit with
`ctx.state["snapshot"]` set to Debezium 3.6's marker of each row
(service.tablesnap.markers; the Avro plugin then writes op `r`). The
pseudo-transaction's xid is the snapshot's xmax: the transaction is read only and holds
no xid of its own, and xmax is the xid Debezium's `txid_current()` in its snapshot
transaction gets when nothing else starts meanwhile. Its commit time is the clock at
`begin`, so every row has the same source.ts_ms, as Debezium's snapshot start.

Tables: the catalog snapshot's user tables (pgcdc's own schema, temp and system schemas
are never in it), minus those `settings.filters` exclude (anchored regular expressions,
the Avro plugin's rules); partitioned parents are skipped (their rows live, and are
read, in their partitions, as the WAL reports them).

Values, exactly as the WAL path gives them. Each table is read with
`COPY (SELECT ... FROM ONLY t) TO STDOUT (FORMAT binary)` on the snapshot's connection
(same transaction, same snapshot), parsed incrementally as the server streams it: memory
is bounded by one row, whatever the table size (a server-side cursor would give text,
which would need a parser per type). Every value arrives in its type's send format and
is rewritten into its stored form (`service.types.sendform`), then decoded by the same
`to_python`/`to_text` the WAL path uses, lazily, like `HistoryRows`. `RelationInfo` is
built by `HistoryRows` itself over a history made from the same catalog snapshot.
Special columns: xml is selected as `::text` (its stored text); a virtual generated
column (PG18) is NULL, as it is in the heap and so in the WAL. A column of a type the
decoders do not know is decided by `decoding.unknown_types` when `HistoryRows` plans
the table, before its first row is read (`service.types.unknown`): `fail` raises
`UnknownTypeError` listing the columns; `omit` leaves the column out of the SELECT
and of every row, as the WAL path does; `bytes` selects its output text and hands on
that text's UTF-8 bytes. That is where the snapshot differs from the WAL, which hands
on the stored bytes: SQL has no way to read the stored form of a type pgcdc does not
know (its send function, where it has one, is not the stored form either: ltree's
`ltxtq_send` is a version byte and the text; intarray's query_int has none). A
consumer tells the two apart by `source.snapshot`.

Progress: `SnapshotProgress` counts rows and tables into the Prometheus metrics
(`pgcdc_snapshot_rows_total{slot,table}`, `pgcdc_snapshot_tables_done`,
`pgcdc_snapshot_tables_total`), logs `snapshot_table_done` per table, and on an
interactive terminal draws a bar per table (rows read / pg_class.reltuples estimate).

Errors: SQL failures surface as psycopg2 errors to `Catalog.snapshot`, which maps the
connection ones to `SourceUnavailableError`; malformed COPY data is a `DecodeError`.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Mapping, Sequence
from typing import Any, Protocol, TextIO

import psycopg2.extensions
import structlog

from connectors.postgres.catalog_types import CatalogTypes
from connectors.postgres.copy_binary import CopyRows
from service._binary import U32
from service.config import FilterSettings
from service.errors import DecodeError, UnknownTypeError
from service.output.api import (
    ChangeOp,
    ColumnValue,
    PluginWrapper,
    RelationInfo,
    RowChange,
    TxnInfo,
)
from service.output.filters import TableFilter
from service.pgconst import TEXT_ARRAY_OID, TEXT_OID, UNIX_EPOCH_USECS, XML_OID
from service.schema.history import SchemaHistory
from service.schema.tabledef import CatalogSnapshot, TableDef
from service.tablesnap import markers
from service.types.convert import to_python, to_text, undecodable_part
from service.types.registry import TypeInfo, TypeRegistry
from service.types.rowdecode import HistoryRows, bytes_text
from service.types.sendform import (
    base_type,
    convertible,
    snapshot_registry,
    text_array_is_stored,
    text_is_stored,
    to_stored,
)
from service.types.snapshot_rewrites import text_valued
from service.types.unknown import UnknownTypePolicy

log = structlog.get_logger(__name__)


# --- where rows go -----------------------------------------------------------------------


class RowSink(Protocol):
    """Receiver of the snapshot: begin, row per row, end."""

    def begin(self, snapshot: CatalogSnapshot, first_table: int | None) -> None: ...

    def row(self, relation: RelationInfo, values: Sequence[ColumnValue]) -> None: ...

    def end(self) -> None: ...


class PluginEmitter:
    """The snapshot as one pseudo-transaction through the output plugin's wrapper.

    Holds one row back so that its marker (module docstring) can depend on the row
    after it. `txn.xid` is the snapshot's xmax; every LSN is the snapshot's LSN.
    `_held_first` says whether the held row is the first of its table.
    """

    def __init__(self, wrapper: PluginWrapper) -> None:
        self.wrapper = wrapper
        self.rows = 0
        self._txn: TxnInfo | None = None
        self._held: tuple[RelationInfo, Sequence[ColumnValue]] | None = None
        self._held_first = False
        self._first_table: int | None = None  # OID of the snapshot's first table

    def begin(self, snapshot: CatalogSnapshot, first_table: int | None) -> None:
        self._txn = TxnInfo(
            xid=snapshot.xmax,
            first_lsn=snapshot.lsn,
            final_lsn=snapshot.lsn,
            end_lsn=snapshot.lsn,
            commit_time=time.time_ns() // 1000 - UNIX_EPOCH_USECS,
            origin=None,
        )
        self._first_table = first_table
        self.wrapper.ctx.state["snapshot"] = markers.TRUE
        self.wrapper.call("begin", snapshot.lsn, self._txn.xid, self._txn)

    def _emit(self, *, last_overall: bool, last_in_table: bool) -> None:
        assert self._txn is not None and self._held is not None
        relation, values = self._held
        self._held = None
        self.wrapper.ctx.state["snapshot"] = markers.initial_marker(
            first_table=relation.oid == self._first_table,
            first_in_table=self._held_first,
            last_in_table=last_in_table,
            last_overall=last_overall,
        )
        change = RowChange(ChangeOp.INSERT, self._txn.final_lsn, relation, values, None, False)
        self.wrapper.call("change", change.lsn, self._txn.xid, self._txn, change)
        self.rows += 1

    def row(self, relation: RelationInfo, values: Sequence[ColumnValue]) -> None:
        first_in_table = True
        if self._held is not None:
            same = self._held[0].oid == relation.oid
            first_in_table = not same
            self._emit(last_overall=False, last_in_table=not same)
        self._held = (relation, values)
        self._held_first = first_in_table

    def end(self) -> None:
        txn = self._txn
        assert txn is not None
        try:
            if self._held is not None:
                self._emit(last_overall=True, last_in_table=True)
            self.wrapper.call("commit", txn.final_lsn, txn.xid, txn, txn.end_lsn)
        finally:
            # Every change after this one is a stream change again (op c, not r).
            self.wrapper.ctx.state.pop("snapshot", None)
            self._txn = None


# --- progress ----------------------------------------------------------------------------


class _Labelled(Protocol):
    def labels(self, *values: str) -> Any: ...


class SnapshotMetrics(Protocol):
    """The snapshot's three metrics (the worker's `service.app.metrics.Metrics` has them)."""

    @property
    def snapshot_rows(self) -> _Labelled: ...
    @property
    def snapshot_tables_done(self) -> _Labelled: ...
    @property
    def snapshot_tables_total(self) -> _Labelled: ...


class SnapshotProgress:
    """Metrics and logs always; a bar per table on an interactive terminal."""

    def __init__(
        self, metrics: SnapshotMetrics | None, slot: str, *, terminal: TextIO | None = None
    ) -> None:
        self.metrics = metrics
        self.slot = slot
        self.terminal = terminal
        self._table = ""
        self._estimate = 0
        self._rows = 0
        self._done = 0
        self._started = 0.0
        self._drawn = 0.0

    @classmethod
    def auto(cls, metrics: SnapshotMetrics | None, slot: str) -> SnapshotProgress:
        """A bar only when stderr is an interactive terminal."""
        return cls(metrics, slot, terminal=sys.stderr if sys.stderr.isatty() else None)

    def start(self, tables: int) -> None:
        if self.metrics is not None:
            self.metrics.snapshot_tables_total.labels(self.slot).set(tables)
            self.metrics.snapshot_tables_done.labels(self.slot).set(0)
        log.info("snapshot_started", tables=tables)

    def table(self, name: str, estimate: int) -> None:
        self._table, self._estimate, self._rows = name, max(estimate, 0), 0
        self._started = time.monotonic()
        self._draw(force=True)

    def advance(self, rows: int) -> None:
        self._rows += rows
        if self.metrics is not None:
            self.metrics.snapshot_rows.labels(self.slot, self._table).inc(rows)
        self._draw()

    def table_done(self) -> None:
        self._done += 1
        if self.metrics is not None:
            self.metrics.snapshot_tables_done.labels(self.slot).set(self._done)
        self._draw(force=True)
        if self.terminal is not None:
            self.terminal.write("\n")
            self.terminal.flush()
        log.info(
            "snapshot_table_done",
            table=self._table,
            rows=self._rows,
            seconds=round(time.monotonic() - self._started, 3),
        )

    def finish(self, rows: int) -> None:
        log.info("snapshot_done", tables=self._done, rows=rows)

    def _draw(self, *, force: bool = False) -> None:
        if self.terminal is None:
            return
        now = time.monotonic()
        if not force and now - self._drawn < 0.1:
            return
        self._drawn = now
        width = 30
        total = max(self._estimate, self._rows)
        filled = width if not total else min(width, width * self._rows // total)
        estimate = f"~{self._estimate}" if self._estimate else "?"
        self.terminal.write(
            f"\rsnapshot {self._table} [{'#' * filled}{'.' * (width - filled)}]"
            f" {self._rows}/{estimate} rows"
        )
        self.terminal.flush()


# --- columns -------------------------------------------------------------------------------


def quote_ident(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


class _ColumnPlan:
    """How one live column is selected and turned into a ColumnValue."""

    __slots__ = (
        "expr",
        "info",
        "mode",
        "name",
        "registry",
        "type_name",
        "type_oid",
    )

    def __init__(
        self,
        name: str,
        type_oid: int,
        type_name: str,
        expr: str | None,
        mode: str,
        info: TypeInfo,
        registry: TypeRegistry,
    ) -> None:
        self.name = name
        self.type_oid = type_oid
        self.type_name = type_name
        self.expr = expr  # None: not selected (always NULL)
        # "stored": rewrite + decode; "bytes": output text as bytes (unknown_types =
        # bytes); "null"; "xml[]": a text[] rewritten, then relabelled as an array of
        # xml (its elements decode as xml_out)
        self.mode = mode
        self.info = info
        self.registry = registry

    def value(self, data: bytes | None, where: str) -> ColumnValue:
        name, oid, tname = self.name, self.type_oid, self.type_name
        if data is None or self.mode == "null":
            return ColumnValue(name, oid, tname, _none, _none)
        if self.mode == "bytes":
            return ColumnValue(name, oid, tname, lambda: data, lambda: bytes_text(data))
        if self.mode == "text":
            return self._text_value(where)
        info, registry = self.info, self.registry
        stored: list[bytes] = []

        def datum() -> bytes:
            if not stored:
                try:
                    datum = to_stored(data, info, registry)
                    if self.mode == "xml[]":  # ArrayType.elemtype, after ndim and dataoffset
                        datum = datum[:8] + U32.pack(XML_OID) + datum[12:]
                    stored.append(datum)
                except DecodeError as exc:
                    raise DecodeError(exc.message, relation=where, field=name) from exc
            return stored[0]

        def value() -> object:
            return to_python(datum(), info, registry, column=name)

        def text() -> str | None:
            return to_text(datum(), info, registry, column=name)

        return ColumnValue(name, oid, tname, value, text)

    def _text_value(self, where: str) -> ColumnValue:
        info, name = self.info, self.name

        def text() -> str:
            raise UnknownTypeError(
                f"type {info.name} (OID {info.oid}, output function {info.output_src}) "
                "has no send form the snapshot can read",
                relation=where,
                field=name,
            )

        return ColumnValue(name, self.type_oid, self.type_name, text, text)


def _none() -> None:
    return None


# --- the reader ----------------------------------------------------------------------------


_NAMES_SQL = (
    "SELECT oid, pg_catalog.format_type(oid, NULL) FROM pg_catalog.pg_type WHERE oid = ANY(%s)"
)
_NO_SEND_SQL = "SELECT oid FROM pg_catalog.pg_type WHERE oid = ANY(%s) AND typsend = 0"
_RELTUPLES_SQL = "SELECT oid, reltuples::bigint FROM pg_catalog.pg_class WHERE oid = ANY(%s)"


class SnapshotReader:
    """`Session(snapshot_reader=...)`: reads every captured table into `sink`.

    `sink` may be set after construction (the emitter needs the session's wrapper);
    it must be set before the session reaches its consistent point.
    """

    def __init__(
        self,
        filters: FilterSettings,
        *,
        sink: RowSink | None = None,
        progress: SnapshotProgress | None = None,
        unknown_types: UnknownTypePolicy | None = None,
    ) -> None:
        self.included = TableFilter(filters)
        self.sink = sink
        self.progress = progress
        self.unknown_types = unknown_types or UnknownTypePolicy()
        self.rows = 0
        self.tables: list[str] = []

    def __call__(self, cursor: Any, snapshot: CatalogSnapshot) -> None:
        if self.sink is None:
            raise DecodeError("the snapshot reader has no sink", lsn=snapshot.lsn)
        conn: psycopg2.extensions.connection = cursor.connection
        tables = [
            t for t in snapshot.tables if t.relkind == "r" and self.included(t.schema, t.name)
        ]
        types = CatalogTypes(conn)
        names: dict[int, str] = {}

        def load_names(oids: Sequence[int]) -> Mapping[int, str]:
            cursor.execute(_NAMES_SQL, (list(oids),))
            got = {int(o): str(n) for o, n in cursor.fetchall()}
            names.update(got)
            return got

        rows = HistoryRows(
            SchemaHistory.from_catalog_snapshot(snapshot),
            types.ensure,
            load_names,
            unknown_types=self.unknown_types,
        )
        relations = {
            r.oid: r for r in rows.relations_by_oid([t.oid for t in tables], snapshot.lsn, 0)
        }
        cursor.execute(_RELTUPLES_SQL, ([t.oid for t in tables],))
        estimates = {int(o): int(n) for o, n in cursor.fetchall()}
        registry = snapshot_registry(types.registry)
        cursor.execute(_NO_SEND_SQL, ([t.oid for t in types.registry.user_types()],))
        no_send = frozenset(int(r[0]) for r in cursor.fetchall())
        plans = {
            t.oid: self._plans(t, relations[t.oid], types.registry, registry, no_send)
            for t in tables
        }
        if conn.encoding != "UTF8":
            cursor.execute("SET LOCAL client_encoding = 'UTF8'")
        progress = self.progress
        if progress is not None:
            progress.start(len(tables))
        self.sink.begin(snapshot, tables[0].oid if tables else None)
        for table in tables:
            self._read(
                cursor, table, relations[table.oid], plans[table.oid], estimates.get(table.oid, 0)
            )
        self.sink.end()
        if progress is not None:
            progress.finish(self.rows)

    def _plans(
        self,
        table: TableDef,
        rel: RelationInfo,
        types: TypeRegistry,
        registry: TypeRegistry,
        no_send: frozenset[int],
    ) -> list[_ColumnPlan]:
        out = []
        metas = {m.attnum: m for m in rel.columns}
        # the live columns the relation has (unknown_types = omit leaves some out)
        live = [c for c in table.columns if not c.dropped and c.attnum in metas]
        for col in live:
            meta = metas[col.attnum]
            info = types.get(col.type_oid, column=col.name)
            base = base_type(info, types)
            ident = quote_ident(col.name)
            elem = (
                base_type(types.get(base.typelem), types)
                if base.output_src == "array_out"
                else None
            )
            # The stored form of a textual value is its text (sendform.text_is_stored);
            # it is read as text where its send format cannot serve: a user type may have
            # no send function, and xml_send re-prints the declaration, so xml is always
            # read as its stored text. Types valued as their output text (TEXT_VALUED:
            # the reg* family, snapshots) are always read as text.
            sendable = convertible(info, types, no_send)
            if col.generated == "v":
                expr, mode = None, "null"
            elif meta.stored_bytes_type:
                expr, mode = f"{ident}::text", "bytes"
            elif base.output_src == "xml_out":
                # The stored text, decoded as xml (xml_out drops a plain declaration).
                expr, mode, info = f"{ident}::text", "stored", base
            elif text_is_stored(info, types) and not sendable:
                expr, mode, info = f"{ident}::text", "stored", types.get(TEXT_OID)
            elif elem is not None and elem.output_src == "xml_out":
                expr, mode, info = f"{ident}::text[]", "xml[]", types.get(TEXT_ARRAY_OID)
            elif text_array_is_stored(info, types) is not None and not sendable:
                expr, mode, info = f"{ident}::text[]", "stored", types.get(TEXT_ARRAY_OID)
            elif text_valued(base):
                expr, mode, info = f"{ident}::text", "stored", types.get(TEXT_OID)
            elif elem is not None and text_valued(elem):
                expr, mode, info = f"{ident}::text[]", "stored", types.get(TEXT_ARRAY_OID)
            elif (
                base.output_src == "record_out"
                and not sendable
                and undecodable_part(info, types) is None
            ):
                # A composite with a field whose send form has no rewrite (a reg* type,
                # aclitem, which has no send function at all, jsonpath...) but whose
                # every field the decoders know: both plugins publish a composite as its
                # record_out text, which `::text` is (the server's record_out, the text
                # the WAL path prints), so that text is its snapshot value.
                expr, mode, info = f"{ident}::text", "stored", types.get(TEXT_OID)
            elif not convertible(info, types, no_send):
                # A type the decoders know whose send form has no rewrite, or without
                # a send function somewhere inside (every type no decoder knows was
                # decided by the policy already): its values cannot be read.
                expr, mode = f"{ident}::text", "text"
            else:
                expr, mode = ident, "stored"
            # Decoded with the snapshot registry's TypeInfo (jsonb as its text).
            out.append(
                _ColumnPlan(
                    col.name,
                    col.type_oid,
                    meta.type_name,
                    expr,
                    mode,
                    registry.get(info.oid),
                    registry,
                )
            )
        return out

    def _read(
        self,
        cursor: Any,
        table: TableDef,
        rel: RelationInfo,
        plans: list[_ColumnPlan],
        estimate: int,
    ) -> None:
        where = table.qualified_name
        selected = [p for p in plans if p.expr is not None]
        sink, progress = self.sink, self.progress
        assert sink is not None
        if progress is not None:
            progress.table(where, estimate)
        batch = [0]

        def on_row(fields: list[bytes | None]) -> None:
            it = iter(fields)
            values = [p.value(next(it) if p.expr is not None else None, where) for p in plans]
            sink.row(rel, values)
            batch[0] += 1
            if batch[0] >= 1000 and progress is not None:
                progress.advance(batch[0])
                batch[0] = 0

        select = ", ".join(p.expr for p in selected if p.expr is not None) or "NULL"
        ncols = len(selected) if selected else 1
        target = CopyRows(ncols, on_row if selected else lambda _f: on_row([]))
        sql = (
            f"COPY (SELECT {select} FROM ONLY {quote_ident(table.schema)}."
            f"{quote_ident(table.name)}) TO STDOUT (FORMAT binary)"
        )
        cursor.copy_expert(sql, target)
        target.close()
        self.rows += target.rows
        self.tables.append(where)
        if progress is not None:
            if batch[0]:
                progress.advance(batch[0])
            progress.table_done()
