"""Heap decoding builds HeapChange / RawTuple through construction twins: the events
must be indistinguishable from dataclass-built ones (type, immutability, equality,
hash, pickling), for every heap path that uses them."""

from __future__ import annotations

import dataclasses
import pickle
import struct

import pytest

from service.decode.dispatch import decode
from service.decode.events import HeapChange, RawTuple
from tests.service.decode.decode_support import block, heap_tuple, record

HEAP, HEAP2 = 10, 9


def _rebuilt(ev: HeapChange) -> HeapChange:
    """The same event built by the dataclass constructors."""

    def tup(t: RawTuple | None) -> RawTuple | None:
        if t is None:
            return None
        return RawTuple(**{f.name: getattr(t, f.name) for f in dataclasses.fields(RawTuple)})

    kw = {f.name: getattr(ev, f.name) for f in dataclasses.fields(HeapChange)}
    kw["new_tuple"] = tup(ev.new_tuple)
    kw["old_tuple"] = tup(ev.old_tuple)
    return HeapChange(**kw)


def _update_main(flags: int, old: bytes = b"") -> bytes:
    return struct.pack("<IHBBIH", 735, 4, 0, flags, 0, 9) + old


def _multi_block(tuples: list[bytes]) -> bytes:
    out = b""
    for t in tuples:
        out += b"\0" * (len(out) & 1) + struct.pack("<HHHB", len(t), 3, 0x0800, 24) + t
    return out


CASES = {
    "insert": record(HEAP, 0x00, struct.pack("<HB", 2, 0x08), (block(heap_tuple(b"abcd")),)),
    "update_old_tuple": record(
        HEAP, 0x20, _update_main(0x10 | 0x04, heap_tuple(b"old")[:]), (block(heap_tuple(b"n")),)
    ),
    "delete_old_key": record(
        HEAP, 0x10, struct.pack("<IHBB", 735, 3, 0, 0x04) + heap_tuple(b"k"), (block(),)
    ),
    "multi_insert": record(
        HEAP2,
        0x50,
        struct.pack("<BxH", 0x08 | 0x02, 2) + struct.pack("<2H", 5, 6),
        (block(_multi_block([b"abc", b"de"])),),
    ),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_heap_events_are_real_frozen_dataclasses(case: str) -> None:
    """Each event is exactly a HeapChange (tuples exactly RawTuple), frozen, equal and
    hash-equal to its dataclass-built twin, and survives pickling."""
    evs = decode(CASES[case], 15)
    assert evs
    for ev in evs:
        assert type(ev) is HeapChange
        for t in (ev.new_tuple, ev.old_tuple):
            assert t is None or type(t) is RawTuple
        with pytest.raises(dataclasses.FrozenInstanceError):
            ev.xid = 1  # type: ignore[misc]
        same = _rebuilt(ev)
        assert ev == same and hash(ev) == hash(same)
        assert pickle.loads(pickle.dumps(ev)) == ev
