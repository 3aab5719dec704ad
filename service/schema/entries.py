"""Schema history entries: what a transaction recorded, and who sees it from when.

Internal to the schema history stage (`service.schema.history`, and its live-catalog
fallback `service.schema.refresh`). Every fact the history keeps is an `Owned` entry:
a table shape (`Version`), a relfilenode mapping (`RelMapping`) or an smgr CREATE
(`Create`). `pick` answers which entry a change of a given transaction at a given LSN
sees, as a historic snapshot would (HeapTupleSatisfiesHistoricMVCC's visibility rule,
reduced to LSNs): the transaction's own newest entry, else the newest committed at or
before the LSN. `XactState` gathers what one xid did until its commit or abort.

Guarantees: entries compare by identity (`eq=False`): two equal records are still
distinct facts, and `drop_entry` removes exactly the one given. `prune_superseded` keeps
every entry that can still answer a lookup at or after its LSN bound. Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TypeVar

from service.decode.events import ClassRowEvent, ClassRowLostEvent
from service.schema.tabledef import TableDef


@dataclass(slots=True, eq=False, kw_only=True)
class Owned:
    """Something a transaction recorded, and who sees it from when.

    Pending (`commit_lsn` None): visible only to the writer's top-level transaction
    (`top`), from `own_lsn`. Committed: to the transaction's surviving xids (`xids`)
    from `own_lsn`, and to everyone from `commit_lsn`.
    """

    xid: int
    top: int
    own_lsn: int
    commit_lsn: int | None = None
    xids: frozenset[int] = frozenset()

    def owned_by(self, xid: int, top: int) -> bool:
        return (self.commit_lsn is None and self.top == top) or xid in self.xids


@dataclass(slots=True, eq=False, kw_only=True)
class Version(Owned):
    """A shape of table `oid`: its definition, or None once dropped."""

    oid: int
    table: TableDef | None


@dataclass(slots=True, eq=False, kw_only=True)
class RelMapping(Owned):
    """Relfilenode `key` holds table `oid`'s heap (or its toast, `toast`)."""

    key: tuple[int, int]
    oid: int
    toast: bool


@dataclass(slots=True, eq=False, kw_only=True)
class Create(Owned):
    """An smgr CREATE of a main fork (`own_lsn` is its LSN): changes of its own
    transaction into it are rewrite output unless a mapping visible to them names it.

    `unresolved`: named by no message, and no pg_class row the decoded WAL could
    rebuild names it (`service.schema.pgclass`: a row lost to a page never seen whole).
    Its rows may be a table's real rows, so they are UNKNOWN (an error naming the LSN
    and relfilenode), never silently dropped as rewrite output."""

    key: tuple[int, int]
    unresolved: bool = False
    # (LSN, table oid): from that LSN on, the creating transaction's changes into it
    # are that table's (its toast's, with `swap_toast`); before it, rewrite output. Read
    # off the pg_class row that first points a known table at it
    # (`SchemaHistory._find_swaps`). Oid 0: no definition to decode with, so UNKNOWN.
    swap: tuple[int, int] | None = None
    swap_toast: bool = False
    # How many of its transaction's pg_class rows could not be rebuilt (for the log).
    lost: int = 0
    # The swap's table moved on to another relfilenode before the commit: only the
    # creating transaction's own changes are the table's (no mapping for everyone).
    superseded: bool = False


_E = TypeVar("_E", bound=Owned)


def pick(entries: Iterable[_E], lsn: int, xid: int | None, top: int | None) -> _E | None:
    """The entry a change of `xid` (top-level `top`) at `lsn` sees, if any.

    A transaction's own entry (the newest by `own_lsn`) beats every committed one: its
    DDL holds the table's lock until commit, so nothing else changes the table between.
    Otherwise the newest entry committed at or before `lsn`.
    """
    own: _E | None = None
    other: _E | None = None
    for e in entries:
        if xid is not None and top is not None and e.owned_by(xid, top):
            if e.own_lsn <= lsn and (own is None or e.own_lsn >= own.own_lsn):
                own = e
        elif (
            e.commit_lsn is not None
            and e.commit_lsn <= lsn
            and (other is None or e.commit_lsn >= (other.commit_lsn or 0))
        ):
            other = e
    return own if own is not None else other


@dataclass(slots=True)
class XactState:
    """What one xid (top-level or sub) did that matters to the history."""

    entries: list[Owned] = field(default_factory=list)
    named: set[tuple[int, int]] = field(default_factory=set)
    truncated: set[int] = field(default_factory=set)
    relcache: set[int] = field(default_factory=set)
    relcache_all: bool = False
    catalog_changes: bool = False
    ddl_messages: int = 0
    # The pg_class rows this xid wrote, in WAL order, and those that could not be
    # rebuilt off the WAL (`service.schema.pgclass`).
    class_rows: list[ClassRowEvent] = field(default_factory=list)
    class_lost: list[ClassRowLostEvent] = field(default_factory=list)


Key = tuple[int, int]
MapKey = tuple[int, bool]  # (oid, toast)


def drop_entry(entries: list[_E] | None, entry: Owned) -> None:
    """Remove `entry` by identity (entries are distinct records even when equal)."""
    if entries is not None:
        entries[:] = [e for e in entries if e is not entry]


def prune_superseded(entries: list[_E], before_lsn: int) -> None:
    """Keep pending entries, those committed at or after `before_lsn`, and the newest one
    committed before it (still in force at `before_lsn`)."""
    old = [e for e in entries if e.commit_lsn is not None and e.commit_lsn < before_lsn]
    if len(old) <= 1:
        return
    newest = max(old, key=lambda e: e.commit_lsn or 0)
    entries[:] = [e for e in entries if e is newest or e not in old]


def only_tombstone(versions: list[Version], before_lsn: int) -> bool:
    """A table dropped before `before_lsn`, with nothing pending or later."""
    return (
        len(versions) == 1
        and versions[0].table is None
        and versions[0].commit_lsn is not None
        and versions[0].commit_lsn < before_lsn
    )
