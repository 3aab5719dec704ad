"""Chunked snapshot reads: key or CTID ranges of one table, between two watermarks.

Receives a `ChunkSpec` (table OID, bounds, optional WHERE filter) and limits in rows
and bytes; hands back a `ChunkRead`: the rows in their COPY BINARY send-format fields,
plus the MVCC snapshot they were read in and the LSNs of the two watermarks written
around the read (service.tablesnap.watermark explains the method). The caller, the
snapshotter, publishes them when decoding reaches the high watermark.

Bounds. A table with a primary key (or a replica-identity index) is split by key:
a chunk is `(lo, hi]` in index order, `lo`/`hi` being the key columns' text
(`col::text`, cast back with `%s::type`), `None` for the table's start / end;
`plan_key_bound` finds the next `hi` by an index scan `OFFSET rows-1 LIMIT 1`, so
chunks can be planned ahead and read by several readers at once. A table without one
is split by heap pages: a chunk is the pages `[lo, hi)`, read by a TID range scan
(`ctid >= '(lo,0)' AND ctid < '(hi,0)'`); `hi = None` is "to the end".

Order of a read (`ChunkReader.read`): the low watermark is written (on an autocommit
connection, non-transactional: it must mark a WAL position, take no xid and survive
nothing); then one REPEATABLE READ transaction reads the catalog and the chunk
(`Catalog.snapshot(inside=...)`, so the table definition and the rows come from the
same snapshot, whose xmin/xmax/xip the window check needs); then the high watermark.

Limits. At most `rows` rows (`LIMIT rows + 1`: the extra row, received and not kept,
is what says the chunk was cut), and at most `max_bytes` bytes of field data:
rows past the byte budget are received but not kept, and the chunk is `cut` (its real
upper bound is the last kept key, or the last kept row's page for CTID chunks); the
rest becomes a new chunk. Memory: one chunk's fields, plus the COPY parser's tail
(one row plus one network buffer), whatever the table size. Values are not decoded
here: `ChunkRead.values(row)` makes the lazily decoded `ColumnValue`s at publication,
with the same column plans (send format rewritten to the stored form) as
connectors.tablesnap.reader, so values equal the WAL path's.

Under the native core (`PGCDC_IMPL`, service.impl.native_row_core) a chunk's COPY
stream is kept whole (one chunk's bytes, rows past the limits included) and split in
Rust (`service._native.CopyChunk`, `_read_native`), with the GIL released; `rows` then
shows the kept rows as field lists made on access (copy_binary.ChunkRows), and `copy`
is the chunk the Avro plugin's native encoder reads the rows from at publication
(`TablePlan.copy_fields` says where each column sits, or why the table cannot).

Shared snapshot (`SharedSnapshotReader`, the default initial snapshot): the readers do
not take fresh snapshots and write no watermarks. Each one opens a REPEATABLE READ,
read-only transaction and imports the snapshot the aligned catalog transaction exported
(`SET TRANSACTION SNAPSHOT`, as pg_dump -j's workers import the leader's and as
walsender's CREATE_REPLICATION_SLOT ... EXPORT_SNAPSHOT hands one out), checks that
`pg_current_snapshot()` there is the exported one, and then plans and reads every chunk
inside that one transaction: all readers see exactly the rows of the aligned snapshot.

Errors: SQL failures surface as psycopg2 errors (the caller retries the chunk); a
table that is gone at read time gives `ChunkRead.missing`. A shared reader whose
connection is gone cannot import the snapshot again (its exporter has ended):
`SourceUnavailableError`.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import psycopg2.extensions

from connectors.postgres.catalog import Catalog, parse_pg_snapshot
from connectors.postgres.catalog_types import CatalogTypes
from connectors.postgres.copy_binary import ChunkRows, CopyBuffer, CopyRows, native_chunk
from connectors.postgres.server import connect
from connectors.tablesnap.reader import (
    _NAMES_SQL,
    _NO_SEND_SQL,
    SnapshotReader,
    _ColumnPlan,
    quote_ident,
)
from service.config import FilterSettings
from service.errors import SourceSetupError, SourceUnavailableError
from service.impl import native_row_core
from service.lsn import parse_lsn
from service.output.api import ColumnValue, RelationInfo
from service.schema.history import SchemaHistory
from service.schema.tabledef import CatalogSnapshot, TableDef
from service.tablesnap.plan import Bound, json_bound
from service.types.registry import TypeInfo
from service.types.regtypes import REG_OUTPUTS
from service.types.rowdecode import HistoryRows
from service.types.sendform import base_type, snapshot_registry
from service.types.snapshot_rewrites import EXTENSION_TEXT_VALUED, text_valued
from service.types.unknown import UnknownTypePolicy

WATERMARK_PREFIX = "__pgcdc.snapshot.watermark"
SIGNAL_PREFIX = "__pgcdc.snapshot.signal"

_ALIAS = "pgcdc_chunk"


@dataclass(slots=True, frozen=True)
class ChunkSpec:
    """One chunk to read. `keyed`: key bounds (tuples of text); else page numbers."""

    table_oid: int
    table: str  # schema.name, for logs
    keyed: bool
    lo: Bound  # key: exclusive (None: from the start); pages: inclusive first page
    hi: Bound  # key: inclusive (None: to the end); pages: exclusive (None: to the end)
    where: str | None = None

    def bounds(self) -> list[Any]:
        return [json_bound(self.lo), json_bound(self.hi)]


@dataclass(slots=True)
class TablePlan:
    """How one table definition is read: columns, key positions, relation."""

    table: TableDef
    relation: RelationInfo
    plans: list[_ColumnPlan]
    key_types: list[str]  # format_type of each key column, for casts of the bounds
    key_names: list[str]
    estimate: int  # pg_class.reltuples (0: unknown)
    pages: int  # pg_relation_size / BLCKSZ at planning time
    # `copy_fields`, computed once; `native_off_logged`: the table's fallback was logged
    fields: tuple[dict[str, int], str] | None = None
    native_off_logged: bool = False

    def copy_fields(self) -> tuple[dict[str, int], str]:
        """Where each live column's value sits in a COPY row, for the native encoder
        (-1: not selected, always NULL: a virtual generated column), and "" ; or the
        reason the table's rows cannot be encoded from COPY natively: a column read as
        something other than its send format (its text, `unknown_types = bytes`...).
        The encoder takes two kinds of column read as `::text`: xml (its stored text)
        and the types whose value is their output text (ltree, lquery, cube, earth, seg,
        the isn types: EXTENSION_TEXT_VALUED; jsonpath, aclitem, the reg* types), whose
        field is that value; and
        arrays of the latter read as `::text[]`, whose elements are those values."""
        if self.fields is not None:
            return self.fields
        at, out, reason = 0, {}, ""
        for p in self.plans:
            if p.expr is None:
                out[p.name] = -1
                continue
            ident = quote_ident(p.name)
            as_text = p.expr == f"{ident}::text" and (
                p.info.output_src == "xml_out" or _text_is_value(p)
            )
            as_texts = p.expr == f"{ident}::text[]" and _elements_text_are_value(p)
            if p.mode != "stored" or (p.expr != ident and not as_text and not as_texts):
                reason = reason or f"column {p.name} is read as {p.expr} ({p.mode})"
            out[p.name] = at
            at += 1
        self.fields = (out, reason)
        return self.fields


@dataclass(slots=True)
class ChunkRead:
    """The rows of one chunk as read (see the module docstring)."""

    spec: ChunkSpec
    plan: TablePlan | None
    snapshot: CatalogSnapshot | None
    low_lsn: int
    high_lsn: int = 0
    # The kept rows' selected fields; under the native core a `ChunkRows` over `copy`.
    rows: Sequence[list[bytes | None]] = field(default_factory=list)
    copy: Any = None  # the native CopyChunk the rows are in (None: Python parsed them)
    last_keys: tuple[str, ...] | None = None  # key text of the last kept row
    # CTID chunks: the page of the last kept row; once cut, the first page not kept.
    last_page: int = 0
    nbytes: int = 0
    cut: bool = False  # the row or byte limit stopped the chunk before its `hi`
    missing: bool = False  # the table no longer exists
    key_index: list[tuple[_ColumnPlan, int | None]] | None = None  # cached by `key`

    @property
    def real_hi(self) -> Bound:
        """The chunk's upper bound as read: `hi`, or where the limits cut it."""
        if not self.cut:
            return self.spec.hi
        return self.last_keys if self.spec.keyed else self.last_page

    def key(self, fields: Sequence[bytes | None], names: Sequence[str]) -> tuple[str | None, ...]:
        """The row's key as the text of its key columns (only those are decoded)."""
        assert self.plan is not None
        if self.key_index is None:
            pos, at = 0, {}
            for p in self.plan.plans:
                if p.expr is not None:
                    at[p.name] = pos
                    pos += 1
            by_name = {p.name: p for p in self.plan.plans}
            self.key_index = [(by_name[n], at.get(n)) for n in names]
        where = self.spec.table
        return tuple(
            p.value(None if i is None else fields[i], where).text for p, i in self.key_index
        )

    def values(self, fields: Sequence[bytes | None]) -> list[ColumnValue]:
        assert self.plan is not None
        where = self.spec.table
        it = iter(fields)
        return [p.value(next(it) if p.expr is not None else None, where) for p in self.plan.plans]


class ChunkReader:
    """One reader: its own connections; reads chunks one at a time (not thread-safe)."""

    def __init__(
        self,
        dsn: str,
        filters: FilterSettings,
        *,
        unknown_types: UnknownTypePolicy | None = None,
        application_name: str = "pgcdc-snapshot",
    ) -> None:
        self.dsn = dsn
        self._columns = SnapshotReader(filters, unknown_types=unknown_types)
        self._conn: Any = None
        self._catalog = Catalog(dsn)
        self._application_name = application_name
        self._cache: dict[int, TablePlan] = {}
        self.reads = 0
        # the native core (PGCDC_IMPL): chunks are split in Rust (`_read_native`)
        self._native = native_row_core()

    # --- connections ------------------------------------------------------------------

    def _sql(self) -> Any:
        if self._conn is None or self._conn.closed:
            self._conn = connect(self.dsn, self._application_name)
            self._conn.autocommit = True
            with self._conn.cursor() as cur:
                # `emit(flush=True)` before PostgreSQL 17: the commit flushes locally,
                # whatever the role's setting, without waiting for synchronous standbys
                cur.execute("SET synchronous_commit = local")
        return self._conn

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None
        self._catalog.close()

    def emit(
        self,
        prefix: str,
        payload: Mapping[str, Any],
        *,
        transactional: bool = False,
        flush: bool = False,
    ) -> int:
        """pg_logical_emit_message; returns the message's LSN. `flush`: the WAL is
        flushed past the message once this returns (outside a transaction block), or at
        the block's COMMIT (inside one; `_locked`).

        Why: a walsender sends only flushed WAL, and a non-transactional message is not
        flushed by itself (no commit record follows it): it waited for the WAL writer
        (wal_writer_delay, 200 ms by default) or another session's commit. A chunk is
        published only once its high watermark is decoded, so each chunk waited for
        it: 400k narrow rows, one reader, went from 91k to 132k rows/s with the WAL
        writer at 10 ms. From PostgreSQL 17 the message flushes itself (its `flush`
        argument); before, the statement takes a transaction ID, so that its commit
        record is written and flushed (RecordTransactionCommit; the connection has
        synchronous_commit = local), and with it the message before it."""
        conn = self._sql()
        text = json.dumps(payload, separators=(",", ":"))
        call, also = "pg_logical_emit_message(%s, %s, %s)::text", ""
        if flush and conn.server_version >= 170000:
            call = "pg_logical_emit_message(%s, %s, %s, true)::text"
        elif flush:
            also = ", pg_current_xact_id()"
        with conn.cursor() as cur:
            cur.execute(f"SELECT {call}{also}", (transactional, prefix, text))
            row = cur.fetchone()
        return parse_lsn(str(row[0]))

    # --- planning ---------------------------------------------------------------------

    def table_plan(self, cursor: Any, snapshot: CatalogSnapshot, oid: int) -> TablePlan | None:
        """The read plan of table `oid` as `snapshot` defines it (cached per definition)."""
        table = next((t for t in snapshot.tables if t.oid == oid), None)
        if table is None:
            return None
        cached = self._cache.get(oid)
        if cached is not None and cached.table == table:
            return cached
        conn: psycopg2.extensions.connection = cursor.connection
        types = CatalogTypes(conn)

        def load_names(oids: Sequence[int]) -> Mapping[int, str]:
            cursor.execute(_NAMES_SQL, (list(oids),))
            return {int(o): str(n) for o, n in cursor.fetchall()}

        rows = HistoryRows(
            SchemaHistory.from_catalog_snapshot(snapshot),
            types.ensure,
            load_names,
            unknown_types=self._columns.unknown_types,
        )
        (rel,) = rows.relations_by_oid([oid], snapshot.lsn, 0)
        registry = snapshot_registry(types.registry)
        cursor.execute(_NO_SEND_SQL, ([t.oid for t in types.registry.user_types()],))
        no_send = frozenset(int(r[0]) for r in cursor.fetchall())
        plans = self._columns._plans(table, rel, types.registry, registry, no_send)
        by_attnum = {c.attnum: c for c in table.columns}
        key_names = [by_attnum[a].name for a in table.key_attnums]
        meta = {c.name: c for c in rel.columns}
        key_types = [meta[n].type_name for n in key_names]
        cursor.execute(
            "SELECT reltuples::bigint, pg_relation_size(oid) / current_setting('block_size')::int"
            " FROM pg_catalog.pg_class WHERE oid = %s",
            (oid,),
        )
        estimate, pages = cursor.fetchone() or (0, 0)
        plan = TablePlan(table, rel, plans, key_types, key_names, max(0, int(estimate)), int(pages))
        self._cache[oid] = plan
        return plan

    def describe(self, oid: int) -> TablePlan | None:
        """The table's current plan, read in a snapshot of its own (for planning)."""
        found: list[TablePlan | None] = []
        self._catalog.snapshot(
            inside=lambda cur, snap: found.append(self.table_plan(cur, snap, oid))
        )
        return found[0] if found else None

    def empty_tables(self, tables: Sequence[str], *, until_rows: bool = False) -> set[str]:
        """The tables of `tables` ("schema.name") without a row (one page read each:
        `SELECT 1 ... LIMIT 1`), as this reader's connection sees them now; with
        `until_rows`, asking stops at the first table that has one. Under the shared
        snapshot the answer holds for every reader, so the snapshot's last record is
        known before it is published. A table not in the catalog is left to the read
        (which finds it missing)."""
        empty = set()
        with self._sql().cursor() as cur:
            for table in tables:
                schema, _, name = table.partition(".")
                cur.execute(
                    "SELECT pg_catalog.quote_ident(n.nspname) || '.' ||"
                    " pg_catalog.quote_ident(c.relname) FROM pg_catalog.pg_class c"
                    " JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace"
                    " WHERE n.nspname = %s AND c.relname = %s",
                    (schema, name),
                )
                row = cur.fetchone()
                if row is None:
                    continue
                cur.execute(f"SELECT 1 FROM ONLY {row[0]} LIMIT 1")
                if cur.fetchone() is None:
                    empty.add(table)
                elif until_rows:
                    break
        return empty

    def plan_key_bound(
        self, plan: TablePlan, lo: tuple[str, ...] | None, rows: int, where: str | None
    ) -> tuple[str, ...] | None:
        """The key `rows` rows after `lo`, or None when no more than `rows` remain (the
        last chunk). One row past the bound is asked for: a table whose rows end exactly
        at a chunk's bound must not leave an empty chunk behind its real last one, or the
        last row would lose its `last`/`last_in_data_collection` marker."""
        keys = ", ".join(f"{_ALIAS}.{quote_ident(k)}" for k in plan.key_names)
        conds, params = self._key_conditions(plan, lo, None, where)
        sql = (
            f"SELECT {', '.join(f'{quote_ident(k)}::text' for k in plan.key_names)} "
            f"FROM ONLY {_qualified(plan.table)} AS {_ALIAS}{conds} ORDER BY {keys} "
            f"OFFSET {max(0, rows - 1)} LIMIT 2"
        )
        with self._sql().cursor() as cur:
            cur.execute(sql, params)
            found = cur.fetchall()
        return tuple(str(v) for v in found[0]) if len(found) == 2 else None

    @staticmethod
    def _key_conditions(
        plan: TablePlan, lo: tuple[str, ...] | None, hi: tuple[str, ...] | None, where: str | None
    ) -> tuple[str, list[str]]:
        keys = "(" + ", ".join(quote_ident(k) for k in plan.key_names) + ")"
        casts = "(" + ", ".join(f"%s::{t}" for t in plan.key_types) + ")"
        conds: list[str] = []
        params: list[str] = []
        if lo is not None:
            conds.append(f"{keys} > {casts}")
            params.extend(lo)
        if hi is not None:
            conds.append(f"{keys} <= {casts}")
            params.extend(hi)
        if where:
            conds.append(f"({where})")
        return (" WHERE " + " AND ".join(conds) if conds else ""), params

    # --- reading ----------------------------------------------------------------------

    def read(
        self,
        spec: ChunkSpec,
        *,
        rows: int,
        max_bytes: int,
        low: Mapping[str, Any],
        high: Mapping[str, Any],
        on_read: Callable[[ChunkRead], None],
        lock: bool = False,
    ) -> ChunkRead:
        """Low watermark, the chunk in a fresh snapshot, `on_read(chunk)`, high watermark.

        `on_read` runs before the high watermark exists: whoever decodes the high
        watermark finds the rows already handed over. With `lock`, the whole sequence
        runs while this reader holds the table in SHARE mode (see `_locked`)."""
        if lock:
            return self._locked(spec, rows, max_bytes, low, high, on_read)
        out = ChunkRead(spec, None, None, self.emit(WATERMARK_PREFIX, low))
        self._catalog.snapshot(
            inside=lambda cur, snap: self._read_in(cur, snap, out, rows, max_bytes)
        )
        self.reads += 1
        on_read(out)
        out.high_lsn = self.emit(WATERMARK_PREFIX, high, flush=True)
        return out

    def _locked(
        self,
        spec: ChunkSpec,
        rows: int,
        max_bytes: int,
        low: Mapping[str, Any],
        high: Mapping[str, Any],
        on_read: Callable[[ChunkRead], None],
    ) -> ChunkRead:
        """The read of a chunk whose window the stream cannot touch (LockTableCommand).

        For tables without a key (CTID chunks), where any change of the table inside
        the window forces a re-read, so that a table under constant writes would be read
        again and again: SHARE mode conflicts with the ROW EXCLUSIVE lock of every
        writer, and a writer keeps its lock until after it left the proc array
        (CommitTransaction: ProcArrayEndTransaction, then the resource owner releases
        the locks). So once the lock is granted, every writer of the table is committed
        and visible to the snapshot taken next, and none can commit until the high
        watermark is written: the window holds no change of the table. Writers of the
        table wait for one chunk read; `lock_timeout` bounds the wait for the lock (a
        psycopg2 error: the caller retries the chunk)."""
        conn = self._sql()
        with conn.cursor() as cur:
            cur.execute("BEGIN")
            try:
                cur.execute("SET LOCAL lock_timeout = '10s'")
                cur.execute("SELECT %s::oid::regclass::text", (spec.table_oid,))
                row = cur.fetchone()
                cur.execute(f"LOCK TABLE ONLY {row[0]} IN SHARE MODE")
                out = ChunkRead(spec, None, None, self.emit(WATERMARK_PREFIX, low))

                def inside(c: Any, snap: CatalogSnapshot) -> None:
                    # The read's own ACCESS SHARE lock may queue behind an ACCESS
                    # EXCLUSIVE request that waits for our SHARE lock: a deadlock the
                    # server cannot see (it runs through this process). Bounded here.
                    c.execute("SET LOCAL lock_timeout = '10s'")
                    self._read_in(c, snap, out, rows, max_bytes)

                self._catalog.snapshot(inside=inside)
                self.reads += 1
                on_read(out)
                out.high_lsn = self.emit(WATERMARK_PREFIX, high, flush=True)
            except BaseException:
                if not conn.closed:
                    conn.rollback()
                raise
            cur.execute("COMMIT")
        return out

    def _read_in(
        self, cursor: Any, snapshot: CatalogSnapshot, out: ChunkRead, rows: int, max_bytes: int
    ) -> None:
        spec = out.spec
        out.snapshot = snapshot
        plan = self.table_plan(cursor, snapshot, spec.table_oid)
        if plan is None:
            out.missing = True
            return
        out.plan = plan
        selected = [p.expr for p in plan.plans if p.expr is not None]
        nsel = len(selected)
        if spec.keyed:
            extra = [f"{quote_ident(k)}::text" for k in plan.key_names]
            lo = spec.lo if isinstance(spec.lo, tuple) else None
            hi = spec.hi if isinstance(spec.hi, tuple) else None
            conds, params = self._key_conditions(plan, lo, hi, spec.where)
            # Qualified: an output column of the same name (the key's text) would win.
            order = ", ".join(f"{_ALIAS}.{quote_ident(k)}" for k in plan.key_names)
        else:
            extra = ["(ctid::text::point)[0]::bigint::text"]
            parts = []
            if isinstance(spec.lo, int) and spec.lo > 0:
                parts.append(f"ctid >= '({spec.lo},0)'::tid")
            if isinstance(spec.hi, int):
                parts.append(f"ctid < '({spec.hi},0)'::tid")
            if spec.where:
                parts.append(f"({spec.where})")
            conds, params = (" WHERE " + " AND ".join(parts) if parts else ""), []
            order = f"{_ALIAS}.ctid"
        columns = ", ".join([*selected, *extra])
        # Key chunks stop at `rows` rows; page chunks are bounded by their pages. One row
        # more is asked for, and only received: it tells a chunk cut by the limit from one
        # that ends exactly there (which is then not cut, and may be the table's last).
        limit = f" LIMIT {int(rows) + 1}" if spec.keyed else ""
        sql = (
            f"COPY (SELECT {columns} FROM ONLY {_qualified(plan.table)} AS {_ALIAS}{conds} "
            f"ORDER BY {order}{limit}) TO STDOUT (FORMAT binary)"
        )
        sql = cursor.mogrify(sql, params).decode() if params else sql
        if conn_encoding(cursor) != "UTF8":
            cursor.execute("SET LOCAL client_encoding = 'UTF8'")
        if self._native is not None:
            self._read_native(cursor, sql, out, nsel, len(extra), rows, max_bytes)
            return
        kept: list[list[bytes | None]] = []
        out.rows = kept

        def on_row(fields: list[bytes | None]) -> None:
            if out.cut:
                return  # past the budget: received, not kept
            size = sum(len(f) for f in fields if f is not None)
            tail = fields[nsel:]
            if spec.keyed:
                if len(kept) >= rows or (kept and out.nbytes + size > max_bytes):
                    out.cut = True
                    return
                out.last_keys = tuple((t or b"").decode() for t in tail)
            else:
                page = int((tail[0] or b"0").decode())
                # Whole pages only: the budget may be overrun by the rest of one page.
                if kept and out.nbytes + size > max_bytes and page != out.last_page:
                    out.cut, out.last_page = True, page
                    return
                out.last_page = page
            kept.append(fields[:nsel])
            out.nbytes += size

        target = CopyRows(nsel + len(extra), on_row)
        cursor.copy_expert(sql, target)
        target.close()

    def _read_native(
        self,
        cursor: Any,
        sql: str,
        out: ChunkRead,
        nsel: int,
        nextra: int,
        rows: int,
        max_bytes: int,
    ) -> None:
        """`_read_in`'s COPY under the native core: the stream kept whole and split in
        Rust (`CopyChunk`), then cut by the same rules as `_read_in`'s `on_row`, reading
        only the sizes and the few key fields the cut needs. `out.rows` shows the kept
        rows (`ChunkRows`); `out.copy` is the chunk, which the native encoder reads."""
        spec = out.spec
        buffer = CopyBuffer()
        cursor.copy_expert(sql, buffer)
        chunk = native_chunk(self._native, buffer.getvalue(), nsel + nextra, spec.table)
        del buffer
        sizes = chunk.sizes()
        kept, nbytes = 0, 0
        for i, size in enumerate(sizes):
            if spec.keyed:
                if kept >= rows or (kept and nbytes + size > max_bytes):
                    out.cut = True
                    break
            # Whole pages only: the budget may be overrun by the rest of one page.
            elif kept and nbytes + size > max_bytes:
                page = _page(chunk, i, nsel)
                if page != _page(chunk, kept - 1, nsel):
                    out.cut, out.last_page = True, page
                    break
            kept += 1
            nbytes += size
        if kept:
            if spec.keyed:
                out.last_keys = tuple(
                    (chunk.field(kept - 1, nsel + j) or b"").decode() for j in range(nextra)
                )
            elif not out.cut:
                out.last_page = _page(chunk, kept - 1, nsel)
        out.nbytes = nbytes
        out.rows = ChunkRows(chunk, nsel, kept)
        out.copy = chunk


class SharedSnapshotReader(ChunkReader):
    """A reader whose one transaction imported the aligned snapshot (module docstring).

    Planning (`describe`, `plan_key_bound`) and reads (`read_shared`) all run in that
    transaction, against `snapshot`, the aligned `CatalogSnapshot` it imported. Not
    thread-safe: one thread per reader.
    """

    def __init__(
        self,
        dsn: str,
        filters: FilterSettings,
        snapshot: CatalogSnapshot,
        snapshot_id: str,
        *,
        unknown_types: UnknownTypePolicy | None = None,
        application_name: str = "pgcdc-snapshot-export",
    ) -> None:
        super().__init__(
            dsn, filters, unknown_types=unknown_types, application_name=application_name
        )
        self.snapshot = snapshot
        self.snapshot_id = snapshot_id
        self.backend_pid = 0
        self._imported = False

    def import_snapshot(self) -> str:
        """Open the transaction and import the snapshot (ImportSnapshot in snapmgr.c);
        returns its `pg_current_snapshot()`. Must run while the exporter is open."""
        conn = connect(self.dsn, self._application_name)
        try:
            with conn.cursor() as cur:
                cur.execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
                cur.execute("SET TRANSACTION SNAPSHOT %s", (self.snapshot_id,))
                cur.execute("SELECT pg_catalog.pg_current_snapshot()::text, pg_backend_pid()")
                text, pid = cur.fetchone() or ("", 0)
        except psycopg2.Error as exc:
            conn.close()
            raise SourceSetupError(
                f"importing the exported snapshot {self.snapshot_id} failed: {exc}".strip(),
                lsn=self.snapshot.lsn,
            ) from exc
        snap = self.snapshot
        if parse_pg_snapshot(str(text)) != (snap.xmin, snap.xmax, snap.xip):
            conn.close()
            raise SourceSetupError(
                f"the imported snapshot {text} is not the exported one "
                f"({snap.xmin}:{snap.xmax}:{sorted(snap.xip)})",
                lsn=snap.lsn,
            )
        self._conn, self.backend_pid, self._imported = conn, int(pid), True
        return str(text)

    def _sql(self) -> Any:
        if not self._imported or self._conn is None or self._conn.closed:
            raise SourceUnavailableError(
                f"the connection holding the exported snapshot {self.snapshot_id} is gone;"
                " it cannot be imported again (its exporter has ended)",
                lsn=self.snapshot.lsn,
            )
        return self._conn

    def describe(self, oid: int) -> TablePlan | None:
        with self._sql().cursor() as cur:
            return self.table_plan(cur, self.snapshot, oid)

    def read_shared(self, spec: ChunkSpec, *, rows: int, max_bytes: int) -> ChunkRead:
        """The chunk as the shared snapshot sees it (no watermarks)."""
        out = ChunkRead(spec, None, self.snapshot, self.snapshot.lsn)
        try:
            with self._sql().cursor() as cur:
                self._read_in(cur, self.snapshot, out, rows, max_bytes)
        except psycopg2.Error as exc:
            raise SourceUnavailableError(
                f"reading chunk {spec.bounds()} in the exported snapshot failed: {exc}".strip(),
                lsn=self.snapshot.lsn,
                relation=spec.table,
            ) from exc
        self.reads += 1
        return out

    def close(self) -> None:
        self._imported = False
        super().close()


# Output functions of the types the snapshot reads as `::text` whose text is the value
# the native encoder writes as a string (tablesnap::copy's `text_read`): the recognised
# extension types of EXTENSION_TEXT_VALUED, and jsonpath (TEXT_VALUED: its `::text` is
# the I/O cast, jsonpath_out's text, which is also its published value), and aclitem and
# the reg* types (TEXT_VALUED: their `::text` is the server's output function over the
# catalog at the snapshot, which is the Python path's value too).
_NATIVE_TEXT_READ = EXTENSION_TEXT_VALUED | {"jsonpath_out", "aclitemout"} | REG_OUTPUTS


def _native_text_read(base: TypeInfo) -> bool:
    """Is `base` (a base type) read as its output text, which is its value
    (service.types.snapshot_rewrites.text_valued), and taken so by the native COPY path?"""
    return base.output_src in _NATIVE_TEXT_READ and text_valued(base)


def _text_is_value(p: _ColumnPlan) -> bool:
    """Is `p` a column the snapshot reads as its output text, which is its value, and the
    native COPY path takes so (`_native_text_read`)?"""
    return _native_text_read(base_type(p.registry.get(p.type_oid), p.registry))


def _elements_text_are_value(p: _ColumnPlan) -> bool:
    """Is `p` an array (or a domain over one) of a type `_native_text_read` takes, which
    the snapshot reads as `::text[]` (tablesnap::copy's `copy_plan` plans it as a text
    array)?"""
    base = base_type(p.registry.get(p.type_oid), p.registry)
    if base.output_src != "array_out":
        return False
    return _native_text_read(base_type(p.registry.get(base.typelem), p.registry))


def _page(chunk: Any, row: int, at: int) -> int:
    """The heap page of a CTID chunk's row (its field `at`: the page's text)."""
    return int((chunk.field(row, at) or b"0").decode())


def conn_encoding(cursor: Any) -> str:
    return str(cursor.connection.encoding)


def _qualified(table: TableDef) -> str:
    return f"{quote_ident(table.schema)}.{quote_ident(table.name)}"
