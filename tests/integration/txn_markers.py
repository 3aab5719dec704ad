"""The tests' Kafka readers' wait for transaction markers (`await_markers`).

Receives: the settings (bootstrap servers and security options) and the partitions a
read_committed reader is about to read to their end.
Guarantees: on return, every partition's last stable offset equals its high watermark,
or MARKERS_WAIT_S has passed (a transaction still open).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from confluent_kafka import IsolationLevel, TopicPartition
from confluent_kafka.admin import AdminClient, OffsetSpec

from connectors.kafka.security import security_conf
from service.config import Settings

# How long a reader waits for the partitions' last stable offsets to reach their high
# watermarks: a transaction's markers are written within milliseconds of its commit.
MARKERS_WAIT_S = 3.0


def await_markers(settings: Settings, parts: Sequence[TopicPartition]) -> None:
    """Wait (up to MARKERS_WAIT_S) until every partition's last stable offset equals its
    high watermark, so that a read_committed read sees each committed transaction whole.

    Kafka's transaction coordinator answers EndTxn once the commit is decided, and then
    writes the commit markers to the partitions; until a partition has its marker, its
    LSO stays before that transaction's records. A worker's `commit_transaction` (and
    the offset record `wait_confirmed` reads) can so be visible before the records of
    the same transaction in another topic: a read right then ended, at that partition's
    end (PARTITION_EOF comes at the LSO), with part of the last transaction
    (test_gap_with_a_transaction_across_the_seam_is_bridged: "partial 2598: 60 of 61
    events"). A transaction still open (a worker mid-batch) keeps LSO < HW past the wait:
    the read then goes on as before, without its records."""
    if not parts:
        return
    admin = AdminClient(
        {"bootstrap.servers": settings.kafka.bootstrap_servers, **security_conf(settings)}
    )

    def ends(level: Any) -> dict[tuple[str, int], int]:
        asked = {TopicPartition(tp.topic, tp.partition): OffsetSpec.latest() for tp in parts}
        got = admin.list_offsets(asked, isolation_level=level, request_timeout=10)
        return {(tp.topic, tp.partition): int(f.result().offset) for tp, f in got.items()}

    deadline = time.monotonic() + MARKERS_WAIT_S
    while True:
        stable, high = ends(IsolationLevel.READ_COMMITTED), ends(IsolationLevel.READ_UNCOMMITTED)
        if stable == high or time.monotonic() >= deadline:
            return
        time.sleep(0.05)
