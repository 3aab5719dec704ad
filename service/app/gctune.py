"""The worker's garbage-collector settings (issue 12).

Contract: `tune()` moves every object alive at the call into the collector's permanent
generation (`gc.freeze`: modules, classes, schemas, settings: never garbage) and raises
the generation thresholds to `THRESHOLDS`. Called once, by a process that is about to
stream, after its start-up: `run_worker` (and tests/perf/bench_pipeline.py, to measure
the pipeline as the worker runs it). Process-wide, so not called by code that tests
import in-process.

Why: a decoding process allocates several objects per WAL record and row, and the
reorder buffer keeps many alive until their commit. With CPython's default thresholds
(700, 10, 10) the cyclic collector ran a full collection every ~70,000 allocations and
traversed everything alive, start-up objects and buffered changes included: 25-30% of
the CPU of the WAL -> Avro pipeline (bench_pipeline, 10 x 10k-row transactions: ~60k
rows/s with the defaults, ~77k with these, the same with the collector off). Almost
everything pgcdc allocates is freed by reference counting; the collector only has
cycles to find, which these thresholds still collect, just less often. Peak RSS was the
same in that benchmark (128-130 MB).
"""

from __future__ import annotations

import gc

# A young collection every 10,000 net allocations, a middle one every 20 of those, a
# full one every 10 middle ones (CPython also waits for 25% new long-lived objects).
THRESHOLDS = (10_000, 20, 10)


def tune() -> None:
    """Freeze what start-up left alive and raise the collector's thresholds."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(*THRESHOLDS)
