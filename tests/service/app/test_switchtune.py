"""service.app.switchtune: the worker's GIL switch interval (in a child process: it is
process-wide), and that the worker applies it."""

from __future__ import annotations

import inspect
import json
import subprocess
import sys
from pathlib import Path

from service.app import switchtune, worker

REPO = Path(__file__).resolve().parents[3]


def test_tune_sets_the_switch_interval() -> None:
    code = (
        "import json, sys\n"
        "from service.app import switchtune\n"
        "before = sys.getswitchinterval()\n"
        "switchtune.tune()\n"
        "print(json.dumps([before, sys.getswitchinterval()]))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True
    ).stdout
    before, after = json.loads(out)
    assert before == 0.005  # CPython's default, which tune() replaces
    assert after == switchtune.SWITCH_INTERVAL_S < before


def test_run_worker_tunes_before_it_serves_metrics() -> None:
    """The worker's start calls tune() before the metrics server starts its thread."""
    src = inspect.getsource(worker.run_worker)
    assert "switchtune.tune()" in src
    assert src.index("switchtune.tune()") < src.index("metrics.serve(")
