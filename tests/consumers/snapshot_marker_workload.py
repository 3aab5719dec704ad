"""The tables of the snapshot-marker golden capture (capture_debezium_snapshot_markers.py)
and of the test that holds pgcdc's snapshot against it (test_snapshot_markers_golden.py).

Each scenario is one database snapshotted on its own. Table names sort in creation
order, so Debezium's table order (by name) and pgcdc's (by OID) are the same. The
scenarios cover what decides a marker: several tables with the first one and the last
one empty, a one-row table in the middle, an empty one in the middle; two plain tables;
a one-table snapshot; a one-table snapshot of a single row.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def _table(name: str, rows: int) -> list[str]:
    out = [f"CREATE TABLE {name} (id int PRIMARY KEY, v text NOT NULL)"]
    if rows:
        out.append(f"INSERT INTO {name} SELECT i, 'v' || i FROM generate_series(1, {rows}) i")
    return out


# scenario -> [(table, rows)], in snapshot order.
SCENARIOS: dict[str, list[tuple[str, int]]] = {
    "multi": [
        ("snapm_a_empty", 0),
        ("snapm_b_three", 3),
        ("snapm_c_one", 1),
        ("snapm_d_empty", 0),
        ("snapm_e_two", 2),
        ("snapm_f_empty", 0),
    ],
    "two": [("snapm_a_two", 2), ("snapm_b_three", 3)],
    "one_table": [("snapm_a_three", 3)],
    "one_row": [("snapm_a_one", 1)],
}


def ddl(scenario: str) -> list[str]:
    return [sql for name, rows in SCENARIOS[scenario] for sql in _table(name, rows)]


GOLDEN_PATH = (
    Path(__file__).resolve().parent / "golden" / "debezium-3.6.1.Final-snapshot-markers.json"
)
# {"captured_with": ..., "scenarios": {scenario: {table: [{id, op, snapshot, sequence, lsn}]}}}
GOLDEN: dict[str, Any] = json.loads(GOLDEN_PATH.read_text())
