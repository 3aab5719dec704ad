"""Benchmark (a script, not a test): reorder-buffer throughput and peak RSS.

Prints changes/s through queue + replay for 5-column-sized inserts (about 60 bytes of
tuple data): in memory (many 10k-change transactions, no limit), under spill (one big
transaction over a small work_mem), and streaming; then the peak RSS of the process
after a 1,000,000-change transaction under a 16 MB limit.

    .venv/bin/python tests/perf/bench_reorderbuffer.py [n_changes]
"""

from __future__ import annotations

import resource
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from service.decode.events import ChangeKind, HeapChange, RawTuple
from service.reorder.buffer import ReorderBuffer, ReorderBufferSettings, ReorderBufferTXN
from service.reorder.changes import ReplayChange
from service.reorder.spill import LocalSpillStore
from service.wal.record import RelFileLocator

REL = RelFileLocator(1663, 5, 16384)
ROW = b"\x00" + bytes(range(60))


class CountingSink:
    """A ReplaySink that only counts what it is handed."""

    def __init__(self, can_stream: bool) -> None:
        self.can_stream = can_stream
        self.decode_at_prepare = False
        self.changes = 0

    def change(self, txn: ReorderBufferTXN, change: ReplayChange) -> None:
        self.changes += 1

    stream_change = change

    def __getattr__(self, name: str) -> object:
        return lambda *args: None


def changes(xid: int, start: int, count: int) -> Iterator[HeapChange]:
    """Built lazily, so the input does not sit in memory (its cost is in the rate)."""
    tup = RawTuple(natts=5, infomask=0, infomask2=5, hoff=24, data=ROW)
    for i in range(count):
        yield HeapChange(start + i * 8, xid, ChangeKind.INSERT, REL, 0, 1, tup, None, False)


def run(label: str, n: int, txn_size: int, work_mem: int, stream: bool) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        sink = CountingSink(stream)
        rb = ReorderBuffer(
            ReorderBufferSettings(work_mem=work_mem),
            sink,  # type: ignore[arg-type]
            LocalSpillStore(Path(tmp)),
            lambda _: False,
        )
        rb.consistent = True
        t0 = time.perf_counter()
        lsn = 16
        for i in range(n // txn_size):
            xid = 100 + i
            for c in changes(xid, lsn, txn_size):
                rb.queue_change(xid, c.lsn, c)
            lsn += txn_size * 8
            rb.commit(xid, lsn, lsn + 8, 0)
            lsn += 16
        elapsed = time.perf_counter() - t0
        assert sink.changes == n, (sink.changes, n)
        s = rb.stats
        print(
            f"{label:<34} {n / elapsed:>10,.0f} changes/s  ({elapsed:.2f} s; "
            f"spill_count={s.spill_count} spill_bytes={s.spill_bytes:,} "
            f"stream_count={s.stream_count} peak={rb.peak_memory_bytes:,} B)"
        )
        rb.close()


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 200_000
    run("in memory, 10k-change txns", n, 10_000, 1 << 40, False)
    run("spill, 1 txn, work_mem 16 MB", n, n, 16 << 20, False)
    run("spill, 1 txn, work_mem 1 MB", n, n, 1 << 20, False)
    run("stream, 1 txn, work_mem 1 MB", n, n, 1 << 20, True)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    run("spill, 1,000,000-change txn, 16 MB", 1_000_000, 1_000_000, 16 << 20, False)
    after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(f"peak RSS {after / 1024:,.0f} MiB (before the 1M run: {before / 1024:,.0f} MiB)")


if __name__ == "__main__":
    main()
