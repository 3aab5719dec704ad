"""Unit tests of the pg_waldump-style formatter."""

from __future__ import annotations

import dataclasses
import struct

from service.app.waldump import dump, format_event, format_record, lsn_text
from service.decode.dispatch import decode
from service.decode.events import HeapChange
from service.wal.record import RelFileLocator
from tests.service.decode.decode_support import block, heap_tuple, record


def test_insert_line_matches_pg_waldump_layout() -> None:
    """Fixed columns, type name, summary and blkref are laid out as pg_waldump prints them."""
    rec = record(10, 0x00, struct.pack("<HB", 2, 0x08), (block(heap_tuple(b"ab"), blkno=0),))
    rec = dataclasses.replace(rec, total_len=59, lsn=0x0150A3C8, prev=0x0150A390)
    assert format_record(rec, 18) == (
        "rmgr: Heap        len (rec/tot):     59/    59, tx:        735, lsn: 0/0150A3C8, "
        "prev 0/0150A390, desc: INSERT off: 2, flags: 0x08, blkref #0: rel 1663/5/16384 blk 0"
    )


def test_full_page_image_fork_and_unknown_type() -> None:
    """rec_len excludes stored image bytes; non-main forks are named; FPW is marked."""
    ref = dataclasses.replace(
        block(b"", block_id=1, blkno=3, fork=2),
        image=b"\x00" * 8192,
        apply_image=True,
        image_len=100,
    )
    rec = dataclasses.replace(record(11, 0x00, b"\x00" * 4, (ref,)), total_len=180)
    line = format_record(rec, 15)
    assert "len (rec/tot):     80/   180" in line
    assert line.endswith("desc: UNKNOWN (0) , blkref #1: rel 1663/5/16384 fork vm blk 3 FPW")


def test_dump_with_events() -> None:
    """dump(events=True) puts one indented line per decoded event under its record."""
    rec = record(10, 0x00, struct.pack("<HB", 2, 0x08), (block(heap_tuple(b"ab")),))
    lines = list(dump([rec], 15, events=True))
    assert len(lines) == 2 and lines[1].startswith("    HeapChange INSERT lsn: 0/0150A3C8")
    assert "new_tuple: (natts 2, infomask 0x0802, 2 bytes)" in lines[1]
    assert "locator: 1663/5/16384" in lines[1]
    assert lsn_text(0x1_0000_0001) == "1/00000001"
    [ev] = decode(rec, 15)
    assert isinstance(ev, HeapChange)
    moved = dataclasses.replace(ev, locator=RelFileLocator(1, 2, 3))
    assert "locator: 1/2/3" in format_event(moved)
