"""Capture the snapshot markers Debezium's PostgreSQL connector writes, as the reference
for pgcdc's (`source.snapshot` and `source.sequence` of every snapshot record).

    PGCDC_STATE_DIR=... python -m tests.consumers.capture_debezium_snapshot_markers

Runs once by hand, not in the suite (test_snapshot_markers_golden.py reads its output):
1. for each scenario of snapshot_marker_workload.py, creates a fresh database on the
   local PostgreSQL 15 with its tables and rows;
2. starts Kafka Connect (deploy/local/svc_connect.py) if it is not running, and creates
   one Debezium PostgreSQL connector per scenario (pgoutput, `snapshot.mode = initial`,
   a slot and topic prefix of its own, JSON values: the markers do not depend on the
   converter);
3. waits until every non-empty table's topic holds all its rows, and a little more;
4. writes `golden/debezium-<version>-snapshot-markers.json`: per scenario, per table in
   snapshot order, the records in topic order as {id, op, snapshot, sequence, lsn};
5. deletes the connectors, their slots and publications, the databases and topics.

It stops the Connect worker only if it started it.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient

from tests.consumers import snapshot_marker_workload as wl
from tests.consumers.capture_debezium_golden import BOOTSTRAP, PG, http, pg_connect, wait_for
from tests.fixtures.slots import drop_slot_when_released

# Connect keeps a connector's offsets under its name: a new name starts from a snapshot.
RUN = int(time.time())
HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
sys.path.insert(0, str(REPO / "deploy" / "local"))

import svc_connect  # noqa: E402  (needs the sys.path entry above)


def names(scenario: str) -> dict[str, str]:
    """Database, slot, publication, topic prefix and connector of one scenario."""
    base = f"dbz_snapm_{scenario}"
    connector = f"dbz-snapm-{scenario.replace('_', '-')}-{RUN}"
    return {"db": base, "slot": base, "publication": base, "prefix": base, "connector": connector}


def connector_config(scenario: str) -> dict[str, str]:
    n = names(scenario)
    return {
        "connector.class": "io.debezium.connector.postgresql.PostgresConnector",
        "tasks.max": "1",
        "database.hostname": PG["host"],
        "database.port": str(PG["port"]),
        "database.user": PG["user"],
        "database.password": "",
        "database.dbname": n["db"],
        "topic.prefix": n["prefix"],
        "plugin.name": "pgoutput",
        "slot.name": n["slot"],
        "publication.name": n["publication"],
        "publication.autocreate.mode": "filtered",
        "table.include.list": "public\\.snapm_.*",
        "snapshot.mode": "initial",
        "key.converter": "org.apache.kafka.connect.json.JsonConverter",
        "key.converter.schemas.enable": "false",
        "value.converter": "org.apache.kafka.connect.json.JsonConverter",
        "value.converter.schemas.enable": "false",
    }


def topic_names() -> set[str]:
    consumer = Consumer({"bootstrap.servers": BOOTSTRAP, "group.id": "snapm-list"})
    try:
        return set(consumer.list_topics(timeout=10).topics)
    finally:
        consumer.close()


def read_topic(topic: str) -> list[dict[str, Any]]:
    """Every record of a one-partition topic, values parsed as JSON."""
    consumer = Consumer({"bootstrap.servers": BOOTSTRAP, "group.id": f"snapm-{time.time_ns()}"})
    try:
        tp = TopicPartition(topic, 0, 0)
        end = consumer.get_watermark_offsets(tp, timeout=10)[1]
        consumer.assign([tp])
        out: list[dict[str, Any]] = []
        while len(out) < end:
            msg = consumer.poll(5.0)
            if msg is None:
                raise RuntimeError(f"{topic}: {len(out)} of {end} records read")
            if msg.error() is not None:
                raise RuntimeError(str(msg.error()))
            out.append(json.loads(msg.value()))
        return out
    finally:
        consumer.close()


def stale_topics(prefix: str) -> list[str]:
    return [t for t in topic_names() if t.startswith(f"{prefix}.")]


def cleanup(scenario: str) -> None:
    n = names(scenario)
    stem = n["connector"].removesuffix(f"-{RUN}")
    for name in http("GET", f"{svc_connect.BASE}/connectors"):
        if name.startswith(f"{stem}-"):
            http("DELETE", f"{svc_connect.BASE}/connectors/{name}")
    admin = pg_connect("postgres")
    drop_slot_when_released(admin, n["slot"])
    with admin.cursor() as cur:
        cur.execute(f"DROP DATABASE IF EXISTS {n['db']} WITH (FORCE)")
    admin.close()
    stale = stale_topics(n["prefix"])
    if stale:
        admin_client = AdminClient({"bootstrap.servers": BOOTSTRAP})
        for future in admin_client.delete_topics(stale, operation_timeout=30).values():
            future.result()
        wait_for(f"the topics of {scenario} to go", lambda: not stale_topics(n["prefix"]), 60.0)


def main() -> int:
    connect = svc_connect.Connect()
    started_here = False
    connect.install()
    if not connect.healthy():
        connect.start()
        connect.wait_healthy()
        started_here = True
    try:
        for scenario in wl.SCENARIOS:
            cleanup(scenario)
            n = names(scenario)
            admin = pg_connect("postgres")
            with admin.cursor() as cur:
                cur.execute(f"CREATE DATABASE {n['db']}")
            admin.close()
            conn = pg_connect(n["db"])
            with conn.cursor() as cur:
                for sql in wl.ddl(scenario):
                    cur.execute(sql)
            conn.close()
            http(
                "PUT",
                f"{svc_connect.BASE}/connectors/{n['connector']}/config",
                connector_config(scenario),
            )
        out: dict[str, Any] = {}
        for scenario, tables in wl.SCENARIOS.items():
            prefix = names(scenario)["prefix"]

            def complete(prefix: str = prefix, tables: Any = tables) -> bool:
                have = topic_names()
                for table, rows in tables:
                    topic = f"{prefix}.public.{table}"
                    if rows and (topic not in have or len(read_topic(topic)) < rows):
                        return False
                return True

            wait_for(f"the snapshot of {scenario}", complete, 180.0)
        time.sleep(5.0)  # anything past the expected rows would show up now
        for scenario, tables in wl.SCENARIOS.items():
            prefix = names(scenario)["prefix"]
            have = topic_names()
            per_table: dict[str, list[dict[str, Any]]] = {}
            for table, _rows in tables:
                topic = f"{prefix}.public.{table}"
                records = read_topic(topic) if topic in have else []
                per_table[table] = [
                    {
                        "id": r["after"]["id"],
                        "op": r["op"],
                        "snapshot": r["source"]["snapshot"],
                        "sequence": r["source"]["sequence"],
                        "lsn": r["source"]["lsn"],
                    }
                    for r in records
                ]
            out[scenario] = per_table
        golden = {
            "captured_with": {
                "debezium_connector_postgres": svc_connect.DEBEZIUM_POSTGRES,
                "kafka_connect": svc_connect.VERSION,
                "postgresql": 15,
                "connector_config": {
                    k: v
                    for k, v in connector_config("${scenario}").items()
                    if k != "database.password"
                },
            },
            "scenarios": out,
        }
        path = HERE / "golden" / f"debezium-{svc_connect.DEBEZIUM_POSTGRES}-snapshot-markers.json"
        path.write_text(json.dumps(golden, indent=1) + "\n")
        print(f"wrote {path}")
    finally:
        for scenario in wl.SCENARIOS:
            cleanup(scenario)
        if started_here:
            connect.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
