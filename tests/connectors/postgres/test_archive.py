"""Directory WAL source on synthetic segment files."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from connectors.postgres.archive import iter_wal_chunks, list_segments, read_records, segment_name
from service.errors import TimelineHistoryError, UnexpectedTimelineError, WalError
from tests.service.walwriter import Block, WalWriter, record_body

SEG = 64 * 1024


def write_segments(tmp: Path, w: WalWriter, tli: int = 1) -> list[Path]:
    """Split the writer's stream into segment files named as PostgreSQL names them."""
    data = w.data()
    data += bytes(-len(data) % SEG)
    paths = []
    for i in range(0, len(data), SEG):
        segno = (w.base + i) // SEG
        p = tmp / segment_name(tli, segno, SEG)
        p.write_bytes(data[i : i + SEG])
        paths.append(p)
    return paths


def make(n: int = 1500) -> tuple[WalWriter, list[int]]:
    """A writer with n records spread over several segments."""
    w = WalWriter(base=0x1000000)
    lsns = [
        w.add(10, 0, 100 + i, record_body([Block(0, blk=i, data=b"d" * 30)], b"m" * 90))
        for i in range(n)
    ]
    return w, lsns


def test_reads_segments_in_order_ignoring_other_files(tmp_path: Path) -> None:
    """Records come from consecutive segments; .partial/.history/archive_status are
    ignored; the segment size is detected from the files."""
    w, lsns = make()
    write_segments(tmp_path, w)
    (tmp_path / "archive_status").mkdir()
    # Timeline 2 forks after these segments: they are all read from timeline 1.
    (tmp_path / "00000002.history").write_text("1\t0/F000000\tno reason\n")
    (tmp_path / (segment_name(1, 0x1000000 // SEG + 1, SEG) + ".partial")).write_bytes(b"x")
    recs = list(read_records(tmp_path, lsns[0]))
    assert [r.lsn for r in recs] == lsns
    mid = list(read_records(tmp_path, lsns[700], lsns[900]))
    assert [r.lsn for r in mid] == lsns[700:900]


def test_history_picks_the_timeline_and_missing_segment_is_an_error(tmp_path: Path) -> None:
    """Of two files for one segment the one the history file assigns is used (the newer
    timeline once it has begun, the older before); two timelines without a history
    file are a TimelineHistoryError; a hole is a WalError."""
    w, lsns = make()
    paths = write_segments(tmp_path, w)
    first = 0x1000000 // SEG
    assert list_segments(tmp_path, SEG)[first][0] == 1
    (tmp_path / segment_name(2, first + 3, SEG)).write_bytes(b"\0" * SEG)
    with pytest.raises(TimelineHistoryError, match="no history file"):
        list_segments(tmp_path, SEG)
    history = "1\t0/10C8000\tpromoted\n"  # timeline 2 begins inside segment first + 3
    (tmp_path / "00000002.history").write_text(history)
    (tmp_path / segment_name(2, first + 3, SEG)).unlink()
    found = list_segments(tmp_path, SEG, None)
    assert found[first][0] == 1  # no history given: list_segments needs one timeline
    paths[1].unlink()
    with pytest.raises(WalError, match="missing"):
        list(read_records(tmp_path, lsns[0]))
    with pytest.raises(WalError, match="not in"):
        list(read_records(tmp_path, 0x5000000))


def test_tail_mode_waits_for_new_segments(tmp_path: Path) -> None:
    """In tail mode the source picks up a segment that appears later, and ends when the
    stop event is set."""
    w, _ = make()
    paths = write_segments(tmp_path, w)
    held = paths[-1].read_bytes()
    paths[-1].unlink()
    stop = threading.Event()
    got: list[int] = []

    def later() -> None:
        paths[-1].write_bytes(held)

    timer = threading.Timer(0.3, later)
    timer.start()
    for lsn, data in iter_wal_chunks(
        tmp_path, w.base, segment_size=SEG, tail=True, stop=stop, poll_interval=0.05
    ):
        got.append(lsn)
        if lsn + len(data) >= w.base + len(paths) * SEG:
            stop.set()
    timer.join()
    assert got[-1] == w.base + (len(paths) - 1) * SEG
    assert (
        list(
            iter_wal_chunks(
                tmp_path,
                w.base + len(paths) * SEG - 1,
                segment_size=SEG,
                tail=True,
                timeout=0.1,
                poll_interval=0.05,
            )
        )[-1:]
        != []
    )


def test_follows_a_timeline_switch_and_skips_the_abandoned_timeline(tmp_path: Path) -> None:
    """A history 1 -> 2 at a switch point S mid-segment: records before S come from
    timeline 1's segments, the rest from timeline 2's (whose first segment repeats
    timeline 1 up to S); timeline 1's own copy of that segment, which goes on past S
    with other records (an abandoned timeline), is never read; every page carries the
    timeline the history assigns it."""
    old = WalWriter(base=0x1000000)
    new = WalWriter(base=0x1000000)
    body = record_body([Block(0, blk=1, data=b"d" * 30)], b"m" * 90)
    shared = [(old.add(10, 0, 100 + i, body), new.add(10, 0, 100 + i, body)) for i in range(500)]
    switch = new.pos  # the end of the last shared record: the switch point
    new.tli = 2
    after = [new.add(10, 0, 9000 + i, body) for i in range(500)]
    abandoned = [old.add(10, 0, 5000 + i, body) for i in range(500)]
    assert [a for a, _ in shared] == [b for _, b in shared] and abandoned[0] == after[0]
    write_segments(tmp_path, old, tli=1)
    switch_seg = switch // SEG
    for p in write_segments(tmp_path, new, tli=2):
        if int(p.name[16:], 16) < switch_seg:
            p.unlink()  # timeline 2 has no files before the segment it forked in
    hist = f"1\t{switch >> 32:X}/{switch & 0xFFFFFFFF:X}\tno recovery target specified\n"
    (tmp_path / "00000002.history").write_text(hist)
    recs = list(read_records(tmp_path, shared[0][0]))
    assert [r.lsn for r in recs] == [a for a, _ in shared] + after
    assert [r.xid for r in recs][-500:] == list(range(9000, 9500))
    # Timeline 2's pages past S carrying timeline 1 (as the abandoned ones do): rejected.
    bad = tmp_path / segment_name(2, switch_seg + 1, SEG)
    bad.write_bytes((tmp_path / segment_name(1, switch_seg + 1, SEG)).read_bytes())
    with pytest.raises(UnexpectedTimelineError) as info:
        list(read_records(tmp_path, shared[0][0]))
    assert info.value.lsn == (switch_seg + 1) * SEG
    assert "timeline ID 1" in str(info.value) and "lsn=" in str(info.value)
