"""Assembling a decoding session: source → reader → decoder → reorder buffer → plugin.

`Session` wires the pure stages (XLogReader, Decoding, SnapBuilder, ReorderBuffer,
SchemaHistory, HistoryRows) to the edges (a WAL source from `connectors`, the catalog
stage) for one database, and pumps WAL through them. It is what `pgcdc peek`,
`pgcdc replay` and the worker run.

Start-up order matters, and is the same as PostgreSQL's for a new logical slot:
1. WAL is read from a point at or before the catalog snapshot (a physical slot's
   restart LSN, or the start of an archive);
2. the catalog snapshot is read (REPEATABLE READ, with `pg_current_wal_lsn()`); only
   transactions that commit after its LSN are emitted (`SnapBuilder(start_lsn)`);
3. a RUNNING_XACTS record is forced (CHECKPOINT on PG15, `pg_log_standby_snapshot()`
   from PG16) so the snapshot builder becomes consistent without waiting for the
   bgwriter's next one.

`restart_lsn()` is what may be confirmed to the physical slot: the oldest first LSN of
a transaction still in the reorder buffer, or the decoded position when none is.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg2

from connectors.catalog import Catalog
from connectors.catalog_types import CatalogTypes
from service.errors import SourceUnavailableError
from service.logical import Decoding, PluginSink
from service.plugin_api import PluginContext, PluginWrapper
from service.reorderbuffer import ReorderBuffer, ReorderBufferSettings
from service.rowdecode import HistoryRows
from service.schema_history import SchemaHistory
from service.snapbuild import SnapBuilder
from service.spill import LocalSpillStore
from service.types.registry import TypeRegistry
from service.walformat import XLOG_BLCKSZ
from service.xlogreader import XLogReader

END_OF_TIME = (1 << 64) - 1


@dataclass(slots=True)
class SessionConfig:
    """What a decoding session needs besides its plugin."""

    dsn: str
    slot: str = "pgcdc"
    work_mem: int = 64 * 1024 * 1024
    spill_dir: Path = Path(".state/spill")
    unknown_types_as_text: bool = False
    plugin_options: Mapping[str, str] = field(default_factory=dict)


def server_version(dsn: str) -> int:
    try:
        conn = psycopg2.connect(dsn)
    except psycopg2.OperationalError as exc:
        raise SourceUnavailableError(f"cannot connect to the source: {exc}") from exc
    try:
        return int(conn.server_version) // 10000
    finally:
        conn.close()


def force_running_xacts(dsn: str, version: int) -> None:
    """Have the server log RUNNING_XACTS now, so decoding becomes consistent at once."""
    conn = psycopg2.connect(dsn)
    conn.autocommit = True
    try:
        with conn.cursor() as cur:
            if version >= 16:
                cur.execute("SELECT pg_log_standby_snapshot()")
            else:
                cur.execute("CHECKPOINT")
    finally:
        conn.close()


class _TypeLoader:
    """The catalog's type facts and format_type() names, loaded on demand and cached."""

    def __init__(self, dsn: str) -> None:
        self._conn = psycopg2.connect(dsn, application_name="pgcdc-types")
        self._conn.autocommit = True
        self._types = CatalogTypes(self._conn)

    def types(self, oids: Sequence[int]) -> TypeRegistry:
        return self._types.ensure(oids)

    def names(self, oids: Sequence[int]) -> Mapping[int, str]:
        with self._conn.cursor() as cur:
            cur.execute(
                "SELECT oid, pg_catalog.format_type(oid, NULL) FROM pg_catalog.pg_type "
                "WHERE oid = ANY(%s)",
                (list(oids),),
            )
            return {int(oid): str(name) for oid, name in cur.fetchall()}

    def close(self) -> None:
        self._conn.close()


class Session:
    """One decoding session over one database; feed it WAL chunks in order."""

    def __init__(self, config: SessionConfig, plugin: object, plugin_name: str,
                 writer: Any, *, version: int, start_lsn: int,
                 decode_from: int | None = None,
                 restore: tuple[int, Mapping[str, Any]] | None = None,
                 plugin_state: Mapping[str, Any] | None = None) -> None:
        """`start_lsn`: where WAL reading begins. `decode_from`: commits before it are
        not emitted (default: the catalog snapshot's LSN, i.e. "from now on").
        `restore`: (confirmed LSN, schema-history snapshot) from stored offsets; decoding
        is then consistent at once and emits every commit from the confirmed LSN on."""
        self.config = config
        self.version = version
        self.catalog = Catalog(config.dsn)
        if restore is None:
            snapshot = self.catalog.snapshot()
            self.snapshot_lsn = snapshot.lsn
            self.history = SchemaHistory.from_catalog_snapshot(snapshot, self.catalog)
            db_oid = snapshot.db_oid
            self.snap = SnapBuilder(snapshot.lsn if decode_from is None else decode_from)
        else:
            confirmed, doc = restore
            self.snapshot_lsn = confirmed
            self.history = SchemaHistory.from_snapshot(doc, self.catalog)
            db_oid = self.history.db_oid
            self.snap = SnapBuilder.restored(confirmed)
        self._types = _TypeLoader(config.dsn)
        self.rows = HistoryRows(self.history, self._types.types, self._types.names,
                                unknown_as_text=config.unknown_types_as_text)
        ctx = PluginContext(config.slot, plugin_name, dict(config.plugin_options), writer,
                            state=dict(plugin_state or {}))
        self.wrapper = PluginWrapper(plugin, ctx)
        self.wrapper.startup(is_init=True)
        self.sink = PluginSink(self.wrapper, self.rows)
        self.spill = LocalSpillStore(config.spill_dir)
        self.rb = ReorderBuffer(
            ReorderBufferSettings(work_mem=config.work_mem),
            self.sink,
            self.spill,
            lambda loc: self.history.is_toast(loc, END_OF_TIME),
        )
        self.decoding = Decoding(version=version, db_oid=db_oid, reorder=self.rb,
                                 snap=self.snap, rows=self.rows, plugin=self.wrapper)
        self.reader = XLogReader(start_lsn & ~(XLOG_BLCKSZ - 1) if start_lsn % XLOG_BLCKSZ
                                 else start_lsn)
        self.start_lsn = start_lsn

    def feed(self, lsn: int, data: bytes) -> None:
        """Decode every complete record in this chunk of raw WAL."""
        self.reader.feed(data, lsn)
        for record in self.reader.records():
            if record.lsn < self.start_lsn:
                continue
            self.decoding.process(record)

    def pump(self, chunks: Iterable[tuple[int, bytes]], *, until_lsn: int | None = None) -> None:
        """Feed chunks until they end, or until a record at or past `until_lsn` is decoded."""
        for lsn, data in chunks:
            self.feed(lsn, data)
            if until_lsn is not None and self.decoding.last_end_lsn >= until_lsn:
                return
            if self.reader.end_of_wal:
                return

    def restart_lsn(self) -> int:
        pending = self.rb.restart_lsn()
        return pending if pending is not None else self.decoding.last_end_lsn

    def close(self) -> None:
        self.wrapper.shutdown()
        self.rb.close()
        self.catalog.close()
        self._types.close()
