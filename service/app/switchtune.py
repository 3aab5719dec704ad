"""The worker's GIL switch interval.

Contract: `tune()` sets the interpreter's thread switch interval (`sys.setswitchinterval`)
to `SWITCH_INTERVAL_S`. Called once, by `run_worker`, beside gctune and malloctune.
Process-wide, so not called by code that tests import in-process.

Why: during a snapshot the worker's thread (decode, publish, produce) and each reader's
thread (COPY, then the native split and encoding, GIL released) share the GIL. psycopg2
releases it around every COPY row it waits for and takes it back after, and the sink's
librdkafka calls release it too; a thread asking for it back waits up to the holder's
switch interval (5 ms by default) whenever the other thread is running Python code, so
at 5 ms a reader's rows came slowly while the worker's thread ran. (Reading the COPY
without any per-row GIL handoff, in Rust through psycopg2's libpq, gained nothing over
0.5 ms: the handoffs themselves are cheap, their waits were the cost.) Measured with
`tests/perf/bench_snapshot_vs_debezium.py --pg pg15 --rows 1200000 --table wide
--systems pgcdc-1 --write-rate 500 --reps 1`: 96.8k rows/s (11.9 CPU s) at 5 ms, 102.8k
at 1 ms, 110.2k (10.6 CPU s) at 0.5 ms. The stream alone has one
busy thread, which a switch interval never interrupts when no other thread waits.
"""

from __future__ import annotations

import sys

SWITCH_INTERVAL_S = 0.0005


def tune() -> None:
    """Set the switch interval (module docstring)."""
    sys.setswitchinterval(SWITCH_INTERVAL_S)
