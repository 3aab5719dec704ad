"""XLog reader: the walk over runs of records that lie inside one page.

Most records lie wholly inside a page that is already validated; the native reader
walks those in a tight loop. These tests pin what any walk must do there: every record
is handed over once, in order, a caller that stops early resumes at the next record,
damage inside a run of in-page records is caught at the right LSN with exactly the
records before it handed over, and records are plain frozen dataclasses.
"""

from __future__ import annotations

import dataclasses
import gc
import pickle
import struct
import sys

import google_crc32c
import pytest
from hypothesis import given
from hypothesis import strategies as st

from service.errors import WalCorruptionError
from service.wal.format import XLOG_BLCKSZ
from service.wal.reader import HeaderTuple, XLogReader
from service.wal.record import BlockRef, XLogRecord
from tests.service.walwriter import Block, WalWriter, record_body

SEG = 64 * 1024


def _stream(n: int = 400) -> tuple[WalWriter, list[int]]:
    """Small records of varying length over several pages and one segment boundary."""
    w = WalWriter()
    lsns = [
        w.add(10, 0x00, 700 + i, record_body([Block(0, blk=i, data=b"d" * (i % 13))], b"m" * i))
        for i in range(n)
    ]
    return w, lsns


def _reader(w: WalWriter, data: bytes | None = None) -> XLogReader:
    r = XLogReader(w.base, segment_size=w.seg_size)
    r.feed(w.data() if data is None else data, w.base)
    return r


@given(st.integers(min_value=0, max_value=399))
def test_walk_headers_stop_early_and_resume(stop: int) -> None:
    """A caller that stops walk_headers after any record, mid-page or not, finds the
    reader positioned right after it, and the next walk continues with the next one."""
    w, lsns = _stream()
    r = _reader(w)
    first: list[HeaderTuple] = []
    for h in r.walk_headers():
        first.append(h)
        if len(first) == stop + 1:
            break
    assert [h[0] for h in first] == lsns[: stop + 1]
    assert r.last_lsn == lsns[stop]
    rest = list(r.walk_headers())
    assert [h[0] for h in rest] == lsns[stop + 1 :]
    assert r.end_of_wal


@given(st.integers(min_value=0, max_value=399))
def test_records_stop_early_and_resume(stop: int) -> None:
    """The same for records(): the end_lsn of the last record taken is where the
    reader continues."""
    w, lsns = _stream()
    r = _reader(w)
    taken = []
    for rec in r.records():
        taken.append(rec)
        if len(taken) == stop + 1:
            break
    assert r.next_lsn == taken[-1].end_lsn
    rest = list(r.records())
    assert [x.lsn for x in taken + rest] == lsns


@pytest.mark.parametrize("where", ["body", "crc", "tot_len_low_bit", "xid", "info"])
@pytest.mark.parametrize("victim", [1, 37, 150, 399])
def test_damage_inside_an_in_page_run(where: str, victim: int) -> None:
    """A flipped bit anywhere in one in-page record (body, xl_crc, header fields) is a
    WalCorruptionError at that record, after exactly the records before it, for both
    walk_headers and records()."""
    w, lsns = _stream()
    data = bytearray(w.data())
    off = lsns[victim] - w.base
    at = {"body": 30, "crc": 21, "tot_len_low_bit": 0, "xid": 5, "info": 16}[where]
    if where == "body":
        at = 24 + (lsns[victim] + 30) % 7  # within the shortest body
    assert (lsns[victim] % XLOG_BLCKSZ) + at < XLOG_BLCKSZ
    data[off + at] ^= 0x01
    for walk in ("walk_headers", "records"):
        r = _reader(w, bytes(data))
        got: list[int] = []
        with pytest.raises(WalCorruptionError) as exc:
            for item in getattr(r, walk)():
                got.append(item[0] if isinstance(item, tuple) else item.lsn)
        assert exc.value.lsn == lsns[victim], (walk, where)
        assert got == lsns[:victim], (walk, where)
        assert r.next_lsn == lsns[victim]


@given(st.lists(st.integers(min_value=1, max_value=9000), min_size=1, max_size=25))
def test_walk_headers_any_chunking(cuts: list[int]) -> None:
    """walk_headers over arbitrary chunks (cut anywhere, so the fed end falls inside
    pages and records) yields exactly what one feed yields."""
    w, _ = _stream()
    data = w.data()
    whole = list(_reader(w).walk_headers())
    r = XLogReader(w.base, segment_size=SEG)
    out: list[HeaderTuple] = []
    pos = 0
    for c in [*cuts, len(data)]:
        r.feed(data[pos : pos + c], w.base + pos)
        pos += c
        out.extend(r.walk_headers())
        if pos >= len(data):
            break
    assert out == whole


def test_records_are_real_frozen_dataclasses() -> None:
    """Records and block refs (on the native reader built slot by slot in Rust,
    service/native/src/glue/slots.rs) are plain XLogRecord / BlockRef instances: same
    type, frozen, equal and hash-equal to the dataclass-built value, picklable, and
    tracked by the cyclic collector as any instance."""
    w, _ = _stream(3)
    rec = list(_reader(w).records())[2]
    assert type(rec) is XLogRecord and type(rec.blocks[0]) is BlockRef
    with pytest.raises(dataclasses.FrozenInstanceError):
        rec.xid = 1  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        rec.blocks[0].block = 1  # type: ignore[misc]
    fields = {f.name: getattr(rec, f.name) for f in dataclasses.fields(XLogRecord)}
    fields["blocks"] = tuple(
        BlockRef(**{f.name: getattr(b, f.name) for f in dataclasses.fields(BlockRef)})
        for b in rec.blocks
    )
    same = XLogRecord(**fields)
    assert rec == same and hash(rec) == hash(same)
    assert pickle.loads(pickle.dumps(rec)) == rec
    assert dataclasses.replace(rec, xid=5).xid == 5
    assert gc.is_tracked(rec) and gc.is_tracked(rec.blocks[0])
    assert sys.getrefcount(rec.main_data) >= 2  # the slot holds its own reference


def test_one_block_record_with_wrong_data_length_is_refused() -> None:
    """A one-block record (the commonest shape) whose data length does not match its
    tot_len is refused at its LSN, even with a correct CRC."""
    w = WalWriter()
    w.add(10, 0x00, 1, record_body([Block(0, blk=1, data=b"d" * 20)], b"m" * 10))
    lsn = w.add(10, 0x00, 2, record_body([Block(0, blk=2, data=b"d" * 20)], b"m" * 10))
    w.add(10, 0x00, 3, record_body([Block(0, blk=3, data=b"d" * 20)], b"m" * 10))
    data = bytearray(w.data())
    off = lsn - w.base
    data[off + 24 + 2] += 1  # data_length one more than present
    crc_input = bytes(data[off + 24 : off + 24 + 20 + 22 + 10]) + bytes(data[off : off + 20])
    struct.pack_into("<I", data, off + 20, google_crc32c.value(crc_input))
    r = _reader(w, bytes(data))
    with pytest.raises(WalCorruptionError) as exc:
        list(r.records())
    assert exc.value.lsn == lsn
