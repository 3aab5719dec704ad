"""Catalog stage, table part: pg_class, pg_attribute, pg_namespace and pg_index by SQL.

Receives: a DSN of the source database. Hands on: `TableDef`s (service.schema.history)
and the initial `CatalogSnapshot`; implements the history's `LiveCatalog` protocol
(`table`, `invalidate`).

- `snapshot()` reads every user table inside one REPEATABLE READ, read-only
  transaction, together with `pg_current_snapshot()` and `pg_current_wal_lsn()` (on a
  hot standby `pg_last_wal_replay_lsn()`: the snapshot shows what is replayed), so the
  history knows exactly which transactions the definitions already reflect.
- `table(oid)` is cached by OID until `invalidate(oid)` (or `invalidate()`); the schema
  history calls it for the relcache invalidations of each committed transaction.
- `pg_class_locator()` is where pg_class itself is stored now, read once when a
  decoding session starts: the historic pg_class (`service.schema.pgclass`) follows it
  through the WAL from there (the relation map). Which relation a relfilenode was is
  never asked of the live catalog: that is the past, read off the WAL.

The definition query is `sql/table_def.sql`, the same text `pgcdc setup` installs as
the body of `pgcdc.table_def(oid)` for the DDL trigger, so both sources agree by
construction. The pure decoder never calls this module; the pipeline injects it.
Errors of the connection surface as `SourceUnavailableError` (retry); a deadlock,
serialization failure or lock timeout of a live query is retried with backoff first
(`server.retry_transient`).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import replace
from importlib import resources
from typing import Any

import psycopg2
import psycopg2.extensions
import structlog

from connectors.postgres.server import connect, retry_transient
from service.errors import SourceUnavailableError
from service.lsn import parse_lsn
from service.schema.tabledef import CatalogSnapshot, TableDef
from service.wal.record import RelFileLocator

_XID_MASK = 0xFFFFFFFF

EXCLUDED_SCHEMAS = ("pg_catalog", "information_schema", "pg_toast", "pgcdc")


def table_def_sql() -> str:
    """The definition query, with `$1` standing for the table oid."""
    return resources.files("connectors.postgres").joinpath("sql/table_def.sql").read_text("utf-8")


_TABLE_SQL = table_def_sql().replace("$1", "%(oid)s")
_TABLES_SQL = table_def_sql().replace("c.oid = $1", "c.oid = ANY(%(oids)s)")

_USER_TABLES_SQL = """
SELECT c.oid
FROM pg_catalog.pg_class c
JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
WHERE c.relkind IN ('r', 'p') AND c.relpersistence <> 't'
  AND n.nspname <> ALL(%(excluded)s) AND n.nspname NOT LIKE 'pg_temp%%'
  AND n.nspname NOT LIKE 'pg_toast_temp%%'
ORDER BY c.oid
"""

_SNAPSHOT_SQL = """
SELECT pg_catalog.pg_current_snapshot()::text,
       (CASE WHEN pg_catalog.pg_is_in_recovery() THEN pg_catalog.pg_last_wal_replay_lsn()
             ELSE pg_catalog.pg_current_wal_lsn() END)::text,
       d.oid
FROM pg_catalog.pg_database d WHERE d.datname = pg_catalog.current_database()
"""

# Both event triggers of the DDL capture (connectors/postgres/sql/ddl_capture.sql), enabled.
_CAPTURE_SQL = """
SELECT count(*) = 2 FROM pg_catalog.pg_event_trigger
WHERE evtname IN ('pgcdc_ddl_command_end', 'pgcdc_sql_drop') AND evtenabled <> 'D'
"""

_PG_CLASS_FILENODE_SQL = "SELECT pg_catalog.pg_relation_filenode('pg_catalog.pg_class')::oid"

_DB_SQL = """
SELECT d.oid, d.dattablespace FROM pg_catalog.pg_database d
WHERE d.datname = pg_catalog.current_database()
"""


log = structlog.get_logger(__name__)

# How often a catalog snapshot waiting for `must_see` transactions says so.
MUST_SEE_WARN_S = 10.0


def parse_pg_snapshot(text: str) -> tuple[int, int, frozenset[int]]:
    """`xmin:xmax:xip,...` of pg_current_snapshot(), reduced to 32-bit xids."""
    xmin, xmax, xip = text.split(":")
    xids = frozenset(int(x) & _XID_MASK for x in xip.split(",") if x)
    return int(xmin) & _XID_MASK, int(xmax) & _XID_MASK, xids


class Catalog:
    """SQL access to table definitions, cached by OID (the history's `LiveCatalog`)."""

    def __init__(self, dsn: str) -> None:
        self._dsn = dsn
        self._conn: psycopg2.extensions.connection | None = None
        self._cache: dict[int, TableDef | None] = {}
        self._db: tuple[int, int] | None = None
        self.queries = 0  # SQL round trips, for tests and metrics

    # --- connection -----------------------------------------------------------------

    def _connection(self) -> psycopg2.extensions.connection:
        if self._conn is None or self._conn.closed:
            # server.connect: autocommit, statement_timeout, errors classified.
            self._conn = connect(self._dsn, "pgcdc-catalog")
        return self._conn

    def _query(self, sql: str, params: dict[str, Any]) -> list[tuple[Any, ...]]:
        def attempt() -> list[tuple[Any, ...]]:
            self.queries += 1
            with self._connection().cursor() as cur:
                cur.execute(sql, params)
                return list(cur.fetchall())

        try:
            return retry_transient("catalog query", attempt)
        except (psycopg2.OperationalError, psycopg2.InterfaceError) as exc:
            self.close()
            raise SourceUnavailableError(f"catalog query failed: {exc}") from exc

    def close(self) -> None:
        if self._conn is not None and not self._conn.closed:
            self._conn.close()
        self._conn = None

    # --- reads ----------------------------------------------------------------------

    def database(self) -> tuple[int, int]:
        """(oid, default tablespace oid) of the connected database."""
        if self._db is None:
            ((oid, spc),) = self._query(_DB_SQL, {})
            self._db = (int(oid), int(spc))
        return self._db

    def table(self, oid: int) -> TableDef | None:
        """The current definition of user table `oid` (cached), None if it is not one."""
        if oid in self._cache:
            return self._cache[oid]
        rows = self._query(_TABLE_SQL, {"oid": oid})
        table = TableDef.from_json(rows[0][0]) if rows else None
        if table is not None and (
            table.relkind not in ("r", "p") or table.schema in EXCLUDED_SCHEMAS
        ):
            table = None
        self._cache[oid] = table
        return table

    def pg_class_locator(self) -> RelFileLocator:
        """Where pg_class is stored now: its relfilenode (a mapped relation's, from the
        relation map) in the database's default tablespace."""
        db_oid, tablespace = self.database()
        rows = self._query(_PG_CLASS_FILENODE_SQL, {})
        return RelFileLocator(tablespace, db_oid, int(rows[0][0]))

    def invalidate(self, oid: int | None = None) -> None:
        if oid is None:
            self._cache.clear()
        else:
            self._cache.pop(oid, None)

    def snapshot(
        self,
        inside: Callable[[Any, CatalogSnapshot], None] | None = None,
        *,
        must_see: frozenset[int] = frozenset(),
    ) -> CatalogSnapshot:
        """All user tables under one MVCC snapshot, with that snapshot and the WAL LSN.

        `inside(cursor, snapshot)`, when given, runs in the same REPEATABLE READ
        transaction after the catalog was read: the initial data snapshot reads its
        rows there, so rows and definitions come from one and the same snapshot.

        `must_see`: xids the snapshot must see as committed (`SnapBuilder.must_see`:
        their commit records are written, they may not have left the proc array yet).
        A snapshot that does not is dropped and taken again, after a short wait, until
        it does; every `MUST_SEE_WARN_S` of waiting logs `catalog_snapshot_waits`
        naming them, as PostgreSQL's SnapBuildWaitSnapshot waits on their xid locks.
        """
        conn = psycopg2.connect(self._dsn, application_name="pgcdc-catalog-snapshot")
        try:
            conn.set_session(
                isolation_level=psycopg2.extensions.ISOLATION_LEVEL_REPEATABLE_READ,
                readonly=True,
            )
            with conn.cursor() as cur:
                head = self._snapshot_seeing(conn, cur, must_see)
                cur.execute(_USER_TABLES_SQL, {"excluded": list(EXCLUDED_SCHEMAS)})
                oids = [int(r[0]) for r in cur.fetchall()]
                cur.execute(_TABLES_SQL, {"oids": oids})
                tables = sorted(
                    (TableDef.from_json(r[0]) for r in cur.fetchall()), key=lambda t: t.oid
                )
                cur.execute(_CAPTURE_SQL)
                row = cur.fetchone()
                snapshot = replace(head, tables=tuple(tables), ddl_capture=bool(row and row[0]))
                if inside is not None:
                    inside(cur, snapshot)
            conn.rollback()
        except psycopg2.OperationalError as exc:
            raise SourceUnavailableError(f"catalog snapshot failed: {exc}") from exc
        finally:
            conn.close()
        return snapshot

    @staticmethod
    def _snapshot_seeing(conn: Any, cur: Any, must_see: frozenset[int]) -> CatalogSnapshot:
        """The transaction's snapshot (no tables yet), once it sees every xid of
        `must_see`: the first query of a REPEATABLE READ transaction fixes it, so one
        that does not is rolled back and the query runs again in a new one."""
        started = time.monotonic()
        warned = started
        wait = 0.005
        while True:
            # The first query fixes the transaction snapshot: everything after sees it.
            cur.execute(_SNAPSHOT_SQL)
            snap_text, lsn_text, db_oid = cur.fetchone()
            xmin, xmax, xip = parse_pg_snapshot(str(snap_text))
            head = CatalogSnapshot(int(db_oid), parse_lsn(str(lsn_text)), xmin, xmax, xip, ())
            unseen = sorted(x for x in must_see if not head.xid_visible(x))
            if not unseen:
                return head
            conn.rollback()
            now = time.monotonic()
            if now - warned >= MUST_SEE_WARN_S:
                warned = now
                log.warning(
                    "catalog_snapshot_waits",
                    xids=unseen,
                    waited_s=round(now - started, 1),
                    why="committed before the consistent point, still in the proc array",
                )
            time.sleep(wait)
            wait = min(wait * 2, 0.2)
