"""The slot's claim (connectors.postgres.claim) against a real PostgreSQL: one holder
at a time, and a holder's claim gone with its killed process."""

from __future__ import annotations

import subprocess
import sys
import time
import uuid
from typing import Any

import pytest

from connectors.postgres.claim import SlotClaim
from tests.fixtures.services import REPO

pytestmark = pytest.mark.integration

HOLD = """
import sys, time
from connectors.postgres.claim import SlotClaim
claim = SlotClaim(sys.argv[1], sys.argv[2], keepalive_s=10)
print(claim.try_take(), flush=True)
time.sleep(600)
"""


@pytest.mark.parametrize("pg_name", ["pg15", "pg18"])
def test_one_holder_at_a_time(pg_name: str, request: pytest.FixtureRequest) -> None:
    """A second claim on the same slot is refused while the first is held, another
    slot's is not, the holder taking it again is a no-op, and after `release` the
    second claim succeeds."""
    pg: dict[str, Any] = request.getfixturevalue(pg_name)
    slot = f"pgcdc_c_{uuid.uuid4().hex[:10]}"
    first, second = (
        SlotClaim(pg["dsn"], slot, keepalive_s=10),
        SlotClaim(pg["dsn"], slot, keepalive_s=10),
    )
    other = SlotClaim(pg["dsn"], slot + "x", keepalive_s=10)
    try:
        assert first.try_take() and first.held
        assert not second.try_take() and not second.held
        assert other.try_take()
        assert first.try_take()  # held already: no second lock, no new connection
        first.release()
        assert not first.held
        assert second.try_take()
        assert not first.try_take()
    finally:
        for claim in (first, second, other):
            claim.release()


def test_claim_of_a_killed_process_is_released(pg15: dict[str, Any]) -> None:
    """A process holding the claim is SIGKILLed (as a worker is): its backend sees the
    socket closed and exits, so another claim succeeds within seconds."""
    slot = f"pgcdc_c_{uuid.uuid4().hex[:10]}"
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD, pg15["dsn"], slot],
        cwd=REPO,
        stdout=subprocess.PIPE,
        text=True,
    )
    claim = SlotClaim(pg15["dsn"], slot, keepalive_s=10)
    try:
        assert holder.stdout is not None
        assert holder.stdout.readline().strip() == "True"
        assert not claim.try_take()
        holder.kill()
        holder.wait(10)
        deadline = time.monotonic() + 10
        while not claim.try_take():
            assert time.monotonic() < deadline, "the killed holder's claim was never released"
            time.sleep(0.1)
    finally:
        if holder.poll() is None:
            holder.kill()
            holder.wait(10)
        if holder.stdout is not None:
            holder.stdout.close()
        claim.release()
