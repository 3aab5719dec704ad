"""The worker's TOAST wiring (service.app.toast): a session whose plugin streams
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

from service.app.metrics import Metrics
from service.app.toast import ToastWiring
from service.config import load_settings
from service.errors import ConfigError


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
