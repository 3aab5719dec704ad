"""Schema history: the live-catalog fallback at commit (source 3 of `service.schema.history`).

Part of the schema history stage: `CatalogFallbackMixin` is a base class of
`service.schema.history.SchemaHistory`, which owns the state and the module contract.

Receives, from `SchemaHistory._commit`, a committed transaction's merged `XactState`:
- relfilenodes it created (smgr CREATE) that no pgcdc.ddl message named
  (`_resolve_creates`): TRUNCATE, VACUUM FULL, CLUSTER, or a table created without the
  DDL capture. Each is mapped through `LiveCatalog.filenode_relation`
  (`pg_filenode_relation()`), and the table's shape is moved to it;
- without the DDL capture, the tables a catalog-changing transaction invalidated in the
  relcache (`_refresh_from_catalog`), re-read through `LiveCatalog.table`.
Hands on: committed `Version` / `RelMapping` entries recorded in the history, visible
to later transactions from the commit LSN (and, after a TRUNCATE, to the transaction's
own inserts into the new relfilenode from its creation).

Guarantees: the live catalog shows the present, not the commit's LSN, so every shape
taken from it is logged (`schema_refreshed_from_catalog`, `relfilenode_remapped`,
`relfilenode_unresolved`, `schema_refresh_unavailable`) under the history's logger. A
relfilenode of a truncating transaction that the catalog no longer knows is marked
`unresolved`, so its rows classify as UNKNOWN (an error), never as rewrite output.
Returns whether a definition changed (the history then bumps its version). No I/O
except through `LiveCatalog`.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

import structlog

from service.decode.events import CommitEvent
from service.lsn import format_lsn
from service.schema.entries import Create, Owned, RelMapping, Version, XactState
from service.schema.tabledef import LiveCatalog, TableDef

# The history's own logger name: these events are the history's, only the code moved.
log = structlog.get_logger("service.schema.history")


class CatalogFallbackMixin:
    """The live-catalog methods of `SchemaHistory` (its only subclass).

    The attributes and methods declared below belong to `SchemaHistory`; they are
    declared here for the type checker only.
    """

    _catalog: LiveCatalog | None
    _versions: dict[int, list[Version]]  # oid -> shapes, in the order recorded

    if TYPE_CHECKING:

        def _record(self, entry: Owned) -> None: ...
        def _record_mappings(
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

    def _latest(self, oid: int) -> TableDef | None:
        """The newest committed shape of `oid`."""
        return self._committed_shape(oid, None)

    def _committed_shape(self, oid: int, lsn: int | None) -> TableDef | None:
        best: Version | None = None
        for v in self._versions.get(oid, ()):
            if v.commit_lsn is None or (lsn is not None and v.commit_lsn > lsn):
                continue
            if best is None or v.commit_lsn >= (best.commit_lsn or 0):
                best = v
        return best.table if best is not None else None

    def _add_committed(
        self, table: TableDef | None, oid: int, ev: CommitEvent, xids: frozenset[int]
    ) -> None:
        """A shape (and its mappings) learnt from the live catalog at commit: visible to
        later transactions only."""
        owner = {"xid": ev.xid, "top": ev.xid, "own_lsn": ev.lsn, "commit_lsn": ev.lsn}
        self._record(Version(**owner, xids=xids, oid=oid, table=table))
        if table is not None:
            self._record_mappings(table, **owner, xids=xids, only_changed_at=ev.lsn)

    def _resolve_creates(self, ev: CommitEvent, st: XactState, xids: frozenset[int]) -> bool:
        """Map new relfilenodes no message named, via `pg_filenode_relation()` (at commit)."""
        unnamed = [e for e in st.entries if isinstance(e, Create) and e.key not in st.named]
        if not unnamed:
            return False
        covered = {e.oid for e in st.entries if isinstance(e, Version)}
        uncovered = {oid for oid in st.relcache if oid in self._versions} - covered
        if not (st.truncated or st.ddl_messages == 0 or uncovered or st.relcache_all):
            return False
        if self._catalog is None:
            log.warning(
                "relfilenode_unresolved",
                reason="no live catalog",
                lsn=format_lsn(ev.lsn),
                xid=ev.xid,
                count=len(unnamed),
            )
            return False
        toast_owner: dict[int, int] = {}
        for oid in self._versions:
            t = self._latest(oid)
            if t is not None and t.toast_relid:
                toast_owner[t.toast_relid] = oid
        changed = False
        for create in unnamed:
            spc, rel = create.key
            relid = self._catalog.filenode_relation(spc, rel)
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
                fresh = self._catalog.table(owner)
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
                self._add_committed(fresh, owner, ev, xids)
                changed = True
                continue
            # After TRUNCATE the transaction's own inserts go to the new relfilenode and
            # are real; otherwise (VACUUM FULL, CLUSTER) only later transactions use it.
            own_lsn = create.own_lsn if owner in st.truncated else ev.lsn
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

    def _refresh_from_catalog(self, ev: CommitEvent, st: XactState, xids: frozenset[int]) -> bool:
        """Fallback without the trigger: re-read relcache-invalidated tables."""
        oids = set(self._versions) if st.relcache_all else set(st.relcache)
        if not oids:
            return False
        if self._catalog is None:
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
            fresh = self._catalog.table(oid)
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
