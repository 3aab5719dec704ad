"""The slot-stats metrics after a spilling workload, scraped over HTTP.

A real workload is decoded by a pgcdc Session under a 1 MB `work_mem`, so the reorder
buffer spills; the same run through a test_decoding slot pins the counters to the
server's. Not the server's 64 kB minimum: the servers are shared, and under that limit
another database's DDL transaction, whose invalidations PostgreSQL queues into every
slot's reorder buffer (xact_decode, XLOG_XACT_INVALIDATIONS, no database check), can
be large enough to spill on the server's side too (`spill_txns` 2 against pgcdc's 1 in
a CI run), which pgcdc, keeping schema history outside the buffer, never buffers.
Even at 1 MB, another database's transactions in the server's buffer move its eviction
points (`spill_count` 4 against pgcdc's 3 in a CI run), so the file runs `alone`
(tests/conftest.py ALONE): with no other test writing to the shared servers.
`Metrics.sync_slot_stats` then mirrors `ReorderBuffer.stats` into Prometheus counters,
and `/metrics`, `/healthz` and `/readyz` are read from a real HTTP server on a free
port.
"""

from __future__ import annotations

import urllib.error
import urllib.request
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from service.app.metrics import SLOT_STATS, Metrics
from tests.integration.reorderbuffer_vs_pg_support import run_vs_pg_quiet, small_and_large

pytestmark = pytest.mark.integration


def _get(port: int, path: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as resp:
            return int(resp.status), resp.read().decode()
    except urllib.error.HTTPError as exc:
        return int(exc.code), exc.read().decode()


def _slot_samples(port: int, slot: str) -> dict[str, float]:
    status, body = _get(port, "/metrics")
    assert status == 200
    found: dict[str, float] = {}
    for family in text_string_to_metric_families(body):
        for sample in family.samples:
            if (
                sample.name.startswith("pgcdc_slot_")
                and sample.name.endswith("_total")
                and sample.labels.get("slot") == slot
            ):
                found[sample.name] = sample.value
    return found


def test_spill_counters_scraped_equal_reorder_buffer(pg: dict[str, Any]) -> None:
    """After sync_slot_stats, pgcdc_slot_<stat>_total{slot} equals the reorder buffer's
    counter (and the server's), the spill counters moved from 0, a second sync changes
    nothing, and /healthz and /readyz answer with the worker's health."""
    tables = [
        "CREATE TABLE small (id int, note text) WITH (autovacuum_enabled = off)",
        "CREATE TABLE big (id int) WITH (autovacuum_enabled = off)",
    ]
    # 20,000 x 132 accounted bytes over 1 MB: two evictions, then the rest at commit
    r = run_vs_pg_quiet(pg, tables, list(small_and_large(10, 20_000)), work_mem_kb=1024)
    stats = r.rb_stats
    assert stats.spill_txns == r.server_stats["spill_txns"] == 1
    assert stats.spill_count == r.server_stats["spill_count"] == 3
    assert stats.total_txns == r.server_stats["total_txns"] == 11

    slot = "rb_metrics_slot"
    metrics = Metrics(slot)
    port = metrics.serve("127.0.0.1", 0)
    try:
        assert port > 0
        before = _slot_samples(port, slot)
        assert all(value == 0 for value in before.values())

        metrics.sync_slot_stats(stats)
        after = _slot_samples(port, slot)
        expected = {f"pgcdc_slot_{name}_total": float(getattr(stats, name)) for name in SLOT_STATS}
        assert after == expected
        for name in ("spill_txns", "spill_count", "spill_bytes", "total_txns", "total_bytes"):
            assert after[f"pgcdc_slot_{name}_total"] > 0, name

        metrics.sync_slot_stats(stats)  # counters only move up to the buffer's value
        assert _slot_samples(port, slot) == expected

        assert _get(port, "/healthz") == (200, "ok\n")
        assert _get(port, "/readyz") == (503, "starting\n")
        metrics.health.ready, metrics.health.reason = True, "streaming"
        assert _get(port, "/readyz") == (200, "streaming\n")
        metrics.health.live = False
        assert _get(port, "/healthz") == (503, "dead\n")
        assert _get(port, "/nope")[0] == 404
    finally:
        metrics.close()
