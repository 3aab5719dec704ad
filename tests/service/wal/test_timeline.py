"""Timeline histories (timeline.c's rules) and the page-header timeline gate."""

from __future__ import annotations

import struct

import pytest

from service.errors import TimelineHistoryError, UnexpectedTimelineError
from service.wal.format import XLOG_BLCKSZ
from service.wal.timeline import TimelineEntry, TimelineGate, TimelineHistory

# As PostgreSQL writes them: parent TLI, switch point, reason; comments allowed.
HISTORY_3 = (
    "1\t0/3000158\tno recovery target specified\n"
    "\n"
    "# a comment line\n"
    "2\t0/5000A0\tbefore 2000-01-01 00:00:00+00\n"
)


def test_parse_gives_ranges_with_the_switch_point_in_the_child() -> None:
    """Timeline t covers [parent's switch point, own switch point); the switch point
    belongs to the child (as StartReplication decides); the newest has no end."""
    h = TimelineHistory.parse(2, "1\t0/3000158\tno recovery target specified\n")
    assert h.entries == (TimelineEntry(1, 0, 0x3000158), TimelineEntry(2, 0x3000158, None))
    assert h.tli_of(0x3000157) == 1
    assert h.tli_of(0x3000158) == 2
    assert h.switch_point(1) == (0x3000158, 2)
    assert h.switch_point(2) is None
    with pytest.raises(TimelineHistoryError, match="not in the server's history"):
        h.switch_point(7)


def test_switch_points_going_backwards_are_rejected() -> None:
    """A later switch point below an earlier one is a malformed history, named by line."""
    with pytest.raises(TimelineHistoryError, match="line 4: switch point 0/5000A0"):
        TimelineHistory.parse(3, HISTORY_3)


@pytest.mark.parametrize(
    ("target", "text", "message"),
    [
        (3, "1\t0/3000000\tx\n1\t0/4000000\ty\n", "increasing sequence"),
        (2, "2\t0/3000000\tx\n", "less than the file's own timeline 2"),
        (2, "one\t0/3000000\tx\n", "invalid data in history file 00000002.history line 1"),
        (2, "1\t3000000\tx\n", "invalid data"),
    ],
)
def test_malformed_histories_are_fatal(target: int, text: str, message: str) -> None:
    """Every rule readTimeLineHistory enforces gives a TimelineHistoryError."""
    with pytest.raises(TimelineHistoryError, match=message):
        TimelineHistory.parse(target, text)


def test_extends() -> None:
    """A newer history continues an older one when the older one's timelines end where
    they ended; a history that forked elsewhere does not."""
    one = TimelineHistory.single(1)
    two = TimelineHistory.parse(2, "1\t0/3000158\tx\n")
    other = TimelineHistory.parse(2, "1\t0/3000160\tx\n")
    three = TimelineHistory.parse(3, "1\t0/3000158\tx\n2\t0/4000000\ty\n")
    assert two.extends(one) and three.extends(two)
    assert not three.extends(other)


def _pages(tlis: list[int], base: int) -> bytes:
    out = b""
    for i, tli in enumerate(tlis):
        hdr = struct.pack("<HHIQI", 0xD110, 0, tli, base + i * XLOG_BLCKSZ, 0)
        out += hdr + bytes(XLOG_BLCKSZ - len(hdr))
    return out


def test_gate_accepts_the_history_and_rejects_another_timeline() -> None:
    """The page holding the switch point carries the parent's ID, the pages after it
    the child's; an ID the history does not assign is UnexpectedTimelineError naming
    the page's LSN, also when a chunk boundary splits that page's header."""
    base = 0x3000000
    switch = base + 2 * XLOG_BLCKSZ + 100  # inside the third page
    history = TimelineHistory.parse(2, f"1\t0/{switch:X}\tx\n")
    good = _pages([1, 1, 1, 2, 2], base)
    TimelineGate(history).check(good, base)
    bad = _pages([1, 1, 1, 2, 1], base)
    gate = TimelineGate(history)
    gate.check(bad[: 4 * XLOG_BLCKSZ + 5], base)  # ends inside the fifth page's header
    with pytest.raises(UnexpectedTimelineError) as info:
        gate.check(bad[4 * XLOG_BLCKSZ + 5 :], base + 4 * XLOG_BLCKSZ + 5)
    assert info.value.lsn == base + 4 * XLOG_BLCKSZ
    assert "timeline ID 1" in str(info.value) and "lsn=0/3008000" in str(info.value)
    # A chunk starting mid-page checks only the headers it holds; zero pages pass.
    TimelineGate(history).check(good[100:] + bytes(XLOG_BLCKSZ), base + 100)
