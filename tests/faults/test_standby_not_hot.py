"""A standby source that is not hot (`hot_standby = off`) is a fatal SourceSetupError
naming source.host (issue 31), on PG15 and PG18, against the ha pairs.

Such a standby accepts no connection ("the database system is not accepting
connections ... Hot standby mode is disabled"); pgcdc reads the catalog from the server
it streams from, so it stops at once with exit 1 instead of retrying for the whole of
source.retry_budget_s. The pair is held exclusively (tests/faults/ha_exclusive.py):
the standby is restarted with a setting the other HA tests do not expect.
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.faults.ha_exclusive import rebuilt_pair
from tests.integration.pipeline_kafka_support import pipeline

pytestmark = [pytest.mark.integration, pytest.mark.faults]


def _restart_not_hot(standby: dict[str, Any]) -> None:
    """Append `hot_standby = off` (the last line wins) and restart the standby."""
    pgdata = Path(standby["pgdata"])
    with (pgdata / "postgresql.conf").open("a") as conf:
        conf.write("\n# test_standby_not_hot\nhot_standby = off\n")
    subprocess.run(
        [
            "runuser", "-u", "postgres", "--",
            str(Path(standby["bin"]) / "pg_ctl"), "-D", str(pgdata),
            "-l", str(pgdata.parent / "postgres.log"), "-m", "fast", "-w", "restart",
        ],
        check=True,
        capture_output=True,
        timeout=120,
    )  # fmt: skip


@pytest.mark.parametrize("version", ["15", "18"])
def test_standby_with_hot_standby_off_is_fatal(
    version: str, kafka: dict[str, Any], registry: dict[str, Any]
) -> None:
    """The worker pointed at a standby with hot_standby = off exits 1 within seconds
    with SourceSetupError naming source.host and the setting to change."""
    with (
        rebuilt_pair(version) as (primary, standby),
        pipeline(primary, kafka, registry, "nothot", ["CREATE TABLE t (id int)"]) as p,
    ):
        _restart_not_hot(standby)
        p.extra_env.update(
            {
                "PGCDC_SOURCE__HOST": str(standby["host"]),
                "PGCDC_SOURCE__PORT": str(standby["port"]),
                "PGCDC_SOURCE__PRIMARY_HOST": str(primary["host"]),
                "PGCDC_SOURCE__PRIMARY_PORT": str(primary["port"]),
            }
        )
        worker = p.start_worker()
        code = worker.wait(60)
        log = worker.log_text()
        assert code == 1, log[-3000:]
        for text in ("SourceSetupError", "not hot", "hot_standby = on", "field=source.host"):
            assert text in log, f"{text!r} not in:\n{log[-3000:]}"
