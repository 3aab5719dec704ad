"""The worker's /metrics during a real `pgcdc run`: every family the dashboard shows moves."""

from __future__ import annotations

import re
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
        import time  # noqa: PLC0415  (only this helper needs it)

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
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=5) as resp:
            assert resp.status == 200
        assert worker.terminate() == 0
