"""The worker's C allocator settings (glibc malloc), for a bounded peak RSS.

Contract: `tune()` sets glibc's `M_MMAP_THRESHOLD` to `MMAP_THRESHOLD` and `M_ARENA_MAX`
to `ARENA_MAX` through `mallopt` (malloc(3)), and returns whether both took; where the C
library has no `mallopt` (not glibc) it changes nothing and returns False. Called once,
by `run_worker`, before the worker starts its threads (an arena limit applies to arenas
made afterwards). Process-wide, so not called by code that tests import in-process.

Why: a snapshot chunk is read, held and freed as one buffer of up to
`snapshot.chunk_bytes` (8 MiB), by reader threads, while the Avro records of the chunk
before it go through librdkafka's threads. glibc serves such a block with mmap, but
raises its mmap threshold to the size of every mmapped block freed (up to 32 MiB), so
later chunks come from the threads' heaps, where freed space stays in the process;
and each thread may get an arena of its own (up to 8 per core). A fixed threshold
(which also turns the dynamic one off) gives large blocks back to the system when they
are freed, and two arenas bound what the threads keep. Measured with
`tests/perf/bench_snapshot_vs_debezium.py --pg pg15 --rows 400000 --reps 2 --table wide
--systems pgcdc-2,pgcdc-blocking-2`: peak RSS 197-257 MB (mean 224) with glibc's
defaults, 175-202 MB (mean 182) with these.
"""

from __future__ import annotations

import ctypes
from typing import Any

M_MMAP_THRESHOLD = -3  # malloc.h
M_ARENA_MAX = -8
MMAP_THRESHOLD = 1024 * 1024  # blocks of 1 MiB and more are mmapped, and unmapped when freed
ARENA_MAX = 2


def tune(libc: Any = None) -> bool:
    """Apply the settings (module docstring); False where `mallopt` is missing or refuses."""
    try:
        lib = libc if libc is not None else ctypes.CDLL(None)
        mallopt = lib.mallopt
    except (AttributeError, OSError):
        return False
    threshold: bool = mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD) == 1
    arenas: bool = mallopt(M_ARENA_MAX, ARENA_MAX) == 1
    return threshold and arenas
