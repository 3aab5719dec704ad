"""Session fixtures for the fault suite: its own services (tests/faults/services.py),
started on first use and stopped when the session ends."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.faults.services import PG_PORT, FaultPostgres


@pytest.fixture
def replica_pg() -> Iterator[FaultPostgres]:
    """A PostgreSQL 15 cluster running with wal_level=replica (removed afterwards)."""
    pg = FaultPostgres("replica", 56516, wal_level="replica")
    pg.start()
    try:
        yield pg
    finally:
        pg.remove()


@pytest.fixture(scope="session")
def fault_pg() -> Iterator[FaultPostgres]:
    """The fault suite's own PostgreSQL 15 (wal_level=logical), stopped at the end."""
    pg = FaultPostgres("pg15", PG_PORT)
    pg.start()
    try:
        yield pg
    finally:
        pg.stop("fast")
