"""Assembling a decoding session: source → reader → decoder → reorder buffer → plugin.

`Session` wires the pure stages (XLogReader, Decoding, SnapBuilder, ReorderBuffer,
SchemaHistory, HistoryRows) to the edges (a WAL source from `connectors`, the catalog
stage) for one database, and pumps WAL through them. It is what `pgcdc peek`,
`pgcdc replay` and the worker run.

Start-up order matters, and is the same as PostgreSQL's for a new logical slot:
1. WAL is read from a point at or before the catalog snapshot (a physical slot's
   restart LSN, or the start of an archive);
2. the catalog snapshot is read (REPEATABLE READ, with `pg_current_wal_lsn()`); only
   transactions that commit after its LSN are emitted (`SnapBuilder(start_lsn)`); when
   it is aligned at the consistent point instead, it is taken until it sees every
   transaction the stream skips (`SnapBuilder.must_see`);
3. a RUNNING_XACTS record is forced (CHECKPOINT on PG15, `pg_log_standby_snapshot()`
   from PG16) so the snapshot builder becomes consistent without waiting for the
   bgwriter's next one.

`restart_lsn()` is what may be confirmed to the physical slot: the oldest first LSN of
a transaction still in the reorder buffer, or the decoded position when none is, moved
back to the newest checkpoint redo point before it (the historic pg_class rebuilds
pg_class's pages from a redo point on: `service.schema.pgclass`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from connectors.postgres.catalog import Catalog
from connectors.postgres.type_loader import TypeLoader
from service.decode.events import HeapChange, InsertRows, InsertRun, PredecodedRecord
from service.errors import DecodeError
from service.impl import predecoding, xlog_reader_class
from service.output.api import (
    ColumnValue,
    PluginContext,
    PluginWrapper,
    RecordRun,
    RelationInfo,
    RowChange,
)
from service.output.logical import Decoding, PluginSink
from service.reorder.buffer import PYTHON_CHANGE_OVERHEAD, ReorderBuffer, ReorderBufferSettings
from service.reorder.spill import LocalSpillStore
from service.schema.history import SchemaHistory
from service.schema.pgclass import HistoricClass
from service.schema.tabledef import CatalogSnapshot, TableDef
from service.snapbuild.snapbuild import SnapBuilder
from service.types.rowdecode import HistoryRows
from service.types.unknown import UnknownTypePolicy
from service.types.varlena import ToastPointer
from service.wal.format import XLOG_BLCKSZ
from service.wal.record import RelFileLocator, XLogRecord
from service.wal.rmgr import RM_RELMAP_ID

END_OF_TIME = (1 << 64) - 1


@dataclass(slots=True)
class SessionConfig:
    """What a decoding session needs besides its plugin."""

    dsn: str
    slot: str = "pgcdc"
    work_mem: int = 64 * 1024 * 1024
    # decoding.memory_accounting; "postgres" (the default here) decides every spill as
    # PostgreSQL would, which the differential tests compare against.
    memory_accounting: Literal["process", "postgres"] = "postgres"
    spill_dir: Path = Path(".state/spill")
    # decoding.unknown_types, with the worker's warning and metric (default: fail)
    unknown_types: UnknownTypePolicy | None = None
    plugin_options: Mapping[str, str] = field(default_factory=dict)


SnapshotReader = Callable[[Any, CatalogSnapshot], None]
"""Reads rows inside the aligned snapshot's transaction (cursor, snapshot)."""


class _DeferredRows:
    """The RowResolver until the schema history exists (snapshot taken at consistency).

    Events reach it in WAL order before the history can be built; the ones the history
    cares about are kept and replayed into it, in order, when it is attached. No change
    is replayed before that, because nothing commits for output before consistency.
    """

    def __init__(self) -> None:
        self.target: HistoryRows | None = None
        self._pending: list[Any] = []

    def attach(self, rows: HistoryRows) -> None:
        for item in self._pending:
            if isinstance(item, tuple):
                rows.assign_child(item[0], item[1])
            else:
                rows.apply(item)
        self._pending.clear()
        self.target = rows

    def _rows(self) -> HistoryRows:
        if self.target is None:
            raise DecodeError("a change reached replay before the snapshot was aligned")
        return self.target

    def apply(self, event: object) -> None:
        if self.target is not None:
            self.target.apply(event)
        elif not isinstance(event, HeapChange):
            self._pending.append(event)

    def assign_child(self, top: int, sub: int) -> None:
        if self.target is not None:
            self.target.assign_child(top, sub)
        else:
            self._pending.append((top, sub))

    def relation(self, change: HeapChange, top_xid: int) -> RelationInfo | None:
        return self._rows().relation(change, top_xid)

    def toast_pointers(
        self, relation: RelationInfo, change: HeapChange, top_xid: int
    ) -> tuple[TableDef, list[ToastPointer]]:
        return self._rows().toast_pointers(relation, change, top_xid)

    def definition(self, relation: RelationInfo, change: HeapChange, top_xid: int) -> TableDef:
        return self._rows().definition(relation, change, top_xid)

    def row(
        self,
        relation: RelationInfo,
        change: HeapChange,
        new: bool,
        toast: Mapping[int, bytes],
        top_xid: int,
    ) -> Sequence[ColumnValue] | None:
        return self._rows().row(relation, change, new, toast, top_xid)

    def run(
        self,
        changes: list[HeapChange] | InsertRows,
        top_xid: int,
        make: Callable[[HeapChange], RowChange | None],
    ) -> Sequence[RowChange] | None:
        return self._rows().run(changes, top_xid, make)

    def runs(
        self,
        changes: list[HeapChange],
        top_xid: int,
        make: Callable[[HeapChange], RowChange | None],
    ) -> Sequence[RowChange] | None:
        return self._rows().runs(changes, top_xid, make)

    def relations_by_oid(self, relids: Sequence[int], lsn: int, xid: int) -> list[RelationInfo]:
        return self._rows().relations_by_oid(relids, lsn, xid)


class Session:
    """One decoding session over one database; feed it WAL chunks in order."""

    def __init__(
        self,
        config: SessionConfig,
        plugin: object,
        plugin_name: str,
        writer: Any,
        *,
        version: int,
        start_lsn: int,
        decode_from: int | None = None,
        restore: tuple[int, Mapping[str, Any]] | None = None,
        align: bool = False,
        snapshot_reader: SnapshotReader | None = None,
        plugin_state: Mapping[str, Any] | None = None,
        run_writer: Callable[[int, int, RecordRun], None] | None = None,
        runs_writer: Callable[[int, int, list[RecordRun]], None] | None = None,
    ) -> None:
        """Three ways to start:

        - default: the catalog snapshot is taken now; commits whose record starts
          before its LSN (or before `decode_from`) are not emitted. Right for decoding
          WAL written after the session started (peek) or a chosen range (replay).
        - `align=True`: as PostgreSQL exports a slot's snapshot. WAL is decoded from
          `start_lsn` until the snapshot builder is consistent; only then is the
          catalog snapshot taken (and `snapshot_reader` run inside it, for the initial
          data snapshot), and from then on a transaction is emitted iff it is not
          visible in that snapshot. Every transaction is thus in the snapshot or in the
          stream, exactly once.
        - `restore=(confirmed LSN, schema-history snapshot)` from stored offsets:
          consistent at once; every commit from the confirmed LSN on is emitted.
        """
        self.config = config
        self.version = version
        self.catalog = Catalog(config.dsn)
        self.history: SchemaHistory | None = None
        self.snapshot_lsn: int | None = None
        self._snapshot_reader = snapshot_reader
        self._awaiting_alignment = False
        self.on_aligned: Callable[[CatalogSnapshot], None] | None = None
        self._types = TypeLoader(config.dsn)
        self.rows: HistoryRows | _DeferredRows
        if restore is not None:
            confirmed, doc = restore
            self.snapshot_lsn = confirmed
            self.history = SchemaHistory.from_snapshot(doc, self.catalog)
            db_oid = self.history.db_oid
            self.snap = SnapBuilder.restored(confirmed)
            self.rows = self._history_rows(self.history)
        elif align:
            db_oid = self.catalog.database()[0]
            self.snap = SnapBuilder(start_lsn)
            self.rows = _DeferredRows()
            self._awaiting_alignment = True
        else:
            snapshot = self.catalog.snapshot()
            self.snapshot_lsn = snapshot.lsn
            self.history = SchemaHistory.from_catalog_snapshot(snapshot, self.catalog)
            db_oid = snapshot.db_oid
            self.snap = SnapBuilder(snapshot.lsn if decode_from is None else decode_from)
            self.rows = self._history_rows(self.history)
        ctx = PluginContext(
            config.slot,
            plugin_name,
            dict(config.plugin_options),
            writer,
            run_writer=run_writer,
            runs_writer=runs_writer,
            state=dict(plugin_state or {}),
        )
        self.wrapper = PluginWrapper(plugin, ctx)
        self.wrapper.startup(is_init=True)
        self.sink = PluginSink(self.wrapper, self.rows)
        self.spill = LocalSpillStore(config.spill_dir)
        # Which relation each relfilenode was, read off pg_class's pages in the WAL from
        # the start on (a redo point: see restart_lsn).
        self.pgclass = HistoricClass(version, self.catalog.pg_class_locator(), start_lsn)
        self.rb = ReorderBuffer(
            ReorderBufferSettings(
                work_mem=config.work_mem,
                change_overhead=(
                    PYTHON_CHANGE_OVERHEAD if config.memory_accounting == "process" else 0
                ),
            ),
            self.sink,
            self.spill,
            self._toast_check(),
        )
        self.decoding = Decoding(
            version=version,
            db_oid=db_oid,
            reorder=self.rb,
            snap=self.snap,
            rows=self.rows,
            plugin=self.wrapper,
            pgclass=self.pgclass,
        )
        # The Python reader or its native twin, as PGCDC_IMPL selects (service.impl).
        self.reader = xlog_reader_class()(
            start_lsn & ~(XLOG_BLCKSZ - 1) if start_lsn % XLOG_BLCKSZ else start_lsn
        )
        # The native reader decodes table-change heap records in its walk, and hands on
        # the records of rmgrs without rm_decode (btree, ...) without their bodies.
        # The relation map is not decoded, but the historic pg_class reads it: its records
        # must come with their bodies; and pg_class's own records come whole.
        self.records: Callable[[], Iterator[XLogRecord | PredecodedRecord | InsertRun]] = (
            predecoding(
                self.reader,
                self.decoding.decoder.without_decode - {RM_RELMAP_ID},
                runs=True,
                # `feed` skips the records before the start (the reader begins at its
                # page): none of them may be in a run with one after it.
                runs_from=start_lsn,
                inert_ops=self.decoding.decoder.inert_ops,
            )
            or self.reader.records
        )
        watch = getattr(self.reader, "watch_relations", None)
        if watch is not None:
            self.pgclass.on_move = lambda loc: watch([loc])
            if self.pgclass.locator is not None:
                watch([self.pgclass.locator])
        """The fed WAL's complete records, as `feed` decodes them (`Decoding.process`
        takes each): XLogRecords, and PredecodedRecords and InsertRuns from the native
        reader."""
        self.start_lsn = start_lsn

    def _history_rows(self, history: SchemaHistory) -> HistoryRows:
        return HistoryRows(
            history,
            self._types.types,
            self._types.names,
            unknown_types=self.config.unknown_types,
            missing_send=self._types.missing_send,
        )

    def _is_toast(self, locator: RelFileLocator) -> bool:
        return self.history is not None and self.history.is_toast(locator, END_OF_TIME)

    def _toast_check(self) -> Callable[[RelFileLocator], bool]:
        """The reorder buffer's toast check: `_is_toast`, bound straight to the history
        once there is one (`is_toast_now`, one call per check instead of two). Handed
        to the buffer again whenever `self.history` is replaced (`_align`)."""
        if self.history is None:
            return self._is_toast
        return self.history.is_toast_now

    @property
    def aligned(self) -> bool:
        """Whether changes can be emitted (the snapshot is in place)."""
        return self.history is not None and self.snap.is_consistent

    def _align(self) -> None:
        """The consistent point is reached: take the snapshot the stream continues from."""
        # A snapshot that sees every transaction the stream no longer emits (those
        # committed before the consistent point), as the exported one of a logical slot.
        snapshot = self.catalog.snapshot(inside=self._snapshot_reader, must_see=self.snap.must_see)
        self.snapshot_lsn = snapshot.lsn
        self.history = SchemaHistory.from_catalog_snapshot(snapshot, self.catalog)
        self.rb.set_toast_of(self._toast_check())
        deferred = self.rows
        assert isinstance(deferred, _DeferredRows)
        rows = self._history_rows(self.history)
        deferred.attach(rows)
        # From now on the deferred resolver only forwards (two calls per row for every
        # lookup): the driver and the sink get the history's resolver itself.
        self.rows = self.sink.rows = self.decoding.rows = rows
        self.snap.skip_visible_in(snapshot.xid_visible)
        self.decoding.skip_snapshot_changes(snapshot.lsn)
        self._awaiting_alignment = False
        if self.on_aligned is not None:
            self.on_aligned(snapshot)

    def feed(self, lsn: int, data: bytes) -> None:
        """Decode every complete record in this chunk of raw WAL."""
        self.reader.feed(data, lsn)
        for record in self.records():
            if record.lsn < self.start_lsn:
                continue
            self.decoding.process(record)
            if self._awaiting_alignment and self.snap.is_consistent:
                self._align()

    def pump(self, chunks: Iterable[tuple[int, bytes]], *, until_lsn: int | None = None) -> None:
        """Feed chunks until they end, or up to `until_lsn`.

        Bytes at or past `until_lsn` are never fed: in a live pg_wal they may not be
        written yet (zeros, or a recycled segment's old pages), which the reader would
        rightly call damage. `until_lsn` should be a position the server has written,
        e.g. `pg_current_wal_lsn()` or a record's end.
        """
        for lsn, chunk in chunks:
            data = chunk
            if until_lsn is not None and lsn + len(data) > until_lsn:
                data = chunk[: max(0, until_lsn - lsn)]
            if data:
                self.feed(lsn, data)
            if until_lsn is not None and lsn + len(data) >= until_lsn:
                return
            if self.reader.end_of_wal:
                return

    def restart_lsn(self) -> int:
        """Where decoding must restart to lose nothing: the oldest first LSN of a
        transaction still in the reorder buffer (the decoded position when none is),
        moved back to the newest checkpoint redo point before it, from which the WAL
        alone rebuilds pg_class's pages (`HistoricClass.redo_floor`)."""
        pending = self.rb.restart_lsn()
        lsn = pending if pending is not None else self.decoding.last_end_lsn
        return self.pgclass.redo_floor(lsn)

    def close(self) -> None:
        self.wrapper.shutdown()
        self.rb.close()
        self.catalog.close()
        self._types.close()
