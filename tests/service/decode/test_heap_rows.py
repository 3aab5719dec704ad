"""HeapRows (service._native.HeapRows): the rows of a run (inserts, updates that log
only their new tuple, or deletes that log only their old tuple or key) kept in Rust.

The native reader armed with runs hands each run's inserts on as one HeapRows (the 6th
field of the tuple `make_run` gets) instead of a list of HeapChanges. Checked on the
golden PG15/PG18 WAL against the reader armed without runs (the same records'
PredecodedRecord events): the HeapChanges it builds on demand are those events, row
for row and class for class; its properties agree with them; a slice is a list slice
sharing the rows; `fill` is its Python loop; and the run encoders reading the rows in
place (`RowPlan.encode_rows`, `TextPlan.rows_lines`) give what `encode_events` and
`lines` give for the same RawTuples and LSNs.

The reader is driven through its native object (`predecode_heap`, `records`, `take`)
so that each run comes as its raw fields, whatever class the glue wraps them in.
"""

from __future__ import annotations

from functools import cache, partial
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from connectors.avro.schema import build_table_plan
from service import _native
from service.decode.dispatch import decoder_for
from service.decode.events import ChangeKind, HeapChange, PredecodedRecord, RawTuple
from service.decode.native_heap import heap_decoder
from service.output.api import ColumnMeta, RelationInfo
from service.output.native_text import compile_text_plan
from service.schema.tabledef import ColumnDef, TableDef
from service.wal.native import NativeXLogReader
from tests.connectors.avro.test_native_rows import _native_plan

DATA = Path(__file__).resolve().parents[1] / "data"
DECODER = heap_decoder()
PARTS = (b"<head>", b"<seq>", b"<mid>", b"<tail>", b"<block>")


def _walk(data: bytes, lsn: int, version: int, *, runs: bool) -> list[Any]:
    """Every item the armed native reader hands on for `data`: runs (with `runs`) as
    their raw `(first_lsn, lsn, end_lsn, xid, records, rows)` tuples."""
    reader = NativeXLogReader(lsn)
    reader._native.predecode_heap(
        DECODER,
        partial(tuple.__new__, PredecodedRecord),
        sorted(decoder_for(version).without_decode),
        (lambda fields: fields) if runs else None,
    )
    reader.feed(data, lsn)
    _, error = reader._native.records()
    assert error is None
    items: list[Any] = []
    while got := reader._native.take(256):
        items.extend(got)
    return items


@cache
def golden_runs() -> list[tuple[int, Any, list[HeapChange]]]:
    """(version, the run's HeapRows, the events the reader armed without runs gives
    for the records the run stands for) of every run of the golden WAL."""
    out: list[tuple[int, Any, list[HeapChange]]] = []
    for f in sorted(DATA.glob("wal*_*.bin")):
        lsn = int(f.stem.split("_")[1], 16)  # wal<version>_<lsn hex>.bin
        version = int(f.stem[3:5])
        data = f.read_bytes()
        plain = _walk(data, lsn, version, runs=False)
        at = 0
        for item in _walk(data, lsn, version, runs=True):
            if type(item) is not tuple:
                at += 1
                continue
            records, rows = item[4], item[5]
            part = plain[at : at + records]
            assert all(isinstance(p, PredecodedRecord) for p in part)
            out.append((version, rows, [e for p in part for e in p.events]))
            at += records
        assert at == len(plain)
    return out


def _tuple(change: HeapChange) -> RawTuple:
    """The one tuple a run's row holds: an insert's or update's new one, a delete's
    old one (the other is None)."""
    if change.kind is ChangeKind.DELETE:
        assert change.new_tuple is None and change.old_tuple is not None
        return change.old_tuple
    assert change.new_tuple is not None and change.old_tuple is None
    return change.new_tuple


def _size(change: HeapChange) -> int:
    """The size of a run row's tuple data."""
    return len(_tuple(change).data)


def _runs_strategy() -> st.SearchStrategy[int]:
    return st.integers(0, len(golden_runs()) - 1)


def test_rows_are_the_unbatched_changes() -> None:
    """Every run: `changes()` and `change(i)` are the unbatched reader's events (the
    same classes, equal in every field), and `len`, `lsns`, `first_lsn`, `last_lsn`,
    `xid`, `locator` and `data_bytes` agree with them."""
    runs = golden_runs()
    assert {v for v, _, _ in runs} == {15, 18}
    assert len(runs) >= 10 and max(len(r) for _, r, _ in runs) >= 1000
    # Update runs too (the golden WAL's deletes log no old tuple: catalog rows; delete
    # runs are checked on live WAL, tests/integration/test_row_runs.py).
    kinds = {ChangeKind(rows.kind) for _, rows, _ in runs}
    assert kinds == {ChangeKind.INSERT, ChangeKind.UPDATE}
    for _, rows, expected in runs:
        assert type(rows) is _native.HeapRows
        changes = rows.changes()
        assert changes == expected
        assert all(type(c) is HeapChange and type(_tuple(c)) is RawTuple for c in changes)
        assert all(c.kind is ChangeKind(rows.kind) for c in changes)
        assert [rows.change(i) for i in range(len(rows))] == expected
        assert len(rows) == len(expected)
        assert rows.lsns() == [c.lsn for c in expected]
        assert (rows.first_lsn, rows.last_lsn) == (expected[0].lsn, expected[-1].lsn)
        assert rows.xid == expected[0].xid
        assert rows.locator == expected[0].locator
        assert rows.locator is changes[0].locator  # the reader's cached object
        assert rows.data_bytes == sum(map(_size, expected))
        assert rows.head == (
            rows.kind,
            rows.first_lsn,
            rows.last_lsn,
            rows.xid,
            rows.locator,
            len(rows),
            rows.data_bytes,
            rows.chunks,
            rows.olds,
            rows.bares,
        )


@settings(max_examples=150, deadline=None)
@given(data=st.data())
def test_slices_are_list_slices(data: st.DataObject) -> None:
    """`slice(i, j)`, and a slice of that slice, are the list slices of the changes
    (changes, change, lsns, len, data_bytes, first and last LSN); an empty one is
    allowed and has no LSN."""
    _, whole, expected = golden_runs()[data.draw(_runs_strategy())]
    rows = whole
    for _ in range(2):
        i = data.draw(st.integers(0, len(expected)))
        j = data.draw(st.integers(i, len(expected)))
        rows, expected = rows.slice(i, j), expected[i:j]
        assert (rows.xid, rows.locator) == (whole.xid, whole.locator)
        assert len(rows) == len(expected)
        assert rows.changes() == expected
        assert [rows.change(k) for k in range(len(rows))] == expected
        assert rows.lsns() == [c.lsn for c in expected]
        assert rows.data_bytes == sum(map(_size, expected))
        if expected:
            assert (rows.first_lsn, rows.last_lsn) == (expected[0].lsn, expected[-1].lsn)
        else:
            for name in ("first_lsn", "last_lsn"):
                with pytest.raises(ValueError):
                    getattr(rows, name)


def test_bad_bounds_raise() -> None:
    """`slice` outside 0 <= i <= j <= len is a ValueError, `change` outside [0, len)
    an IndexError, `fill` from past the end a ValueError; in a slice, relative to it."""
    _, whole, _ = max(golden_runs(), key=lambda r: len(r[1]))
    for rows in (whole, whole.slice(3, 10)):
        n = len(rows)
        for i, j in ((-1, 0), (0, n + 1), (2, 1), (n + 1, n + 1)):
            with pytest.raises(ValueError):
                rows.slice(i, j)
        for i in (-1, n, n + 100):
            with pytest.raises(IndexError):
                rows.change(i)
        for at in (-1, n + 1):
            with pytest.raises(ValueError):
                rows.fill(at, 100, 0, 0)
        assert rows.fill(n, 100, 0, 0) == (n, 0)


def _fill(sizes: list[int], at: int, room: int, base: int, overhead: int) -> tuple[int, int]:
    """The loop HeapRows.fill stands for, over the rows' tuple data sizes."""
    end, added = at, 0
    while end < len(sizes):
        added += base + sizes[end]
        end += 1
        if added + (end - at) * overhead >= room:
            break
    return end, added


@settings(max_examples=300, deadline=None)
@given(
    data=st.data(),
    room=st.one_of(st.integers(-1000, 0), st.integers(-(2**40), 2**40)),
    base=st.integers(-100, 500),
    overhead=st.integers(-50, 200),
)
def test_fill_is_the_python_loop(data: st.DataObject, room: int, base: int, overhead: int) -> None:
    """`fill(at, room, base, overhead)` on a random window is the Python loop on its
    rows' tuple data sizes, room <= 0 and negative sizes included."""
    _, rows, expected = golden_runs()[data.draw(_runs_strategy())]
    i = data.draw(st.integers(0, len(expected)))
    j = data.draw(st.integers(i, len(expected)))
    rows = rows.slice(i, j)
    sizes = [_size(c) for c in expected[i:j]]
    at = data.draw(st.integers(0, len(sizes)))
    assert rows.fill(at, room, base, overhead) == _fill(sizes, at, room, base, overhead)


# --- the run encoders -------------------------------------------------------------------

# The golden tables whose layout the tuples show: (id int4, name text, k int4, f float8,
# ts timestamptz) and (id int4, name text), by their WAL relation number per version.
_WIDE = (
    ("id", 23, "integer", 4, "i"),
    ("name", 25, "text", -1, "i"),
    ("k", 23, "integer", 4, "i"),
    ("f", 701, "double precision", 8, "d"),
    ("ts", 1184, "timestamp with time zone", 8, "d"),
)
_NARROW = _WIDE[:2]
TABLES = {(15, 22210): _WIDE, (18, 19159): _WIDE, (15, 22227): _NARROW, (18, 19177): _NARROW}


def _table(
    rel_number: int, columns: tuple[tuple[str, int, str, int, str], ...], *, late: bool = False
) -> tuple[TableDef, RelationInfo]:
    """The table definition of `columns` (with `late`, one more int4 column added with
    a default, which every logged row lacks) and its RelationInfo keyed by `id`."""
    if late:
        columns = (*columns, ("late", 23, "integer", 4, "i"))
    cols = tuple(
        ColumnDef(
            attnum=k,
            name=name,
            type_oid=oid,
            typmod=-1,
            not_null=name == "id",
            dropped=False,
            generated="",
            attlen=attlen,
            attbyval=attlen in (1, 2, 4, 8),
            attalign=align,
            attstorage="x" if attlen == -1 else "p",
            has_missing=name == "late",
            missing_text="{7}" if name == "late" else None,
        )
        for k, (name, oid, _, attlen, align) in enumerate(columns, 1)
    )
    table = TableDef(rel_number, rel_number, 1663, 0, 0, "public", "golden", "r", "d", cols, (1,))
    metas = tuple(
        ColumnMeta(name, k, oid, type_name, -1, name == "id")
        for k, (name, oid, type_name, _, _) in enumerate(columns, 1)
    )
    return table, RelationInfo(rel_number, "public", "golden", "d", ("id",), metas, 0x100)


def _row_plan(table: TableDef, rel: RelationInfo) -> Any:
    plan = build_table_plan("native", rel, frozenset(), "precise", lambda *_: None)
    return _native_plan(table, SimpleNamespace(rel=rel, plan=plan, decimal_mode="precise"))  # type: ignore[arg-type]


def _text_plan(table: TableDef, rel: RelationInfo) -> Any:
    plan, why = compile_text_plan(table, rel, lambda name, t: f" {name}[{t}]:", _native)
    assert plan is not None, why
    return plan


def _planned_runs(*, late: bool = False) -> list[tuple[Any, Any, Any, list[HeapChange]]]:
    """(row plan, text plan, rows, changes) of every golden insert run of a table in
    TABLES (its update runs come after an ADD COLUMN, with a layout TABLES does not
    describe; update and delete runs are encoded on live WAL in
    tests/integration/test_row_runs.py)."""
    out = []
    for version, rows, expected in golden_runs():
        columns = TABLES.get((version, rows.locator.rel_number))
        if columns is not None and rows.kind == ChangeKind.INSERT:
            table, rel = _table(rows.locator.rel_number, columns, late=late)
            out.append((_row_plan(table, rel), _text_plan(table, rel), rows, expected))
    assert {len(p[2]) > 100 for p in out} == {True, False}
    return out


def _windows(rows: Any, n: int) -> list[tuple[int, int]]:
    return [(0, n), (1, n), (n // 3, n // 2), (n - 1, n), (n, n)]


def test_encode_rows_is_encode_events() -> None:
    """`RowPlan.encode_rows` on each golden run of a planned table, and on windows of
    it, gives `encode_events`' (keys, values, reason) for the same RawTuples and LSNs,
    with and without a key, for an insert's and a delete's envelope; every row encodes."""
    for plan, _, rows, expected in _planned_runs():
        for i, j in _windows(rows, len(expected)):
            window, changes = rows.slice(i, j), expected[i:j]
            tuples = [c.new_tuple for c in changes]
            lsns = [c.lsn for c in changes]
            for key_header, op, parts in ((b"KH", "c", PARTS), (None, "d", (*PARTS[:4], None))):
                args = (b"VH", key_header, parts, 1000 + i, 7, op, 1_700_000_000_123_456_789)
                got = plan.encode_rows(window, *args)
                assert got == plan.encode_events(tuples, lsns, *args)
                keys, values, reason = got
                assert reason is None and len(values) == len(keys) == len(changes)
                assert all(k is None if key_header is None else k[:2] == b"KH" for k in keys)


def test_rows_lines_is_lines() -> None:
    """`TextPlan.rows_lines` on each golden run of a planned table, and on windows of
    it, from several starts (past the end too), gives `lines`' (lines, reason) for the
    same RawTuples and LSNs."""
    for _, plan, rows, expected in _planned_runs():
        for i, j in _windows(rows, len(expected)):
            window, changes = rows.slice(i, j), expected[i:j]
            tuples = [c.new_tuple for c in changes]
            lsns = [c.lsn for c in changes]
            for start in {0, 1, len(changes) // 2, len(changes), len(changes) + 3}:
                for skip_nulls in (False, True):
                    got = plan.rows_lines(window, start, "table public.golden: INSERT:", skip_nulls)
                    assert got == plan.lines(
                        tuples, lsns, start, "table public.golden: INSERT:", skip_nulls
                    )
                    assert got[1] is None and len(got[0]) == max(0, len(changes) - start)


def test_a_row_that_falls_back_stops_both_alike() -> None:
    """With a column added later with a default (which every logged row lacks), each
    row is the Python path's: `encode_rows` and `rows_lines` stop at it with
    `encode_events`' and `lines`' reason."""
    why = "attribute missing with a default"
    for row_plan, text_plan, rows, expected in _planned_runs(late=True):
        tuples = [c.new_tuple for c in expected]
        lsns = [c.lsn for c in expected]
        args = (b"VH", b"KH", PARTS, 0, 0, "c", 0)
        got = row_plan.encode_rows(rows, *args)
        assert got == row_plan.encode_events(tuples, lsns, *args) == ([], [], why)
        lines = text_plan.rows_lines(rows, 1, "p:", False)
        assert lines == text_plan.lines(tuples, lsns, 1, "p:", False)
        assert lines == ([], why if len(expected) > 1 else None)
