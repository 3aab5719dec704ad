"""A failover to a standby that missed WAL pgcdc already published: with the slot
missing on the new primary and source.archive set, the worker stops with
TimelineDivergedError instead of bridging (issue 31 part 3), on PG15 and PG18.

The standby stops; the worker, on the primary, publishes more transactions; the
primary stops; the standby starts alone and is promoted, so its timeline 1 ends before
what Kafka holds. Resuming there would skip, as already published, transactions of the
new timeline at those LSNs. The pair is held exclusively (tests/faults/ha_exclusive.py).
"""

from __future__ import annotations

from typing import Any

import pytest

from service.lsn import format_lsn
from tests.faults.ha_exclusive import rebuilt_pair, services
from tests.faults.workload import ContinuousWorkload
from tests.fixtures.services import ensure_service, stop_service
from tests.integration.pipeline_kafka_support import EO_TABLES, insert_lsn, pipeline

pytestmark = [pytest.mark.integration, pytest.mark.faults]


@pytest.mark.parametrize("version", ["15", "18"])
def test_offsets_past_the_new_primarys_switch_point_are_fatal(
    version: str, kafka: dict[str, Any], registry: dict[str, Any]
) -> None:
    """Offsets confirmed past the end of timeline 1 on the promoted standby, whose slot
    for pgcdc is missing: exit 1 with TimelineDivergedError naming the switch point and
    the confirmed LSN; nothing more is published."""
    with (
        rebuilt_pair(version) as (primary, standby),
        pipeline(primary, kafka, registry, "hadiv", EO_TABLES) as p,
    ):
        worker = p.start_worker()
        worker.wait_ready(120)
        load = ContinuousWorkload(p, seed=61)
        load.run(20)
        stop_service(standby["service"])  # the standby misses what follows
        load.run(20)
        p.wait_confirmed(insert_lsn(p.connect().cursor()) - 1, 120, worker)
        assert worker.terminate() == 0, worker.tail()
        stored = p.last_offset()
        assert stored is not None
        stop_service(primary["service"])
        p.pg = ensure_service(standby["service"])
        assert int(services("promote", standby["service"]).split()[1]) == 2
        p.dsn = p.pg["dsn"].replace("dbname=postgres", f"dbname={p.db}")
        p.extra_env.update(
            {
                "PGCDC_SOURCE__HOST": str(p.pg["host"]),
                "PGCDC_SOURCE__PORT": str(p.pg["port"]),
                "PGCDC_SOURCE__ARCHIVE": (
                    f"cp {primary['archive']}/%f %p 2>/dev/null || cp {p.pg['archive']}/%f %p"
                ),
            }
        )
        worker = p.start_worker()
        code = worker.wait(90)
        log = worker.log_text()
        assert code == 1, log[-3000:]
        for text in ("TimelineDivergedError", format_lsn(stored.confirmed_lsn), "ended at"):
            assert text in log, f"{text!r} not in:\n{log[-3000:]}"
        assert p.last_offset() == stored
