"""Row runs (`RowRun`, the lazy `changes` sequence) against test_decoding, same WAL.

The reorder buffer hands plain changes on in runs; `PluginSink.changes` hands a run of
one table definition and op to a plugin's `changes` callback as a `RowRun`, whose rows
are built only when read. This test decodes workloads that make runs of every kind
with a text plugin that has a `changes` callback (each row printed through
test_decoding's `change`), so the output must still equal a real test_decoding slot's
line for line. It also checks every run it was given: one op and one relation
definition for all its rows (a run never spans DDL inside a transaction), and `raws` and
`lsns` are exactly the logged tuples and LSNs of the rows it builds.
"""

from __future__ import annotations

import dataclasses
import io
from collections.abc import Sequence
from typing import Any

import pytest

from service.impl import selected
from service.output.api import ChangeOp, PluginContext, RowChange, TxnInfo
from service.output.text import TestDecodingPlugin
from service.reorder import replay
from service.reorder.replay import RUN_MAX
from service.types.rowdecode import DecodedRow, RowRun, RunList
from tests.integration.decoding_support import compare
from tests.integration.test_text_plugin_vs_test_decoding import assert_same

pytestmark = pytest.mark.integration


class _RunPlugin(TestDecodingPlugin):
    """The text plugin with a `changes` callback that checks each run it is given."""

    def __init__(self) -> None:
        super().__init__()
        self.runs: list[tuple[str, int]] = []  # (op, length) of each RowRun
        self.row_runs: list[tuple[int, RowRun]] = []  # (top xid, run)
        self.lists: list[tuple[int, list[RowChange]]] = []  # (top xid, rows) of the others
        self.native_ops: set[str] = set()  # the ops of runs whose rows are native HeapRows
        self.run_lists: list[tuple[int, list[int]]] = []  # (top xid, run lengths)
        self.native_lens: list[int] = []  # the lengths of the runs of native rows

    def changes(self, ctx: PluginContext, txn: TxnInfo, changes: Sequence[RowChange]) -> None:
        if type(changes) is RunList:
            # A transaction's changes of several tables: its RowRuns in order, one call;
            # as a sequence, their rows.
            assert len(changes.runs) > 1, changes
            self.run_lists.append((txn.xid, [len(r) for r in changes.runs]))
            assert [r.lsn for r in changes] == [lsn for r in changes.runs for lsn in r.lsns]
            assert len(changes) == sum(len(r) for r in changes.runs)
            for run in changes.runs:
                self.changes(ctx, txn, run)
            return
        if type(changes) is RowRun:
            rows = list(changes)
            # An InsertRun's rows come as the native HeapRows, whose tuples are built
            # (equal, not the same objects) only when asked for.
            native = not isinstance(changes.raws, list)
            raws = (
                [
                    c.new_tuple if c.new_tuple is not None else c.old_tuple
                    for c in changes.raws.changes()  # type: ignore[union-attr]
                ]
                if native
                else changes.raws
            )
            if native:
                self.native_ops.add(changes.op.value)
                self.native_lens.append(len(changes))
            assert len(rows) == len(raws) == len(changes.lsns) > 0
            for row, raw, lsn in zip(rows, raws, changes.lsns, strict=True):
                assert row.op is changes.op and row.lsn == lsn
                assert row.relation is changes.relation, (row.relation, changes.relation)
                logged = row.old if row.op is ChangeOp.DELETE else row.new
                assert isinstance(logged, DecodedRow)
                assert logged.raw == raw if native else logged.raw is raw
                assert logged.table is changes.table
                if row.op is ChangeOp.UPDATE:  # an old tuple only in a run of such
                    assert (row.old is not None) == changes.with_old
            self.runs.append((changes.op.value, len(rows)))
            self.row_runs.append((txn.xid, changes))
        else:
            assert isinstance(changes, list)
            rows = changes
            self.lists.append((txn.xid, rows))
        for row in rows:
            self.change(ctx, txn, row)


def test_row_runs_equal_test_decoding(pg: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    """Runs of inserts, updates and deletes, mixed-table runs, DDL inside a run, key
    changes and REPLICA IDENTITY FULL deletes: same lines as test_decoding."""
    # On the shared servers other sessions' records cut the reader's runs at random
    # places; pieces of 16 rows go whole here (ROWS_ALONE), so that every kind of run
    # reaches the plugin as native rows however the WAL was interleaved.
    monkeypatch.setattr(replay, "ROWS_ALONE", 16)
    plugins: list[_RunPlugin] = []

    def make() -> _RunPlugin:
        plugins.append(_RunPlugin())
        return plugins[-1]

    copy_rows = "".join(f"{g}\t{g}.5\n" for g in range(1000, 1400))
    out = compare(
        pg,
        [
            "CREATE TABLE r1 (id int PRIMARY KEY, v text)",
            "CREATE TABLE r2 (id int PRIMARY KEY, n numeric)",
            "CREATE TABLE rf (id int, v text)",
            "ALTER TABLE rf REPLICA IDENTITY FULL",
        ],
        [
            "INSERT INTO r1 SELECT g, 'v' || g FROM generate_series(1, 600) g",
            "BEGIN; INSERT INTO r1 SELECT g, 'a' FROM generate_series(601, 700) g;"
            " INSERT INTO r2 SELECT g, g FROM generate_series(1, 100) g;"
            " INSERT INTO r1 SELECT g, 'b' FROM generate_series(701, 750) g; COMMIT",
            # DDL between the inserts of one transaction: the rows after it have w
            "BEGIN; INSERT INTO r1 SELECT g, 'c' FROM generate_series(751, 800) g;"
            " ALTER TABLE r1 ADD COLUMN w int;"
            " INSERT INTO r1 SELECT g, 'd', g FROM generate_series(801, 850) g; COMMIT",
            lambda conns: (
                conns[0].cursor().copy_expert("COPY r2 FROM STDIN", io.StringIO(copy_rows))
            ),  # multi-insert
            "UPDATE r1 SET v = v || '!' WHERE id <= 400",
            # pgbench's shape: one row each of several tables, updates then an insert
            "BEGIN; UPDATE r2 SET n = n + 1 WHERE id = 1;"
            " UPDATE r1 SET v = 'p' WHERE id = 590;"
            " UPDATE r2 SET n = n + 1 WHERE id = 2;"
            " INSERT INTO rf VALUES (100, 'x'); COMMIT",
            "UPDATE r1 SET id = id + 10000 WHERE id <= 5",  # key change: old key logged
            "DELETE FROM r1 WHERE id > 500 AND id < 10000",
            "INSERT INTO rf SELECT g, 'f' || g FROM generate_series(1, 30) g",
            # REPLICA IDENTITY FULL updates: a run of updates with their old tuples
            "UPDATE rf SET v = v || '!' WHERE id > 5",
            "DELETE FROM rf WHERE id > 10",
        ],
        plugin=make,
    )
    assert_same(
        out,
        "table public.r1: INSERT: id[integer]:850 v[text]:'d' w[integer]:850",
        "table public.rf: DELETE: id[integer]:11 v[text]:'f11!'",
        min_lines=2100,
    )
    (plugin,) = plugins
    ops = {op for op, _ in plugin.runs}
    assert ops == {"INSERT", "UPDATE", "DELETE"}, plugin.runs
    # Under the native core the updates and deletes came as runs of native rows too
    # (InsertRuns of their kind), not only the inserts.
    if selected() == "native":
        assert plugin.native_ops == {"INSERT", "UPDATE", "DELETE"}, plugin.native_ops
    # Long runs, never past RUN_MAX.
    assert max(n for _, n in plugin.runs) <= RUN_MAX, plugin.runs
    if selected() == "native":
        # Each run of native rows is one InsertRun's piece, whole: where other sessions'
        # records cut the reader's runs is the shared servers' doing, but a piece shorter
        # than ROWS_ALONE never goes alone (it joins the run around it as its rows).
        assert plugin.native_lens, plugin.runs
        assert min(plugin.native_lens) >= replay.ROWS_ALONE, plugin.native_lens
    else:
        # The Python core queues single changes, joined up to RUN_MAX however the WAL
        # was interleaved: the 600-row INSERT is one run.
        assert max(n for _, n in plugin.runs) >= 600, plugin.runs
    assert plugin.lists  # the key change: an UPDATE with its old key is no run
    # A transaction of single rows of several tables comes as its pieces, in order,
    # each a run of one table and op (`HistoryRows.runs`), none as a list of rows.
    (mixed,) = {x for x, run in plugin.row_runs for r in run if r.new and r.new[1].text == "p"}
    pieces = [(r.relation.name, r.op.value, len(r)) for x, r in plugin.row_runs if x == mixed]
    assert pieces == [
        ("r2", "UPDATE", 1),
        ("r1", "UPDATE", 1),
        ("r2", "UPDATE", 1),
        ("rf", "INSERT", 1),
    ], pieces
    assert all(x != mixed for x, _ in plugin.lists)
    assert (mixed, [1, 1, 1, 1]) in plugin.run_lists, plugin.run_lists  # in one call
    # The resolver cuts the same changes alike when asked again, and refuses the whole
    # list (None: converted one by one) when one of them is an UPDATE with an old tuple.
    heap = [c for x, r in plugin.row_runs if x == mixed for c in r.changes]
    again = out.session.rows.runs(heap, mixed, lambda c: None)
    assert type(again) is RunList
    assert [(r.relation.name, len(r)) for r in again.runs] == [(n, k) for n, _, k in pieces]
    # one piece alone is that piece's RowRun
    assert type(out.session.rows.runs(heap[:1], mixed, lambda c: None)) is RowRun
    keyed = dataclasses.replace(heap[1], old_tuple=heap[1].new_tuple)
    assert out.session.rows.runs([heap[0], keyed, *heap[2:]], mixed, lambda c: None) is None
    # The resolver itself never makes one run of changes of two definitions: in the
    # DDL transaction (its first inserts come as a run of their own, an InsertRun, or
    # in a mixed run, cut by the DDL capture's own change), a change of r1 logged before
    # the ALTER joins no run with one after.
    (xid, c_rows) = next(
        (x, rows)
        for x, rows in [*plugin.lists, *((x, list(run)) for x, run in plugin.row_runs)]
        if any(r.new is not None and r.new[1].text == "c" for r in rows)
    )
    r1_runs = [r for x, r in plugin.row_runs if x == xid and r.relation.name == "r1"]
    # The rows after the ALTER come as one run, or as more where another session's
    # record cut the reader's run into pieces (a piece under ROWS_ALONE joins a list).
    afters = [r for r in r1_runs if "w" in {c.name for c in r.relation.columns}]
    assert afters, r1_runs
    after = min(afters, key=lambda r: r.changes[0].lsn)
    # any run of r1 before the ALTER is of the old definition, whole
    befores = [r for r in r1_runs if all(r is not a for a in afters)]
    assert all("w" not in {c.name for c in r.relation.columns} for r in befores)
    first = after.changes[0]
    earlier = dataclasses.replace(first, lsn=c_rows[0].lsn)  # same relfilenode, pre-ALTER
    rows = out.session.rows
    assert rows.run([earlier, first], xid, lambda c: None) is None
    alone = rows.run([earlier], xid, lambda c: None)
    assert alone is not None and "w" not in {c.name for c in alone.relation.columns}


def test_toasted_insert_runs_equal_test_decoding(
    pg: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Inserts of values stored out of line (uncompressed, and pglz-compressed), among
    rows with none, in single inserts and a COPY (a multi-insert whose chunks all come
    before its rows): same lines as test_decoding. Under the native reader their TOAST
    chunks come inside the InsertRuns, and the replay collects them natively
    (`HeapRows.toast_replay`): the Python chunk deform (`toast_chunk`) sees only the
    few chunks no run holds (those before a run's first row)."""
    calls = [0]
    deform = replay.toast_chunk

    def counting(change: Any) -> Any:
        calls[0] += 1
        return deform(change)

    monkeypatch.setattr(replay, "toast_chunk", counting)
    plugins: list[_RunPlugin] = []

    def make() -> _RunPlugin:
        plugins.append(_RunPlugin())
        return plugins[-1]

    big = "(SELECT string_agg(md5(g::text || '-' || k), '') FROM generate_series(1, 200) k)"
    half = (
        "(SELECT string_agg(md5(g::text || '-' || k) || repeat('x', 32), '')"
        " FROM generate_series(1, 200) k)"
    )
    copy_rows = "".join(f"{g}\t{'c' * 40}{g}\t{str(g) * 3000}\n" for g in range(1000, 1040))
    out = compare(
        pg,
        [
            "CREATE TABLE t1 (id int PRIMARY KEY, ext text, cmp text)",
            "ALTER TABLE t1 ALTER COLUMN ext SET STORAGE EXTERNAL",
        ],
        [
            # 6,400 bytes of hex, external uncompressed (ext); 12,800 bytes, half of
            # them 'x', external pglz-compressed (cmp)
            f"INSERT INTO t1 SELECT g, {big}, {half} FROM generate_series(1, 150) g",
            "INSERT INTO t1 SELECT g, CASE WHEN g % 3 = 0 THEN repeat(md5(g::text), 160)"
            " ELSE 'short' END, 'x' FROM generate_series(151, 450) g",
            lambda conns: (
                conns[0]
                .cursor()
                .copy_expert("COPY t1 (id, cmp, ext) FROM STDIN", io.StringIO(copy_rows))
            ),
        ],
        plugin=make,
    )
    assert_same(out, "table public.t1: INSERT: id[integer]:449 ext[text]:'short' cmp[text]:'x'")
    # 6,400 bytes: 4 chunks (ext), and at least 2 (cmp); 5,120: 3; 12,000: 7 (COPY)
    chunks = 150 * (4 + 2) + 100 * 3 + 40 * 7
    print(f"toast_chunk calls: {calls[0]}")  # shown with pytest -s
    if selected() == "native":
        # The COPY's chunks all come before its multi-inserts (no run open yet: a chunk
        # never starts one), and so do those of each run's first row; alone on the
        # server that leaves 85-99 of the ~1,780 chunks to Python. Other databases' WAL
        # between this transaction's records (the suite's parallel tests) ends runs
        # early, so the bound here is only that runs took chunks at all: the old
        # reader, whose runs carried none, deformed every chunk in Python.
        assert calls[0] < chunks, calls
    else:
        assert calls[0] >= chunks, calls
