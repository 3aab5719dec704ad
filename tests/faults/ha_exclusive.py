"""Exclusive use of an HA pair (ha-pgNN/ha-pgNNs) by one test, for tests that promote,
reconfigure or stop its servers while other engineers' tests may want the same pair.

`rebuilt_pair(version)` takes an fcntl lock on `/tmp/ha-pgNN.lock`, then on
`/tmp/ha-ha-pgNN.lock` (both spellings of the pair's lock, in the order every HA test
takes them, so two holders never deadlock), rebuilds the pair (timeline 1, a fresh
system identifier; retried while a port is taken, see `_rebuild`), yields
`(primary, standby)` service infos, and stops both at exit before releasing the locks.
A lock file is never deleted: a holder's lock would then be on a file nobody else opens.

`on_standby(p, standby, primary)` points a pipeline's workers at the standby (its slot
there, the primary for RUNNING_XACTS); `replayed(standby, db, lsn)` waits for the
standby's replay to pass `lsn`.
"""

from __future__ import annotations

import contextlib
import fcntl
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg2

from tests.fixtures.services import SERVICES, ensure_service, stop_service
from tests.integration.pipeline_kafka_support import Pipeline, insert_lsn


def services(*args: str) -> str:
    """services.py with `args`; its stdout (the test fails on a non-zero exit)."""
    proc = subprocess.run(
        [sys.executable, str(SERVICES), *args], capture_output=True, text=True, check=False
    )
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def _rebuild(standby_name: str, attempts: int = 4) -> None:
    """`services.py rebuild`, again after a failure to start: the pairs' ports lie in
    the kernel's ephemeral range (32768-60999), so a client socket that happened to get
    one as its local port (even in TIME_WAIT, for up to 60 s) makes the postmaster's
    bind fail with "Address already in use"."""
    for attempt in range(attempts):
        proc = subprocess.run(
            [sys.executable, str(SERVICES), "rebuild", standby_name],
            capture_output=True,
            text=True,
            check=False,
        )
        if proc.returncode == 0:
            return
        assert attempt + 1 < attempts and "could not start server" in proc.stderr, proc.stderr
        time.sleep(20)


@contextlib.contextmanager
def rebuilt_pair(version: str) -> Iterator[tuple[dict[str, Any], dict[str, Any]]]:
    """The pair of `version` ("15", "18"), freshly built, held exclusively."""
    primary_name, standby_name = f"ha-pg{version}", f"ha-pg{version}s"
    with contextlib.ExitStack() as locks:
        for name in (f"/tmp/ha-pg{version}.lock", f"/tmp/ha-{primary_name}.lock"):
            fcntl.flock(locks.enter_context(Path(name).open("a")), fcntl.LOCK_EX)
        _rebuild(standby_name)
        stop_service(primary_name, standby_name)  # forget endpoints cached before the rebuild
        try:
            yield ensure_service(primary_name), ensure_service(standby_name)
        finally:
            stop_service(primary_name, standby_name)


def replayed(standby: dict[str, Any], dbname: str, lsn: int, timeout: float = 60) -> None:
    """Wait until the standby has replayed up to `lsn` (and `dbname` exists there)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            conn = psycopg2.connect(standby["dsn"].replace("dbname=postgres", f"dbname={dbname}"))
            with conn.cursor() as cur:
                cur.execute(
                    "SELECT pg_last_wal_replay_lsn() - %s::pg_lsn",
                    (f"{lsn >> 32:X}/{lsn & 0xFFFFFFFF:X}",),
                )
                row = cur.fetchone()
                done = row is not None and float(row[0]) >= 0
            conn.close()
            if done:
                return
        except psycopg2.OperationalError:
            pass
        assert time.monotonic() < deadline, f"{standby['service']} did not replay {lsn:X}"
        time.sleep(0.2)


def on_standby(p: Pipeline, standby: dict[str, Any], primary: dict[str, Any]) -> None:
    """Point the pipeline's workers at the standby, the primary for RUNNING_XACTS; drop
    the slot setup made on the primary (the worker makes its own on the standby)."""
    p.extra_env.update(
        {
            "PGCDC_SOURCE__HOST": str(standby["host"]),
            "PGCDC_SOURCE__PORT": str(standby["port"]),
            "PGCDC_SOURCE__PRIMARY_HOST": str(primary["host"]),
            "PGCDC_SOURCE__PRIMARY_PORT": str(primary["port"]),
            "PGCDC_SOURCE__RECEIVE_TIMEOUT_S": "10",
        }
    )
    p.execute(f"SELECT pg_drop_replication_slot('{p.slot}')")
    replayed(standby, p.db, insert_lsn(p.connect().cursor()))
