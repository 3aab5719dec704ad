"""The README's exit-code table, row by row, with `pgcdc` run as a subprocess against
the real PostgreSQL 16, Kafka and registry (issue 27).

Each test makes one row happen for real: SIGTERM (0), a database or role that does not
exist (1), a bad setting (2), a source, broker or registry nobody answers on for the
whole of a small retry budget (3), the reorder buffer's spill directory gone under a
spilling transaction (4), Ctrl-C during `pgcdc peek` (130). Nothing here stops or
changes a shared service: unreachable services are ports nobody listens on.
"""

from __future__ import annotations

import shutil
import signal
import subprocess
import sys
import time
import uuid
from typing import Any

import pytest

from tests.integration.pipeline_kafka_support import REPO, Pipeline, WorkerProcess, pipeline

pytestmark = pytest.mark.integration

NOBODY = "127.0.0.1:1"  # a port nobody listens on (tcpmux, never served here)
BUDGET_S = 4.0  # the retry budget of the exit-3 rows


def _exit(worker: WorkerProcess, timeout: float) -> tuple[int | None, float]:
    """The worker's exit code (None: still running after `timeout`) and its run time."""
    try:
        code = worker.wait(timeout)
    except subprocess.TimeoutExpired:
        code = None
    return code, time.monotonic() - worker.started


def _uncreated(pg: dict[str, Any], kafka: dict[str, Any], registry: dict[str, Any]) -> Pipeline:
    """A Pipeline whose database is never created: for rows that fail before any SQL."""
    return Pipeline(pg, kafka, registry, f"exit{uuid.uuid4().hex[:10]}")


def test_exit_0_on_sigterm(
    pg16: dict[str, Any], kafka: dict[str, Any], registry: dict[str, Any]
) -> None:
    """Row 0: a running worker stops cleanly on SIGTERM and exits 0."""
    with pipeline(pg16, kafka, registry, "exit0", ["CREATE TABLE t (id int PRIMARY KEY)"]) as p:
        worker = p.start_worker()
        worker.wait_ready(60)
        code = worker.terminate(30)
        assert code == 0, worker.tail()
        assert worker.has_event("worker_stopped"), worker.tail()


@pytest.mark.parametrize(
    ("setting", "error", "field"),
    [
        ("PGCDC_SOURCE__DBNAME", "SourceSetupError", "source.dbname"),
        ("PGCDC_SOURCE__USER", "SourceAuthError", "source.user"),
    ],
    ids=["database", "role"],
)
def test_exit_1_for_a_database_or_role_that_does_not_exist(
    pg16: dict[str, Any],
    kafka: dict[str, Any],
    registry: dict[str, Any],
    setting: str,
    error: str,
    field: str,
) -> None:
    """Row 1: a database or a role the server does not have is permanent: exit 1 at
    once with the typed error naming the setting to fix, not retried for
    source.retry_budget_s (here 60 s) into exit 3 as if the server were down."""
    p = _uncreated(pg16, kafka, registry)
    p.extra_env = {setting: f"nosuch_{uuid.uuid4().hex[:8]}", "PGCDC_SOURCE__RETRY_BUDGET_S": "60"}
    try:
        worker = p.start_worker()
        code, took = _exit(worker, 30)
        log = worker.log_text()
    finally:
        p.drop()
    assert code == 1, f"exit {code}:\n{log[-3000:]}"
    assert f"pgcdc: {error}:" in log and "does not exist" in log and field in log, log[-3000:]
    assert "source_connect_retry" not in log, log[-3000:]
    assert took < 30


def test_exit_2_for_a_bad_setting(
    pg16: dict[str, Any], kafka: dict[str, Any], registry: dict[str, Any]
) -> None:
    """Row 2: a setting out of range (a retry budget of 0) exits 2 naming the field."""
    p = _uncreated(pg16, kafka, registry)
    p.extra_env = {"PGCDC_SOURCE__RETRY_BUDGET_S": "0"}
    try:
        worker = p.start_worker()
        code, _ = _exit(worker, 30)
        log = worker.log_text()
    finally:
        p.drop()
    assert code == 2, f"exit {code}:\n{log[-3000:]}"
    assert "configuration error" in log and "source.retry_budget_s" in log, log[-3000:]


@pytest.mark.parametrize(
    ("env", "setting", "error"),
    [
        (
            {"PGCDC_SOURCE__PORT": NOBODY.split(":")[1]},
            "source.retry_budget_s",
            "SourceUnavailableError",
        ),
        (
            {"PGCDC_KAFKA__BOOTSTRAP_SERVERS": NOBODY},
            "kafka.retry_budget_s",
            "BrokerUnavailableError",
        ),
        (
            {"PGCDC_REGISTRY__URL": f"http://{NOBODY}/apis/ccompat/v7"},
            "registry.retry_budget_s",
            "RegistryUnavailableError",
        ),
    ],
    ids=["source", "kafka", "registry"],
)
def test_exit_3_only_once_the_retry_budget_is_spent(
    pg16: dict[str, Any],
    kafka: dict[str, Any],
    registry: dict[str, Any],
    env: dict[str, str],
    setting: str,
    error: str,
) -> None:
    """Row 3: a source, broker or registry that never answers is retried for the whole
    of its retry budget (here 4 s), then the worker exits 3 with the typed error naming
    the budget; not sooner (the source used to exit 3 at its first refused connection)."""
    name = setting.split(".", maxsplit=1)[0].upper()
    env = {**env, f"PGCDC_{name}__RETRY_BUDGET_S": str(BUDGET_S)}
    with pipeline(pg16, kafka, registry, "exit3", ["CREATE TABLE t (id int PRIMARY KEY)"]) as p:
        p.extra_env = env
        worker = p.start_worker()
        code, took = _exit(worker, 30)
        log = worker.log_text()
    assert code == 3, f"exit {code}:\n{log[-3000:]}"
    assert f"pgcdc: {error}:" in log and setting in log, log[-3000:]
    assert took >= BUDGET_S, f"exit 3 after {took:.1f}s, before the {BUDGET_S}s budget"
    if name == "SOURCE":  # every refused connection was retried until the deadline
        assert log.count('"source_connect_retry"') >= 3, log[-3000:]


def test_exit_4_when_the_spill_directory_is_lost(
    pg16: dict[str, Any], kafka: dict[str, Any], registry: dict[str, Any]
) -> None:
    """Row 4: the reorder buffer cannot spill a large transaction (its run directory
    was removed under the worker): SpillFileError, the worker drops its in-memory state
    and exits 4, restartable from its committed offsets."""
    ddl = ["CREATE TABLE t (id int PRIMARY KEY, v text)"]
    with pipeline(pg16, kafka, registry, "exit4", ddl, work_mem="64KiB") as p:
        worker = p.start_worker()
        worker.wait_ready(60)
        runs = list(p.spill_dir.glob(f"run-{worker.pid}-*"))
        assert runs, f"no spill directory of the worker in {p.spill_dir}"
        for run in runs:
            shutil.rmtree(run)
        p.execute("INSERT INTO t SELECT g, repeat('x', 200) FROM generate_series(1, 5000) g")
        code, _ = _exit(worker, 30)
        log = worker.log_text()
    assert code == 4, f"exit {code}:\n{log[-3000:]}"
    assert "pgcdc: SpillFileError:" in log and "could not write spill file" in log, log[-3000:]


# When to press Ctrl-C: once peek streams (its slot held by a walsender), and as soon as
# its slot exists, which can be before peek streams: the server marks a slot active
# while it creates it, and peek must drop a slot it has just created as well.
STREAMING = (
    "SELECT a.backend_type = 'walsender' FROM pg_catalog.pg_replication_slots s"
    " JOIN pg_catalog.pg_stat_activity a ON a.pid = s.active_pid WHERE s.slot_name = %s"
)
EXISTS = "SELECT true FROM pg_catalog.pg_replication_slots WHERE slot_name = %s"


@pytest.mark.parametrize("ready", [STREAMING, EXISTS], ids=["streaming", "slot just created"])
def test_exit_130_on_ctrl_c_outside_the_worker(
    pg16: dict[str, Any], kafka: dict[str, Any], registry: dict[str, Any], ready: str
) -> None:
    """Row 130: Ctrl-C (SIGINT) during `pgcdc peek` exits 130, and peek still drops its
    slot on the way out."""
    with pipeline(pg16, kafka, registry, "exit130", ["CREATE TABLE t (id int)"]) as p:
        peek_slot = f"{p.slot}_peek"
        watch = p.connect()
        proc = subprocess.Popen(
            [sys.executable, "-m", "service.app.cli", "peek", "--timeout", "60"],
            cwd=REPO,
            env=p.env(),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            deadline = time.monotonic() + 30
            with watch.cursor() as cur:
                while True:
                    cur.execute(ready, (peek_slot,))
                    if cur.fetchall() == [(True,)]:
                        break
                    assert proc.poll() is None, proc.communicate()[1][-3000:]
                    assert time.monotonic() < deadline, "peek's slot never got ready"
                    time.sleep(0.005)
            proc.send_signal(signal.SIGINT)
            _, stderr = proc.communicate(timeout=30)
        finally:
            watch.close()
            if proc.poll() is None:
                proc.kill()
                proc.communicate(timeout=30)
        left = p.query(EXISTS, (peek_slot,))
        if left:  # so that a failure here does not use up the server's slots
            p.query("SELECT true FROM pg_catalog.pg_drop_replication_slot(%s)", (peek_slot,))
    assert proc.returncode == 130, stderr[-3000:]
    assert left == [], f"peek left slot {peek_slot} behind:\n{stderr[-3000:]}"
