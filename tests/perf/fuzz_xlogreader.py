"""Fuzz the XLog reader with cheap mutations of real WAL; print count and outcomes.

    .venv/bin/python tests/perf/fuzz_xlogreader.py [--count N] [--procs P] [--seed S]
    .venv/bin/python tests/perf/fuzz_xlogreader.py --capture   # refresh the WAL fixtures

Inputs: the golden WAL windows in tests/service/data/ (captured from the PG15 and PG18
test servers with `--capture`: a varied workload with pglz/lz4 full-page images).
Each case starts the reader at a real record, feeds a window of a few records, and
applies one mutation (bit flip, byte set, truncation, zeroed page, wrong magic, wrong
xl_prev, shifted chunk). The only acceptable outcomes are records equal to a prefix
of the undamaged ones followed by a typed error (PgcdcError), end of WAL, or a stop for
more bytes. Anything else (a wrong record, an untyped exception) is counted as a
failure and printed; the exit status is 1 if there was any.
"""

from __future__ import annotations

import argparse
import multiprocessing
import random
import struct
import sys
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from connectors.postgres.archive import iter_wal_chunks  # noqa: E402  (after the sys.path set-up above)
from service.errors import PgcdcError  # noqa: E402  (after the sys.path set-up above)
from service.wal.reader import XLogReader  # noqa: E402  (after the sys.path set-up above)
from service.wal.record import XLogRecord  # noqa: E402  (after the sys.path set-up above)
from tests.fixtures.services import ensure_service  # noqa: E402  (after the sys.path set-up above)
from tests.service.realwal import fresh_db, run_workload  # noqa: E402  (after the sys.path set-up above)

DATA = ROOT / "tests" / "service" / "data"
BLCK = 8192


def load_fixtures() -> list[tuple[int, bytes]]:
    """(lsn, bytes) of every captured WAL window (file name: wal<ver>_<lsnhex>.bin)."""
    out = []
    for f in sorted(DATA.glob("wal*_*.bin")):
        out.append((int(f.stem.split("_")[1], 16), f.read_bytes()))
    return out


def baseline(lsn: int, data: bytes) -> list[XLogRecord]:
    """The undamaged records of a window (the window starts at a page start)."""
    r = XLogReader(lsn)
    r.feed(data, lsn)
    return list(r.records())


def mutate(rng: random.Random, window: bytearray, rec_off: int) -> tuple[str, int]:
    """Damage `window` in place; returns (kind, offset of the first damaged byte)."""
    kind = rng.choice(
        ["flip", "flip", "flip", "byte", "truncate", "zeropage", "magic", "prev", "tot_len"]
    )
    n = len(window)
    if kind == "flip":
        off = rng.randrange(n)
        window[off] ^= 1 << rng.randrange(8)
    elif kind == "byte":
        off = rng.randrange(n)
        window[off] = rng.randrange(256)
    elif kind == "truncate":
        off = rng.randrange(n)
        del window[off:]
    elif kind == "zeropage":
        page = rng.randrange((n + BLCK - 1) // BLCK)
        off = page * BLCK
        window[off : off + BLCK] = bytes(len(window[off : off + BLCK]))
    elif kind == "magic":
        page = rng.randrange((n + BLCK - 1) // BLCK)
        off = page * BLCK
        if off + 2 <= n:
            struct.pack_into("<H", window, off, rng.choice([0xD106, 0xD101, 0xD113, 0x0000]))
        else:
            off = n
    elif kind == "prev":
        off = rec_off + 8
        struct.pack_into("<Q", window, off, rng.randrange(1 << 40))
    else:
        off = rec_off
        struct.pack_into("<I", window, off, rng.randrange(1 << rng.choice([5, 8, 16, 31])))
    return kind, off


def one_case(rng: random.Random, page_lsn: int, data: bytes, base: list[XLogRecord]) -> str:
    """Run one mutated input; returns the outcome name ('FAIL:...' on a violation)."""
    i = rng.randrange(1, len(base) - 1)
    start = base[i].lsn
    win_start = (start & ~(BLCK - 1)) - page_lsn
    win_end = min(len(data), start - page_lsn + rng.randrange(64, 3 * BLCK))
    window = bytearray(data[win_start:win_end])
    kind, off = mutate(rng, window, start - page_lsn - win_start)
    r = XLogReader(start, prev_lsn=base[i - 1].lsn)
    got: list[XLogRecord] = []
    outcome = "stop"
    try:
        r.feed(bytes(window), page_lsn + win_start)
        for rec in r.records():
            got.append(rec)
        if r.end_of_wal:
            outcome = "end_of_wal"
    except PgcdcError as exc:
        outcome = type(exc).__name__
    except Exception as exc:  # counting untyped errors is the point
        return f"FAIL:untyped {type(exc).__name__}: {exc} ({kind} at {off})"
    expect = base[i : i + len(got)]
    if got != expect:
        return f"FAIL:wrong record ({kind} at {off}, start {start:X})"
    return f"{kind}:{outcome}"


def worker(args: tuple[int, int]) -> Counter[str]:
    """Run `count` cases with seed `seed`."""
    seed, count = args
    rng = random.Random(seed)
    fixtures = [(lsn, data, baseline(lsn, data)) for lsn, data in load_fixtures()]
    hist: Counter[str] = Counter()
    for _ in range(count):
        lsn, data, base = rng.choice(fixtures)
        hist[one_case(rng, lsn, data, base)] += 1
    return hist


def capture() -> None:
    """Write fresh WAL windows from the PG15 and PG18 test servers."""
    for name in ("pg15", "pg18"):
        info = ensure_service(name)
        w = run_workload(info, fresh_db(info, "fuzzcap"))
        first = w.start & ~(BLCK - 1)
        raw = bytearray()
        for lsn, chunk in iter_wal_chunks(info["pgdata"] + "/pg_wal", first):
            raw += chunk
            if lsn + len(chunk) >= w.end:
                break
        raw = raw[: w.end - first]
        recs = baseline(first, bytes(raw))
        # Keep the first 96 KB and 96 KB around the first compressed image.
        windows = [(first, bytes(raw[: 96 * 1024]))]
        fpi = next((x for x in recs if any(b.bimg_info & 0x0C for b in x.blocks)), None)
        if fpi is not None:
            s = max(first, (fpi.lsn & ~(BLCK - 1)) - 48 * 1024)
            windows.append((s, bytes(raw[s - first : s - first + 96 * 1024])))
        for lsn, win in windows:
            (DATA / f"wal{info['version']}_{lsn:016X}.bin").write_bytes(win)
            print(f"wrote wal{info['version']}_{lsn:016X}.bin ({len(win)} bytes)")


def main() -> int:
    """Parse options, fan out over processes, print the histogram."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--count", type=int, default=1_000_000)
    ap.add_argument("--procs", type=int, default=2)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--capture", action="store_true")
    a = ap.parse_args()
    if a.capture:
        capture()
        return 0
    batches = 50
    per = a.count // batches
    jobs = [(a.seed * 1000 + k, per + (1 if k < a.count % batches else 0)) for k in range(batches)]
    t = time.perf_counter()
    total: Counter[str] = Counter()
    with multiprocessing.Pool(a.procs) as pool:
        for h in pool.imap_unordered(worker, jobs):
            total.update(h)
    took = time.perf_counter() - t
    n = sum(total.values())
    print(f"inputs: {n} in {took:.0f}s ({n / took:.0f}/s)")
    for k, v in sorted(total.items(), key=lambda kv: -kv[1]):
        print(f"{v:9d}  {k}")
    fails = sum(v for k, v in total.items() if k.startswith("FAIL"))
    print(f"failures: {fails}")
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
