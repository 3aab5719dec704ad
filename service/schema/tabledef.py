"""Table definitions: what the catalog says a user table looks like.

The value types shared by the catalog stage (`connectors.postgres.catalog`, which reads them
with SQL), the schema history (`service.schema.history`, which versions them by LSN)
and the row decoder (`service.types.rowdecode`, which deforms tuples with them):

- `ColumnDef`: one `pg_attribute` row (attnum > 0), dropped columns included;
- `TableDef`: one user table (pg_class, its toast table, replica identity, columns);
- `CatalogSnapshot`: every user table read under one MVCC snapshot, with that
  snapshot's xmin/xmax/xip and the WAL position it was read at;
- `LiveCatalog`: the protocol through which the history asks the live catalog.

Guarantees: the types are immutable, `to_json`/`from_json` round-trip (the shape of
the DDL capture's messages and of `connectors/postgres/sql/table_def.sql`), and a malformed
document raises the `KeyError`/`ValueError`/`TypeError` of the field at fault (the
history turns it into `DecodeError` with the LSN). Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from service.snapbuild.snapbuild import xid_precedes


@dataclass(slots=True, frozen=True)
class ColumnDef:
    """One `pg_attribute` row of a table (attnum > 0), dropped columns included.

    Dropped columns keep `attlen`/`attbyval`/`attalign` (their type is 0): old tuples
    still hold their bytes, so the deformer needs the layout.
    """

    attnum: int
    name: str
    type_oid: int
    typmod: int
    not_null: bool
    dropped: bool
    generated: str  # attgenerated: "" or "s" (stored); PG18 adds "v" (virtual)
    attlen: int
    attbyval: bool
    attalign: str
    attstorage: str
    # atthasmissing: rows older than ADD COLUMN ... DEFAULT lack the attribute and take
    # `missing_text` (attmissingval's text form, a one-element array literal) instead.
    has_missing: bool = False
    missing_text: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "attnum": self.attnum,
            "name": self.name,
            "type_oid": self.type_oid,
            "typmod": self.typmod,
            "notnull": self.not_null,
            "dropped": self.dropped,
            "generated": self.generated,
            "attlen": self.attlen,
            "attbyval": self.attbyval,
            "attalign": self.attalign,
            "attstorage": self.attstorage,
            "has_missing": self.has_missing,
            "missing_text": self.missing_text,
        }

    @classmethod
    def from_json(cls, doc: Mapping[str, Any]) -> ColumnDef:
        return cls(
            attnum=int(doc["attnum"]),
            name=str(doc["name"]),
            type_oid=int(doc["type_oid"]),
            typmod=int(doc["typmod"]),
            not_null=bool(doc["notnull"]),
            dropped=bool(doc["dropped"]),
            generated=str(doc["generated"] or ""),
            attlen=int(doc["attlen"]),
            attbyval=bool(doc["attbyval"]),
            attalign=str(doc["attalign"]),
            attstorage=str(doc["attstorage"]),
            has_missing=bool(doc.get("has_missing", False)),
            missing_text=doc.get("missing_text"),
        )


@dataclass(slots=True, frozen=True)
class TableDef:
    """A user table as the catalog describes it at some LSN.

    `tablespace` is resolved (never 0: the database default is substituted), so that
    (`tablespace`, `relfilenode`) matches the WAL's RelFileLocator. The toast table
    lives in the same tablespace. `relfilenode` is 0 for a partitioned table (no
    storage); `toast_relid`/`toast_relfilenode` are 0 without a toast table.
    `key_attnums` are the replica-identity index columns when REPLICA IDENTITY USING
    INDEX, else the primary key's, in index order (empty if neither).
    """

    oid: int
    relfilenode: int
    tablespace: int
    toast_relid: int
    toast_relfilenode: int
    schema: str
    name: str
    relkind: str
    replica_identity: str
    columns: tuple[ColumnDef, ...]
    key_attnums: tuple[int, ...]

    @property
    def qualified_name(self) -> str:
        return f"{self.schema}.{self.name}"

    def to_json(self) -> dict[str, Any]:
        return {
            "oid": self.oid,
            "relfilenode": self.relfilenode,
            "spcnode": self.tablespace,
            "toast_relid": self.toast_relid,
            "toast_relfilenode": self.toast_relfilenode,
            "schema": self.schema,
            "name": self.name,
            "relkind": self.relkind,
            "replica_identity": self.replica_identity,
            "columns": [c.to_json() for c in self.columns],
            "key": list(self.key_attnums),
        }

    @classmethod
    def from_json(cls, doc: Mapping[str, Any]) -> TableDef:
        """Parse the JSON of a DDL message or of the catalog stage (same shape)."""
        return cls(
            oid=int(doc["oid"]),
            relfilenode=int(doc["relfilenode"] or 0),
            tablespace=int(doc["spcnode"]),
            toast_relid=int(doc["toast_relid"] or 0),
            toast_relfilenode=int(doc["toast_relfilenode"] or 0),
            schema=str(doc["schema"]),
            name=str(doc["name"]),
            relkind=str(doc["relkind"]),
            replica_identity=str(doc["replica_identity"]),
            columns=tuple(ColumnDef.from_json(c) for c in doc["columns"]),
            key_attnums=tuple(int(a) for a in doc["key"] or ()),
        )


@dataclass(slots=True, frozen=True)
class CatalogSnapshot:
    """The catalog stage's initial read: all user tables, under one MVCC snapshot.

    `xmin`/`xmax`/`xip` are `pg_current_snapshot()` reduced to 32-bit xids; `lsn` is
    `pg_current_wal_lsn()` read in the same transaction. `ddl_capture` says whether the
    DDL capture of `pgcdc setup` (both event triggers, enabled) was installed then.
    """

    db_oid: int
    lsn: int
    xmin: int
    xmax: int
    xip: frozenset[int]
    tables: tuple[TableDef, ...]
    ddl_capture: bool = False

    def xid_visible(self, xid: int) -> bool:
        """Is a transaction's effect visible in this snapshot (XidInMVCCSnapshot, negated)?"""
        if xid_precedes(xid, self.xmin):
            return True
        return xid_precedes(xid, self.xmax) and xid not in self.xip


class LiveCatalog(Protocol):
    """What the history asks the live catalog (implemented in `connectors.postgres.catalog`)."""

    def table(self, oid: int) -> TableDef | None:
        """The current definition of user table `oid`, or None if it is not one."""

    def invalidate(self, oid: int | None = None) -> None:
        """Forget cached facts about `oid` (all when None)."""
