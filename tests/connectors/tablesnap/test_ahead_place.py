"""The place of a chunk's records encoded ahead (connectors.tablesnap.snapshotter
`Snapshotter._ahead_place`, `_begin_publication`, `published`): at most AHEAD_MAX
unpublished chunks hold their records; a reader whose chunk finds no place waits for
one instead of giving up, and gets it as soon as a publication begins or a holder is
retried or abandoned; it stops waiting once its own chunk's publication begins, its
chunk is let go, or the snapshot stops."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from connectors.tablesnap.chunks import ChunkSpec
from connectors.tablesnap.snapshotter import AHEAD_MAX, Snapshotter, _Ahead, _Pending
from service.config import load_settings
from service.tablesnap.plan import Interval, TableJob

# Long enough that a waiter still waiting has not merely not started yet.
_SETTLE_S = 0.3


def _pending(snap: Snapshotter, n: int) -> _Pending:
    """Chunk `n` of one table, pending as a read chunk is."""
    job = TableJob(f"public.t{n}", "initial", keyed=False)
    p = _Pending(f"c{n}", job, Interval(0, None), ChunkSpec(n, job.table, False, 0, None))
    snap._pending[p.chunk_id] = p
    return p


def _holders(snap: Snapshotter, count: int) -> list[_Pending]:
    """`count` chunks that took their places, in order, their records encoded."""
    held = []
    for n in range(count):
        p = _pending(snap, 100 + n)
        ahead = _Ahead()
        assert snap._ahead_place(p, ahead)
        ahead.done.set()
        held.append(p)
    return held


class _Waiting:
    """AHEAD_MAX chunks holding their places, and a reader's thread asking one for `p`."""

    def __init__(self) -> None:
        self.snap = Snapshotter(load_settings(), None)
        self.held = _holders(self.snap, AHEAD_MAX)
        self.p = _pending(self.snap, 1)
        self.thread, self.answer = _waiter(self.snap, self.p)

    def after(self, act: Callable[[], object]) -> bool:
        return _after(self.thread, self.answer, act)


def _waiter(snap: Snapshotter, p: _Pending) -> tuple[threading.Thread, list[bool]]:
    """A reader's thread asking a place for `p`; its answer lands in the list."""
    answer: list[bool] = []
    thread = threading.Thread(target=lambda: answer.append(snap._ahead_place(p, _Ahead())))
    thread.start()
    return thread, answer


def _after(thread: threading.Thread, answer: list[bool], act: Callable[[], object]) -> bool:
    """The waiter's answer once `act` ran, having checked that it was still waiting."""
    time.sleep(_SETTLE_S)
    assert answer == [] and thread.is_alive()
    started = time.monotonic()
    act()
    thread.join(5)
    assert not thread.is_alive()
    # woken, not found by the timeout's next look (AHEAD_POLL_S is 0.05 s)
    assert time.monotonic() - started < 1.0
    return answer[0]


def test_a_chunk_without_a_place_gets_one_when_a_publication_begins() -> None:
    w = _Waiting()
    assert w.after(lambda: w.snap._begin_publication(w.held[0])) is True
    assert w.p.ahead is not None and w.held[0].ahead is None and w.held[0].publishing


def test_a_holder_retried_or_abandoned_frees_its_place() -> None:
    w = _Waiting()
    assert w.after(lambda: w.snap.published(w.held[0])) is True
    assert w.p.ahead is not None and w.held[0].ahead is None


def test_a_chunk_whose_publication_began_stops_waiting_without_a_place() -> None:
    w = _Waiting()
    # the worker reached p first: its publication encodes it, and nothing was ahead
    assert w.after(lambda: w.snap._begin_publication(w.p)) is False
    assert w.p.ahead is None and all(h.ahead is not None for h in w.held)


def test_a_chunk_let_go_stops_waiting() -> None:
    """The blocking method's export, halting, sets `published` on every pending chunk
    (connectors.tablesnap.export): its readers must not wait on past that."""
    w = _Waiting()
    assert w.after(w.p.published.set) is False
    assert w.p.ahead is None


def test_a_stop_ends_the_wait() -> None:
    w = _Waiting()
    assert w.after(w.snap.stop.set) is False
    assert w.p.ahead is None


def test_begin_publication_hands_over_the_records_once_encoded() -> None:
    """The records its reader is still encoding are waited for; a chunk without any
    gives None."""
    snap = Snapshotter(load_settings(), None)
    p = _pending(snap, 1)
    ahead = _Ahead()
    assert snap._ahead_place(p, ahead)
    got: list[object] = []
    thread = threading.Thread(target=lambda: got.append(snap._begin_publication(p)))
    thread.start()
    time.sleep(_SETTLE_S)
    assert got == [] and p.publishing
    ahead.value = "records"
    ahead.done.set()
    thread.join(5)
    assert got == ["records"]
    assert snap._begin_publication(_pending(snap, 2)) is None
