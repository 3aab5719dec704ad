"""Rows as the plugins see them: raw tuples decoded against the schema history.

Implements `service.output.logical.RowResolver`. Receives every decoder event in WAL order
(forwarded to the `SchemaHistory`), and at replay time turns a `HeapChange` into a
`RelationInfo` plus `ColumnValue`s, using the table definition the history says was
valid for that change's transaction at that LSN, and the type decoders of
`service.types`.

Guarantees:
- Rewrite output (heap inserts into a relfilenode its own transaction created before
  any definition named it) is never emitted: `relation` returns None for it.
- A change of a system catalog (OID below FirstUnpinnedObjectId) is never emitted,
  even when a DDL message made its definition known: catalogs are not logically
  logged (`logically_logged`).
- A change of an unknown relfilenode that carries no tuple data (catalog updates and
  deletes, which wal_level=logical logs without tuples) is dropped, as PostgreSQL drops
  changes of relations that are not logically logged. One that carries data is a
  SchemaMismatchError naming the relfilenode and LSN: pgcdc never guesses a table.
- A tuple with more attributes than the definition is a SchemaMismatchError naming the
  table and LSN (raised by the deformer). Values are decoded lazily, per column.
- A TOAST pointer whose chunks were not logged (an UPDATE that left the value alone)
  becomes UNCHANGED_TOAST, never a wrong or empty value.
- A column added with ADD COLUMN ... DEFAULT after a tuple was written (atthasmissing)
  reads, in that tuple, exactly what a stored copy of the default would: its
  attmissingval is turned once per (table definition, column) into the stored datum
  the deformer hands on (getmissingattr), so `.value` and `.text` come from the same
  type decoders as any stored value. See `_MissingPlanner` for how, and for the two
  kinds of type whose stored form cannot be rebuilt (jsonb inside the type; types the
  decoders do not know), which are read as the initial snapshot reads them.
- A column whose type (or a type inside it) no decoder knows is decided by the
  `UnknownTypePolicy` (decoding.unknown_types) when its table definition is first
  planned, before any row of it is handed on: `fail` raises `UnknownTypeError` listing
  every such column of the table; `omit` leaves the column out of the relation and of
  every row; `bytes` hands on its stored datum as the value (`bytes_text` as the text)
  and names the type in `ColumnMeta.stored_bytes_type`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from functools import partial
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, overload

import structlog

from service._binary import U32
from service.decode.events import ChangeKind, HeapChange, InsertRows, RawTuple
from service.errors import DecodeError, SchemaMismatchError, UnknownTypeError
from service.lsn import format_lsn
from service.output.api import (
    UNCHANGED_TOAST,
    ChangeOp,
    ColumnCodec,
    ColumnMeta,
    ColumnValue,
    RelationInfo,
    RowChange,
    StoredValue,
)
from service.pgconst import JSONB_OID, TEXT_ARRAY_OID, TEXT_OID
from service.schema.history import Classification, RelClass, SchemaHistory

if TYPE_CHECKING:
    from service._native import HeapRows  # an InsertRows' rows in the native core
from service.schema.tabledef import ColumnDef, TableDef
from service.types.convert import simple_functions, to_python, to_text, undecodable_part
from service.types.deform import Column, deform, toast_pointers
from service.types.extensions import extension_type
from service.types.registry import TypeInfo, TypeRegistry, undecodable
from service.types.sendform import (
    base_type,
    base_type_and_typmod,
    convertible,
    snapshot_registry,
    text_array_is_stored,
    text_is_stored,
    to_stored,
)
from service.types.snapshot_rewrites import text_valued
from service.types.unknown import UnknownColumn, UnknownTypePolicy
from service.types.varlena import ToastPointer, Unchanged, resolve_toast

_CLASS_CACHE_MAX = 4096

log = structlog.get_logger("service.types.rowdecode")
_NO_TOAST: Mapping[int, bytes] = MappingProxyType({})

TypeSource = Callable[[Sequence[int]], TypeRegistry]
"""Loads type facts for these OIDs (and their dependencies) and returns the registry."""

TypeNames = Callable[[Sequence[int]], Mapping[int, str]]
"""format_type(oid, NULL) for these OIDs."""


MissingSend = Callable[[int, int, str], bytes | None]
"""`(type_oid, typmod, literal)` → attmissingval's one element as that type, in its
binary send format: what the server sends for `((literal::text[])[1])::T`, T being
`format_type(type_oid, typmod)` (typmod < 0: none); None if the element is NULL.
`literal` is `ColumnDef.missing_text` (attmissingval's text, a one-element array)."""

_ARRAY_ELEMTYPE_AT = 8  # stored ArrayType payload: ndim, dataoffset, elemtype, ...


class DecodedRow(Sequence[ColumnValue]):
    """A decoded row: its `ColumnValue`s, as a read-only sequence, plus what it was
    decoded from, the logged `raw` tuple, the `table` definition and the change's TOAST
    chunks (`toast`: chunk id -> reassembled chunk data, empty when it carried none).
    The avro plugin's native encoder (connectors.avro.native_rows) deforms `raw` itself
    against a plan compiled from `table`, resolving its TOAST pointers from `toast`, so
    the Python deform waits for its first use (`make`) and is skipped when nothing reads
    the values.

    A row must be read during the change callback it was handed to (as every plugin
    does): a deferred deform reads the type registry of that moment. The deform's errors
    (SchemaMismatchError with the LSN and table) are raised at the first read.
    """

    __slots__ = ("_items", "_make", "raw", "table", "toast")

    def __init__(
        self,
        raw: RawTuple,
        table: TableDef,
        make: Callable[[], list[ColumnValue]],
        toast: Mapping[int, bytes] = _NO_TOAST,
    ) -> None:
        self.raw = raw
        self.table = table
        self.toast = toast
        self._make: Callable[[], list[ColumnValue]] | None = make
        self._items: list[ColumnValue] | None = None

    def values(self) -> list[ColumnValue]:
        """The row's values (deformed now if they were not yet)."""
        items = self._items
        if items is None:
            make = self._make
            assert make is not None
            items = self._items = make()
            self._make = None
        return items

    def __len__(self) -> int:
        return len(self.values())

    @overload
    def __getitem__(self, index: int) -> ColumnValue: ...
    @overload
    def __getitem__(self, index: slice) -> list[ColumnValue]: ...
    def __getitem__(self, index: int | slice) -> ColumnValue | list[ColumnValue]:
        return self.values()[index]

    def __iter__(self) -> Iterator[ColumnValue]:
        return iter(self.values())

    def __eq__(self, other: object) -> bool:
        mine = self.values()
        if isinstance(other, DecodedRow):
            return mine == other.values()
        if isinstance(other, list | tuple):
            return mine == list(other)
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"DecodedRow({self.values()!r})"


class RowRun(Sequence[RowChange]):
    """Consecutive changes of one table definition with one op, handed to a plugin's
    `changes` callback as its `RowChange`s (`HistoryRows.run` builds it).

    No change of a run carries TOAST chunks, and each has the tuple its op logs; none
    is an UPDATE with an old tuple, except in a run of an `InsertRows` of such updates
    (`with_old`: every row then holds its old tuple too, in `raws`, and the encoders
    that read raws as new tuples alone must not take it). An item is built when it is
    read (`make`: the driver's own change-to-row conversion), so every consumer sees the
    same rows it would see in a list. A native encoder reads `raws` (each change's
    logged tuple: the new one, or a DELETE's old one) and `lsns` instead and builds none
    of them; of a run of an `InsertRows`, `raws` is its native `HeapRows`, whose tuples
    never become Python objects. The lists are the run's own: nobody changes them after.
    """

    __slots__ = ("_make", "changes", "lsns", "op", "raws", "relation", "table", "with_old")

    def __init__(
        self,
        op: ChangeOp,
        relation: RelationInfo,
        table: TableDef,
        changes: Sequence[HeapChange],
        raws: list[RawTuple] | HeapRows,
        lsns: list[int],
        make: Callable[[HeapChange], RowChange | None],
        *,
        with_old: bool = False,
    ) -> None:
        self.op = op
        self.with_old = with_old
        self.relation = relation
        self.table = table
        self.changes = changes
        self.raws = raws
        self.lsns = lsns
        self._make = make

    def __len__(self) -> int:
        return len(self.changes)

    @overload
    def __getitem__(self, index: int) -> RowChange: ...
    @overload
    def __getitem__(self, index: slice) -> list[RowChange]: ...
    def __getitem__(self, index: int | slice) -> RowChange | list[RowChange]:
        if isinstance(index, slice):
            return [self._item(c) for c in self.changes[index]]
        return self._item(self.changes[index])

    def _item(self, change: HeapChange) -> RowChange:
        row = self._make(change)
        if row is None:  # its first change's relation was emitted: so is every one's
            raise SchemaMismatchError(
                "a change of a run lost its relation",
                lsn=change.lsn,
                relation=f"{self.relation.schema}.{self.relation.name}",
            )
        return row

    def __repr__(self) -> str:
        return f"RowRun({self.op.value} {self.relation.name} x{len(self.changes)})"


class RunList(Sequence[RowChange]):
    """A transaction's plain changes of several tables or ops, as the RowRuns they cut
    into (`HistoryRows.runs`), handed to a plugin's `changes` callback in one call. As
    a sequence it is their rows in order (each built when read, as a RowRun's); a
    plugin that reads raw tuples takes `runs` one by one as it takes a RowRun."""

    __slots__ = ("_rows", "runs")

    def __init__(self, runs: list[RowRun]) -> None:
        self.runs = runs
        self._rows: list[RowChange] | None = None

    def _all(self) -> list[RowChange]:
        rows = self._rows
        if rows is None:
            rows = self._rows = [row for run in self.runs for row in run]
        return rows

    def __len__(self) -> int:
        return sum(len(run) for run in self.runs)

    @overload
    def __getitem__(self, index: int) -> RowChange: ...
    @overload
    def __getitem__(self, index: slice) -> list[RowChange]: ...
    def __getitem__(self, index: int | slice) -> RowChange | list[RowChange]:
        return self._all()[index]

    def __iter__(self) -> Iterator[RowChange]:
        for run in self.runs:
            yield from run

    def __repr__(self) -> str:
        return f"RunList({', '.join(map(repr, self.runs))})"


# The ops a RowRun holds, and whether the logged tuple it reads is the old one.
_RUN_OPS = {
    ChangeKind.INSERT: (ChangeOp.INSERT, False),
    ChangeKind.UPDATE: (ChangeOp.UPDATE, False),
    ChangeKind.DELETE: (ChangeOp.DELETE, True),
}


@dataclass(slots=True)
class _Out:
    """How one live column of a definition is handed on (dropped columns have none).

    `null`, `unchanged` and `missing` are shared by every row. `missing` is set only
    for a column added with a default whose attmissingval has no stored form the
    deformer could hand on (see `_MissingPlanner`); it is used for tuples written
    before the column (attnum beyond their natts). `simple`: the codec's functions never raise
    UnknownTypeError, so rows need no per-value error context; otherwise each row binds
    one (`HistoryRows._bound`) with the change's LSN, as the value is converted lazily.
    """

    attnum: int
    codec: ColumnCodec
    info: TypeInfo
    null: ColumnValue
    unchanged: ColumnValue
    missing: ColumnValue | None
    simple: bool


@dataclass(slots=True)
class _Plan:
    """A table definition prepared for decoding: resolved once, used for every row.

    `registry` is the type registry the codecs were resolved against; a row decoded
    with another one (the type cache was invalidated) rebuilds `outs`.
    """

    rel: RelationInfo
    table: TableDef  # kept alive: plans are cached by id(table)
    columns: list[Column]  # for the deformer, dropped included
    outs: list[_Out | None]  # parallel to `columns`; None for dropped columns
    registry: TypeRegistry
    qualified: str
    # attnum -> the value tuples older than the column read, for the columns whose
    # attmissingval is not handed to the deformer as a stored datum (`_Out.missing`)
    missing_values: dict[int, ColumnValue]
    # decoding.unknown_types: the attnums left out (omit) or handed on as stored bytes
    omitted: frozenset[int] = frozenset()
    as_bytes: frozenset[int] = frozenset()


FIRST_UNPINNED_OBJECT_ID = 12000  # transam.h (PG14+)


def logically_logged(relid: int) -> bool:
    """RelationIsLogicallyLogged for a permanent table: not a system catalog.

    IsCatalogRelationOid: a relation is a catalog (or a catalog's toast table or index)
    when its OID is pinned, below FirstUnpinnedObjectId. A user_catalog_table has a
    normal OID, so its changes are decoded like any table's."""
    return relid >= FIRST_UNPINNED_OBJECT_ID


class HistoryRows:
    """Schema history + type decoders behind the RowResolver interface."""

    def __init__(
        self,
        history: SchemaHistory,
        types: TypeSource,
        type_names: TypeNames,
        *,
        unknown_types: UnknownTypePolicy | None = None,
        missing_send: MissingSend | None = None,
    ) -> None:
        """`missing_send` reads attmissingval (the catalog stage's I/O, injected); without
        it, a tuple that lacks a column added with a default raises DecodeError when
        that column is read (for users that only need `relations_by_oid`).
        `unknown_types`: decoding.unknown_types (default: fail)."""
        self.history = history
        self._types = types
        self._type_names = type_names
        self._names: dict[int, str] = {}
        self.unknown_types = unknown_types or UnknownTypePolicy()
        self._missing = _MissingPlanner(missing_send)
        # id(TableDef) -> its plan (which keeps the TableDef alive)
        self._plans: dict[int, _Plan] = {}
        # Classifications per (relfilenode, owner): (lo, hi, answer), valid for change
        # LSNs in [lo, hi) while the history is unchanged. The owner is the top xid
        # when the history holds entries of that transaction (`_owners`), else 0: every
        # other transaction sees the relfilenode alike, so the answer is shared across
        # transactions (a run of small transactions looks each table up once). Every
        # change to the history comes through apply()/assign_child(), which empty the
        # cache, except for events the history says are inert (`SchemaHistory.inert`:
        # a heap change, the commit of a transaction without schema state, ...).
        self._classes: dict[tuple[int, int, int, int], tuple[int, int, Classification]] = {}
        # SchemaHistory.owner_xids(), computed when first needed after a change.
        self._owners: frozenset[int] | None = None
        # The last change relation() answered for, so row() needs no second lookup:
        # (change, top xid, plan).
        self._last: tuple[HeapChange, int, _Plan] | None = None
        # (top xid, relfilenode) whose rewrite changes were logged (`_note_rewrite`)
        self._rewrites_noted: set[tuple[int, int]] = set()

    # --- RowResolver ----------------------------------------------------------------

    def apply(self, event: Any) -> None:
        if type(event) is HeapChange:
            return  # SchemaHistory.apply: a heap change has no schema effect
        history = self.history
        inert = history.inert(event)
        history.apply(event)
        if not inert:
            self._forget()

    def assign_child(self, top: int, sub: int) -> None:
        self.history.assign_child(top, sub)
        self._forget()

    def _note_rewrite(self, change: HeapChange, top_xid: int) -> None:
        """Log the first change of each (transaction, relfilenode) dropped as a rewrite's
        (`rewrite_changes_skipped`): a VACUUM FULL writes a whole table so, and a fault
        run's story must tell such a drop from a lost change."""
        key = (top_xid, change.locator.rel_number)
        noted = self._rewrites_noted
        if key in noted:
            return
        if len(noted) >= 1024:
            noted.clear()
        noted.add(key)
        log.info(
            "rewrite_changes_skipped",
            xid=top_xid,
            relfilenode=change.locator.rel_number,
            lsn=format_lsn(change.lsn),
        )

    def _forget(self) -> None:
        """The history changed: no cached answer stands."""
        self._classes.clear()
        self._owners = None
        self._last = None

    def _owner(self, top_xid: int) -> int:
        """The classification cache's owner for `top_xid` (see `_classes`)."""
        owners = self._owners
        if owners is None:
            owners = self._owners = self.history.owner_xids()
        return top_xid if top_xid in owners else 0

    def _classify(self, change: HeapChange, top_xid: int, owner: int) -> Classification:
        loc, lsn = change.locator, change.lsn
        key = (loc.spc_oid, loc.db_oid, loc.rel_number, owner)
        hit = self._classes.get(key)
        if hit is not None and hit[0] <= lsn < hit[1]:
            return hit[2]
        cls, lo, hi = self.history.classify_span(loc, top_xid, lsn)
        if len(self._classes) > _CLASS_CACHE_MAX:
            self._classes.clear()
        self._classes[key] = (lo, hi, cls)
        return cls

    def relation(self, change: HeapChange, top_xid: int) -> RelationInfo | None:
        # _classify's cache hit, inlined (one lookup per replayed row)
        loc = change.locator
        owner = self._owner(top_xid)
        hit = self._classes.get((loc.spc_oid, loc.db_oid, loc.rel_number, owner))
        if hit is not None and hit[0] <= change.lsn < hit[1]:
            cls = hit[2]
        else:
            cls = self._classify(change, top_xid, owner)
        match cls.kind:
            case RelClass.TABLE:
                assert cls.table is not None
                if not logically_logged(cls.table.oid):
                    # A system catalog, known because a DDL message named it (REINDEX
                    # TABLE pg_class on 17+): ReorderBufferProcessTXN skips the changes
                    # of a relation that is not RelationIsLogicallyLogged.
                    return None
                table = cls.table
                plan = self._plans.get(id(table))  # _plan's cache hit, inlined
                if plan is None or plan.table is not table:
                    plan = self._plan(table, change.lsn)
                self._last = (change, top_xid, plan)
                return plan.rel
            case RelClass.REWRITE:
                self._note_rewrite(change, top_xid)
                return None
            case RelClass.TOAST:
                # Toast chunks never reach replay as changes; a delete of chunks does
                # (DELETE of a toasted row), and is not a change of the table.
                return None
            case RelClass.UNKNOWN:
                if change.new_tuple is None and change.old_tuple is None:
                    return None
                loc = change.locator
                raise SchemaMismatchError(
                    f"change to relfilenode {loc.spc_oid}/{loc.db_oid}/{loc.rel_number} "
                    "that no known table owns",
                    lsn=change.lsn,
                    xid=change.xid,
                    relation=f"relfilenode {loc.rel_number}",
                )
            case _:
                raise SchemaMismatchError(f"unexpected classification {cls.kind}", lsn=change.lsn)

    def run(
        self,
        changes: list[HeapChange] | InsertRows,
        top_xid: int,
        make: Callable[[HeapChange], RowChange | None],
    ) -> RowRun | None:
        """`changes` as one RowRun, when they are all of one table definition (the same
        relfilenode, classified alike) with one op, each with its logged tuple and no
        UPDATE with an old tuple; else None (the caller converts them one by one, which
        also raises their errors). One classification answers for the whole run."""
        rows = changes if type(changes) is InsertRows else None
        first = changes[0]
        spec = _RUN_OPS.get(first.kind)
        if spec is None:
            return None
        relation = self.relation(first, top_xid)
        if relation is None:
            return None
        # relation() has left its plan in `_last` and its classification in the cache
        assert self._last is not None and self._last[0] is first
        plan = self._last[2]
        loc, kind = first.locator, first.kind
        spc, db, number = loc.spc_oid, loc.db_oid, loc.rel_number
        lo, hi, _cls = self._classes[(spc, db, number, self._owner(top_xid))]
        if rows is not None:
            # Inserts of one relation in LSN order: one classification covers them all
            # when it covers the first and the last.
            if not lo <= rows.lsn <= rows.last_lsn < hi:
                return None
            # updates that logged their old tuples: every row holds both (`with_old`)
            with_old = bool(rows.olds)
            return RowRun(
                spec[0],
                relation,
                plan.table,
                rows,
                rows.rows,
                rows.rows.lsns(),
                make,
                with_old=with_old,
            )
        op, of_old = spec
        raws: list[RawTuple] = []
        lsns: list[int] = []
        for c in changes:  # once per replayed row
            at = c.locator
            if c.kind is not kind or not lo <= c.lsn < hi:
                return None
            if at is not loc and (at.rel_number != number or at.db_oid != db or at.spc_oid != spc):
                return None
            if of_old:
                raw = c.old_tuple
            elif c.old_tuple is None:
                raw = c.new_tuple
            else:
                return None
            if raw is None:
                return None
            raws.append(raw)
            lsns.append(c.lsn)
        return RowRun(op, relation, plan.table, changes, raws, lsns, make)

    def runs(
        self,
        changes: list[HeapChange],
        top_xid: int,
        make: Callable[[HeapChange], RowChange | None],
    ) -> RowRun | RunList | None:
        """`changes` cut into RowRuns where the relfilenode or the op changes (a
        transaction touching several tables: pgbench's three updates and an insert),
        each as `run` would build it: the one RowRun, or a RunList of them; None when
        any piece is not one run (the caller converts them all one by one, as without
        this). The pieces are classified in order, as the changes one by one would
        be."""
        out: list[RowRun] = []
        n, i = len(changes), 0
        while i < n:
            first = changes[i]
            loc, kind = first.locator, first.kind
            j = i + 1
            while j < n:
                c = changes[j]
                at = c.locator
                if c.kind is not kind or (
                    at is not loc
                    and (
                        at.rel_number != loc.rel_number
                        or at.db_oid != loc.db_oid
                        or at.spc_oid != loc.spc_oid
                    )
                ):
                    break
                j += 1
            run = self.run(changes if i == 0 and j == n else changes[i:j], top_xid, make)
            if run is None:
                return None
            out.append(run)
            i = j
        return out[0] if len(out) == 1 else RunList(out)

    def relations_by_oid(self, relids: Sequence[int], lsn: int, xid: int) -> list[RelationInfo]:
        out = []
        for oid in relids:
            table = self.history.by_oid(oid, lsn, xid)
            if table is not None:
                out.append(self._plan(table, lsn).rel)
        return out

    def row(
        self,
        relation: RelationInfo,
        change: HeapChange,
        new: bool,
        toast: Mapping[int, bytes],
        top_xid: int,
    ) -> Sequence[ColumnValue] | None:
        raw = change.new_tuple if new else change.old_tuple
        if raw is None:
            return None
        last = self._last
        if (
            last is not None
            and last[0] is change
            and last[1] == top_xid
            and last[2].rel is relation
        ):
            # by_oid(relation.oid, lsn, top_xid) is the very pick classify made for it
            return self._decode(last[2], raw, toast, change.lsn)
        table = self.history.by_oid(relation.oid, change.lsn, top_xid)
        if table is None:
            raise SchemaMismatchError(
                "table definition vanished between lookups",
                lsn=change.lsn,
                relation=f"{relation.schema}.{relation.name}",
            )
        return self._decode(self._plan(table, change.lsn), raw, toast, change.lsn)

    def toast_pointers(
        self, relation: RelationInfo, change: HeapChange, top_xid: int
    ) -> tuple[TableDef, list[ToastPointer]]:
        """The table definition valid for `change` (the historic one, at its LSN) and
        the on-disk TOAST pointers of its new tuple (the unchanged-TOAST fill's
        question: `service.output.toastfill`)."""
        table = self.definition(relation, change, top_xid)
        raw = change.new_tuple
        if raw is None:
            return table, []
        return table, toast_pointers(raw, self._plan(table, change.lsn).columns)

    def definition(self, relation: RelationInfo, change: HeapChange, top_xid: int) -> TableDef:
        """The table definition valid for `change`: the historic one, at its LSN."""
        table = self.history.by_oid(relation.oid, change.lsn, top_xid)
        if table is None:
            raise SchemaMismatchError(
                "table definition vanished between lookups",
                lsn=change.lsn,
                relation=f"{relation.schema}.{relation.name}",
            )
        return table

    # --- internals ------------------------------------------------------------------

    def _plan(self, table: TableDef, lsn: int) -> _Plan:
        plan = self._plans.get(id(table))
        if plan is not None and plan.table is table:
            return plan
        live = [c for c in table.columns if not c.dropped]
        oids = sorted({c.type_oid for c in live})
        registry = self._types(oids)
        missing = [o for o in oids if o not in self._names]
        if missing:
            self._names.update(self._type_names(missing))
        qualified = f"{table.schema}.{table.name}"
        covers = self.unknown_types.covers
        unknown = {
            attnum: col
            for attnum, col in self._unknown_columns(live, registry, qualified).items()
            if covers(table.schema, table.name, col.column)  # else never published
        }
        mode = self.unknown_types.decide(list(unknown.values()), lsn=lsn)
        omitted = frozenset(unknown) if mode == "omit" else frozenset()
        if omitted & set(table.key_attnums):
            raise UnknownTypeError(
                f"key column(s) of {qualified} cannot be decoded and cannot be omitted (a "
                "key without them would merge distinct rows): "
                + ", ".join(unknown[a].describe() for a in sorted(omitted & set(table.key_attnums)))
                + "; set decoding.unknown_types to bytes",
                lsn=lsn,
                relation=qualified,
                field="decoding.unknown_types",
            )
        as_bytes = frozenset(unknown) if mode == "bytes" else frozenset()
        live = [c for c in live if c.attnum not in omitted]
        key_names = {c.attnum: c.name for c in live}
        metas = []
        for c in live:
            info = registry.get(c.type_oid, column=c.name)
            type_name = self._names.get(c.type_oid, info.name)
            meta = type_meta(info, registry, c.name, c.attnum, c.typmod, type_name)
            metas.append(
                replace(
                    meta,
                    notnull=c.not_null,
                    stored_bytes_type=type_name if c.attnum in as_bytes else "",
                )
            )
        columns = []
        missing_values: dict[int, ColumnValue] = {}
        for c in table.columns:
            datum = None
            if (
                c.has_missing
                and not c.dropped
                and c.missing_text is not None
                and c.attnum not in omitted
            ):
                type_name = next(m.type_name for m in metas if m.attnum == c.attnum)
                datum, value = self._missing.resolve(
                    c, registry, type_name, lsn, qualified, c.attnum in as_bytes
                )
                if value is not None:
                    missing_values[c.attnum] = value
            columns.append(
                Column(
                    c.attnum,
                    c.name,
                    c.type_oid,
                    c.typmod,
                    c.attlen,
                    c.attbyval,
                    c.attalign,
                    c.not_null,
                    c.dropped,
                    datum,
                )
            )
        rel = RelationInfo(
            oid=table.oid,
            schema=table.schema,
            name=table.name,
            replica_identity=table.replica_identity,
            key_columns=tuple(key_names[a] for a in table.key_attnums if a in key_names),
            columns=tuple(metas),
            defined_at=lsn,
            missing_datums=tuple((c.attnum, c.missing) for c in columns if c.missing is not None),
            name_cache=registry.name_cache,
        )
        plan = _Plan(
            rel, table, columns, [], registry, qualified, missing_values, omitted, as_bytes
        )
        self._prepare(plan, registry)
        self._plans[id(table)] = plan
        return plan

    def _unknown_columns(
        self, live: Sequence[ColumnDef], registry: TypeRegistry, qualified: str
    ) -> dict[int, UnknownColumn]:
        """attnum → the column, for the live columns no decoder can read (the check
        `pgcdc setup` and the worker's start make: `undecodable_part`)."""
        out = {}
        for c in live:
            found = undecodable_part(registry.get(c.type_oid, column=c.name), registry)
            if found is not None:
                type_name = self._names.get(c.type_oid, registry.get(c.type_oid).name)
                out[c.attnum] = UnknownColumn(qualified, c.name, type_name, found.name)
        return out

    def _prepare(self, plan: _Plan, registry: TypeRegistry) -> None:
        """Resolve each live column's codec against `registry` (as `_decode` did per row:
        registry.get, then to_python/to_text through the type's output function)."""
        outs: list[_Out | None] = []
        metas = iter(plan.rel.columns)
        for col in plan.columns:
            if col.dropped or col.attnum in plan.omitted:
                outs.append(None)
                continue
            meta = next(metas)
            info = registry.get(col.typid, column=col.name)
            fns = (
                (bytes, bytes_text)
                if col.attnum in plan.as_bytes
                else simple_functions(info, registry)
            )
            if fns is not None:
                codec = ColumnCodec(col.name, col.typid, meta.type_name, fns[0], fns[1])
            else:
                codec = ColumnCodec(col.name, col.typid, meta.type_name, _no_value, _no_text)
            outs.append(
                _Out(
                    col.attnum,
                    codec,
                    info,
                    ColumnValue.constant(codec, None, None),
                    ColumnValue.constant(codec, UNCHANGED_TOAST, None),
                    plan.missing_values.get(col.attnum),
                    fns is not None,
                )
            )
        plan.outs = outs
        plan.registry = registry

    def _decode(
        self,
        plan: _Plan,
        raw: RawTuple,
        toast: Mapping[int, bytes],
        lsn: int,
    ) -> DecodedRow:
        """The row of `raw`, deformed at its first read. A change's TOAST chunks are an
        immutable mapping the reorder buffer builds anew for each (`_ToastState.mapping`):
        the row holds it, whatever the buffer does after the change."""
        return DecodedRow(raw, plan.table, partial(self._values, plan, raw, toast, lsn), toast)

    def _values(
        self,
        plan: _Plan,
        raw: RawTuple,
        toast: Mapping[int, bytes],
        lsn: int,
    ) -> list[ColumnValue]:
        qualified = plan.qualified
        try:
            datums = deform(raw, plan.columns, relation=qualified)
        except SchemaMismatchError as exc:
            raise SchemaMismatchError(exc.message, lsn=lsn, relation=qualified) from exc
        registry = self._types([])
        if registry is not plan.registry:
            self._prepare(plan, registry)
        natts = raw.natts
        out: list[ColumnValue] = []
        append = out.append
        for o, datum in zip(plan.outs, datums, strict=True):
            if o is None:
                continue
            if type(datum) is bytes and o.simple:
                append(StoredValue(o.codec, datum))
                continue
            if datum is None:
                missing = o.missing
                append(missing if missing is not None and o.attnum > natts else o.null)
                continue
            # (attnum > natts deforms to None only when the column has no stored missing
            # datum: then `o.missing`, if set, is its value)
            stored: bytes | Unchanged
            if isinstance(datum, ToastPointer):
                stored = resolve_toast(datum, toast)
                if isinstance(stored, Unchanged):
                    append(o.unchanged)
                    continue
            else:
                stored = datum
            append(
                StoredValue(
                    o.codec if o.simple else self._bound(o, registry, lsn, qualified), stored
                )
            )
        return out

    def _bound(self, o: _Out, registry: TypeRegistry, lsn: int, qualified: str) -> ColumnCodec:
        """A codec for one value of a type that needs the registry (arrays, composites,
        ranges, enums): UnknownTypeError (a type the start check could not see, e.g. an
        enum label added later) gets the change's LSN."""
        name, info = o.codec.name, o.info

        def value(d: bytes) -> object:
            try:
                return to_python(d, info, registry, column=name)
            except UnknownTypeError as exc:
                raise UnknownTypeError(
                    exc.message, lsn=lsn, relation=qualified, field=name
                ) from exc

        def text(d: bytes) -> str | None:
            try:
                return to_text(d, info, registry, column=name)
            except UnknownTypeError as exc:
                raise UnknownTypeError(
                    exc.message, lsn=lsn, relation=qualified, field=name
                ) from exc

        return ColumnCodec(name, o.codec.type_oid, o.codec.type_name, value, text, shared=False)


def bytes_text(datum: bytes) -> str:
    """The text of a `bytes` column's value (decoding.unknown_types = bytes): the stored
    bytes as byteaout prints them with bytea_output=hex."""
    return "\\x" + bytes(datum).hex()


def type_meta(
    info: TypeInfo, registry: TypeRegistry, name: str, attnum: int, typmod: int, type_name: str
) -> ColumnMeta:
    """The ColumnMeta of a column (or composite field) of type `info`: what Avro maps it
    as (Debezium: the column's root type: a domain as its base type, with the domain's
    typmod; a domain over an array as the array), and for a composite, or an array of
    one, its fields with each live field's own ColumnMeta (`field_metas`, built the same
    way: PostgreSQL has no composite that contains itself, so this ends)."""
    mapped, elem_typmod = base_type_and_typmod(info, registry)
    kind = _mapped_kind(mapped)
    if info.typtype == "d" and kind != "a":
        kind = "d"
    elem, stored_elem = mapped, 0
    if kind == "a":
        # An array of a domain names the domain in its datums and maps as the domain's
        # base, with the domain's typmod.
        stored_elem = mapped.typelem
        elem, elem_mod = base_type_and_typmod(registry.get(mapped.typelem), registry)
        if elem_mod >= 0:
            elem_typmod = elem_mod
    elem_oid, elem_kind, labels = info.typelem, "b", info.enum_labels
    ext = extension_type(info)
    if kind in ("a", "d"):
        elem_oid, elem_kind = elem.oid, _mapped_kind(elem)
        if elem.typtype == "e":
            labels = elem.enum_labels
        ext = extension_type(elem)
    # a composite's fields, or those of an array of composites' element or of the
    # composite a domain is over
    row = info if kind == "c" else elem if kind in ("a", "d") and elem_kind == "c" else None
    fields = () if row is None else row.fields
    # a range's or multirange's subtype; a domain over one takes its base type's
    ranged = elem if kind == "d" else info
    range_subtype = ranged.range_subtype
    if ranged.multirange_range:
        range_subtype = registry.get(ranged.multirange_range).range_subtype
    if range_subtype and not labels:
        # a range over an enum (or its multirange, or a domain over either): the
        # subtype's labels, which its bounds print as
        subtype = registry.get(range_subtype)
        if subtype.typtype == "e":
            labels = subtype.enum_labels
    return ColumnMeta(
        name=name,
        attnum=attnum,
        type_oid=info.oid,
        type_name=type_name,
        typmod=typmod,
        notnull=False,
        kind=kind,
        elem_type_oid=elem_oid,
        enum_labels=tuple(labels.values()),
        enum_oids=tuple(labels.keys()),
        output_src=info.output_src,
        fields=tuple((f.name, f.typid, f.typlen, f.typalign, f.dropped) for f in fields),
        field_metas=tuple(
            None
            if f.dropped
            else type_meta(registry.get(f.typid), registry, f.name, i, f.typmod, f.name)
            for i, f in enumerate(fields, 1)
        ),
        elem_kind=elem_kind,
        elem_typmod=elem_typmod,
        elem_stored_oid=stored_elem,
        ext=ext,
        range_subtype=range_subtype,
        elem_textout=kind == "a"
        and elem.output_src == "textout"
        and (elem.typlen, elem.typalign) == (-1, "i"),
    )


def _mapped_kind(info: TypeInfo) -> str:
    """`ColumnMeta.kind` of a type that is no domain: 'a' an array (array_out), 'e', 'c'
    and 'r' as pg_type.typtype, 'b' anything else."""
    if info.typelem and info.typlen == -1 and info.output_src == "array_out":
        return "a"
    return {"e": "e", "c": "c", "r": "r"}.get(info.typtype, "b")


def _no_value(datum: object) -> object:
    raise AssertionError("a bound codec converts this column's values")


def _no_text(datum: object) -> str | None:
    raise AssertionError("a bound codec converts this column's values")


class _MissingPlanner:
    """attmissingval → what a tuple written before ADD COLUMN ... DEFAULT reads.

    The schema history keeps attmissingval as text (`ColumnDef.missing_text`, a
    one-element array literal); the decoders need the stored datum. The server parses
    the element as the column's type and sends it in binary send format
    (`MissingSend`), which `sendform.to_stored` rewrites into the stored form, exactly
    as the initial snapshot does for every value. Each (type, typmod, literal) is
    asked once per session. By the column's type (a domain: its base type):

    - textual output (text, varchar, json, xml, text-like user types): the element's
      text *is* the stored form; it is asked as `text` (xml_send would re-print the
      XML declaration; a text-like user type may have no send function);
    - an array of such: asked as `text[]`, with the element type written back into the
      array header (their stored elements are laid out alike);
    - jsonb anywhere in the type: jsonb's send form is its printed text, not the
      stored binary tree, so the value is decoded lazily with
      `sendform.snapshot_registry` (jsonb read as its text), as the snapshot does; the
      result equals the WAL decoders' (test_snapshot_vs_wal);
    - a type the decoders do not know (decoding.unknown_types decided it before: with
      `fail` the plan is never made, with `omit` the column is not resolved): with
      `bytes`, the element's output text as bytes, as the initial snapshot reads such a
      column (SQL gives no access to the stored form of a type pgcdc cannot decode;
      the README says so); a type whose value is its output text reads that text;
    - a type valued as its output text (`snapshot_rewrites.text_valued`: the reg*
      family, jsonpath, tsquery, ltree, ...): the element's text is the value and the
      text, never read back into an OID or a tree (a reg* OID 0 prints as `-`, which
      text_regclass rejects, and an overloaded operator's regoper as a name regoperin
      finds ambiguous: regproc.c);
    - anything else: the stored datum, handed to the deformer as `Column.missing`.
    """

    __slots__ = ("_cache", "_send")

    def __init__(self, send: MissingSend | None) -> None:
        self._send = send
        self._cache: dict[tuple[int, int, str], bytes | None] = {}

    def _ask(self, type_oid: int, typmod: int, literal: str) -> bytes | None:
        key = (type_oid, typmod, literal)
        if key not in self._cache:
            assert self._send is not None
            self._cache[key] = self._send(type_oid, typmod, literal)
        return self._cache[key]

    def resolve(
        self,
        col: ColumnDef,
        registry: TypeRegistry,
        type_name: str,
        lsn: int,
        qualified: str,
        as_bytes: bool = False,
    ) -> tuple[bytes | None, ColumnValue | None]:
        """(stored datum for the deformer, or None; else the value to read, or None for
        NULL) for a column with atthasmissing and a non-NULL attmissingval. `as_bytes`:
        the column's type cannot be decoded and decoding.unknown_types is `bytes`."""
        name, oid, literal = col.name, col.type_oid, col.missing_text
        assert literal is not None
        if self._send is None:
            return None, _failing(
                name,
                oid,
                type_name,
                lambda: DecodeError(
                    f"column {name} was added with a default after this tuple was written, "
                    "and this row decoder cannot read attmissingval",
                    lsn=lsn,
                    relation=qualified,
                    field=name,
                ),
            )
        try:
            info = registry.get(oid, column=name)
            if text_is_stored(info, registry):
                return self._ask(TEXT_OID, -1, literal), None
            base = base_type(info, registry)
            if base.output_src == "array_out":
                elem = base_type(registry.get(base.typelem), registry)
                if text_valued(elem):  # elements valued as their text
                    send = self._ask(TEXT_ARRAY_OID, -1, literal)
                    if send is None:
                        return None, None
                    return None, _snapshot_value(
                        send, registry.get(TEXT_ARRAY_OID), registry, name, type_name
                    )
            stored_elem = text_array_is_stored(info, registry)
            if stored_elem is not None:
                send = self._ask(TEXT_ARRAY_OID, -1, literal)
                if send is None:
                    return None, None
                stored = to_stored(send, registry.get(TEXT_ARRAY_OID), registry)
                at = _ARRAY_ELEMTYPE_AT
                return stored[:at] + U32.pack(stored_elem.oid) + stored[at + 4 :], None
            if text_valued(base) or not convertible(info, registry):
                # A type valued as its output text (the reg* family among them) reads
                # the element's text, as the snapshot reads it with ::text: a reg* text
                # does not always read back as its OID (OID 0 is `-`, which
                # text_regclass rejects; an overloaded operator prints as a name
                # regoperin finds ambiguous), and that text is the value anyway.
                send = self._ask(TEXT_OID, -1, literal)
                return None, None if send is None else self._as_text(
                    info, send, name, type_name, lsn, qualified, text_valued(base), as_bytes
                )
            send = self._ask(oid, col.typmod, literal)
            if send is None:
                return None, None
            if _has_jsonb(info, registry):
                return None, _snapshot_value(send, info, registry, name, type_name)
            return to_stored(send, info, registry), None
        except (DecodeError, UnknownTypeError) as exc:
            raise type(exc)(
                f"attmissingval {literal!r} of column {name}: {exc.message}",
                lsn=lsn,
                relation=qualified,
                field=name,
            ) from exc

    def _as_text(
        self,
        info: TypeInfo,
        text: bytes,
        name: str,
        type_name: str,
        lsn: int,
        qualified: str,
        valued_as_text: bool = False,
        as_bytes: bool = False,
    ) -> ColumnValue:
        """An unknown type's default, as the snapshot reads such a column (with `bytes`:
        its text as bytes); a type whose value is its output text (`valued_as_text`)
        reads that text."""
        if as_bytes:
            return ColumnValue.constant(
                ColumnCodec(name, info.oid, type_name, _no_value, _no_text, shared=False),
                text,
                bytes_text(text),
            )
        if valued_as_text:
            value = text.decode("utf-8")
            return ColumnValue.constant(
                ColumnCodec(name, info.oid, type_name, _no_value, _no_text, shared=False),
                value,
                value,
            )
        return _failing(
            name,
            info.oid,
            type_name,
            lambda: undecodable(info, lsn=lsn, relation=qualified, field=name),
        )


def _has_jsonb(info: TypeInfo, registry: TypeRegistry, depth: int = 0) -> bool:
    """Is jsonb the type, its base, or inside it (elements, fields, range subtype)?"""
    if depth > 32:
        raise DecodeError(f"type {info.name} nests too deep")
    info = base_type(info, registry)
    if info.oid == JSONB_OID:
        return True
    inner = [info.typelem if info.output_src == "array_out" else 0, info.range_subtype]
    inner += [f.typid for f in info.fields if not f.dropped]
    return any(_has_jsonb(registry.get(t), registry, depth + 1) for t in inner if t)


def _snapshot_value(
    send: bytes, info: TypeInfo, registry: TypeRegistry, name: str, type_name: str
) -> ColumnValue:
    """A send-format value of a type with jsonb inside, decoded as the snapshot does."""
    snap = snapshot_registry(registry)
    sinfo = snap.get(info.oid)
    stored = to_stored(send, sinfo, snap)
    codec = ColumnCodec(
        name,
        info.oid,
        type_name,
        lambda d: to_python(d, sinfo, snap, column=name),
        lambda d: to_text(d, sinfo, snap, column=name),
        shared=False,
    )
    return StoredValue(codec, stored)


def _failing(
    name: str, type_oid: int, type_name: str, error: Callable[[], Exception]
) -> ColumnValue:
    """A value whose reading raises `error()` (lazily, as a stored value's decoding
    would)."""

    def fail() -> object:
        raise error()

    def fail_text() -> str | None:
        raise error()

    return ColumnValue(name, type_oid, type_name, fail, fail_text)
