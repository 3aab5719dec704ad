"""A silently stalled PostgreSQL connection never wedges the worker unseen (issue 11,
defect 2): SQL connections carry a statement_timeout, the replication stream a
receive timeout after which it reconnects, and /healthz turns 503 while the main loop
makes no progress.

The stall is the fault suite's proxy (tests/faults/proxy.py) in front of fault-pg15:
it holds every byte in both directions, so the peers see silence, never an error.
"""

from __future__ import annotations

import itertools
import threading
import time
import urllib.error
import urllib.request
from typing import Any

import psycopg2
import psycopg2.extras
import pytest

from connectors.postgres.catalog import Catalog
from connectors.postgres.server import connect, set_statement_timeout
from connectors.postgres.stream import PhysicalStream
from tests.faults.proxy import Proxy
from tests.fixtures.slots import drop_slot_when_released
from tests.integration.pipeline_kafka_support import (
    insert_lsn,
    pipeline,
    read_all,
    unique,
    with_db,
)

pytestmark = [pytest.mark.integration, pytest.mark.faults]


def _via(info: dict[str, Any], port: int) -> dict[str, Any]:
    """`info` with clients pointed at `port` (a proxy) instead of the server."""
    dsn = info["dsn"].replace(f"port={info['port']}", f"port={port}")
    return {**info, "port": port, "dsn": dsn}


def test_sql_connections_have_a_statement_timeout_and_replication_has_none(
    fault_pg15: dict[str, Any],
) -> None:
    """`server.connect` sets statement_timeout (the setting, here 7 s) on the SQL
    connections it opens, the live catalog's included, and the DSN stays without it:
    a replication connection on the same DSN runs with the server's default (0)."""
    set_statement_timeout(7)
    try:
        conn = connect(fault_pg15["dsn"])
        with conn.cursor() as cur:
            cur.execute("SHOW statement_timeout")
            assert cur.fetchone()[0] == "7s"
        conn.close()
        catalog = Catalog(fault_pg15["dsn"])  # the live catalog's connection too
        assert catalog._query("SHOW statement_timeout", {}) == [("7s",)]
        catalog.close()
    finally:
        set_statement_timeout(60)
    repl = psycopg2.connect(
        fault_pg15["dsn"], connection_factory=psycopg2.extras.PhysicalReplicationConnection
    )
    with repl.cursor() as cur:
        cur.execute("SHOW statement_timeout")
        assert cur.fetchone()[0] == "0"
    repl.close()


def test_replication_stream_reconnects_after_the_receive_timeout(
    fault_pg15: dict[str, Any],
) -> None:
    """Streaming through a proxy that stalls: after receive_timeout (3 s) without any
    message the stream drops the connection and reconnects (before: it waited in its
    select loop for as long as the stall lasted). Once the proxy resumes, the WAL
    written during the stall arrives, contiguous."""
    slot = unique("rt")
    admin = connect(fault_pg15["dsn"])
    with admin.cursor() as cur:
        cur.execute("SELECT pg_create_physical_replication_slot(%s, true)", (slot,))
        cur.execute("CREATE TABLE IF NOT EXISTS stall_rt (id int)")
    stop = threading.Event()
    chunks: list[tuple[int, int]] = []
    with Proxy(fault_pg15["port"]) as proxy:
        dsn = _via(fault_pg15, proxy.port)["dsn"] + " connect_timeout=2"
        stream = PhysicalStream(dsn, slot, receive_timeout=3.0, retry_budget_s=600)

        def pump() -> None:
            for lsn, data in stream.chunks(stop):
                chunks.append((lsn, len(data)))

        thread = threading.Thread(target=pump, daemon=True)
        thread.start()
        try:
            deadline = time.monotonic() + 30
            while not chunks:
                assert time.monotonic() < deadline, "no WAL through the proxy"
                time.sleep(0.1)
            proxy.stall()
            with admin.cursor() as cur:
                cur.execute("INSERT INTO stall_rt SELECT generate_series(1, 1000)")
                target = insert_lsn(cur)
            deadline = time.monotonic() + 15
            while stream.reconnects == 0:
                assert time.monotonic() < deadline, "no reconnect during a 15 s stall"
                time.sleep(0.2)
            proxy.resume()
            deadline = time.monotonic() + 60
            while not chunks or chunks[-1][0] + chunks[-1][1] < target:
                assert time.monotonic() < deadline, "the WAL of the stall never came"
                time.sleep(0.2)
        finally:
            stop.set()
            thread.join(30)
            stream.close()
            drop_slot_when_released(admin, slot)
            admin.close()
    for (lsn, size), (nxt, _) in itertools.pairwise(chunks):
        assert lsn + size == nxt, f"gap or overlap at {lsn:X}"


def _healthz(port: int) -> int:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=2) as resp:
            return int(resp.status)
    except urllib.error.HTTPError as exc:
        return int(exc.code)


def test_stalled_source_turns_healthz_unhealthy_and_the_worker_recovers(
    fault_pg15: dict[str, Any], kafka: dict[str, Any], registry: dict[str, Any]
) -> None:
    """A worker reading fault-pg15 through a proxy that stalls for 25 s, with
    metrics.watchdog_s 6 and source.receive_timeout_s 3: /healthz answers 503 during
    the stall (before: 200 throughout, with the loop wedged), 200 again after it, and
    every row inserted before, during and after the stall is published exactly once."""
    with Proxy(fault_pg15["port"]) as proxy:
        pg = _via(fault_pg15, proxy.port)
        env = {
            "PGCDC_SOURCE__RECEIVE_TIMEOUT_S": "3",
            "PGCDC_SOURCE__CONNECT_TIMEOUT_S": "2",
            "PGCDC_METRICS__WATCHDOG_S": "6",
        }
        with pipeline(
            pg, kafka, registry, "stall", ["CREATE TABLE t (id int PRIMARY KEY)"], extra_env=env
        ) as p:
            direct = psycopg2.connect(with_db(fault_pg15["dsn"], p.db))
            direct.autocommit = True
            cur = direct.cursor()
            worker = p.start_worker()
            worker.wait_ready(90)
            port = int(worker.wait_event(["metrics_serving"], 10)["port"])
            assert _healthz(port) == 200
            cur.execute("INSERT INTO t SELECT generate_series(1, 100)")
            p.wait_confirmed(insert_lsn(cur) - 1, 60, worker)
            proxy.stall()
            statuses = []
            for i in range(25):
                cur.execute(f"INSERT INTO t VALUES ({1000 + i})")
                statuses.append(_healthz(port))
                time.sleep(1)
            proxy.resume()
            cur.execute("INSERT INTO t SELECT generate_series(2001, 2100)")
            p.wait_confirmed(insert_lsn(cur) - 1, 120, worker)
            assert 503 in statuses, statuses
            deadline = time.monotonic() + 30
            while _healthz(port) != 200:
                assert time.monotonic() < deadline, "still unhealthy after the stall"
                time.sleep(0.5)
            assert worker.proc.poll() is None, worker.tail()
            assert worker.terminate() == 0, worker.tail()
            direct.close()
            ids = [r.key["id"] for r in read_all(p.settings(), [p.topic("t")]) if r.value]
            expected = [*range(1, 101), *range(1000, 1025), *range(2001, 2101)]
            assert sorted(ids) == expected
