"""Debezium's own JDBC sink reads pgcdc's topics into PostgreSQL 18: target == source.

A real downstream consumer, as users run it: Kafka Connect 4.1.1 with
io.debezium:debezium-connector-jdbc 3.6.0.Final and Apicurio's AvroConverter 3.0.9
(deploy/local/svc_connect.py), reading the table topics `pgcdc run` wrote from a
PostgreSQL 15 source. Two sinks run side by side:

- the envelope sink (`insert.mode=upsert`, `delete.enabled`, `truncate.enabled`,
  `primary.key.mode=record_key`, `schema.evolution=basic`) into one target database,
  whose tables must end equal to the source's, row for row and value for value;
- the same behind `ExtractNewRecordState` with
  `add.fields=op,table,lsn,source.ts_ms,source.ts_us` into a second database, whose
  added columns must all be filled.

The workload: every column type the golden tables use, a composite key, REPLICA
IDENTITY FULL, a TOASTed value left unchanged by an update, key changes, deletes,
TRUNCATE and ADD COLUMN. Run it alone with `-m consumers`.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg2
import pytest

from tests.fixtures.services import SERVICES, ensure_service, stop_service
from tests.integration.pipeline_kafka_support import Pipeline, insert_lsn, pipeline

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "deploy" / "local"))
import svc_connect

pytestmark = [pytest.mark.integration, pytest.mark.consumers, pytest.mark.slow]

TABLES = [
    """CREATE TABLE kinds (
        id integer PRIMARY KEY, t text NOT NULL, v varchar(20), n numeric(10, 2),
        ts timestamptz, tsn timestamp, d date, tm time, b boolean, by bytea, j jsonb,
        u uuid, f float8, r real, bi bigint, si smallint)""",
    "CREATE TABLE pair (a integer, b text, v integer, PRIMARY KEY (a, b))",
    "CREATE TABLE fullrow (id integer PRIMARY KEY, big text, v integer)",
    "ALTER TABLE fullrow REPLICA IDENTITY FULL",
    "CREATE TABLE trunc_me (id integer PRIMARY KEY, v text)",
]
KEYS = {"kinds": ("id",), "pair": ("a", "b"), "fullrow": ("id",), "trunc_me": ("id",)}
# Incompressible, so that it is stored out of line (TOAST), not compressed inline.
BIG = uuid.uuid4().hex * 400

WORKLOAD: list[list[str]] = [
    [
        "INSERT INTO kinds VALUES (1, 'one', 'vc', 12.34, '2024-05-06 07:08:09.5+00',"
        " '2024-05-06 07:08:09.123456', '2024-05-06', '07:08:09.5', true, '\\x0102',"
        " '{\"a\": 1}', '6f1b2a8e-0a64-4f8e-9a55-3f4e6b1c2d3e', 1.5, 2.5, 9000000000, 7)",
        "INSERT INTO kinds (id, t) VALUES (2, 'two'), (3, 'three')",
    ],
    ["UPDATE kinds SET v = 'changed', ts = '2000-01-01 00:00:00+00' WHERE id = 1"],
    ["UPDATE kinds SET id = 20 WHERE id = 2"],
    ["DELETE FROM kinds WHERE id = 3"],
    [
        "INSERT INTO pair VALUES (1, 'a', 1), (1, 'b', 2), (2, 'a', 3)",
        "UPDATE pair SET v = 10 WHERE a = 1 AND b = 'a'",
    ],
    ["DELETE FROM pair WHERE a = 1 AND b = 'b'", "UPDATE pair SET b = 'z' WHERE a = 2"],
    [f"INSERT INTO fullrow VALUES (1, '{BIG}', 1), (2, 'small', 2)"],
    ["UPDATE fullrow SET v = 11 WHERE id = 1", "DELETE FROM fullrow WHERE id = 2"],
    ["INSERT INTO trunc_me VALUES (1, 'gone'), (2, 'gone too')"],
    ["TRUNCATE trunc_me"],
    ["INSERT INTO trunc_me VALUES (3, 'after the truncate')"],
    ["ALTER TABLE kinds ADD COLUMN extra text"],
    ["INSERT INTO kinds (id, t, extra) VALUES (4, 'four', 'added')"],
    ["UPDATE kinds SET extra = 'late' WHERE id = 1"],
]


def _http(method: str, url: str, body: Any = None) -> Any:
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(
        url, data=data, method=method, headers={"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(req, timeout=30) as resp:
        raw = resp.read()
    return json.loads(raw) if raw else None


@pytest.fixture(scope="module")
def connect() -> Iterator[dict[str, Any]]:
    """The Kafka Connect worker, installed and started if needed by the services script
    (`services.py up connect`, in its own process like every service). Stopped after
    this module when it started it (its JVM took a fifth of a core, idle, through the
    rest of CI), unless PGCDC_KEEP_CONNECT=1; one already running is left running."""
    was_up = _healthy("connect")
    yield ensure_service("connect")
    if not was_up and os.environ.get("PGCDC_KEEP_CONNECT") != "1":
        stop_service("connect")


def _healthy(name: str) -> bool:
    proc = subprocess.run(
        [sys.executable, str(SERVICES), "status", name],
        capture_output=True,
        text=True,
        check=False,
    )
    return any(line.split()[:2] == [name, "healthy"] for line in proc.stdout.splitlines())


def _converter(prefix: str, registry_api: str) -> dict[str, str]:
    return {
        prefix: "io.apicurio.registry.utils.converter.AvroConverter",
        f"{prefix}.apicurio.registry.url": registry_api,
        # pgcdc's ccompat schema id is the registry's contentId: the default lookup.
        f"{prefix}.apicurio.registry.auto-register": "false",
        f"{prefix}.apicurio.registry.find-latest": "true",
    }


def _sink_config(p: Pipeline, target: dict[str, Any], registry: dict[str, Any]) -> dict[str, str]:
    return {
        "connector.class": "io.debezium.connector.jdbc.JdbcSinkConnector",
        "tasks.max": "1",
        "topics.regex": f"{p.prefix}\\.public\\..*",
        "connection.url": f"jdbc:postgresql://{target['host']}:{target['port']}/{target['db']}",
        "connection.username": str(target["user"]),
        "connection.password": "",
        "insert.mode": "upsert",
        "delete.enabled": "true",
        "truncate.enabled": "true",
        "primary.key.mode": "record_key",
        "schema.evolution": "basic",
        "collection.name.format": "${source.table}",
        # The key-change headers are JSON text, as Debezium writes them; Connect's default
        # SimpleHeaderConverter parses that into a schemaless map, which the sink's
        # header handling rejects ("No schema defined for value of map field"), the same
        # for Debezium's own events. Read headers as plain strings.
        "header.converter": "org.apache.kafka.connect.storage.StringConverter",
        **_converter("key.converter", str(registry["api"])),
        **_converter("value.converter", str(registry["api"])),
    }


@pytest.fixture
def targets(pg18: dict[str, Any]) -> Iterator[dict[str, dict[str, Any]]]:
    """Two fresh databases on PostgreSQL 18, dropped at the end."""
    suffix = uuid.uuid4().hex[:8]
    names = {"envelope": f"jdbc_env_{suffix}", "flat": f"jdbc_flat_{suffix}"}
    admin = psycopg2.connect(pg18["dsn"])
    admin.autocommit = True
    with admin.cursor() as cur:
        for db in names.values():
            cur.execute(f"CREATE DATABASE {db}")
    try:
        yield {k: {**pg18, "db": db} for k, db in names.items()}
    finally:
        with admin.cursor() as cur:
            for db in names.values():
                cur.execute(f"DROP DATABASE IF EXISTS {db} WITH (FORCE)")
        admin.close()


def _rows(dsn: str, table: str, keys: tuple[str, ...]) -> list[dict[str, Any]]:
    conn = psycopg2.connect(dsn)
    try:
        with conn.cursor() as cur:
            cur.execute(f'SELECT * FROM "{table}" ORDER BY {", ".join(keys)}')
            cols = [c.name for c in cur.description]
            return [_normal(dict(zip(cols, r, strict=True))) for r in cur.fetchall()]
    except psycopg2.errors.UndefinedTable:
        return []
    finally:
        conn.close()


def _normal(row: dict[str, Any]) -> dict[str, Any]:
    """Values as comparable Python: json text parsed, memoryview as bytes, floats of
    real columns rounded to their precision."""
    out: dict[str, Any] = {}
    for k, raw in row.items():
        v = raw
        if k == "j" and isinstance(v, str):
            v = json.loads(v)
        elif isinstance(v, memoryview):
            v = bytes(v)
        elif k == "r" and v is not None:
            v = round(float(v), 5)
        out[k] = v
    return out


def _dsn(info: dict[str, Any]) -> str:
    return f"host={info['host']} port={info['port']} user={info['user']} dbname={info['db']}"


def _wait_equal(p: Pipeline, target: str, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    diff: dict[str, tuple[Any, Any]] = {}
    while time.monotonic() < deadline:
        diff = {}
        for table, keys in KEYS.items():
            want = _rows(p.dsn, table, keys)
            got = _rows(target, table, keys)
            if got != want:
                diff[table] = (want, got)
        if not diff:
            return
        time.sleep(2.0)
    short = {t: (str(w)[:600], str(g)[:600]) for t, (w, g) in diff.items()}
    raise AssertionError(f"target differs from source: {short}")


def _task_failure(name: str) -> str | None:
    status = _http("GET", f"{svc_connect.BASE}/connectors/{name}/status")
    for task in status.get("tasks", []):
        if task["state"] == "FAILED":
            return str(task.get("trace", "failed"))[:4000]
    return None


def test_jdbc_sink_target_equals_source(
    pg15: dict[str, Any],
    kafka: dict[str, Any],
    registry: dict[str, Any],
    connect: dict[str, Any],
    targets: dict[str, dict[str, Any]],
) -> None:
    """Debezium's JDBC sink, fed by pgcdc, ends with the source's tables (values,
    composite keys, key changes, deletes, TRUNCATE, ADD COLUMN, an unchanged TOAST value
    under REPLICA IDENTITY FULL); behind ExtractNewRecordState the added op, table, lsn,
    source.ts_ms and source.ts_us columns are all filled."""
    with pipeline(pg15, kafka, registry, "jdbcsink", TABLES) as p:
        worker = p.start_worker()
        worker.wait_ready(120)
        conn = p.connect()
        conn.autocommit = False
        with conn.cursor() as cur:
            for txn in WORKLOAD:
                for sql in txn:
                    cur.execute(sql)
                conn.commit()
            end = insert_lsn(cur)
        conn.commit()
        conn.close()
        p.wait_confirmed(end - 1, 120, worker)

        names = {"envelope": f"{p.prefix}-jdbc", "flat": f"{p.prefix}-jdbc-flat"}
        envelope = _sink_config(p, targets["envelope"], registry)
        flat = {
            **_sink_config(p, targets["flat"], registry),
            "collection.name.format": "flat_${topic}",
            "transforms": "unwrap",
            "transforms.unwrap.type": "io.debezium.transforms.ExtractNewRecordState",
            "transforms.unwrap.add.fields": "op,table,lsn,source.ts_ms,source.ts_us",
            "transforms.unwrap.delete.tombstone.handling.mode": "tombstone",
        }
        try:
            for name, config in ((names["envelope"], envelope), (names["flat"], flat)):
                _http("PUT", f"{svc_connect.BASE}/connectors/{name}/config", config)
            try:
                _wait_equal(p, _dsn(targets["envelope"]), 180)
            except AssertionError as exc:
                failure = _task_failure(names["envelope"])
                raise AssertionError(f"{exc}\nsink task: {failure}") from None
            _check_flat(targets["flat"], names["flat"], p)
        finally:
            for name in names.values():
                try:
                    _http("DELETE", f"{svc_connect.BASE}/connectors/{name}")
                except urllib.error.HTTPError as exc:
                    if exc.code != 404:
                        raise


def _check_flat(target: dict[str, Any], name: str, p: Pipeline) -> None:
    """Every row of the flattened target carries the added fields, filled."""
    added = ("__op", "__table", "__lsn", "__source_ts_ms", "__source_ts_us")
    deadline = time.monotonic() + 120
    rows: list[dict[str, Any]] = []
    counts: dict[str, int] = {}
    want: dict[str, int] = {}
    while time.monotonic() < deadline:
        conn = psycopg2.connect(_dsn(target))
        try:
            with conn.cursor() as cur:
                cur.execute(
                    "SELECT table_name FROM information_schema.tables"
                    " WHERE table_schema = 'public' AND table_name LIKE 'flat_%'"
                )
                tables = [r[0] for r in cur.fetchall()]
                rows, counts = [], {}
                for table in tables:
                    cur.execute(f'SELECT * FROM "{table}"')
                    cols = [c.name for c in cur.description]
                    got = [dict(zip(cols, r, strict=True)) for r in cur.fetchall()]
                    counts[table] = len(got)
                    rows += got
        finally:
            conn.close()
        # ExtractNewRecordState passes no TRUNCATE on (as for Debezium's own events), so
        # the flat trunc_me keeps the two rows the source truncated.
        want = {
            f"flat_{p.prefix}_public_{t}": len(_rows(p.dsn, t, k)) + (2 if t == "trunc_me" else 0)
            for t, k in KEYS.items()
        }
        if counts == want:
            break
        time.sleep(2.0)
    else:
        want = {t: len(_rows(p.dsn, t, k)) for t, k in KEYS.items()}
        raise AssertionError(
            f"flat target incomplete: {counts} (source {want}); {_task_failure(name)}"
        )
    for row in rows:
        assert all(row.get(c) is not None for c in added), row
        assert row["__op"] in ("c", "u", "r")
        assert row["__source_ts_us"] // 1000 == row["__source_ts_ms"]
