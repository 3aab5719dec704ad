"""The objects the native core builds slot by slot (service/native/src/glue/slots.rs):
RawTuple and HeapChange from the heap parsers, XLogRecord and BlockRef from the walk.
They are ordinary instances of those frozen dataclasses (type, equality, hash, replace,
pickle, frozen, tracked by the cyclic collector), hold exactly one reference to each
field value (none leaked, none missing), and a class the builder cannot fill is refused
with a TypeError when the decoder is made, not met later as a broken object."""

from __future__ import annotations

import dataclasses
import gc
import pickle
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from service.decode import native_heap
from service.decode.dispatch import decoder_for
from service.decode.events import (
    ChangeKind,
    HeapChange,
    InsertRun,
    RawTuple,
)
from service.wal.native import NativeXLogReader

DATA = Path(__file__).resolve().parents[1] / "data"


def _changes() -> list[HeapChange]:
    f = sorted(DATA.glob("wal15_*.bin"))[0]
    lsn = int(f.stem.split("_")[1], 16)
    reader = NativeXLogReader(lsn)
    native_heap.predecode(reader, decoder_for(15).without_decode, runs=True)
    reader.feed(f.read_bytes(), lsn)
    return [
        c for item in reader.decoded_records() if isinstance(item, InsertRun) for c in item.changes
    ]


def test_changes_are_plain_frozen_dataclasses() -> None:
    changes = _changes()
    assert len(changes) > 100
    c = changes[0]
    assert type(c) is HeapChange and type(c.new_tuple) is RawTuple
    with pytest.raises(dataclasses.FrozenInstanceError):
        c.xid = 1  # type: ignore[misc]
    rebuilt = HeapChange(**{f.name: getattr(c, f.name) for f in dataclasses.fields(HeapChange)})
    assert c == rebuilt and hash(c) == hash(rebuilt) and repr(c) == repr(rebuilt)
    assert pickle.loads(pickle.dumps(c)) == c
    assert dataclasses.replace(c, kind=ChangeKind.UPDATE).kind is ChangeKind.UPDATE
    assert gc.is_tracked(c) and gc.is_tracked(c.new_tuple)


def test_each_slot_holds_one_reference() -> None:
    """A field value shared by many changes (their ChangeKind member and locator) gains
    one reference per live change, and loses them all when the changes go."""
    kind = ChangeKind.INSERT
    gc.collect()
    before = sys.getrefcount(kind)
    changes = _changes()
    locator = changes[0].locator
    held = sum(1 for c in changes if c.kind is kind)
    assert sys.getrefcount(kind) == before + held
    loc_refs = sys.getrefcount(locator)
    same_loc = sum(1 for c in changes if c.locator is locator)
    del changes
    gc.collect()
    assert sys.getrefcount(kind) == before
    assert sys.getrefcount(locator) == loc_refs - same_loc


@dataclass(frozen=True)
class _NoSlots:
    natts: int


@dataclass(slots=True, frozen=True)
class _Fewer:
    natts: int
    infomask: int


def test_a_class_it_cannot_fill_is_refused_up_front() -> None:
    assert native_heap.heap_decoder(RawTuple) is not None
    with pytest.raises(TypeError, match="not a slotted class"):
        native_heap.heap_decoder(_NoSlots)
    with pytest.raises(TypeError):
        native_heap.heap_decoder(int)  # not a dataclass at all
    with pytest.raises(TypeError, match="has 2 fields, not the 5"):
        native_heap.heap_decoder(_Fewer)  # slotted, but not RawTuple's five fields
