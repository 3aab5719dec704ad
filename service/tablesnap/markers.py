"""Debezium 3.6's snapshot markers: the `source.snapshot` value of each snapshot row.

Receives, per row a snapshot publishes, where the row stands: in the first table of the
snapshot's table order or not, first or last row of its table, and whether any row
follows it in the whole snapshot; hands back the marker string the Avro plugin writes
into `source.snapshot`. No I/O, no state: the callers (connectors.tablesnap's reader,
snapshotter and export) know the positions.

Debezium's rules, as its PostgreSQL connector 3.6.1 writes them (the capture is
tests/consumers/golden/debezium-3.6.1.Final-snapshot-markers.json), in this order of
precedence:
- `last`: the last row of the whole snapshot. Empty tables after it do not move it: a
  snapshot whose last table is empty ends with `last` on the last row of the last table
  that has rows. A one-row table that is the only table holds one row, `last`.
- `first`: the first row of the snapshot's *first table*. If that table is empty, no row
  of the snapshot is `first`: the first row of the next table is
  `first_in_data_collection`.
- `last_in_data_collection`: the last row of any other table (a one-row table in the
  middle is `last_in_data_collection`, not `first_in_data_collection`);
- `first_in_data_collection`: the first row of any other table;
- `true`: every other row.
Incremental (on-demand, signal-driven) snapshots mark every row `incremental`, as
Debezium's incremental snapshots do; a row an initial snapshot publishes out of its
table's order (a row re-filled from the stream's state, service.tablesnap.watermark)
is `true`.

`source.sequence` of an initial snapshot's row is `[null, "<lsn>"]` (Debezium's offset
holds no last commit during its snapshot); the Avro plugin writes it, from
`is_initial`.
"""

from __future__ import annotations

FIRST = "first"
FIRST_IN_DATA_COLLECTION = "first_in_data_collection"
TRUE = "true"
LAST_IN_DATA_COLLECTION = "last_in_data_collection"
LAST = "last"
INCREMENTAL = "incremental"

INITIAL_MARKERS = frozenset({FIRST, FIRST_IN_DATA_COLLECTION, TRUE, LAST_IN_DATA_COLLECTION, LAST})


def initial_marker(
    *, first_table: bool, first_in_table: bool, last_in_table: bool, last_overall: bool
) -> str:
    """The marker of one row of an initial snapshot.

    `first_table`: the row's table is the first of the snapshot's table order (empty or
    not); `last_overall`: no row of the snapshot follows this one (so it is also the last
    of its table)."""
    if last_overall:
        return LAST
    if first_table and first_in_table:
        return FIRST
    if last_in_table:
        return LAST_IN_DATA_COLLECTION
    if first_in_table:
        return FIRST_IN_DATA_COLLECTION
    return TRUE


def is_initial(marker: object) -> bool:
    """Whether `marker` is one an initial snapshot writes (not `incremental`, not a
    stream change's `false`)."""
    return marker in INITIAL_MARKERS
