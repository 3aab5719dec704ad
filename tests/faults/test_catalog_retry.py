"""Live catalog queries survive transient SQL errors (issue 11, defect 7): a real
deadlock against a transaction that locks catalog tables, as a concurrent VACUUM FULL
of a catalog table does, is retried with backoff instead of killing the stream.

The deadlock, on fault-pg15: a transaction takes pg_index (or pg_range) in ACCESS
EXCLUSIVE mode; the catalog query, holding ACCESS SHARE on pg_class (pg_type) from its
parse, waits for it; the transaction then asks for pg_class (pg_type) in ACCESS
EXCLUSIVE mode and closes the cycle. The catalog query waited first, so its
deadlock_timeout (1 s) runs out first: it is the one cancelled with 40P01.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import pytest

from connectors.postgres.catalog import Catalog
from connectors.postgres.type_loader import TypeLoader
from tests.faults import pgctl
from tests.integration.pipeline_kafka_support import with_db

pytestmark = [pytest.mark.integration, pytest.mark.faults]


def _deadlock_against(
    info: dict[str, Any], first: str, then: str, query: Callable[[], object]
) -> object:
    """Run `query` in a thread while a transaction locks `first`, then `then`."""
    locker = pgctl.admin(info)
    cur = locker.cursor()
    result: list[object] = []
    cur.execute("BEGIN")
    cur.execute(f"LOCK TABLE pg_catalog.{first} IN ACCESS EXCLUSIVE MODE")
    thread = threading.Thread(target=lambda: result.append(_catch(query)), daemon=True)
    thread.start()
    try:
        time.sleep(0.3)  # the query is now waiting for `first`
        cur.execute(f"LOCK TABLE pg_catalog.{then} IN ACCESS EXCLUSIVE MODE")
        time.sleep(0.3)
    finally:
        cur.execute("ROLLBACK")
        locker.close()
    thread.join(30)
    assert result, "the catalog query never returned"
    if isinstance(result[0], BaseException):
        raise result[0]
    return result[0]


def _catch(fn: Callable[[], object]) -> object:
    try:
        return fn()
    except Exception as exc:
        return exc


def test_catalog_table_query_retries_a_deadlock(fault_pg15: dict[str, Any]) -> None:
    """Catalog.table(oid) meets a real deadlock (40P01) and answers all the same, after
    one more round trip (before: psycopg2.errors.DeadlockDetected escaped)."""
    admin = pgctl.admin(fault_pg15)
    with admin.cursor() as cur:
        cur.execute("CREATE TABLE IF NOT EXISTS deadlock_t (id int PRIMARY KEY, v text)")
        cur.execute("SELECT 'deadlock_t'::regclass::oid")
        oid = int(cur.fetchone()[0])
    admin.close()
    catalog = Catalog(fault_pg15["dsn"])
    try:
        catalog.database()  # connected before the locks: a new backend needs pg_class
        before = catalog.queries
        table = _deadlock_against(fault_pg15, "pg_index", "pg_class", lambda: catalog.table(oid))
        assert getattr(table, "name", None) == "deadlock_t"
        assert catalog.queries == before + 2, "expected one deadlock and one retry"
    finally:
        catalog.close()


def test_type_query_retries_a_deadlock(fault_pg15: dict[str, Any]) -> None:
    """TypeLoader.types([oid]) of a new range type meets a real deadlock on pg_range /
    pg_type and loads the type all the same."""
    admin = pgctl.admin(fault_pg15)
    name = f"dl_range_{int(time.time() * 1000)}"
    with admin.cursor() as cur:
        cur.execute(f"CREATE TYPE {name} AS RANGE (subtype = int4)")
        cur.execute(f"SELECT '{name}'::regtype::oid")
        oid = int(cur.fetchone()[0])
    loader = TypeLoader(with_db(fault_pg15["dsn"], "postgres"))
    try:
        registry = _deadlock_against(fault_pg15, "pg_range", "pg_type", lambda: loader.types([oid]))
        assert oid in registry  # type: ignore[operator]
    finally:
        loader.close()
        with admin.cursor() as cur:
            cur.execute(f"DROP TYPE {name}")
        admin.close()
