"""A chunked initial snapshot against a standby source is a fatal SourceSetupError
naming snapshot.method (issue 31), on PG15 and PG18, against the ha pairs.

The chunked method writes its DBLog watermarks into the source's WAL
(pg_logical_emit_message), which a standby refuses ("cannot execute ... during
recovery"); without the check at start each chunk read would fail and be retried for
ever. The blocking method writes nothing and runs on a standby
(tests/faults/test_failover.py streams from one).
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.faults.ha_exclusive import on_standby, rebuilt_pair
from tests.integration.pipeline_kafka_support import pipeline

pytestmark = [pytest.mark.integration, pytest.mark.faults]


@pytest.mark.parametrize("version", ["15", "18"])
def test_chunked_snapshot_on_a_standby_is_fatal(
    version: str, kafka: dict[str, Any], registry: dict[str, Any]
) -> None:
    """The worker streaming from the standby with snapshot.method chunked exits 1 at
    start with SourceSetupError naming snapshot.method and the way out."""
    with (
        rebuilt_pair(version) as (primary, standby),
        pipeline(primary, kafka, registry, "sbchunk", ["CREATE TABLE t (id int PRIMARY KEY)"]) as p,
    ):
        p.execute("INSERT INTO t SELECT generate_series(1, 100)")
        on_standby(p, standby, primary)
        p.extra_env.update({"PGCDC_SNAPSHOT__MODE": "initial", "PGCDC_SNAPSHOT__METHOD": "chunked"})
        worker = p.start_worker()
        code = worker.wait(90)
        log = worker.log_text()
        assert code == 1, log[-3000:]
        for text in ("SourceSetupError", "standby", "snapshot.method: blocking"):
            assert text in log, f"{text!r} not in:\n{log[-3000:]}"
        assert "field=snapshot.method" in log, log[-3000:]
