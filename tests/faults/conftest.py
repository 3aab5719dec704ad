"""Fixtures for the fault suite. Its services are services.py's fault instances
(fault-pg15, fault-pg18, fault-kafka, fault-registry; tests/fixtures/services.py starts
them on first use); these fixtures only put one of them into a state a test needs and back.
The fault instances this session started are stopped when it ends, unless
PGCDC_KEEP_FAULT_SERVICES=1 (for a developer running the suite again and again).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest

from tests.faults import pgctl
from tests.fixtures import services


@pytest.fixture(scope="session", autouse=True)
def _stop_fault_services() -> Iterator[None]:
    yield
    if os.environ.get("PGCDC_KEEP_FAULT_SERVICES") == "1":
        return
    services.stop_service(*(name for name in services._started if name.startswith("fault-")))


@pytest.fixture
def replica_pg(fault_pg15: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """fault-pg15 restarted with wal_level=replica, back to logical afterwards.

    A server refuses to start at wal_level=replica while it has a logical slot, so any
    left by an earlier test are dropped first."""
    conn = pgctl.admin(fault_pg15)
    with conn.cursor() as cur:
        cur.execute(
            "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots "
            "WHERE slot_type = 'logical' AND NOT active"
        )
    conn.close()
    pgctl.set_and_restart(fault_pg15, "wal_level", "replica")
    try:
        yield fault_pg15
    finally:
        pgctl.set_and_restart(fault_pg15, "wal_level", None)
