"""pgcdc's snapshot markers against Debezium's own: PostgreSQL -> `pgcdc run` -> Kafka,
over the tables of the captured scenarios (tests/consumers/snapshot_marker_workload.py),
compared field by field with the capture of Debezium 3.6.1
(tests/consumers/golden/debezium-3.6.1.Final-snapshot-markers.json, made by
tests/consumers/capture_debezium_snapshot_markers.py).

For every row: `op`, `source.snapshot`, and `source.sequence`, which is `[null, "<lsn>"]`
with `<lsn>` the row's own `source.lsn` (the LSNs themselves differ between two servers'
runs, the shape does not). Under both snapshot methods: blocking (one shared exported
snapshot) and chunked (watermarks), with two-row chunks and one reader, so that tables
are published in their order as Debezium's are. (With several readers tables may finish
out of order; `last` then stays on the last record published, the snapshot's end, as
test_snapshot_kafka.py checks.)
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.consumers.snapshot_marker_workload import GOLDEN, SCENARIOS, ddl
from tests.integration.avro_kafka_support import read_topics
from tests.integration.pipeline_kafka_support import insert_lsn, pipeline

pytestmark = pytest.mark.integration


def _fields(value: dict[str, Any]) -> dict[str, Any]:
    source = value["source"]
    sequence = json.loads(source["sequence"])
    return {
        "op": value["op"],
        "snapshot": source["snapshot"],
        # the shape, with the row's own LSN in its place
        "sequence": [sequence[0], "<lsn>" if sequence[1] == str(source["lsn"]) else sequence[1]],
    }


@pytest.mark.parametrize("method", ["blocking", "chunked"])
@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
def test_snapshot_markers_equal_debezium(
    pg15: dict[str, Any],
    kafka: dict[str, Any],
    registry: dict[str, Any],
    scenario: str,
    method: str,
) -> None:
    """Each row's op, source.snapshot and source.sequence equal Debezium's for the
    same tables: first table empty, one-row and empty tables in the middle, last table
    empty, two tables, one table, one row; `snapshot_done` logs the rows published."""
    env = {
        "PGCDC_SNAPSHOT__METHOD": method,
        "PGCDC_SNAPSHOT__PARALLELISM": "1",
        "PGCDC_SNAPSHOT__CHUNK_ROWS": "2",
    }
    tables = SCENARIOS[scenario]
    with pipeline(pg15, kafka, registry, "snapmk", ddl(scenario), extra_env=env) as p:
        worker = p.start_worker()
        done = worker.wait_event(["snapshot_done"], 120)
        # The count the benchmark reads (tests/perf/bench_snapshot_vs_debezium.py).
        assert done["rows"] == sum(rows for _, rows in tables), done
        worker.wait_event(["snapshot_committed"], 120)
        conn = p.connect()
        end = insert_lsn(conn.cursor())
        conn.close()
        p.wait_confirmed(end - 1, 120)
        assert worker.terminate() == 0
        filled = [name for name, rows in tables if rows]
        reads = read_topics(p.settings(), [p.topic(name) for name in filled])
        got = {
            (r.topic.rsplit(".", 1)[1], r.value["after"]["id"]): _fields(r.value)
            for r in reads
            if r.value is not None
        }
        assert len(got) == sum(rows for _, rows in tables)
    want = {
        (name, rec["id"]): _fields(
            {"op": rec["op"], "source": {k: rec[k] for k in ("snapshot", "sequence", "lsn")}}
        )
        for name, _ in tables
        for rec in GOLDEN["scenarios"][scenario][name]
    }
    assert got == want
