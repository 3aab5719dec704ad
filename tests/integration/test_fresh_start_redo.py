"""A first start decodes from the latest checkpoint's redo point, not from the slot's
restart LSN (service.app.worker `Worker._fresh_start_lsn`).

After `pgcdc setup` a bulk load writes WAL the worker has no use for: everything
committed before its consistent point is the snapshot's. The worker must start past it
(at the redo point of the checkpoint after the load), and still publish exactly once a
transaction that began before that point and commits after the worker started: it is
listed by the RUNNING_XACTS after the redo point, so the snapshot builder waits it out
and it lands in the snapshot, or, committed later, in the stream; never twice, never
lost.
"""

from __future__ import annotations

import time
from typing import Any

import pytest

from connectors.postgres.server import latest_redo
from service.lsn import parse_lsn
from tests.integration.avro_kafka_support import read_topics
from tests.integration.pipeline_kafka_support import insert_lsn, pipeline

pytestmark = pytest.mark.integration

TABLES = [
    "CREATE TABLE t (id int PRIMARY KEY, v text)",
    "CREATE TABLE bulk (id int PRIMARY KEY, pad text)",
    "INSERT INTO t SELECT i, 'pre ' || i FROM generate_series(1, 500) i",
]


@pytest.mark.parametrize("version", ["pg15", "pg18"])
def test_first_start_skips_the_wal_before_the_latest_redo_point(
    request: pytest.FixtureRequest, kafka: dict[str, Any], registry: dict[str, Any], version: str
) -> None:
    pg = request.getfixturevalue(version)
    with pipeline(pg, kafka, registry, f"redo{pg['version']}", TABLES) as p:
        conn = p.connect()
        conn.autocommit = True
        cur = conn.cursor()
        cur.execute(
            "SELECT restart_lsn::text FROM pg_replication_slots WHERE slot_name = %s", (p.slot,)
        )
        at_setup = parse_lsn(cur.fetchone()[0])
        cur.execute("INSERT INTO bulk SELECT i, repeat('x', 500) FROM generate_series(1, 20000) i")
        # in flight across the start: begun before every redo point the worker may take
        flight = p.connect()
        flight.autocommit = False
        fcur = flight.cursor()
        fcur.execute("INSERT INTO t SELECT i, 'in flight ' || i FROM generate_series(1001, 1010) i")
        cur.execute("CHECKPOINT")  # PG16+ write RUNNING_XACTS without one
        redo = latest_redo(conn)
        assert redo > at_setup + 10_000_000, "the load wrote too little WAL to skip"
        worker = p.start_worker()
        started = worker.wait_event(["worker_started"], 60)
        time.sleep(1.0)  # the worker waits for it to end before it is consistent
        assert not worker.has_event("worker_consistent")
        flight.commit()
        worker.wait_event(["snapshot_done"], 120)
        cur.execute("INSERT INTO t VALUES (2001, 'after')")
        p.wait_confirmed(insert_lsn(cur) - 1, 120)
        assert worker.terminate() == 0, worker.tail()
        flight.close()
        conn.close()
        start = parse_lsn(started["restart_lsn"])
        assert start >= redo, (
            f"decoded from {started['restart_lsn']}, before the redo point the load ended at"
        )
        ids = [
            (r.value["after"] or {}).get("id")
            for r in read_topics(p.settings(), [p.topic("t")])
            if r.value is not None and r.value["op"] in ("r", "c")
        ]
        expected = [*range(1, 501), *range(1001, 1011), 2001]
        assert sorted(ids) == expected, "a row lost or published twice"
