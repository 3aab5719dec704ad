"""deploy/prometheus/rules.yml under promtool: it loads, and its unit tests pass.

promtool comes with the services script's Prometheus (Debian's package, 2.42). The unit
tests (deploy/prometheus/rules.test.yml) feed each alert the series of the fault it names
and of an idle database; here it is also checked that they cover every alert both ways,
and that they fail on the alert rule issue 28 found wrong (`up{job="pgcdc"} == 0`).
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

pytestmark = pytest.mark.integration

PROMETHEUS_DIR = Path(__file__).resolve().parents[2] / "deploy" / "prometheus"
RULES = PROMETHEUS_DIR / "rules.yml"
UNIT_TESTS = PROMETHEUS_DIR / "rules.test.yml"


def _promtool(
    prometheus: dict[str, Any], *args: str, cwd: Path
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(prometheus["promtool"]), *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=120,
        check=False,
    )


def _alerts() -> list[str]:
    doc = yaml.safe_load(RULES.read_text())
    return [rule["alert"] for group in doc["groups"] for rule in group["rules"]]


def test_promtool_check_rules(prometheus: dict[str, Any]) -> None:
    """`promtool check rules` accepts the file and finds every rule in it."""
    proc = _promtool(prometheus, "check", "rules", RULES.name, cwd=PROMETHEUS_DIR)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"SUCCESS: {len(_alerts())} rules found" in proc.stdout


def test_promtool_test_rules(prometheus: dict[str, Any]) -> None:
    """`promtool test rules` passes: each alert fires on its fault, none on an idle
    database."""
    proc = _promtool(prometheus, "test", "rules", UNIT_TESTS.name, cwd=PROMETHEUS_DIR)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "SUCCESS" in proc.stdout


def test_unit_tests_cover_every_alert_both_ways() -> None:
    """Every alert fires in some unit test (with its labels checked), and the idle
    database test states each alert silent, at an evaluation time past every `for`."""
    doc = yaml.safe_load(UNIT_TESTS.read_text())
    fired: set[str] = set()
    silent_when_idle: set[str] = set()
    for case in doc["tests"]:
        for check in case["alert_rule_test"]:
            if check["exp_alerts"]:
                assert all("severity" in a["exp_labels"] for a in check["exp_alerts"]), check
                fired.add(check["alertname"])
            elif case["name"] == "idle database" and check["eval_time"] == "3h":
                silent_when_idle.add(check["alertname"])
    assert fired == set(_alerts())
    assert silent_when_idle == set(_alerts())


def test_unit_tests_fail_on_the_old_worker_down_rule(
    prometheus: dict[str, Any], tmp_path: Path
) -> None:
    """With PgcdcWorkerDown back to `up{job="pgcdc"} == 0` (which targets discovered
    through Kubernetes annotations never match, and which is silent once a target is
    gone), the unit tests fail, naming that alert."""
    rules = RULES.read_text()
    old = re.sub(
        r"(- alert: PgcdcWorkerDown\n\s+expr: )>-\n(?:\s{10}.*\n)+",
        r'\1up{job="pgcdc"} == 0\n',
        rules,
    )
    assert old != rules and 'up{job="pgcdc"} == 0' in old
    (tmp_path / RULES.name).write_text(old)
    shutil.copy(UNIT_TESTS, tmp_path / UNIT_TESTS.name)
    proc = _promtool(prometheus, "test", "rules", UNIT_TESTS.name, cwd=tmp_path)
    assert proc.returncode != 0
    assert "alertname: PgcdcWorkerDown" in proc.stdout + proc.stderr
