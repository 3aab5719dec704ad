"""Rows as the plugins see them: raw tuples decoded against the schema history.

Implements `service.logical.RowResolver`. Receives every decoder event in WAL order
(forwarded to the `SchemaHistory`), and at replay time turns a `HeapChange` into a
`RelationInfo` plus `ColumnValue`s, using the table definition the history says was
valid for that change's transaction at that LSN, and the type decoders of
`service.types`.

Guarantees:
- Rewrite output (heap inserts into a relfilenode its own transaction created before
  any definition named it) is never emitted: `relation` returns None for it.
- A change of an unknown relfilenode that carries no tuple data (catalog updates and
  deletes, which wal_level=logical logs without tuples) is dropped, as PostgreSQL drops
  changes of relations that are not logically logged. One that carries data is a
  SchemaMismatchError naming the relfilenode and LSN: pgcdc never guesses a table.
- A tuple with more attributes than the definition is a SchemaMismatchError naming the
  table and LSN (raised by the deformer). Values are decoded lazily, per column.
- A TOAST pointer whose chunks were not logged (an UPDATE that left the value alone)
  becomes UNCHANGED_TOAST, never a wrong or empty value.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from service.errors import SchemaMismatchError, UnknownTypeError
from service.events import HeapChange, RawTuple
from service.plugin_api import (
    UNCHANGED_TOAST,
    ColumnCodec,
    ColumnMeta,
    ColumnValue,
    RelationInfo,
    StoredValue,
)
from service.schema_history import Classification, RelClass, SchemaHistory
from service.tabledef import TableDef
from service.types.convert import simple_functions, to_python, to_text
from service.types.deform import Column, Layout, compile_layout, deform, deform_heap
from service.types.registry import TypeInfo, TypeRegistry
from service.types.varlena import ToastPointer, Unchanged, resolve_toast

_CLASS_CACHE_MAX = 4096

TypeSource = Callable[[Sequence[int]], TypeRegistry]
"""Loads type facts for these OIDs (and their dependencies) and returns the registry."""

TypeNames = Callable[[Sequence[int]], Mapping[int, str]]
"""format_type(oid, NULL) for these OIDs."""


def _missing_text(literal: str | None) -> str | None:
    """attmissingval is shown as a one-element array literal: `{value}` or `{"va lue"}`."""
    if literal is None or len(literal) < 2:
        return None
    inner = literal[1:-1]
    if inner.startswith('"') and inner.endswith('"'):
        inner = inner[1:-1].replace('\\"', '"').replace("\\\\", "\\")
    return inner


@dataclass(slots=True)
class _Out:
    """How one live column of a definition is handed on (dropped columns have none).

    `null`, `unchanged` and `missing` are shared by every row: they are constants.
    `missing` is set for a column added with a default after some tuples were written
    (attnum beyond such a tuple's natts). `simple`: the codec's functions never raise
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
    layout: Layout | None  # compile_layout(columns): None leaves the tuple to deform()
    outs: list[_Out | None]  # parallel to `columns`; None for dropped columns
    registry: TypeRegistry
    qualified: str


class HistoryRows:
    """Schema history + type decoders behind the RowResolver interface."""

    def __init__(
        self,
        history: SchemaHistory,
        types: TypeSource,
        type_names: TypeNames,
        *,
        unknown_as_text: bool = False,
    ) -> None:
        self.history = history
        self._types = types
        self._type_names = type_names
        self._names: dict[int, str] = {}
        self._unknown_as_text = unknown_as_text
        # id(TableDef) -> its plan (which keeps the TableDef alive)
        self._plans: dict[int, _Plan] = {}
        # Classifications per (relfilenode, top xid): (lo, hi, answer), valid for change
        # LSNs in [lo, hi) while the history is unchanged. Every change to the history
        # comes through apply()/assign_child(), which empty the cache (a HeapChange
        # changes nothing in the history, so a transaction's replay keeps it).
        self._classes: dict[tuple[int, int, int, int], tuple[int, int, Classification]] = {}
        # The last change relation() answered for, so row() needs no second lookup:
        # (change, top xid, plan).
        self._last: tuple[HeapChange, int, _Plan] | None = None

    # --- RowResolver ----------------------------------------------------------------

    def apply(self, event: Any) -> None:
        if type(event) is HeapChange:
            return  # SchemaHistory.apply: a heap change has no schema effect
        self.history.apply(event)
        self._classes.clear()
        self._last = None

    def assign_child(self, top: int, sub: int) -> None:
        self.history.assign_child(top, sub)
        self._classes.clear()
        self._last = None

    def _classify(self, change: HeapChange, top_xid: int) -> Classification:
        loc, lsn = change.locator, change.lsn
        key = (loc.spc_oid, loc.db_oid, loc.rel_number, top_xid)
        hit = self._classes.get(key)
        if hit is not None and hit[0] <= lsn < hit[1]:
            return hit[2]
        cls, lo, hi = self.history.classify_span(loc, top_xid, lsn)
        if len(self._classes) > _CLASS_CACHE_MAX:
            self._classes.clear()
        self._classes[key] = (lo, hi, cls)
        return cls

    def relation(self, change: HeapChange, top_xid: int) -> RelationInfo | None:
        cls = self._classify(change, top_xid)
        match cls.kind:
            case RelClass.TABLE:
                assert cls.table is not None
                plan = self._plan(cls.table, change.lsn)
                self._last = (change, top_xid, plan)
                return plan.rel
            case RelClass.REWRITE:
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
                    lsn=change.lsn, xid=change.xid,
                    relation=f"relfilenode {loc.rel_number}",
                )
            case _:
                raise SchemaMismatchError(f"unexpected classification {cls.kind}",
                                          lsn=change.lsn)

    def relations_by_oid(self, relids: Sequence[int], lsn: int, xid: int) -> list[RelationInfo]:
        out = []
        for oid in relids:
            table = self.history.by_oid(oid, lsn, xid)
            if table is not None:
                out.append(self._plan(table, lsn).rel)
        return out

    def row(
        self, relation: RelationInfo, change: HeapChange, new: bool, toast: Mapping[int, bytes],
        top_xid: int,
    ) -> Sequence[ColumnValue] | None:
        raw = change.new_tuple if new else change.old_tuple
        if raw is None:
            return None
        last = self._last
        if last is not None and last[0] is change and last[1] == top_xid \
                and last[2].rel is relation:
            # by_oid(relation.oid, lsn, top_xid) is the very pick classify made for it
            return self._decode(last[2], raw, toast, change.lsn)
        table = self.history.by_oid(relation.oid, change.lsn, top_xid)
        if table is None:
            raise SchemaMismatchError("table definition vanished between lookups",
                                      lsn=change.lsn, relation=f"{relation.schema}.{relation.name}")
        return self._decode(self._plan(table, change.lsn), raw, toast, change.lsn)

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
        key_names = {c.attnum: c.name for c in live}
        metas = []
        for c in live:
            info = registry.get(c.type_oid, column=c.name)
            kind = {"e": "e", "d": "d", "c": "c", "r": "r"}.get(info.typtype, "b")
            if info.typelem and info.typlen == -1 and info.output_src == "array_out":
                kind = "a"
            metas.append(ColumnMeta(
                name=c.name, attnum=c.attnum, type_oid=c.type_oid,
                type_name=self._names.get(c.type_oid, info.name), typmod=c.typmod,
                notnull=c.not_null, kind=kind, elem_type_oid=info.typelem,
                enum_labels=tuple(info.enum_labels.values()),
            ))
        rel = RelationInfo(
            oid=table.oid, schema=table.schema, name=table.name,
            replica_identity=table.replica_identity,
            key_columns=tuple(key_names[a] for a in table.key_attnums if a in key_names),
            columns=tuple(metas), defined_at=lsn,
        )
        columns = [
            Column(c.attnum, c.name, c.type_oid, c.typmod, c.attlen, c.attbyval, c.attalign,
                   c.not_null, c.dropped, None)
            for c in table.columns
        ]
        plan = _Plan(rel, table, columns, compile_layout(columns), [], registry,
                     f"{table.schema}.{table.name}")
        self._prepare(plan, registry)
        self._plans[id(table)] = plan
        return plan

    def _prepare(self, plan: _Plan, registry: TypeRegistry) -> None:
        """Resolve each live column's codec against `registry` (as `_decode` did per row:
        registry.get, then to_python/to_text through the type's output function)."""
        outs: list[_Out | None] = []
        metas = iter(plan.rel.columns)
        for col, cdef in zip(plan.columns, plan.table.columns, strict=True):
            if col.dropped:
                outs.append(None)
                continue
            meta = next(metas)
            info = registry.get(col.typid, column=col.name)
            fns = simple_functions(info, registry)
            if fns is not None:
                codec = ColumnCodec(col.name, col.typid, meta.type_name, fns[0], fns[1])
            else:
                codec = ColumnCodec(col.name, col.typid, meta.type_name, _no_value, _no_text)
            missing = None
            if cdef.has_missing:
                text = _missing_text(cdef.missing_text)
                missing = ColumnValue.constant(codec, text, text)
            outs.append(_Out(
                col.attnum, codec, info,
                ColumnValue.constant(codec, None, None),
                ColumnValue.constant(codec, UNCHANGED_TOAST, None),
                missing, fns is not None,
            ))
        plan.outs = outs
        plan.registry = registry

    def _decode(
        self, plan: _Plan, raw: RawTuple, toast: Mapping[int, bytes], lsn: int,
    ) -> list[ColumnValue]:
        qualified = plan.qualified
        try:
            layout = plan.layout
            datums = deform_heap(raw, plan.columns, layout, relation=qualified) \
                if layout is not None else deform(raw, plan.columns, relation=qualified)
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
            # (attnum > natts always deforms to None: the deformer's `missing` is unset)
            stored: bytes | Unchanged
            if isinstance(datum, ToastPointer):
                stored = resolve_toast(datum, toast)
                if isinstance(stored, Unchanged):
                    append(o.unchanged)
                    continue
            else:
                stored = datum
            append(StoredValue(o.codec if o.simple else self._bound(o, registry, lsn,
                                                                     qualified), stored))
        return out

    def _bound(self, o: _Out, registry: TypeRegistry, lsn: int, qualified: str) -> ColumnCodec:
        """A codec for one value of a type that needs the registry (arrays, composites,
        ranges, enums, unknown types): UnknownTypeError gets the change's LSN."""
        name, info, as_text = o.codec.name, o.info, self._unknown_as_text

        def value(d: bytes) -> object:
            try:
                return to_python(d, info, registry, column=name, unknown_as_text=as_text)
            except UnknownTypeError as exc:
                raise UnknownTypeError(exc.message, lsn=lsn, relation=qualified,
                                       field=name) from exc

        def text(d: bytes) -> str | None:
            try:
                return to_text(d, info, registry, column=name, unknown_as_text=as_text)
            except UnknownTypeError as exc:
                raise UnknownTypeError(exc.message, lsn=lsn, relation=qualified,
                                       field=name) from exc

        return ColumnCodec(name, o.codec.type_oid, o.codec.type_name, value, text, shared=False)


def _no_value(datum: object) -> object:
    raise AssertionError("a bound codec converts this column's values")


def _no_text(datum: object) -> str | None:
    raise AssertionError("a bound codec converts this column's values")
