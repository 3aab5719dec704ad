"""The CI subset of the fault scenarios (tests/faults/scenarios.py; the whole suite is
tests/faults/run_all.py): each runs the continuous workload through one fault, in
quick mode, and must show 0 lost, duplicated, partial, out of order and aborted
visible, and topics that materialize to SELECT *."""

from __future__ import annotations

from typing import Any

import pytest

from tests.faults.scenarios import SCENARIOS, run_scenario, table

pytestmark = [pytest.mark.integration, pytest.mark.faults, pytest.mark.slow]

# About 3 minutes on the 2-core machine; with the rest of tests/faults under 10. The
# PostgreSQL stall and the two workers have their own tests (test_stall, test_standby).
CI_SUBSET = (
    "broker kill -9 mid-batch",
    "postgres restart immediate",
    "registry outage during DDL",
    "kill -9 at random points",
)


@pytest.mark.parametrize("name", CI_SUBSET)
def test_scenario(
    name: str,
    fault_pg15: dict[str, Any],
    fault_kafka: dict[str, Any],
    fault_registry: dict[str, Any],
) -> None:
    """One scenario during the continuous workload: every committed source transaction
    exactly once, whole, in order; none of the aborted ones; rows equal SELECT *."""
    infos = {"fault-pg15": fault_pg15, "fault-kafka": fault_kafka, "fault-registry": fault_registry}
    result = run_scenario(SCENARIOS[name], infos, quick=True)
    print(table([result]))
    assert not result.error, table([result])
    assert result.verdict.clean, f"{table([result])}\n{result.verdict.examples}\n{result.story}"
    assert result.verdict.committed > 20
