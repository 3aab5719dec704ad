"""PluginContext.write_runs: a transaction's runs of several tables handed on in one
call of the runs writer when there is one (the worker's: one sink call for them all),
else run by run, exactly as write_run would each; refused outside a callback."""

from __future__ import annotations

from typing import Any

import pytest

from service.errors import PluginError
from service.output.api import OutputRecord, PluginContext, RecordRun


def _runs() -> list[RecordRun]:
    return [
        RecordRun("t.a", [b"k1"], [b"v1"], [0x10], (("h", b"1"),), "c"),
        RecordRun("t.b", [b"k2", b"k3"], [b"v2", b"v3"], [0x20, 0x28], None, "u"),
        RecordRun("t.a", [b"k4", b"k4"], [b"v4", None], [0x30, 0x30], None, "d"),
    ]


def test_without_a_runs_writer_each_run_goes_as_write_run() -> None:
    singles: list[tuple[int, int, Any]] = []
    runs: list[tuple[int, int, RecordRun]] = []
    ctx = PluginContext(
        "s",
        "avro",
        {},
        lambda lsn, xid, d: singles.append((lsn, xid, d)),
        run_writer=lambda lsn, xid, r: runs.append((lsn, xid, r)),
    )
    ctx.accept_writes, ctx.write_xid = True, 7
    given = _runs()
    ctx.write_runs(given)
    assert runs == [(0x10, 7, given[0]), (0x20, 7, given[1]), (0x30, 7, given[2])]
    assert singles == []


def test_without_any_run_writer_the_records_go_one_by_one() -> None:
    singles: list[tuple[int, int, Any]] = []
    ctx = PluginContext("s", "avro", {}, lambda lsn, xid, d: singles.append((lsn, xid, d)))
    ctx.accept_writes, ctx.write_xid = True, 7
    ctx.write_runs(_runs())
    assert [(lsn, r.topic, r.key, r.value) for lsn, _, r in singles] == [
        (0x10, "t.a", b"k1", b"v1"),
        (0x20, "t.b", b"k2", b"v2"),
        (0x28, "t.b", b"k3", b"v3"),
        (0x30, "t.a", b"k4", b"v4"),
        (0x30, "t.a", b"k4", None),
    ]
    assert all(isinstance(r, OutputRecord) for _, _, r in singles)


def test_a_runs_writer_gets_them_all_in_one_call_at_the_first_lsn() -> None:
    calls: list[tuple[int, int, list[RecordRun]]] = []
    ctx = PluginContext(
        "s",
        "avro",
        {},
        lambda lsn, xid, d: pytest.fail("a single write"),
        run_writer=lambda lsn, xid, r: pytest.fail("a run written alone"),
        runs_writer=lambda lsn, xid, rs: calls.append((lsn, xid, list(rs))),
    )
    ctx.accept_writes, ctx.write_xid = True, 9
    given = _runs()
    ctx.write_runs(given)
    assert calls == [(0x10, 9, given)]


def test_write_runs_outside_a_callback_is_refused() -> None:
    ctx = PluginContext(
        "s",
        "avro",
        {},
        lambda lsn, xid, d: None,
        runs_writer=lambda lsn, xid, rs: pytest.fail("written"),
    )
    with pytest.raises(PluginError, match="outside a callback"):
        ctx.write_runs(_runs())
