"""The decoding driver: records in, plugin callbacks out (logical.c + decode.c's glue).

Receives `XLogRecord`s in LSN order from a WAL source through the XLog reader.
For each record it does what LogicalDecodingProcessRecord does: assigns a
subtransaction to its parent when the record carries a top-level xid, registers the
record's xid with the reorder buffer, decodes the record into events
(`service.decode`), and routes each event to the snapshot builder and the reorder
buffer under the gating rules of decode.c (nothing is queued before the snapshot
builder reaches FULL_SNAPSHOT; changes of other databases are not queued; commits that
need skipping are forgotten, DecodeTXNNeedSkip). Once a first start's snapshot is
aligned (`skip_snapshot_changes`), changes of the transactions it holds, which their
commit skips, are not queued either.

The reorder buffer hands transactions back to `PluginSink`, which turns raw tuples
into decoded rows through a `RowResolver` (schema history + type decoders) and calls the
output plugin only through its `PluginWrapper`.

Ordering: plugin callbacks come in commit order, each transaction's changes in LSN
order; consecutive inserts carrying TOAST chunks may come as one `changes` call
(`PluginSink._toasted`), before anything after them, and so may a transaction's plain
changes (one RowRun, or a RunList of its runs of several tables: `RowResolver.runs`).
Errors: everything raised is a
PgcdcError carrying the LSN where it arose.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Protocol

import structlog

from service.decode.dispatch import decoder_for, toplevel_assignment, xid_to_process
from service.decode.events import (
    AbortEvent,
    AssignmentEvent,
    ChangeKind,
    CheckpointEvent,
    CommitEvent,
    HeapChange,
    InplaceEvent,
    InsertRows,
    InsertRun,
    InvalidationsEvent,
    MessageEvent,
    NewCidEvent,
    ParameterChangeEvent,
    PredecodedRecord,
    PrepareEvent,
    RunningXactsEvent,
    SmgrCreateEvent,
    SmgrTruncateEvent,
    SwitchEvent,
    TruncateEvent,
)
from service.errors import DecodeError, SchemaMismatchError
from service.lsn import format_lsn
from service.output.api import (
    ChangeOp,
    ColumnValue,
    Message,
    PluginWrapper,
    RelationInfo,
    RowChange,
    TruncateChange,
    TxnInfo,
)
from service.output.toastfill import ToastFill
from service.reorder.buffer import ReorderBuffer, ReorderBufferTXN
from service.reorder.changes import EMPTY_TOAST, ReplayChange
from service.schema.pgclass import HistoricClass
from service.schema.tabledef import TableDef
from service.snapbuild.snapbuild import SnapBuilder
from service.types.varlena import ToastPointer
from service.wal import rmgr as rt
from service.wal.record import XLogRecord

log = structlog.get_logger(__name__)


def of_another_database(ev: CommitEvent | AbortEvent, db_oid: int) -> bool:
    """DecodeTXNNeedSkip's database rule (decode.c): the record names a database, and
    not `db_oid`. A record without dbinfo parses as database 0, and so does one a
    process connected to no database wrote (under wal_level=logical every commit carries
    dbinfo, with MyDatabaseId): PostgreSQL decodes both for every slot."""
    return ev.db_oid not in (0, db_oid)


BASE_SNAPSHOT = "base-snapshot"
"""What a transaction's base snapshot stands for here: pgcdc keeps no historic snapshot
(the schema history answers instead), only the fact that the transaction has one."""

# How many commits skipped as the aligned snapshot's are logged at info, one line each;
# the rest at debug (a first start's backlog can hold a busy server's every commit
# since the checkpoint).
IN_SNAPSHOT_LOGGED = 100

# Heap records on which heap_decode calls SnapBuildProcessChange *before* the Decode*
# routine looks at the database or the tuple: a catalog insert (which logs no tuple
# for decoding) still gives its transaction a base snapshot, so the transaction is
# replayed (an "empty" BEGIN/COMMIT without skip-empty-xacts). PG15 does it for a
# catalog INPLACE update with a valid xid too; PG18 no longer does.
_HEAP_BASE_OPS = frozenset(
    {
        rt.XLOG_HEAP_INSERT,
        rt.XLOG_HEAP_UPDATE,
        rt.XLOG_HEAP_HOT_UPDATE,
        rt.XLOG_HEAP_DELETE,
        rt.XLOG_HEAP_TRUNCATE,
        rt.XLOG_HEAP_CONFIRM,
    }
)
_HEAP_BASE_OPS_15 = _HEAP_BASE_OPS | {rt.XLOG_HEAP_INPLACE}


class RowResolver(Protocol):
    """Relation definitions and row decoding, as valid at each change (schema history)."""

    def apply(self, event: object) -> None:
        """Every decoded event, in WAL order, before the reorder buffer sees it."""

    def assign_child(self, top: int, sub: int) -> None:
        """A subtransaction's parent became known."""

    def relation(self, change: HeapChange, top_xid: int) -> RelationInfo | None:
        """The table a heap change belongs to, or None when it must not be emitted
        (rewrite output, a table excluded by filters, a system catalog)."""

    def row(
        self,
        relation: RelationInfo,
        change: HeapChange,
        new: bool,
        toast: Mapping[int, bytes],
        top_xid: int,
    ) -> Sequence[ColumnValue] | None:
        """The new (or old) tuple of `change` decoded against `relation`."""

    def run(
        self,
        changes: list[HeapChange] | InsertRows,
        top_xid: int,
        make: Callable[[HeapChange], RowChange | None],
    ) -> Sequence[RowChange] | None:
        """`changes` (no TOAST chunks held) as one sequence of rows that builds each row
        with `make` when it is read, when they are alike enough to be one run of one
        table definition and op; else None (convert them one by one)."""

    def runs(
        self,
        changes: list[HeapChange],
        top_xid: int,
        make: Callable[[HeapChange], RowChange | None],
    ) -> Sequence[RowChange] | None:
        """`changes` cut where the table or the op changes, each piece as `run` gives
        it, as one sequence for one `changes` call (a RowRun when there is one piece,
        else a RunList of them); None when a piece is not one run (convert them all
        one by one)."""

    def relations_by_oid(self, relids: Sequence[int], lsn: int, xid: int) -> list[RelationInfo]:
        """Definitions of truncated tables (TRUNCATE names relation OIDs)."""

    def toast_pointers(
        self, relation: RelationInfo, change: HeapChange, top_xid: int
    ) -> tuple[TableDef, list[ToastPointer]]:
        """The definition valid for `change` and its new tuple's TOAST pointers."""

    def definition(self, relation: RelationInfo, change: HeapChange, top_xid: int) -> TableDef:
        """The definition valid for `change`."""


def txn_info(txn: ReorderBufferTXN) -> TxnInfo:
    return TxnInfo(
        xid=txn.xid,
        first_lsn=txn.first_lsn,
        final_lsn=txn.final_lsn,
        end_lsn=txn.end_lsn,
        commit_time=txn.commit_time,
        origin=txn.origin,
        gid=txn.gid,
    )


_OPS = {
    ChangeKind.INSERT: ChangeOp.INSERT,
    ChangeKind.SPEC_INSERT: ChangeOp.INSERT,  # the buffer hands one on only once confirmed
    ChangeKind.UPDATE: ChangeOp.UPDATE,
    ChangeKind.DELETE: ChangeOp.DELETE,
}


_UPDATE = ChangeKind.UPDATE
_INSERT = ChangeKind.INSERT

PROGRESS_EVERY = 1024
# Inserts with TOAST chunks wait in PluginSink._toasted until this many, or this many
# bytes of chunks, are held (or anything else reaches the sink), then go to the plugin
# as one list: its `changes` encodes them at once (connectors.avro.native_rows).
TOASTED_MAX = 256
TOASTED_BYTES = 4 * 1024 * 1024


class PluginSink:
    """The reorder buffer's ReplaySink: decodes rows, then calls the plugin wrapper."""

    def __init__(self, plugin: PluginWrapper, rows: RowResolver) -> None:
        self.plugin = plugin
        self.rows = rows
        self.can_stream = plugin.can_stream
        self.decode_at_prepare = plugin.two_phase
        self.emitted_txns = 0
        self.emitted_changes = 0
        self._info: TxnInfo | None = None  # the last txn_info() built (see _txn_info)
        # Called every PROGRESS_EVERY replayed changes, so a long replay can keep its
        # WAL source alive (OutputPluginUpdateProgress's job in PostgreSQL).
        self.progress: Callable[[], None] | None = None
        self._until_progress = PROGRESS_EVERY
        # toast.unchanged = fill: the changes that may hold TOAST pointers wait here
        # (and every change after them, so the order holds) for one batched fill; they
        # are handed on before any other callback of the transaction and at
        # `fill.batch_changes` (service.output.toastfill).
        self.fill: ToastFill | None = None
        self._pending: list[ReplayChange] = []
        # Inserts whose TOAST chunks the replay held for them (out-of-line values), for
        # a plugin with a `changes` callback: handed on together (`_flush_toasted`)
        # before anything after them reaches the plugin.
        self._batch_toasted = plugin.has_changes
        self._toasted: list[ReplayChange] = []
        self._toasted_bytes = 0

    def _txn_info(self, txn: ReorderBufferTXN) -> TxnInfo:
        """txn_info(txn), reused while the transaction's public fields are unchanged: a
        transaction's changes are replayed one after another (a TxnInfo is a value)."""
        info = self._info
        if (
            info is not None
            and info.xid == txn.xid
            and info.first_lsn == txn.first_lsn
            and info.final_lsn == txn.final_lsn
            and info.end_lsn == txn.end_lsn
            and info.commit_time == txn.commit_time
            and info.origin == txn.origin
            and info.gid == txn.gid
        ):
            return info
        info = self._info = txn_info(txn)
        return info

    # --- conversions --------------------------------------------------------------

    def _row_change(self, txn: ReorderBufferTXN, rc: ReplayChange) -> RowChange | None:
        return self._row_of(txn, rc.event, rc.toast)

    def _row_of(
        self, txn: ReorderBufferTXN, change: object, toast: Mapping[int, bytes]
    ) -> RowChange | None:
        if not isinstance(change, HeapChange):
            raise DecodeError(
                f"{type(change).__name__} where a heap change was expected",
                lsn=getattr(change, "lsn", None),
                xid=txn.xid,
            )
        rows = self.rows
        top = txn.top.xid
        relation = rows.relation(change, top)
        if relation is None:
            return None
        op = _OPS.get(change.kind)
        if op is None:
            raise DecodeError(
                f"change kind {change.kind.name} reached replay", lsn=change.lsn, xid=change.xid
            )
        new = rows.row(relation, change, True, toast, top) if change.new_tuple else None
        old = rows.row(relation, change, False, toast, top) if change.old_tuple else None
        if op is not ChangeOp.DELETE and new is None:
            raise SchemaMismatchError(
                f"{op.value} without a new tuple",
                lsn=change.lsn,
                relation=f"{relation.schema}.{relation.name}",
            )
        return RowChange(op, change.lsn, relation, new, old, change.old_is_key)

    def _truncate(self, txn: ReorderBufferTXN, rc: ReplayChange) -> TruncateChange | None:
        ev = rc.event
        assert isinstance(ev, TruncateEvent)
        rels = self.rows.relations_by_oid(ev.relids, ev.lsn, txn.top.xid)
        if not rels:
            return None
        return TruncateChange(ev.lsn, rels, ev.cascade, ev.restart_seqs)

    @staticmethod
    def _message(rc: ReplayChange) -> Message:
        ev = rc.event
        assert isinstance(ev, MessageEvent)
        return Message(ev.lsn, ev.transactional, ev.prefix, ev.payload, ev.end_lsn)

    # --- ReplaySink -----------------------------------------------------------------

    def begin(self, txn: ReorderBufferTXN) -> None:
        self.plugin.call("begin", txn.first_lsn, txn.xid, self._txn_info(txn))

    def change(self, txn: ReorderBufferTXN, change: ReplayChange) -> None:
        fill = self.fill
        if fill is not None and (self._pending or fill.candidate(change.event)):
            self._pending.append(change)
            if len(self._pending) >= fill.batch_changes:
                self._flush(txn)
            return
        self._hand_on(txn, change)

    def _hand_on(self, txn: ReorderBufferTXN, change: ReplayChange) -> None:
        """`change` (its TOAST mapping final) to the plugin: an insert with TOAST chunks
        joins `_toasted`, anything else goes after the inserts waiting there."""
        toast, event = change.toast, change.event
        if toast and self._batch_toasted and type(event) is HeapChange and event.kind is _INSERT:
            self._toasted.append(change)
            self._toasted_bytes += sum(map(len, toast.values()))
            if len(self._toasted) >= TOASTED_MAX or self._toasted_bytes >= TOASTED_BYTES:
                self._flush_toasted(txn)
            return
        if self._toasted:
            self._flush_toasted(txn)
        self._change(txn, change)

    def _flush_toasted(self, txn: ReorderBufferTXN) -> None:
        """Hand on the waiting inserts with their TOAST chunks as one `changes` call."""
        batch = self._toasted
        if not batch:
            return
        self._toasted = []
        self._toasted_bytes = 0
        self._progressed(len(batch))
        rows: list[RowChange] = []
        for rc in batch:
            row = self._row_change(txn, rc)
            if row is not None:
                rows.append(row)
        self._emit(txn, rows)

    def _progressed(self, n: int) -> None:
        """Count `n` replayed changes; call `progress` every PROGRESS_EVERY (`_change`
        counts its one change inline: it runs once per row)."""
        self._until_progress -= n
        if self._until_progress <= 0:
            self._until_progress = PROGRESS_EVERY
            if self.progress is not None:
                self.progress()

    def _emit(self, txn: ReorderBufferTXN, rows: list[RowChange]) -> None:
        """`rows` to the plugin: one `changes` call when it has one, else `change` each."""
        if not rows:
            return
        self.emitted_changes += len(rows)
        info = self._txn_info(txn)
        plugin = self.plugin
        if plugin.has_changes:
            plugin.call("changes", rows[0].lsn, txn.xid, info, rows)
        else:
            for row in rows:
                plugin.call("change", row.lsn, txn.xid, info, row)

    def _flush(self, txn: ReorderBufferTXN) -> None:
        """Hand on the waiting changes: the inserts with TOAST chunks, then the fill's,
        each with its TOAST mapping filled."""
        self._flush_toasted(txn)
        pending = self._pending
        if not pending:
            return
        self._pending = []
        fill = self.fill
        assert fill is not None
        batch: list[tuple[HeapChange, Mapping[int, bytes]]] = []
        for rc in pending:
            if not isinstance(rc.event, HeapChange):  # `change` is only ever handed these
                raise DecodeError(
                    f"{type(rc.event).__name__} where a heap change was expected",
                    lsn=getattr(rc.event, "lsn", None),
                    xid=txn.xid,
                )
            batch.append((rc.event, rc.toast))
        toasts = fill.fill(self.rows, txn.top.xid, batch)
        for (event, _), toast in zip(batch, toasts, strict=True):
            self._hand_on(txn, ReplayChange(event, toast))
        self._flush_toasted(txn)

    def _change(self, txn: ReorderBufferTXN, change: ReplayChange) -> None:
        self._until_progress -= 1
        if not self._until_progress:
            self._until_progress = PROGRESS_EVERY
            if self.progress is not None:
                self.progress()
        row = self._row_change(txn, change)
        if row is not None:
            self.emitted_changes += 1
            self.plugin.call("change", row.lsn, txn.xid, self._txn_info(txn), row)

    def changes(self, txn: ReorderBufferTXN, changes: list[HeapChange] | InsertRows) -> None:
        """`change` for each of `changes` (no TOAST chunks held): one `changes` call of
        the plugin when it has one, else its `change` per row. A run of one table
        definition and op goes as the resolver's lazy run (`RowResolver.run`), so a
        plugin that reads its raw tuples builds no rows (of an InsertRows, not even
        its HeapChanges)."""
        if not changes:
            return
        fill = self.fill
        # An update run's new tuples may hold unchanged TOAST pointers, as any UPDATE's.
        if fill is not None and (type(changes) is not InsertRows or changes.kind is _UPDATE):
            candidate = fill.candidate
            if self._pending or any(candidate(c) for c in changes):
                for c in changes:  # one by one, through the fill's batches
                    self.change(txn, ReplayChange(c, EMPTY_TOAST))
                return
        self._flush(txn)
        self._progressed(len(changes))
        plugin = self.plugin
        if plugin.has_changes:
            top = txn.top.xid

            def make(c: HeapChange) -> RowChange | None:
                return self._row_of(txn, c, EMPTY_TOAST)

            if isinstance(changes, InsertRows):
                run = self.rows.run(changes, top, make)
                if run is not None:
                    self.emitted_changes += len(changes)
                    plugin.call("changes", changes.lsn, txn.xid, self._txn_info(txn), run)
                    return
            else:
                # A transaction's plain changes, cut where the table or op changes, in
                # one `changes` call; no row built for a plugin reading raw tuples.
                runs = self.rows.runs(changes, top, make)
                if runs is not None:
                    self.emitted_changes += len(changes)
                    plugin.call("changes", changes[0].lsn, txn.xid, self._txn_info(txn), runs)
                    return
        rows: list[RowChange] = []
        for change in changes:
            row = self._row_of(txn, change, EMPTY_TOAST)
            if row is not None:
                rows.append(row)
        self._emit(txn, rows)

    def truncate(self, txn: ReorderBufferTXN, change: ReplayChange) -> None:
        self._flush(txn)
        trunc = self._truncate(txn, change)
        if trunc is not None:
            self.plugin.call("truncate", trunc.lsn, txn.xid, txn_info(txn), trunc, optional=True)

    def message(self, txn: ReorderBufferTXN | None, change: ReplayChange) -> None:
        if txn is not None:
            self._flush(txn)
        msg = self._message(change)
        info = txn_info(txn) if txn is not None else None
        self.plugin.call("message", msg.lsn, txn.xid if txn else 0, info, msg, optional=True)

    def internal(self, txn: ReorderBufferTXN, change: ReplayChange) -> None:
        raise DecodeError(
            "no internal changes are queued by this driver",
            lsn=getattr(change.event, "lsn", None),
            xid=txn.xid,
        )

    def commit(self, txn: ReorderBufferTXN, commit_lsn: int) -> None:
        self._flush(txn)
        self.emitted_txns += 1
        self.plugin.call("commit", commit_lsn, txn.xid, self._txn_info(txn), commit_lsn)

    def stream_start(self, txn: ReorderBufferTXN, first_lsn: int) -> None:
        self.plugin.call("stream_start", first_lsn, txn.xid, txn_info(txn))

    def stream_change(self, txn: ReorderBufferTXN, change: ReplayChange) -> None:
        # No fill here: the worker's plugin (connectors.avro) does not stream, and
        # service.app.toast refuses a fill on a sink that does.
        row = self._row_change(txn, change)
        if row is not None:
            self.plugin.call("stream_change", row.lsn, txn.xid, self._txn_info(txn), row)

    def stream_truncate(self, txn: ReorderBufferTXN, change: ReplayChange) -> None:
        trunc = self._truncate(txn, change)
        if trunc is not None:
            self.plugin.call(
                "stream_truncate", trunc.lsn, txn.xid, txn_info(txn), trunc, optional=True
            )

    def stream_message(self, txn: ReorderBufferTXN, change: ReplayChange) -> None:
        msg = self._message(change)
        self.plugin.call("stream_message", msg.lsn, txn.xid, txn_info(txn), msg, optional=True)

    def stream_stop(self, txn: ReorderBufferTXN, last_lsn: int) -> None:
        self.plugin.call("stream_stop", last_lsn, txn.xid, txn_info(txn))

    def stream_abort(self, txn: ReorderBufferTXN, abort_lsn: int, subxid: int | None) -> None:
        self.plugin.call("stream_abort", abort_lsn, txn.xid, txn_info(txn), abort_lsn)

    def stream_commit(self, txn: ReorderBufferTXN, commit_lsn: int) -> None:
        self.emitted_txns += 1
        self.plugin.call("stream_commit", commit_lsn, txn.xid, txn_info(txn), commit_lsn)

    def stream_prepare(self, txn: ReorderBufferTXN, prepare_lsn: int) -> None:
        self.plugin.call("stream_prepare", prepare_lsn, txn.xid, txn_info(txn), prepare_lsn)

    def begin_prepare(self, txn: ReorderBufferTXN) -> None:
        self.plugin.call("begin_prepare", txn.first_lsn, txn.xid, txn_info(txn))

    def prepare(self, txn: ReorderBufferTXN, prepare_lsn: int) -> None:
        self._flush(txn)
        self.plugin.call("prepare", prepare_lsn, txn.xid, txn_info(txn), prepare_lsn)

    def commit_prepared(self, txn: ReorderBufferTXN, commit_lsn: int) -> None:
        self.emitted_txns += 1
        self.plugin.call("commit_prepared", commit_lsn, txn.xid, txn_info(txn), commit_lsn)

    def rollback_prepared(self, txn: ReorderBufferTXN, end_lsn: int, prepare_time: int) -> None:
        self.plugin.call(
            "rollback_prepared", end_lsn, txn.xid, txn_info(txn), end_lsn, prepare_time
        )


class Decoding:
    """LogicalDecodingProcessRecord: one record at a time into the pure pipeline.

    `db_oid` is the database whose changes are decoded (a logical slot's database).
    """

    def __init__(
        self,
        *,
        version: int,
        db_oid: int,
        reorder: ReorderBuffer,
        snap: SnapBuilder,
        rows: RowResolver,
        plugin: PluginWrapper,
        pgclass: HistoricClass | None = None,
    ) -> None:
        self.decoder = decoder_for(version)
        # The historic pg_class beside the decoder: it takes the records of pg_class's
        # pages and of the relation map, and hands the history the pg_class rows they
        # write (which relation each relfilenode is, read off the WAL).
        self.pgclass = pgclass
        self._without_decode = self.decoder.without_decode
        self._heap_base_ops = _HEAP_BASE_OPS_15 if version < 16 else _HEAP_BASE_OPS
        self.db_oid = db_oid
        self.rb = reorder
        self.snap = snap
        self.rows = rows
        self.plugin = plugin
        self.last_lsn = 0
        self.last_end_lsn = 0
        self.records = 0
        self.rb.consistent = snap.is_consistent
        # Called after a transaction was handed to the plugin and left the buffer.
        self.on_committed: Callable[[CommitEvent], None] | None = None
        # Called with every RUNNING_XACTS record decoded (the unchanged-TOAST fill's xmin
        # hold learns there which xids were running at which LSN).
        self.on_running_xacts: Callable[[RunningXactsEvent], None] | None = None
        # A first start's aligned snapshot (`skip_snapshot_changes`): the LSN (the
        # snapshot's) before which the changes of the transactions it holds lie.
        self._snapshot_until = 0
        self._in_snapshot_commits = 0  # commits skipped as the aligned snapshot's

    def skip_snapshot_changes(self, until_lsn: int) -> None:
        """Queue no change of a transaction the aligned snapshot holds (the snapshot
        builder's `in_aligned_snapshot`, installed by `skip_visible_in` before this; the
        snapshot taken at `until_lsn`): its commit is skipped
        (`SnapBuilder.xact_needs_skip`) and its rows are read with the snapshot, so
        queueing them only cost memory and spill. Such a transaction committed before
        `until_lsn`, so only changes logged before it are asked about. On a first
        start, the WAL between the consistent point and the snapshot can be a large
        backlog (all of it since the restart point's checkpoint: a bulk load before the
        first start, say), which PostgreSQL's logical slot, starting at the insert
        position, never reads."""
        self._snapshot_until = until_lsn

    def _held_by_snapshot(self, xid: int) -> bool:
        """Whether a change of `xid` logged before `_snapshot_until` (the callers' test,
        inlined: after it, every change is queued) is one `skip_snapshot_changes` leaves
        out. A subtransaction is judged by its top-level transaction (known by its first
        record, which names it from 14 on), as its commit is."""
        txn = self.rb.get_txn(xid)
        top = txn.toptxn if txn is not None else None
        return self.snap.in_aligned_snapshot(xid if top is None else top.xid)

    def process(self, record: XLogRecord | PredecodedRecord | InsertRun) -> None:
        """LogicalDecodingProcessRecord for one record. A PredecodedRecord (the native
        reader's, for a table-change heap record or a record of an rmgr without
        rm_decode) brings the events the decoder would give it; everything else about
        it is processed as its XLogRecord would be. An InsertRun is `process_run`'s."""
        if isinstance(record, InsertRun):
            self.process_run(record)
            return
        self.records += 1
        top = toplevel_assignment(record)
        if top is not None:
            self.rb.assign_child(top[0], top[1], record.lsn)
            self.rows.assign_child(top[0], top[1])
        xid = xid_to_process(record)
        if xid:
            self.rb.process_xid(xid, record.lsn)
            rmid = record.rmid
            if rmid in (rt.RM_HEAP_ID, rt.RM_HEAP2_ID):
                self._base_snapshot(record, rmid, xid)
        pgclass = self.pgclass
        if pgclass is not None and type(record) is XLogRecord and pgclass.wants(record):
            for row in pgclass.observe(record):
                self.rows.apply(row)
        if record.rmid in self._without_decode:  # no rm_decode: the xid was all
            self.last_lsn = record.lsn
            self.last_end_lsn = record.end_lsn
            return
        events = (
            record.events if isinstance(record, PredecodedRecord) else self.decoder.decode(record)
        )
        for event in events:
            # The history sees every event in WAL order, and a commit before the reorder
            # buffer replays it (its lookups at replay need the commit's resolution).
            self.rows.apply(event)
            self._route(event)
        self.last_lsn = record.lsn
        self.last_end_lsn = record.end_lsn

    def process_run(self, run: InsertRun) -> None:
        """`process` of each of `run`'s records in turn, taken as one: every gate answers
        the same for each of them (see InsertRun), so the xid is registered
        (ReorderBufferProcessXid) and SnapBuildProcessChange asked once, at the first
        record, and the changes are queued together (`ReorderBuffer.queue_run`). The
        history is not told: a heap change has no schema effect."""
        self.records += run.records
        xid, lsn, changes = run.xid, run.first_lsn, run.changes
        self.rb.process_xid(xid, lsn)
        # heap_decode / heap2_decode's SnapBuildProcessChange (INSERT, MULTI_INSERT,
        # UPDATE, HOT_UPDATE and DELETE are base-snapshot ops in every version), then
        # _route's gates: True implies FULL_SNAPSHOT or later (decodes_changes); a run
        # has no origin.
        if self.snap.process_change(xid, lsn):
            self.rb.set_base_snapshot(xid, lsn, BASE_SNAPSHOT)
            if self._wanted_db(changes.locator.db_oid) and not (
                lsn < self._snapshot_until and self._held_by_snapshot(xid)
            ):
                self.rb.queue_run(xid, lsn, changes)
        self.last_lsn = run.lsn
        self.last_end_lsn = run.end_lsn

    def _base_snapshot(self, record: XLogRecord | PredecodedRecord, rmid: int, xid: int) -> None:
        """heap_decode / heap2_decode: SnapBuildProcessChange before any Decode* routine,
        whatever the database and whether or not the record carries a tuple."""
        op = record.info & rt.XLOG_HEAP_OPMASK
        if rmid == rt.RM_HEAP_ID:
            if op not in self._heap_base_ops:
                return
        elif op != rt.XLOG_HEAP2_MULTI_INSERT:
            return
        # process_change is False before FULL_SNAPSHOT (snap.decodes_changes)
        if self.snap.process_change(xid, record.lsn):
            self.rb.set_base_snapshot(xid, record.lsn, BASE_SNAPSHOT)

    def _wanted_db(self, db_oid: int) -> bool:
        return db_oid == self.db_oid

    def _route(self, ev: object) -> None:
        rb, snap = self.rb, self.snap
        match ev:
            case HeapChange():
                if not snap.decodes_changes or not self._wanted_db(ev.locator.db_oid):
                    return
                if ev.origin is not None and self.plugin.filter_by_origin(ev.origin):
                    return
                if snap.process_change(ev.xid, ev.lsn) and not (
                    ev.lsn < self._snapshot_until and self._held_by_snapshot(ev.xid)
                ):
                    rb.queue_change(ev.xid, ev.lsn, ev)
            case TruncateEvent():
                if not snap.decodes_changes or not self._wanted_db(ev.db_oid):
                    return
                if snap.process_change(ev.xid, ev.lsn):
                    rb.queue_change(ev.xid, ev.lsn, ev)
            case MessageEvent():
                if not snap.decodes_changes or not self._wanted_db(ev.db_oid):
                    return
                if ev.transactional:
                    if snap.process_change(ev.xid, ev.lsn):
                        rb.queue_change(ev.xid, ev.lsn, ev)
                elif snap.message_allowed(ev.lsn):
                    rb.queue_message_nontransactional(ev.xid, ev.lsn, ev)
            case RunningXactsEvent():
                snap.process_running_xacts(ev)
                rb.consistent = snap.is_consistent
                rb.abort_old(ev.oldest_running_xid)
                if self.on_running_xacts is not None:
                    self.on_running_xacts(ev)
            case CommitEvent():
                self._commit(ev)
            case AbortEvent():
                self._abort(ev)
            case PrepareEvent():
                self._prepare(ev)
            case AssignmentEvent():
                for sub in ev.subxids:
                    rb.assign_child(ev.xid, sub, ev.lsn)
            case InvalidationsEvent():
                # xid-less invalidations (VACUUM, ANALYZE...) apply at once in PostgreSQL
                # (ReorderBufferImmediateInvalidation); there is no transaction to mark.
                if snap.decodes_changes and ev.xid:
                    rb.add_invalidations(ev.xid, ev.lsn, ev.invalidations)
                    rb.set_has_catalog_changes(ev.xid, ev.lsn)
            case NewCidEvent():
                if snap.decodes_changes:
                    rb.set_has_catalog_changes(ev.xid, ev.lsn)
            case InplaceEvent():
                if snap.decodes_changes and ev.xid:
                    rb.set_has_catalog_changes(ev.xid, ev.lsn)
            case CheckpointEvent():
                if self.pgclass is not None:
                    self.pgclass.note_checkpoint(ev.redo)
            case SmgrCreateEvent() | SwitchEvent() | ParameterChangeEvent() | SmgrTruncateEvent():
                return  # the schema history has seen them; nothing to queue
            case _:
                raise DecodeError(
                    f"the driver cannot route {type(ev).__name__}", lsn=getattr(ev, "lsn", None)
                )

    def _skip_commit(self, ev: CommitEvent | AbortEvent) -> bool:
        """DecodeTXNNeedSkip: before the start point, another database, or an origin."""
        return (
            self.snap.xact_needs_skip(ev.lsn, ev.xid)
            or of_another_database(ev, self.db_oid)
            or self.plugin.filter_by_origin(ev.origin)
        )

    def _in_aligned_snapshot(self, ev: CommitEvent) -> bool:
        """Whether a skipped commit was skipped as the aligned snapshot's: this
        database's, after the start point, visible in the snapshot (not another
        database's, which every commit there is)."""
        snap = self.snap
        return (
            not of_another_database(ev, self.db_oid)
            and not snap.xact_needs_skip(ev.lsn)
            and snap.xact_needs_skip(ev.lsn, ev.xid)
        )

    def _commit(self, ev: CommitEvent) -> None:
        rb = self.rb
        self.snap.commit(ev.xid, ev.lsn)
        if not self.snap.decodes_changes:
            return
        if ev.invalidations:
            rb.add_invalidations(ev.xid, ev.lsn, ev.invalidations)
        commit_time = ev.origin_time if ev.origin_time is not None else ev.commit_time
        if self._skip_commit(ev):
            if self._in_aligned_snapshot(ev):
                # after the start point, yet skipped: its effects are in the aligned
                # snapshot (at start-up only; logged so a run can tell it apart). A
                # backlog can hold many: past the first IN_SNAPSHOT_LOGGED, at debug.
                self._in_snapshot_commits += 1
                n = self._in_snapshot_commits
                (log.info if n <= IN_SNAPSHOT_LOGGED else log.debug)(
                    "commit_in_snapshot",
                    xid=ev.xid,
                    commit_lsn=format_lsn(ev.lsn),
                    queued=rb.get_txn(ev.xid) is not None,
                )
                if n == IN_SNAPSHOT_LOGGED:
                    log.info("commit_in_snapshot_more_at_debug", after=n)
            for sub in ev.subxids:
                rb.forget(sub, ev.lsn)
            rb.forget(ev.xid, ev.lsn)
            return
        txn = rb.get_txn(ev.xid)
        if ev.prepared and txn is not None and txn.prepared:
            rb.finish_prepared(
                ev.xid,
                ev.lsn,
                ev.end_lsn,
                commit_time,
                is_commit=True,
                origin=ev.origin,
                subxids=ev.subxids,
            )
        else:
            rb.commit(ev.xid, ev.lsn, ev.end_lsn, commit_time, origin=ev.origin, subxids=ev.subxids)
        if self.on_committed is not None:
            self.on_committed(ev)

    def _abort(self, ev: AbortEvent) -> None:
        rb = self.rb
        txn = rb.get_txn(ev.xid)
        if ev.prepared and txn is not None and txn.prepared and self.snap.decodes_changes:
            rb.finish_prepared(
                ev.xid, ev.lsn, ev.end_lsn, ev.abort_time, is_commit=False, subxids=ev.subxids
            )
        else:
            for sub in ev.subxids:
                rb.abort(sub, ev.lsn)
            rb.abort(ev.xid, ev.lsn)

    def _prepare(self, ev: PrepareEvent) -> None:
        if not self.snap.decodes_changes:
            return
        if self.snap.xact_needs_skip(ev.lsn, ev.xid) or ev.db_oid != self.db_oid:
            self.rb.skip_prepared(ev.xid)
            return
        if self.plugin.two_phase and self.plugin.filter_prepare(ev.xid, ev.gid):
            # DecodeXactOp, XLOG_XACT_PREPARE: a filtered prepare is left to COMMIT
            # PREPARED, which then decodes it as a plain commit (txn.prepared stays unset)
            return
        self.rb.prepare(
            ev.xid,
            ev.lsn,
            ev.end_lsn,
            ev.prepared_at,
            gid=ev.gid,
            origin=ev.origin,
            subxids=ev.subxids,
        )
