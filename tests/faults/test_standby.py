"""Two workers with one config: the second is a standby, not a fencing ping-pong
(issue 11, defect 8)."""

from __future__ import annotations

import time
import urllib.error
import urllib.request
from typing import Any

import pytest

from tests.integration.pipeline_kafka_support import insert_lsn, pipeline, read_all

pytestmark = [pytest.mark.integration, pytest.mark.faults]


def _get(port: int, path: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as resp:
            return int(resp.status), resp.read().decode()
    except urllib.error.HTTPError as exc:
        return int(exc.code), exc.read().decode()


def test_second_worker_waits_as_standby_and_takes_over(
    fault_pg15: dict[str, Any], kafka: dict[str, Any], registry: dict[str, Any]
) -> None:
    """Worker B, started with A's config while A streams, waits: for 15 s it neither
    exits nor fences A (before: A died of FencedError within seconds), its /readyz
    answers 503 "standby", /healthz 200, and pgcdc_standby is 1. When A is killed, B
    takes over and publishes what A left; every row comes out exactly once."""
    with pipeline(fault_pg15, kafka, registry, "ha", ["CREATE TABLE t (id int PRIMARY KEY)"]) as p:
        a = p.start_worker()
        a.wait_ready(90)
        p.execute("INSERT INTO t SELECT generate_series(1, 100)")
        b = p.start_worker()
        port = int(b.wait_event(["metrics_serving"], 30)["port"])
        try:
            b.wait_event(["worker_standby"], 30)
        except AssertionError:
            print("A:", a.tail(20000))
            raise
        for i in range(15):
            p.execute(f"INSERT INTO t VALUES ({1000 + i})")
            time.sleep(1)
            assert a.proc.poll() is None, f"A exited:\n{a.tail()}"
            assert b.proc.poll() is None, f"B exited:\n{b.tail()}"
        # Idle for 5 heartbeat intervals: A holds the slot throughout, with one walsender
        # (before: it reconnected on every idle heartbeat interval, releasing the slot for
        # a moment each time, and B could take it).
        pids = set()
        cur = p.connect().cursor()
        for _ in range(20):
            cur.execute(
                "SELECT active_pid FROM pg_replication_slots WHERE slot_name = %s", (p.slot,)
            )
            pids.add(cur.fetchone()[0])
            time.sleep(0.25)
        assert len(pids) == 1 and None not in pids, pids
        status, reason = _get(port, "/readyz")
        assert status == 503 and reason.startswith("standby"), (status, reason)
        assert _get(port, "/healthz")[0] == 200
        assert 'pgcdc_standby{slot="' + p.slot + '"} 1.0' in _get(port, "/metrics")[1]
        assert "FencedError" not in a.log_text()
        p.wait_confirmed(insert_lsn(p.connect().cursor()) - 1, 60, a)

        a.kill()
        p.execute("INSERT INTO t SELECT generate_series(2001, 2100)")
        b.wait_event(["worker_resumed"], 60)
        assert b.has_event("worker_standby_takes_over")
        p.wait_confirmed(insert_lsn(p.connect().cursor()) - 1, 60, b)
        assert _get(port, "/readyz")[0] == 200
        assert 'pgcdc_standby{slot="' + p.slot + '"} 0.0' in _get(port, "/metrics")[1]
        assert b.terminate() == 0, b.tail()
        ids = sorted(r.key["id"] for r in read_all(p.settings(), [p.topic("t")]) if r.value)
        assert ids == [*range(1, 101), *range(1000, 1015), *range(2001, 2101)]
