"""Suite-wide configuration: fixture modules and hypothesis profiles."""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

pytest_plugins = ["tests.fixtures.services"]

settings.register_profile(
    "ci", max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.register_profile("dev", max_examples=100, deadline=None)
settings.load_profile("ci" if os.environ.get("CI") else "dev")
