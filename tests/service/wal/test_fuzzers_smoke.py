"""The fuzzers of the native boundaries, run briefly on every CI run.

`tests/perf/fuzz_native_reader.py` (the XLog reader, plain and armed as a session arms
it) and `tests/perf/fuzz_native_rows.py` (the Avro row encoder and the text plugin's
lines) are scripts run a million inputs at a time; their models of what the native side
must give drift when the native side learns something new (an inert record handed on
bare, a new kind of run). A few thousand inputs each here keep the models honest: every
outcome must be a typed error, an undamaged prefix or an equal value, exit status 0.
"""

from __future__ import annotations

import sys

import pytest

from tests.perf import fuzz_native_reader, fuzz_native_rows


@pytest.mark.parametrize("armed", [False, True])
def test_native_reader_fuzz_has_no_failures(
    armed: bool, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    args = ["--count", "5000", "--seed", "7", "--python-every", "50"]
    monkeypatch.setattr(sys, "argv", ["fuzz_native_reader", *args, *(["--armed"] * armed)])
    status = fuzz_native_reader.main()
    out = capsys.readouterr().out
    assert status == 0, out
    assert "inputs: 5000" in out and "failures: 0" in out, out


@pytest.mark.parametrize("text", [False, True])
def test_native_rows_fuzz_has_no_failures(
    text: bool, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    args = ["--count", "5000", "--seed", "7", "--python-every", "10"]
    monkeypatch.setattr(sys, "argv", ["fuzz_native_rows", *args, *(["--text"] * text)])
    status = fuzz_native_rows.main()
    out = capsys.readouterr().out
    assert status == 0, out
    assert "failures: 0" in out and "encoded" in out, out
