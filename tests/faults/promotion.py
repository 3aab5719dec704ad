"""The promotion scenario of run_all.py: test_failover.py's promotion mid-workload as a
row of the scenario table, on services.py's HA pairs (ha-pg15/ha-pg15s,
ha-pg18/ha-pg18s) with run_all's fault-kafka and fault-registry.

`run_promotion(version, kafka, registry)` rebuilds the pair, points the worker at the
standby (ha_exclusive's `on_standby`: its slot there, the primary for RUNNING_XACTS),
runs the continuous workload on the primary, leaves one transaction open there,
promotes the standby, stops the old primary, runs the workload again on the new
primary, and counts what a read_committed consumer saw with the verifier. Recovery is
from the promotion until the committed offsets pass what the new primary had written
by then. The worker must follow timeline 1 -> 2 without exiting and never publish the
open transaction; either failing is the row's error.

The pair is rebuilt and promoted, so other engineers' tests must not use it meanwhile:
ha_exclusive's `rebuilt_pair(version)` holds its locks while the scenario runs.
"""

from __future__ import annotations

import time
import traceback
from contextlib import ExitStack
from typing import Any

from tests.faults.ha_exclusive import on_standby, rebuilt_pair, replayed, services
from tests.faults.scenarios import Result, _wait_offset_past
from tests.faults.verifier import Verdict, topics, verify
from tests.faults.workload import ContinuousWorkload, server_lsn
from tests.fixtures.services import ensure_service, stop_service
from tests.integration.pipeline_kafka_support import EO_TABLES, insert_lsn, pipeline, read_all

PROMOTION_VERSIONS = ("15", "18")


def promotion_name(version: str) -> str:
    return f"standby promotion mid-workload (PG{version})"


def run_promotion(
    version: str, kafka: dict[str, Any], registry: dict[str, Any], *, seed: int = 32
) -> Result:
    name = promotion_name(version)
    began = time.monotonic()
    load: ContinuousWorkload | None = None
    primary_name, standby_name = f"ha-pg{version}", f"ha-pg{version}s"
    with ExitStack() as held:
        try:
            primary, standby = held.enter_context(rebuilt_pair(version))
            with pipeline(primary, kafka, registry, "frpromo", EO_TABLES) as p:
                on_standby(p, standby, primary)
                w = p.start_worker()
                w.wait_ready(120)
                load = ContinuousWorkload(p, seed)
                load.start(pause_s=0.05)
                time.sleep(5)
                open_txn = p.connect()
                open_txn.autocommit = False
                with open_txn.cursor() as cur:
                    cur.execute(
                        "INSERT INTO kv SELECT 'open' || g, 'never' FROM generate_series(1, 50) g"
                    )
                load.finish()
                replayed(standby, p.db, insert_lsn(p.connect().cursor()))
                promoted_at = time.monotonic()
                tli = int(services("promote", standby_name).split()[1])
                stop_service(primary_name)  # the old primary dies with the open transaction
                p.pg = ensure_service(standby_name)
                p.dsn = p.pg["dsn"].replace("dbname=postgres", f"dbname={p.db}")
                target = server_lsn(p)
                after = ContinuousWorkload(p, seed + 1)
                after.start(pause_s=0.05)
                recovered = _wait_offset_past(p, target, 120) - promoted_at
                time.sleep(max(0.0, 5 - (time.monotonic() - promoted_at)))
                after.finish()
                outcomes = load.outcomes + after.outcomes
                p.wait_confirmed(insert_lsn(p.connect().cursor()) - 1, 120, w)
                switch = w.wait_event(["replication_timeline_switch"], 5)
                assert w.proc.poll() is None, f"the worker exited:\n{w.tail()}"
                assert w.terminate() == 0, w.tail()
                reads = read_all(p.settings(), topics(p), timeout_s=240)
                opened = [
                    r for r in reads if r.value and str(r.key.get("k", "")).startswith("open")
                ]
                assert not opened, f"{len(opened)} events of the open transaction published"
                verdict = verify(p, outcomes, reads)
                behaviour = (
                    f"promoted to timeline {tli}; the worker followed "
                    f"{switch['from_tli']} -> {switch['to_tli']} without exiting"
                )
                return Result(
                    name,
                    behaviour,
                    verdict,
                    recovered,
                    len(outcomes),
                    sum(1 for o in outcomes if getattr(o, "in_doubt", False)),
                    time.monotonic() - began,
                )
        except Exception as exc:  # one failed scenario is a row of the table, not the end
            traceback.print_exc()  # the row keeps 300 characters; the log keeps the rest
            transactions = len(load.outcomes) if load is not None else 0
            error = f"{type(exc).__name__}: {str(exc)[:300]}"
            spent = time.monotonic() - began
            return Result(name, "-", Verdict(), -1.0, transactions, 0, spent, error=error)
