"""InsertRuns: the native reader armed with runs gathers plain inserts (or updates that
log only their new tuple, or deletes that log only their old tuple or key) into one
item (`service.decode.events.InsertRun`), and holds to its contract. Every run stands
for exactly the consecutive records the reader armed without runs hands on in its
place: their events are its changes, its first and last LSNs are theirs, each of them
may join a run (a record of the run's xid and relation whose changes are of the run's
kind: plain, non-toast inserts, or one such update, or one such delete; after an insert
or update run's first row, a single plain insert of the run's xid on a toast relation,
a TOAST chunk, all of a run's chunks in one relation; after a delete or
update run's first row, a delete of the run's xid that logged no old tuple (a bare
delete: a toast relation's chunk delete, or a table's without a replica identity) of
one other relation of the run's database, its chunks' if it has any; each with no
top-level xid and no origin;
or a record of an rmgr without rm_decode of that xid or of none, with no top-level
xid), and every other item is the same. On WAL of one slice the runs are as long as
that rule allows. Checked on real PG15/PG18 WAL and on random record sequences written
from its records (other xids, relations, top-level xids, origins, speculative and toast
inserts, updates, and deletes with an old key, a whole old tuple, none, or a
speculative insertion's super-delete)."""

from __future__ import annotations

import random
import struct
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
from tests.service.walwriter import Block, WalWriter, record_body

DATA = Path(__file__).resolve().parents[1] / "data"
_MAGIC = {15: 0xD110, 18: 0xD118}
_INSERTS = {(10, 0x00), (9, 0x50)}  # Heap INSERT, Heap2 MULTI_INSERT
_UPDATES = {(10, 0x20), (10, 0x40)}  # Heap UPDATE, HOT_UPDATE
_DELETE = (10, 0x10)
# xl_heap_delete.flags a synthesized delete gets: XLH_DELETE_CONTAINS_OLD_KEY,
# XLH_DELETE_CONTAINS_OLD_TUPLE (REPLICA IDENTITY FULL), none (NOTHING: no old tuple),
# XLH_DELETE_IS_SUPER (a speculative insertion withdrawn).
_DELETE_FLAGS = (0x04, 0x04, 0x02, 0x00, 0x08)


def _inert(bare: frozenset[int]) -> frozenset[tuple[int, int]]:
    """The version's XLOG, Heap and Heap2 record types the decoder does nothing with (the
    version told by its `bare` set, which is the same object per version)."""
    return next(d.inert_ops for d in map(decoder_for, (15, 16, 17, 18)) if d.without_decode == bare)


def _is_inert(item: XLogRecord, bare: frozenset[int]) -> bool:
    mask = 0xF0 if item.rmid == 0 else 0x70  # XLOG's op mask, Heap's and Heap2's
    return item.rmid in (0, 9, 10) and (item.rmid, item.info & mask) in _inert(bare)


def _items(
    data: bytes,
    lsn: int,
    bare: frozenset[int],
    *,
    runs: bool,
    seg: int = 16 << 20,
    inert: bool = True,
) -> list[object]:
    """What the armed reader hands on for `data` (with `inert`, armed as a session arms
    it, the inert records allowed inside runs)."""
    reader = NativeXLogReader(lsn, segment_size=seg)
    ops = _inert(bare) if inert else frozenset()
    assert native_heap.predecode(reader, bare, runs=runs, inert_ops=ops)
    reader.feed(data, lsn)
    return list(reader.decoded_records())


def _run_kind(item: object) -> tuple[ChangeKind, bool] | None:
    """The kind of run a predecoded record may start or join (inserts of a multi-insert
    too), and whether its update logged an old tuple or key; None if it may be in none
    but as a chunk."""
    if (
        not isinstance(item, PredecodedRecord)
        or item.toplevel_xid is not None
        or item.origin is not None
        or not item.events
    ):
        return None
    op = (item.rmid, item.info & 0x70)
    events = item.events
    if not all(isinstance(e, HeapChange) and not e.on_toast_relation for e in events):
        return None
    if op in _INSERTS and all(
        e.kind is ChangeKind.INSERT and e.old_tuple is None
        for e in events  # type: ignore[union-attr]
    ):
        return ChangeKind.INSERT, False
    if len(events) != 1:
        return None
    e = events[0]
    assert isinstance(e, HeapChange)
    if op in _UPDATES and e.kind is ChangeKind.UPDATE and e.new_tuple is not None:
        return ChangeKind.UPDATE, e.old_tuple is not None
    delete = e.kind is ChangeKind.DELETE and e.new_tuple is None and e.old_tuple is not None
    if op == _DELETE and delete:
        return ChangeKind.DELETE, False
    return None


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


def _no_old_delete(item: object) -> RelFileLocator | None:
    """The relation of a predecoded DELETE that logged no old tuple (a bare delete: a
    toast relation's chunk delete, or a row of a table without a replica identity) that
    may join a delete run, else None."""
    if (
        isinstance(item, PredecodedRecord)
        and (item.rmid, item.info & 0x70) == _DELETE
        and item.toplevel_xid is None
        and item.origin is None
        and len(item.events) == 1
    ):
        e = item.events[0]
        if (
            isinstance(e, HeapChange)
            and e.kind is ChangeKind.DELETE
            and e.new_tuple is None
            and e.old_tuple is None
            and not e.on_toast_relation
        ):
            return e.locator
    return None


def _joins(
    run: InsertRun, item: object, bare: frozenset[int], toast: RelFileLocator | None
) -> bool:
    """Whether `item` (an item of the reader armed without runs) may join `run`, whose
    chunks so far are in `toast` (None: it has none yet)."""
    if not isinstance(item, PredecodedRecord | XLogRecord) or item.toplevel_xid is not None:
        return False
    if type(item) is XLogRecord and not _is_inert(item, bare):
        return False
    inert = type(item) is XLogRecord and _is_inert(item, bare)
    if item.xid != run.xid and not ((item.rmid in bare or inert) and item.xid == 0):
        return False
    if item.rmid in bare or inert:
        return True
    kind = run.changes.kind
    chunk = _chunk_insert(item)
    if chunk is not None:  # an insert or update run's, all into one relation
        return kind in (ChangeKind.INSERT, ChangeKind.UPDATE) and (toast is None or chunk == toast)
    gone = _no_old_delete(item)
    if gone is not None:  # one other relation of the run's database, after its first row
        main = run.changes.locator
        return (
            kind in (ChangeKind.DELETE, ChangeKind.UPDATE)
            and gone != main
            and gone.db_oid == main.db_oid
            and (toast is None or gone == toast)
        )
    return (
        _run_kind(item) == (kind, bool(run.changes.olds))
        and item.events[0].locator == run.changes.locator  # type: ignore[attr-defined]
    )


def _outside_run(item: object, bare: frozenset[int], inert: bool) -> object:
    """What the reader armed with runs hands on for `item` (an item of the reader armed
    without them) outside a run: with `inert` (armed with the inert records), an inert
    record as a bare rmgr's, with no events and its header fields (the driver
    registers its xid and nothing else); any other the same."""
    if inert and type(item) is XLogRecord and _is_inert(item, bare):
        return PredecodedRecord(
            item.lsn,
            item.end_lsn,
            item.total_len,
            item.xid,
            item.info,
            item.rmid,
            item.toplevel_xid,
            item.origin,
            [],
        )
    return item


def _check(
    with_runs: list[object],
    plain: list[object],
    bare: frozenset[int],
    *,
    maximal: bool,
    inert: bool = True,
) -> list[InsertRun]:
    """The contract above, item by item; the runs."""
    runs: list[InsertRun] = []
    at = 0
    for n, item in enumerate(with_runs):
        if not isinstance(item, InsertRun):
            assert item == _outside_run(plain[at], bare, inert), at
            at += 1
            continue
        part = plain[at : at + item.records]
        assert len(part) == item.records >= 1
        first = part[0]
        assert _run_kind(first) == (item.changes.kind, bool(item.changes.olds)), first
        assert isinstance(first, PredecodedRecord)
        assert item.xid == first.xid
        toast: RelFileLocator | None = None
        for p in part[1:]:
            assert _joins(item, p, bare, toast), p
            toast = toast or _chunk_insert(p) or _no_old_delete(p)
        # (an inert Heap record in it comes whole without runs, and decodes to nothing)
        events = [e for p in part for e in getattr(p, "events", ())]
        rows = item.changes
        assert list(rows) == events
        # chunk rows: TOAST chunk inserts, or a delete run's deletes without an old tuple
        assert rows.chunks == sum(
            e.on_toast_relation or (e.kind is ChangeKind.DELETE and e.old_tuple is None)
            for e in events
        )
        assert (len(rows), rows.lsn, rows.last_lsn) == (len(events), events[0].lsn, events[-1].lsn)
        assert (rows.xid, rows.locator) == (item.xid, events[0].locator)
        bare_deletes = sum(e.kind is ChangeKind.DELETE and e.old_tuple is None for e in events)
        assert rows.bares == bare_deletes
        assert all(
            e.kind is rows.kind
            for e in events
            if not e.on_toast_relation and not (e.kind is ChangeKind.DELETE and e.old_tuple is None)
        )
        assert rows.olds == sum(e.kind is ChangeKind.UPDATE and bool(e.old_tuple) for e in events)
        tuples = [t for e in events for t in (e.new_tuple, e.old_tuple) if t is not None]
        assert rows.data_bytes == sum(len(t.data) for t in tuples)
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
    """(version, record): the golden WAL's inserts, multi-inserts, updates and btree
    records."""
    return [
        (v, x)
        for v, x in golden_records()
        if (x.rmid, x.info & 0x70) in _INSERTS | _UPDATES or x.rmid == 11
    ]


def _delete_main(insert: XLogRecord, flags: int) -> bytes:
    """The main data of a Heap DELETE (xl_heap_delete: xmax, offnum,
    infobits_set, flags) of the row a golden Heap INSERT wrote, logging that row's
    xl_heap_header and tuple as its old tuple when `flags` say it does."""
    (offnum,) = struct.unpack_from("<H", insert.main_data)
    main = struct.pack("<IHBB", 1, offnum, 0, flags)
    if flags & 0x06:  # XLH_DELETE_CONTAINS_OLD_TUPLE | XLH_DELETE_CONTAINS_OLD_KEY
        main += insert.blocks[0].data
    return main


@settings(max_examples=200, deadline=None)
@given(seed=st.integers(0, 2**32), version=st.sampled_from([15, 18]))
def test_runs_on_random_sequences(seed: int, version: int) -> None:
    """Up to 120 records drawn from the golden inserts, multi-inserts, updates and btree
    records, and deletes of the golden inserts' rows, with their xid, relation,
    top-level xid, origin, insert flags (speculative, on a toast relation), update
    flags (an old tuple or key logged) and delete flags varied: the runs hold to the
    contract and are maximal."""
    rng = random.Random(seed)
    pool = [rec for v, rec in _pool() if v == version]
    inserts = [rec for rec in pool if (rec.rmid, rec.info & 0x70) == (10, 0x00)]
    writer = WalWriter(magic=_MAGIC[version])
    for _ in range(rng.randrange(1, 120)):
        rec = rng.choice(pool)
        main = bytearray(rec.main_data)
        if rng.random() < 0.05:  # a Heap LOCK, a Heap2 VISIBLE, an XLOG FPI_FOR_HINT or
            # CHECKPOINT_ONLINE: the first three decoded as nothing, the last an event
            rmid, info = rng.choice([(10, 0x60), (9, 0x40), (0, 0xA0), (0, 0x10)])
            xid = rng.choice([700, 700, 701, 0])
            b0 = blocks_of(rec, rng.choice([None, 99_999]))[0]
            block = Block(0, rel=b0.rel, fork=b0.fork, blk=b0.blk)
            toplevel = 699 if rng.random() < 0.05 else None
            body = record_body([block], bytes(8), toplevel=toplevel)
            writer.add(rmid, info, xid, body)
            continue
        if rng.random() < 0.15:  # a delete of an inserted row instead
            rec = rng.choice(inserts)
            main = bytearray(_delete_main(rec, rng.choice(_DELETE_FLAGS)))
            rel = rng.choice([None] * 8 + [99_999])
            b0 = blocks_of(rec, rel)[0]
            blocks = [Block(0, rel=b0.rel, fork=b0.fork, blk=b0.blk)]
            xid = rng.choice([700] * 6 + [701])
            writer.add(10, 0x10, xid, record_body(blocks, bytes(main)))
            continue
        user_update = (rec.rmid, rec.info & 0x70) in _UPDATES and len(main) == 14
        if user_update and main[7] & 0x1C == 0x10 and rng.random() < 0.3:
            # an UPDATE that logs its old tuple (FULL) or key: the new one again
            main[7] |= rng.choice([0x04, 0x08])
            main += rec.blocks[0].data
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
    # (armed without inert records, as below: an XLOG FPI joins that run to the next)
    with_runs = _items(data, lsn, bare, runs=True, inert=False)
    run_items = [i for i in with_runs if isinstance(i, InsertRun)]
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
        _check(after, [p for p in plain if p.lsn >= cut], bare, maximal=False, inert=False)  # type: ignore[attr-defined]


def test_a_consumer_that_stops_at_a_run_resumes_after_it() -> None:
    """An exception at a run's yield leaves the reader after the whole run: the next
    walk starts with the record that follows it."""
    checked = 0
    for f in sorted(DATA.glob("wal*_*.bin")):
        lsn = int(f.stem.split("_")[1], 16)
        data = f.read_bytes()
        bare = decoder_for(int(f.stem[3:5])).without_decode
        plain = _items(data, lsn, bare, runs=False)
        last = plain[-1].lsn  # type: ignore[attr-defined]
        reader = NativeXLogReader(lsn)
        native_heap.predecode(reader, bare, runs=True, inert_ops=_inert(bare))
        reader.feed(data, lsn)
        seen: list[object] = []
        try:
            for item in reader.decoded_records():
                seen.append(item)
                if isinstance(item, InsertRun) and item.records > 2 and item.lsn < last:
                    raise LookupError
        except LookupError:
            pass
        stop = seen[-1]
        if not isinstance(stop, InsertRun) or stop.lsn == last:
            continue  # no run with records after it in this window
        assert reader.end_lsn == stop.end_lsn
        rest = list(reader.decoded_records())
        after = [p for p in plain if p.lsn > stop.lsn]  # type: ignore[attr-defined]
        assert rest and rest[0].lsn == after[0].lsn  # type: ignore[attr-defined]
        checked += 1
    assert checked >= 2


def test_a_run_goes_on_past_the_slice() -> None:
    """A run is not cut where the reader's slices of records end (`_SLICE`): 1,500
    inserts of one transaction, each with its index insert (3,000 records), come as one
    run, and the record after it as itself."""
    insert = next(
        x
        for v, x in _pool()
        if v == 15
        and (x.rmid, x.info & 0x70) == (10, 0x00)
        and x.main_data[2] & 0x1C == 1 << 3  # XLH_INSERT_CONTAINS_NEW_TUPLE, no other
    )
    btree = next(x for v, x in _pool() if v == 15 and x.rmid == 11)
    writer = WalWriter(magic=_MAGIC[15], seg_size=16 << 20)
    for _ in range(1500):
        writer.add(10, 0x00, 700, record_body(blocks_of(insert), insert.main_data))
        writer.add(11, btree.info, 700, record_body(blocks_of(btree), btree.main_data))
    writer.add(10, 0x00, 701, record_body(blocks_of(insert), insert.main_data))
    data = writer.data()
    bare = decoder_for(15).without_decode
    plain = _items(data, writer.base, bare, runs=False, seg=writer.seg_size)
    items = _items(data, writer.base, bare, runs=True, seg=writer.seg_size)
    runs = _check(items, plain, bare, maximal=True)
    assert [(r.records, r.changes.nrows, r.xid) for r in runs] == [(3000, 1500, 700), (1, 1, 701)]


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


def test_updates_and_deletes_make_runs_of_their_own_kind() -> None:
    """Updates that log only their new tuple, and deletes that log only their old key or
    tuple, gather into runs of their kind, built as the very HeapChanges the unbatched
    reader gives; a record of another kind ends a run, a delete logging no old tuple of
    the run's own relation or withdrawing a speculative insertion is in none, and an
    update run takes a TOAST chunk and a delete logging no old tuple (the chunks of its
    next row's new value, and those of the value it replaces) of one other relation.
    The dump keeps each row's kind, old_is_key and chunk flag."""
    insert = next(
        x
        for v, x in _pool()
        if v == 15
        and (x.rmid, x.info & 0x70) == (10, 0x00)
        and x.main_data[2] & 0x1C == 1 << 3  # XLH_INSERT_CONTAINS_NEW_TUPLE, no other
    )
    update = next(
        x
        for v, x in _pool()
        if v == 15
        and (x.rmid, x.info & 0x70) in _UPDATES
        # XLH_UPDATE_CONTAINS_NEW_TUPLE, no old tuple or key (a user table's row)
        and x.main_data[7] & 0x1C == 0x10
    )
    writer = WalWriter(magic=_MAGIC[15])
    b0 = blocks_of(insert)[0]

    def delete(flags: int, rel: tuple[int, int, int] = b0.rel) -> None:
        block = Block(0, rel=rel, fork=b0.fork, blk=b0.blk)
        writer.add(10, 0x10, 700, record_body([block], _delete_main(insert, flags)))

    def upd() -> None:
        writer.add(update.rmid, update.info, 700, record_body(blocks_of(update), update.main_data))

    def chunk() -> None:
        main = bytearray(insert.main_data)
        main[2] |= 1 << 4  # XLH_INSERT_ON_TOAST_RELATION
        writer.add(10, 0x00, 700, record_body(blocks_of(insert, 70_001), bytes(main)))

    for _ in range(3):
        delete(0x04)  # XLH_DELETE_CONTAINS_OLD_KEY
    delete(0x02)  # XLH_DELETE_CONTAINS_OLD_TUPLE (REPLICA IDENTITY FULL): the same run
    delete(0x00)  # no old tuple, of the run's own relation: alone
    delete(0x04)
    delete(0x08)  # XLH_DELETE_IS_SUPER: alone
    upd()
    upd()
    chunk()  # a chunk of the next row's new value: into the update run
    delete(0x00, (b0.rel[0], b0.rel[1], 70_001))  # a replaced value's chunk: into it too
    upd()
    writer.add(insert.rmid, insert.info, 700, record_body(blocks_of(insert), insert.main_data))
    data = writer.data()
    bare = decoder_for(15).without_decode
    plain = _items(data, writer.base, bare, runs=False, seg=writer.seg_size)
    items = _items(data, writer.base, bare, runs=True, seg=writer.seg_size)
    runs = _check(items, plain, bare, maximal=True)
    shape = [
        (i.changes.kind.name, i.changes.nrows) if isinstance(i, InsertRun) else "alone"
        for i in items
    ]
    assert shape == [
        ("DELETE", 4),
        "alone",
        ("DELETE", 1),
        "alone",
        ("UPDATE", 5),
        ("INSERT", 1),
    ]
    deletes = runs[0].changes
    assert [c.old_is_key for c in deletes] == [True, True, True, False]
    assert all(c.new_tuple is None and c.old_tuple is not None for c in deletes)
    rows = deletes.rows
    back = native_heap.load_rows(rows.dump(), rows.xid, rows.locator)
    assert list(back) == list(deletes) and back.kind is ChangeKind.DELETE
    ups = runs[2].changes
    assert (ups.chunks, ups.bares, ups.kind) == (2, 1, ChangeKind.UPDATE)
    toast = ups.rows.toast_locator
    assert toast is not None and toast.rel_number == 70_001
    back = native_heap.load_rows(ups.rows.dump(), ups.xid, ups.locator, toast)
    assert list(back) == list(ups) and back.kind is ChangeKind.UPDATE
    assert (back.chunks, back.bares) == (2, 1)
    # a window from the chunk on: the main rows' kind, not its first row's
    assert ups.window(2, 5).kind is ChangeKind.UPDATE
    assert ups.window(2, 4).kind is ChangeKind.INSERT  # chunk rows only: the first's


def test_inert_ops_are_xlog_and_heap_ops_only() -> None:
    """Only XLOG, Heap and Heap2 record types may be named inert: any other rmgr's is
    refused (a btree record is a bare rmgr's, which the driver handles by its rmid).
    The decoder names FPI and FPI_FOR_HINT, Heap LOCK and the pruning records, and
    none of those it decodes."""
    reader = NativeXLogReader(0x1000000)
    with pytest.raises(ValueError, match="rmgr 11"):
        native_heap.predecode(reader, runs=True, inert_ops=[(11, 0x00)])
    assert decoder_for(15).inert_ops >= {(0, 0xA0), (0, 0xB0), (10, 0x60), (9, 0x10), (9, 0x40)}
    decoded = {(0, 0x00), (0, 0x10), (0, 0x40), (0, 0x60), (10, 0x00), (10, 0x20), (9, 0x50)}
    assert not decoder_for(18).inert_ops & (decoded | {(9, 0x70)})


def test_updates_that_log_their_old_tuple_make_runs_of_their_own() -> None:
    """UPDATEs that log their old tuple (REPLICA IDENTITY FULL) or old key (a key
    change) besides the new one gather into runs of their own, apart from those that
    log none; each row's HeapChange has both tuples as the unbatched reader gives them,
    and so does a row loaded back from the dump (with `olds`, and old_is_key)."""
    update = next(
        x
        for v, x in _pool()
        if v == 15
        and (x.rmid, x.info & 0x70) in _UPDATES
        and x.main_data[7] & 0x1C == 0x10  # a new tuple only
        and len(x.main_data) == 14  # SizeOfHeapUpdate
    )
    writer = WalWriter(magic=_MAGIC[15])

    def add(old_flag: int) -> None:
        main = bytearray(update.main_data)
        main[7] |= old_flag
        if old_flag:  # the new tuple's xl_heap_header and data again, as the old one
            main += update.blocks[0].data
        body = record_body(blocks_of(update), bytes(main))
        writer.add(update.rmid, update.info, 700, body)

    for flag in (0x04, 0x04, 0x08, 0x00, 0x00, 0x04):  # OLD_TUPLE, OLD_KEY, none
        add(flag)
    data = writer.data()
    bare = decoder_for(15).without_decode
    plain = _items(data, writer.base, bare, runs=False, seg=writer.seg_size)
    items = _items(data, writer.base, bare, runs=True, seg=writer.seg_size)
    runs = _check(items, plain, bare, maximal=True)
    assert [(r.changes.nrows, r.changes.olds) for r in runs] == [(3, 3), (2, 0), (1, 1)]
    first = runs[0].changes
    assert [c.old_is_key for c in first] == [False, False, True]
    assert all(c.old_tuple is not None and c.new_tuple is not None for c in first)
    assert first.data_bytes == sum(len(c.new_tuple.data) + len(c.old_tuple.data) for c in first)  # type: ignore[union-attr]
    rows = first.rows
    back = native_heap.load_rows(rows.dump(), rows.xid, rows.locator)
    assert list(back) == list(first) and back.olds == 3
    assert list(first.window(1, 3)) == list(first)[1:3]


def test_inert_records_outside_runs_come_bare_unless_watched() -> None:
    """A row lock between other transactions' changes (pgbench's, between its updates)
    is inert: outside a run it comes with no events and no blocks built, as a bare
    rmgr's record, and the driver registers its xid (Heap LOCK, Heap2 PRUNE and XLOG
    FPI_FOR_HINT alike). One with a block of a watched relation (pg_class's, whose pages
    the historic catalog rebuilds) still comes whole."""
    watched_rel = (1663, 5, 1259)
    writer = WalWriter(magic=_MAGIC[15])
    ops = [(10, 0x60, 700), (9, 0x10, 0), (0, 0xA0, 701)]
    for rmid, info, xid in ops:
        for rel in ((1663, 5, 16384), watched_rel):
            writer.add(rmid, info, xid, record_body([Block(0, rel=rel)], bytes(8)))
    data = writer.data()
    bare = decoder_for(15).without_decode
    reader = NativeXLogReader(writer.base, segment_size=writer.seg_size)
    assert native_heap.predecode(reader, bare, runs=True, inert_ops=_inert(bare))
    reader.watch_relations([RelFileLocator(*watched_rel)])
    reader.feed(data, writer.base)
    items = list(reader.decoded_records())
    assert len(items) == 2 * len(ops)
    for (rmid, info, xid), free, whole in zip(ops, items[::2], items[1::2], strict=True):
        assert type(free) is PredecodedRecord
        assert (free.rmid, free.info, free.xid, free.events) == (rmid, info, xid, [])
        assert free.toplevel_xid is None and free.origin is None
        assert type(whole) is XLogRecord
        assert (whole.rmid, whole.info, whole.xid) == (rmid, info, xid)
        assert whole.blocks[0].locator == RelFileLocator(*watched_rel)
        assert free.end_lsn == whole.lsn  # in WAL order, one after the other
