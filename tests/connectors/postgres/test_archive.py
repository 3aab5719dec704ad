"""Directory WAL source on synthetic segment files."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from connectors.postgres.archive import iter_wal_chunks, list_segments, read_records, segment_name
from service.errors import WalError
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
    (tmp_path / "00000002.history").write_text("1\t0/1000000\tno reason\n")
    (tmp_path / (segment_name(1, 0x1000000 // SEG + 1, SEG) + ".partial")).write_bytes(b"x")
    recs = list(read_records(tmp_path, lsns[0]))
    assert [r.lsn for r in recs] == lsns
    mid = list(read_records(tmp_path, lsns[700], lsns[900]))
    assert [r.lsn for r in mid] == lsns[700:900]


def test_highest_timeline_wins_and_missing_segment_is_an_error(tmp_path: Path) -> None:
    """Of two files for one segment the higher timeline is used; a hole is a WalError."""
    w, lsns = make()
    paths = write_segments(tmp_path, w)
    assert list_segments(tmp_path, SEG)[0x1000000 // SEG][0] == 1
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
