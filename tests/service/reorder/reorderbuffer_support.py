"""Test doubles and builders for the reorder-buffer tests (pure logic, no services)."""

from __future__ import annotations

import struct
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from service.decode.events import (
    ChangeKind,
    HeapChange,
    InsertRows,
    MessageEvent,
    RawTuple,
    TruncateEvent,
)
from service.reorder.buffer import ReorderBuffer, ReorderBufferSettings, ReorderBufferTXN
from service.reorder.changes import EMPTY_TOAST, ReplayChange, one_by_one
from service.reorder.spill import LocalSpillStore
from service.wal.record import RelFileLocator

MAIN = RelFileLocator(1663, 5, 16384)
TOAST = RelFileLocator(1663, 5, 16390)


def toast_of(locator: RelFileLocator) -> bool:
    """The toast relations of the test schema."""
    return locator == TOAST


class ListRows:
    """The native core's HeapRows interface over a list of HeapChanges (plain inserts of
    one xid into one relation), for the pure reorder-buffer tests: what `InsertRows`
    wraps. tests/service/decode/test_heap_rows.py holds the native HeapRows to the
    same semantics (`fill` included) on real WAL.

    It has no `dump`: the spill store writes its InsertRows row by row (one tag-1
    record per row), so these tests hold that path; the one-record path (tag 2) needs
    the native HeapRows and is tested on real WAL in test_spill_rows.py."""

    def __init__(self, changes: list[HeapChange]) -> None:
        assert changes and all(c.kind is ChangeKind.INSERT for c in changes)
        self._changes = changes
        self.xid = changes[0].xid
        self.locator = changes[0].locator
        self.first_lsn = changes[0].lsn
        self.last_lsn = changes[-1].lsn
        self.data_bytes = sum(len(c.new_tuple.data) for c in changes)  # type: ignore[union-attr]
        self.chunks = sum(c.on_toast_relation for c in changes)
        self.kind = int(ChangeKind.INSERT)
        self.olds = 0
        self.bares = 0

    @property
    def head(self) -> tuple[int, int, int, int, RelFileLocator, int, int, int, int, int]:
        """As the native HeapRows.head: what InsertRows keeps, in one call."""
        return (
            self.kind,
            self.first_lsn,
            self.last_lsn,
            self.xid,
            self.locator,
            len(self._changes),
            self.data_bytes,
            self.chunks,
            self.olds,
            self.bares,
        )

    def __len__(self) -> int:
        return len(self._changes)

    def change(self, i: int) -> HeapChange:
        return self._changes[i]

    def changes(self) -> list[HeapChange]:
        return list(self._changes)

    def lsns(self) -> list[int]:
        return [c.lsn for c in self._changes]

    def slice(self, i: int, j: int) -> ListRows:
        return ListRows(self._changes[i:j])

    def fill(
        self, at: int, room: int, base: int, overhead: int, old_base: int = 0
    ) -> tuple[int, int]:
        end, added = at, 0
        while end < len(self._changes):
            added += base + len(self._changes[end].new_tuple.data)  # type: ignore[union-attr]
            end += 1
            if added + (end - at) * overhead >= room:
                break
        return end, added


def insert_rows(changes: list[HeapChange]) -> InsertRows:
    """`changes` as the InsertRows an InsertRun would carry."""
    return InsertRows(ListRows(changes))  # type: ignore[arg-type]


def tup(data: bytes) -> RawTuple:
    """A one-column tuple with no nulls (hoff 24: one pad byte after t_bits' offset)."""
    return RawTuple(natts=1, infomask=0, infomask2=1, hoff=24, data=b"\x00" + data)


def heap(
    xid: int,
    lsn: int,
    kind: ChangeKind = ChangeKind.INSERT,
    data: bytes = b"row",
    *,
    locator: RelFileLocator = MAIN,
    clear: bool = True,
) -> HeapChange:
    """A heap change on the main table (or `locator`)."""
    new = (
        tup(data)
        if kind in (ChangeKind.INSERT, ChangeKind.UPDATE, ChangeKind.SPEC_INSERT)
        else None
    )
    old = tup(data) if kind is ChangeKind.DELETE else None
    return HeapChange(
        lsn=lsn,
        xid=xid,
        kind=kind,
        locator=locator,
        block=0,
        offset=1,
        new_tuple=new,
        old_tuple=old,
        old_is_key=kind is ChangeKind.DELETE,
        clear_toast_afterwards=clear,
    )


def toast_tuple(chunk_id: int, seq: int, payload: bytes, short: bool = False) -> RawTuple:
    """A toast-table tuple (chunk_id, chunk_seq, chunk_data) with a 1- or 4-byte varlena."""
    if short:
        assert len(payload) + 1 < 128
        varlena = bytes([((len(payload) + 1) << 1) | 1]) + payload
    else:
        varlena = struct.pack("<I", (len(payload) + 4) << 2) + payload
    return RawTuple(
        natts=3,
        infomask=0,
        infomask2=3,
        hoff=24,
        data=b"\x00" + struct.pack("<Ii", chunk_id, seq) + varlena,
    )


def toast_insert(xid: int, lsn: int, chunk_id: int, seq: int, payload: bytes) -> HeapChange:
    """An INSERT of one toast chunk, flagged as the decoder flags it."""
    return HeapChange(
        lsn=lsn,
        xid=xid,
        kind=ChangeKind.INSERT,
        locator=TOAST,
        block=0,
        offset=1,
        new_tuple=toast_tuple(chunk_id, seq, payload, short=seq % 2 == 1 and len(payload) < 100),
        old_tuple=None,
        old_is_key=False,
        on_toast_relation=True,
    )


def message(xid: int, lsn: int, payload: bytes = b"m", transactional: bool = True) -> MessageEvent:
    return MessageEvent(
        lsn=lsn, xid=xid, db_oid=5, transactional=transactional, prefix="p", payload=payload
    )


def truncate(xid: int, lsn: int) -> TruncateEvent:
    return TruncateEvent(
        lsn=lsn, xid=xid, db_oid=5, relids=(16384,), cascade=False, restart_seqs=False
    )


@dataclass
class RecordingSink:
    """A ReplaySink that records every callback as a tuple."""

    can_stream: bool = False
    decode_at_prepare: bool = False
    log: list[tuple[Any, ...]] = field(default_factory=list)
    runs: list[int] = field(default_factory=list)  # the length of each `changes` run

    def begin(self, txn: ReorderBufferTXN) -> None:
        self.log.append(("begin", txn.xid))

    def change(self, txn: ReorderBufferTXN, change: ReplayChange) -> None:
        self.log.append(("change", txn.xid, change.event, dict(change.toast)))

    def changes(self, txn: ReorderBufferTXN, changes: list[HeapChange]) -> None:
        assert changes, "an empty run"
        self.runs.append(len(changes))
        for c in changes:
            self.change(txn, ReplayChange(c, EMPTY_TOAST))

    def truncate(self, txn: ReorderBufferTXN, change: ReplayChange) -> None:
        self.log.append(("truncate", txn.xid, change.event))

    def message(self, txn: ReorderBufferTXN | None, change: ReplayChange) -> None:
        self.log.append(("message", txn.xid if txn else None, change.event))

    def internal(self, txn: ReorderBufferTXN, change: ReplayChange) -> None:
        self.log.append(("internal", txn.xid, change.event))

    def commit(self, txn: ReorderBufferTXN, commit_lsn: int) -> None:
        self.log.append(("commit", txn.xid, commit_lsn))

    def stream_start(self, txn: ReorderBufferTXN, first_lsn: int) -> None:
        self.log.append(("stream_start", txn.xid, first_lsn))

    def stream_change(self, txn: ReorderBufferTXN, change: ReplayChange) -> None:
        self.log.append(("stream_change", txn.xid, change.event, dict(change.toast)))

    def stream_truncate(self, txn: ReorderBufferTXN, change: ReplayChange) -> None:
        self.log.append(("stream_truncate", txn.xid, change.event))

    def stream_message(self, txn: ReorderBufferTXN, change: ReplayChange) -> None:
        self.log.append(("stream_message", txn.xid, change.event))

    def stream_stop(self, txn: ReorderBufferTXN, last_lsn: int) -> None:
        self.log.append(("stream_stop", txn.xid, last_lsn))

    def stream_abort(self, txn: ReorderBufferTXN, abort_lsn: int, subxid: int | None) -> None:
        self.log.append(("stream_abort", txn.xid, abort_lsn, subxid))

    def stream_commit(self, txn: ReorderBufferTXN, commit_lsn: int) -> None:
        self.log.append(("stream_commit", txn.xid, commit_lsn))

    def stream_prepare(self, txn: ReorderBufferTXN, prepare_lsn: int) -> None:
        self.log.append(("stream_prepare", txn.xid, prepare_lsn))

    def begin_prepare(self, txn: ReorderBufferTXN) -> None:
        self.log.append(("begin_prepare", txn.xid))

    def prepare(self, txn: ReorderBufferTXN, prepare_lsn: int) -> None:
        self.log.append(("prepare", txn.xid, prepare_lsn))

    def commit_prepared(self, txn: ReorderBufferTXN, commit_lsn: int) -> None:
        self.log.append(("commit_prepared", txn.xid, commit_lsn))

    def rollback_prepared(self, txn: ReorderBufferTXN, end_lsn: int, prepare_time: int) -> None:
        self.log.append(("rollback_prepared", txn.xid, end_lsn, prepare_time))

    def names(self) -> list[str]:
        return [entry[0] for entry in self.log]


class CountingStore(LocalSpillStore):
    """A LocalSpillStore that records each write for the oracle: `writes` holds (xid,
    the changes written, each InsertRows spelled out as its rows), `entries` the
    entries as handed over, `records` how many records each write made."""

    def __init__(self, directory: Path) -> None:
        super().__init__(directory)
        self.writes: list[tuple[int, list[object]]] = []
        self.entries: list[tuple[int, list[object]]] = []
        self.records: list[int] = []

    def write(self, xid: int, changes: Iterable[object]) -> int:
        batch = list(changes)
        self.writes.append((xid, list(one_by_one(batch))))  # type: ignore[arg-type]
        self.entries.append((xid, batch))
        written = super().write(xid, batch)
        self.records.append(written)
        return written

    def read(self, xid: int, count: int) -> Iterator[object]:
        return super().read(xid, count)


def make_buffer(
    tmp_path: Path,
    *,
    work_mem: int = 1 << 30,
    restore_batch: int = 4096,
    can_stream: bool = False,
    decode_at_prepare: bool = False,
    consistent: bool = True,
    change_overhead: int = 0,
) -> tuple[ReorderBuffer, RecordingSink, CountingStore]:
    """A buffer over a recording sink and a counting store in tmp_path/spill."""
    sink = RecordingSink(can_stream=can_stream, decode_at_prepare=decode_at_prepare)
    store = CountingStore(tmp_path / "spill")
    rb = ReorderBuffer(
        ReorderBufferSettings(
            work_mem=work_mem, restore_batch=restore_batch, change_overhead=change_overhead
        ),
        sink,
        store,
        toast_of,
    )
    rb.consistent = consistent
    return rb, sink, store
