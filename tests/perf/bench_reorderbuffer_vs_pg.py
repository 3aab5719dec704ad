"""Benchmark (a script, not a test): issue 4's "Against PostgreSQL" run at full size.

Many small transactions plus one 1,000,000-row transaction, decoded by a test_decoding
slot (with `logical_decoding_work_mem` set on its session) and by pgcdc (with the same
`work_mem`) over the same WAL. Prints both sides' pg_stat_replication_slots counters
side by side, whether the outputs are identical (line count and SHA-256), the run times,
pgcdc's peak buffered memory against the limit, and the process's peak RSS right after
pgcdc's run (before the server's output is read; both outputs are streamed into a
digest, never held).

    .venv/bin/python tests/perf/bench_reorderbuffer_vs_pg.py [--pg pg15|pg18]
        [--rows 1000000] [--small 200] [--work-mem-kb 16384]

The services must be up (`python deploy/local/services.py up pg15`).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from service.app.metrics import SLOT_STATS  # noqa: E402 (after the path set-up above)
from tests.integration.reorderbuffer_vs_pg_support import (  # noqa: E402 (same)
    Step,
    run_vs_pg,
    small_and_large,
)

TABLES = [
    "CREATE TABLE small (id int, note text) WITH (autovacuum_enabled = off)",
    "CREATE TABLE big (id int) WITH (autovacuum_enabled = off)",
]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pg", default="pg15", choices=["pg15", "pg18"])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--small", type=int, default=200)
    parser.add_argument("--work-mem-kb", type=int, default=16 * 1024)
    args = parser.parse_args()

    env = json.loads(
        subprocess.check_output(
            [sys.executable, str(ROOT / "deploy/local/services.py"), "env"], cwd=ROOT
        )
    )
    pg = env[args.pg]
    workload = [
        *small_and_large(args.small, args.rows),
        Step("BEGIN; SELECT txid_current(); COMMIT"),
        Step("BEGIN; INSERT INTO small VALUES (-1, 'rolled back'); ROLLBACK"),
        Step("INSERT INTO small VALUES (-2, 'other database')", db="other"),
    ]
    t0 = time.monotonic()
    r = run_vs_pg(pg, TABLES, workload, work_mem_kb=args.work_mem_kb)
    wall = time.monotonic() - t0

    print(
        f"PostgreSQL {pg['version']}: {args.small} small transactions + one "
        f"{args.rows:,}-row transaction, work_mem {args.work_mem_kb} kB on both sides"
    )
    print(f"{'counter':<14}{'test_decoding':>16}{'pgcdc':>16}  equal")
    for name in SLOT_STATS:
        s, p = r.server_stats[name], r.pgcdc_stats[name]
        print(f"{name:<14}{s:>16,}{p:>16,}  {'yes' if s == p else 'NO'}")
    same = r.server_out.digest == r.pgcdc_out.digest and r.server_out.count == r.pgcdc_out.count
    print(
        f"output lines  {r.server_out.count:>16,}{r.pgcdc_out.count:>16,}  "
        f"{'identical' if same else 'DIFFERENT'}"
    )
    print(
        f"workload {r.workload_seconds:.1f} s; test_decoding get_changes "
        f"{r.server_seconds:.1f} s; pgcdc decode {r.pgcdc_seconds:.1f} s "
        f"({args.rows / max(r.pgcdc_seconds, 1e-9):,.0f} rows/s); wall {wall:.1f} s"
    )
    bound = r.work_mem + r.largest_change
    held = "held" if r.peak_memory <= bound else "BROKEN"
    print(
        f"pgcdc peak buffered {r.peak_memory:,} B (limit {r.work_mem:,} B, bound "
        f"limit + largest change = {bound:,} B: {held})"
    )
    print(f"peak RSS of this process after pgcdc's run: {r.rss_after_pgcdc_kb / 1024:.1f} MiB")
    print(f"spill files left: {len(r.spill_left)}")
    print(
        f"catalog-changing commits (any database) inside the large transaction: "
        f"{r.catalog_commits_in_watch} (each makes the server queue a catalog snapshot "
        f"into it, so its byte counters exceed pgcdc's)"
    )
    ok = (
        same
        and r.peak_memory <= bound
        and not r.spill_left
        and all(r.server_stats[n] == r.pgcdc_stats[n] for n in ("total_txns", "spill_txns"))
    )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
