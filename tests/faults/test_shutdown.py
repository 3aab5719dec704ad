"""SIGTERM during the replay of a large transaction (issue 11, defect 7)."""

from __future__ import annotations

import os
import signal
import time
from typing import Any

import pytest
from confluent_kafka import Consumer, TopicPartition

from tests.integration.pipeline_kafka_support import (
    current_xid,
    insert_lsn,
    pipeline,
    read_all,
    unique,
)

pytestmark = [pytest.mark.integration, pytest.mark.faults]

# Large enough to spill and to be caught in the middle of its replay: the native path
# publishes one spilled transaction at 200-300k rows/s, so the replay lasts about a
# second. The worker is frozen (SIGSTOP) the moment 1% of it is in the topic, so the
# replay cannot end between that count and the SIGTERM however fast it is. (600,000
# rows took 138 s of CI's critical lane, mostly reading them back twice.)
ROWS = 200_000
# kafka.shutdown_timeout_s: the replay may go on this long after SIGTERM. A count of 1%
# in the topic lags what the worker has already handed to librdkafka; on a quiet machine
# the rest of the replay then took under 0.2 s, the transaction was committed whole and
# the test failed every time (9 runs of 9), though never in CI, where the lanes share
# the cores. 10 ms is too short for that (3 of 3 runs passed).
GRACE_S = 0.01


class Watermarks:
    """One read_uncommitted consumer kept open, so that each count is one watermark
    request (a new consumer per count took long enough for the replay to end)."""

    def __init__(self, bootstrap: str) -> None:
        self.consumer = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": unique("wm"),
                "isolation.level": "read_uncommitted",
            }
        )

    def count(self, topic: str) -> int:
        meta = self.consumer.list_topics(topic, timeout=10).topics.get(topic)
        if meta is None or meta.error is not None:
            return 0
        total = 0
        for n in meta.partitions:
            tp = TopicPartition(topic, n)
            low, high = self.consumer.get_watermark_offsets(tp, timeout=10, cached=False)
            total += high - low
        return total

    def close(self) -> None:
        self.consumer.close()


def test_sigterm_mid_replay_aborts_within_the_shutdown_timeout(
    pg15: dict[str, Any], kafka: dict[str, Any], registry: dict[str, Any]
) -> None:
    """SIGTERM while a 200,000-row transaction is being written into its Kafka
    transaction: the worker aborts that Kafka transaction and exits 0 within
    kafka.shutdown_timeout_s (10 ms here) plus a few seconds, instead of finishing the
    replay; nothing of the transaction is visible to read_committed consumers; a
    restarted worker publishes it once, whole."""
    with pipeline(
        pg15,
        kafka,
        registry,
        "term",
        ["CREATE TABLE big (id int PRIMARY KEY)"],
        extra_env={"PGCDC_KAFKA__SHUTDOWN_TIMEOUT_S": str(GRACE_S)},
    ) as p:
        worker = p.start_worker()
        worker.wait_ready(90)
        conn = p.connect()
        cur = conn.cursor()
        cur.execute("BEGIN")
        xid = current_xid(cur)
        cur.execute(f"INSERT INTO big SELECT generate_series(1, {ROWS})")
        cur.execute("COMMIT")
        end = insert_lsn(cur)
        conn.close()
        topic = p.topic("big")
        marks = Watermarks(p.kafka["bootstrap"])
        try:
            deadline = time.monotonic() + 180
            while marks.count(topic) < ROWS // 100:
                assert time.monotonic() < deadline, worker.tail()
                time.sleep(0.05)
            # Frozen, the worker cannot finish the replay between the count that proves
            # it is inside it and the SIGTERM; SIGCONT delivers the SIGTERM at once.
            os.kill(worker.proc.pid, signal.SIGSTOP)
            written = marks.count(topic)
        finally:
            marks.close()
        assert written < ROWS, f"the replay was through ({written}) before the SIGTERM"
        t0 = time.monotonic()
        worker.proc.send_signal(signal.SIGTERM)
        os.kill(worker.proc.pid, signal.SIGCONT)
        code = worker.wait(120)
        took = time.monotonic() - t0
        assert code == 0, worker.tail()
        assert took < 6.0, f"SIGTERM took {took:.1f}s"
        assert worker.has_event("worker_shutdown_aborts_transaction")
        reads = read_all(p.settings(), [topic])
        assert not [r for r in reads if r.value and r.value["source"]["txId"] == xid]

        worker = p.start_worker()
        worker.wait_ready(90)
        p.wait_confirmed(end - 1, 300, worker)
        assert worker.terminate() == 0
        ids = [
            r.key["id"]
            for r in read_all(p.settings(), [topic], timeout_s=240)
            if r.value is not None
        ]
        assert len(ids) == ROWS and len(set(ids)) == ROWS
