"""Domains end to end: `pgcdc run` -> Avro in Kafka -> read back with the registry.

One table of domain columns on a real server (PG15 and PG18, `pg_ends`), under each
`PGCDC_IMPL` (the worker's environment): rows written before the worker starts (read
by the initial snapshot, op `r`) and the same rows again after it streams (op `c`).
Debezium 3.6 maps a column by its root type
(PostgresConnection.doReadTableColumn: a domain's base type through any chain of
domains, with the length and scale the domain gives it), so:

- a domain over int[] is an array of int, and one over text[] an array of string
  (Debezium's INT4_ARRAY and TEXT_ARRAY), not the string of the array's text;
- a domain over numeric(5,2), and a domain over that domain, is a Connect Decimal of
  scale 2 and precision 5, the very schema Debezium registered for numeric(10,2) in the
  golden capture (tests/consumers/golden) with precision 5;
- an array of that domain has Decimal(5,2) items, as numeric(5,2)[] would. Debezium 3.6
  itself has no mapping for an array of a domain (PostgresValueConverter leaves the
  column out, or sends bytes with include.unknown.datatypes: its DomainTypesIT); pgcdc
  maps the items as it maps the domain.

The Value schema registered for the table, and every value read back (NULLs, NULL
elements, an empty array, a two-dimensional one flattened in row-major order, lower
bounds), must be these.
"""

from __future__ import annotations

import json
import urllib.parse
import urllib.request
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from tests.integration.pipeline_kafka_support import Pipeline, insert_lsn, pipeline, read_all

pytestmark = pytest.mark.integration

GOLDEN = Path(__file__).resolve().parents[1] / "consumers" / "golden" / "debezium-3.6.1.Final.json"
SNAPSHOT_BASE, STREAM_BASE = 0, 1000

DDL = [
    "CREATE DOMAIN dom_intarr AS int[]",
    "CREATE DOMAIN dom_textarr AS text[]",
    "CREATE DOMAIN dom_numeric52 AS numeric(5, 2)",
    "CREATE DOMAIN dom_numeric52_again AS dom_numeric52",
    "CREATE TABLE doms (id int PRIMARY KEY, ia dom_intarr, ta dom_textarr,"
    " n dom_numeric52, nn dom_numeric52_again, na dom_numeric52[])",
]

# (ia, ta, n, nn, na) as SQL literals, and the Avro values Debezium's mapping gives them.
ROWS: list[tuple[tuple[str, ...], dict[str, Any]]] = [
    (
        (
            "'{1,NULL,-2147483648}'",
            """'{a,"b c",NULL,"",é}'""",
            "1.5",
            "-999.99",
            "'{1.5,NULL,-0.01}'",
        ),
        {
            "ia": [1, None, -2147483648],
            "ta": ["a", "b c", None, "", "é"],
            "n": Decimal("1.50"),
            "nn": Decimal("-999.99"),
            "na": [Decimal("1.50"), None, Decimal("-0.01")],
        },
    ),
    (
        ("'[0:1]={7,8}'", "'{}'", "0", "999.99", "'{{1,2},{3,NULL}}'"),
        {
            "ia": [7, 8],
            "ta": [],
            "n": Decimal("0.00"),
            "nn": Decimal("999.99"),
            "na": [Decimal("1.00"), Decimal("2.00"), Decimal("3.00"), None],
        },
    ),
    (
        ("NULL", "NULL", "NULL", "NULL", "NULL"),
        {"ia": None, "ta": None, "n": None, "nn": None, "na": None},
    ),
]


def _debezium_decimal(precision: int) -> dict[str, Any]:
    """The schema Debezium 3.6.1 registered for the golden table's numeric(10,2) column,
    with `precision` for 10."""
    envelope = json.loads(GOLDEN.read_text())["subjects"]["${prefix}.public.golden_types-value"]
    record = envelope["fields"][0]["type"][1]
    (n,) = [f["type"][1] for f in record["fields"] if f["name"] == "n"]
    assert n["precision"] == 10 and n["scale"] == 2, n
    return {
        **n,
        "precision": precision,
        "connect.parameters": {
            **n["connect.parameters"],
            "connect.decimal.precision": str(precision),
        },
    }


def _value_fields(p: Pipeline, table: str) -> dict[str, Any]:
    """The registered Value record's field types (each the nullable union), by name."""
    subject = urllib.parse.quote(f"{p.topic(table)}-value", safe="")
    url = f"{p.settings().registry.url}/subjects/{subject}/versions/latest"
    with urllib.request.urlopen(url, timeout=10) as resp:
        schema = json.loads(json.loads(resp.read())["schema"])
    value = next(f for f in schema["fields"] if f["name"] == "before")["type"][1]
    return {f["name"]: f["type"] for f in value["fields"]}


@pytest.mark.parametrize("impl", ["native", "python"])
def test_domains_map_as_their_base_type(
    pg_ends: dict[str, Any], kafka: dict[str, Any], registry: dict[str, Any], impl: str
) -> None:
    """Snapshot and stream rows of domain columns: the registered schema is the base
    type's (array of int, array of string, Decimal(5,2), items Decimal(5,2)) and the
    values read back are the base type's values."""

    def insert_rows(p: Pipeline, base: int) -> int:
        with p.connect() as conn, conn.cursor() as cur:
            for k, (literals, _) in enumerate(ROWS):
                cur.execute(f"INSERT INTO doms VALUES ({base + k}, {', '.join(literals)})")
            return insert_lsn(cur)

    with pipeline(pg_ends, kafka, registry, "domkafka", DDL, extra_env={"PGCDC_IMPL": impl}) as p:
        insert_rows(p, SNAPSHOT_BASE)
        worker = p.start_worker()
        worker.wait_event(["snapshot_committed"], 300)
        end = insert_rows(p, STREAM_BASE)
        p.wait_confirmed(end - 1, 300, worker)
        assert worker.terminate() == 0

        decimal = _debezium_decimal(5)
        assert decimal["connect.parameters"] == {"scale": "2", "connect.decimal.precision": "5"}
        assert _value_fields(p, "doms") == {
            "id": "int",
            "ia": ["null", {"type": "array", "items": ["null", "int"]}],
            "ta": ["null", {"type": "array", "items": ["null", "string"]}],
            "n": ["null", decimal],
            "nn": ["null", decimal],
            "na": ["null", {"type": "array", "items": ["null", decimal]}],
        }

        events = {
            (r.value["after"]["id"], r.value["op"]): r.value["after"]
            for r in read_all(p.settings(), [p.topic("doms")], timeout_s=120)
            if r.value is not None
        }
        assert len(events) == 2 * len(ROWS), sorted(events)
        for base, op in ((SNAPSHOT_BASE, "r"), (STREAM_BASE, "c")):
            for k, (_, want) in enumerate(ROWS):
                got = events[(base + k, op)]
                assert got == {"id": base + k, **want}, (op, k)
                if want["n"] is not None:  # the scale is the domain's, as written
                    assert got["n"].as_tuple().exponent == -2, got["n"]
