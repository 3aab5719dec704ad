"""Schema history: committing relfilenode owners, and the live-catalog fallback.

Part of the schema history stage: `CatalogFallback` is a collaborator that
`service.schema.history.SchemaHistory` holds, and the history owns the state and the
module contract. The history hands it, at construction, the `LiveCatalog` (or None)
and what it needs of the history itself: a reader of its committed versions by oid,
its two writers (`record`, `record_mappings`) and whether the DDL capture is installed.
This module does not import the history's; it reads and writes the history only
through those.

Receives, from `SchemaHistory._commit`, a committed transaction's merged `XactState`:
- the relcache invalidations, which it passes on to the catalog's cache
  (`invalidate`), before any read below;
- relfilenodes it created (smgr CREATE) that no pgcdc.ddl message named
  (`resolve_creates`): TRUNCATE, VACUUM FULL, CLUSTER, or a table created without the
  DDL capture. Their owners were read off the WAL's pg_class rows at the commit
  (`SchemaHistory._find_swaps`, `Create.swap`): this records the table's mapping and
  moves its shape to the relfilenode. The live catalog is asked only, without the
  DDL capture, for the shape of a table the transaction created;
- without the DDL capture, the tables a catalog-changing transaction invalidated in the
  relcache (`refresh_from_catalog`), re-read through `LiveCatalog.table`.
Hands on: committed `Version` / `RelMapping` entries recorded in the history, visible
to later transactions from the commit LSN, and to the transaction's own changes from
the pg_class row that gave the table the relfilenode (a TRUNCATE's update of it, or a
rewrite's swap; a table it created: from the relfilenode's creation). An entry is
recorded at once, so a later relfilenode of the same commit (a table's toast after its
heap) starts from the shape the earlier one left.

Guarantees: the past is never read from the live catalog. A shape taken from it (the
fallback without the DDL capture, which shows the present) is logged
(`schema_refreshed_from_catalog`, `schema_refresh_unavailable`), and so is every
remapping (`relfilenode_remapped`) and every relfilenode no rebuilt pg_class row names
(`relfilenode_unresolved`): its rows classify as UNKNOWN (an error naming the LSN and
relfilenode), never as rewrite output. Returns whether a definition changed (the
history then bumps its version). No I/O except through `LiveCatalog`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Protocol

import structlog

from service.decode.events import CommitEvent
from service.lsn import format_lsn
from service.schema.entries import Create, Owned, RelMapping, Version, XactState
from service.schema.tabledef import LiveCatalog, TableDef

# pg_class.relkind of the relations that hold rows: table, partitioned table (whose
# partitions are tables of their own), materialized view.
TABLE_KINDS = frozenset("rpm")

# The history's own logger name: these events are the history's, only the code moved.
log = structlog.get_logger("service.schema.history")


class RecordMappings(Protocol):
    """The history's writer of a table's heap and toast relfilenode mappings."""

    def __call__(
        self,
        table: TableDef,
        *,
        xid: int,
        top: int,
        own_lsn: int,
        commit_lsn: int | None = None,
        xids: frozenset[int] = frozenset(),
        only_changed_at: int | None = None,
    ) -> list[RelMapping]: ...


class CatalogFallback:
    """The live-catalog fallback at commit, for one `SchemaHistory`.

    `versions` returns the history's shapes by oid, in the order recorded (a getter:
    the history rebuilds that mapping when it prunes); `record` and `record_mappings`
    add entries to the history. `catalog` is None when there is no live catalog: every
    method then only logs what it could not do.
    """

    __slots__ = ("_record", "_record_mappings", "_versions", "catalog", "ddl_capture")

    def __init__(
        self,
        catalog: LiveCatalog | None,
        *,
        versions: Callable[[], Mapping[int, Sequence[Version]]],
        record: Callable[[Owned], None],
        record_mappings: RecordMappings,
        ddl_capture: Callable[[], bool],
    ) -> None:
        self.catalog = catalog
        self.ddl_capture = ddl_capture
        self._versions = versions
        self._record = record
        self._record_mappings = record_mappings

    def invalidate(self, st: XactState) -> None:
        """Forget the catalog's cached facts about the tables the commit invalidated
        (as the relcache invalidations of the commit record would)."""
        if self.catalog is not None:
            if st.relcache_all:
                self.catalog.invalidate(None)
            for oid in st.relcache:
                self.catalog.invalidate(oid)

    def _latest(self, oid: int) -> TableDef | None:
        """The newest committed shape of `oid`."""
        return self._committed_shape(oid, None)

    def _committed_shape(self, oid: int, lsn: int | None) -> TableDef | None:
        best: Version | None = None
        for v in self._versions().get(oid, ()):
            if v.commit_lsn is None or (lsn is not None and v.commit_lsn > lsn):
                continue
            if best is None or v.commit_lsn >= (best.commit_lsn or 0):
                best = v
        return best.table if best is not None else None

    def _add_committed(
        self,
        table: TableDef | None,
        oid: int,
        ev: CommitEvent,
        xids: frozenset[int],
        own_lsn: int | None = None,
    ) -> None:
        """A shape (and its mappings) learnt from the live catalog at commit: visible to
        later transactions, and to the committing one's own changes from `own_lsn` on
        (by default, not at all: the commit)."""
        owner = {
            "xid": ev.xid,
            "top": ev.xid,
            "own_lsn": ev.lsn if own_lsn is None else own_lsn,
            "commit_lsn": ev.lsn,
        }
        self._record(Version(**owner, xids=xids, oid=oid, table=table))
        if table is not None:
            self._record_mappings(table, **owner, xids=xids, only_changed_at=ev.lsn)

    def resolve_creates(self, ev: CommitEvent, st: XactState, xids: frozenset[int]) -> bool:
        """Record who owns each relfilenode the transaction created and no message named,
        as `SchemaHistory._find_swaps` read it off the WAL's pg_class rows (`Create.swap`):
        the table's heap or toast mapping, visible to the transaction's own changes from
        the row that gave it the relfilenode, and to everyone from the commit. Without
        the DDL capture, a table the transaction created is read from the live catalog
        (source 3: a new table, present now or dropped since)."""
        changed = False
        for create in st.entries:
            if not isinstance(create, Create) or create.key in st.named:
                continue
            spc, rel = create.key
            if create.unresolved:
                log.warning(
                    "relfilenode_unresolved",
                    reason="no pg_class row in the decoded WAL names it",
                    lost_rows=create.lost,
                    relfilenode=f"{spc}/{rel}",
                    lsn=format_lsn(ev.lsn),
                    xid=ev.xid,
                )
                continue
            if create.swap is None:
                changed |= self._new_table(create, ev, st, xids)
                continue
            if create.superseded:
                continue  # its own changes classify by `Create.swap`; nobody else's
            own_lsn, owner = create.swap
            toast = create.swap_toast
            known = self._latest(owner)
            if known is None:
                continue  # dropped in the same transaction
            self._record(
                RelMapping(
                    xid=ev.xid,
                    top=ev.xid,
                    own_lsn=own_lsn,
                    commit_lsn=ev.lsn,
                    xids=xids,
                    key=create.key,
                    oid=owner,
                    toast=toast,
                )
            )
            moved = (
                replace(known, toast_relfilenode=rel)
                if toast
                else replace(known, relfilenode=rel, tablespace=spc)
            )
            self._record(
                Version(
                    xid=ev.xid,
                    top=ev.xid,
                    own_lsn=ev.lsn,
                    commit_lsn=ev.lsn,
                    xids=xids,
                    oid=owner,
                    table=moved,
                )
            )
            log.info(
                "relfilenode_remapped",
                table=known.qualified_name,
                oid=owner,
                toast=toast,
                relfilenode=rel,
                lsn=format_lsn(ev.lsn),
                xid=ev.xid,
            )
            changed = True
        return changed

    def _new_table(
        self, create: Create, ev: CommitEvent, st: XactState, xids: frozenset[int]
    ) -> bool:
        """A relfilenode no known table owns: an index, a sequence, a rewrite's transient
        heap, or a table created without the DDL capture. Only the last is recorded,
        and only when there is no DDL capture: its shape then comes from the live
        catalog (heap_create_with_catalog, relrewrite unset), and the rows the
        transaction wrote into it (CREATE TABLE AS, CREATE TABLE then INSERT) are the
        table's from the create on."""
        catalog = self.catalog
        if self.ddl_capture() or catalog is None:
            return False
        row = next(
            (
                r
                for r in st.class_rows
                if (r.tablespace, r.relfilenode) == create.key
                and r.lsn > create.own_lsn
                and not r.relrewrite
                and r.relkind in TABLE_KINDS
            ),
            None,
        )
        if row is None or self._latest(row.oid) is not None:
            return False
        fresh = catalog.table(row.oid)
        if fresh is None:
            log.warning(
                "relfilenode_unresolved",
                reason="a table created without the DDL capture, dropped since",
                relfilenode=f"{create.key[0]}/{create.key[1]}",
                oid=row.oid,
                lsn=format_lsn(ev.lsn),
                xid=ev.xid,
            )
            create.unresolved = True
            return False
        log.warning(
            "schema_refreshed_from_catalog",
            table=fresh.qualified_name,
            oid=row.oid,
            lsn=format_lsn(ev.lsn),
            xid=ev.xid,
            reason="new relation without a DDL message",
        )
        self._add_committed(fresh, row.oid, ev, xids, own_lsn=create.own_lsn)
        return True

    def refresh_from_catalog(self, ev: CommitEvent, st: XactState, xids: frozenset[int]) -> bool:
        """Fallback without the trigger: re-read relcache-invalidated tables."""
        oids = set(self._versions()) if st.relcache_all else set(st.relcache)
        if not oids:
            return False
        catalog = self.catalog
        if catalog is None:
            log.warning(
                "schema_refresh_unavailable",
                lsn=format_lsn(ev.lsn),
                xid=ev.xid,
                oids=sorted(oids),
            )
            return False
        changed = False
        for oid in sorted(oids):
            known = self._latest(oid)
            fresh = catalog.table(oid)
            if fresh == known:
                continue
            self._add_committed(fresh, oid, ev, xids)
            named = fresh if fresh is not None else known
            log.warning(
                "schema_refreshed_from_catalog",
                table=named.qualified_name if named is not None else str(oid),
                oid=oid,
                lsn=format_lsn(ev.lsn),
                xid=ev.xid,
                dropped=fresh is None,
            )
            changed = True
        return changed
