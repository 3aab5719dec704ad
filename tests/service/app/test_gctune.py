"""service.app.gctune: the worker's collector settings (in a child process: they are
process-wide)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from service.app import gctune

REPO = Path(__file__).resolve().parents[3]


def test_tune_freezes_start_up_and_raises_thresholds() -> None:
    """After tune() the start-up objects sit in the permanent generation and the
    thresholds are THRESHOLDS; a cycle made afterwards is still collected."""
    code = (
        "import gc, weakref\n"
        "from service.app import gctune\n"
        "before = gc.get_threshold()\n"
        "gctune.tune()\n"
        "class Node: pass\n"
        "a, b = Node(), Node()\n"
        "a.other, b.other = b, a\n"
        "ref = weakref.ref(a)\n"
        "del a, b\n"
        "gc.collect()\n"
        "print(json.dumps([before, gc.get_threshold(), gc.get_freeze_count(), ref() is None]))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", "import json\n" + code],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    before, after, frozen, collected = json.loads(out)
    assert before == [700, 10, 10]  # CPython's defaults, which tune() replaces
    assert tuple(after) == gctune.THRESHOLDS
    assert frozen > 1000  # the imported modules' objects
    assert collected
