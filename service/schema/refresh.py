"""Schema history: the live-catalog fallback at commit (source 3 of `service.schema.history`).

Part of the schema history stage: `CatalogFallback` is a collaborator that
`service.schema.history.SchemaHistory` holds, and the history owns the state and the
module contract. The history hands it, at construction, the `LiveCatalog` (or None)
and what it needs of the history itself: a reader of its committed versions by oid
and its two writers (`record`, `record_mappings`). This module does not import the
history's; it reads and writes the history only through those.

Receives, from `SchemaHistory._commit`, a committed transaction's merged `XactState`:
- the relcache invalidations, which it passes on to the catalog's cache
  (`invalidate`), before any read below;
- relfilenodes it created (smgr CREATE) that no pgcdc.ddl message named
  (`resolve_creates`): TRUNCATE, VACUUM FULL, CLUSTER, or a table created without the
  DDL capture. Each is mapped through `LiveCatalog.filenode_relation`
  (`pg_filenode_relation()`), and the table's shape is moved to it;
- without the DDL capture, the tables a catalog-changing transaction invalidated in the
  relcache (`refresh_from_catalog`), re-read through `LiveCatalog.table`.
Hands on: committed `Version` / `RelMapping` entries recorded in the history, visible
to later transactions from the commit LSN (and to the transaction's own changes: after
a TRUNCATE, or into a table it created, from the relfilenode's creation; after CLUSTER
or VACUUM FULL, from the relcache invalidation of the swap, `_own_from`). An entry is
recorded at once, so a later relfilenode of the same commit (a table's toast after its
heap) starts from the shape the earlier one left.

Guarantees: the live catalog shows the present, not the commit's LSN, so every shape
taken from it is logged (`schema_refreshed_from_catalog`, `relfilenode_remapped`,
`relfilenode_unresolved`, `schema_refresh_unavailable`) under the history's logger. A
relfilenode of a truncating transaction that the catalog no longer knows is marked
`unresolved`, so its rows classify as UNKNOWN (an error), never as rewrite output.
Returns whether a definition changed (the history then bumps its version). No I/O
except through `LiveCatalog`.
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

# The history's own logger name: these events are the history's, only the code moved.
log = structlog.get_logger("service.schema.history")


def _own_from(create: Create, relid: int, truncated: bool, st: XactState, commit_lsn: int) -> int:
    """From which LSN the creating transaction's own changes into `create`'s relfilenode
    are changes of relation `relid` (which owns it at commit).

    Mirrors what RelidByRelfilenumber answers under the historic snapshot of each change
    (ReorderBufferProcessTXN): TRUNCATE (ExecuteTruncateGuts ->
    RelationSetNewRelfilenumber) gives the table its new relfilenode at once. CLUSTER and
    VACUUM FULL (make_new_heap, finish_heap_swap) create it for a transient heap whose
    `relrewrite` is set, whose changes are skipped, and swap_relation_files hands it to
    the table later, in the same command: that updates the table's pg_class row, whose
    relcache invalidation the transaction logs (XLOG_XACT_INVALIDATIONS) at the end of
    the command. So the first invalidation of `relid` after the create starts the
    table's own use of it; without one, only later transactions use it (the commit).
    """
    if truncated:
        return create.own_lsn
    after = [at for at in st.relcache_at.get(relid, ()) if at > create.own_lsn]
    return min(after) if after else commit_lsn


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

    __slots__ = ("_record", "_record_mappings", "_versions", "catalog")

    def __init__(
        self,
        catalog: LiveCatalog | None,
        *,
        versions: Callable[[], Mapping[int, Sequence[Version]]],
        record: Callable[[Owned], None],
        record_mappings: RecordMappings,
    ) -> None:
        self.catalog = catalog
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
        """Map new relfilenodes no message named, via `pg_filenode_relation()` (at commit)."""
        unnamed = [e for e in st.entries if isinstance(e, Create) and e.key not in st.named]
        if not unnamed:
            return False
        covered = {e.oid for e in st.entries if isinstance(e, Version)}
        uncovered = {oid for oid in st.relcache if oid in self._versions()} - covered
        if not (st.truncated or st.ddl_messages == 0 or uncovered or st.relcache_all):
            return False
        catalog = self.catalog
        if catalog is None:
            log.warning(
                "relfilenode_unresolved",
                reason="no live catalog",
                lsn=format_lsn(ev.lsn),
                xid=ev.xid,
                count=len(unnamed),
            )
            return False
        toast_owner: dict[int, int] = {}
        for oid in self._versions():
            t = self._latest(oid)
            if t is not None and t.toast_relid:
                toast_owner[t.toast_relid] = oid
        changed = False
        for create in unnamed:
            spc, rel = create.key
            relid = catalog.filenode_relation(spc, rel)
            if relid is None:
                if st.truncated:
                    create.unresolved = True
                    log.warning(
                        "relfilenode_unresolved",
                        reason="gone from the catalog",
                        relfilenode=rel,
                        lsn=format_lsn(ev.lsn),
                        xid=ev.xid,
                    )
                continue
            owner = toast_owner.get(relid, relid)
            toast = owner != relid
            known = self._latest(owner)
            if known is None:
                fresh = catalog.table(owner)
                if fresh is None:
                    continue  # an index, sequence or other non-table relation
                log.warning(
                    "schema_refreshed_from_catalog",
                    table=fresh.qualified_name,
                    oid=owner,
                    lsn=format_lsn(ev.lsn),
                    xid=ev.xid,
                    reason="new relation without a DDL message",
                )
                # A table this transaction created (heap_create_with_catalog, relrewrite
                # unset): the rows it wrote into it (CREATE TABLE AS, CREATE TABLE then
                # INSERT, CREATE EXTENSION) are the table's from the create on.
                self._add_committed(fresh, owner, ev, xids, own_lsn=create.own_lsn)
                changed = True
                continue
            own_lsn = _own_from(create, relid, owner in st.truncated, st, ev.lsn)
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
