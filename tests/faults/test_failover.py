"""A hot standby as pgcdc's source, and its promotion mid-workload (issue 31), against
services.py's primary + standby pairs (ha-pg15/ha-pg15s, ha-pg18/ha-pg18s).

The worker streams from the standby over a physical slot on the standby (the primary
carries no pgcdc slot) and asks the primary for RUNNING_XACTS (source.primary_host);
setup and the workload run on the primary. Every committed transaction is checked
against the topics with the fault suite's verifier. Each test rebuilds its pair.
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from typing import Any

import psycopg2
import pytest

from tests.faults.verifier import topics, verify
from tests.faults.workload import ContinuousWorkload
from tests.fixtures.services import SERVICES, ensure_service, stop_service
from tests.integration.pipeline_kafka_support import (
    EO_TABLES,
    Pipeline,
    insert_lsn,
    pipeline,
    read_all,
)

pytestmark = [pytest.mark.integration, pytest.mark.faults]


def _services(*args: str) -> str:
    proc = subprocess.run(
        [sys.executable, str(SERVICES), *args], capture_output=True, text=True, check=False
    )
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


@pytest.fixture(params=["15", "18"])
def ha_pair(request: pytest.FixtureRequest) -> Iterator[tuple[dict[str, Any], dict[str, Any]]]:
    """A freshly built primary + hot standby pair of one major version."""
    primary, standby = f"ha-pg{request.param}", f"ha-pg{request.param}s"
    _services("rebuild", standby)
    stop_service(primary, standby)  # forget endpoints cached before the rebuild
    yield ensure_service(primary), ensure_service(standby)
    stop_service(primary, standby)


def _replayed(standby: dict[str, Any], dbname: str, lsn: int, timeout: float = 60) -> None:
    """Wait until the standby has replayed up to `lsn` (and `dbname` exists there)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            conn = psycopg2.connect(standby["dsn"].replace("dbname=postgres", f"dbname={dbname}"))
            with conn.cursor() as cur:
                cur.execute(
                    "SELECT pg_last_wal_replay_lsn() - %s::pg_lsn",
                    (f"{lsn >> 32:X}/{lsn & 0xFFFFFFFF:X}",),
                )
                done = float(cur.fetchone()[0]) >= 0
            conn.close()
            if done:
                return
        except psycopg2.OperationalError:
            pass
        assert time.monotonic() < deadline, f"{standby['service']} did not replay {lsn:X}"
        time.sleep(0.2)


def _on_standby(p: Pipeline, standby: dict[str, Any], primary: dict[str, Any]) -> None:
    """Point the pipeline's workers at the standby, the primary for RUNNING_XACTS; drop
    the slot setup made on the primary (the worker makes its own on the standby)."""
    p.extra_env.update(
        {
            "PGCDC_SOURCE__HOST": str(standby["host"]),
            "PGCDC_SOURCE__PORT": str(standby["port"]),
            "PGCDC_SOURCE__PRIMARY_HOST": str(primary["host"]),
            "PGCDC_SOURCE__PRIMARY_PORT": str(primary["port"]),
            "PGCDC_SOURCE__RECEIVE_TIMEOUT_S": "10",
        }
    )
    p.execute(f"SELECT pg_drop_replication_slot('{p.slot}')")
    _replayed(standby, p.db, insert_lsn(p.connect().cursor()))


def test_standby_as_source_under_workload(
    ha_pair: tuple[dict[str, Any], dict[str, Any]], kafka: dict[str, Any], registry: dict[str, Any]
) -> None:
    """The worker streams from the hot standby (its slot there, none on the primary)
    while a continuous workload runs on the primary: every committed transaction comes
    out exactly once, whole and in order; nothing rolled back is published."""
    primary, standby = ha_pair
    with pipeline(primary, kafka, registry, "hasrc", EO_TABLES) as p:
        _on_standby(p, standby, primary)
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
        assert verdict.committed > 10 and verdict.clean, verdict


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
        _on_standby(p, standby, primary)
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
        _replayed(standby, p.db, insert_lsn(p.connect().cursor()))
        tli = int(_services("promote", standby["service"]).split()[1])
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
        assert verdict.committed > 10 and verdict.clean, verdict
