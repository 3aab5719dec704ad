"""The standby pair under kill -9 (issue 31 part 4): two supervised `pgcdc run`
processes with one configuration, the active one SIGKILLed again and again, each
takeover timed.

Receives two supervisors (`Supervised`: `scenarios.Supervisor`, which restarts its
worker a second after any exit, as `restartPolicy: Always` would), so the killed worker
comes back and becomes the next standby. `kill_active(sups, kills, rng)`, per kill:

1. waits until the pair is settled: one worker is active (/readyz 200 and at least one
   Kafka transaction committed, `pgcdc_kafka_transactions_committed`) and the other
   waits as the standby (/readyz 503 "standby: ...");
2. lets it run for a random 0.5-2 s, then SIGKILLs the active one;
3. polls every live worker's /readyz and /metrics until one of them (not the killed
   process) has committed a Kafka transaction, and returns a `Takeover`: seconds from
   the kill to that worker's /readyz 200 and to its first commit (its first published
   events or heartbeat), and whether the waiting standby or the restarted killed worker
   took over (when both pass the wait, transactional.id fencing decides).

Nothing here judges correctness: the caller runs the continuous workload meanwhile and
hands the topics to the verifier. Each worker's metrics port comes from its
`metrics_serving` log event; the probes go to 127.0.0.1.
"""

from __future__ import annotations

import random
import re
import time
import urllib.error
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from tests.integration.pipeline_kafka_support import WorkerProcess

TAKEOVER_LIMIT_S = 30.0  # issue 31's target for one takeover
_COMMITS = re.compile(r"^pgcdc_kafka_transactions_committed_total\{[^}]*\} ([0-9.e+]+)$", re.M)


class Supervised(Protocol):
    """What `kill_active` needs of a supervisor (tests.faults.scenarios.Supervisor)."""

    worker: WorkerProcess | None

    def kill(self) -> None: ...


@dataclass
class Takeover:
    """One kill of the active worker and what followed."""

    ready_s: float  # kill -> the new active worker's /readyz 200
    commit_s: float  # kill -> its first committed Kafka transaction
    by: str  # "standby" (waited as one) or "restarted" (the killed worker, started again)


@dataclass
class _Probe:
    """One live worker's state as its endpoints say it."""

    pid: int
    ready: bool
    reason: str
    commits: float


def _get(port: int, path: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=2) as resp:
            return int(resp.status), resp.read().decode()
    except urllib.error.HTTPError as exc:
        return int(exc.code), exc.read().decode()


def _probe(w: WorkerProcess | None) -> _Probe | None:
    """The worker's /readyz and Kafka commit count; None while it is not serving."""
    if w is None or w.proc.poll() is not None:
        return None
    serving = [e for e in w.events() if e.get("event") == "metrics_serving"]
    if not serving:
        return None
    port = int(serving[0]["port"])
    try:
        status, reason = _get(port, "/readyz")
        _, text = _get(port, "/metrics")
    except OSError:  # exiting, or killed between the poll and the probe
        return None
    found = _COMMITS.search(text)
    return _Probe(w.pid, status == 200, reason.strip(), float(found.group(1)) if found else 0.0)


def wait_settled(sups: Sequence[Supervised], timeout: float) -> tuple[int, int]:
    """Until one worker is active and committing and the other waits as the standby;
    returns their pids (active, standby)."""
    deadline = time.monotonic() + timeout
    seen: list[_Probe | None] = []
    while time.monotonic() < deadline:
        seen = [_probe(s.worker) for s in sups]
        active = [x for x in seen if x is not None and x.ready and x.commits > 0]
        standby = [x for x in seen if x is not None and x.reason.startswith("standby")]
        if len(active) == 1 and len(standby) == 1:
            return active[0].pid, standby[0].pid
        time.sleep(0.2)
    raise AssertionError(f"no active worker with a standby within {timeout}s: {seen}")


def _wait_takeover(
    sups: Sequence[Supervised], killed: int, standby: int, killed_at: float, timeout: float
) -> Takeover:
    ready_at: float | None = None
    deadline = killed_at + timeout
    while time.monotonic() < deadline:
        for s in sups:
            x = _probe(s.worker)
            if x is None or x.pid == killed:
                continue
            now = time.monotonic()
            if x.ready and ready_at is None:
                ready_at = now
            if x.commits > 0:
                by = "standby" if x.pid == standby else "restarted"
                ready_s = (ready_at or now) - killed_at
                return Takeover(round(ready_s, 2), round(now - killed_at, 2), by)
        time.sleep(0.1)
    raise AssertionError(f"no worker took over within {timeout}s of the kill")


def kill_active(
    sups: Sequence[Supervised], kills: int, rng: random.Random, *, timeout: float = 120
) -> list[Takeover]:
    """SIGKILL the active worker `kills` times (see the module docstring)."""
    out: list[Takeover] = []
    for _ in range(kills):
        active, standby = wait_settled(sups, timeout)
        time.sleep(rng.uniform(0.5, 2.0))
        victim = next(s for s in sups if s.worker is not None and s.worker.pid == active)
        killed_at = time.monotonic()
        victim.kill()
        out.append(_wait_takeover(sups, active, standby, killed_at, timeout))
    return out


def summary(takeovers: Sequence[Takeover]) -> str:
    """One line for the scenario table and the closing note."""
    commits = sorted(t.commit_s for t in takeovers)
    by_restarted = sum(1 for t in takeovers if t.by == "restarted")
    return (
        f"{len(takeovers)} takeovers, first commit after "
        + " ".join(f"{t.commit_s:.1f}" for t in takeovers)
        + f" s (max {commits[-1]:.1f}, median {commits[len(commits) // 2]:.1f}); ready after "
        + " ".join(f"{t.ready_s:.1f}" for t in takeovers)
        + f" s; {by_restarted} by the restarted worker"
    )
