"""The worker's TOAST wiring (service.app.toast): placeholders are counted, and logged
(each with fill, once per table with placeholder); a session whose plugin streams
in-progress transactions gets no fill. The fill waits for whole transactions
(PluginSink batches replayed changes); a streamed change would reach the plugin
unfilled and uncounted, so the wiring refuses it with a ConfigError naming
toast.unchanged, before it touches the source. Pure: stand-ins for the session and
stream, no connection is made."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
from prometheus_client import CollectorRegistry
from structlog.testing import capture_logs

from service.app.metrics import Metrics
from service.app.toast import ToastWiring
from service.config import load_settings
from service.errors import ConfigError
from service.output.toastfill import Placeholder


@pytest.mark.parametrize("mode", ["fill", "placeholder"])
def test_a_streaming_sink_is_refused_naming_the_setting(mode: str) -> None:
    """attach() on a sink with can_stream raises ConfigError(field=toast.unchanged)
    and hooks nothing into the sink or the stream."""
    settings = load_settings(toast={"unchanged": mode})
    wiring = ToastWiring(settings, Metrics("s1", registry=CollectorRegistry()))
    sink = SimpleNamespace(can_stream=True, fill=None)
    session: Any = SimpleNamespace(sink=sink, decoding=SimpleNamespace(on_running_xacts=None))
    stream: Any = SimpleNamespace(hold_xmin=None)
    with pytest.raises(ConfigError) as err:
        wiring.attach(session, stream)
    assert err.value.field == "toast.unchanged"
    assert sink.fill is None and stream.hold_xmin is None
    wiring.close()


@pytest.mark.parametrize(
    ("mode", "logged"),
    [("fill", ["public.a", "public.a", "public.b"]), ("placeholder", ["public.a", "public.b"])],
)
def test_every_placeholder_counted_and_logged_once_per_table_in_placeholder_mode(
    mode: str, logged: list[str]
) -> None:
    """Three placeholders on two tables: all three counted per table; with fill each
    is logged (an anomaly), with placeholder (the configured outcome) only the first
    per table."""
    registry = CollectorRegistry()
    wiring = ToastWiring(
        load_settings(toast={"unchanged": mode}, source={"slot": "s1"}),
        Metrics("s1", registry=registry),
    )
    report = wiring.fill.on_placeholder
    assert report is not None
    with capture_logs() as logs:
        for table, valueid in (("public.a", 1), ("public.a", 2), ("public.b", 3)):
            report(Placeholder(table, 0x100, 16400, valueid))
    assert [e["table"] for e in logs if e["event"] == "toast_placeholder"] == logged
    count = {
        t: registry.get_sample_value("pgcdc_toast_placeholders_total", {"slot": "s1", "table": t})
        for t in ("public.a", "public.b")
    }
    assert count == {"public.a": 2.0, "public.b": 1.0}
    wiring.close()
