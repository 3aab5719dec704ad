"""Builders for schema-history tests: events, table definitions and a fake live catalog."""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace

from service.decode.events import (
    AbortEvent,
    ChangeKind,
    ClassRowEvent,
    ClassRowLostEvent,
    CommitEvent,
    HeapChange,
    Invalidation,
    MessageEvent,
    NewCidEvent,
    RunningXactsEvent,
    SmgrCreateEvent,
    TruncateEvent,
)
from service.schema.tabledef import ColumnDef, TableDef
from service.wal.record import RelFileLocator

DB = 16384
SPC = 1663


def col(attnum: int, name: str, type_oid: int = 23, dropped: bool = False) -> ColumnDef:
    return ColumnDef(
        attnum=attnum,
        name=name,
        type_oid=0 if dropped else type_oid,
        typmod=-1,
        not_null=False,
        dropped=dropped,
        generated="",
        attlen=4,
        attbyval=True,
        attalign="i",
        attstorage="p",
    )


def table(oid: int, relfilenode: int, ncols: int = 1, toast: tuple[int, int] = (0, 0)) -> TableDef:
    return TableDef(
        oid=oid,
        relfilenode=relfilenode,
        tablespace=SPC,
        toast_relid=toast[0],
        toast_relfilenode=toast[1],
        schema="public",
        name=f"t{oid}",
        relkind="r",
        replica_identity="d",
        columns=tuple(col(i + 1, f"c{i + 1}") for i in range(ncols)),
        key_attnums=(1,),
    )


def loc(relfilenode: int, db: int = DB) -> RelFileLocator:
    return RelFileLocator(SPC, db, relfilenode)


def ddl(lsn: int, xid: int, t: TableDef) -> MessageEvent:
    payload = json.dumps({"v": 1, "op": "table", "tag": "ALTER TABLE", "def": t.to_json()})
    return MessageEvent(lsn, xid, DB, True, "pgcdc.ddl", payload.encode())


def drop(lsn: int, xid: int, oid: int) -> MessageEvent:
    payload = json.dumps({"v": 1, "op": "drop", "oid": oid, "schema": "public", "name": "x"})
    return MessageEvent(lsn, xid, DB, True, "pgcdc.ddl", payload.encode())


def relcache(oid: int) -> Invalidation:
    return Invalidation(kind=-2, db_oid=DB, rel_oid=oid, raw=b"")


def commit(
    lsn: int, xid: int, subxids: tuple[int, ...] = (), invals: tuple[Invalidation, ...] = ()
) -> CommitEvent:
    return CommitEvent(
        lsn=lsn,
        end_lsn=lsn + 8,
        xid=xid,
        commit_time=0,
        xinfo=1 if invals else 0,
        db_oid=DB if invals else 0,
        ts_oid=SPC,
        subxids=subxids,
        dropped_rels=(),
        invalidations=invals,
        twophase_xid=None,
        gid=None,
        origin_lsn=None,
        origin_time=None,
        origin=None,
        prepared=False,
    )


def abort(lsn: int, xid: int, subxids: tuple[int, ...] = ()) -> AbortEvent:
    return AbortEvent(lsn, lsn + 8, xid, 0, 0, 0, subxids, (), None, None, None, False)


def create(lsn: int, xid: int, relfilenode: int) -> SmgrCreateEvent:
    return SmgrCreateEvent(lsn, xid, loc(relfilenode), 0)


def class_row(
    lsn: int, xid: int, oid: int, relfilenode: int, *, kind: str = "r", rewrite: int = 0
) -> ClassRowEvent:
    """The pg_class row of `oid` as written at `lsn`: pointing at `relfilenode`."""
    return ClassRowEvent(lsn, xid, DB, oid, relfilenode, SPC, 0, kind, rewrite)


def class_lost(lsn: int, xid: int) -> ClassRowLostEvent:
    return ClassRowLostEvent(lsn, xid, DB, 0, 1, "compressed against an unseen row")


def truncate(lsn: int, xid: int, *relids: int) -> TruncateEvent:
    return TruncateEvent(lsn, xid, DB, tuple(relids), False, False)


def new_cid(lsn: int, xid: int) -> NewCidEvent:
    return NewCidEvent(lsn, xid, RelFileLocator(SPC, DB, 1259), 0, 1, 0, 0, 0)


def running(lsn: int, oldest: int, next_xid: int) -> RunningXactsEvent:
    return RunningXactsEvent(lsn, next_xid, oldest, next_xid - 1, (), (), False)


def insert(lsn: int, xid: int, relfilenode: int) -> HeapChange:
    return HeapChange(lsn, xid, ChangeKind.INSERT, loc(relfilenode), 0, 1, None, None, False)


@dataclass
class FakeCatalog:
    """An in-memory `LiveCatalog` (pure logic test double; the real one is tested
    against PostgreSQL in tests/integration and tests/connectors)."""

    tables: dict[int, TableDef] = field(default_factory=dict)
    invalidated: list[int | None] = field(default_factory=list)

    def put(self, t: TableDef) -> None:
        self.tables[t.oid] = t

    def move(self, oid: int, relfilenode: int, toast_relfilenode: int | None = None) -> None:
        new = replace(self.tables[oid], relfilenode=relfilenode)
        if toast_relfilenode is not None:
            new = replace(new, toast_relfilenode=toast_relfilenode)
        self.put(new)

    def table(self, oid: int) -> TableDef | None:
        return self.tables.get(oid)

    def invalidate(self, oid: int | None = None) -> None:
        self.invalidated.append(oid)
