"""The avro plugin's native fast path: WAL rows straight from the heap tuple to the
Envelope's wire-format bytes, through the Rust row encoder (service._native.RowPlan).

Receives: from `AvroPlugin.change` (when `service.impl.native_rows()` selected the
native core at startup), each row change with its registered `_Table`; from
`AvroPlugin.changes`, a run of a transaction's row changes: a list, a `RowRun` (one
table definition and op, its raw tuples read as they are), or a `RunList` (a
transaction's RowRuns of several tables, taken one by one). The rows come
from the WAL row decoder as `service.types.rowdecode.DecodedRow`s, which keep the
logged `RawTuple` and the `TableDef` they were decoded against.
Hands on: through `ctx.write`, exactly the `OutputRecord`s the Python path
(`AvroPlugin._event`, fastavro) writes for that change, byte for byte: key, value,
headers, and the DELETE's tombstone. `change` returns False, having done nothing, for
every change it leaves to the Python path. `changes` writes the same records, in the
same order, the events of consecutive changes of one table definition and op as one
`RecordRun` of ready bytes (`ctx.write_run`, one Rust call per run:
`RowPlan.encode_events`), a DELETE's event followed by its tombstone when
`kafka.tombstones_on_delete`; the events of one run share one clock reading. A
RunList's RecordRuns go on together (`ctx.write_runs`), those before a row of the
Python path's written before it.

How:
- A plan (`RowPlan`) is compiled once per table definition (per `_Table`, i.e. per
  relation oid and `defined_at`) by `connectors.avro.native_plan.compile_plan`, which
  also says which columns and types are native.
- Per row, Rust deforms the tuple (heap_deform_tuple) and writes the Value and Key
  records, or says why the row is Python's (a typed fallback: a `str` reason, counted in
  `fallbacks`): an external TOAST pointer whose chunks the change lacks (an unchanged
  value) in a key column or in one whose type has no placeholder (a string, bytes or
  string-array field is written with Debezium's `__debezium_unavailable_value`, as
  `schema.column_datum` writes it: `native_plan.placeholder_field`), a missing attribute whose
  default the row decoder does not read as a stored datum (`RelationInfo.missing_datums`:
  attmissingval of a jsonb or text-valued type; the stored ones are deformed in Rust, as
  getmissingattr), NaN/±Infinity numerics in `precise` mode in a NOT NULL column (where
  Python raises naming it; in a nullable column Rust writes null as Python does, and
  `_warn_dropped` gives Python's `numeric_special_value_dropped` warning; the string and
  double modes write them natively), text that is not UTF-8, a value outside its Avro
  type, an xml value with an XML declaration, a stored form the Python reference
  rejects (a damaged jsonb, inet or bit string, an enum OID without a label: Python
  raises its typed error), a reg* or aclitem value naming an OID whose name is not in the
  name cache yet (the Python path resolves it, which puts it there: the next row with
  that OID is native). A fallback row is encoded entirely by the Python path, never
  mixed.
- An UPDATE carrying an old tuple (REPLICA IDENTITY FULL, or a key logged with an
  external value) is native when both tuples encode and the key did not change: the old
  tuple's Key record is byte-equal to the new one's (`_encode_update`). Byte equality is
  the Python path's value comparison (`schema.key_values`) only for key columns whose
  values compare by their bytes (`EXACT_KEY_TYPES`: no floats, where NaN differs from
  itself, and no numeric, where 1.0 equals 1.00); a table with another key type leaves
  such updates to Python. A key change goes to Python as a whole (a DELETE, its
  tombstone and a CREATE, with the `__debezium.newkey`/`oldkey` headers).
- Changes the Python path decides as a whole stay there: a key change, a DELETE
  without an old tuple, snapshot reads handed over as changes, rows not decoded from
  WAL, transactions without a commit time.
- Snapshot reads of a chunk the native core split (`snapshot_rows`, called by
  connectors.tablesnap.snapshotter with the chunk's `CopyChunk`): the same plan, its
  columns read from the COPY rows' send format (`RowPlan.encode_copy`, tablesnap::copy),
  events as `change_python` writes a read (op "r", no transaction block, the snapshot
  marker in `source`); a table with a column the COPY rewrite does not cover is the
  Python path's (`avro_native_snapshot_off`, counted in `fallbacks`). A snapshot
  reader's thread may encode a chunk's records ahead (`snapshot_prepare`, the GIL
  released), once a chunk of the same table definition was published: publication then
  only writes each row's Envelope around its record (`snapshot_rows(prepared=...)`).
- The Envelope is concatenated (an Avro record is its fields in order): the
  before/after unions and records, the `source` record from parts built once per
  transaction and table (`_source_parts`: everything but `sequence` and `lsn`), the
  transaction block, op and the ts fields, behind the Confluent header of the
  registered schema id (`service._native.envelope`).

The transaction bookkeeping (BEGIN, event counts, the source cache) is the plugin's
own (`_begin_once`, `_count`, `_row_source`), called in the order `_event` calls it, so
native and Python events interleave within one transaction.
"""

from __future__ import annotations

from bisect import bisect_left
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

import structlog

from connectors.avro.codec import AvroEncoder, wire_header
from connectors.avro.native_plan import EXACT_KEY_TYPES, compile_plan
from connectors.avro.table import Table as _Table
from service.output.api import (
    ChangeOp,
    ColumnValue,
    OutputRecord,
    PluginContext,
    RecordRun,
    RelationInfo,
    RowChange,
    TxnInfo,
)
from service.pgconst import UNIX_EPOCH_USECS
from service.schema.tabledef import TableDef
from service.tablesnap.markers import is_initial
from service.types.rowdecode import DecodedRow, RowRun, RunList

if TYPE_CHECKING:
    from service._native import HeapRows  # an InsertRows' rows in the native core

log = structlog.get_logger(__name__)


def _header(serialize: Callable[[Any], bytes] | None) -> bytes | None:
    """The wire header of a registered serializer (an AvroEncoder's bound encode)."""
    owner = getattr(serialize, "__self__", None)
    if isinstance(owner, AvroEncoder):
        return wire_header(owner.schema_id)
    return None


def _with_tombstones(
    keys: list[bytes | None], values: list[bytes | None], lsns: list[int]
) -> tuple[list[bytes | None], list[bytes | None], list[int]]:
    """The DELETE events `keys`/`values`, each followed by its tombstone (same key, null
    value), as `AvroPlugin._tombstone` writes one after each DELETE when
    `kafka.tombstones_on_delete`."""
    n = len(values)
    both_keys: list[bytes | None] = [None] * (2 * n)
    both_keys[0::2] = keys
    both_keys[1::2] = keys
    both_values: list[bytes | None] = [None] * (2 * n)
    both_values[0::2] = values
    both_lsns = [0] * (2 * n)
    both_lsns[0::2] = lsns
    both_lsns[1::2] = lsns
    return both_keys, both_values, both_lsns


def _encoded_row(change: RowChange) -> Sequence[ColumnValue] | None:
    """The row whose record an event of `change` carries natively: the old row of a
    DELETE, the new one of an INSERT or UPDATE, None for an UPDATE with its old tuple
    (a key change or REPLICA IDENTITY FULL: the Python path's key comparison)."""
    if change.op is ChangeOp.DELETE:
        return change.old
    return change.new if change.old is None else None


def _op_code(op: ChangeOp) -> str:
    """The Envelope's op of a change: compared, not looked up (an Enum hashes in Python)."""
    return "d" if op is ChangeOp.DELETE else "c" if op is ChangeOp.INSERT else "u"


class _Entry:
    """A `_Table`'s compiled native plan (or why it has none) and its headers."""

    __slots__ = (
        "drops",
        "key_exact",
        "key_header",
        "plan",
        "reason",
        "table",
        "value_header",
        "want_key",
    )

    def __init__(self, table: TableDef, plan: Any | None, reason: str, t: _Table) -> None:
        self.table = table
        self.plan = plan
        self.reason = reason
        self.value_header = _header(t.value)
        self.key_header = _header(t.key) if t.key is not None else None
        self.want_key = t.key is not None and t.key_of is not None
        types = {c.name: c.type_oid for c in table.columns if not c.dropped}
        # An UPDATE's old and new Key records compare by their bytes (`_encode_update`).
        self.key_exact = all(types.get(p.column) in EXACT_KEY_TYPES for p in t.plan.key_fields)
        # A nullable field that may be a decimal (bytes: Decimal, record:
        # VariableScaleDecimal; a superset): the encoder may drop a NaN there
        # (`NativeRows._warn_dropped`).
        self.drops = any(
            f.optional and f.mapping.kind in ("bytes", "record") for f in t.plan.fields
        )


# snapshot_rows' compiled table: the _Table, the TableDef, the entry, each column's COPY
# field, and why the table is not native ("" when it is)
_CopyEntry = tuple[_Table, TableDef, "_Entry", list[int], str]


class CopyPrepared(NamedTuple):
    """A chunk's records encoded ahead of publication (`NativeRows.snapshot_prepare`):
    by `plan` (the entry's RowPlan), with the columns at `spec` and a Key record when
    `want_key`; `records` is the `CopyRecords`. Publication uses it only when its own
    plan, spec and key choice are these."""

    plan: Any
    spec: list[int]
    want_key: bool
    records: Any


class _Hot:
    """What the changes of one table definition in one transaction share (`_hot_of`):
    checked by identity per change, rebuilt when the transaction, the `_Table` or the
    definition differs from the last change's."""

    __slots__ = ("entry", "parts", "st", "t", "table")

    def __init__(
        self,
        st: Any,
        t: _Table,
        table: TableDef,
        entry: _Entry,
        parts: tuple[bytes, bytes, bytes, bytes, bytes] | None,
    ) -> None:
        self.st = st
        self.t = t
        self.table = table
        self.entry = entry
        self.parts = parts


class NativeRows:
    """The native fast path of one AvroPlugin (see the module docstring)."""

    def __init__(self, plugin: Any, native: Any, clock: Callable[[], int]) -> None:
        """`native`: the extension module; `clock`: the wall clock in ns (the plugin's)."""
        self.plugin = plugin
        self._clock = clock
        self._native = native
        self._envelope = native.envelope
        self._transaction_value = native.transaction_value
        self._entries: dict[int, tuple[_Table, _Entry]] = {}
        self._parts_for: object = None  # the _TxnState the parts below belong to
        self._parts: dict[str, tuple[bytes, bytes, bytes, bytes, bytes]] = {}
        self._txn_parts: tuple[bytes, bytes, bytes, bytes, bytes] = (b"",) * 5
        self._by_table: dict[str, tuple[bytes, bytes, bytes]] = {}  # _table_parts
        # transaction_record's last serializers, with their wire headers
        self._tx_headers: tuple[object, bytes | None, bytes | None] | None = None
        # snapshot_rows' plans by (id(_Table), id(TableDef)): the _Table, the TableDef,
        # the entry, each column's COPY field, and why the table is not native ("" when
        # it is)
        self._copy_entries: dict[tuple[int, int], _CopyEntry] = {}
        # the last native plan published per TableDef (by id, the TableDef kept to check
        # it), with its spec and key choice: what `snapshot_prepare` encodes ahead with
        self._copy_ahead: dict[int, tuple[TableDef, Any, list[int], bool]] = {}
        self._hot: _Hot | None = None  # what the last change's transaction and table share
        self.native = 0  # rows written natively
        self.ahead = 0  # of those, snapshot rows whose record `snapshot_prepare` made
        # of those, rows with TOAST chunks encoded in groups (PluginSink._flush_toasted)
        self.toasted = 0
        self.fallbacks: Counter[str] = Counter()  # rows left to Python, by reason

    def _entry(self, t: _Table, rel: RelationInfo, table: TableDef) -> _Entry:
        found = self._entries.get(id(t))
        if found is not None and found[0] is t and found[1].table is table:
            return found[1]
        entry = self._compile(t, rel, table)
        if entry.plan is None:
            log.info("avro_native_rows_off", topic=t.plan.topic, reason=entry.reason)
        self._entries[id(t)] = (t, entry)
        return entry

    def _compile(self, t: _Table, rel: RelationInfo, table: TableDef) -> _Entry:
        """The `_Entry` of `t` as `table` defines it (its plan, or why it has none)."""
        plan, reason = compile_plan(table, rel, t, self.plugin.decimal_mode, self._native)
        entry = _Entry(table, plan, reason, t)
        if plan is not None and (
            entry.value_header is None or (t.key is not None and entry.key_header is None)
        ):
            entry.plan, entry.reason = None, "serializer is not an AvroEncoder"
        return entry

    def _source_parts(
        self, st: Any, txn: TxnInfo, t: _Table
    ) -> tuple[bytes, bytes, bytes, bytes, bytes]:
        """The `source` record of this transaction and table around its two changing
        fields: (fields before `sequence`, the sequence text before this LSN, fields
        between `sequence` and `lsn`, fields after `lsn`), and the transaction block's
        id before its LSN ("<xid>:"). Joined from a part per table (`_table_parts`) and
        one per transaction (`_transaction_parts`, which also reads the sequence's last
        commit, as `_row_source` takes it: fixed while the transaction is replayed)."""
        if self._parts_for is not st:
            self._parts_for, self._parts = st, {}
            self._txn_parts = self._transaction_parts(st, txn)
        found = self._parts.get(t.collection)
        if found is None:
            ts_ms, ts_mid, xid, block_head, prefix = self._txn_parts
            ident, db, names = self._table_parts(t)
            found = (ident + ts_ms + db, prefix, ts_mid + names + xid, b"\x00\x00\x00", block_head)
            self._parts[t.collection] = found
        return found

    def _table_parts(self, t: _Table) -> tuple[bytes, bytes, bytes]:
        """What `AvroPlugin._source` gives every streamed event of table `t`, encoded:
        (version, connector, name), (snapshot "false", db), (schema, table). The source's
        xmin, origin and origin_lsn are always null in pgcdc: the parts' tail."""
        found = self._by_table.get(t.collection)
        if found is not None:
            return found
        const = self.plugin._source(None, t.schema, t.table, 0)
        if any(const[k] is not None for k in ("xmin", "origin", "origin_lsn")):
            raise AssertionError("source xmin/origin are always null in pgcdc")
        _string = self._native.avro_string
        found = (
            b"".join(_string(const[k]) for k in ("version", "connector", "name")),
            b"\x00" + _string("false") + _string(const["db"]),  # ["string", "null"]: branch 0
            _string(const["schema"]) + _string(const["table"]),
        )
        self._by_table[t.collection] = found
        return found

    def _transaction_parts(self, st: Any, txn: TxnInfo) -> tuple[bytes, bytes, bytes, bytes, bytes]:
        """What `AvroPlugin._source` gives every event of this committed transaction,
        encoded: ts_ms, (ts_us, ts_ns), txId, the transaction block's id before its
        LSN, and the sequence text before the LSN (the last commit's LSN, or null)."""
        _long = self._native.avro_long
        commit_us = txn.commit_time + UNIX_EPOCH_USECS
        last = self.plugin._last_commit_lsn
        return (
            _long(commit_us // 1000),
            b"\x02" + _long(commit_us) + b"\x02" + _long(commit_us * 1000),
            b"\x02" + _long(txn.xid),
            f"{st.xid}:".encode(),
            b'[null,"' if last is None else f'["{last}","'.encode(),
        )

    def _hot_of(
        self, txn: TxnInfo, t: _Table, rel: RelationInfo, table: TableDef, lsn: int
    ) -> _Hot:
        """What every change of `t` (as defined by `table`) in the current transaction
        shares (`_Hot`): its plan and headers, and the `source` parts; the last
        change's when it is the same, else built here (the per-transaction work, done
        at the table's first change in the transaction)."""
        p = self.plugin
        st = p._txn
        if st is None:
            st = p._txn_state(lsn)  # raises: a change outside a transaction
        hot = self._hot
        if hot is not None and hot.st is st and hot.t is t and hot.table is table:
            return hot
        entry = self._entry(t, rel, table)
        parts = None if entry.plan is None else self._source_parts(st, txn, t)
        hot = self._hot = _Hot(st, t, table, entry, parts)
        return hot

    def change(self, ctx: PluginContext, txn: TxnInfo, t: _Table, change: RowChange) -> bool:
        """Write `change` natively; False (nothing written) leaves it to Python."""
        out = self._encode(ctx, txn, t, change)
        if out is None:
            return False
        code, key, value = out
        p = self.plugin
        ctx.write(OutputRecord(t.plan.topic, key, value, p.context_headers, code))
        if code == "d" and p._tombstones():
            p._tombstone(ctx, t, key)
        return True

    def changes(self, ctx: PluginContext, txn: TxnInfo, changes: Sequence[RowChange]) -> None:
        """`AvroPlugin.change` for each of a run of changes, in order. Consecutive
        changes of one table definition and op go to the Rust encoder at once
        (`_group`: `RowPlan.encode_events`), their events out as one `RecordRun`
        (`ctx.write_run`); a change it cannot take goes the single way
        (`AvroPlugin.change`: a DELETE with its tombstone, an UPDATE with an old tuple,
        a snapshot read, a table without a plan) or is the Python path's (a fallback).
        A `RowRun` is one such group already: its raw tuples go to Rust as they are,
        and a row of it is built only for the Python path."""
        plain = bool(txn.commit_time) and not isinstance(ctx.state.get("snapshot"), str)
        if plain and isinstance(changes, RowRun):
            self._run(ctx, txn, changes)
        elif plain and isinstance(changes, RunList):
            # The runs' records go on together (`ctx.write_runs`), in order.
            out: list[RecordRun] = []
            for run in changes.runs:
                self._run(ctx, txn, run, out)
            if out:
                ctx.write_runs(out)
        else:
            self._rows(ctx, txn, changes, plain)

    def _run(
        self,
        ctx: PluginContext,
        txn: TxnInfo,
        changes: RowRun,
        out: list[RecordRun] | None = None,
    ) -> None:
        """A RowRun of a plain transaction: its raw tuples to `_group` at once. With
        `out`, its RecordRun is added there for the caller to write, after those before
        it (which are written first when a row of it is the Python path's)."""
        p = self.plugin
        op, rel = changes.op, changes.relation
        t = p._table(rel)  # once per run
        if t is None:
            return  # not published
        ctx.write_lsn = changes.lsns[0]
        done = self._group(ctx, txn, t, rel, changes.table, op, changes.raws, changes.lsns, out=out)
        if out and done < len(changes):
            ctx.write_runs(out)  # before the Python path writes anything
            out.clear()
        if done < 0:  # no plan: every row is the Python path's
            self._python(ctx, txn, t, changes, 0, len(changes))
        elif done < len(changes):  # row `done` fell back; the rest go on as a list
            self._python(ctx, txn, t, changes, done, done + 1)
            self._rows(ctx, txn, changes[done + 1 :], True)

    def _python(
        self,
        ctx: PluginContext,
        txn: TxnInfo,
        t: _Table,
        changes: Sequence[RowChange],
        i: int,
        j: int,
    ) -> None:
        """changes[i:j] (of table `t`) through the Python path."""
        p = self.plugin
        for k in range(i, j):
            change = changes[k]
            ctx.write_lsn = change.lsn
            p.change_python(ctx, txn, t, change)

    def _rows(
        self, ctx: PluginContext, txn: TxnInfo, changes: Sequence[RowChange], plain: bool
    ) -> None:
        """`changes`, grouped here: consecutive rows of one table definition and op to
        `_group`, any other one the single way."""
        p = self.plugin
        tables, table_of = p._tables, p._table
        n, i = len(changes), 0
        while i < n:
            change = changes[i]
            ctx.write_lsn = change.lsn
            op = change.op
            row = _encoded_row(change)
            if not plain or type(row) is not DecodedRow:
                p.change(ctx, txn, change)
                i += 1
                continue
            rel = change.relation
            cached = (rel.oid, rel.defined_at)
            t = tables[cached] if cached in tables else table_of(rel)
            if t is None:
                i += 1
                continue
            table = row.table
            tuples, lsns = [row.raw], [change.lsn]
            # each row's TOAST chunks, for a group that starts with a row holding some
            # (PluginSink hands on inserts with theirs in a list); a row with chunks
            # after one without starts a group of its own
            toasts: list[Mapping[int, bytes] | None] | None = [row.toast] if row.toast else None
            j = i + 1
            while j < n:
                c = changes[j]
                if c.relation is not rel or c.op is not op:
                    break
                r = _encoded_row(c)
                if type(r) is not DecodedRow or r.table is not table:
                    break
                if toasts is not None:
                    toasts.append(r.toast or None)
                elif r.toast:
                    break
                tuples.append(r.raw)
                lsns.append(c.lsn)
                j += 1
            done = self._group(ctx, txn, t, rel, table, op, tuples, lsns, toasts)
            if done < 0:  # no plan: the whole group is the Python path's
                self._python(ctx, txn, t, changes, i, j)
                i = j
            elif done < j - i:  # change i + done is the Python path's
                i += done
                self._python(ctx, txn, t, changes, i, i + 1)
                i += 1
            else:
                i = j

    def _group(
        self,
        ctx: PluginContext,
        txn: TxnInfo,
        t: _Table,
        rel: RelationInfo,
        table: TableDef,
        op: ChangeOp,
        tuples: list[Any] | HeapRows,
        lsns: list[int],
        toasts: list[Mapping[int, bytes] | None] | None = None,
        *,
        out: list[RecordRun] | None = None,
    ) -> int:
        """Encode and write the events of consecutive changes of `t` (defined by
        `table`) with op `op`, logged at `lsns`, as one RecordRun (added to `out`
        instead, when given); how many it wrote, stopping before the first fallback row
        (counted in `fallbacks`); -1, having done nothing, when the definition has no
        native plan. `toasts`: each row's TOAST chunks (of a list of `tuples` only)."""
        p = self.plugin
        hot = self._hot_of(txn, t, rel, table, lsns[0])
        st, entry = hot.st, hot.entry
        plan, parts, value_header = entry.plan, hot.parts, entry.value_header
        if plan is None or parts is None or value_header is None:
            return -1
        code = _op_code(op)
        total, order = p._next_order(st, t.collection)
        key_header = entry.key_header if entry.want_key else None
        if isinstance(tuples, list):
            keys, values, reason = plan.encode_events(
                tuples,
                lsns,
                value_header,
                key_header,
                parts,
                total,
                order,
                code,
                self._clock(),
                toasts,
            )
        elif tuples.olds:  # updates with their old tuples (HeapRows): both encoded
            keys, values, reason = plan.encode_update_rows(
                tuples,
                value_header,
                key_header,
                parts,
                total,
                order,
                self._clock(),
                entry.key_exact,
            )
        else:  # an InsertRows' rows (HeapRows), read where they are
            keys, values, reason = plan.encode_rows(
                tuples, value_header, key_header, parts, total, order, code, self._clock()
            )
        if reason is not None:
            self.fallbacks[reason] += 1
        if entry.drops:
            self._warn_dropped(plan)
        done = len(values)
        if done:
            self.native += done
            if toasts is not None:
                self.toasted += sum(1 for held in toasts[:done] if held)
            if not st.began:
                p._begin_once(ctx, st, lsns[0])
            p._order(st, t.collection, done)
            lsns = lsns[:done]
            if code == "d" and p._tombstones():
                keys, values, lsns = _with_tombstones(keys, values, lsns)
            run = RecordRun(t.plan.topic, keys, values, lsns, p.context_headers, code)
            if out is None:
                ctx.write_run(run)
            else:
                out.append(run)
        return done

    def _encode(
        self, ctx: PluginContext, txn: TxnInfo, t: _Table, change: RowChange
    ) -> tuple[str, bytes | None, bytes] | None:
        """(op, key, value) of `change`'s event, written by the native encoder and
        counted in its transaction (BEGIN written first if it is the first event); None,
        having done nothing, when the change is the Python path's."""
        if not txn.commit_time or isinstance(ctx.state.get("snapshot"), str):
            return None
        if change.op is ChangeOp.UPDATE and change.old is not None:
            return self._encode_update(ctx, txn, t, change)
        row = _encoded_row(change)
        if type(row) is not DecodedRow:
            return None
        lsn = change.lsn
        hot = self._hot_of(txn, t, change.relation, row.table, lsn)
        entry = hot.entry
        plan = entry.plan
        if plan is None:
            return None
        out = self._row(plan, row, lsn, entry.want_key)
        if out is None:
            return None
        record, key_record = out
        self.native += 1
        code = _op_code(change.op)
        deleting = code == "d"
        before, after = (record, None) if deleting else (None, record)
        return (code, *self._wrap(ctx, hot, before, after, key_record, lsn, code))

    def _encode_update(
        self, ctx: PluginContext, txn: TxnInfo, t: _Table, change: RowChange
    ) -> tuple[str, bytes | None, bytes] | None:
        """(op "u", key, value) of an UPDATE that carries its old tuple, both tuples
        encoded natively; None, having done nothing, when either is the Python path's
        (a fallback row, a key type not compared by bytes) or the key changed (the
        Python path writes a DELETE and a CREATE). The old tuple is the event's
        `before` unless it is only the old key (`old_is_key`: before is null)."""
        new, old = change.new, change.old
        if type(new) is not DecodedRow or type(old) is not DecodedRow:
            return None
        if old.table is not new.table:
            self.fallbacks["old tuple of another definition"] += 1
            return None
        lsn = change.lsn
        hot = self._hot_of(txn, t, change.relation, new.table, lsn)
        entry = hot.entry
        plan = entry.plan
        if plan is None:
            return None
        want_key = entry.want_key
        if want_key and not entry.key_exact:
            self.fallbacks["update key compared in Python"] += 1
            return None
        out = self._row(plan, new, lsn, want_key)
        if out is None:
            return None
        old_out = self._row(plan, old, lsn, want_key)
        if old_out is None:
            return None
        record, key_record = out
        if old_out[1] != key_record:
            self.fallbacks["update changes the key"] += 1
            return None
        before = None if change.old_is_key else old_out[0]
        self.native += 1
        return ("u", *self._wrap(ctx, hot, before, record, key_record, lsn, "u"))

    def _warn_dropped(self, plan: Any) -> None:
        """The Python path's `numeric_special_value_dropped` warning (once per column, by
        `AvroPlugin._warn`) for each nullable decimal column whose NaN/±Infinity the
        encoder wrote as null since the last look (`RowPlan.take_dropped`)."""
        for column in plan.take_dropped():
            self.plugin._warn("numeric_special_value_dropped", column)

    def _row(
        self, plan: Any, row: DecodedRow, lsn: int, want_key: bool
    ) -> tuple[bytes, bytes | None] | None:
        """`row`'s (Value record, Key record) from `plan`; None, counted in `fallbacks`
        by its reason, when the row is the Python path's."""
        raw = row.raw
        out = plan.encode(
            raw.natts, raw.infomask, raw.hoff, raw.data, lsn, want_key, row.toast or None
        )
        self._warn_dropped(plan)
        if type(out) is str:
            self.fallbacks[out] += 1
            return None
        record, key_record = out
        return record, key_record

    def _wrap(
        self,
        ctx: PluginContext,
        hot: _Hot,
        before: bytes | None,
        after: bytes | None,
        key_record: bytes | None,
        lsn: int,
        code: str,
    ) -> tuple[bytes | None, bytes]:
        """(key, value) of one event of `hot`'s table: the Envelope around the encoded
        `before` and `after` records, counted in its transaction (BEGIN first if it is
        the first event)."""
        p, st, entry = self.plugin, hot.st, hot.entry
        key_header = entry.key_header
        key = None if key_record is None or key_header is None else key_header + key_record
        if not st.began:
            p._begin_once(ctx, st, lsn)
        total, order = p._order(st, hot.t.collection)
        parts = hot.parts
        assert parts is not None  # built whenever the entry has a plan
        head, sequence_head, mid, tail, block_head = parts
        value = self._envelope(
            entry.value_header,
            before,
            after,
            head,
            sequence_head,
            lsn,
            mid,
            tail,
            block_head,
            total,
            order,
            code,
            self._clock(),
        )
        return key, value

    def snapshot_rows(
        self,
        ctx: PluginContext,
        txn: TxnInfo,
        rel: RelationInfo,
        table: TableDef,
        chunk: Any,
        fields: Mapping[str, int],
        rows: Sequence[int],
        start: int,
        marker: Callable[[int], str],
        prepared: CopyPrepared | None = None,
    ) -> int:
        """The snapshot reads of rows `rows[start:]` of a native COPY chunk
        (`service._native.CopyChunk`, connectors.tablesnap.chunks) of table `rel` as
        `table` defines it, written as one RecordRun: what `change_python` writes for
        each (op "r", no transaction block, uncounted, `source.snapshot` = `marker(n)`
        of the row's position n in `rows`, `sequence` as `AvroPlugin._source` gives a
        snapshot row), encoded by `RowPlan.encode_copy` with the table's plan (the WAL
        rows' converters) from the rows' send format. `fields`: each live column's field
        in a COPY row (-1: always NULL). Returns how many rows it wrote, stopping before
        the first one the Python path must take (counted in `fallbacks`); -1, having
        done nothing, when the table has no native plan or a column no native send form
        (logged once per table definition, counted per call). `prepared`: the chunk's
        records from `snapshot_prepare`, used when made with this call's plan."""
        p = self.plugin
        t = p._table(rel)
        if t is None:
            return len(rows) - start  # not published: nothing to write, as `change`
        key = (id(t), id(table))
        found = self._copy_entries.get(key)
        if found is None or found[0] is not t or found[1] is not table:
            entry = self._compile(t, rel, table)
            spec = [-1 if c.dropped else fields.get(c.name, -1) for c in table.columns]
            reason = entry.reason
            if entry.plan is not None:
                reason = entry.plan.copy_fallback(spec, chunk.ncols) or ""
            if reason:
                log.info("avro_native_snapshot_off", topic=t.plan.topic, reason=reason)
            found = (t, table, entry, spec, reason)
            self._copy_entries[key] = found
        entry, spec, reason = found[2], found[3], found[4]
        plan = entry.plan
        if reason or plan is None or entry.value_header is None:
            self.fallbacks[reason or "no plan"] += 1
            return -1
        lsn = txn.final_lsn
        end = len(rows) - 1
        parts = (
            self._snapshot_parts(txn, t, marker(0)),
            self._snapshot_parts(txn, t, marker(min(1, end))),
            self._snapshot_parts(txn, t, marker(end)),
        )
        key_header = entry.key_header if entry.want_key else None
        self._copy_ahead[id(table)] = (table, plan, spec, key_header is not None)
        ahead = None
        if (
            prepared is not None
            and prepared.plan is plan
            and prepared.spec == spec
            and prepared.want_key == (key_header is not None)
        ):
            ahead = prepared.records
            self.ahead += max(0, bisect_left(rows, len(ahead), start) - start)
        keys, values, why = plan.encode_copy(
            chunk,
            spec,
            list(rows),
            start,
            entry.value_header,
            key_header,
            parts,
            "r",
            lsn,
            self._clock(),
            ahead,
        )
        if why is not None:
            self.fallbacks[why] += 1
        if entry.drops:
            self._warn_dropped(plan)
        done = len(values)
        if done:
            self.native += done
            ctx.write_run(
                RecordRun(t.plan.topic, keys, values, [lsn] * done, p.context_headers, "r")
            )
        return done

    def snapshot_prepare(
        self, table: TableDef, chunk: Any, fields: Mapping[str, int]
    ) -> CopyPrepared | None:
        """The records of `chunk`'s rows (table `table`, columns at `fields` as
        `snapshot_rows` takes them), encoded now with the plan the last published chunk
        of `table` used, for `snapshot_rows(prepared=...)`; None when no chunk of it was
        published natively yet. Safe on a reader's thread while the worker's runs: it
        reads one entry of a dict, and the encoding holds no state of the plugin."""
        found = self._copy_ahead.get(id(table))
        if found is None or found[0] is not table:
            return None
        _, plan, spec, want_key = found
        if spec != [-1 if c.dropped else fields.get(c.name, -1) for c in table.columns]:
            return None
        return CopyPrepared(plan, spec, want_key, plan.prepare_copy(chunk, spec, want_key))

    def _snapshot_parts(
        self, txn: TxnInfo, t: _Table, marker: str
    ) -> tuple[bytes, bytes, bytes, bytes, None]:
        """The `source` parts of a snapshot read of `t` with `marker` (as
        `AvroPlugin._source` gives it: the commit time, or the clock without one; the
        sequence's last commit null for an initial snapshot's markers), and no
        transaction block."""
        _long, _string = self._native.avro_long, self._native.avro_string
        commit_us = txn.commit_time + UNIX_EPOCH_USECS if txn.commit_time else self._clock() // 1000
        const = self.plugin._source(txn, t.schema, t.table, txn.final_lsn, marker)
        ident, _db, names = self._table_parts(t)
        last = None if is_initial(marker) else self.plugin._last_commit_lsn
        prefix = b'[null,"' if last is None else f'["{last}","'.encode()
        head = ident + _long(commit_us // 1000) + b"\x00" + _string(marker) + _string(const["db"])
        mid = b"\x02" + _long(commit_us) + b"\x02" + _long(commit_us * 1000) + names
        mid += b"\x02" + _long(txn.xid)
        return head, prefix, mid, b"\x00\x00\x00", None

    def transaction_record(
        self,
        serializers: tuple[Callable[[Any], bytes], Callable[[Any], bytes]],
        status: str,
        txn_id: str,
        event_count: int | None,
        collections: list[tuple[str, int]] | None,
        ts_ms: int,
    ) -> tuple[bytes, bytes] | None:
        """A transaction metadata event's (key, value) wire bytes, equal to what the
        `serializers` (the topic's AvroEncoders) write for the same datums; None when
        they are not AvroEncoders."""
        cached = self._tx_headers
        if cached is not None and cached[0] is serializers:
            key_header, value_header = cached[1], cached[2]
        else:
            key_header, value_header = _header(serializers[0]), _header(serializers[1])
            self._tx_headers = (serializers, key_header, value_header)
        if key_header is None or value_header is None:
            return None
        native = self._native
        value = self._transaction_value(
            value_header, status, txn_id, event_count, collections, ts_ms
        )
        return key_header + native.avro_string(txn_id), value
