"""InsertRuns: the native reader armed with runs gathers plain inserts into one item
(`service.decode.events.InsertRun`), and holds to its contract. Every run stands for
exactly the consecutive records the reader armed without runs hands on in its place:
their events are its changes, its first and last LSNs are theirs, each of them may join
a run (a plain, non-toast insert of the run's xid and relation; after it, a single plain
insert of the run's xid on a toast relation, a TOAST chunk, all of a run's chunks in
one relation; each with no top-level xid and no origin; or a record of an rmgr without
rm_decode of that xid or of none, with no top-level xid), and every other item is the
same. On WAL of one slice the runs are
as long as that rule allows. Checked on real PG15/PG18 WAL and on random record
sequences written from its records (other xids, relations, top-level xids, origins,
speculative and toast inserts)."""

from __future__ import annotations

import random
from functools import cache
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from service.decode import native_heap
from service.decode.dispatch import decoder_for
from service.decode.events import ChangeKind, HeapChange, InsertRun, PredecodedRecord
from service.errors import DecodeError
from service.wal.native import NativeXLogReader
from service.wal.record import RelFileLocator, XLogRecord
from tests.service.decode.test_native_heap import blocks_of, golden_records
from tests.service.walwriter import WalWriter, record_body

DATA = Path(__file__).resolve().parents[1] / "data"
_MAGIC = {15: 0xD110, 18: 0xD118}
_INSERTS = {(10, 0x00), (9, 0x50)}  # Heap INSERT, Heap2 MULTI_INSERT


def _items(
    data: bytes, lsn: int, bare: frozenset[int], *, runs: bool, seg: int = 16 << 20
) -> list[object]:
    reader = NativeXLogReader(lsn, segment_size=seg)
    assert native_heap.predecode(reader, bare, runs=runs)
    reader.feed(data, lsn)
    return list(reader.decoded_records())


def _plain_insert(item: object) -> bool:
    """A predecoded insert record that may start or join a run."""
    return (
        isinstance(item, PredecodedRecord)
        and (item.rmid, item.info & 0x70) in _INSERTS
        and item.toplevel_xid is None
        and item.origin is None
        and bool(item.events)
        and all(
            isinstance(e, HeapChange) and e.kind is ChangeKind.INSERT and not e.on_toast_relation
            for e in item.events
        )
    )


def _chunk_insert(item: object) -> RelFileLocator | None:
    """The toast relation of a predecoded TOAST chunk insert that may join a run
    (one plain Heap INSERT on a toast relation), else None."""
    if (
        isinstance(item, PredecodedRecord)
        and (item.rmid, item.info & 0x70) == (10, 0x00)
        and item.toplevel_xid is None
        and item.origin is None
        and len(item.events) == 1
    ):
        e = item.events[0]
        if isinstance(e, HeapChange) and e.kind is ChangeKind.INSERT and e.on_toast_relation:
            return e.locator
    return None


def _joins(
    run: InsertRun, item: object, bare: frozenset[int], toast: RelFileLocator | None
) -> bool:
    """Whether `item` (an item of the reader armed without runs) may join `run`, whose
    chunks so far are in `toast` (None: it has none yet)."""
    if not isinstance(item, PredecodedRecord) or item.toplevel_xid is not None:
        return False
    if item.xid != run.xid and not (item.rmid in bare and item.xid == 0):
        return False
    if item.rmid in bare:
        return True
    chunk = _chunk_insert(item)
    if chunk is not None:
        return toast is None or chunk == toast
    return (
        _plain_insert(item) and item.events[0].locator == run.changes.locator  # type: ignore[attr-defined]
    )


def _check(
    with_runs: list[object], plain: list[object], bare: frozenset[int], *, maximal: bool
) -> list[InsertRun]:
    """The contract above, item by item; the runs."""
    runs: list[InsertRun] = []
    at = 0
    for n, item in enumerate(with_runs):
        if not isinstance(item, InsertRun):
            assert item == plain[at], at
            at += 1
            continue
        part = plain[at : at + item.records]
        assert len(part) == item.records >= 1
        first = part[0]
        assert _plain_insert(first), first
        assert isinstance(first, PredecodedRecord)
        assert item.xid == first.xid
        toast: RelFileLocator | None = None
        for p in part[1:]:
            assert _joins(item, p, bare, toast), p
            toast = toast or _chunk_insert(p)
        events = [e for p in part for e in p.events]  # type: ignore[attr-defined]
        rows = item.changes
        assert list(rows) == events
        assert rows.chunks == sum(e.on_toast_relation for e in events)
        assert (len(rows), rows.lsn, rows.last_lsn) == (len(events), events[0].lsn, events[-1].lsn)
        assert (rows.xid, rows.locator) == (item.xid, events[0].locator)
        assert rows.data_bytes == sum(len(e.new_tuple.data) for e in events)
        assert item.first_lsn == first.lsn
        assert (item.lsn, item.end_lsn) == (part[-1].lsn, part[-1].end_lsn)  # type: ignore[attr-defined]
        if maximal and at + item.records < len(plain):
            assert not _joins(item, plain[at + item.records], bare, toast), n
        runs.append(item)
        at += item.records
    assert at == len(plain)
    return runs


def test_runs_on_golden_wal() -> None:
    """Real PG15/PG18 WAL: the runs hold to the contract, and there are long ones (an
    insert and its index insert, over and over)."""
    longest = 0
    total = 0
    for f in sorted(DATA.glob("wal*_*.bin")):
        lsn = int(f.stem.split("_")[1], 16)  # wal<version>_<lsn hex>.bin
        data = f.read_bytes()
        bare = decoder_for(int(f.stem[3:5])).without_decode
        plain = _items(data, lsn, bare, runs=False)
        runs = _check(_items(data, lsn, bare, runs=True), plain, bare, maximal=False)
        total += len(runs)
        longest = max([longest, *(r.records for r in runs)])
    assert total >= 10
    assert longest >= 200


@cache
def _pool() -> list[tuple[int, XLogRecord]]:
    """(version, record): the golden WAL's inserts, multi-inserts and btree records."""
    return [
        (v, x) for v, x in golden_records() if (x.rmid, x.info & 0x70) in _INSERTS or x.rmid == 11
    ]


@settings(max_examples=200, deadline=None)
@given(seed=st.integers(0, 2**32), version=st.sampled_from([15, 18]))
def test_runs_on_random_sequences(seed: int, version: int) -> None:
    """Up to 120 records drawn from the golden inserts, multi-inserts and btree records,
    with their xid, relation, top-level xid, origin and insert flags (speculative,
    on a toast relation) varied: the runs hold to the contract and are maximal."""
    rng = random.Random(seed)
    pool = [rec for v, rec in _pool() if v == version]
    writer = WalWriter(magic=_MAGIC[version])
    for _ in range(rng.randrange(1, 120)):
        rec = rng.choice(pool)
        main = bytearray(rec.main_data)
        if (rec.rmid, rec.info & 0x70) == (10, 0x00) and len(main) >= 3:
            if rng.random() < 0.05:
                main[2] ^= 1 << 2  # XLH_INSERT_IS_SPECULATIVE
            if rng.random() < 0.2:
                main[2] ^= 1 << 4  # XLH_INSERT_ON_TOAST_RELATION
        xid = (
            rng.choice([700, 700, 700, 701, 0]) if rec.rmid == 11 else rng.choice([700] * 6 + [701])
        )
        rel = rng.choice([None] * 8 + [99_999])
        body = record_body(
            blocks_of(rec, rel),
            bytes(main),
            origin=1 if rng.random() < 0.05 else None,
            toplevel=699 if rng.random() < 0.05 else None,
        )
        writer.add(rec.rmid, rec.info, xid, body)
    data = writer.data()
    bare = decoder_for(version).without_decode
    seg = writer.seg_size
    plain = _items(data, writer.base, bare, runs=False, seg=seg)
    assert len(plain) < 256  # one slice: nothing cuts a run but the rule
    _check(_items(data, writer.base, bare, runs=True, seg=seg), plain, bare, maximal=True)


def test_no_run_holds_a_record_before_runs_from() -> None:
    """`runs_from`: a session starts decoding at an LSN that may fall inside a run
    (inside an insert run of another transaction, e.g. at a checkpoint's redo point;
    in CI once on the index record after a run's last insert, which left that run no
    row at or after it). Cut at every record of a run: each record before the cut
    comes alone, as the reader without runs gives it, and from the cut on the items
    hold to the contract again."""
    f = DATA / "wal18_0000000011E42000.bin"  # a run here ends on index records
    lsn = int(f.stem.split("_")[1], 16)
    data = f.read_bytes()
    bare = decoder_for(18).without_decode
    plain = _items(data, lsn, bare, runs=False)
    run_items = [i for i in _items(data, lsn, bare, runs=True) if isinstance(i, InsertRun)]
    run = next(i for i in run_items if i.lsn > max(c.lsn for c in i.changes))
    inside = [p for p in plain if run.first_lsn < p.lsn <= run.lsn]  # type: ignore[attr-defined]
    assert inside[-1].rmid in bare  # the run ends on an index record (the CI case)
    for cut in [p.lsn for p in inside]:  # type: ignore[attr-defined]
        reader = NativeXLogReader(lsn)
        assert native_heap.predecode(reader, bare, runs=True, runs_from=cut)
        reader.feed(data, lsn)
        items = list(reader.decoded_records())
        before = [i for i in items if i.lsn < cut]  # type: ignore[union-attr]
        assert before == [p for p in plain if p.lsn < cut]  # type: ignore[attr-defined]
        after = items[len(before) :]
        assert all(i.first_lsn >= cut for i in after if isinstance(i, InsertRun))
        _check(after, [p for p in plain if p.lsn >= cut], bare, maximal=False)  # type: ignore[attr-defined]


def test_a_consumer_that_stops_at_a_run_resumes_after_it() -> None:
    """An exception at a run's yield leaves the reader after the whole run: the next
    walk starts with the record that follows it."""
    f = sorted(DATA.glob("wal15_*.bin"))[0]
    lsn = int(f.stem.split("_")[1], 16)
    data = f.read_bytes()
    bare = decoder_for(15).without_decode
    plain = _items(data, lsn, bare, runs=False)
    reader = NativeXLogReader(lsn)
    native_heap.predecode(reader, bare, runs=True)
    reader.feed(data, lsn)
    seen: list[object] = []
    try:
        for item in reader.decoded_records():
            seen.append(item)
            if isinstance(item, InsertRun) and item.records > 2:
                raise LookupError
    except LookupError:
        pass
    stop = seen[-1]
    assert isinstance(stop, InsertRun)
    assert reader.end_lsn == stop.end_lsn
    rest = list(reader.decoded_records())
    after = [p for p in plain if p.lsn > stop.lsn]  # type: ignore[attr-defined]
    assert rest and rest[0].lsn == after[0].lsn  # type: ignore[attr-defined]


def test_toast_chunks_join_the_run_of_their_rows() -> None:
    """TOAST chunk inserts (XLH_INSERT_ON_TOAST_RELATION) of the run's transaction join
    it after its first main-table row, as rows of their own (`chunks`), built as the
    very HeapChanges the unbatched reader gives (toast locator, on_toast_relation);
    a chunk never starts a run, and a chunk of a second toast relation ends it."""
    insert = next(
        x
        for v, x in _pool()
        if v == 15
        and (x.rmid, x.info & 0x70) == (10, 0x00)
        and x.main_data[2] & 0x1C == 1 << 3  # XLH_INSERT_CONTAINS_NEW_TUPLE, no other
    )
    writer = WalWriter(magic=_MAGIC[15])

    def add(rel: int | None, toast: bool) -> None:
        main = bytearray(insert.main_data)
        if toast:
            main[2] |= 1 << 4  # XLH_INSERT_ON_TOAST_RELATION
        writer.add(insert.rmid, insert.info, 700, record_body(blocks_of(insert, rel), bytes(main)))

    add(70_001, True)  # before any row: its own record
    add(None, False)  # the run starts
    for _ in range(3):
        add(70_001, True)
    add(None, False)
    add(70_002, True)  # a second toast relation: the run ends before it
    add(None, False)  # a new run
    data = writer.data()
    bare = decoder_for(15).without_decode
    plain = _items(data, writer.base, bare, runs=False, seg=writer.seg_size)
    items = _items(data, writer.base, bare, runs=True, seg=writer.seg_size)
    runs = _check(items, plain, bare, maximal=True)
    assert [type(i).__name__ for i in items] == [
        "PredecodedRecord",
        "InsertRun",
        "PredecodedRecord",
        "InsertRun",
    ]
    assert [(r.records, r.changes.nrows, r.changes.chunks) for r in runs] == [(5, 5, 3), (1, 1, 0)]
    chunk = runs[0].changes[1]
    assert chunk.on_toast_relation and chunk.locator.rel_number == 70_001
    assert runs[0].changes.window(0, 1).chunks == 0
    assert runs[0].changes.window(1, 4).chunks == 3
    # the dump keeps which rows are chunks; read back, they are the toast relation's
    rows = runs[0].changes.rows
    toast = rows.toast_locator
    assert toast is chunk.locator
    back = native_heap.load_rows(rows.dump(), rows.xid, rows.locator, toast)
    assert back.chunks == 3 and list(back) == list(runs[0].changes)
    with pytest.raises(DecodeError, match="without its toast relation"):
        native_heap.load_rows(rows.dump(), rows.xid, rows.locator)
