"""The /healthz watchdog (service.app.metrics): live while the main loop makes
progress, not once it has made none for metrics.watchdog_s."""

from __future__ import annotations

import time

from service.app.metrics import Health, Metrics


def test_health_is_stalled_only_past_the_watchdog() -> None:
    """No watchdog (0): never stalled. With one: not stalled right after a beat,
    stalled once that long has passed without one, and a beat clears it."""
    assert Health(watchdog_s=0.0, last_beat=time.monotonic() - 3600).stalled_s() is None
    health = Health(watchdog_s=0.05)
    assert health.stalled_s() is None
    time.sleep(0.08)
    stalled = health.stalled_s()
    assert stalled is not None and stalled >= 0.05
    health.beat()
    assert health.stalled_s() is None


def test_alive_says_why_and_counts_snapshot_rows_as_progress() -> None:
    """Metrics.alive() is what /healthz answers: "ok", "dead" when the worker says so,
    "stalled: ..." past the watchdog; rows read by the initial snapshot are progress,
    since the snapshot runs inside one call of the main loop."""
    m = Metrics("s")
    m.health.watchdog_s = 0.05
    assert m.alive() == (True, "ok")
    time.sleep(0.08)
    ok, why = m.alive()
    assert not ok and why.startswith("stalled: no progress for")
    m.snapshot_rows.labels("s", "public.t").inc(10)
    assert m.alive() == (True, "ok")
    m.health.live = False
    assert m.alive() == (False, "dead")
