"""Differential check of the native float text (service._native.TextPlan, types::float)
against the Python reference (service.types.numeric.float_text), over many values.

    python tests/perf/diff_native_floats.py [--count N] [--seed S]

Values: random bit patterns (every exponent, subnormals, NaN payloads, ±0, ±Infinity),
short decimals read as float8 and float4 (`0.3`, `1.125`, `2.5e-7`: the values tables
hold), integers, powers of two and the halfway cases around them. Each is printed by
the native writer in a one-column tuple and by the Python path; the native line must be
the Python one (rounding bounds and ties included: types::float searches the open
interval, so a fallback is a failure too). Prints the counts; exits 1 on any difference
or fallback.
"""

from __future__ import annotations

import argparse
import random
import struct
import sys
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from service import _native  # noqa: E402
from service.decode.events import RawTuple  # noqa: E402
from service.errors import DecodeError, SchemaMismatchError  # noqa: E402
from service.types.numeric import float_text  # noqa: E402


def _values(rng: random.Random, single: bool) -> float:
    how = rng.randrange(5)
    if how == 0:
        bits = rng.getrandbits(32 if single else 64)
        return struct.unpack("<f" if single else "<d", bits.to_bytes(4 if single else 8, "little"))[
            0
        ]
    if how == 1:
        return float(f"{rng.randint(-99999, 99999)}e{rng.randint(-30, 30)}")
    if how == 2:
        return float(rng.randint(-(2**60), 2**60))
    if how == 3:
        return rng.choice([-1, 1]) * 2.0 ** rng.randint(-1074 if not single else -149, 127)
    p = rng.randint(0, 60)
    return 2.0**p + rng.choice([0.5, 0.25, 0.125, 0.0625, 0.375]) * rng.randint(1, 8)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--count", type=int, default=200_000)
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    rng = random.Random(a.seed)
    counts: Counter[str] = Counter()
    started = time.perf_counter()
    for single, fmt, kind in ((False, "<d", "float8"), (True, "<f", "float4")):
        size = struct.calcsize(fmt)
        spec = ("c", size, size, False, False, " c:", kind)
        plan = _native.TextPlan([spec], "public.f", SchemaMismatchError, DecodeError)
        for _ in range(a.count):
            value = _values(rng, single)
            try:
                datum = struct.pack(fmt, value)
            except OverflowError:
                continue
            python = float_text(struct.unpack(fmt, datum)[0], single=single)
            raw = RawTuple(1, 0, 1, 24, b"\x00" + datum)
            lines, reason = plan.lines([raw], [1], 0, "", False)
            if reason is not None:
                counts[f"FAIL {kind} fallback {datum.hex()}: {reason}"] += 1
            elif lines == [" c:" + python]:
                counts[f"{kind} equal"] += 1
            else:
                counts[f"FAIL {kind} {datum.hex()}: {lines[0]!r} != {python!r}"] += 1
    took = time.perf_counter() - started
    print(f"values: {2 * a.count} floats, native against Python, in {took:.0f}s")
    for k, v in sorted(counts.items(), key=lambda kv: -kv[1])[:20]:
        print(f"{v:9d}  {k}")
    fails = sum(v for k, v in counts.items() if k.startswith("FAIL"))
    print(f"failures: {fails}")
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
