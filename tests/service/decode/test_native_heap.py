"""The native heap/heap2 parsers against service.decode.heap (differential): the same
events field for field, or the same DecodeError (class, lsn, message); called per
record, and inside the armed native reader's walk (`predecode`: PredecodedRecords)."""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Callable
from functools import cache
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from service.decode import heap as decode_heap
from service.decode import native_heap as native_decode_heap
from service.decode.dispatch import decoder_for
from service.decode.events import ChangeKind, HeapChange, PredecodedRecord
from service.errors import DecodeError
from service.wal.native import NativeXLogReader
from service.wal.reader import XLogReader
from service.wal.record import XLogRecord
from tests.service.walwriter import Block, WalWriter, record_body

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


def _damaged(rng: random.Random, data: bytes, *, grow: bool) -> bytes:
    """`data` with up to three bytes flipped, then maybe cut, then (`grow`) maybe grown."""
    out = bytearray(data)
    for _ in range(rng.randrange(4)):
        if out:
            out[rng.randrange(len(out))] = rng.randrange(256)
    if rng.random() < 0.3:
        del out[rng.randrange(len(out) + 1) :]
    if grow and rng.random() < 0.2:
        out += rng.randbytes(rng.randrange(40))
    return bytes(out)


@settings(max_examples=400, deadline=None)
@given(seed=st.integers(0, 2**32), pick=st.floats(0, 1, exclude_max=True))
def test_damaged_heap_records(seed: int, pick: float) -> None:
    """Real heap records with damaged main data or block data (flipped, cut, grown,
    block 0 dropped, INIT_PAGE toggled): all seven parsers agree, event or error."""
    rng = random.Random(seed)
    recs = heap_records()
    rec = recs[int(pick * len(recs))]
    main = _damaged(rng, rec.main_data, grow=True)
    blocks = rec.blocks
    if blocks and rng.random() < 0.6:
        data = _damaged(rng, blocks[0].data, grow=False)
        blocks = (dataclasses.replace(blocks[0], data=data), *blocks[1:])
    if blocks and rng.random() < 0.1:
        blocks = blocks[1:]
    info = rec.info ^ (0x80 if rng.random() < 0.2 else 0)
    same(dataclasses.replace(rec, main_data=main, blocks=blocks, info=info))


# --- the armed native reader (predecode): table-change heap records decoded in its walk


def _decoded(reader: NativeXLogReader, data: bytes, lsn: int) -> list[object]:
    reader.feed(data, lsn)
    return list(reader.decoded_records())


def _header(rec: XLogRecord | PredecodedRecord) -> tuple[object, ...]:
    return (
        rec.lsn,
        rec.end_lsn,
        rec.total_len,
        rec.xid,
        rec.info,
        rec.rmid,
        rec.toplevel_xid,
        rec.origin,
    )


def _agree(
    armed: list[object], python: list[XLogRecord], version: int, bare: frozenset[int] = frozenset()
) -> int:
    """The armed reader's items against the Python reader's records decoded by the
    Python decoder: a PredecodedRecord has its record's header fields and exactly the
    events (a table-change heap record, unless its parse fails or it is a catalog's
    write, and it came whole; or a record of a `bare` rmgr, with none); any other item
    equals its record. How many table-change records came predecoded."""
    decode = decoder_for(version).decode
    assert [a.lsn for a in armed] == [p.lsn for p in python]  # type: ignore[attr-defined]
    predecoded = 0
    for item, rec in zip(armed, python, strict=True):
        if isinstance(item, PredecodedRecord):
            assert _header(item) == _header(rec)
            assert item.events == decode(rec), rec.lsn
            if rec.rmid in bare:
                assert item.events == []
            else:
                assert (rec.rmid, rec.info & 0x70) in TABLE_CHANGES, rec
                predecoded += 1
        else:
            assert item == rec
            if (rec.rmid, rec.info & 0x70) in TABLE_CHANGES:
                # the parse failed, or it wrote a tuple logged for redo only (a catalog's)
                got = outcome(decode, rec)
                assert isinstance(got, tuple) or catalog_write(got), rec.lsn
    return predecoded


def catalog_write(events: object) -> bool:
    """An INSERT, UPDATE or MULTI_INSERT of a tuple not logged for logical decoding:
    what the armed reader hands on whole, for the historic pg_class."""
    if events == []:
        return True
    if not isinstance(events, list) or len(events) != 1:
        return False
    (ev,) = events
    return isinstance(ev, HeapChange) and ev.kind is ChangeKind.UPDATE and ev.new_tuple is None


TABLE_CHANGES = {(10, 0x00), (10, 0x10), (10, 0x20), (10, 0x40), (9, 0x50)}


def test_armed_reader_on_golden_wal() -> None:
    """Real PG15/PG18 WAL through the armed native reader: every table-change heap
    record comes predecoded with the Python decoder's events, every record of an rmgr
    without rm_decode with none; all else unchanged."""
    total = 0
    for f in sorted(DATA.glob("wal*_*.bin")):
        lsn = int(f.stem.split("_")[1], 16)
        data = f.read_bytes()
        python = XLogReader(lsn)
        python.feed(data, lsn)
        records = list(python.records())
        assert python.version is not None
        bare = decoder_for(python.version).without_decode  # as a session arms it
        armed = NativeXLogReader(lsn)
        assert native_decode_heap.predecode(armed, bare)
        items = _decoded(armed, data, lsn)
        total += _agree(items, records, python.version, bare)
        bodiless = [i for i in items if isinstance(i, PredecodedRecord) and i.rmid in bare]
        assert len(bodiless) > 10  # btree and the like
        with pytest.raises(RuntimeError):
            armed.records()  # an armed reader's records are decoded_records()
    assert total > 500
    assert not native_decode_heap.predecode(XLogReader(0))  # the Python reader: no


_MAGIC = {15: 0xD110, 18: 0xD118}


@settings(max_examples=300, deadline=None)
@given(seed=st.integers(0, 2**32), pick=st.floats(0, 1, exclude_max=True))
def test_armed_reader_on_damaged_heap_records(seed: int, pick: float) -> None:
    """Real heap records with damaged main or block data (flipped, cut, grown, block 0
    dropped, INIT_PAGE toggled), rewritten as valid WAL: the armed reader's items agree
    with the Python decoder, events or the same error from the whole record."""
    rng = random.Random(seed)
    recs = table_change_records()
    version, rec = recs[int(pick * len(recs))]
    main = _damaged(rng, rec.main_data, grow=True)
    blocks = _undamaged(rec)[0]
    if blocks and rng.random() < 0.6:
        blocks[0].data = _damaged(rng, blocks[0].data, grow=False)
    if blocks and rng.random() < 0.1:
        blocks = blocks[1:]
    info = rec.info ^ (0x80 if rng.random() < 0.2 else 0)
    writer = WalWriter(magic=_MAGIC[version])
    body = record_body(blocks, main, origin=rec.origin, toplevel=rec.toplevel_xid)
    writer.add(rec.rmid, info, rec.xid, body)
    writer.add(rec.rmid, rec.info, rec.xid, record_body(*_undamaged(rec)))
    data = writer.data()
    python = XLogReader(writer.base, segment_size=writer.seg_size)
    python.feed(data, writer.base)
    records = list(python.records())
    armed = NativeXLogReader(writer.base, segment_size=writer.seg_size)
    native_decode_heap.predecode(armed)
    assert _agree(_decoded(armed, data, writer.base), records, version) >= 1


def _undamaged(rec: XLogRecord) -> tuple[list[Block], bytes]:
    """`rec`'s block references (their data; no images) and main data, to write again."""
    return blocks_of(rec), rec.main_data


def blocks_of(rec: XLogRecord, rel_number: int | None = None) -> list[Block]:
    """`rec`'s block references (their data; no images), to write again; on relation
    `rel_number` of the same tablespace and database, if given."""
    return [
        Block(
            b.block_id,
            rel=(
                b.locator.spc_oid,
                b.locator.db_oid,
                b.locator.rel_number if rel_number is None else rel_number,
            ),
            fork=b.fork,
            blk=b.block,
            data=b.data,
        )
        for b in rec.blocks
    ]


@cache
def golden_records() -> list[tuple[int, XLogRecord]]:
    """(version, record) for every record of the golden PG15/PG18 windows."""
    out: list[tuple[int, XLogRecord]] = []
    for f in sorted(DATA.glob("wal*_*.bin")):
        lsn = int(f.stem.split("_")[1], 16)
        r = XLogReader(lsn)
        r.feed(f.read_bytes(), lsn)
        version = int(f.stem[3:5])
        out.extend((version, x) for x in r.records())
    return out


@cache
def table_change_records() -> list[tuple[int, XLogRecord]]:
    """(version, record) for every golden table-change heap record of a user table (a
    catalog's writes come whole: `catalog_write`)."""
    return [
        (v, x)
        for v, x in golden_records()
        if (x.rmid, x.info & 0x70) in TABLE_CHANGES
        and not catalog_write(outcome(decoder_for(v).decode, x))
    ]
