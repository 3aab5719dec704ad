"""Issue 12, item 5: a Kafka transaction that fails mid-way is replayed from the WAL.

The sink keeps no copy of what it produced. A broker error in the middle of a large
source transaction (injected once, by tests.faults.replay_worker, into the real
`pgcdc run`) must abort the Kafka transaction; the worker then restarts its session in
process from the last committed offsets and decodes the transaction again (from the
restart LSN, spilling under a small work_mem). A read_committed consumer sees every row
exactly once. Runs against the shared PostgreSQL 15, Kafka and registry: no service is
stopped.
"""

from __future__ import annotations

import re
import subprocess
import sys
import urllib.request
from collections import Counter
from typing import Any

import pytest

from tests.integration.pipeline_kafka_support import (
    REPO,
    WorkerProcess,
    insert_lsn,
    pipeline,
    read_all,
)

pytestmark = [pytest.mark.integration, pytest.mark.faults]

ROWS = 30_000


def test_broker_error_mid_transaction_replays_from_offsets(
    pg15: dict[str, Any], kafka: dict[str, Any], registry: dict[str, Any]
) -> None:
    """One small transaction, then one of ROWS rows whose 20,000th record fails to
    produce, then another small one. The same worker process (no exit) logs the abort
    and the replay, confirms past the last transaction, and the topic holds each of the
    ROWS + 2 rows exactly once, and pgcdc_events counts them once: the records of the
    aborted Kafka transaction are counted only when their replay commits."""
    with pipeline(
        pg15,
        kafka,
        registry,
        "replay",
        ["CREATE TABLE big (id int PRIMARY KEY, pad text)"],
        work_mem="1MB",
    ) as p:
        env = p.env() | {"PGCDC_TEST_FAIL_AT": "20000", "PGCDC_TEST_FAIL_TOPIC": ".big"}
        log_path = p.state_dir / "worker-replay.log"
        with log_path.open("wb") as log:
            proc = subprocess.Popen(
                [sys.executable, "-m", "tests.faults.replay_worker"],
                cwd=REPO,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        worker = WorkerProcess(proc, log_path)
        p.workers.append(worker)
        worker.wait_ready(90)
        port = int(worker.wait_event({"metrics_serving"}, 30)["port"])
        worker.wait_event(["snapshot_done"], 90)  # no op r of the workload's rows
        p.execute("INSERT INTO big VALUES (-1, 'before')")
        conn = p.connect()
        p.wait_confirmed(insert_lsn(conn.cursor()) - 1, 60, worker)  # an offset to replay from
        conn.close()
        p.execute(
            f"INSERT INTO big SELECT g, repeat('x', 100) FROM generate_series(1, {ROWS}) g",
            "INSERT INTO big VALUES (-2, 'after')",
        )
        conn = p.connect()
        end = insert_lsn(conn.cursor())
        conn.close()
        p.wait_confirmed(end - 1, 180, worker)
        assert proc.poll() is None, worker.tail()
        text = worker.log_text()
        assert "INJECTED" in text
        assert worker.has_event("kafka_txn_replay"), worker.tail()
        assert worker.has_event("worker_replay_from_offsets"), worker.tail()
        assert sum(e.get("event") == "worker_resumed" for e in worker.events()) >= 1
        reads = read_all(p.settings(), [p.topic("big")])
        ids = Counter(r.key["id"] for r in reads if r.value is not None and r.value["op"] == "c")
        assert set(ids) == {-1, -2, *range(1, ROWS + 1)}
        assert max(ids.values()) == 1, [k for k, n in ids.items() if n > 1][:10]
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as resp:
            body = resp.read().decode()
        topic = re.escape(p.topic("big"))
        counted = [
            float(line.rsplit(" ", 1)[1])
            for line in body.splitlines()
            if re.match(rf'pgcdc_events_total\{{(?=.*op="c")(?=.*topic="{topic}").*\}} ', line)
        ]
        assert counted == [ROWS + 2], counted
        assert worker.terminate(60) == 0
