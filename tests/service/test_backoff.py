"""Retry budgets (`service.backoff`): never give up before the budget, never sleep past it."""

from __future__ import annotations

import time

from service.backoff import Backoff


def test_retries_for_the_whole_budget_and_no_longer() -> None:
    """A loop that retries until `spent()` makes its last attempt at the deadline: it
    runs for at least the budget and ends within one short step after it, however the
    doubling delays fall."""
    began = time.monotonic()
    backoff = Backoff(0.5, first_s=0.05, max_s=0.2)
    attempts = 0
    while True:
        attempts += 1
        if backoff.spent():
            break
        backoff.sleep()
    took = time.monotonic() - began
    assert 0.5 <= took < 0.7, took
    assert attempts >= 4  # 0.05, 0.1, 0.2, then cut at the deadline


def test_delays_double_up_to_the_cap_and_stop_at_the_deadline() -> None:
    """The waits are first_s, doubling up to max_s, and the last is cut so that it ends
    at the deadline."""
    waits: list[float] = []
    backoff = Backoff(100.0, first_s=1.0, max_s=4.0)
    for _ in range(5):
        backoff.sleep(waits.append)
    assert waits == [1.0, 2.0, 4.0, 4.0, 4.0]
    backoff.deadline = time.monotonic() + 0.5
    backoff.sleep(waits.append)
    assert 0.4 < waits[-1] <= 0.5


def test_a_zero_budget_is_spent_at_once() -> None:
    """Budget 0: spent before any retry (one attempt), and nothing to wait."""
    backoff = Backoff(0.0)
    assert backoff.spent()
    assert backoff.remaining() == 0.0
