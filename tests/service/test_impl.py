"""PGCDC_IMPL: which XLog reader `service.impl` hands out, and how it refuses."""

from __future__ import annotations

import pytest
from structlog.testing import capture_logs

from service import impl
from service.errors import ConfigError
from service.wal.native import NativeXLogReader
from service.wal.reader import XLogReader


def test_default_is_native_when_built(monkeypatch: pytest.MonkeyPatch) -> None:
    """Unset PGCDC_IMPL picks the native reader when the extension imports."""
    monkeypatch.delenv(impl.ENV, raising=False)
    assert impl.native_available()
    assert impl.xlog_reader_class() is NativeXLogReader


@pytest.mark.parametrize(("value", "cls"), [("python", XLogReader), ("native", NativeXLogReader)])
def test_explicit_choice(monkeypatch: pytest.MonkeyPatch, value: str, cls: object) -> None:
    """PGCDC_IMPL=python|native selects that reader (case and spaces ignored)."""
    monkeypatch.setenv(impl.ENV, f" {value.upper()} ")
    assert impl.xlog_reader_class() is cls


def test_fallback_to_python_warns(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without the extension and without PGCDC_IMPL, the Python reader is used and a
    `native_core_unavailable` warning says so."""
    monkeypatch.delenv(impl.ENV, raising=False)
    monkeypatch.setattr(impl, "native_available", lambda: False)
    with capture_logs() as logs:
        assert impl.xlog_reader_class() is XLogReader
    assert [e["event"] for e in logs] == ["native_core_unavailable"]
    assert logs[0]["log_level"] == "warning"


def test_native_requested_but_not_built_is_an_error(monkeypatch: pytest.MonkeyPatch) -> None:
    """PGCDC_IMPL=native without the extension is a ConfigError naming the variable,
    never a silent fallback."""
    monkeypatch.setenv(impl.ENV, "native")
    monkeypatch.setattr(impl, "native_available", lambda: False)
    with pytest.raises(ConfigError, match="not built") as exc:
        impl.xlog_reader_class()
    assert exc.value.field == impl.ENV


def test_unknown_value_is_an_error(monkeypatch: pytest.MonkeyPatch) -> None:
    """Any other PGCDC_IMPL value is refused with the accepted choices."""
    monkeypatch.setenv(impl.ENV, "rust")
    with pytest.raises(ConfigError, match="python, native"):
        impl.selected()
