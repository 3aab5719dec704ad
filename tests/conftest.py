"""Suite-wide configuration: fixture modules, hypothesis profiles, and the groups the
suite runs in when it is spread over processes (`.ci/run`: pytest-xdist, `-n 3`).

Groups: each test file runs whole in one process, as the suite's files have always been
written (module fixtures, names unique per file); the consumer tests, which share one
Kafka Connect, run in one process. The tests marked `alone` (below: those that start,
stop or kill service instances, time recoveries, or read server-wide state such as the
transactions of other databases) are left out of the distributed pass; `.ci/run` runs
them afterwards with nothing else of the suite beside them, in three lanes at once
(their split and why is in .ci/run): the fault-instance tests; the shared-server-state
tests, then the fault tests that need only the shared services, then the Python
reference's differential tests; and the failover tests on the primary/standby pairs.
The tests that start and stop the TLS instances (tests/integration/test_tls*,
tests/deploy/test_topology_tls.py) all run in the shared-server-state lane, one file
after another, never two at once.
"""

from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, settings
from xdist.scheduler import LoadFileScheduling

pytest_plugins = ["tests.fixtures.services", "tests.fixtures.prometheus"]

settings.register_profile(
    "ci", max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.register_profile("dev", max_examples=100, deadline=None)
settings.load_profile("ci" if os.environ.get("CI") else "dev")


# Scopes of the distributed run: a test file, or one shared scope for the files that
# share Kafka Connect.
_SHARED_SCOPES = {"consumers": "connect"}
# Test files (or directories) that must run with nothing else running (module docstring).
ALONE = (
    "tests/faults/",
    "tests/deploy/",
    "tests/integration/test_reorderbuffer_vs_pg.py",
    "tests/integration/test_reorderbuffer_spill_txns_vs_pg.py",
    # the server's spill counters move with every database's transactions in its buffer
    "tests/integration/test_metrics_spill.py",
    # VACUUM must remove a row's chunks: any other worker's slot xmin (the TOAST fill's
    # hold, cluster-wide) keeps them
    "tests/integration/test_toast_fill.py::test_hold_past_its_cap",
    # the consistent point depends on every transaction running on the server
    "tests/integration/test_snapshot_in_flight.py",
    # start and stop the TLS instances (a second Kafka and registry JVM)
    "tests/integration/test_tls",
)


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark the tests of ALONE `alone`."""
    for item in items:
        if item.nodeid.startswith(ALONE):
            item.add_marker(pytest.mark.alone)


class _GroupScheduling(LoadFileScheduling):
    """LoadFileScheduling whose scope is the file, or its shared scope (module docstring).
    (pytest-xdist's own `xdist_group` marks do not reach the scheduler under pytest 9,
    which no longer reads the `_nodeid` they rewrite.)"""

    def _split_scope(self, nodeid: str) -> str:
        path = nodeid.split("::", 1)[0]
        parts = path.split("/")
        if len(parts) > 1 and parts[0] == "tests" and parts[1] in _SHARED_SCOPES:
            return _SHARED_SCOPES[parts[1]]
        return path


def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> LoadFileScheduling:
    """The distributed run's scheduler (`.ci/run`: `-n 3`)."""
    return _GroupScheduling(config, log)  # type: ignore[arg-type]
