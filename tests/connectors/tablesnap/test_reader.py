"""Pure parts of the initial snapshot: the plugin emission with
Debezium's snapshot markers, progress (metrics, log-free bar), filters, the worker's
snapshot horizon, and send-format rewrites of values against known stored images."""

from __future__ import annotations

import io
import struct
from decimal import Decimal
from typing import Any

import pytest

from connectors.tablesnap.reader import PluginEmitter, SnapshotProgress
from service.app.metrics import Metrics
from service.app.worker import snapshot_horizon
from service.config import FilterSettings
from service.output.api import (
    ChangeOp,
    ColumnValue,
    PluginContext,
    PluginWrapper,
    RelationInfo,
    RowChange,
    TxnInfo,
)
from service.output.filters import TableFilter
from service.schema.tabledef import CatalogSnapshot
from service.types.convert import to_python, to_text
from service.types.registry import TypeRegistry
from service.types.sendform import snapshot_registry, to_stored
from tests.consumers.snapshot_marker_workload import GOLDEN, SCENARIOS


class _Plugin:
    """Records what the wrapper hands on, with the snapshot marker at each change."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, Any]] = []

    def begin(self, ctx: PluginContext, txn: TxnInfo) -> None:
        self.calls.append(("begin", txn.final_lsn))

    def change(self, ctx: PluginContext, txn: TxnInfo, change: RowChange) -> None:
        assert change.op is ChangeOp.INSERT and change.old is None
        assert change.new is not None
        self.calls.append(("change", (ctx.state.get("snapshot"), change.new[0].value)))

    def commit(self, ctx: PluginContext, txn: TxnInfo, lsn: int) -> None:
        self.calls.append(("commit", lsn))


def _emitter() -> tuple[PluginEmitter, _Plugin, PluginWrapper]:
    plugin = _Plugin()
    wrapper = PluginWrapper(plugin, PluginContext("s", "p", {}, lambda lsn, xid, d: None))
    return PluginEmitter(wrapper), plugin, wrapper


REL = RelationInfo(1, "public", "t", "d", ("id",))
SNAP = CatalogSnapshot(db_oid=5, lsn=0x1000, xmin=10, xmax=12, xip=frozenset({11}), tables=())


def _row(v: int) -> list[ColumnValue]:
    return [ColumnValue("id", 23, "integer", lambda: v, lambda: str(v))]


def test_emitter_marks_last_row_and_clears_state() -> None:
    """One pseudo-transaction with Debezium's markers: "first" on the very first row,
    "last" on the very last, "true" between; afterwards the plugin state says no
    snapshot (stream inserts are op c again)."""
    emitter, plugin, wrapper = _emitter()
    emitter.begin(SNAP, REL.oid)
    for v in (1, 2, 3):
        emitter.row(REL, _row(v))
    emitter.end()
    assert plugin.calls == [
        ("begin", 0x1000),
        ("change", ("first", 1)),
        ("change", ("true", 2)),
        ("change", ("last", 3)),
        ("commit", 0x1000),
    ]
    assert "snapshot" not in wrapper.ctx.state and emitter.rows == 3


def test_emitter_empty_snapshot() -> None:
    """No rows: begin and commit only, state cleared."""
    emitter, plugin, wrapper = _emitter()
    emitter.begin(SNAP, None)
    emitter.end()
    assert plugin.calls == [("begin", 0x1000), ("commit", 0x1000)]
    assert "snapshot" not in wrapper.ctx.state


@pytest.mark.parametrize("scenario", sorted(GOLDEN["scenarios"]))
def test_emitter_markers_equal_debezium(scenario: str) -> None:
    """Per row, the markers the emitter gives a snapshot of the captured scenario's
    tables (in their order, empty ones included) equal Debezium 3.6.1's own."""
    tables = SCENARIOS[scenario]
    rels = {
        name: RelationInfo(100 + i, "public", name, "d", ("id",))
        for i, (name, _) in enumerate(tables)
    }
    emitter, plugin, _ = _emitter()
    emitter.begin(SNAP, rels[tables[0][0]].oid)
    for name, rows in tables:
        for v in range(1, rows + 1):
            emitter.row(rels[name], _row(v))
    emitter.end()
    got = [m for call, m in plugin.calls if call == "change"]
    want = [
        (r["snapshot"], r["id"]) for name, _ in tables for r in GOLDEN["scenarios"][scenario][name]
    ]
    assert got == want


def test_progress_metrics_and_bar() -> None:
    """Rows per table, tables done/total go to the metrics; the bar shows rows/estimate."""
    metrics = Metrics("slot1")
    term = io.StringIO()
    progress = SnapshotProgress(metrics, "slot1", terminal=term)
    progress.start(2)
    progress.table("public.t", 2000)
    progress.advance(1000)
    progress.advance(500)
    progress.table_done()
    progress.table("public.u", 0)
    progress.table_done()
    reg = metrics.registry
    assert (
        reg.get_sample_value("pgcdc_snapshot_rows_total", {"slot": "slot1", "table": "public.t"})
        == 1500
    )
    assert reg.get_sample_value("pgcdc_snapshot_tables_done", {"slot": "slot1"}) == 2
    assert reg.get_sample_value("pgcdc_snapshot_tables_total", {"slot": "slot1"}) == 2
    text = term.getvalue()
    assert "snapshot public.t [" in text and "1500/~2000 rows" in text and "0/? rows" in text


def test_table_filter_rules() -> None:
    """Anchored patterns as the Avro plugin's include/exclude lists."""
    f = TableFilter(FilterSettings(include_schemas=["app.*"], exclude_tables=["app1\\.skip"]))
    assert f("app1", "t") and not f("app1", "skip") and not f("public", "t")
    assert not TableFilter(FilterSettings())("pgcdc", "x")  # excluded by default


def test_snapshot_horizon() -> None:
    """Inside a page the LSN itself; just past a page header, the page start."""
    assert snapshot_horizon(0x1_0000_2345) == 0x1_0000_2345
    assert snapshot_horizon(0x1_0000_2018) == 0x1_0000_2000  # short header (24)
    assert snapshot_horizon(0x1_0100_0028) == 0x1_0100_0000  # long header (40)


REG = TypeRegistry()


@pytest.mark.parametrize(
    ("oid", "send", "value", "text"),
    [
        (23, b"\xff\xff\xff\xfe", -2, "-2"),
        (20, (2**40).to_bytes(8, "big"), 2**40, "1099511627776"),
        # numeric_send: ndigits 2, weight 0, sign +, dscale 2, digits 12, 3400 -> 12.34
        (1700, struct.pack(">hhHHhh", 2, 0, 0, 2, 12, 3400), Decimal("12.34"), "12.34"),
        (1700, struct.pack(">hhHH", 0, 0, 0xC000, 0), Decimal("NaN"), "NaN"),
        (1186, struct.pack(">qii", 5, 3, 14), None, "1 year 2 mons 3 days 00:00:00.000005"),
        (869, bytes((2, 24, 0, 4, 10, 1, 2, 0)), None, "10.1.2.0/24"),
        (1560, struct.pack(">i", 3) + b"\xa0", "101", "101"),
        (3802, b"\x01" + b'{"a": 1}', '{"a": 1}', '{"a": 1}'),
        (
            1007,
            struct.pack(">iiIii", 1, 1, 23, 2, 0)
            + struct.pack(">i", -1)
            + struct.pack(">ii", 4, 7),
            [None, 7],
            "[0:1]={NULL,7}",
        ),
    ],
)
def test_send_format_rewrites(oid: int, send: bytes, value: object, text: str) -> None:
    """A send-format value rewritten to its stored form decodes to the expected value and
    prints as PostgreSQL does."""
    reg = snapshot_registry(REG)
    stored = to_stored(send, reg.get(oid), reg)
    got = to_python(stored, reg.get(oid), reg)
    if value is not None:
        if isinstance(value, Decimal) and value.is_nan():
            assert isinstance(got, Decimal) and got.is_nan()
        else:
            assert got == value
    assert to_text(stored, reg.get(oid), reg) == text
