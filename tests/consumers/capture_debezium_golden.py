"""Capture what Debezium's PostgreSQL connector registers and writes for the golden
workload (golden_workload.py), as the reference for pgcdc's wire format.

    PGCDC_STATE_DIR=... python -m tests.consumers.capture_debezium_golden [--keep]

Runs once by hand, not in the suite (the schema-equality test reads its output):
1. creates a fresh database on the local PostgreSQL 15 with the golden tables and the
   snapshot rows;
2. starts Kafka Connect (deploy/local/svc_connect.py) if it is not running, and creates a
   Debezium PostgreSQL connector (pgoutput, a logical slot of its own, topic prefix
   `PREFIX`) with Apicurio's AvroConverter for keys and values against the local registry,
   transaction metadata, heartbeats and truncate events on;
3. waits for the snapshot, runs the workload's streaming transactions, waits for
   heartbeats;
4. reads back every subject whose name starts with the prefix (and the heartbeat's) from
   the registry, and every record of every topic (key, value decoded with the writer
   schema the record names, headers);
5. writes `golden/debezium-<version>.json`: the connector version and config, the
   subjects (schema JSON with the prefix and database replaced by `${prefix}` and
   `${db}`), and the records per topic;
6. deletes the connector, its slot and publication, and the database (unless --keep).

It stops the Connect worker only if it started it.
"""

from __future__ import annotations

import base64
import io
import json
import struct
import sys
import time
import urllib.error
import urllib.request
from decimal import Decimal
from pathlib import Path
from typing import Any

import fastavro
import psycopg2
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient

from tests.consumers import golden_workload as wl
from tests.fixtures.slots import drop_slot_when_released

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
sys.path.insert(0, str(REPO / "deploy" / "local"))

import svc_connect  # noqa: E402  (needs the sys.path entry above)

PREFIX = "dbzgolden"
DB = "dbz_golden"
SLOT = "dbz_golden"
PUBLICATION = "dbz_golden"
# Connect keeps a connector's offsets under its name: a new name starts from a snapshot.
CONNECTOR = f"dbz-golden-{int(time.time())}"
PG = {"host": "127.0.0.1", "port": 55415, "user": "postgres"}
BOOTSTRAP = "127.0.0.1:19092"
REGISTRY = "http://127.0.0.1:18081"
CCOMPAT = f"{REGISTRY}/apis/ccompat/v7"
HEARTBEAT_TOPIC = f"__debezium-heartbeat.{PREFIX}"


def apicurio_converter(prefix: str) -> dict[str, str]:
    """Apicurio's AvroConverter settings for `prefix` ("key.converter"/"value.converter")."""
    return {
        prefix: "io.apicurio.registry.utils.converter.AvroConverter",
        f"{prefix}.apicurio.registry.url": f"{REGISTRY}/apis/registry/v3",
        f"{prefix}.apicurio.registry.auto-register": "true",
        f"{prefix}.apicurio.registry.find-latest": "true",
        f"{prefix}.apicurio.registry.dereference-schema": "true",
    }


def connector_config() -> dict[str, str]:
    return {
        "connector.class": "io.debezium.connector.postgresql.PostgresConnector",
        "tasks.max": "1",
        "database.hostname": PG["host"],
        "database.port": str(PG["port"]),
        "database.user": PG["user"],
        "database.password": "",
        "database.dbname": DB,
        "topic.prefix": PREFIX,
        "plugin.name": "pgoutput",
        "slot.name": SLOT,
        "publication.name": PUBLICATION,
        "publication.autocreate.mode": "filtered",
        "table.include.list": "public\\.golden_.*",
        "snapshot.mode": "initial",
        "provide.transaction.metadata": "true",
        "heartbeat.interval.ms": "1000",
        "skipped.operations": "none",
        **apicurio_converter("key.converter"),
        **apicurio_converter("value.converter"),
    }


def http(method: str, url: str, body: Any = None) -> Any:
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(
        url, data=data, method=method, headers={"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(req, timeout=30) as resp:
        raw = resp.read()
    return json.loads(raw) if raw else None


def pg_connect(dbname: str) -> Any:
    conn = psycopg2.connect(dbname=dbname, **PG)
    conn.autocommit = True
    return conn


def drop_everything() -> None:
    for name in http("GET", f"{svc_connect.BASE}/connectors"):
        if name.startswith("dbz-golden"):
            http("DELETE", f"{svc_connect.BASE}/connectors/{name}")
    admin = pg_connect("postgres")
    drop_slot_when_released(admin, SLOT)  # the deleted connector's walsender may linger
    with admin.cursor() as cur:
        cur.execute(f"DROP DATABASE IF EXISTS {DB} WITH (FORCE)")
    admin.close()


def forget_earlier_runs() -> None:
    """Delete the topics and subjects an earlier capture left."""
    stale = topics()
    if stale:
        admin = AdminClient({"bootstrap.servers": BOOTSTRAP})
        for future in admin.delete_topics(stale, operation_timeout=30).values():
            future.result()
        wait_for("the old topics to go", lambda: not topics(), 60.0)
    for subject in subjects(PREFIX):
        http("DELETE", f"{CCOMPAT}/subjects/{urllib.request.quote(subject, safe='')}")
        http(
            "DELETE", f"{CCOMPAT}/subjects/{urllib.request.quote(subject, safe='')}?permanent=true"
        )


def subjects(prefix: str) -> list[str]:
    names = http("GET", f"{CCOMPAT}/subjects")
    return sorted(
        s
        for s in names
        if s.startswith(f"{prefix}.") or s.startswith(f"__debezium-heartbeat.{prefix}-")
    )


def latest_schema(subject: str) -> dict[str, Any]:
    got = http(
        "GET", f"{CCOMPAT}/subjects/{urllib.request.quote(subject, safe='')}/versions/latest"
    )
    loaded: dict[str, Any] = json.loads(got["schema"])
    return loaded


_schemas: dict[int, Any] = {}


def decode(raw: bytes | None) -> Any:
    """A Confluent-framed Avro datum (magic 0, 4-byte id), decoded with its writer schema."""
    if raw is None:
        return None
    magic, schema_id = struct.unpack(">bI", raw[:5])
    if magic != 0:
        raise ValueError(f"not Confluent framing: magic {magic}")
    parsed = _schemas.get(schema_id)
    if parsed is None:
        text = http("GET", f"{CCOMPAT}/schemas/ids/{schema_id}")["schema"]
        parsed = _schemas[schema_id] = fastavro.parse_schema(json.loads(text))
    return fastavro.schemaless_reader(io.BytesIO(raw[5:]), parsed)


def plain(value: Any) -> Any:
    """JSON-able form: bytes as {"base64": ...}."""
    if isinstance(value, bytes):
        return {"base64": base64.b64encode(value).decode()}
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [plain(v) for v in value]
    if isinstance(value, Decimal):
        return {"decimal": str(value)}
    return value


def read_topic(topic: str) -> list[dict[str, Any]]:
    consumer = Consumer(
        {
            "bootstrap.servers": BOOTSTRAP,
            "group.id": f"golden-{time.time_ns()}",
            "enable.auto.commit": False,
        }
    )
    try:
        meta = consumer.list_topics(topic, timeout=10).topics[topic]
        parts = [TopicPartition(topic, p, 0) for p in meta.partitions]
        ends = {p.partition: consumer.get_watermark_offsets(p, timeout=10)[1] for p in parts}
        consumer.assign(parts)
        out: list[dict[str, Any]] = []
        done = {p for p, end in ends.items() if end == 0}
        while len(done) < len(ends):
            msg = consumer.poll(5.0)
            if msg is None:
                break
            if msg.error() is not None:
                raise RuntimeError(str(msg.error()))
            headers = [
                [k, None if v is None else v.decode("utf-8", "replace")]
                for k, v in (msg.headers() or [])
            ]
            out.append(
                {
                    "offset": msg.offset(),
                    "key": plain(decode(msg.key())),
                    "value": plain(decode(msg.value())),
                    "headers": headers,
                }
            )
            if msg.offset() + 1 >= ends[msg.partition()]:
                done.add(msg.partition())
        return out
    finally:
        consumer.close()


def topics() -> list[str]:
    consumer = Consumer({"bootstrap.servers": BOOTSTRAP, "group.id": "golden-list"})
    try:
        names = consumer.list_topics(timeout=10).topics
    finally:
        consumer.close()
    return sorted(t for t in names if t.startswith(f"{PREFIX}.") or t == HEARTBEAT_TOPIC)


def wait_for(what: str, cond: Any, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return
        time.sleep(1.0)
    raise RuntimeError(f"timed out waiting for {what}")


def normalize(node: Any) -> Any:
    """The prefix and database name replaced by placeholders, recursively."""
    if isinstance(node, str):
        return node.replace(PREFIX, "${prefix}").replace(DB, "${db}")
    if isinstance(node, dict):
        return {normalize(k): normalize(v) for k, v in node.items()}
    if isinstance(node, list):
        return [normalize(v) for v in node]
    return node


def main(argv: list[str]) -> int:
    keep = "--keep" in argv
    connect = svc_connect.Connect()
    started_here = False
    connect.install()
    if not connect.healthy():
        connect.start()
        connect.wait_healthy()
        started_here = True
    t0 = time.monotonic()
    try:
        drop_everything()
        forget_earlier_runs()
        admin = pg_connect("postgres")
        with admin.cursor() as cur:
            cur.execute(f"CREATE DATABASE {DB}")
        admin.close()
        conn = pg_connect(DB)
        with conn.cursor() as cur:
            for sql in (*wl.TABLES, *wl.SNAPSHOT_ROWS):
                cur.execute(sql)
        http("PUT", f"{svc_connect.BASE}/connectors/{CONNECTOR}/config", connector_config())

        def snapshot_done() -> bool:
            try:
                status = http("GET", f"{svc_connect.BASE}/connectors/{CONNECTOR}/status")
            except urllib.error.HTTPError as exc:
                if exc.code == 404:  # the worker has not taken the config in yet
                    return False
                raise
            tasks = status.get("tasks") or []
            if tasks and tasks[0]["state"] == "FAILED":
                raise RuntimeError(tasks[0].get("trace", "task failed"))
            with conn.cursor() as c:
                c.execute("SELECT active FROM pg_replication_slots WHERE slot_name = %s", (SLOT,))
                row = c.fetchone()
            return bool(row and row[0]) and f"{PREFIX}.public.golden_full" in topics()

        wait_for("the snapshot", snapshot_done)
        time.sleep(3.0)
        for txn in wl.STREAM:
            conn.autocommit = False
            with conn.cursor() as cur:
                for sql in txn:
                    cur.execute(sql)
            conn.commit()
        conn.autocommit = True
        with conn.cursor() as cur:
            cur.execute("SELECT pg_current_wal_lsn()")
            end_lsn = cur.fetchone()[0]
        conn.close()
        print(f"workload done at {end_lsn}; waiting for the records", file=sys.stderr)
        wait_for("the heartbeat topic", lambda: HEARTBEAT_TOPIC in topics())
        time.sleep(8.0)
        records = {t: read_topic(t) for t in topics()}
        subs = {s: latest_schema(s) for s in subjects(PREFIX)}
        status = http("GET", f"{svc_connect.BASE}/connectors/{CONNECTOR}/status")
        golden = {
            "captured_with": {
                "debezium_connector_postgres": svc_connect.DEBEZIUM_POSTGRES,
                "kafka_connect": svc_connect.VERSION,
                "apicurio_converter": svc_connect.APICURIO,
                "postgresql": 15,
                "connector_config": {
                    k: v for k, v in connector_config().items() if k != "database.password"
                },
                "seconds": round(time.monotonic() - t0, 1),
                "task_state": status["tasks"][0]["state"],
            },
            "subjects": normalize(subs),
            "records": normalize(records),
        }
        out = HERE / "golden" / f"debezium-{svc_connect.DEBEZIUM_POSTGRES}.json"
        out.parent.mkdir(exist_ok=True)
        out.write_text(json.dumps(golden, indent=1, sort_keys=False) + "\n")
        print(f"wrote {out}: {len(subs)} subjects, {sum(map(len, records.values()))} records")
    finally:
        if not keep:
            drop_everything()
        if started_here:
            connect.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
