"""The worker's /metrics during a real `pgcdc run`: every family the dashboard shows moves,
and the lag in seconds means time behind the source's last change (issue 28)."""

from __future__ import annotations

import os
import re
import signal
import time
import urllib.request
from typing import Any

import pytest

from service.lsn import parse_lsn
from tests.integration.pipeline_kafka_support import pipeline

pytestmark = pytest.mark.integration


def _scrape(port: int) -> dict[str, float]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as resp:
        body = resp.read().decode()
    out: dict[str, float] = {}
    for line in body.splitlines():
        if line and not line.startswith("#"):
            name, value = line.rsplit(" ", 1)
            out[name] = float(value)
    return out


def _one(samples: dict[str, float], pattern: str) -> float:
    found = [v for k, v in samples.items() if re.fullmatch(pattern, k)]
    assert len(found) == 1, (pattern, sorted(samples)[:40])
    return found[0]


def test_metrics_move_during_a_run(
    pg15: dict[str, Any], kafka: dict[str, Any], registry: dict[str, Any]
) -> None:
    """After a few transactions: events are counted by topic and op, WAL records and
    Kafka commits counted, positions and lag in bytes/seconds set, health is ready."""
    ddl = ["CREATE TABLE m (id int PRIMARY KEY, v text)"]
    with pipeline(
        pg15, kafka, registry, "metrics", ddl, extra_env={"PGCDC_KAFKA__HEARTBEAT_INTERVAL_S": "1"}
    ) as p:
        worker = p.start_worker()
        worker.wait_ready(90)
        port = int(worker.wait_event({"metrics_serving"}, 30)["port"])
        p.execute(
            "INSERT INTO m VALUES (1, 'a'), (2, 'b')",
            "UPDATE m SET v = 'c' WHERE id = 1",
            "DELETE FROM m WHERE id = 2",
        )
        end = parse_lsn(p.query("SELECT pg_current_wal_lsn()")[0][0])
        p.wait_confirmed(end - 1, 90, worker)
        worker.wait_event({"worker_consistent"}, 5)
        time.sleep(2.5)  # a heartbeat or two: server position and counters synced
        s = _scrape(port)
        slot = p.slot
        topic = f"{p.prefix}.public.m"
        assert _one(s, rf'pgcdc_events_total\{{.*op="c".*topic="{re.escape(topic)}".*\}}') == 2
        assert _one(s, rf'pgcdc_events_total\{{.*op="u".*topic="{re.escape(topic)}".*\}}') == 1
        assert _one(s, rf'pgcdc_events_total\{{.*op="d".*topic="{re.escape(topic)}".*\}}') == 1
        assert _one(s, rf'pgcdc_wal_records_total\{{slot="{slot}"\}}') > 0
        assert _one(s, rf'pgcdc_kafka_transactions_committed_total\{{slot="{slot}"\}}') >= 1
        server = _one(s, rf'pgcdc_server_wal_lsn\{{slot="{slot}"\}}')
        confirmed = _one(s, rf'pgcdc_confirmed_lsn\{{slot="{slot}"\}}')
        assert server >= end > 0 and confirmed >= end - 1
        assert _one(s, rf'pgcdc_lag_bytes\{{slot="{slot}"\}}') == pytest.approx(
            max(0.0, server - confirmed), abs=1 << 24
        )
        assert _one(s, rf'pgcdc_lag_seconds\{{slot="{slot}"\}}') >= 0
        assert _one(s, rf'pgcdc_slot_total_txns_total\{{slot="{slot}"\}}') >= 3
        assert _one(s, rf'pgcdc_registry_calls_total\{{slot="{slot}"\}}') >= 4
        assert _one(s, rf'pgcdc_registry_errors_total\{{slot="{slot}"\}}') >= 0
        started = _one(s, rf'pgcdc_start_time_seconds\{{slot="{slot}"\}}')
        assert time.time() - 180 < started < time.time()
        free = _one(s, rf'pgcdc_state_volume_free_bytes\{{slot="{slot}"\}}')
        size = _one(s, rf'pgcdc_state_volume_size_bytes\{{slot="{slot}"\}}')
        vfs = os.statvfs(p.state_dir)
        assert size == vfs.f_blocks * vfs.f_frsize and 0 < free <= size
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=5) as resp:
            assert resp.status == 200
        assert worker.terminate() == 0


def _latency(s: dict[str, float], slot: str) -> tuple[float, float]:
    """(observations, observations above 2.5 s) of pgcdc_commit_to_kafka_seconds."""
    count = _one(s, rf'pgcdc_commit_to_kafka_seconds_count\{{slot="{slot}"\}}')
    fast = _one(s, rf'pgcdc_commit_to_kafka_seconds_bucket\{{le="2.5",slot="{slot}"\}}')
    return count, count - fast


def test_lag_seconds_is_time_behind_the_last_change(
    pg15: dict[str, Any], kafka: dict[str, Any], registry: dict[str, Any]
) -> None:
    """An idle, caught-up worker reports pgcdc_lag_seconds 0 heartbeat after heartbeat
    (it used to grow by the heartbeat interval each time, and fire PgcdcLagSecondsHigh
    on every idle database), and its heartbeats' Kafka commits add no commit-to-Kafka
    latency; a worker held back (SIGSTOP) while a transaction commits reports that
    transaction's delay when it catches up, and 0 again once idle."""
    ddl = ["CREATE TABLE lag (id int PRIMARY KEY)"]
    with pipeline(pg15, kafka, registry, "lagsec", ddl) as p:
        worker = p.start_worker()
        worker.wait_ready(90)
        port = int(worker.wait_event({"metrics_serving"}, 30)["port"])
        p.execute("INSERT INTO lag VALUES (1)")
        end = parse_lsn(p.query("SELECT pg_current_wal_lsn()")[0][0])
        p.wait_confirmed(end - 1, 90, worker)
        slot = p.slot
        first = _scrape(port)
        observed, slow_before = _latency(first, slot)
        commits = _one(first, rf'pgcdc_kafka_transactions_committed_total\{{slot="{slot}"\}}')
        lags = []
        for _ in range(4):  # heartbeats every second (pipeline's heartbeat_s)
            time.sleep(1.0)
            s = _scrape(port)
            lags.append(_one(s, rf'pgcdc_lag_seconds\{{slot="{slot}"\}}'))
        assert lags == [0.0] * 4, lags
        assert _one(s, rf'pgcdc_kafka_transactions_committed_total\{{slot="{slot}"\}}') > commits
        assert _latency(s, slot) == (observed, slow_before), "heartbeats counted as latency"

        os.kill(worker.pid, signal.SIGSTOP)
        try:
            p.execute("INSERT INTO lag VALUES (2)")
            end = parse_lsn(p.query("SELECT pg_current_wal_lsn()")[0][0])
            time.sleep(3.5)
        finally:
            os.kill(worker.pid, signal.SIGCONT)
        p.wait_confirmed(end - 1, 90, worker)
        time.sleep(1.5)
        s = _scrape(port)
        count, slow = _latency(s, slot)
        assert (count, slow) == (observed + 1, slow_before + 1)
        assert _one(s, rf'pgcdc_lag_seconds\{{slot="{slot}"\}}') == 0
        assert worker.terminate() == 0
