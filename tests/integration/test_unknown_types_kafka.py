"""decoding.unknown_types end to end: `pgcdc run` -> Kafka -> read back with the registry.

Real types pgcdc cannot decode, from the shared servers' contrib: intarray's
`query_int` (no send function), ltree's `ltxtquery` (its send form is a version byte
and the text, not the stored form), a user-defined base type built from existing C
functions (`opaque_t`: textin / pg_node_tree_out, laid out like text), and an array, a
domain and a composite over them. For each mode:

- `fail`: the worker exits 1 at start, before Kafka, naming every such column and the
  setting; and a table created later (seen in the schema history while streaming)
  stops the worker before the Kafka transaction carrying its row commits: nothing of
  that source transaction is visible, and a restart with another mode publishes it;
- `omit`: the columns are absent from the Avro schema and from every snapshot and
  stream event, with one `unknown_type_column` warning per column;
- `bytes`: Avro `bytes` with `connect.parameters` {"__pgcdc.type": type}; a streamed
  value is exactly the stored datum, which PostgreSQL itself shows through pageinspect
  (`heap_page_items` + `tuple_data_split`, varlena header removed); a snapshot value is
  the output text's bytes (the documented difference: SQL cannot read the stored form
  of such a type), which equals the stored form for `opaque_t`, whose stored form is
  its text.

On PostgreSQL 15 and 18 (the text plugin's test, test_unknown_types_text, takes 15 to 18).
"""

from __future__ import annotations

import json
import urllib.parse
import urllib.request
from typing import Any

import pytest

from tests.integration.pipeline_kafka_support import (
    Pipeline,
    insert_lsn,
    pipeline,
    read_all,
)

pytestmark = pytest.mark.integration

TYPES_DDL = [
    "CREATE EXTENSION intarray",
    "CREATE EXTENSION ltree",
    "CREATE EXTENSION pageinspect",
    "CREATE TYPE opaque_t",
    "CREATE FUNCTION opaque_t_in(cstring) RETURNS opaque_t AS 'textin'"
    " LANGUAGE internal IMMUTABLE STRICT",
    "CREATE FUNCTION opaque_t_out(opaque_t) RETURNS cstring AS 'pg_node_tree_out'"
    " LANGUAGE internal IMMUTABLE STRICT",
    "CREATE TYPE opaque_t (INPUT = opaque_t_in, OUTPUT = opaque_t_out, LIKE = text)",
    "CREATE DOMAIN ltxt_dom AS ltxtquery",
    "CREATE TYPE qcomp AS (a int, q query_int)",
]
TABLE = (
    "CREATE TABLE ut (id int PRIMARY KEY, q query_int, l ltxtquery, qa query_int[],"
    " d ltxt_dom, c qcomp, o opaque_t, note text)"
)
UNKNOWN = {
    "q": "query_int",
    "l": "ltxtquery",
    "qa": "query_int[]",
    "d": "ltxt_dom",
    "c": "qcomp",
    "o": "opaque_t",
}
VALUES = (
    "'1&(2|3)', 'Europe & Russia*@ & !Transportation', ARRAY['1|2','3']::query_int[],"
    " 'a & b', ROW(5, '4&5'), 'opaque text'"
)


def _insert(p: Pipeline, table: str, key: int) -> None:
    p.execute(f"INSERT INTO {table} VALUES ({key}, {VALUES}, 'n{key}')")


@pytest.fixture
def pgv(pg_ends: dict[str, Any]) -> dict[str, Any]:
    """PG15 and PG18: what reaches Kafka is the worker's choice per column, the same on
    every major; each major's decoding of these types under each policy is proven line
    for line by test_unknown_types_text, on 15 to 18."""
    return pg_ends


def _values(p: Pipeline, table: str) -> dict[tuple[int, str], dict[str, Any]]:
    """(id, op) -> the `after` image of every committed event of `table`."""
    out = {}
    for r in read_all(p.settings(), [p.topic(table)]):
        if r.value is not None:
            out[(r.value["after"]["id"], r.value["op"])] = r.value["after"]
    return out


def _stored(p: Pipeline, table: str, key: int) -> dict[str, bytes]:
    """The stored datum of each column of row `key`, as PostgreSQL's pageinspect shows
    the heap tuple (`tuple_data_split`), without its varlena header (the datum the WAL
    carries, which pgcdc's deformer hands on)."""
    names = [
        r[0]
        for r in p.query(
            "SELECT attname FROM pg_attribute WHERE attrelid = %s::regclass AND attnum > 0"
            " ORDER BY attnum",
            (table,),
        )
    ]
    rows = p.query(
        "SELECT tuple_data_split(%s::regclass, t_data, t_infomask, t_infomask2, t_bits)"
        " FROM heap_page_items(get_raw_page(%s, 0)) WHERE t_data IS NOT NULL AND t_xmax = 0",
        (table, table),
    )
    for (attrs,) in rows:
        if int.from_bytes(bytes(attrs[0]), "little", signed=True) != key:
            continue
        out = {}
        for name, raw in zip(names, attrs, strict=True):
            if name == "id" or raw is None:
                continue  # the key (int4) and NULLs: not varlena datums
            data = bytes(raw)
            if data[0] & 0x01:  # 1-byte header (0x01 alone would be a TOAST pointer)
                assert data[0] != 0x01
                out[name] = data[1:]
            else:
                assert data[0] & 0x03 == 0, "compressed inline: not expected for these values"
                out[name] = data[4:]
        return out
    raise AssertionError(f"row {key} of {table} not found on page 0")


def _field_schemas(p: Pipeline, table: str) -> dict[str, Any]:
    subject = urllib.parse.quote(f"{p.topic(table)}-value", safe="")
    url = f"{p.settings().registry.url}/subjects/{subject}/versions/latest"
    with urllib.request.urlopen(url, timeout=10) as resp:
        schema = json.loads(json.loads(resp.read())["schema"])
    value = next(f for f in schema["fields"] if f["name"] == "before")["type"][1]
    return {f["name"]: f["type"] for f in value["fields"]}


def test_fail_at_start_then_omit(
    pgv: dict[str, Any], kafka: dict[str, Any], registry: dict[str, Any]
) -> None:
    """fail: exit 1 before Kafka, listing all six columns; omit: they are gone from the
    schema and from snapshot and stream events, one warning each."""
    with pipeline(pgv, kafka, registry, "unkomit", [*TYPES_DDL, TABLE]) as p:
        _insert(p, "ut", 1)  # read by the initial snapshot
        failing = p.start_worker()
        assert failing.wait(120) == 1, failing.tail()
        message = failing.log_text()
        assert "decoding.unknown_types" in message
        for column, type_name in UNKNOWN.items():
            assert f"public.ut.{column} {type_name}" in message, message[-3000:]
        assert p.last_offset() is None  # nothing was committed, not even a snapshot

        p.extra_env["PGCDC_DECODING__UNKNOWN_TYPES"] = "omit"
        worker = p.start_worker()
        worker.wait_event(["snapshot_committed"], 180)
        with p.connect() as conn, conn.cursor() as cur:
            cur.execute(f"INSERT INTO ut VALUES (2, {VALUES}, 'n2')")
            end = insert_lsn(cur)
        p.wait_confirmed(end - 1, 120, worker)
        assert worker.terminate() == 0
        values = _values(p, "ut")
        assert values == {(1, "r"): {"id": 1, "note": "n1"}, (2, "c"): {"id": 2, "note": "n2"}}
        assert set(_field_schemas(p, "ut")) == {"id", "note"}
        warned = {
            e["column"]: e["type"]
            for e in worker.events()
            if e.get("event") == "unknown_type_column" and e.get("mode") == "omit"
        }
        assert warned == UNKNOWN
        assert sum(e.get("event") == "unknown_type_column" for e in worker.events()) == 6


def test_bytes_stream_is_stored_snapshot_is_text(
    pgv: dict[str, Any], kafka: dict[str, Any], registry: dict[str, Any]
) -> None:
    """bytes: the schema names each type; a streamed value is the stored datum
    (pageinspect); a snapshot value is the output text's bytes."""
    with pipeline(
        pgv,
        kafka,
        registry,
        "unkbytes",
        [*TYPES_DDL, TABLE],
        extra_env={"PGCDC_DECODING__UNKNOWN_TYPES": "bytes"},
    ) as p:
        _insert(p, "ut", 1)
        worker = p.start_worker()
        worker.wait_event(["snapshot_committed"], 180)
        with p.connect() as conn, conn.cursor() as cur:
            cur.execute(f"INSERT INTO ut VALUES (2, {VALUES}, 'n2')")
            cur.execute("INSERT INTO ut (id) VALUES (3)")  # NULLs stay null
            end = insert_lsn(cur)
        p.wait_confirmed(end - 1, 120, worker)
        assert worker.terminate() == 0
        values = _values(p, "ut")
        fields = _field_schemas(p, "ut")
        for column, type_name in UNKNOWN.items():
            assert fields[column] == [
                "null",
                {"type": "bytes", "connect.parameters": {"__pgcdc.type": type_name}},
            ], fields[column]
        stored = _stored(p, "ut", 2)
        texts = dict(
            zip(
                UNKNOWN,
                p.query(f"SELECT {', '.join(f'{c}::text' for c in UNKNOWN)} FROM ut WHERE id = 1")[
                    0
                ],
                strict=True,
            )
        )
        for column in UNKNOWN:
            assert values[(2, "c")][column] == stored[column], column
            assert values[(1, "r")][column] == texts[column].encode(), column
            assert values[(3, "c")][column] is None
        # Only where the stored form is the text do snapshot and stream agree.
        assert values[(1, "r")]["o"] == values[(2, "c")]["o"] == b"opaque text"
        assert values[(1, "r")]["q"] != values[(2, "c")]["q"]
        assert values[(2, "c")]["note"] == "n2"


def test_later_table_stops_before_commit_and_resumes(
    pgv: dict[str, Any], kafka: dict[str, Any], registry: dict[str, Any]
) -> None:
    """A table with an unknown column created while streaming, under fail: the worker
    stops before the Kafka transaction with its row commits (the same source
    transaction's other row is not visible either); a restart with bytes publishes both."""
    with pipeline(
        pgv,
        kafka,
        registry,
        "unklate",
        [*TYPES_DDL, "CREATE TABLE good (id int PRIMARY KEY, v text)"],
        extra_env={"PGCDC_SNAPSHOT__MODE": "never"},
    ) as p:
        worker = p.start_worker()
        worker.wait_ready(120)
        with p.connect() as conn, conn.cursor() as cur:
            cur.execute("INSERT INTO good VALUES (1, 'before')")
            before = insert_lsn(cur)
        p.wait_confirmed(before - 1, 120, worker)
        conn = p.connect()
        conn.autocommit = False
        with conn.cursor() as cur:
            cur.execute("INSERT INTO good VALUES (2, 'same txn')")
            cur.execute("CREATE TABLE late (id int PRIMARY KEY, q query_int)")
            cur.execute("INSERT INTO late VALUES (1, '7|8')")
        conn.commit()
        conn.close()
        assert worker.wait(120) == 1, worker.tail()
        assert "public.late.q query_int" in worker.log_text()
        assert "decoding.unknown_types" in worker.log_text()
        assert [k for k, _ in _values(p, "good")] == [1]  # row 2 never became visible

        p.extra_env["PGCDC_DECODING__UNKNOWN_TYPES"] = "bytes"
        resumed = p.start_worker()
        resumed.wait_ready(120)
        with p.connect() as c2, c2.cursor() as cur:
            end = insert_lsn(cur)
        p.wait_confirmed(end - 1, 120, resumed)
        assert resumed.terminate() == 0
        assert sorted(k for k, _ in _values(p, "good")) == [1, 2]
        late = _values(p, "late")
        assert late[(1, "c")]["q"] == _stored(p, "late", 1)["q"]


def test_excluded_columns_are_not_decided(
    pgv: dict[str, Any], kafka: dict[str, Any], registry: dict[str, Any]
) -> None:
    """Under fail, columns the filters exclude (and tables they exclude) never stop the
    worker: they are never published, so never read."""
    with pipeline(
        pgv,
        kafka,
        registry,
        "unkexcl",
        [*TYPES_DDL, TABLE, "CREATE TABLE hidden (id int PRIMARY KEY, q query_int)"],
        extra_env={
            "PGCDC_FILTERS__EXCLUDE_COLUMNS": json.dumps([r"public\.ut\.(q|l|qa|d|c|o)"]),
            "PGCDC_FILTERS__EXCLUDE_TABLES": json.dumps([r"public\.hidden"]),
        },
    ) as p:
        _insert(p, "ut", 1)
        p.execute("INSERT INTO hidden VALUES (1, '1')")
        worker = p.start_worker()
        worker.wait_event(["snapshot_committed"], 180)
        with p.connect() as conn, conn.cursor() as cur:
            cur.execute(f"INSERT INTO ut VALUES (2, {VALUES}, 'n2')")
            cur.execute("INSERT INTO hidden VALUES (2, '2')")
            end = insert_lsn(cur)
        p.wait_confirmed(end - 1, 120, worker)
        assert worker.terminate() == 0
        assert _values(p, "ut") == {
            (1, "r"): {"id": 1, "note": "n1"},
            (2, "c"): {"id": 2, "note": "n2"},
        }
        assert not any(e.get("event") == "unknown_type_column" for e in worker.events())
