"""service.app.malloctune: the worker's glibc malloc settings (in child processes: they
are process-wide)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from service.app import malloctune

REPO = Path(__file__).resolve().parents[3]

# A 16 MiB block freed (mmapped: glibc then raises its dynamic mmap threshold past 8 MiB),
# then four 8 MiB "chunks", each freed after a small object was allocated behind it.
CHUNKS = """
import json, sys
from service.app import malloctune

def rss_mb():
    for line in open('/proc/self/status'):
        if line.startswith('VmRSS:'):
            return int(line.split()[1]) / 1024

tuned = malloctune.tune() if sys.argv[1] == 'tune' else None
big = b'x' * (16 << 20)
del big
before = rss_mb()
held = []
for _ in range(4):
    chunk = b'y' * (8 << 20)
    held.append(b'z' * 1000)
    del chunk
print(json.dumps([tuned, rss_mb() - before]))
"""


def _run(mode: str) -> tuple[bool | None, float]:
    out = subprocess.run(
        [sys.executable, "-c", CHUNKS, mode], cwd=REPO, capture_output=True, text=True, check=True
    ).stdout
    tuned, grown = json.loads(out)
    return tuned, float(grown)


def test_freed_chunks_go_back_to_the_system() -> None:
    """With tune(), an 8 MiB buffer freed after a larger one is unmapped: the process's
    RSS does not keep it. With glibc's defaults it stays in the heap (the reason for
    the module), which the same script shows."""
    tuned, grown = _run("tune")
    assert tuned is True
    assert grown < 4, f"RSS grew {grown:.1f} MB with the settings"
    untuned, grown_default = _run("default")
    assert untuned is None
    assert grown_default >= 7, f"glibc's defaults kept only {grown_default:.1f} MB"


class _NoMallopt:
    """A C library without mallopt (musl, macOS)."""


class _Refusing:
    """A mallopt that refuses every setting (returns 0, as glibc does on a bad value)."""

    def mallopt(self, param: int, value: int) -> int:
        return 0


def test_without_glibc_mallopt_nothing_changes() -> None:
    """Where the C library has no mallopt, or it refuses, tune() says so and raises
    nothing."""
    assert malloctune.tune(_NoMallopt()) is False
    assert malloctune.tune(_Refusing()) is False


def test_tune_sets_both_parameters() -> None:
    """tune() passes M_MMAP_THRESHOLD and M_ARENA_MAX with the module's values."""
    calls: list[tuple[Any, ...]] = []

    class _Recording:
        def mallopt(self, param: int, value: int) -> int:
            calls.append((param, value))
            return 1

    assert malloctune.tune(_Recording()) is True
    assert calls == [(-3, 1 << 20), (-8, 2)]
