"""Retry budgets: exponential backoff that gives up only once its time budget is spent.

Every edge that retries an unreachable service (the source's connections and its
replication stream, Kafka, the schema registry) does so through one `Backoff` per
outage, made at the first failure:

    backoff = Backoff(settings.kafka.retry_budget_s)
    while True:
        try:
            return call()
        except Unreachable as exc:
            if backoff.spent():
                raise BrokerUnavailableError(...) from exc
            backoff.sleep()

Guarantees: `spent()` is False until `budget_s` seconds after the `Backoff` was made,
and `sleep()` waits the current delay (`first_s`, doubling up to `max_s`) cut at that
deadline, so the last attempt is made at the deadline itself. A caller that gives up
only on `spent()` has therefore retried for its whole budget, never less: exit 3
(`RetryableError`) means exactly that (README, exit codes). A budget of 0 is spent at
once: one attempt, no retry.

No I/O; `sleep` takes the waiting function (`time.sleep`, or a stop event's `wait` so a
shutdown is not held up). One `Backoff` per retry loop, not shared between threads.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field


@dataclass(slots=True)
class Backoff:
    """One outage's retries: exponential delays within a time budget."""

    budget_s: float
    first_s: float = 0.2
    max_s: float = 5.0
    # time.monotonic() at which the budget is spent; fixed when the Backoff is made.
    deadline: float = field(init=False)
    # The next delay before it is cut at the deadline: first_s, doubling up to max_s.
    delay: float = field(init=False)

    def __post_init__(self) -> None:
        self.deadline = time.monotonic() + self.budget_s
        self.delay = self.first_s

    def spent(self) -> bool:
        """Whether the budget is used up (give up now)."""
        return time.monotonic() >= self.deadline

    def remaining(self) -> float:
        """Seconds left of the budget (0 once spent)."""
        return max(0.0, self.deadline - time.monotonic())

    def sleep(self, wait: Callable[[float], object] = time.sleep) -> None:
        """Wait the current delay, but not past the deadline; the next delay doubles."""
        wait(min(self.delay, self.remaining()))
        self.delay = min(self.delay * 2, self.max_s)
