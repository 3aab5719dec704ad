"""Permanent source errors stop `pgcdc run` as fatal (exit 1), never as the retryable
exit 3 that a supervisor retries forever (issue 11, defect 6)."""

from __future__ import annotations

import subprocess
import threading
from typing import Any

import psycopg2
import psycopg2.extras
import pytest

from tests.faults import pgctl
from tests.integration.pipeline_kafka_support import Pipeline, WorkerProcess, pipeline

pytestmark = [pytest.mark.integration, pytest.mark.faults]


def _exit_code(worker: WorkerProcess, timeout: float) -> int | None:
    try:
        return worker.wait(timeout)
    except subprocess.TimeoutExpired:
        return None  # still retrying


def _fails_fatally(p: Pipeline, timeout: float, *needles: str) -> None:
    worker = p.start_worker()
    code = _exit_code(worker, timeout)
    log = worker.log_text()
    assert code == 1, f"exit {code}:\n{log[-3000:]}"
    for needle in needles:
        assert needle in log, log[-3000:]


def test_wrong_password_is_fatal(
    fault_pg15: dict[str, Any], kafka: dict[str, Any], registry: dict[str, Any]
) -> None:
    """A password the server refuses (scram, role pwuser) exits 1 with SourceAuthError
    at once, instead of exit 3 (SourceUnavailableError) as if the server were down."""
    pgctl.ensure_password_role(fault_pg15)
    with pipeline(
        fault_pg15,
        kafka,
        registry,
        "pw",
        ["CREATE TABLE t (id int)"],
        extra_env={"PGCDC_SOURCE__USER": "pwuser", "PGCDC_SOURCE__PASSWORD": "wrong"},
    ) as p:
        _fails_fatally(p, 30, "SourceAuthError", "password authentication failed")


def test_logical_slot_of_the_same_name_is_fatal(
    fault_pg15: dict[str, Any], kafka: dict[str, Any], registry: dict[str, Any]
) -> None:
    """A logical slot where pgcdc expects its physical one exits 1 with SlotTypeError
    naming the slot and the fix, instead of reconnecting and exiting 3."""
    with pipeline(fault_pg15, kafka, registry, "ty", ["CREATE TABLE t (id int)"]) as p:
        p.execute(
            f"SELECT pg_drop_replication_slot('{p.slot}')",
            f"SELECT pg_create_logical_replication_slot('{p.slot}', 'test_decoding')",
        )
        _fails_fatally(p, 30, "SlotTypeError", p.slot)


def test_slot_held_by_another_process_is_fatal_after_the_grace(
    fault_pg15: dict[str, Any], kafka: dict[str, Any], registry: dict[str, Any]
) -> None:
    """With source.standby off, while another replication connection holds the slot,
    the worker retries for source.slot_busy_grace_s (here 3 s), then exits 1 with
    SlotBusyError, instead of exhausting its reconnects into exit 3."""
    with pipeline(
        fault_pg15,
        kafka,
        registry,
        "busy",
        ["CREATE TABLE t (id int)"],
        extra_env={"PGCDC_SOURCE__SLOT_BUSY_GRACE_S": "3", "PGCDC_SOURCE__STANDBY": "false"},
    ) as p:
        holder = psycopg2.connect(
            p.dsn, connection_factory=psycopg2.extras.PhysicalReplicationConnection
        )
        cur = holder.cursor()
        cur.execute(f"READ_REPLICATION_SLOT {p.slot}")
        lsn = cur.fetchone()[1]
        cur.start_replication(
            slot_name=p.slot, slot_type=psycopg2.extras.REPLICATION_PHYSICAL, start_lsn=lsn
        )
        done = threading.Event()

        def drain() -> None:  # keep the walsender happy while the test runs
            while not done.is_set():
                cur.read_message()
                done.wait(0.1)

        t = threading.Thread(target=drain, daemon=True)
        t.start()
        try:
            _fails_fatally(p, 45, "SlotBusyError", "is active for PID")
        finally:
            done.set()
            t.join(5)
            holder.close()
