"""Unchanged-TOAST fill: an UPDATE's out-of-line values the WAL did not carry (issue 32).

An UPDATE that leaves a large value alone logs only its TOAST pointer
(`varatt_external`: `va_toastrelid`, `va_valueid`). TOAST values are immutable, so the
chunks with that chunk id in that TOAST relation *are* the value as of the update, for
as long as they physically exist. This stage finds them, between the reorder buffer and
the row decoder (`service.output.logical.PluginSink` consults it), so that every output
path, the Python row decoder and the native Avro encoder alike, resolves the pointer from
the change's TOAST mapping (`ReplayChange.toast`, chunk id -> chunk data as logged) and
never sees the difference between a filled value and one the WAL carried.

Receives: main-table heap changes of one transaction, in replay order, with the TOAST
chunks the reorder buffer reassembled for them (`_ToastState`, ReorderBufferToastAppendChunk).
Hands on, per change, the same mapping plus the chunk data of each pointer it lacked,
taken from:
1. `ToastValueCache`: values whose chunks pgcdc itself decoded in the WAL (learnt from
   the change that inserted them, keyed by `(va_toastrelid, va_valueid)`), bounded by
   `toast.cache_bytes`; least recently used values are *evicted*, never spilled (a miss
   costs one read of the TOAST table, which the slot's xmin hold keeps possible);
2. a `ToastSource` (the edge: `connectors.postgres.toast`), asked once per batch of up
   to `toast.batch_changes` changes, for every missing value of the batch at once.
   Without a source (`toast.unchanged = placeholder`) the stage only finds and reports
   the placeholders.
A pointer neither gives is left out: the row decoder then yields UNCHANGED_TOAST and the
plugin publishes `__debezium_unavailable_value`; `on_placeholder` is told of each (the
worker counts `pgcdc_toast_placeholders_total` and logs `toast_placeholder` with the
table and LSN).

Guarantees: the chunk data handed on is exactly the stored value (the row decoder checks
its size against the pointer and decompresses it as for logged chunks, detoast.c); order
and content of changes are untouched otherwise. Memory: the cache's bytes, plus the
values of one batch. Pure: no I/O except through `ToastSource`.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Protocol

from service.decode.events import ChangeKind, HeapChange
from service.output.api import RelationInfo
from service.schema.tabledef import TableDef
from service.types.varlena import VARTAG_ONDISK, ToastPointer

ToastKey = tuple[int, int]
"""(va_toastrelid, va_valueid): one TOAST value."""

# Every on-disk TOAST pointer starts with these two bytes (VARATT_IS_EXTERNAL_ONDISK):
# a tuple without them has none, whatever its layout (the cheap test per UPDATE).
_POINTER_HEAD = bytes((0x01, VARTAG_ONDISK))
_CANDIDATE_KINDS = frozenset((ChangeKind.INSERT, ChangeKind.UPDATE))
_INSERT = ChangeKind.INSERT


class ToastSource(Protocol):
    """Reads TOAST values that pgcdc did not see in the WAL (implemented at the edge)."""

    def fetch(self, wanted: Mapping[int, Sequence[int]], lsn: int) -> dict[ToastKey, bytes]:
        """For each TOAST relation OID, the chunk ids wanted: the chunk_data of each
        value still stored, concatenated in chunk_seq order. A value gone (vacuumed, its
        relation dropped) is absent from the result; `lsn` names the batch in errors."""
        ...


class PointerSource(Protocol):
    """What the fill needs of the row resolver (`service.types.rowdecode.HistoryRows`)."""

    def relation(self, change: HeapChange, top_xid: int) -> RelationInfo | None: ...

    def toast_pointers(
        self, relation: RelationInfo, change: HeapChange, top_xid: int
    ) -> tuple[TableDef, list[ToastPointer]]: ...

    def definition(self, relation: RelationInfo, change: HeapChange, top_xid: int) -> TableDef:
        """The table definition valid for `change` (what `toast_pointers` also gives)."""
        ...


@dataclass(slots=True, frozen=True)
class Placeholder:
    """A TOAST value that stays a placeholder: where, and which value."""

    table: str  # schema.table
    lsn: int  # the change's LSN
    toastrelid: int
    valueid: int


class ToastValueCache:
    """Recent TOAST values by `(va_toastrelid, va_valueid)`, at most `max_bytes` of chunk
    data; the least recently used are evicted (never spilled). `max_bytes = 0` keeps
    nothing. Invariant: `size` is the sum of the held values' lengths, <= `max_bytes`."""

    __slots__ = ("_values", "evicted", "hits", "max_bytes", "size")

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self._values: OrderedDict[ToastKey, bytes] = OrderedDict()
        self.size = 0
        self.hits = 0
        self.evicted = 0

    def get(self, key: ToastKey) -> bytes | None:
        data = self._values.get(key)
        if data is not None:
            self._values.move_to_end(key)
            self.hits += 1
        return data

    def put(self, key: ToastKey, data: bytes) -> None:
        if len(data) > self.max_bytes:
            return
        old = self._values.pop(key, None)
        if old is not None:
            self.size -= len(old)
        self._values[key] = data
        self.size += len(data)
        while self.size > self.max_bytes:
            _, gone = self._values.popitem(last=False)
            self.size -= len(gone)
            self.evicted += 1

    def __len__(self) -> int:
        return len(self._values)


class ToastFill:
    """The fill for one decoding session (see the module docstring)."""

    __slots__ = ("batch_changes", "cache", "fetched", "filled", "on_placeholder", "source")

    def __init__(
        self,
        source: ToastSource | None,
        cache: ToastValueCache,
        *,
        batch_changes: int = 256,
        on_placeholder: Callable[[Placeholder], None] | None = None,
    ) -> None:
        self.source = source
        self.cache = cache
        self.batch_changes = batch_changes
        self.on_placeholder = on_placeholder
        self.filled = 0  # values filled (cache or source)
        self.fetched = 0  # values read from the source

    @staticmethod
    def candidate(change: object) -> bool:
        """Whether `change` may hold a TOAST pointer: an INSERT or UPDATE whose new
        tuple has the pointer's first two bytes somewhere (no false negatives)."""
        if type(change) is not HeapChange or change.kind not in _CANDIDATE_KINDS:
            return False
        new = change.new_tuple
        return new is not None and _POINTER_HEAD in new.data

    def _learn_insert(
        self,
        rows: PointerSource,
        relation: RelationInfo,
        change: HeapChange,
        toast: Mapping[int, bytes],
        top_xid: int,
    ) -> bool:
        """Learn an INSERT's values without walking its tuple, when that is exact: an
        INSERT logs every out-of-line value it stores, a copied one too
        (toast_tuple_init detoasts it and toast_save_datum stores it anew), all in its
        table's own TOAST relation (toast_save_datum: va_toastrelid), so the chunks held
        for it are its values. False (nothing learnt) when the table has no TOAST
        relation, or more are held than it has columns: a multi-insert's rows share the
        chunks of all of them (ReorderBufferToastReplace resets after the last), and
        the walk learns only each row's own."""
        table = rows.definition(relation, change, top_xid)
        toast_relid = table.toast_relid
        if not toast_relid or len(toast) > len(table.columns):
            return False
        put = self.cache.put
        for valueid, data in toast.items():
            put((toast_relid, valueid), data)
        return True

    def fill(
        self,
        rows: PointerSource,
        top_xid: int,
        batch: Sequence[tuple[HeapChange, Mapping[int, bytes]]],
    ) -> list[Mapping[int, bytes]]:
        """The TOAST mapping each change of `batch` is to be decoded with: its own chunks,
        plus the values of its pointers it lacked that the cache or one read of the
        source found. Values a change carried are learnt into the cache first."""
        cache = self.cache
        plans: list[tuple[HeapChange, str, list[ToastPointer]] | None] = []
        wanted: dict[int, list[int]] = {}
        found: dict[ToastKey, bytes] = {}
        for change, toast in batch:
            relation = rows.relation(change, top_xid)
            if relation is None:
                plans.append(None)
                continue
            if (
                toast
                and change.kind is _INSERT
                and self._learn_insert(rows, relation, change, toast, top_xid)
            ):
                plans.append(None)
                continue
            table, pointers = rows.toast_pointers(relation, change, top_xid)
            missing: list[ToastPointer] = []
            for ptr in pointers:
                key = (ptr.va_toastrelid, ptr.va_valueid)
                data = toast.get(ptr.va_valueid)
                if data is not None:
                    cache.put(key, data)  # seen in the WAL: a later UPDATE may need it
                    continue
                missing.append(ptr)
                if key in found:
                    continue
                hit = cache.get(key)
                if hit is not None:
                    found[key] = hit
                else:
                    ids = wanted.setdefault(ptr.va_toastrelid, [])
                    if ptr.va_valueid not in ids:
                        ids.append(ptr.va_valueid)
            plans.append((change, f"{table.schema}.{table.name}", missing) if missing else None)
        if wanted and self.source is not None:
            lsn = next(c.lsn for c, _ in batch)
            got = self.source.fetch(wanted, lsn)
            self.fetched += len(got)
            for key, data in got.items():
                found[key] = data
                cache.put(key, data)
        out: list[Mapping[int, bytes]] = []
        for (change, toast), plan in zip(batch, plans, strict=True):
            if plan is None:
                out.append(toast)
                continue
            merged = dict(toast)
            _, table_name, missing = plan
            for ptr in missing:
                data = found.get((ptr.va_toastrelid, ptr.va_valueid))
                if data is not None:
                    merged[ptr.va_valueid] = data
                    self.filled += 1
                elif self.on_placeholder is not None:
                    self.on_placeholder(
                        Placeholder(table_name, change.lsn, ptr.va_toastrelid, ptr.va_valueid)
                    )
            out.append(MappingProxyType(merged))
        return out
