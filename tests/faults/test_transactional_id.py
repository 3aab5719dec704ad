"""The default transactional.id is unique per source (issue 11, defect 7)."""

from __future__ import annotations

import time
from typing import Any

import pytest

from tests.integration.pipeline_kafka_support import Pipeline, insert_lsn, unique

pytestmark = [pytest.mark.integration, pytest.mark.faults]


def test_same_slot_name_on_two_servers_does_not_fence(
    pg15: dict[str, Any],
    fault_pg15: dict[str, Any],
    kafka: dict[str, Any],
    registry: dict[str, Any],
) -> None:
    """Two pipelines with the same slot name on two different servers (the shared
    PostgreSQL 15 and the fault suite's), each with its own topic prefix and the
    default transactional.id, both publish side by side: neither is fenced (exit 1,
    FencedError) by the other, and both commit offsets past their last insert."""
    slot = unique("tid")
    pipes = []
    try:
        for pg in (pg15, fault_pg15):
            p = Pipeline(pg, kafka, registry, unique("tid"))
            p.slot = slot
            p.create(["CREATE TABLE t (id int PRIMARY KEY)"])
            pipes.append(p)
        workers = [p.start_worker() for p in pipes]
        for w in workers:
            w.wait_ready(90)
        for i in range(10):
            for p in pipes:
                p.execute(f"INSERT INTO t VALUES ({i})")
            time.sleep(0.3)
        for p, w in zip(pipes, workers, strict=True):
            p.wait_confirmed(insert_lsn(p.connect().cursor()) - 1, 60, w)
        for w in workers:
            assert w.proc.poll() is None, w.tail()
            assert "FencedError" not in w.log_text()
            assert w.terminate() == 0
        ids = {
            e["transactional_id"]
            for w in workers
            for e in w.events()
            if e.get("event") == "worker_transactional_id"
        }
        assert len(ids) == 2 and all(i.endswith(slot) for i in ids), ids
    finally:
        for p in pipes:
            p.drop()
