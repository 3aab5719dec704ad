"""Damaged real WAL: only typed errors, and never a wrong record (hypothesis)."""

from __future__ import annotations

import struct
from functools import cache
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from service.errors import PgcdcError
from service.wal.reader import XLogReader
from service.wal.record import XLogRecord

DATA = Path(__file__).resolve().parents[1] / "data"
BLCK = 8192


@cache
def fixtures() -> list[tuple[int, bytes, list[XLogRecord]]]:
    """The captured WAL windows (PG15 and PG18) with their undamaged records."""
    out = []
    for f in sorted(DATA.glob("wal*_*.bin")):
        lsn = int(f.stem.split("_")[1], 16)
        data = f.read_bytes()
        r = XLogReader(lsn)
        r.feed(data, lsn)
        out.append((lsn, data, list(r.records())))
    return out


def test_fixtures_are_real_wal_of_both_versions() -> None:
    """The golden windows decode cleanly and cover PG15 and PG18 and compressed images."""
    fx = fixtures()
    assert len(fx) >= 4
    versions = set()
    for lsn, data, recs in fx:
        r = XLogReader(lsn)
        r.feed(data, lsn)
        list(r.records())
        versions.add(r.version)
        assert len(recs) > 100
    assert versions == {15, 18}
    assert any(b.bimg_info & 0x04 for _, _, recs in fx for x in recs for b in x.blocks)


@settings(max_examples=300, deadline=None)
@given(
    which=st.integers(0, 3),
    pick=st.floats(0, 1, exclude_max=True),
    span=st.integers(64, 3 * BLCK),
    kind=st.sampled_from(["flip", "byte", "truncate", "zeropage", "magic", "prev"]),
    where=st.floats(0, 1, exclude_max=True),
    value=st.integers(0, 255),
    chunk=st.integers(1, 5000),
)
def test_mutated_wal_gives_typed_errors_and_a_correct_prefix(
    *,
    which: int,
    pick: float,
    span: int,
    kind: str,
    where: float,
    value: int,
    chunk: int,
) -> None:
    """Bit flips, byte changes, truncation, a zeroed page, a wrong magic or a wrong
    xl_prev, fed in chunks: the reader yields a prefix of the undamaged records and
    then stops or raises a PgcdcError subclass naming an LSN."""
    page_lsn, data, base = fixtures()[which % len(fixtures())]
    i = 1 + int(pick * (len(base) - 2))
    start = base[i].lsn
    ws = (start & ~(BLCK - 1)) - page_lsn
    window = bytearray(data[ws : min(len(data), start - page_lsn + span)])
    n = len(window)
    off = int(where * n)
    if kind == "flip":
        window[off] ^= 1 << (value % 8)
    elif kind == "byte":
        window[off] = value
    elif kind == "truncate":
        del window[off:]
    elif kind == "zeropage":
        p = off - off % BLCK
        window[p : p + BLCK] = bytes(len(window[p : p + BLCK]))
    elif kind == "magic":
        p = off - off % BLCK
        struct.pack_into("<H", window, p, 0xD100 + value)
    else:
        struct.pack_into("<Q", window, start - page_lsn - ws + 8, value * 8)
    r = XLogReader(start, prev_lsn=base[i - 1].lsn)
    got: list[XLogRecord] = []
    try:
        for c in range(0, len(window), chunk):
            r.feed(bytes(window[c : c + chunk]), page_lsn + ws + c)
            got.extend(r.records())
    except PgcdcError as exc:
        assert exc.lsn is not None
    assert got == base[i : i + len(got)]
