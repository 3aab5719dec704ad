"""Suite-wide configuration: fixture modules, hypothesis profiles, and the groups the
suite runs in when it is spread over processes (`.ci/run`: pytest-xdist, `-n 3`).

Groups: each test file runs whole in one process, as the suite's files have always been
written (module fixtures, names unique per file); the tests that start, stop or kill
service instances (tests/faults, tests/deploy) share one group, so one process runs them
one after another; so do the consumer tests, which share one Kafka Connect.
"""

from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, settings
from xdist.scheduler import LoadFileScheduling

pytest_plugins = ["tests.fixtures.services"]

settings.register_profile(
    "ci", max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.register_profile("dev", max_examples=100, deadline=None)
settings.load_profile("ci" if os.environ.get("CI") else "dev")


# Scopes of the distributed run: a test file, or one shared scope for the files that
# stop or kill service instances (and one for those sharing Kafka Connect).
_SHARED_SCOPES = {
    "faults": "service-instances",
    "deploy": "service-instances",
    "consumers": "connect",
}


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
