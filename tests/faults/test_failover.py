"""A hot standby as pgcdc's source, and its promotion mid-workload (issue 31), against
services.py's primary + standby pairs (ha-pg15/ha-pg15s, ha-pg18/ha-pg18s).

The worker streams from the standby over a physical slot on the standby (the primary
carries no pgcdc slot) and asks the primary for RUNNING_XACTS (source.primary_host);
setup and the workload run on the primary. Every committed transaction is checked
against the topics with the fault suite's verifier. Each test rebuilds its pair.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import psycopg2
import pytest

from tests.faults.ha_exclusive import on_standby, rebuilt_pair, replayed, services
from tests.faults.verifier import story, topics, verify
from tests.faults.workload import ContinuousWorkload
from tests.fixtures.services import ensure_service, stop_service
from tests.integration.pipeline_kafka_support import (
    EO_TABLES,
    insert_lsn,
    pipeline,
    read_all,
)

pytestmark = [pytest.mark.integration, pytest.mark.faults]


@pytest.fixture(params=["15", "18"])
def ha_pair(request: pytest.FixtureRequest) -> Iterator[tuple[dict[str, Any], dict[str, Any]]]:
    """A freshly built primary + hot standby pair of one major version, held
    exclusively (ha_exclusive.rebuilt_pair: the rebuild is retried while a port is taken)."""
    with rebuilt_pair(request.param) as pair:
        yield pair


def test_standby_as_source_under_workload(
    ha_pair: tuple[dict[str, Any], dict[str, Any]], kafka: dict[str, Any], registry: dict[str, Any]
) -> None:
    """The worker streams from the hot standby (its slot there, none on the primary)
    while a continuous workload runs on the primary: every committed transaction comes
    out exactly once, whole and in order; nothing rolled back is published."""
    primary, standby = ha_pair
    with pipeline(primary, kafka, registry, "hasrc", EO_TABLES) as p:
        on_standby(p, standby, primary)
        w = p.start_worker()
        w.wait_ready(120)
        load = ContinuousWorkload(p, seed=31)
        load.start(pause_s=0.05)
        time.sleep(8)
        load.finish()
        p.wait_confirmed(insert_lsn(p.connect().cursor()) - 1, 120, w)
        assert p.query(
            "SELECT count(*) FROM pg_replication_slots WHERE slot_name = %s", (p.slot,)
        ) == [(0,)]
        conn = psycopg2.connect(standby["dsn"])
        with conn.cursor() as cur:
            cur.execute("SELECT active FROM pg_replication_slots WHERE slot_name = %s", (p.slot,))
            assert cur.fetchall() == [(True,)]
        conn.close()
        assert w.terminate() == 0, w.tail()
        verdict = verify(p, load.outcomes, read_all(p.settings(), topics(p)))
        print(f"PG{standby['version']} standby source: {verdict}")
        assert verdict.committed > 10 and verdict.clean, f"{verdict}\n{story(p)}"


def test_promotion_mid_workload_follows_the_new_timeline(
    ha_pair: tuple[dict[str, Any], dict[str, Any]], kafka: dict[str, Any], registry: dict[str, Any]
) -> None:
    """The standby the worker streams from is promoted while a transaction is open on
    the old primary, which then dies: the stream follows timeline 2 from its switch
    point without a restart, the open transaction is never published, and the
    workload, re-pointed at the new primary, comes out exactly once after every
    transaction of timeline 1."""
    primary, standby = ha_pair
    with pipeline(primary, kafka, registry, "hapromo", EO_TABLES) as p:
        on_standby(p, standby, primary)
        w = p.start_worker()
        w.wait_ready(120)
        load = ContinuousWorkload(p, seed=32)
        load.start(pause_s=0.05)
        time.sleep(5)
        open_txn = p.connect()
        open_txn.autocommit = False
        with open_txn.cursor() as cur:
            cur.execute("INSERT INTO kv SELECT 'open' || g, 'never' FROM generate_series(1, 50) g")
        load.finish()
        before = load.outcomes[:]
        replayed(standby, p.db, insert_lsn(p.connect().cursor()))
        tli = int(services("promote", standby["service"]).split()[1])
        assert tli == 2
        stop_service(primary["service"])  # the old primary dies with the open transaction
        p.pg = ensure_service(standby["service"])
        p.dsn = p.pg["dsn"].replace("dbname=postgres", f"dbname={p.db}")
        after = ContinuousWorkload(p, seed=33)
        after.start(pause_s=0.05)
        time.sleep(5)
        after.finish()
        p.wait_confirmed(insert_lsn(p.connect().cursor()) - 1, 120, w)
        switch = w.wait_event(["replication_timeline_switch"], 5)
        assert (switch["from_tli"], switch["to_tli"]) == (1, 2)
        assert w.proc.poll() is None, w.tail()
        assert w.terminate() == 0, w.tail()
        reads = read_all(p.settings(), topics(p))
        assert not [r for r in reads if r.value and str(r.key.get("k", "")).startswith("open")]
        verdict = verify(p, before + after.outcomes, reads)
        print(f"PG{standby['version']} promotion: {verdict}")
        assert verdict.committed > 10 and verdict.clean, f"{verdict}\n{story(p)}"
