"""The fault scenarios: each injects one fault into fault-pg15, fault-kafka or
fault-registry while the continuous workload runs, then the verifier counts what a
read_committed consumer saw.

`run_scenario(scenario, infos, quick=...)` gives each scenario a fresh pipeline (its
own database, slot and topic prefix) whose worker reaches PostgreSQL, Kafka and the
registry only through the fault suite's TCP proxies (Kafka through fault-kafka's
PROXIED listener, so the proxy sees every broker connection), and supervises the
worker as a container runtime with `restartPolicy: Always` would: whatever it exits
with, it is started again a second later. The workload and the verifier go straight
to the servers. `quick` shortens outages and counts for the CI subset.

A `Result` carries the scenario's row of the table run_all.py prints: what the worker
did (exit codes and errors, restarts), the verifier's counts, and the recovery time:
from the end of the fault until the offsets committed to Kafka passed everything the
workload had committed at that moment.
"""

from __future__ import annotations

import random
import shutil
import socket
import subprocess
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.faults import pgctl
from tests.faults.proxy import Proxy
from tests.faults.takeover import TAKEOVER_LIMIT_S, kill_active, summary
from tests.faults.verifier import Verdict, story, topics, verify
from tests.faults.workload import ContinuousWorkload, server_lsn
from tests.fixtures import services
from tests.integration.pipeline_kafka_support import (
    EO_TABLES,
    Pipeline,
    WorkerProcess,
    read_all,
    unique,
)

KAFKA_PROXY_PORT = 29095  # fault-kafka advertises its PROXIED listener (29094) here


class Supervisor:
    """Keeps one `pgcdc run` going: restarts it a second after any exit."""

    def __init__(self, p: Pipeline) -> None:
        self.p = p
        self.worker: WorkerProcess | None = None
        self.exits: list[tuple[int, str]] = []  # (exit code, error name) of each exit
        self.kills = 0
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._loop, daemon=True, name="supervisor")

    def start(self) -> None:
        self.worker = self.p.start_worker()
        self._thread.start()

    def _loop(self) -> None:
        while not self._stop.wait(0.2):
            with self._lock:
                w = self.worker
                if w is None or w.proc.poll() is None:
                    continue
                code = w.proc.returncode
                if code != -9:
                    self.exits.append((code, _error_name(w.log_text())))
            time.sleep(1.0)
            with self._lock:
                if not self._stop.is_set():
                    self.worker = self.p.start_worker()

    def kill(self) -> None:
        """SIGKILL the current worker (the loop starts the next one)."""
        with self._lock:
            if self.worker is not None and self.worker.proc.poll() is None:
                self.worker.kill()
                self.kills += 1

    def wait_ready(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            w = self.worker
            if w is not None and w.proc.poll() is None:
                try:
                    w.wait_ready(min(5.0, max(0.1, deadline - time.monotonic())))
                    return
                except AssertionError:
                    continue  # exited or not yet: the loop restarts it
            time.sleep(0.2)
        raise AssertionError(f"no ready worker within {timeout}s")

    def stop(self) -> int | None:
        self._stop.set()
        if self._thread.ident is not None:
            self._thread.join(10)
        with self._lock:
            w = self.worker
        return w.terminate(120) if w is not None and w.proc.poll() is None else None

    def behaviour(self) -> str:
        parts = []
        if self.kills:
            parts.append(f"{self.kills} SIGKILL")
        for (code, error), n in Counter(self.exits).items():
            parts.append(f"exit {code} {error} x{n}".replace(" -", " ").strip())
        return ", ".join(parts) or "no exit"


def _error_name(log: str) -> str:
    for line in reversed(log.splitlines()):
        if line.startswith("pgcdc: "):
            return line.split(":")[1].strip().split()[0]
    return ""


@dataclass
class Context:
    """What a scenario's fault function may use."""

    p: Pipeline
    wl: ContinuousWorkload
    sup: Supervisor
    kafka_proxy: Proxy
    pg_proxy: Proxy
    registry_proxy: Proxy
    infos: dict[str, dict[str, Any]]
    quick: bool
    rng: random.Random
    fault_end: float = 0.0
    notes: list[str] = field(default_factory=list)
    standby: Supervisor | None = None  # the second worker's, with `second_worker`

    def end_of_fault(self) -> None:
        self.fault_end = time.monotonic()

    def seconds(self, full: float, quick: float) -> float:
        return quick if self.quick else full


@dataclass
class Scenario:
    name: str
    fault: Callable[[Context], None]
    env: dict[str, str] = field(default_factory=dict)
    second_worker: bool = False
    spill_tmpfs: bool = False


@dataclass
class Result:
    scenario: str
    behaviour: str
    verdict: Verdict
    recovery_s: float
    transactions: int
    in_doubt: int
    seconds: float
    error: str = ""
    story: str = ""  # the workers' key log lines, when the verdict is not clean


def _ensure_proxied_listener(kafka: dict[str, Any]) -> None:
    """fault-kafka restarted by an older services.py lacks the PROXIED listener: restart
    it with this tree's, which has it."""
    with socket.socket() as s:
        s.settimeout(2)
        if s.connect_ex(("127.0.0.1", int(kafka["proxied_listener"]))) == 0:
            return
    services._services("down", "fault-kafka")
    services.restart_service("fault-kafka")


def run_scenario(
    scenario: Scenario, infos: dict[str, dict[str, Any]], *, quick: bool, seed: int = 11
) -> Result:
    began = time.monotonic()
    _ensure_proxied_listener(infos["fault-kafka"])
    pg, kafka, registry = infos["fault-pg15"], infos["fault-kafka"], infos["fault-registry"]
    kproxy = Proxy(int(kafka["proxied_listener"]), port=KAFKA_PROXY_PORT)
    pproxy = Proxy(int(pg["port"]))
    rproxy = Proxy(int(registry["url"].split(":")[2].split("/")[0]))
    mount: Path | None = None
    env = {
        "PGCDC_SOURCE__PORT": str(pproxy.port),
        "PGCDC_SOURCE__RECEIVE_TIMEOUT_S": "10",
        "PGCDC_SOURCE__CONNECT_TIMEOUT_S": "5",
        "PGCDC_KAFKA__BOOTSTRAP_SERVERS": f"127.0.0.1:{KAFKA_PROXY_PORT}",
        "PGCDC_REGISTRY__URL": f"http://127.0.0.1:{rproxy.port}/apis/ccompat/v7",
        # each transaction's `txn_published` line, for the story of a lost one
        "PGCDC_LOG__LEVEL": "debug",
        **scenario.env,
    }
    p = Pipeline(pg, kafka, registry, unique("f"), work_mem="1MB", extra_env=env)
    if scenario.spill_tmpfs:
        mount = p.state_dir / "small"
        mount.mkdir()
        subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(mount)], check=True)
        p.extra_env["PGCDC_DECODING__STATE_DIR"] = str(mount / "worker")
        p.spill_dir = mount / "worker" / "spill"
    sups: list[Supervisor] = []
    wl: ContinuousWorkload | None = None
    try:
        p.create(EO_TABLES)
        sup = Supervisor(p)
        sups.append(sup)
        sup.start()
        sup.wait_ready(120)
        if scenario.second_worker:
            sups.append(Supervisor(p))
            sups[-1].start()
        wl = ContinuousWorkload(p, seed)
        ctx = Context(p, wl, sup, kproxy, pproxy, rproxy, infos, quick, random.Random(seed))
        ctx.standby = sups[1] if scenario.second_worker else None
        wl.start()
        time.sleep(3)
        scenario.fault(ctx)
        if not ctx.fault_end:
            ctx.end_of_fault()
        target = server_lsn(p)
        time.sleep(3)  # the workload goes on for a moment after the fault
        wl.finish()
        recovery = _wait_offset_past(p, target, 420) - ctx.fault_end
        _wait_offset_past(p, wl.last_commit_lsn(), 300)
        for s in sups:
            s.stop()
        reads = read_all(p.settings(), topics(p), timeout_s=240)
        verdict = verify(p, wl.outcomes, reads)
        behaviour = "; ".join(
            ([f"worker {i + 1}: " if len(sups) > 1 else ""][0] + s.behaviour())
            for i, s in enumerate(sups)
        )
        if ctx.notes:
            behaviour += " (" + ", ".join(ctx.notes) + ")"
        return Result(
            scenario.name,
            behaviour,
            verdict,
            recovery,
            len(wl.outcomes),
            wl.in_doubt(),
            time.monotonic() - began,
            story=""
            if verdict.clean
            else story(p, lost=[*verdict.lost_xids, *verdict.partial_xids]),
        )
    except Exception as exc:  # one failed scenario is a row of the table, not the end
        behaviour = "; ".join(s.behaviour() for s in sups) or "-"
        return Result(
            scenario.name,
            behaviour,
            Verdict(),
            -1.0,
            len(wl.outcomes) if wl is not None else 0,
            0,
            time.monotonic() - began,
            error=f"{type(exc).__name__}: {str(exc)[:300]}",
        )
    finally:
        for s in sups:
            s.stop()
        for proxy in (kproxy, pproxy, rproxy):
            proxy.close()
        if wl is not None:
            wl.stop.set()
        p.drop()
        if mount is not None:
            subprocess.run(["umount", "-l", str(mount)], check=False)
            shutil.rmtree(p.state_dir, ignore_errors=True)


def _wait_offset_past(p: Pipeline, lsn: int, timeout: float) -> float:
    """When the committed offsets passed `lsn` (time.monotonic())."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        last = p.last_offset()
        if last is not None and last.confirmed_lsn >= lsn:
            return time.monotonic()
        time.sleep(0.5)
    raise AssertionError(f"offsets did not pass {lsn:X} within {timeout}s")


# --- the faults ---------------------------------------------------------------------------


def _wait_big_txn_in_flight(ctx: Context, timeout: float = 60) -> None:
    """Until the worker is inside a large transaction (spill files exist)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        w = ctx.sup.worker
        if w is not None and ctx.p.spill_files(w.pid):
            return
        time.sleep(0.05)
    ctx.notes.append("no spill seen")


def broker_kill9(ctx: Context) -> None:
    _wait_big_txn_in_flight(ctx)
    services.kill_service("fault-kafka")
    time.sleep(ctx.seconds(10, 5))
    services.restart_service("fault-kafka")
    ctx.end_of_fault()


def broker_restart(ctx: Context) -> None:
    services._services("down", "fault-kafka")
    services.restart_service("fault-kafka")
    ctx.end_of_fault()


def kafka_cut(ctx: Context) -> None:
    ctx.kafka_proxy.cut()
    time.sleep(ctx.seconds(30, 10))
    ctx.kafka_proxy.resume()
    ctx.end_of_fault()


def kafka_stall(ctx: Context) -> None:
    ctx.kafka_proxy.stall()
    time.sleep(ctx.seconds(60, 15))
    ctx.kafka_proxy.resume()
    ctx.end_of_fault()


def pg_restart(mode: str) -> Callable[[Context], None]:
    def fault(ctx: Context) -> None:
        pgctl.restart(ctx.infos["fault-pg15"], mode)
        ctx.end_of_fault()

    return fault


def pg_cut(ctx: Context) -> None:
    ctx.pg_proxy.cut()
    time.sleep(ctx.seconds(30, 10))
    ctx.pg_proxy.resume()
    ctx.end_of_fault()


def pg_stall(ctx: Context) -> None:
    ctx.pg_proxy.stall()
    time.sleep(ctx.seconds(60, 15))
    ctx.pg_proxy.resume()
    ctx.end_of_fault()


def registry_outage_during_ddl(ctx: Context) -> None:
    """30 s without the registry while new columns need new schemas (the worker must
    ride it out within registry.retry_budget_s, 300 s by default)."""
    ctx.registry_proxy.cut()
    for n in range(3):
        ctx.wl.ddl(f"ALTER TABLE acct ADD COLUMN extra{n} int")
        ctx.wl.ddl(f"ALTER TABLE ledger ADD COLUMN extra{n} text DEFAULT 'd{n}'")
        time.sleep(ctx.seconds(10, 10))
    ctx.registry_proxy.resume()
    ctx.end_of_fault()


def spill_disk_full(ctx: Context) -> None:
    """The spill directory (a 1 MB tmpfs) fills up with a 100k-row transaction; 30 s
    (10 in quick mode) after the worker first failed it grows to 256 MB, as an
    operator freeing space would."""
    mount = ctx.p.state_dir / "small"
    ctx.wl.big_transaction(100_000, 900_000_000)
    deadline = time.monotonic() + 120
    while not ctx.sup.exits and time.monotonic() < deadline:
        time.sleep(0.2)
    if not ctx.sup.exits:
        ctx.notes.append("the spill never failed")
    time.sleep(ctx.seconds(30, 10))
    subprocess.run(["mount", "-o", "remount,size=256m", str(mount)], check=True)
    ctx.end_of_fault()


def worker_error_mid_replay(ctx: Context) -> None:
    """A registry outage longer than registry.retry_budget_s (3 s here) while the
    worker registers a changed table's schema in the middle of a source transaction:
    RegistryUnavailableError mid replay (exit 3); the supervisor restarts it."""
    ctx.registry_proxy.cut()
    ctx.wl.ddl("ALTER TABLE kv ADD COLUMN extra int")
    time.sleep(ctx.seconds(12, 8))
    ctx.registry_proxy.resume()
    ctx.end_of_fault()


def kill9_random(count_full: int, count_quick: int) -> Callable[[Context], None]:
    def fault(ctx: Context) -> None:
        for _ in range(count_quick if ctx.quick else count_full):
            ctx.sup.wait_ready(120)
            time.sleep(ctx.rng.uniform(0.3, 3.0))
            ctx.sup.kill()
        ctx.end_of_fault()

    return fault


def two_workers(ctx: Context) -> None:
    time.sleep(ctx.seconds(40, 20))
    ctx.end_of_fault()


def standby_takeover(ctx: Context) -> None:
    """The active worker of the standby pair SIGKILLed 10 times (3 in quick mode), each
    takeover timed (tests/faults/takeover.py); the times go into the behaviour column,
    and one past TAKEOVER_LIMIT_S or not by the standby fails the row."""
    assert ctx.standby is not None, "standby_takeover needs second_worker=True"
    takeovers = kill_active([ctx.sup, ctx.standby], 3 if ctx.quick else 10, ctx.rng)
    ctx.end_of_fault()
    ctx.notes.append(summary(takeovers))
    slow = [t for t in takeovers if t.commit_s >= TAKEOVER_LIMIT_S or t.by != "standby"]
    assert not slow, f"takeovers over {TAKEOVER_LIMIT_S:.0f}s or not by the standby: {slow}"


SCENARIOS = {
    s.name: s
    for s in (
        Scenario("broker kill -9 mid-batch", broker_kill9),
        Scenario("broker restart", broker_restart),
        Scenario("kafka cut", kafka_cut),
        Scenario("kafka stall", kafka_stall),
        Scenario("postgres restart fast", pg_restart("fast")),
        Scenario("postgres restart immediate", pg_restart("immediate")),
        Scenario("postgres cut", pg_cut),
        Scenario("postgres stall", pg_stall),
        Scenario("registry outage during DDL", registry_outage_during_ddl),
        Scenario("spill disk full", spill_disk_full, spill_tmpfs=True),
        Scenario(
            "worker error mid-replay",
            worker_error_mid_replay,
            env={"PGCDC_REGISTRY__RETRY_BUDGET_S": "3"},
        ),
        Scenario("kill -9 at random points", kill9_random(20, 5)),
        Scenario("two workers, one config", two_workers, second_worker=True),
        Scenario("standby takeover, active worker kill -9", standby_takeover, second_worker=True),
    )
}

HEADER = (
    "scenario",
    "behaviour",
    "lost",
    "duplicated",
    "partial",
    "out of order",
    "aborted visible",
    "recovery seconds",
)


def row(r: Result) -> tuple[str, ...]:
    v = r.verdict
    if r.error:
        return (r.scenario, f"{r.behaviour}; FAILED: {r.error}", *("-",) * 5, "-")
    behaviour = f"{r.behaviour}; {r.transactions} txns, {r.in_doubt} in doubt"
    if v.rows_differing:
        behaviour += f"; {v.rows_differing} rows differ"
    return (
        r.scenario,
        behaviour,
        str(v.lost),
        str(v.duplicated),
        str(v.partial),
        str(v.out_of_order),
        str(v.aborted_visible),
        f"{r.recovery_s:.1f}",
    )


def table(results: list[Result]) -> str:
    rows = [HEADER, *(row(r) for r in results)]
    widths = [max(len(r[i]) for r in rows) for i in range(len(HEADER))]
    lines = [" | ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) for r in rows]
    lines.insert(1, "-+-".join("-" * w for w in widths))
    return "\n".join(lines)
