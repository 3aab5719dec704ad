"""Schema history: each table's definition as of every LSN, and what each relfilenode is.

PostgreSQL decodes a tuple with the catalog as it was at that LSN, read under a
historic snapshot (snapbuild.c). pgcdc cannot read the catalog that way, so it keeps
this history instead. It receives, in WAL order, the decoder's events (`apply`), and
answers lookups from the reorder buffer's replay (`by_relfilenode`, `by_oid`,
`classify`), which happen later, at commit, for LSNs in the past.

Sources, in order of authority:

1. The initial catalog snapshot (`from_catalog_snapshot`), read in one REPEATABLE READ
   transaction together with `pg_current_snapshot()`. Its definitions are valid from
   LSN 0; a transaction visible in that snapshot is already reflected, so its DDL is
   never applied a second time.
2. `pgcdc.ddl` logical messages written by the event trigger of `pgcdc setup`. A
   message of transaction T at LSN M takes effect for T's own changes from M on (and,
   for a table T created, from the smgr CREATE of its relfilenode), and for everyone
   else from T's commit record. It is dropped with an aborted (sub)transaction, and with
   a transaction that RUNNING_XACTS shows to have vanished (crash).
3. The live catalog, through the injected `LiveCatalog`, consulted only at commit:
   new relfilenodes that no message named (TRUNCATE, VACUUM FULL, CLUSTER) are mapped by
   `pg_filenode_relation()`; a catalog-changing transaction (NEW_CID, INPLACE,
   invalidations) that carried no DDL message has its relcache-invalidated tables
   re-read, with the warning `schema_refreshed_from_catalog`. These catalog reads see
   the present, not the LSN: exact only while pgcdc keeps up, which is why the trigger
   is the primary source.

Relfilenode classification (`classify`), which the pipeline applies to every heap change
at replay:

- TABLE / TOAST: the relfilenode belongs to a known table (or its toast) at that LSN,
  as seen by that transaction.
- REWRITE: the relfilenode was created by smgr CREATE in the change's own transaction
  and, at that LSN, no definition visible to that transaction names it. These are the
  heap inserts of a rewriting ALTER TABLE (written before its DDL message) or of
  VACUUM FULL/CLUSTER; they must never be emitted (PostgreSQL skips them through
  `pg_class.relrewrite`). Inserts after a TRUNCATE in the same transaction are TABLE,
  because the truncated table's new relfilenodes are visible to it from their creation;
  so are changes after the rewrite swapped the relfilenode to its table (CLUSTER, then
  INSERT, in one transaction), found off the WAL at PREPARE and at commit
  (`_find_swaps`, `Create.swap`), and rows a transaction writes into a table it created.
- Catalog relations are not classified here: `HistoryRows` drops their changes.
- UNKNOWN: none of the above (for example a relation of which no definition is known).
  The pipeline must treat it as an error or a deliberate, logged skip.

Ordering contract: `apply(commit_event)` must run before the reorder buffer replays
that transaction (replay lookups need the commit's resolution), and events must be
applied in WAL order. Only one database is tracked (`db_oid`); events of others are
ignored. The pure logic does no I/O itself; catalog reads go through `LiveCatalog`, and
only in the history's `CatalogFallback`.

Layout: the definition types (`TableDef`, `ColumnDef`, `CatalogSnapshot`,
`LiveCatalog`) live in `service.schema.tabledef`; the history's entries and their visibility
rule (`pick`) in `service.schema.entries`; the live-catalog fallback at commit (source
3) in `service.schema.refresh`: a `CatalogFallback` the history holds, handed the
`LiveCatalog` and the history's versions and entry writers (`_record`,
`_record_mappings`). This module keeps event intake, commit/abort, lookups, persistence
(`to_snapshot` / `from_snapshot`) and pruning.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import Enum
from typing import Any

from service.decode.events import (
    AbortEvent,
    AssignmentEvent,
    CheckpointEvent,
    ClassRowEvent,
    ClassRowLostEvent,
    CommitEvent,
    Event,
    HeapChange,
    InplaceEvent,
    Invalidation,
    InvalidationsEvent,
    MessageEvent,
    NewCidEvent,
    ParameterChangeEvent,
    PrepareEvent,
    RunningXactsEvent,
    SmgrCreateEvent,
    SmgrTruncateEvent,
    SwitchEvent,
    TruncateEvent,
)
from service.errors import DecodeError
from service.schema.entries import (
    Create,
    Key,
    MapKey,
    Owned,
    RelMapping,
    Version,
    XactState,
    drop_entry,
    only_tombstone,
    pick,
    prune_superseded,
)
from service.schema.refresh import CatalogFallback
from service.schema.tabledef import CatalogSnapshot, LiveCatalog, TableDef
from service.snapbuild.snapbuild import xid_precedes
from service.wal.record import RelFileLocator

DDL_PREFIX = "__pgcdc.ddl"
"""The logical-message prefix of the DDL capture installed by `pgcdc setup`.

The one place it is set: `connectors/postgres/sql/ddl_capture.sql` is rendered with it.
Two leading underscores, as Kafka's and Debezium's internal names (`__consumer_offsets`,
`__debezium-heartbeat`): it sorts before application prefixes and reads as internal, so
other consumers of the database (pgoutput, Debezium) can drop it, e.g. with Debezium's
`message.prefix.exclude.list=__pgcdc.ddl`.
"""

LEGACY_DDL_PREFIX = "pgcdc.ddl"
"""The prefix before 0.x: triggers installed by an older `pgcdc setup` still write it, and
WAL written then must still decode."""

DDL_PREFIXES = frozenset({DDL_PREFIX, LEGACY_DDL_PREFIX})

INTERNAL_PREFIX = "__pgcdc."
"""Every logical message pgcdc itself writes starts so: the DDL capture and the chunked
snapshot's watermarks and signals (`connectors.tablesnap.chunks`). None is application
data: the avro plugin never publishes them (the DDL messages only if asked)."""

RELCACHE_INVAL = -2  # SHAREDINVALRELCACHE_ID in sinval.h
MAIN_FORKNUM = 0
HISTORY_FORMAT = 1

# --- classification ------------------------------------------------------------------


_END_OF_TIME = (1 << 64) - 1
_TOAST_CACHE_MAX = 4096


class RelClass(Enum):
    TABLE = "table"
    TOAST = "toast"
    REWRITE = "rewrite"
    UNKNOWN = "unknown"


@dataclass(slots=True, frozen=True)
class Classification:
    """What a heap change's relfilenode is; `table` is set for TABLE and TOAST."""

    kind: RelClass
    table: TableDef | None = None


REWRITE = Classification(RelClass.REWRITE)
UNKNOWN = Classification(RelClass.UNKNOWN)


class SchemaHistory:
    """Table definitions versioned by LSN for one database; see the module docstring."""

    def __init__(self, db_oid: int, catalog: LiveCatalog | None = None) -> None:
        self.db_oid = db_oid
        # oid -> shapes, in the order they were recorded.
        self._versions: dict[int, list[Version]] = {}
        # (oid, toast) -> relfilenode mappings, in the order they were recorded.
        self._maps: dict[MapKey, list[RelMapping]] = {}
        # is_toast's answers for everyone; cleared whenever what they depend on moves
        # (applied_upto, version, `_maps` rebound: see is_toast).
        self._toast_cache: dict[tuple[int, int, int, int], bool] = {}
        # (tablespace, relfilenode) -> (oid, toast) pairs that ever mapped it.
        self._by_filenode: dict[Key, list[MapKey]] = {}
        # (tablespace, relfilenode) -> smgr creates of it (pending and committed).
        self._creates: dict[Key, list[Create]] = {}
        self._xacts: dict[int, XactState] = {}
        # subxid -> top-level xid, while the top-level transaction is in progress.
        self._top: dict[int, int] = {}
        # Transactions visible in the initial catalog snapshot are applied already.
        self._initial: CatalogSnapshot | None = None
        # Commits starting at or before this LSN are applied already (restored history).
        self._applied_upto = 0
        # Incremented by every commit that changed a definition; stored with offsets.
        self._version = 0
        # The DDL capture is installed: every command that changes a table's columns,
        # name or key writes a pgcdc.ddl message, so a catalog-changing transaction
        # without one (VACUUM FULL, CLUSTER, TRUNCATE, ANALYZE, CREATE INDEX ...) changed
        # no definition, and the live catalog (which shows the present, possibly later
        # DDL) must not be read for its shape.
        self.ddl_capture = False
        # Source 3, the live catalog at commit; it reads `_versions` through a getter
        # because `prune` rebinds it.
        self._fallback = CatalogFallback(
            catalog,
            versions=lambda: self._versions,
            record=self._record,
            record_mappings=self._record_mappings,
            ddl_capture=lambda: self.ddl_capture,
        )

    @property
    def applied_upto(self) -> int:
        """Commits starting at or before this LSN are applied already."""
        return self._applied_upto

    @applied_upto.setter
    def applied_upto(self, lsn: int) -> None:
        self._applied_upto = lsn
        self._toast_cache.clear()

    @property
    def version(self) -> int:
        """Incremented by every commit that changed a definition."""
        return self._version

    @version.setter
    def version(self, version: int) -> None:
        self._version = version
        self._toast_cache.clear()

    # --- construction and persistence ----------------------------------------------

    @classmethod
    def from_catalog_snapshot(
        cls, snap: CatalogSnapshot, catalog: LiveCatalog | None = None
    ) -> SchemaHistory:
        history = cls(snap.db_oid, catalog)
        history._initial = snap
        history.ddl_capture = snap.ddl_capture
        for table in snap.tables:
            history._record(
                Version(xid=0, top=0, own_lsn=0, commit_lsn=0, oid=table.oid, table=table)
            )
            history._record_mappings(table, xid=0, top=0, own_lsn=0, commit_lsn=0)
        return history

    def _record(self, entry: Owned) -> None:
        match entry:
            case Version():
                self._versions.setdefault(entry.oid, []).append(entry)
            case RelMapping():
                mk = (entry.oid, entry.toast)
                self._maps.setdefault(mk, []).append(entry)
                index = self._by_filenode.setdefault(entry.key, [])
                if mk not in index:
                    index.append(mk)
            case Create():
                self._creates.setdefault(entry.key, []).append(entry)
            case _:
                raise DecodeError(f"unknown schema history entry {type(entry).__name__}")

    def _unrecord(self, entry: Owned) -> None:
        match entry:
            case Version():
                drop_entry(self._versions.get(entry.oid), entry)
            case RelMapping():
                drop_entry(self._maps.get((entry.oid, entry.toast)), entry)
            case Create():
                drop_entry(self._creates.get(entry.key), entry)
            case _:
                raise DecodeError(f"unknown schema history entry {type(entry).__name__}")

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
    ) -> list[RelMapping]:
        """Mappings for `table`'s heap and toast relfilenodes; with `only_changed_at`,
        only those that differ from what `xid` sees at that LSN."""
        out = []
        for rel, toast in ((table.relfilenode, False), (table.toast_relfilenode, True)):
            if not rel:
                continue
            key = (table.tablespace, rel)
            if only_changed_at is not None:
                seen = pick(self._maps.get((table.oid, toast), ()), only_changed_at, xid, top)
                if seen is not None and seen.key == key:
                    continue
            m = RelMapping(
                xid=xid,
                top=top,
                own_lsn=own_lsn,
                commit_lsn=commit_lsn,
                xids=xids,
                key=key,
                oid=table.oid,
                toast=toast,
            )
            self._record(m)
            out.append(m)
        return out

    def to_snapshot(self) -> dict[str, Any]:
        """The committed history as JSON-able data (pending transactions are re-read)."""

        def owned(e: Owned) -> list[Any]:
            return [e.own_lsn, e.commit_lsn, sorted(e.xids)]

        versions = [
            [v.oid, v.table.to_json() if v.table else None, *owned(v)]
            for lst in self._versions.values()
            for v in lst
            if v.commit_lsn is not None
        ]
        maps = [
            [m.key[0], m.key[1], m.oid, m.toast, *owned(m)]
            for lst in self._maps.values()
            for m in lst
            if m.commit_lsn is not None
        ]
        creates = [
            [c.key[0], c.key[1], *owned(c), *((*c.swap, c.swap_toast) if c.swap else ())]
            for lst in self._creates.values()
            for c in lst
            if c.commit_lsn is not None
        ]
        initial = None
        if self._initial is not None:
            snap = self._initial
            initial = {"xmin": snap.xmin, "xmax": snap.xmax, "xip": sorted(snap.xip)}
        return {
            "format": HISTORY_FORMAT,
            "db_oid": self.db_oid,
            "version": self.version,
            "applied_upto": self.applied_upto,
            "ddl_capture": self.ddl_capture,
            "initial": initial,
            "versions": versions,
            "mappings": maps,
            "creates": creates,
        }

    @classmethod
    def from_snapshot(
        cls, doc: Mapping[str, Any], catalog: LiveCatalog | None = None
    ) -> SchemaHistory:
        """Rebuild a history saved by `to_snapshot`."""
        if doc.get("format") != HISTORY_FORMAT:
            raise DecodeError(f"unsupported schema history format {doc.get('format')!r}")
        history = cls(int(doc["db_oid"]), catalog)
        history.version = int(doc["version"])
        history.applied_upto = int(doc["applied_upto"])
        history.ddl_capture = bool(doc.get("ddl_capture", False))
        if doc.get("initial"):
            ini = doc["initial"]
            history._initial = CatalogSnapshot(
                history.db_oid, 0, int(ini["xmin"]), int(ini["xmax"]), frozenset(ini["xip"]), ()
            )
        for oid, tdoc, own_lsn, commit_lsn, xids in doc["versions"]:
            table = TableDef.from_json(tdoc) if tdoc is not None else None
            history._record(
                Version(
                    xid=0,
                    top=0,
                    own_lsn=own_lsn,
                    commit_lsn=commit_lsn,
                    xids=frozenset(xids),
                    oid=oid,
                    table=table,
                )
            )
        for spc, rel, oid, toast, own_lsn, commit_lsn, xids in doc["mappings"]:
            history._record(
                RelMapping(
                    xid=0,
                    top=0,
                    own_lsn=own_lsn,
                    commit_lsn=commit_lsn,
                    xids=frozenset(xids),
                    key=(spc, rel),
                    oid=oid,
                    toast=bool(toast),
                )
            )
        for spc, rel, own_lsn, commit_lsn, xids, *swap in doc["creates"]:
            history._record(
                Create(
                    xid=0,
                    top=0,
                    own_lsn=own_lsn,
                    commit_lsn=commit_lsn,
                    xids=frozenset(xids),
                    key=(spc, rel),
                    swap=(int(swap[0]), int(swap[1])) if swap else None,
                    swap_toast=bool(swap[2]) if len(swap) > 2 else False,
                )
            )
        return history

    # --- event intake --------------------------------------------------------------

    def apply(self, ev: Event) -> None:
        """Take one decoder event, in WAL order (dispatch as decode.c's rmgr switch)."""
        match ev:
            case MessageEvent():
                if ev.prefix in DDL_PREFIXES and ev.db_oid == self.db_oid:
                    if not ev.transactional:
                        raise DecodeError(
                            f"{ev.prefix} message is not transactional", lsn=ev.lsn, xid=ev.xid
                        )
                    self._on_ddl_message(ev)
            case SmgrCreateEvent():
                loc = ev.locator
                if ev.fork == MAIN_FORKNUM and loc.db_oid == self.db_oid and ev.xid:
                    create = Create(
                        xid=ev.xid,
                        top=self._top.get(ev.xid, ev.xid),
                        own_lsn=ev.lsn,
                        key=(loc.spc_oid, loc.rel_number),
                    )
                    self._state(ev.xid).entries.append(create)
                    self._record(create)
            case TruncateEvent():
                if ev.db_oid == self.db_oid:
                    st = self._state(ev.xid)
                    st.truncated.update(ev.relids)
                    st.catalog_changes = True
            case NewCidEvent() | InplaceEvent():
                if ev.xid:
                    self._state(ev.xid).catalog_changes = True
            case InvalidationsEvent():
                if ev.xid:
                    st = self._state(ev.xid)
                    st.catalog_changes = True
                    self._collect_relcache(st, ev.invalidations)
            case ClassRowEvent():
                if ev.db_oid == self.db_oid and ev.xid:
                    self._state(ev.xid).class_rows.append(ev)
            case ClassRowLostEvent():
                if ev.db_oid == self.db_oid and ev.xid:
                    self._state(ev.xid).class_lost.append(ev)
            case PrepareEvent():
                # The pending state stays until COMMIT/ROLLBACK PREPARED; a decode at
                # PREPARE replays the transaction's changes now, so its rewrites are
                # told apart from the rows written after them now (`_find_swaps`).
                if ev.db_oid == self.db_oid:
                    self._find_swaps(self._members(ev.xid, ev.subxids))
            case AssignmentEvent():
                for sub in ev.subxids:
                    self.assign_child(ev.xid, sub)
            case CommitEvent():
                self._commit(ev)
            case AbortEvent():
                self._abort(ev.xid, ev.subxids)
            case RunningXactsEvent():
                self._abort_old(ev.oldest_running_xid)
            case (
                HeapChange()
                | CheckpointEvent()
                | ParameterChangeEvent()
                | SwitchEvent()
                | SmgrTruncateEvent()
            ):
                # No schema effect; SMGR truncate is VACUUM's physical shrink.
                return
            case _:
                raise DecodeError(f"schema history got an unknown event {type(ev).__name__}")

    def inert(self, ev: Event) -> bool:
        """Whether `apply(ev)` would leave every lookup's answer as it is, asked before
        applying it (a caller's cache of answers survives an inert event): an event
        without schema effect, a message that is not a DDL one of this database, and the
        commit, abort or RUNNING_XACTS of transactions that have no schema state (a
        commit without invalidations). Anything else counts as a change."""
        match ev:
            case (
                HeapChange()
                | CheckpointEvent()
                | ParameterChangeEvent()
                | SwitchEvent()
                | SmgrTruncateEvent()
            ):
                return True
            case MessageEvent():
                return not (ev.prefix in DDL_PREFIXES and ev.db_oid == self.db_oid)
            case CommitEvent():
                if ev.invalidations:
                    return False
                return not any(m in self._xacts for m in self._members(ev.xid, ev.subxids))
            case AbortEvent():
                return not any(m in self._xacts for m in self._members(ev.xid, ev.subxids))
            case RunningXactsEvent():
                return not any(
                    xid_precedes(self._top.get(xid, xid), ev.oldest_running_xid)
                    for xid in self._xacts
                )
            case _:
                return False

    def owner_xids(self) -> frozenset[int]:
        """Every xid some entry is owned by (`Owned.owned_by`): the members of the
        committed transactions that recorded it, and the top xid of a pending one with
        its known subtransactions. A
        transaction outside this set sees every relfilenode as any other such
        transaction does, so their answers (`classify_span`) can be shared."""
        out: set[int] = set()
        lists: list[Iterable[Owned]] = [
            *self._versions.values(),
            *self._maps.values(),
            *self._creates.values(),
        ]
        for entries in lists:
            for e in entries:
                out.update(e.xids)
                if e.commit_lsn is None:
                    out.add(e.top)
        # A subtransaction is asked as its top-level transaction (owned_by's `top`).
        out.update(sub for sub, top in self._top.items() if top in out)
        return frozenset(out)

    def assign_child(self, top: int, sub: int) -> None:
        """`sub` is a subtransaction of `top` (ReorderBufferAssignChild)."""
        if top == sub:
            return
        self._top[sub] = top
        st = self._xacts.get(sub)
        if st is not None:
            for e in st.entries:
                e.top = top

    def _state(self, xid: int) -> XactState:
        st = self._xacts.get(xid)
        if st is None:
            st = self._xacts[xid] = XactState()
        return st

    def _collect_relcache(self, st: XactState, invals: Iterable[Invalidation]) -> None:
        """Relcache invalidations of this database."""
        for inv in invals:
            if inv.kind != RELCACHE_INVAL or inv.db_oid not in (self.db_oid, 0):
                continue
            if inv.rel_oid == 0:
                st.relcache_all = True
            else:
                st.relcache.add(inv.rel_oid)

    def _members(self, top: int, listed: Iterable[int] = ()) -> list[int]:
        members = [top, *listed]
        members += [sub for sub, t in self._top.items() if t == top and sub not in members]
        return members

    def _on_ddl_message(self, ev: MessageEvent) -> None:
        try:
            doc = json.loads(ev.payload.rstrip(b"\0").decode("utf-8"))
            op = doc["op"]
            table = TableDef.from_json(doc["def"]) if op == "table" else None
            oid = table.oid if table is not None else int(doc["oid"])
        except (ValueError, KeyError, TypeError) as exc:
            raise DecodeError(
                f"malformed pgcdc.ddl message: {exc}", lsn=ev.lsn, xid=ev.xid
            ) from exc
        if op not in ("table", "drop"):
            raise DecodeError(f"pgcdc.ddl message with unknown op {op!r}", lsn=ev.lsn, xid=ev.xid)
        st = self._state(ev.xid)
        st.ddl_messages += 1
        st.catalog_changes = True
        top = self._top.get(ev.xid, ev.xid)
        shape_lsn = ev.lsn
        if table is not None:
            seen = pick(self._versions.get(oid, ()), ev.lsn, ev.xid, top)
            new_table = seen is None or seen.table is None
            truncated = any(
                oid in self._xacts[m].truncated for m in self._members(top) if m in self._xacts
            )
            for m in self._record_mappings(
                table, xid=ev.xid, top=top, own_lsn=ev.lsn, only_changed_at=ev.lsn
            ):
                st.entries.append(m)
                create = self._own_create(m.key, top)
                if create is None:
                    continue
                st.named.add(create.key)
                if new_table or truncated:
                    # Rows written into a fresh relfilenode of a table created (CREATE
                    # TABLE AS) or truncated in this transaction are real, not rewrite
                    # output, even before this message names it.
                    m.own_lsn = create.own_lsn
                    if new_table:
                        shape_lsn = min(shape_lsn, create.own_lsn)
        version = Version(xid=ev.xid, top=top, own_lsn=shape_lsn, oid=oid, table=table)
        st.entries.append(version)
        self._record(version)

    def _find_swaps(self, members: Iterable[int]) -> None:
        """At a transaction's PREPARE or commit: for each relfilenode it created and no
        pgcdc.ddl message named, which table (or toast table) owns it from which LSN on
        (`Create.swap`), or that the WAL cannot tell (`Create.unresolved`).

        PostgreSQL tells a rewrite's output from the rows written after it by the
        relation that owns the relfilenode under each change's historic snapshot
        (RelidByRelfilenumber in ReorderBufferProcessTXN). pgcdc reads the same pg_class
        rows off the WAL (`service.schema.pgclass`), in the order the transaction wrote
        them:
        - TRUNCATE (ExecuteTruncateGuts -> RelationSetNewRelfilenumber) updates the
          table's row to the new relfilenode at once;
        - CLUSTER and VACUUM FULL (make_new_heap) insert a transient heap's row naming
          it, with `relrewrite` set: its changes are rewrite output, skipped as
          PostgreSQL skips them; finish_heap_swap (swap_relation_files) then updates the
          table's row to it, and the transient's to the old one;
        - a toast table's row names the toast relfilenode the same way.
        The first row that points a known table (or its toast table, as seen by this
        transaction) at the relfilenode starts the table's own use of it. A relfilenode
        no rebuilt row names, in a transaction some of whose pg_class rows were lost,
        is unresolved: its changes are UNKNOWN, an error, never a guess.
        """
        members = list(members)
        states = [self._xacts[m] for m in members if m in self._xacts]
        named = set().union(*(st.named for st in states)) if states else set()
        creates = [
            e for st in states for e in st.entries if isinstance(e, Create) and e.commit_lsn is None
        ]
        if not creates:
            return
        rows = sorted((r for st in states for r in st.class_rows), key=lambda r: r.lsn)
        lost = [x for st in states for x in st.class_lost]
        toasts: dict[int, int] | None = None  # toast oid -> table oid, built when needed
        for create in creates:
            naming = [
                r
                for r in rows
                if (r.tablespace, r.relfilenode) == create.key and r.lsn > create.own_lsn
            ]
            if not naming:
                # Every relfilenode of a table is named by the pg_class row that gets
                # it (heap_create_with_catalog, RelationSetNewRelfilenumber,
                # SetRelationTableSpace); without one, the WAL cannot tell whose it is.
                if create.key not in named:
                    create.unresolved = True
                    create.lost = len(lost)
                continue
            top = create.top
            for r in naming:
                if r.relrewrite:
                    continue  # a rewrite's transient heap (make_new_heap)
                seen = pick(self._versions.get(r.oid, ()), r.lsn, top, top)
                if seen is not None and seen.table is not None:
                    create.swap, create.swap_toast = (r.lsn, r.oid), False
                else:
                    if toasts is None:
                        toasts = self._toast_owners(top)
                    if r.oid not in toasts:
                        continue  # an index's, a sequence's, an untracked table's
                    create.swap, create.swap_toast = (r.lsn, toasts[r.oid]), True
                # Rewritten again later in the transaction (CLUSTER twice): the table's
                # own changes in between are its, but its last row names another one.
                last = next(x for x in reversed(rows) if x.oid == r.oid)
                create.superseded = (last.tablespace, last.relfilenode) != create.key
                break

    def _toast_owners(self, top: int) -> dict[int, int]:
        """Toast table oid -> table oid, over every table's newest shape `top` sees."""
        out: dict[int, int] = {}
        for oid, versions in self._versions.items():
            seen = pick(versions, _END_OF_TIME, top, top)
            if seen is not None and seen.table is not None and seen.table.toast_relid:
                out[seen.table.toast_relid] = oid
        return out

    def _own_create(self, key: Key, top: int) -> Create | None:
        for c in reversed(self._creates.get(key, ())):
            if c.commit_lsn is None and c.top == top:
                return c
        return None

    # --- transaction end -----------------------------------------------------------

    def _discard(self, xid: int) -> None:
        self._top.pop(xid, None)
        st = self._xacts.pop(xid, None)
        if st is not None:
            for e in st.entries:
                self._unrecord(e)

    def _abort(self, xid: int, subxids: Iterable[int]) -> None:
        """An abort record: of a subtransaction (ROLLBACK TO) or of a whole transaction."""
        members = [xid, *subxids] if xid in self._top else self._members(xid, subxids)
        for member in members:
            self._discard(member)

    def _abort_old(self, oldest_running_xid: int) -> None:
        """Forget transactions older than any running one: they crashed (ReorderBufferAbortOld)."""
        for xid in list(self._xacts):
            if xid_precedes(self._top.get(xid, xid), oldest_running_xid):
                self._discard(xid)
        if self._initial is not None and not xid_precedes(oldest_running_xid, self._initial.xmax):
            # Every transaction the snapshot could have missed is decided by now.
            self._initial = None

    def _commit(self, ev: CommitEvent) -> None:
        members = self._members(ev.xid, ev.subxids)
        survivors = frozenset([ev.xid, *ev.subxids])
        already = (self._initial is not None and self._initial.xid_visible(ev.xid)) or (
            ev.lsn <= self.applied_upto
        )
        if already or (ev.db_oid and ev.db_oid != self.db_oid):
            for member in members:
                self._discard(member)
            return
        self._find_swaps(members)
        merged = XactState()
        for member in members:
            if member not in survivors:
                # A subtransaction the commit does not list was rolled back.
                self._discard(member)
                continue
            self._top.pop(member, None)
            st = self._xacts.pop(member, None)
            if st is None:
                continue
            merged.entries += st.entries
            merged.named |= st.named
            merged.truncated |= st.truncated
            merged.relcache |= st.relcache
            merged.relcache_all |= st.relcache_all
            merged.catalog_changes |= st.catalog_changes
            merged.ddl_messages += st.ddl_messages
            merged.class_rows += st.class_rows
            merged.class_lost += st.class_lost
        self._collect_relcache(merged, ev.invalidations)
        if ev.invalidations:
            merged.catalog_changes = True
        changed = any(not isinstance(e, Create) for e in merged.entries)
        for e in merged.entries:
            e.commit_lsn = ev.lsn
            e.xids = survivors
        fallback = self._fallback
        fallback.invalidate(merged)
        changed |= fallback.resolve_creates(ev, merged, survivors)
        if merged.catalog_changes and merged.ddl_messages == 0 and not self.ddl_capture:
            changed |= fallback.refresh_from_catalog(ev, merged, survivors)
        if merged.entries or merged.catalog_changes or changed:
            self.applied_upto = ev.lsn  # committed entries may have moved: is_toast's cache
        else:
            self._applied_upto = ev.lsn  # nothing recorded: every answer stands
        if changed:
            self.version += 1

    # --- lookups -------------------------------------------------------------------

    def _tx(self, xid: int | None) -> int | None:
        return self._top.get(xid, xid) if xid is not None else None

    def by_oid(self, oid: int, lsn: int, xid: int | None = None) -> TableDef | None:
        """The definition of table `oid` seen by `xid` (or by everyone) at `lsn`."""
        v = pick(self._versions.get(oid, ()), lsn, xid, self._tx(xid))
        return v.table if v is not None else None

    def by_relfilenode(
        self, locator: RelFileLocator, lsn: int, xid: int | None = None
    ) -> TableDef | None:
        """The table whose heap or toast relfilenode `locator` is, as seen at `lsn`."""
        hit = self._lookup(locator, lsn, xid)
        return hit.table if hit is not None else None

    def is_toast_now(self, locator: RelFileLocator) -> bool:
        """`is_toast(locator, END_OF_TIME)`: the reorder buffer's check, asked for every
        queued heap insert and every replayed change (the same cache, inlined)."""
        key = (locator.spc_oid, locator.db_oid, locator.rel_number, _END_OF_TIME)
        found = self._toast_cache.get(key)
        if found is None:
            return self.is_toast(locator, _END_OF_TIME)
        return found

    def is_toast(self, locator: RelFileLocator, lsn: int, xid: int | None = None) -> bool:
        if xid is None:
            # Asked for every heap insert and at every replayed change (the reorder
            # buffer's toast check), so answers for everyone (xid None) are cached. They
            # depend on committed entries only, which change only at a commit of this
            # database (_commit, which then moves `applied_upto`) or at construction;
            # prune keeps every answer still askable but rebinds `_maps`. Setting
            # `applied_upto` or `version`, and prune, clear the cache.
            key = (locator.spc_oid, locator.db_oid, locator.rel_number, lsn)
            cache = self._toast_cache
            found = cache.get(key)
            if found is None:
                if len(cache) >= _TOAST_CACHE_MAX:
                    cache.clear()
                hit = self._lookup(locator, lsn, None)
                found = cache[key] = hit is not None and hit.kind is RelClass.TOAST
            return found
        hit = self._lookup(locator, lsn, xid)
        return hit is not None and hit.kind is RelClass.TOAST

    def _lookup(self, locator: RelFileLocator, lsn: int, xid: int | None) -> Classification | None:
        if locator.db_oid != self.db_oid:
            return None
        key = (locator.spc_oid, locator.rel_number)
        top = self._tx(xid)
        for mk in reversed(self._by_filenode.get(key, ())):
            m = pick(self._maps[mk], lsn, xid, top)
            if m is None or m.key != key:
                continue  # never mapped at this LSN, or the table moved on since
            v = pick(self._versions.get(m.oid, ()), lsn, xid, top)
            if v is None or v.table is None:
                continue
            return Classification(RelClass.TOAST if m.toast else RelClass.TABLE, v.table)
        return None

    def classify(self, locator: RelFileLocator, xid: int, lsn: int) -> Classification:
        """TABLE, TOAST, REWRITE or UNKNOWN for a heap change; see the module docstring."""
        hit = self._lookup(locator, lsn, xid)
        if hit is not None:
            return hit
        if locator.db_oid == self.db_oid:
            top = self._top.get(xid, xid)
            for c in self._creates.get((locator.spc_oid, locator.rel_number), ()):
                if c.owned_by(xid, top) and c.own_lsn <= lsn:
                    if c.unresolved:
                        return UNKNOWN
                    if c.swap is not None and c.swap[0] <= lsn:
                        # The table's own relfilenode from the swap on (`_find_swaps`).
                        v = pick(self._versions.get(c.swap[1], ()), lsn, xid, top)
                        if v is None or v.table is None:
                            return UNKNOWN
                        kind = RelClass.TOAST if c.swap_toast else RelClass.TABLE
                        return Classification(kind, v.table)
                    return REWRITE
        return UNKNOWN

    def classify_span(
        self, locator: RelFileLocator, xid: int, lsn: int
    ) -> tuple[Classification, int, int]:
        """`classify`, with the LSN range [lo, hi) around `lsn` over which the answer for
        this xid stays the same as long as the history is not changed.

        `pick` answers from the entries whose threshold is at or below the LSN (own_lsn
        for the xid's own entries, commit_lsn for others'), so the answer can only change
        where the LSN crosses a threshold of an entry it may consult: the mappings of the
        relfilenode, the versions of the tables they name, and its smgr creates.
        """
        found = self.classify(locator, xid, lsn)
        lo, hi = 0, _END_OF_TIME
        if locator.db_oid != self.db_oid:
            return found, lo, hi
        key = (locator.spc_oid, locator.rel_number)
        top = self._top.get(xid, xid)
        lists: list[Iterable[Owned]] = [self._creates.get(key, ())]
        for mk in self._by_filenode.get(key, ()):
            lists.append(self._maps.get(mk, ()))
            lists.append(self._versions.get(mk[0], ()))
        for c in self._creates.get(key, ()):
            if c.swap is not None and c.owned_by(xid, top):
                if c.swap[0] <= lsn:
                    lo = max(lo, c.swap[0])
                else:
                    hi = min(hi, c.swap[0])
        for entries in lists:
            for e in entries:
                if e.owned_by(xid, top):
                    at = e.own_lsn
                elif e.commit_lsn is not None:
                    at = e.commit_lsn
                else:
                    continue
                if at <= lsn:
                    lo = max(lo, at)
                else:
                    hi = min(hi, at)
        return found, lo, hi

    def tables(self, lsn: int) -> list[TableDef]:
        """Every table defined for everyone at `lsn`."""
        out = []
        for oid in self._versions:
            t = self.by_oid(oid, lsn)
            if t is not None:
                out.append(t)
        return out

    def pending_xids(self) -> list[int]:
        """xids with schema state awaiting their commit or abort."""
        return sorted(self._xacts)

    # --- housekeeping --------------------------------------------------------------

    def prune(self, before_lsn: int) -> None:
        """Drop history nobody can ask for any more: entries superseded, and creates
        committed, before `before_lsn` (the restart LSN: no older change is replayed)."""
        for versions in self._versions.values():
            prune_superseded(versions, before_lsn)
        for maps in self._maps.values():
            prune_superseded(maps, before_lsn)
        for key, creates in self._creates.items():
            creates[:] = [c for c in creates if c.commit_lsn is None or c.commit_lsn >= before_lsn]
            del key
        for oid in [oid for oid, lst in self._versions.items() if only_tombstone(lst, before_lsn)]:
            del self._versions[oid]
            self._maps.pop((oid, False), None)
            self._maps.pop((oid, True), None)
        self._versions = {k: v for k, v in self._versions.items() if v}
        self._maps = {k: v for k, v in self._maps.items() if v}
        self._toast_cache.clear()
        self._creates = {k: v for k, v in self._creates.items() if v}
        index: dict[Key, list[MapKey]] = {}
        for mk, maps in self._maps.items():
            for m in maps:
                lst = index.setdefault(m.key, [])
                if mk not in lst:
                    lst.append(mk)
        self._by_filenode = index
