"""Spilling an InsertRows (an InsertRun's plain inserts, held by the native core) as one
spill record (tag 2: locator + `HeapRows.dump()`) and restoring it as an InsertRows.

Checked with the real native HeapRows of the golden PG15/PG18 WAL (the reader armed
with runs, as tests/service/decode/test_insert_runs.py drives it): the dump/load round
trip gives the same rows, windows included; the store writes one record per InsertRows
and reads it back as one; a transaction queued in runs under a small work_mem spills
and replays exactly what the same changes queued one by one do (sink log, spill
counters, accounted size, change count, restore batches and peak), with fewer records
on disk, a record split where a restore bound falls inside it; damaged tag-2
records are `SpillFileError`s with the xid (and the LSN once the rows are read), the
native `DecodeError` chained; `HeapRows.load` on any bytes either loads a dump
that dumps back to the same bytes or raises DecodeError; the store imports the
native core only to read a tag-2 record; and a run carrying TOAST chunk rows spills
(row by row) and replays exactly as its changes queued one by one.
"""

from __future__ import annotations

import os
import struct
import subprocess
import sys
from collections.abc import Callable, Iterator
from functools import cache
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from service import _native
from service.decode import native_heap
from service.decode.dispatch import decoder_for
from service.decode.events import HeapChange, InsertRows, InsertRun, RawTuple
from service.errors import DecodeError, SpillFileError
from service.reorder import replay, spill
from service.reorder.buffer import ReorderBuffer
from service.reorder.changes import change_size
from service.reorder.replay import Replayer
from service.reorder.spill import MAGIC, LocalSpillStore, checksum
from service.wal.record import RelFileLocator
from tests.service.decode.test_insert_runs import DATA, _items, _pool
from tests.service.decode.test_native_heap import blocks_of
from tests.service.reorder.reorderbuffer_support import make_buffer, message
from tests.service.walwriter import Block, WalWriter, record_body

_HEADER_LEN = len(MAGIC) + 16
_RECORD = struct.Struct("<II")
_ROWS_HEAD = 13  # tag, spc, db, rel
_DUMP_HEAD = 9  # version, xid, count
_ROW = 37  # one row of the dump's row table (its old tuple's fields included)


@cache
def golden_runs() -> tuple[InsertRun, ...]:
    """Every InsertRun of the golden WAL, in file and WAL order."""
    runs: list[InsertRun] = []
    for f in sorted(DATA.glob("wal*_*.bin")):
        lsn = int(f.stem.split("_")[1], 16)  # wal<version>_<lsn hex>.bin
        bare = decoder_for(int(f.stem[3:5])).without_decode
        runs += [i for i in _items(f.read_bytes(), lsn, bare, runs=True) if type(i) is InsertRun]
    assert len(runs) >= 10 and max(r.changes.nrows for r in runs) >= 1000
    return tuple(runs)


def _main_xid_runs() -> list[list[InsertRun]]:
    """Per golden file, the runs of its transaction with the most rows."""
    by_xid: dict[int, list[InsertRun]] = {}
    for run in golden_runs():
        by_xid.setdefault(run.xid, []).append(run)
    groups = sorted(by_xid.values(), key=lambda g: g[0].first_lsn)
    return [g for g in groups if sum(r.changes.nrows for r in g) > 100]


def _same_rows(got: InsertRows, want: InsertRows) -> None:
    """`got` is an InsertRows equal to `want` row for row, class for class."""
    assert type(got) is InsertRows
    rows = list(got)
    assert rows == list(want)
    assert all(type(c) is HeapChange and type(c.new_tuple) is RawTuple for c in rows)
    assert (got.xid, got.locator, got.lsn, got.last_lsn, got.nrows, got.data_bytes) == (
        want.xid,
        want.locator,
        want.lsn,
        want.last_lsn,
        want.nrows,
        want.data_bytes,
    )
    assert change_size(got) == change_size(want)


# --- the dump and its load ----------------------------------------------------------


def test_dump_and_load_give_the_same_rows() -> None:
    """Every golden run, and windows of it (first row, last row, a middle part): the
    rows loaded from its dump are the dumped ones, the dump lays them out as
    documented (version 3, xid, count, 37 bytes a row, then exactly their data), and a
    loaded HeapRows dumps to the same bytes."""
    for run in golden_runs():
        rows = run.changes
        n = rows.nrows
        for a, b in {(0, n), (0, 1), (n - 1, n), (n // 3, max(n // 3 + 1, 2 * n // 3))}:
            window = rows if (a, b) == (0, n) else rows.window(a, b)
            dump = window.rows.dump()
            assert dump[0] == 3  # reorder::run::DUMP_VERSION
            assert struct.unpack_from("<II", dump, 1) == (window.xid, window.nrows)
            assert len(dump) == _DUMP_HEAD + _ROW * window.nrows + window.data_bytes
            loaded = native_heap.load_rows(dump, window.xid, window.locator)
            _same_rows(loaded, window)
            assert loaded.rows.dump() == dump


def test_load_refuses_another_xid() -> None:
    """A dump read back for another xid is a DecodeError naming both, with the xid and
    the first row's LSN as context."""
    rows = golden_runs()[0].changes
    with pytest.raises(DecodeError, match=f"of xid {rows.xid} read back for xid 7") as exc:
        native_heap.load_rows(rows.rows.dump(), 7, rows.locator)
    assert (exc.value.xid, exc.value.lsn) == (7, rows.lsn)


# --- the store ----------------------------------------------------------------------


def test_store_writes_one_record_per_insert_rows_and_reads_it_back(tmp_path: Path) -> None:
    """A HeapChange, a whole InsertRows, a message and a window of the InsertRows are
    four records (what `write` returns, and what `read` needs); each InsertRows comes
    back as an InsertRows equal row for row, the rest as written. The record holds the
    tag, the locator and the dump: its length says so."""
    run = max(golden_runs(), key=lambda r: r.changes.nrows)
    rows, xid = run.changes, run.xid
    window = rows.window(3, 40)
    first = rows[0]
    written: list[object] = [first, rows, message(xid, rows.last_lsn + 1), window]
    store = LocalSpillStore(tmp_path)
    assert store.write(xid, written) == 4
    lengths = [len(payload) for payload in _payloads(store.path(xid))]
    assert lengths[1] == _ROWS_HEAD + len(rows.rows.dump())
    assert lengths[3] == _ROWS_HEAD + len(window.rows.dump())
    got = list(store.read(xid, 4))
    assert got[0] == first and got[2] == written[2]
    _same_rows(got[1], rows)  # type: ignore[arg-type]
    _same_rows(got[3], window)  # type: ignore[arg-type]
    with pytest.raises(SpillFileError, match="more than 3"):
        list(store.read(xid, 3))


@pytest.mark.parametrize("chunk", [None, 64], ids=["default", "64-byte read-ahead"])
def test_large_records_are_read_straight_from_the_file(
    tmp_path: Path, chunk: int | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A record larger than the read-ahead is read from the file itself (`_large`):
    a 3 MB message always, and with a 64-byte read-ahead and write buffer every dump
    too, each body written and read as its own bytes. Every record comes back as
    written, the small ones around them included, and the count is still exact."""
    if chunk is not None:
        monkeypatch.setattr(spill, "_READ_CHUNK", chunk)
        monkeypatch.setattr(spill, "_WRITE_BUFFER", chunk)
    large = 0
    read_large = LocalSpillStore._large

    def counted(self: LocalSpillStore, *args: Any) -> object:
        nonlocal large
        large += 1
        return read_large(self, *args)

    monkeypatch.setattr(LocalSpillStore, "_large", counted)
    run = max(golden_runs(), key=lambda r: r.changes.nrows)
    rows, xid = run.changes, run.xid
    big = message(xid, rows.last_lsn + 1, payload=os.urandom(3 << 20))
    written: list[object] = [rows[0], rows, big, rows.window(3, 40), rows[1]]
    store = LocalSpillStore(tmp_path)
    assert store.write(xid, written[:2]) + store.write(xid, written[2:]) == 5
    got = list(store.read(xid, 5))
    assert got[0] == rows[0] and got[2] == big and got[4] == rows[1]
    _same_rows(got[1], rows)  # type: ignore[arg-type]
    _same_rows(got[3], written[3])  # type: ignore[arg-type]
    assert large == (1 if chunk is None else 3)
    with pytest.raises(SpillFileError, match="more than 4"):
        list(store.read(xid, 4))


@pytest.mark.parametrize("damage", ["cut", "flip in the dump", "flip in the message"])
def test_a_damaged_large_record_is_refused(
    tmp_path: Path, damage: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A large record cut short or with a flipped byte, in a dump's body (read apart
    from its head) or in a message, is a SpillFileError naming the record; the records
    before it were yielded."""
    monkeypatch.setattr(spill, "_READ_CHUNK", 64)
    run = max(golden_runs(), key=lambda r: r.changes.nrows)
    rows, xid = run.changes, run.xid
    big = message(xid, rows.last_lsn + 1, payload=os.urandom(1 << 16))
    store = LocalSpillStore(tmp_path)
    store.write(xid, [rows[0], rows, big])
    path = store.path(xid)
    raw = bytearray(path.read_bytes())
    dump_at = len(raw) - len(_payloads(path)[2]) - 8 - len(rows.rows.dump()) // 2
    if damage == "cut":
        del raw[-5:]
        want, index = "truncated in record 2", 2
    elif damage == "flip in the dump":
        raw[dump_at] ^= 0x01
        want, index = "record 1 fails its CRC", 1
    else:
        raw[-100] ^= 0x01
        want, index = "record 2 fails its CRC", 2
    path.write_bytes(bytes(raw))
    got: list[object] = []
    with pytest.raises(SpillFileError, match=want) as exc:
        got.extend(store.read(xid, 3))
    assert len(got) == index and got[0] == rows[0]
    assert exc.value.xid == xid


def test_a_failed_write_leaves_the_file_as_it_was(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A write that fails half way (the disk full after some bytes) is a SpillFileError
    with the xid, and the file is cut back to what it held before: the earlier records
    read back exactly, nothing torn after them."""
    run = max(golden_runs(), key=lambda r: r.changes.nrows)
    rows, xid = run.changes, run.xid
    store = LocalSpillStore(tmp_path)
    assert store.write(xid, [rows[0], rows]) == 2
    size = store.path(xid).stat().st_size
    write_all = spill._write_all
    calls = 0

    def failing(fh: Any, data: bytes | bytearray) -> None:
        nonlocal calls
        calls += 1
        if calls == 2:
            write_all(fh, data[: len(data) // 2])
            raise OSError(28, "No space left on device")
        write_all(fh, data)

    monkeypatch.setattr(spill, "_write_all", failing)
    monkeypatch.setattr(spill, "_WRITE_BUFFER", 64)
    with pytest.raises(SpillFileError, match="No space left") as exc:
        store.write(xid, [rows[1], rows.window(3, 40), rows[2]])
    assert exc.value.xid == xid and calls == 2
    assert store.path(xid).stat().st_size == size
    got = list(store.read(xid, 2))
    assert got[0] == rows[0]
    _same_rows(got[1], rows)  # type: ignore[arg-type]


def test_insert_rows_of_another_xid_are_written_row_by_row(tmp_path: Path) -> None:
    """An InsertRows handed to the file of another xid (never done by the buffer) is
    written as its rows, one record each, so that it reads back as exactly them."""
    rows = golden_runs()[0].changes
    store = LocalSpillStore(tmp_path)
    assert store.write(rows.xid + 1, [rows]) == rows.nrows
    assert list(store.read(rows.xid + 1, rows.nrows)) == list(rows)


def test_an_injected_loader_is_used(tmp_path: Path) -> None:
    """The store reads tag-2 records with the `load_rows` it was given, if any."""
    rows = golden_runs()[0].changes
    calls: list[tuple[int, RelFileLocator]] = []

    def load(
        data: bytes, xid: int, locator: RelFileLocator, toast: RelFileLocator | None
    ) -> InsertRows:
        calls.append((xid, locator))
        return native_heap.load_rows(data, xid, locator, toast)

    store = LocalSpillStore(tmp_path, load_rows=load)
    store.write(rows.xid, [rows])
    _same_rows(next(store.read(rows.xid, 1)), rows)  # type: ignore[arg-type]
    assert calls == [(rows.xid, rows.locator)]


def test_the_store_imports_the_native_core_only_for_a_tag_2_record(tmp_path: Path) -> None:
    """Spilling and restoring everything but an InsertRows, through the buffer, leaves
    the native extension unimported (PGCDC_IMPL=python makes no InsertRows)."""
    root = Path(__file__).resolve().parents[3]
    code = """
import sys
from pathlib import Path
from tests.service.reorder.reorderbuffer_support import heap, make_buffer, message
rb, sink, store = make_buffer(Path(sys.argv[1]), work_mem=600, restore_batch=2)
rb.process_xid(9, 1)
rb.set_base_snapshot(9, 1, object())
for lsn in range(1, 30):
    rb.queue_change(9, lsn, heap(9, lsn, data=b"z" * 100) if lsn % 3 else message(9, lsn))
assert store.writes
rb.commit(9, 100, 101, 0)
assert len(sink.log) == 31
print(sorted(m for m in sys.modules if "native" in m))
"""
    out = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path)],
        cwd=root,
        env={**os.environ, "PYTHONPATH": str(root)},
        capture_output=True,
        text=True,
        check=True,
    )
    assert out.stdout.strip() == "[]"


# --- through the buffer -------------------------------------------------------------


class _RecordingReplayer(Replayer):
    """A Replayer that records the accounting after each restore (each batch)."""

    __slots__ = ("batches", "splits")

    def __init__(self, state: Any) -> None:
        super().__init__(state)
        self.batches: list[tuple[int, int, int]] = []
        self.splits = 0  # batches that ended inside a record (its rest waits)

    def _restore(self, txn: Any, readers: dict[int, Iterator[object]]) -> bool:
        got = super()._restore(txn, readers)
        self.batches.append((txn.xid, self._state.size, self._state.count))
        self.splits += getattr(readers.get(txn.xid), "rest", None) is not None
        return got


def _queue(
    tmp: Path,
    runs: list[InsertRun],
    work_mem: int,
    restore_batch: int,
    batched: bool,
    *,
    late: bool = False,
) -> dict[str, Any]:
    """Queue `runs` (in WAL order) into a fresh buffer, as InsertRows (`batched`) or
    their changes one by one, commit each xid after its last run (`late`: all at the
    end, in the order they began, so that each is restored while the later ones hold
    memory), and return what the sink, the counters, the accounting and the store saw."""
    rb, sink, store = make_buffer(tmp, work_mem=work_mem, restore_batch=restore_batch)
    replayer = rb._replayer = _RecordingReplayer(rb._state)
    restored: list[object] = []
    read = store.read

    def spy(xid: int, count: int) -> Iterator[object]:
        for obj in read(xid, count):
            restored.append(obj)
            yield obj

    store.read = spy  # type: ignore[method-assign]
    last = {r.xid: r for r in runs}
    before_commit = []
    for run in runs:
        rb.process_xid(run.xid, run.first_lsn)
        rb.set_base_snapshot(run.xid, run.first_lsn, object())
        if batched:
            rb.queue_run(run.xid, run.first_lsn, run.changes)
        else:
            for c in run.changes:
                rb.queue_change(run.xid, c.lsn, c)
        if last[run.xid] is run and not late:
            before_commit.append(_txn(rb, run.xid))
            rb.commit(run.xid, run.end_lsn, run.end_lsn + 8, commit_time=0, origin=None)
    if late:
        end = runs[-1].end_lsn
        for xid in last:
            before_commit.append(_txn(rb, xid))
            end += 16
            rb.commit(xid, end, end + 8, commit_time=0, origin=None)
    state = rb._state
    return {
        "log": list(sink.log),
        "stats": rb.stats,
        "held": (state.size, state.count),
        "peak": state.peak,
        "txns": before_commit,
        "writes": [(xid, [c.lsn for c in batch]) for xid, batch in store.writes],  # type: ignore[attr-defined]
        "batches": replayer.batches,
        "splits": replayer.splits,
        "records": sum(store.records),
        "restored": restored,
        "store": store,
    }


def _txn(rb: ReorderBuffer, xid: int) -> tuple[int, int, int, int]:
    """(xid, nentries, accounted size, change count of its in-memory changes)."""
    t = rb._by_xid[xid]
    return (
        t.xid,
        t.nentries,
        t.size,
        sum(c.nrows if type(c) is InsertRows else 1 for c in t.changes),
    )


def _compare(one: dict[str, Any], run: dict[str, Any]) -> None:
    """The same sink log, counters, accounting, spills, restore batches and peak."""
    for key in ("log", "stats", "held", "txns", "writes", "batches", "peak"):
        assert run[key] == one[key], key


@pytest.mark.parametrize("work_mem", [8_000, 30_000, 60_000])
@pytest.mark.parametrize("restore_batch", [1, 5, 64, 4096])
def test_spilled_runs_replay_as_their_changes_queued_one_by_one(
    tmp_path: Path, work_mem: int, restore_batch: int
) -> None:
    """Per golden file, its largest transaction queued in runs under a small work_mem:
    the same spills (which changes, when, for whom), sink log, spill_* and every other
    counter, accounted size and change count (0 at the end), nentries, restore batches
    and peak as its changes queued one by one with queue_change; but the file holds
    one record per spilled InsertRows (fewer records than changes), restored as
    InsertRows."""
    for index, runs in enumerate(_main_xid_runs()):
        one = _queue(tmp_path / f"one{index}", runs, work_mem, restore_batch, batched=False)
        run = _queue(tmp_path / f"run{index}", runs, work_mem, restore_batch, batched=True)
        _compare(one, run)
        assert one["stats"].spill_count > 1 and run["held"] == (0, 0)
        changes = sum(len(batch) for _xid, batch in one["writes"])
        assert one["records"] == changes > run["records"]
        assert run["restored"] and all(type(c) is InsertRows for c in run["restored"])
        assert all(type(c) is HeapChange for c in one["restored"])
        assert run["peak"] <= work_mem + max(change_size(c) for r in runs for c in r.changes)


@pytest.mark.parametrize("work_mem", [10_000, 30_000, 60_000])
@pytest.mark.parametrize("restore_batch", [1, 7, 64, 4096])
def test_restore_splits_a_record_where_a_bound_falls(
    tmp_path: Path, work_mem: int, restore_batch: int
) -> None:
    """All golden runs, of every xid, all committed at the end in the order they began,
    so that each is restored while the later ones hold memory: where restore_batch or
    work_mem falls inside a spilled InsertRows, the batch takes its rows up to there and
    the rest comes first in the next batch, so the batches, the accounting and the peak
    are exactly those of the changes queued one by one (the bound of issue 4: work_mem
    plus one change), and the rows reach the sink in order."""
    runs = list(golden_runs())
    one = _queue(tmp_path / "one", runs, work_mem, restore_batch, batched=False, late=True)
    run = _queue(tmp_path / "run", runs, work_mem, restore_batch, batched=True, late=True)
    _compare(one, run)
    assert run["records"] < one["records"]
    restored_rows = sum(len(c) for c in run["restored"])  # type: ignore[arg-type]
    assert restored_rows == one["records"]
    assert run["splits"] > 0 and one["splits"] == 0
    assert run["peak"] <= work_mem + max(change_size(c) for r in runs for c in r.changes)


# --- damaged records ----------------------------------------------------------------


def _payloads(path: Path) -> list[bytes]:
    """The payloads of a spill file's records."""
    raw = path.read_bytes()
    pos, out = _HEADER_LEN, []
    while pos < len(raw):
        length, _ = _RECORD.unpack_from(raw, pos)
        out.append(raw[pos + _RECORD.size : pos + _RECORD.size + length])
        pos += _RECORD.size + length
    return out


def _rewrite(path: Path, payloads: list[bytes]) -> None:
    """Rewrite the file's records as `payloads`, each with a valid CRC."""
    raw = path.read_bytes()[:_HEADER_LEN]
    for p in payloads:
        raw += _RECORD.pack(len(p), checksum(p)) + p
    path.write_bytes(raw)


def _count(dump: bytes, n: int) -> bytes:
    return dump[:5] + struct.pack("<I", n) + dump[9:]


def _set(at: int, value: bytes) -> Callable[[bytes], bytes]:
    """Payload -> the payload with `value` written at `at`."""
    return lambda p: p[:at] + value + p[at + len(value) :]


def _with_count(delta: int) -> Callable[[bytes], bytes]:
    """Payload -> the payload whose dump's row count is off by `delta`."""
    return lambda p: _set(_ROWS_HEAD + 5, struct.pack("<I", max(0, _nrows(p) + delta)))(p)


# name: (payload -> damaged payload, message, the error's LSN: the first row's, the
# last row's, none, or "any" where the misread row decides)
_DAMAGE: dict[str, tuple[Callable[[bytes], bytes], str, str]] = {
    "truncated dump": (lambda p: p[:-1], "tuple data ends past", "last"),
    "truncated row table": (
        lambda p: p[: _ROWS_HEAD + _DUMP_HEAD + 30],
        "too short for its",
        "none",
    ),
    "truncated header": (lambda p: p[: _ROWS_HEAD + 4], "shorter than its 9-byte header", "none"),
    "no dump": (lambda p: p[:_ROWS_HEAD], "shorter than its 9-byte header", "none"),
    "no locator": (lambda p: p[:7], "too short for insert rows", "none"),
    "bad version": (_set(_ROWS_HEAD, b"\x07"), "version 7, expected 3", "none"),
    "trailing bytes": (lambda p: p + b"\x00\x01", "2 trailing bytes", "first"),
    "count one more": (_with_count(1), "damaged insert rows", "any"),
    "count one fewer": (_with_count(-1), "trailing bytes", "first"),
    "count zero": (_with_count(-(1 << 40)), "no rows", "none"),
    "another xid": (_set(_ROWS_HEAD + 1, struct.pack("<I", 5)), "of xid 5 read back", "first"),
    "bad flag": (_set(_ROWS_HEAD + _DUMP_HEAD + 21, b"\x20"), "flags byte 0x20", "first"),
    # an update row that says it is a delete too
    "two ops": (_set(_ROWS_HEAD + _DUMP_HEAD + 21, b"\x0c"), "flags byte 0x0c", "first"),
    # a TOAST chunk row in a tag-2 record, which has no toast relation to read it into
    "chunk without toast": (
        _set(_ROWS_HEAD + _DUMP_HEAD + 21, b"\x02"),
        "chunk rows read back without its toast relation",
        "first",
    ),
    "unknown tag": (_set(0, b"\x09"), "unknown tag 9", "none"),
}


def _nrows(payload: bytes) -> int:
    n: int = struct.unpack_from("<I", payload, _ROWS_HEAD + 5)[0]
    return n


@pytest.mark.parametrize("damage", sorted(_DAMAGE))
def test_damaged_rows_record_is_a_spill_file_error(tmp_path: Path, damage: str) -> None:
    """A tag-2 record damaged behind a valid CRC (a writer bug, not a torn write) is a
    SpillFileError naming the file's record, with the xid, and with the first row's
    LSN once the rows are read; the native DecodeError is its cause. Nothing else
    escapes, and the records before it were yielded."""
    run = next(r for r in golden_runs() if r.changes.nrows > 3)
    rows, xid = run.changes, run.xid
    store = LocalSpillStore(tmp_path)
    store.write(xid, [rows[0], rows.window(1, rows.nrows)])
    path = store.path(xid)
    first, payload = _payloads(path)
    change, expect, lsn = _DAMAGE[damage]
    _rewrite(path, [first, change(payload)])
    got: list[object] = []
    with pytest.raises(SpillFileError) as exc:
        got.extend(store.read(xid, 2))
    assert got == [rows[0]]
    err = exc.value
    assert type(err) is SpillFileError and err.xid == xid
    assert f"{path} record 1" in err.message and expect in err.message, err.message
    want = {"first": rows[1].lsn, "last": rows[rows.nrows - 1].lsn, "none": None}
    if lsn in want:
        assert err.lsn == want[lsn]
    if damage not in ("no locator", "unknown tag"):
        assert isinstance(err.__cause__, DecodeError)
        assert err.__cause__.xid == xid


# --- load_rows on any bytes ---------------------------------------------------------

_DECODER = native_heap.heap_decoder()
_LOCATOR = RelFileLocator(1663, 5, 16384)
_TOAST_LOCATOR = RelFileLocator(1663, 5, 16387)


def _check_load(data: bytes, xid: int) -> None:
    """`HeapRows.load` either raises DecodeError (with the xid) or loads rows that dump
    back to `data` and build their HeapChanges: those flagged as TOAST chunks into the
    toast relation, given one (without one, a dump with chunk rows is refused)."""
    for toast in (None, _TOAST_LOCATOR):
        try:
            rows = _native.HeapRows.load(_DECODER, data, xid, _LOCATOR, toast)
        except DecodeError as exc:
            assert exc.xid == xid
            continue
        assert rows.dump() == data
        changes = rows.changes()
        assert len(changes) == len(rows) >= 1
        assert all(c.xid == xid for c in changes)
        on_toast = [c for c in changes if c.locator is _TOAST_LOCATOR]
        assert len(on_toast) == rows.chunks
        assert all(c.locator is _LOCATOR for c in changes if c not in on_toast)
        assert toast is not None or rows.chunks == 0


@settings(max_examples=500, deadline=None)
@given(data=st.binary(max_size=400), xid=st.integers(0, 2**32 - 1))
def test_load_rows_of_random_bytes_is_typed(data: bytes, xid: int) -> None:
    """Random bytes (the version byte forced to 2 half the time): only DecodeError."""
    _check_load(data, xid)
    if data:
        _check_load(b"\x02" + data[1:], xid)


@settings(max_examples=500, deadline=None)
@given(
    index=st.integers(0, 10_000),
    edits=st.lists(
        st.tuples(st.integers(0, 1 << 20), st.integers(0, 255), st.sampled_from("sid")),
        min_size=1,
        max_size=4,
    ),
)
def test_load_rows_of_mutated_dumps_is_typed(index: int, edits: list[tuple[int, int, str]]) -> None:
    """Golden dumps with bytes set, inserted or deleted: a dump that loads dumps back
    to itself; anything else is a DecodeError."""
    runs = golden_runs()
    rows = runs[index % len(runs)].changes
    window = rows.window(0, min(rows.nrows, 6))
    data = bytearray(window.rows.dump())
    for where, value, op in edits:
        at = where % (len(data) + 1)
        if op == "s" and at < len(data):
            data[at] = value
        elif op == "i":
            data.insert(at, value)
        elif op == "d" and at < len(data):
            del data[at]
    _check_load(bytes(data), window.xid)


def test_the_sink_gets_restored_rows_whole(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A restored InsertRows goes to `sink.changes` as an InsertRows (windows of
    RUN_MAX at most), not as HeapChanges: the fast path survives a spill (restored in
    batches of 64 rows, pieces of 64 going whole, so that only a short tail joins a
    list: a run's, or a window's where the memory limit cut the run)."""
    runs = _main_xid_runs()[0]
    # The golden runs are small: restore in batches of 64 rows, and let pieces of 64 go
    # whole (ROWS_ALONE), so that a spill here exercises the whole path.
    monkeypatch.setattr(replay, "ROWS_ALONE", 64)
    rb, sink, _store = make_buffer(tmp_path, work_mem=30_000, restore_batch=64)
    seen: list[object] = []
    plain = sink.changes

    def spy(txn: Any, changes: Any) -> None:
        seen.append(changes)
        plain(txn, changes)

    sink.changes = spy  # type: ignore[method-assign]
    for run in runs:
        rb.process_xid(run.xid, run.first_lsn)
        rb.set_base_snapshot(run.xid, run.first_lsn, object())
        rb.queue_run(run.xid, run.first_lsn, run.changes)
    assert rb.stats.spill_count > 0
    rb.commit(runs[0].xid, runs[-1].end_lsn, runs[-1].end_lsn + 8, commit_time=0, origin=None)
    whole = [x for x in seen if type(x) is InsertRows]
    # Every full batch comes whole; only a short tail joins a list: a run's, or a spilled
    # window's where the memory limit cut the run (at most one per spill).
    short = len(runs) + rb.stats.spill_count
    assert len(whole) >= len(seen) - short and whole, seen
    assert all(len(x) == 64 for x in whole)
    assert [e[2] for e in sink.log if e[0] == "change"] == [c for r in runs for c in r.changes]


# --- runs with TOAST chunks -----------------------------------------------------------

_TOAST_REL = (1663, 5, 16390)  # reorderbuffer_support.TOAST


def _chunk_tuple(chunk_id: int, seq: int, payload: bytes) -> bytes:
    """A TOAST chunk's tuple data from t_bits' offset on (a pad byte, chunk_id oid,
    chunk_seq int4, chunk_data bytea with a 4-byte header)."""
    tuple_data = b"\x00" + struct.pack("<Ii", chunk_id, seq)
    return tuple_data + struct.pack("<I", (len(payload) + 4) << 2) + payload


def _chunk_body(
    chunk_id: int,
    seq: int,
    payload: bytes,
    *,
    raw: tuple[int, int, int, bytes] | None = None,
) -> bytes:
    """The record body of a Heap INSERT of one TOAST chunk (hoff 24, 3 attributes, no
    nulls; or `raw`: natts, infomask, hoff and tuple data as given) into the test
    schema's toast relation, flagged XLH_INSERT_ON_TOAST_RELATION."""
    natts, infomask, hoff, tuple_data = raw or (
        3,
        0x0002,  # HEAP_HASVARWIDTH
        24,
        _chunk_tuple(chunk_id, seq, payload),
    )
    header = struct.pack("<HHB", natts, infomask, hoff)  # t_infomask2, t_infomask, t_hoff
    main = struct.pack("<HB", 1, (1 << 3) | (1 << 4))  # offnum; CONTAINS_NEW_TUPLE, TOAST
    block = Block(0, rel=_TOAST_REL, data=header + tuple_data)
    return record_body([block], main)


@cache
def toast_runs(damaged: int | None = None) -> tuple[InsertRun, ...]:
    """The InsertRuns of a PG15 WAL stream of xid 700: 60 rows (a golden plain insert),
    each but the first preceded by the 3 chunks of its value (chunk_ids 1000 + row);
    row `damaged`'s last chunk logged with chunk_seq 3 instead of 2."""
    insert = next(
        x
        for v, x in _pool()
        if v == 15
        and (x.rmid, x.info & 0x70) == (10, 0x00)
        and x.main_data[2] & 0x1C == 1 << 3  # XLH_INSERT_CONTAINS_NEW_TUPLE, no other
    )
    writer = WalWriter(magic=0xD110)
    for row in range(60):
        if row:
            for seq in range(3):
                payload = bytes([row, seq]) * 700
                logged = 3 if row == damaged and seq == 2 else seq
                writer.add(10, 0x00, 700, _chunk_body(1000 + row, logged, payload))
        writer.add(insert.rmid, insert.info, 700, record_body(blocks_of(insert), insert.main_data))
    bare = decoder_for(15).without_decode
    items = _items(writer.data(), writer.base, bare, runs=True, seg=writer.seg_size)
    return tuple(i for i in items if type(i) is InsertRun)


@pytest.mark.parametrize("work_mem", [8_000, 30_000, 1_000_000])
@pytest.mark.parametrize("restore_batch", [1, 5, 4096])
def test_runs_with_toast_chunks_spill_and_replay_as_their_changes(
    tmp_path: Path, work_mem: int, restore_batch: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A run carrying TOAST chunk rows (each chunk a change of its own size, as
    ReorderBufferChangeSize counts it) queued as one InsertRows: the same spills,
    counters, accounting, restore batches and peak as its changes queued one by one,
    and the same sink log, each main row handed on with its value's chunks
    (ReorderBufferToastAppendChunk / ReorderBufferToastReplace). Spilled or not, it is
    replayed whole, its chunks collected natively (`toast_replay`: the Python
    `toast_chunk` is never called): spilled, each window is one tag-3 record (its dump
    keeps which rows are chunks) and is restored as an InsertRows with its chunks."""
    runs = list(toast_runs())
    assert len(runs) == 1 and runs[0].changes.nrows == 60 + 59 * 3
    assert runs[0].changes.chunks == 59 * 3 and runs[0].changes.rows.ends_reset
    one = _queue(tmp_path / "one", runs, work_mem, restore_batch, batched=False)

    def forbidden(change: HeapChange) -> tuple[int, int, bytes]:
        raise AssertionError(f"chunk at {change.lsn:X} deformed in Python")

    monkeypatch.setattr(replay, "toast_chunk", forbidden)
    run = _queue(tmp_path / "run", runs, work_mem, restore_batch, batched=True)
    _compare(one, run)
    assert run["held"] == (0, 0)
    toasted = [e for e in run["log"] if e[0] == "change" and e[3]]
    assert len(toasted) == 59
    assert all(len(v) == 3 * 1400 for e in toasted for v in e[3].values())
    if work_mem < 1_000_000:
        assert one["stats"].spill_count >= 1
        assert 0 < run["records"] < one["records"]
        assert all(type(c) is InsertRows for c in run["restored"])
        assert sum(c.chunks for c in run["restored"]) == 59 * 3
    else:
        assert one["stats"].spill_count == 0 and run["restored"] == []


@pytest.mark.parametrize("batched", [False, True])
def test_a_refused_chunk_in_a_run_raises_after_the_rows_before_it(
    tmp_path: Path, batched: bool
) -> None:
    """A chunk out of sequence (row 30's last chunk logged as chunk_seq 3): the run
    replayed whole (`HeapRows.toast_replay`) hands on the rows before it, then raises
    the DecodeError the Python replay (`_ToastState.append`) raises, with its message,
    LSN and xid."""
    runs = list(toast_runs(damaged=30))
    rb, sink, _store = make_buffer(tmp_path, work_mem=1 << 30)
    run = runs[0]
    rb.process_xid(run.xid, run.first_lsn)
    rb.set_base_snapshot(run.xid, run.first_lsn, object())
    if batched:
        rb.queue_run(run.xid, run.first_lsn, run.changes)
    else:
        for c in run.changes:
            rb.queue_change(run.xid, c.lsn, c)
    with pytest.raises(DecodeError) as info:
        rb.commit(run.xid, run.end_lsn, run.end_lsn + 8, commit_time=0, origin=None)
    bad = [c for c in run.changes if c.on_toast_relation][29 * 3 + 2]
    assert str(info.value).startswith("got sequence entry 3 for toast chunk 1030 instead of seq 2")
    assert (info.value.lsn, info.value.xid) == (bad.lsn, 700)
    assert [e[0] for e in sink.log] == ["begin"] + ["change"] * 30  # rows 0..29


def _replay_of(tmp: Path, runs: list[InsertRun], batched: bool) -> tuple[list[Any], Any]:
    """The sink log and the error (class, message, lsn, xid) of `runs` (of one xid)
    queued each as one InsertRows (`batched`) or as its changes, then committed."""
    rb, sink, _store = make_buffer(tmp, work_mem=1 << 30)
    first, last = runs[0], runs[-1]
    rb.process_xid(first.xid, first.first_lsn)
    rb.set_base_snapshot(first.xid, first.first_lsn, object())
    for run in runs:
        if batched:
            rb.queue_run(run.xid, run.first_lsn, run.changes)
        else:
            for c in run.changes:
                rb.queue_change(run.xid, c.lsn, c)
    error = None
    try:
        rb.commit(last.xid, last.end_lsn, last.end_lsn + 8, commit_time=0, origin=None)
    except DecodeError as exc:
        error = (type(exc), str(exc), exc.lsn, exc.xid)
    return list(sink.log), error


@settings(max_examples=150, deadline=None)
@given(
    chunks=st.lists(
        st.tuples(
            st.sampled_from([3, 3, 3, 2]),
            st.sampled_from([0x0002, 0x0002, 0x0003]),
            st.sampled_from([24, 24, 24, 20, 32]),
            st.integers(0, 3),  # chunk_id 500 + this
            st.integers(-1, 3),  # chunk_seq
            st.binary(max_size=40),
            st.lists(st.tuples(st.integers(0, 60), st.integers(0, 255)), max_size=3),
            st.integers(0, 60),  # cut the tuple data to at most this plus 9
        ),
        min_size=1,
        max_size=8,
    ),
    rows=st.integers(1, 4),
    tail=st.booleans(),
)
def test_toast_replay_of_random_chunks_is_the_python_replay(
    tmp_path_factory: pytest.TempPathFactory, chunks: list[Any], rows: int, tail: bool
) -> None:
    """Chunk tuples of every shape (damaged headers, lengths, attribute counts, nulls,
    sequence gaps, several values) between a run's rows, the run ending with a row or
    (`tail`) with chunks, then a run of another relation whose first row takes the
    chunks still held: the runs replayed whole (chunks collected natively,
    `toast_replay`, handing back what is still held) hand the sink the same rows with
    the same TOAST mappings as their changes queued one by one (the Python
    `_ToastState`), and raise the same DecodeError (message, LSN, xid) after the same
    rows, or none."""
    insert = next(
        x
        for v, x in _pool()
        if v == 15 and (x.rmid, x.info & 0x70) == (10, 0x00) and x.main_data[2] & 0x1C == 1 << 3
    )
    writer = WalWriter(magic=0xD110)

    def row(rel: int | None = None) -> None:
        body = record_body(blocks_of(insert, rel), insert.main_data)
        writer.add(insert.rmid, insert.info, 700, body)

    row()
    per_row = max(1, len(chunks) // rows)
    for i, (natts, infomask, hoff, cid, seq, payload, edits, cut) in enumerate(chunks):
        data = bytearray(_chunk_tuple(500 + cid, seq, payload))
        for at, value in edits:
            if at < len(data):
                data[at] = value
        raw = (natts, infomask, hoff, bytes(data[: cut + 9]))
        writer.add(10, 0x00, 700, _chunk_body(0, 0, b"", raw=raw))
        if (i + 1) % per_row == 0:
            row()
    if len(chunks) % per_row and not tail:
        row()
    row(99_999)  # another relation: a run of its own
    row(99_999)
    bare = decoder_for(15).without_decode
    items = _items(writer.data(), writer.base, bare, runs=True, seg=writer.seg_size)
    runs = [i for i in items if type(i) is InsertRun]
    assert len(runs) == len(items) == 2 and runs[0].changes.chunks == len(chunks)
    tmp = tmp_path_factory.mktemp("toast")
    assert _replay_of(tmp / "run", runs, True) == _replay_of(tmp / "one", runs, False)
