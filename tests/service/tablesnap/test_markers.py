"""Debezium 3.6's snapshot markers (service.tablesnap.markers) against the capture of
Debezium itself (tests/consumers/golden/debezium-3.6.1.Final-snapshot-markers.json)."""

from __future__ import annotations

import json

import pytest

from service.tablesnap import markers
from tests.consumers.snapshot_marker_workload import GOLDEN, SCENARIOS


def _positions(tables: list[tuple[str, int]]) -> list[tuple[str, int, str]]:
    """(table, id, marker) of every row of a snapshot of `tables`, in order."""
    last_table = max((i for i, (_, rows) in enumerate(tables) if rows), default=-1)
    out = []
    for i, (name, rows) in enumerate(tables):
        for n in range(1, rows + 1):
            marker = markers.initial_marker(
                first_table=i == 0,
                first_in_table=n == 1,
                last_in_table=n == rows,
                last_overall=i == last_table and n == rows,
            )
            out.append((name, n, marker))
    return out


@pytest.mark.parametrize("scenario", sorted(GOLDEN["scenarios"]))
def test_markers_equal_debezium(scenario: str) -> None:
    """Every row's marker equals Debezium's: first table empty (no `first` at all), a
    one-row table in the middle, empty tables in the middle and at the end (`last`
    moves to the last row that exists), one table, one row."""
    captured = GOLDEN["scenarios"][scenario]
    want = [(t, r["id"], r["snapshot"]) for t, _ in SCENARIOS[scenario] for r in captured[t]]
    assert _positions(SCENARIOS[scenario]) == want


def test_golden_rows_are_snapshot_reads_with_null_sequence() -> None:
    """The capture holds every row of each scenario as op `r`, with `source.sequence`
    `[null, "<lsn>"]` (the fact the Avro plugin mirrors for initial snapshot rows)."""
    for scenario, tables in SCENARIOS.items():
        captured = GOLDEN["scenarios"][scenario]
        for name, rows in tables:
            recs = captured[name]
            assert [r["id"] for r in recs] == list(range(1, rows + 1))
            for r in recs:
                assert r["op"] == "r"
                assert json.loads(r["sequence"]) == [None, str(r["lsn"])]


def test_is_initial() -> None:
    """Initial markers are initial; `incremental` and a stream change's `false` are not."""
    for m in ("first", "first_in_data_collection", "true", "last_in_data_collection", "last"):
        assert markers.is_initial(m)
    assert not markers.is_initial("incremental")
    assert not markers.is_initial("false")
    assert not markers.is_initial(None)
