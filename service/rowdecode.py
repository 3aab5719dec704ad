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
from typing import Any

from service.errors import SchemaMismatchError, UnknownTypeError
from service.events import HeapChange, RawTuple
from service.plugin_api import UNCHANGED_TOAST, ColumnMeta, ColumnValue, RelationInfo
from service.schema_history import RelClass, SchemaHistory, TableDef
from service.types.convert import to_python, to_text
from service.types.deform import Column, deform
from service.types.registry import TypeInfo, TypeRegistry
from service.types.varlena import ToastPointer, Unchanged, resolve_toast

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
        # id(TableDef) -> (RelationInfo, columns for the deformer, TableDef kept alive)
        self._shapes: dict[int, tuple[RelationInfo, list[Column], TableDef]] = {}

    # --- RowResolver ----------------------------------------------------------------

    def apply(self, event: Any) -> None:
        self.history.apply(event)

    def assign_child(self, top: int, sub: int) -> None:
        self.history.assign_child(top, sub)

    def relation(self, change: HeapChange, top_xid: int) -> RelationInfo | None:
        cls = self.history.classify(change.locator, top_xid, change.lsn)
        match cls.kind:
            case RelClass.TABLE:
                assert cls.table is not None
                return self._shape(cls.table, change.lsn)[0]
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
                out.append(self._shape(table, lsn)[0])
        return out

    def row(
        self, relation: RelationInfo, change: HeapChange, new: bool, toast: Mapping[int, bytes],
        top_xid: int,
    ) -> Sequence[ColumnValue] | None:
        raw = change.new_tuple if new else change.old_tuple
        if raw is None:
            return None
        table = self.history.by_oid(relation.oid, change.lsn, top_xid)
        if table is None:
            raise SchemaMismatchError("table definition vanished between lookups",
                                      lsn=change.lsn, relation=f"{relation.schema}.{relation.name}")
        info, columns, _ = self._shape(table, change.lsn)
        return self._decode(info, table, columns, raw, toast, change.lsn)

    # --- internals ------------------------------------------------------------------

    def _shape(self, table: TableDef, lsn: int) -> tuple[RelationInfo, list[Column], TableDef]:
        cached = self._shapes.get(id(table))
        if cached is not None and cached[2] is table:
            return cached
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
        shape = (rel, columns, table)
        self._shapes[id(table)] = shape
        return shape

    def _decode(
        self, rel: RelationInfo, table: TableDef, columns: list[Column], raw: RawTuple,
        toast: Mapping[int, bytes], lsn: int,
    ) -> list[ColumnValue]:
        qualified = f"{table.schema}.{table.name}"
        try:
            datums = deform(raw, columns, relation=qualified)
        except SchemaMismatchError as exc:
            raise SchemaMismatchError(exc.message, lsn=lsn, relation=qualified) from exc
        registry = self._types([])
        out: list[ColumnValue] = []
        metas = iter(rel.columns)
        for col, datum, cdef in zip(columns, datums, table.columns, strict=True):
            if col.dropped:
                continue
            meta = next(metas)
            info = registry.get(col.typid, column=col.name)
            if col.attnum > raw.natts and cdef.has_missing:
                text = _missing_text(cdef.missing_text)
                out.append(ColumnValue(col.name, col.typid, meta.type_name,
                                       _const(text), _const(text)))
                continue
            out.append(self._column(col.name, col.typid, meta.type_name, datum, info,
                                    registry, toast, lsn, qualified))
        return out

    def _column(
        self, name: str, typid: int, type_name: str, datum: object, info: TypeInfo,
        registry: TypeRegistry, toast: Mapping[int, bytes], lsn: int, qualified: str,
    ) -> ColumnValue:
        if isinstance(datum, ToastPointer):
            datum = resolve_toast(datum, toast)
        if datum is None:
            return ColumnValue(name, typid, type_name, lambda: None, lambda: None)
        if isinstance(datum, Unchanged):
            return ColumnValue(name, typid, type_name, lambda: UNCHANGED_TOAST, lambda: None)
        assert isinstance(datum, bytes)
        as_text = self._unknown_as_text

        def value(d: bytes = datum) -> object:
            try:
                return to_python(d, info, registry, column=name, unknown_as_text=as_text)
            except UnknownTypeError as exc:
                raise UnknownTypeError(exc.message, lsn=lsn, relation=qualified,
                                       field=name) from exc

        def text(d: bytes = datum) -> str | None:
            try:
                return to_text(d, info, registry, column=name, unknown_as_text=as_text)
            except UnknownTypeError as exc:
                raise UnknownTypeError(exc.message, lsn=lsn, relation=qualified,
                                       field=name) from exc

        return ColumnValue(name, typid, type_name, value, text)


def _const(text: str | None) -> Callable[[], str | None]:
    return lambda: text
