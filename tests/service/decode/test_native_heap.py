"""The native heap/heap2 parsers against service.decode.heap (differential): the same
events field for field, or the same DecodeError (class, lsn, message)."""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Callable
from functools import cache
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from service.decode import heap as decode_heap
from service.decode import native_heap as native_decode_heap
from service.errors import DecodeError
from service.wal.reader import XLogReader
from service.wal.record import XLogRecord

DATA = Path(__file__).resolve().parents[1] / "data"
OPS = ("insert", "update", "delete", "confirm", "truncate", "multi_insert", "new_cid")
PAIRS: list[tuple[Callable[[XLogRecord], object], Callable[[XLogRecord], object]]] = [
    (getattr(decode_heap, f"decode_{op}"), getattr(native_decode_heap, f"decode_{op}"))
    for op in OPS
]


@cache
def heap_records() -> list[XLogRecord]:
    """Every Heap (10) and Heap2 (9) record of the golden PG15/PG18 windows."""
    out: list[XLogRecord] = []
    for f in sorted(DATA.glob("wal*_*.bin")):
        lsn = int(f.stem.split("_")[1], 16)
        r = XLogReader(lsn)
        r.feed(f.read_bytes(), lsn)
        out.extend(x for x in r.records() if x.rmid in (9, 10))
    return out


def outcome(fn: Callable[[XLogRecord], object], rec: XLogRecord) -> object:
    """What a parser gives: its events, or its DecodeError as (class, lsn, text)."""
    try:
        return fn(rec)
    except DecodeError as exc:
        return (type(exc).__name__, exc.lsn, str(exc))


def same(rec: XLogRecord) -> None:
    """Every parser, Python and native, on one record (right op or not): equal."""
    for py, native in PAIRS:
        assert outcome(native, rec) == outcome(py, rec), (py.__name__, rec.lsn)


def test_golden_heap_records() -> None:
    """All heap and heap2 records of real PG15/PG18 WAL through all seven parsers:
    equal events where the op fits, equal DecodeErrors where it does not."""
    recs = heap_records()
    assert len(recs) > 500
    decoded = 0
    for rec in recs:
        same(rec)
        decoded += isinstance(outcome(decode_heap.decode_insert, rec), list)
    assert decoded > 100


@settings(max_examples=400, deadline=None)
@given(seed=st.integers(0, 2**32), pick=st.floats(0, 1, exclude_max=True))
def test_damaged_heap_records(seed: int, pick: float) -> None:
    """Real heap records with damaged main data or block data (flipped, cut, grown,
    block 0 dropped, INIT_PAGE toggled): all seven parsers agree, event or error."""
    rng = random.Random(seed)
    recs = heap_records()
    rec = recs[int(pick * len(recs))]
    main = bytearray(rec.main_data)
    for _ in range(rng.randrange(4)):
        if main:
            main[rng.randrange(len(main))] = rng.randrange(256)
    if rng.random() < 0.3:
        del main[rng.randrange(len(main) + 1) :]
    if rng.random() < 0.2:
        main += rng.randbytes(rng.randrange(40))
    blocks = rec.blocks
    if blocks and rng.random() < 0.6:
        data = bytearray(blocks[0].data)
        for _ in range(rng.randrange(4)):
            if data:
                data[rng.randrange(len(data))] = rng.randrange(256)
        if rng.random() < 0.3:
            del data[rng.randrange(len(data) + 1) :]
        blocks = (dataclasses.replace(blocks[0], data=bytes(data)), *blocks[1:])
    if blocks and rng.random() < 0.1:
        blocks = blocks[1:]
    info = rec.info ^ (0x80 if rng.random() < 0.2 else 0)
    same(dataclasses.replace(rec, main_data=bytes(main), blocks=blocks, info=info))
