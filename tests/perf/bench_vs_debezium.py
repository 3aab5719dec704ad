"""Benchmark (a script, not a test): `pgcdc run` against Debezium, alternately, same services.

    PGCDC_STATE_DIR=... python -m tests.perf.bench_vs_debezium [--rows 1000000]
        [--txn-rows 10000] [--reps 3] [--pgbench-s 30] [--lat-rate 100] [--lat-rows 100]
        [--lat-s 20] [--change-rows 200000]
        [--only bulk,single,wide,toast,updates,updates-full,deletes,pgbench,latency]
        [--systems pgcdc,debezium] [--compression lz4] [--warmup 0]

Both read the shared PostgreSQL 15 (127.0.0.1:55415) and write Avro to the shared Kafka
(127.0.0.1:19092) with schemas in the shared Apicurio (http://127.0.0.1:18081):

- pgcdc: `python -m service.app.cli run` (a subprocess, snapshot.mode=never, work_mem
  64MB, the implementation PGCDC_IMPL selects), a fresh worker per workload;
- Debezium 3.6.1's PostgreSQL connector (pgoutput, snapshot.mode no_data,
  provide.transaction.metadata=true so that it writes what pgcdc always writes: the
  BEGIN/END events and each event's `transaction` block; defaults otherwise) in Kafka
  Connect 4.1.1 (deploy/local/svc_connect.py, started here if it is not
  running and stopped again only then), with Apicurio's AvroConverter for keys and values
  (`apicurio.registry.url=<registry>/apis/registry/v3`, auto-register, find-latest,
  dereference-schema), a fresh connector, slot and publication per workload.
- Both producers compress alike: `--compression` (default lz4, pgcdc's default
  kafka.compression_type) is pgcdc's PGCDC_KAFKA__COMPRESSION_TYPE and the connector's
  producer.override.compression.type (Connect's own default is none).

`--warmup N` runs N repetitions first whose figures are printed but not counted: the
first connector in a Connect worker runs Debezium's code before the JIT compiled it
(its CPU per row was 3x the next repetition's on the toast workload).

Each repetition runs every workload under pgcdc and then under Debezium, each in its
own fresh database with the same 5-column table (bigint key, int, text, numeric(12,2),
timestamptz). Workloads:
- bulk: `--rows` rows in `--txn-rows`-row transactions; single: `--rows` rows in one;
  wide: `--change-rows` rows of a 13-column table of about 0.8 KB a row; toast:
  `--change-rows` / 10 rows with a 5-8 KB jsonb document each, stored out of line
  (tests/perf/shapes); updates: UPDATE of non-key columns of `--change-rows` rows written
  before the system's slot (REPLICA IDENTITY DEFAULT), updates-full the same under
  REPLICA IDENTITY FULL; deletes: DELETE of them; all in `--txn-rows`-row transactions.
  pgbench: `pgbench -c4 -j2 -T --pgbench-s` (4 row changes per transaction, scale 1).
  rows/s = rows / (first statement -> last event readable by a read_committed consumer):
  for pgcdc, the committed offset passing the last commit (its Kafka transaction is then
  committed); for Debezium (not transactional), the topics' end offsets reaching the
  expected count. "lag" is that moment minus the end of the workload.
- latency: `--lat-rate` transactions/s of `--lat-rows` rows for `--lat-s` seconds; a
  read_committed consumer here decodes each event and takes receive time minus its
  `source.ts_ms` (the source commit time); p50 and p99.
For each run: the worker's CPU seconds over the workload (pgcdc's process; Connect's JVM)
and its peak RSS (VmHWM: for pgcdc the worker's life, one workload; for Connect the JVM's
whole life, so it only grows). Beside pgcdc's bulk and single runs, PostgreSQL's own
decoders decode the same WAL: a pgoutput and a test_decoding slot created before the
workload are peeked after it (backend CPU from /proc); so beside every workload but
pgbench and latency. "CPU/row" is the worker's CPU over the workload per row changed.

The table prints, per workload and system, the median and the min-max over `--reps`.
The machine has 2 cores shared with other work: the load average is printed too.
"""

from __future__ import annotations

import abc
import argparse
import io
import json
import os
import statistics
import struct
import subprocess
import sys
import threading
import time
import urllib.request
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import fastavro
from confluent_kafka import Consumer, TopicPartition

from tests.fixtures.services import ensure_service
from tests.integration.pipeline_kafka_support import (
    Pipeline,
    WorkerProcess,
    insert_lsn,
    unique,
)
from tests.perf.shapes import NARROW, TOAST, WIDE, Shape

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "deploy" / "local"))

import svc_connect  # noqa: E402  (needs the sys.path entry above)

TABLE = NARROW.table
INSERT = NARROW.insert
CLK_TCK = os.sysconf("SC_CLK_TCK")
PGBENCH_TABLES = ("pgbench_accounts", "pgbench_branches", "pgbench_tellers", "pgbench_history")


def proc_cpu(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def proc_hwm_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return 0.0


def http(method: str, url: str, body: Any = None) -> Any:
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(
        url, data=data, method=method, headers={"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(req, timeout=60) as resp:
        raw = resp.read()
    return json.loads(raw) if raw else None


@dataclass
class Result:
    rows: int
    seconds: float
    lag: float
    cpu: float
    rss_mb: float
    extra: dict[str, float] = field(default_factory=dict)

    @property
    def rate(self) -> float:
        return self.rows / self.seconds


class System(abc.ABC):
    """One CDC system under test: prepares a database, starts, waits, stops."""

    name = ""

    def __init__(
        self,
        pg: dict[str, Any],
        kafka: dict[str, Any],
        registry: dict[str, Any],
        compression: str = "lz4",
    ):
        self.pg, self.kafka, self.registry = pg, kafka, registry
        self.compression = compression
        self.p: Pipeline | None = None

    def new_db(self, pgbench: bool, tables: tuple[str, ...] = (TABLE,)) -> Pipeline:
        p = Pipeline(
            self.pg,
            self.kafka,
            self.registry,
            unique(f"vs{self.name[:3]}"),
            heartbeat_s=1.0,
            extra_env={
                "PGCDC_SNAPSHOT__MODE": "never",
                "PGCDC_LOG__LEVEL": "info",
                "PGCDC_KAFKA__COMPRESSION_TYPE": self.compression,
            },
        )
        p.create(list(tables))
        if pgbench:
            subprocess.run(
                [
                    f"{self.pg['bin']}/pgbench",
                    *("-h", str(self.pg["host"]), "-p", str(self.pg["port"])),
                    *("-U", str(self.pg["user"]), "-i", "-q", p.db),
                ],
                capture_output=True,
                check=True,
            )
        self.p = p
        return p

    @abc.abstractmethod
    def start(self) -> None:
        """Each system defines it."""

    @abc.abstractmethod
    def wait_caught_up(self, lsn: int, expected: int, topics: list[str]) -> float:
        """Each system defines it."""

    @abc.abstractmethod
    def pid(self) -> int:
        """Each system defines it."""

    @abc.abstractmethod
    def stop(self) -> None:
        """Each system defines it."""

    def topic(self, table: str) -> str:
        assert self.p is not None
        return f"{self.p.prefix}.public.{table}"


class Pgcdc(System):
    name = "pgcdc"

    def start(self) -> None:
        assert self.p is not None
        self.worker: WorkerProcess = self.p.start_worker()
        self.worker.wait_ready(120)
        deadline = time.monotonic() + 60
        while self.p.last_offset() is None:
            if time.monotonic() > deadline:
                raise RuntimeError(f"no first offset:\n{self.worker.tail()}")
            time.sleep(0.2)

    def wait_caught_up(self, lsn: int, expected: int, topics: list[str]) -> float:
        assert self.p is not None
        deadline = time.monotonic() + 1800
        while time.monotonic() < deadline:
            last = self.p.last_offset()
            if last is not None and last.confirmed_lsn > lsn:
                return time.monotonic()
            if self.worker.proc.poll() is not None:
                raise RuntimeError(f"worker exited:\n{self.worker.tail()}")
            time.sleep(0.1)
        raise RuntimeError("pgcdc did not catch up")

    def pid(self) -> int:
        return self.worker.pid

    def stop(self) -> None:
        code = self.worker.terminate()
        if code != 0:
            print(f"  pgcdc exited {code}: {self.worker.tail(400)}", flush=True)
        assert self.p is not None
        self.p.drop(topics=True)


def connector_config(
    pg: dict[str, Any],
    registry: dict[str, Any],
    p: Pipeline,
    snapshot_mode: str,
    compression: str = "lz4",
) -> dict[str, str]:
    """Debezium's PostgreSQL connector on `p`'s database: pgoutput, Apicurio's
    AvroConverter for keys and values, its producer compressing as pgcdc's does
    (`compression`), defaults otherwise."""
    base = registry["url"].split("/apis/")[0]
    conv: dict[str, str] = {}
    for side in ("key.converter", "value.converter"):
        conv |= {
            side: "io.apicurio.registry.utils.converter.AvroConverter",
            f"{side}.apicurio.registry.url": f"{base}/apis/registry/v3",
            f"{side}.apicurio.registry.auto-register": "true",
            f"{side}.apicurio.registry.find-latest": "true",
            f"{side}.apicurio.registry.dereference-schema": "true",
        }
    return {
        "connector.class": "io.debezium.connector.postgresql.PostgresConnector",
        "tasks.max": "1",
        "database.hostname": str(pg["host"]),
        "database.port": str(pg["port"]),
        "database.user": str(pg["user"]),
        "database.password": "",
        "database.dbname": p.db,
        "topic.prefix": p.prefix,
        "plugin.name": "pgoutput",
        "slot.name": f"{p.name}_dbz",  # p.name is pgcdc's physical slot
        "publication.name": p.name,
        "publication.autocreate.mode": "all_tables",
        "table.include.list": "public\\..*",
        "snapshot.mode": snapshot_mode,
        "producer.override.compression.type": compression,
        **conv,
    }


class Debezium(System):
    name = "debezium"

    def start(self) -> None:
        p = self.p
        assert p is not None
        self.connector = f"vsdbz-{p.name}"
        # pgcdc always publishes transaction metadata: the same work for Debezium.
        config = {
            **connector_config(self.pg, self.registry, p, "no_data", self.compression),
            "provide.transaction.metadata": "true",
        }
        http("PUT", f"{svc_connect.BASE}/connectors/{self.connector}/config", config)
        # Ready when a warm-up row is in Kafka (slot streaming, topic and schema exist);
        # rows written before the task created its slot are not streamed: write again.
        deadline = time.monotonic() + 180
        i = 0
        while end_offsets([self.topic("bench")], self.kafka["bootstrap"]) < 1:
            if time.monotonic() > deadline:
                raise RuntimeError(
                    f"Debezium did not start: "
                    f"{http('GET', f'{svc_connect.BASE}/connectors/{self.connector}/status')}"
                )
            if i % 10 == 0:
                p.execute(f"INSERT INTO bench (id) VALUES ({-100 - i})")  # any table shape
            i += 1
            time.sleep(0.5)
        time.sleep(2.0)  # later warm-up rows land too
        self.base = {t: end_offsets([t], self.kafka["bootstrap"]) for t in self._all_topics()}

    def _all_topics(self) -> list[str]:
        return [self.topic("bench"), *(self.topic(t) for t in PGBENCH_TABLES)]

    def wait_caught_up(self, lsn: int, expected: int, topics: list[str]) -> float:
        deadline = time.monotonic() + 1800
        boot = self.kafka["bootstrap"]
        while time.monotonic() < deadline:
            got = sum(end_offsets([t], boot) - self.base.get(t, 0) for t in topics)
            if got >= expected:
                now = time.monotonic()
                for t in self._all_topics():
                    self.base[t] = end_offsets([t], boot)
                return now
            time.sleep(0.1)
        raise RuntimeError(f"Debezium did not catch up ({expected} events)")

    def pid(self) -> int:
        return int(svc_connect.Connect().pid_file().read_text().split()[0])

    def stop(self) -> None:
        http("DELETE", f"{svc_connect.BASE}/connectors/{self.connector}")
        assert self.p is not None
        slot = f"{self.p.name}_dbz"
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:  # the task lets its slot go
            rows = self.p.query(
                "SELECT active FROM pg_replication_slots WHERE slot_name = %s", (slot,)
            )
            if not rows or not rows[0][0]:
                break
            time.sleep(0.3)
        if self.p.query("SELECT 1 FROM pg_replication_slots WHERE slot_name = %s", (slot,)):
            self.p.execute(f"SELECT pg_drop_replication_slot('{slot}')")
        self.p.drop(topics=True)


def end_offsets(topics: list[str], bootstrap: str) -> int:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "vs-hw"})
    try:
        total = 0
        for topic in topics:
            meta = c.list_topics(topic, timeout=10).topics.get(topic)
            if meta is None or meta.error is not None:
                continue
            for part in meta.partitions:
                total += c.get_watermark_offsets(
                    TopicPartition(topic, part), timeout=10, cached=False
                )[1]
        return total
    finally:
        c.close()


class ServerDecoders:
    """A test_decoding and a pgoutput slot created before a workload, peeked after it."""

    def __init__(self, p: Pipeline) -> None:
        self.p = p
        self.td, self.po = unique("td_"), unique("po_")
        p.execute(
            f"CREATE PUBLICATION {self.po} FOR TABLE bench",
            f"SELECT pg_create_logical_replication_slot('{self.td}', 'test_decoding')",
            f"SELECT pg_create_logical_replication_slot('{self.po}', 'pgoutput')",
        )

    def _timed(self, sql: str) -> float:
        conn = self.p.connect()
        try:
            with conn.cursor() as cur:
                cur.execute("SELECT pg_backend_pid()")
                pid = int(cur.fetchone()[0])
                c0 = proc_cpu(pid)
                cur.execute(sql)
                cur.fetchall()
                return proc_cpu(pid) - c0
        finally:
            conn.close()

    def drain(self) -> dict[str, float]:
        td = self._timed(
            f"SELECT count(*) FROM pg_logical_slot_get_changes('{self.td}', NULL, NULL)"
        )
        po = self._timed(
            f"SELECT count(*) FROM pg_logical_slot_get_binary_changes('{self.po}', NULL, NULL, "
            f"'proto_version', '1', 'publication_names', '{self.po}')"
        )
        self.p.execute(
            f"SELECT pg_drop_replication_slot('{self.td}')",
            f"SELECT pg_drop_replication_slot('{self.po}')",
            f"DROP PUBLICATION {self.po}",
        )
        return {"test_decoding_cpu": td, "pgoutput_cpu": po}


@dataclass(frozen=True)
class Changes:
    """A row-change workload: the tables (and rows, written before the system's slot
    exists, so no system decodes them), and one statement per transaction, formatted
    with the transaction's first and last id (`a`, `b`)."""

    tables: tuple[str, ...]
    statement: str


def _prefilled(shape: Shape, rows: int, *extra: str) -> tuple[str, ...]:
    step = 100_000
    fill = (shape.insert.format(a=a, b=min(a + step - 1, rows)) for a in range(1, rows + 1, step))
    return (shape.table, *fill, *extra, "VACUUM ANALYZE bench")


def changes(workload: str, rows: int) -> Changes:
    """The tables and statement of a row-change workload (module docstring)."""
    if workload in ("bulk", "single"):
        return Changes((TABLE,), INSERT)
    if workload == "wide":
        return Changes((WIDE.table,), WIDE.insert)
    if workload == "toast":
        return Changes((TOAST.table,), TOAST.insert)
    update = "UPDATE bench SET n = n + 1, amount = amount + 1 WHERE id BETWEEN {a} AND {b}"
    if workload == "updates":
        return Changes(_prefilled(NARROW, rows), update)
    if workload == "updates-full":
        return Changes(_prefilled(NARROW, rows, "ALTER TABLE bench REPLICA IDENTITY FULL"), update)
    if workload == "deletes":
        return Changes(_prefilled(NARROW, rows), "DELETE FROM bench WHERE id BETWEEN {a} AND {b}")
    raise ValueError(f"no row-change workload {workload!r}")


def run_inserts(
    sys_: System, rows: int, per_txn: int, server: bool, statement: str = INSERT
) -> Result:
    """`statement` over ids 1..rows, `per_txn` a transaction (each changes that many
    rows), then until the system has published them."""
    p = sys_.p
    assert p is not None
    decoders = ServerDecoders(p) if server else None
    pid = sys_.pid()
    c0 = proc_cpu(pid)
    conn = p.connect()
    cur = conn.cursor()
    cur.execute("SELECT pg_current_wal_insert_lsn()")
    wal_start = cur.fetchone()[0]
    t0 = time.monotonic()
    for a in range(1, rows + 1, per_txn):
        cur.execute("BEGIN")
        cur.execute(statement.format(a=a, b=min(a + per_txn - 1, rows)))
        last = insert_lsn(cur)
        cur.execute("COMMIT")
    t_src = time.monotonic()
    cur.execute("SELECT pg_wal_lsn_diff(pg_current_wal_insert_lsn(), %s)", (wal_start,))
    wal_mb = float(cur.fetchone()[0]) / 1e6  # the workload's WAL (and others' beside it)
    conn.close()
    t_end = sys_.wait_caught_up(last, rows, [sys_.topic("bench")])
    cpu = proc_cpu(pid) - c0
    extra = decoders.drain() if decoders is not None else {}
    extra["source_s"] = t_src - t0
    extra["wal_mb"] = wal_mb
    return Result(rows, t_end - t0, t_end - t_src, cpu, proc_hwm_mb(pid), extra)


def run_pgbench(sys_: System, seconds: int) -> Result:
    p = sys_.p
    assert p is not None
    pid = sys_.pid()
    c0 = proc_cpu(pid)
    t0 = time.monotonic()
    out = subprocess.run(
        [
            f"{p.pg['bin']}/pgbench",
            *("-h", str(p.pg["host"]), "-p", str(p.pg["port"]), "-U", str(p.pg["user"])),
            *("-T", str(seconds), "-c", "4", "-j", "2", "-n", p.db),
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    t_src = time.monotonic()
    txns = next(
        int(line.split(":")[1])
        for line in out.splitlines()
        if line.startswith("number of transactions actually processed")
    )
    last = int(p.query("SELECT pg_current_wal_insert_lsn() - '0/0'::pg_lsn")[0][0])
    p.execute("INSERT INTO bench VALUES (-1, 0, 'pgbench end', 0, now())")
    t_end = sys_.wait_caught_up(last, 4 * txns, [sys_.topic(t) for t in PGBENCH_TABLES])
    cpu = proc_cpu(pid) - c0
    return Result(
        4 * txns, t_end - t0, t_end - t_src, cpu, proc_hwm_mb(pid), {"tps": txns / seconds}
    )


_schemas: dict[int, Any] = {}


def source_ts_ms(raw: bytes, ccompat: str) -> int:
    """source.ts_ms of a Confluent-framed Avro envelope (both systems frame so)."""
    _, schema_id = struct.unpack(">bI", raw[:5])
    parsed = _schemas.get(schema_id)
    if parsed is None:
        text = http("GET", f"{ccompat}/schemas/ids/{schema_id}")["schema"]
        parsed = _schemas[schema_id] = fastavro.parse_schema(json.loads(text))
    value = fastavro.schemaless_reader(io.BytesIO(raw[5:]), parsed)
    return int(value["source"]["ts_ms"])


def run_latency(sys_: System, rate: int, rows_per_txn: int, seconds: int) -> Result:
    p = sys_.p
    assert p is not None
    topic = sys_.topic("bench")
    p.execute("INSERT INTO bench VALUES (-5, 0, 'latency warm-up', 0, now())")
    deadline = time.monotonic() + 60  # the topic exists before the consumer is assigned
    while end_offsets([topic], sys_.kafka["bootstrap"]) < 1 and time.monotonic() < deadline:
        time.sleep(0.2)
    consumer = Consumer(
        {
            "bootstrap.servers": sys_.kafka["bootstrap"],
            "group.id": unique("lat"),
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
        }
    )
    parts = []
    for part in consumer.list_topics(topic, timeout=10).topics[topic].partitions:
        high = consumer.get_watermark_offsets(TopicPartition(topic, part), timeout=10, cached=False)
        parts.append(TopicPartition(topic, part, high[1]))
    consumer.assign(parts)
    received: list[tuple[float, bytes]] = []
    stop = threading.Event()

    def consume() -> None:
        # poll() returns as soon as one event is readable; consume(n, 0) then drains what
        # is already fetched without waiting. (consume(n, t) waits for n events or t, so
        # with n above the arrival burst it would add up to t to every measured latency.)
        while not stop.is_set():
            first = consumer.poll(0.05)
            if first is None:
                continue
            for msg in [first, *consumer.consume(1000, 0)]:
                if msg.error() is None and msg.value() is not None:
                    received.append((time.time(), msg.value()))

    thread = threading.Thread(target=consume, daemon=True)
    thread.start()
    time.sleep(1.0)  # assigned and fetching
    pid = sys_.pid()
    c0 = proc_cpu(pid)
    conn = p.connect()
    cur = conn.cursor()
    base = 10_000_000
    n = rate * seconds
    t0 = time.monotonic()
    for i in range(n):
        due = t0 + i / rate
        now = time.monotonic()
        if due > now:
            time.sleep(due - now)
        a = base + i * rows_per_txn
        cur.execute(INSERT.format(a=a, b=a + rows_per_txn - 1))
    t_src = time.monotonic()
    conn.close()
    expected = n * rows_per_txn
    deadline = time.monotonic() + 120
    while len(received) < expected and time.monotonic() < deadline:
        time.sleep(0.1)
    t_end = time.monotonic()
    stop.set()
    thread.join(10)
    consumer.close()
    cpu = proc_cpu(pid) - c0
    ccompat = sys_.registry["url"]
    lat = sorted(rt * 1000 - source_ts_ms(raw, ccompat) for rt, raw in received)

    def pct(q: float) -> float:
        return lat[min(len(lat) - 1, int(q * len(lat)))]

    return Result(
        len(received),
        t_end - t0,
        t_end - t_src,
        cpu,
        proc_hwm_mb(pid),
        {
            "p50_ms": pct(0.5),
            "p99_ms": pct(0.99),
            "max_ms": lat[-1],
            "missing": expected - len(lat),
        },
    )


def fmt(xs: list[float], spec: str) -> str:
    if not xs:
        return "-"
    med = statistics.median(xs)
    if len(xs) == 1:
        return format(med, spec)
    return f"{format(med, spec)} ({format(min(xs), spec)}-{format(max(xs), spec)})"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--txn-rows", type=int, default=10_000)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--warmup", type=int, default=0, help="repetitions not counted")
    parser.add_argument("--pgbench-s", type=int, default=30)
    parser.add_argument("--lat-rate", type=int, default=100, help="transactions per second")
    parser.add_argument("--lat-rows", type=int, default=100, help="rows per transaction")
    parser.add_argument("--lat-s", type=int, default=20)
    parser.add_argument("--change-rows", type=int, default=200_000)
    parser.add_argument("--only", default="bulk,single,pgbench,latency")
    parser.add_argument("--systems", default="pgcdc,debezium")
    parser.add_argument(
        "--compression",
        default="lz4",
        choices=("none", "gzip", "snappy", "lz4", "zstd"),
        help="both producers' compression.type",
    )
    args = parser.parse_args()
    every = (
        "bulk",
        "single",
        "wide",
        "toast",
        "updates",
        "updates-full",
        "deletes",
        "pgbench",
        "latency",
    )
    only = [w for w in every if w in args.only.split(",")]
    names = args.systems.split(",")
    pg, kafka, registry = (
        ensure_service("pg15"),
        ensure_service("kafka"),
        ensure_service("registry"),
    )
    started_connect = False
    if "debezium" in names:
        connect = svc_connect.Connect()
        if not connect.healthy():
            connect.install()
            connect.start()
            connect.wait_healthy()
            started_connect = True
    systems: dict[str, System] = {
        n: (Pgcdc if n == "pgcdc" else Debezium)(pg, kafka, registry, args.compression)
        for n in names
    }
    results: dict[tuple[str, str], list[Result]] = defaultdict(list)
    workloads: dict[str, Callable[[System], Result]] = {
        "bulk": lambda s: run_inserts(s, args.rows, args.txn_rows, s.name == "pgcdc"),
        "single": lambda s: run_inserts(s, args.rows, args.rows, s.name == "pgcdc"),
        "wide": lambda s: run_inserts(
            s, args.change_rows, args.txn_rows, s.name == "pgcdc", WIDE.insert
        ),
        "toast": lambda s: run_inserts(
            s, args.change_rows // 10, args.txn_rows // 10, s.name == "pgcdc", TOAST.insert
        ),
        **{
            w: (
                lambda s, w=w: run_inserts(
                    s,
                    args.change_rows,
                    args.txn_rows,
                    s.name == "pgcdc",
                    changes(w, args.change_rows).statement,
                )
            )
            for w in ("updates", "updates-full", "deletes")
        },
        "pgbench": lambda s: run_pgbench(s, args.pgbench_s),
        "latency": lambda s: run_latency(s, args.lat_rate, args.lat_rows, args.lat_s),
    }
    print(
        f"PostgreSQL {pg['version']}, Kafka {kafka['bootstrap']}, PGCDC_IMPL="
        f"{os.environ.get('PGCDC_IMPL', '(default)')}, compression {args.compression}, "
        f"load average at start "
        f"{os.getloadavg()[0]:.2f}",
        flush=True,
    )
    try:
        for rep in range(-args.warmup, args.reps):
            for w in only:
                for n in names:
                    s = systems[n]
                    tables = (TABLE,) if w in ("pgbench", "latency") else None
                    s.new_db(
                        pgbench=w == "pgbench",
                        tables=tables or changes(w, args.change_rows).tables,
                    )
                    try:
                        s.start()
                        r = workloads[w](s)
                    finally:
                        s.stop()
                    if rep >= 0:
                        results[(w, n)].append(r)
                    label = f"rep {rep + 1}" if rep >= 0 else "warm-up"
                    print(
                        f"{label} {w:<12} {n:<9} {r.rows:>9,} rows {r.rate:>9,.0f} rows/s "
                        f"lag {r.lag:5.1f} s cpu {r.cpu:6.1f} s "
                        f"({r.cpu / r.rows * 1e6:.1f} us/row) rss {r.rss_mb:6.0f} MB "
                        f"{' '.join(f'{k}={v:.2f}' for k, v in r.extra.items())} "
                        f"load {os.getloadavg()[0]:.2f}",
                        flush=True,
                    )
    finally:
        if started_connect:
            svc_connect.Connect().stop()
    print(
        f"\nmedian (min-max) over {args.reps} repetitions (after {args.warmup} not counted); "
        "load average now "
        f"{os.getloadavg()[0]:.2f}"
    )
    head = (
        f"{'workload':<14}{'system':<10}{'rows/s':>26}{'lag s':>20}{'CPU s':>22}"
        f"{'CPU/row us':>22}{'peak RSS MB':>22}"
    )
    print(head)
    for w in only:
        for n in names:
            rs = results[(w, n)]
            print(
                f"{w:<14}{n:<10}{fmt([r.rate for r in rs], ',.0f'):>26}"
                f"{fmt([r.lag for r in rs], '.1f'):>20}{fmt([r.cpu for r in rs], '.1f'):>22}"
                f"{fmt([r.cpu / r.rows * 1e6 for r in rs], ',.1f'):>22}"
                f"{fmt([r.rss_mb for r in rs], '.0f'):>22}"
            )
            if w == "latency":
                p50 = fmt([r.extra["p50_ms"] for r in rs], ".0f")
                p99 = fmt([r.extra["p99_ms"] for r in rs], ".0f")
                print(f"{'':<20}commit -> consumer p50 {p50} ms, p99 {p99} ms")
            if w == "pgbench":
                print(f"{'':<20}pgbench tps {fmt([r.extra['tps'] for r in rs], ',.0f')}")
            if w not in ("pgbench", "latency") and n == "pgcdc":
                for dec in ("pgoutput", "test_decoding"):
                    rates = fmt([r.rows / max(r.extra[f"{dec}_cpu"], 0.01) for r in rs], ",.0f")
                    print(f"{'':<24}PostgreSQL {dec} on the same WAL: {rates} rows/s (backend CPU)")
                src = fmt([r.rows / r.extra["source_s"] for r in rs], ",.0f")
                print(f"{'':<24}PostgreSQL writing the rows: {src} rows/s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
