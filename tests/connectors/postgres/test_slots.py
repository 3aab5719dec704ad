"""Slot statements against a real PostgreSQL: dropping a slot a walsender still holds."""

from __future__ import annotations

import threading
import time
import uuid
from typing import Any

import psycopg2
import pytest

from connectors.postgres.slots import drop_slot_once_released, slot_state
from tests.fixtures.slots import drop_slot_when_released, holding

pytestmark = pytest.mark.integration


@pytest.fixture
def held(pg15: dict[str, Any]) -> Any:
    """A fresh physical slot (reserving WAL) and an autocommit admin connection; the
    slot is dropped at the end whatever the test left."""
    slot = f"pgcdc_t_{uuid.uuid4().hex[:10]}"
    admin = psycopg2.connect(pg15["dsn"])
    admin.autocommit = True
    with admin.cursor() as cur:
        cur.execute("SELECT pg_create_physical_replication_slot(%s, true)", (slot,))
    try:
        yield slot, admin
    finally:
        drop_slot_when_released(admin, slot)
        admin.close()


def test_drop_waits_until_the_walsender_lets_go(pg15: dict[str, Any], held: Any) -> None:
    """A slot still active under a walsender (its connection closed 1 s later, as
    peek's stream is closed just before its slot is dropped) is dropped once it is
    released, not refused as "in use"."""
    slot, admin = held
    with holding(pg15["dsn"], slot) as release:
        timer = threading.Timer(1.0, release)
        timer.start()
        began = time.monotonic()
        with admin.cursor() as cur:
            state = slot_state(cur, slot)
            assert state is not None and state.active
            assert drop_slot_once_released(cur, slot, timeout_s=20) is True
            assert slot_state(cur, slot) is None
        timer.join()
    assert time.monotonic() - began >= 0.9  # it waited for the release


def test_drop_gives_up_on_a_slot_that_stays_held(pg15: dict[str, Any], held: Any) -> None:
    """While another connection keeps streaming from the slot, the drop gives up after
    its timeout with False and leaves the slot as it was."""
    slot, admin = held
    with holding(pg15["dsn"], slot), admin.cursor() as cur:
        began = time.monotonic()
        assert drop_slot_once_released(cur, slot, timeout_s=0.5) is False
        assert time.monotonic() - began >= 0.5
        state = slot_state(cur, slot)
        assert state is not None and state.active


def test_drop_of_a_missing_slot_is_done(pg15: dict[str, Any]) -> None:
    """A slot that does not exist counts as dropped."""
    admin = psycopg2.connect(pg15["dsn"])
    admin.autocommit = True
    try:
        with admin.cursor() as cur:
            assert drop_slot_once_released(cur, f"pgcdc_t_{uuid.uuid4().hex[:10]}") is True
    finally:
        admin.close()
