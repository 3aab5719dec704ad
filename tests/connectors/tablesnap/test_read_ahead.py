"""The readers' read-ahead rule (connectors.tablesnap.snapshotter `ReadAhead`): at most
two unpublished chunks per reader and `limit` across all readers, reads in progress
counted (a place is reserved when a read may start), and a published chunk or a
released reservation frees its place at once; a chunk held with its records encoded
ahead takes two places."""

from __future__ import annotations

import threading
from typing import cast

from connectors.tablesnap.snapshotter import HELD_MAX, READ_AHEAD, ReadAhead, _Pending


class _Chunk:
    def __init__(self) -> None:
        self.published = threading.Event()
        self.ahead: object = None


def _chunk() -> _Pending:
    return cast(_Pending, _Chunk())


def _fill(rule: ReadAhead, held: list[_Pending]) -> list[_Pending]:
    """Read while the rule allows it; returns what was read."""
    read = []
    while rule.room(held):
        p = _chunk()
        rule.add(held, p)
        read.append(p)
    return read


def test_one_reader_holds_read_ahead_chunks() -> None:
    rule = ReadAhead()
    held: list[_Pending] = []
    read = _fill(rule, held)
    assert len(read) == READ_AHEAD == 2
    read[0].published.set()
    assert rule.room(held) and held == [read[1]]


def test_four_readers_hold_the_limit_together_not_two_each() -> None:
    rule = ReadAhead(max(HELD_MAX, 4))
    readers: list[list[_Pending]] = [[] for _ in range(4)]
    counts = [len(_fill(rule, held)) for held in readers]
    # The first two readers fill the limit; the others wait for a publication.
    assert sum(counts) == 4 and counts == [2, 2, 0, 0]
    readers[0][0].published.set()
    assert len(_fill(rule, readers[2])) == 1
    assert not rule.room(readers[3])


def test_each_of_more_readers_than_held_max_can_hold_one() -> None:
    rule = ReadAhead(max(HELD_MAX, 6))
    readers: list[list[_Pending]] = [[] for _ in range(6)]
    for held in readers:
        assert rule.room(held)
        rule.add(held, _chunk())
    assert not rule.room(readers[0]) and not rule.room([])


def test_reads_in_progress_count_and_a_release_frees_the_place() -> None:
    """Four readers asking at once, none holding a chunk yet: only `limit` may start,
    though none has added its chunk; a read that found nothing gives its place back."""
    rule = ReadAhead(HELD_MAX)
    readers: list[list[_Pending]] = [[] for _ in range(6)]
    started = [rule.room(held) for held in readers]
    assert started.count(True) == HELD_MAX
    rule.release()
    assert rule.room(readers[started.index(False)])


def test_a_chunk_with_its_records_encoded_ahead_takes_two_places() -> None:
    """Two readers, four places: with one held chunk encoded ahead, three chunks fill
    them; once that chunk is published (its records go with it), two places free."""
    rule = ReadAhead(HELD_MAX)
    first: list[_Pending] = []
    second: list[_Pending] = []
    a = _fill(rule, first)
    assert len(a) == 2
    a[0].ahead = object()  # its reader encoded its records (Snapshotter._prepare)
    assert len(_fill(rule, second)) == 1  # 2 chunks + 1 ahead + 1 = HELD_MAX
    assert not rule.room(second)
    a[0].published.set()
    assert len(_fill(rule, second)) == 1  # READ_AHEAD for this reader
    assert rule.room(first)
