"""An idle snapshot reader (connectors.tablesnap.snapshotter `Snapshotter._idle`, `ring`):
with nothing to read it waits IDLE_POLL_S at most, and a `ring` (the worker's initial
snapshot committed: chunks may start) wakes it at once; a ring it has already seen,
counted before it looked, does not keep it from waiting, and one it has not seen yet
does not let it sleep."""

from __future__ import annotations

import threading
import time

from connectors.tablesnap.snapshotter import IDLE_POLL_S, Snapshotter
from service.config import load_settings


def _idle_for(snap: Snapshotter, bell: int, act: object = None) -> float:
    """Seconds an idle reader that saw `bell` waited, with `act` run 50 ms in."""
    done = threading.Event()
    took: list[float] = []

    def reader() -> None:
        began = time.monotonic()
        snap._idle(bell)
        took.append(time.monotonic() - began)
        done.set()

    thread = threading.Thread(target=reader)
    thread.start()
    if callable(act):
        time.sleep(0.05)
        act()
    assert done.wait(5)
    thread.join()
    return took[0]


def test_a_ring_wakes_an_idle_reader_before_its_poll() -> None:
    snap = Snapshotter(load_settings(), None)
    assert _idle_for(snap, snap._bell, snap.ring) < IDLE_POLL_S * 0.75


def test_without_a_ring_an_idle_reader_waits_its_poll() -> None:
    snap = Snapshotter(load_settings(), None)
    assert _idle_for(snap, snap._bell) >= IDLE_POLL_S * 0.9


def test_a_ring_between_looking_and_waiting_is_not_lost() -> None:
    snap = Snapshotter(load_settings(), None)
    seen = snap._bell
    snap.ring()  # after the reader counted the bell, before it waits
    assert _idle_for(snap, seen) < 0.05


def test_close_wakes_idle_readers() -> None:
    snap = Snapshotter(load_settings(), None)
    assert _idle_for(snap, snap._bell, snap.close) < IDLE_POLL_S * 0.75
