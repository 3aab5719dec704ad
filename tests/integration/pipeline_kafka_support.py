"""Helpers for the end-to-end tests: real PostgreSQL -> `pgcdc run` -> real Kafka + Apicurio.

`Pipeline` owns one test's resources: a fresh database (with the DDL capture installed
by `connectors.postgres.setup.setup`), a physical slot, a topic prefix and a state directory. It
starts workers as subprocesses (`python -m service.app.cli run`, configured only through
`PGCDC_*` environment variables, JSON logs on stderr into a file), and drops the slot and
the database at the end, so the shared servers keep no WAL for it. With
PGCDC_TEST_KEEP_LOGS set to a directory, `drop` first copies the workers' logs there (one
subdirectory per pipeline), so that a failed run's logs outlive its state directory.

Reading back is what a downstream consumer does: a plain `confluent_kafka.Consumer`
with `isolation.level=read_committed`, decoded by the writer's schema from the registry
(`tests.integration.writer_schema`: confluent's `AvroDeserializer`'s value, checked
against it on the first record of every schema id).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import psycopg2
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient  # type: ignore[attr-defined]

from connectors.avro.registry_client import client_conf
from connectors.kafka.offsets import OffsetRecord, read_last_offset
from connectors.kafka.security import security_conf
from connectors.postgres.setup import setup
from service.config import Settings, load_settings
from tests.integration.txn_markers import await_markers

REPO = Path(__file__).resolve().parents[2]
READY_EVENTS = ("worker_consistent", "worker_resumed")


def unique(name: str) -> str:
    return f"{name}{uuid.uuid4().hex[:10]}"


def parse_lsn(text: str) -> int:
    hi, lo = str(text).split("/")
    return (int(hi, 16) << 32) | int(lo, 16)


def with_db(dsn: str, dbname: str) -> str:
    parts = [p for p in dsn.split() if not p.startswith("dbname=")]
    return " ".join([*parts, f"dbname={dbname}"])


@dataclass
class WorkerProcess:
    """One `pgcdc run` subprocess; its stderr (JSON log lines) goes to `log_path`."""

    proc: subprocess.Popen[bytes]
    log_path: Path
    started: float = field(default_factory=time.monotonic)

    @property
    def pid(self) -> int:
        return self.proc.pid

    def log_text(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def tail(self, chars: int = 4000) -> str:
        return self.log_text()[-chars:]

    def events(self) -> list[dict[str, Any]]:
        """The structured log lines written so far (non-JSON lines are skipped)."""
        out = []
        for raw in self.log_text().splitlines():
            line = raw.strip()
            if line.startswith("{"):
                try:
                    out.append(json.loads(line))
                except ValueError:
                    continue  # a line cut by SIGKILL
        return out

    def has_event(self, name: str) -> bool:
        return any(e.get("event") == name for e in self.events())

    def wait_event(self, names: Sequence[str], timeout: float) -> dict[str, Any]:
        """Wait until one of the log events `names` appears; fail if the worker exits."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for e in self.events():
                if e.get("event") in names:
                    return e
            if self.proc.poll() is not None:
                raise AssertionError(
                    f"worker exited with {self.proc.returncode} before {names}:\n{self.tail()}"
                )
            time.sleep(0.1)
        raise AssertionError(f"no {names} within {timeout}s:\n{self.tail()}")

    def wait_ready(self, timeout: float = 60.0) -> dict[str, Any]:
        return self.wait_event(READY_EVENTS, timeout)

    def stop_when(self, cond: Callable[[], bool], timeout: float, what: str) -> None:
        """Return with the worker stopped (SIGSTOP) at a moment `cond` held, asked while
        it was stopped: what `cond` saw cannot change before the caller acts (a
        SIGKILL). A `cond` that raises leaves the worker running."""
        deadline = time.monotonic() + timeout
        while True:
            assert time.monotonic() < deadline, f"timed out waiting for {what}"
            assert self.proc.poll() is None, self.tail()
            self.proc.send_signal(signal.SIGSTOP)
            try:
                if cond():
                    return
            except BaseException:
                self.proc.send_signal(signal.SIGCONT)
                raise
            self.proc.send_signal(signal.SIGCONT)
            time.sleep(0.02)

    def kill(self) -> None:
        """SIGKILL: no cleanup of any kind runs in the worker."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(30)

    def terminate(self, timeout: float = 60.0) -> int:
        """SIGTERM and wait; returns the exit code."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(timeout)

    def wait(self, timeout: float) -> int:
        return self.proc.wait(timeout)


@dataclass
class Pipeline:
    """One test's database, slot, topic prefix and workers (see the module docstring)."""

    pg: dict[str, Any]
    kafka: dict[str, Any]
    registry: dict[str, Any]
    name: str
    work_mem: str = "64MB"
    heartbeat_s: float = 1.0
    extra_env: dict[str, str] = field(default_factory=dict)
    workers: list[WorkerProcess] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.db = self.name
        self.slot = self.name
        self.prefix = self.name
        self.dsn = with_db(self.pg["dsn"], self.db)
        self.state_dir = Path(tempfile.mkdtemp(prefix=f"{self.name}-"))
        self.spill_dir = self.state_dir / "worker" / "spill"

    # --- life cycle ----------------------------------------------------------------

    def create(self, ddl: Sequence[str]) -> None:
        """Create the database and tables, then `pgcdc setup` (slot + DDL capture)."""
        admin = psycopg2.connect(self.pg["dsn"])
        admin.autocommit = True
        with admin.cursor() as cur:
            cur.execute(f"CREATE DATABASE {self.db}")
        admin.close()
        self.execute(*ddl)
        setup(self.dsn, self.slot)

    def drop(self, *, topics: bool = False) -> None:
        """Kill the workers, drop the slot and the database, remove the state directory;
        with `topics`, delete the Kafka topics too (`delete_topics`: the benchmarks,
        whose topics hold gigabytes; a test's are small and go with the broker's data)."""
        for w in self.workers:
            w.kill()
        if topics:
            self.delete_topics()
        admin = psycopg2.connect(self.pg["dsn"])
        admin.autocommit = True
        with admin.cursor() as cur:
            for _ in range(50):  # a killed worker's walsender may take a moment to go
                cur.execute(
                    "SELECT active FROM pg_replication_slots WHERE slot_name = %s", (self.slot,)
                )
                row = cur.fetchone()
                if row is None:
                    break
                if not row[0]:
                    cur.execute("SELECT pg_drop_replication_slot(%s)", (self.slot,))
                    break
                time.sleep(0.2)
            cur.execute(f"DROP DATABASE IF EXISTS {self.db} WITH (FORCE)")
        admin.close()
        keep = os.environ.get("PGCDC_TEST_KEEP_LOGS")
        if keep:
            kept = Path(keep) / self.state_dir.name
            kept.mkdir(parents=True, exist_ok=True)
            for log in self.state_dir.glob("*.log"):
                shutil.copy(log, kept / log.name)
        shutil.rmtree(self.state_dir, ignore_errors=True)

    def delete_topics(self, timeout_s: float = 30.0) -> list[str]:
        """Delete every topic of this pipeline's prefix (its tables, transaction, message,
        offsets, schema history and progress topics, and Debezium's if one ran on the
        same prefix) and the heartbeat topic; the names deleted."""
        settings = self.settings()
        admin = AdminClient(
            {"bootstrap.servers": settings.kafka.bootstrap_servers, **security_conf(settings)}
        )
        heartbeat = f"{settings.kafka.heartbeat_topic_prefix}.{self.prefix}"
        names = [
            t
            for t in admin.list_topics(timeout=timeout_s).topics
            if t.startswith(f"{self.prefix}.") or t == heartbeat
        ]
        if names:
            for future in admin.delete_topics(names, operation_timeout=timeout_s).values():
                future.result(timeout=timeout_s)
        return names

    # --- SQL -----------------------------------------------------------------------

    def connect(self) -> Any:
        conn = psycopg2.connect(self.dsn)
        conn.autocommit = True
        return conn

    def execute(self, *statements: str) -> None:
        conn = self.connect()
        with conn.cursor() as cur:
            for sql in statements:
                cur.execute(sql)
        conn.close()

    def query(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        conn = self.connect()
        with conn.cursor() as cur:
            cur.execute(sql, params)
            rows = list(cur.fetchall())
        conn.close()
        return rows

    # --- the worker ----------------------------------------------------------------

    def env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("PGCDC_")}
        env.update(
            {
                "PGCDC_SOURCE__HOST": str(self.pg["host"]),
                "PGCDC_SOURCE__PORT": str(self.pg["port"]),
                "PGCDC_SOURCE__USER": str(self.pg["user"]),
                "PGCDC_SOURCE__DBNAME": self.db,
                "PGCDC_SOURCE__SLOT": self.slot,
                "PGCDC_KAFKA__BOOTSTRAP_SERVERS": str(self.kafka["bootstrap"]),
                "PGCDC_KAFKA__TOPIC_PREFIX": self.prefix,
                "PGCDC_KAFKA__HEARTBEAT_INTERVAL_S": str(self.heartbeat_s),
                "PGCDC_REGISTRY__URL": str(self.registry["url"]),
                "PGCDC_DECODING__WORK_MEM": self.work_mem,
                "PGCDC_DECODING__STATE_DIR": str(self.state_dir / "worker"),
                "PGCDC_METRICS__HOST": "127.0.0.1",
                "PGCDC_METRICS__PORT": "0",
                "PGCDC_LOG__FORMAT": "json",
                "PGCDC_LOG__LEVEL": "info",
                "PYTHONWARNINGS": "ignore",
            }
        )
        env.update(self.extra_env)
        return env

    def start_worker(self, *args: str) -> WorkerProcess:
        """`python -m service.app.cli run [args]` with this pipeline's settings in the
        environment."""
        log_path = self.state_dir / f"worker-{len(self.workers)}.log"
        with log_path.open("wb") as log:
            proc = subprocess.Popen(
                [sys.executable, "-m", "service.app.cli", "run", *args],
                cwd=REPO,
                env=self.env(),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        worker = WorkerProcess(proc, log_path)
        self.workers.append(worker)
        return worker

    def cli(self, *args: str) -> str:
        """`python -m service.app.cli args` with this pipeline's settings; must exit 0.
        Returns its standard output."""
        out = subprocess.run(
            [sys.executable, "-m", "service.app.cli", *args],
            cwd=REPO,
            env=self.env(),
            capture_output=True,
            timeout=60,
            check=False,
        )
        assert out.returncode == 0, out.stderr.decode()
        return out.stdout.decode()

    def settings(self) -> Settings:
        return load_settings(
            source={
                "host": self.pg["host"],
                "port": self.pg["port"],
                "user": self.pg["user"],
                "dbname": self.db,
                "slot": self.slot,
            },
            kafka={"bootstrap_servers": self.kafka["bootstrap"], "topic_prefix": self.prefix},
            registry={"url": self.registry["url"]},
        )

    def last_offset(self) -> OffsetRecord | None:
        return read_last_offset(self.settings())

    def wait_confirmed(
        self, after_lsn: int, timeout: float, worker: WorkerProcess | None = None
    ) -> OffsetRecord:
        """Wait until the committed offset's confirmed LSN passes `after_lsn`.

        To wait for everything written before `pg_current_wal_insert_lsn()`, pass that
        LSN minus 1: the last commit's end LSN is that insert LSN exactly, and on a
        server that writes nothing more the confirmed LSN stays there."""
        deadline = time.monotonic() + timeout
        last: OffsetRecord | None = None
        while time.monotonic() < deadline:
            last = self.last_offset()
            if last is not None and last.confirmed_lsn > after_lsn:
                return last
            if worker is not None and worker.proc.poll() is not None:
                raise AssertionError(
                    f"the worker exited with {worker.proc.returncode} "
                    f"while waiting for its offset:\n{worker.tail()}"
                )
            time.sleep(0.5)
        raise AssertionError(
            f"offset {last} did not pass {after_lsn:X} within {timeout}s"
            + (f":\n{worker.tail()}" if worker is not None else "")
        )

    def spill_files(self, pid: int) -> list[Path]:
        """The spill files the worker with `pid` has now (LocalSpillStore's run dir)."""
        if not self.spill_dir.exists():
            return []
        return [f for d in self.spill_dir.glob(f"run-{pid}-*") for f in d.glob("xid-*.spill")]

    def topic(self, table: str, schema: str = "public") -> str:
        return f"{self.prefix}.{schema}.{table}"


def insert_lsn(cur: Any) -> int:
    cur.execute("SELECT pg_current_wal_insert_lsn()")
    return parse_lsn(cur.fetchone()[0])


def current_xid(cur: Any) -> int:
    """The transaction's (32-bit) xid, assigning one if needed."""
    cur.execute("SELECT pg_current_xact_id()::text::bigint")
    return int(cur.fetchone()[0]) & 0xFFFFFFFF


def uncommitted_count(bootstrap: str, topic: str) -> int:
    """Records in `topic` including those of open or aborted Kafka transactions."""
    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": unique("hw"),
            "isolation.level": "read_uncommitted",
        }
    )
    try:
        meta = c.list_topics(topic, timeout=10).topics.get(topic)
        if meta is None or meta.error is not None:
            return 0
        total = 0
        for p in meta.partitions:
            low, high = c.get_watermark_offsets(TopicPartition(topic, p), timeout=10, cached=False)
            total += high - low
        return total
    finally:
        c.close()


@contextmanager
def pipeline(
    pg: dict[str, Any],
    kafka: dict[str, Any],
    registry: dict[str, Any],
    name: str,
    ddl: Sequence[str],
    **options: Any,
) -> Iterator[Pipeline]:
    """A created `Pipeline`, dropped (workers killed, slot and database gone) at exit."""
    p = Pipeline(pg, kafka, registry, unique(name), **options)
    try:
        p.create(ddl)
        yield p
    finally:
        p.drop()


# --- a mixed workload with known outcome ------------------------------------------------

EO_TABLES = [
    "CREATE TABLE acct (id int PRIMARY KEY, grp int NOT NULL, val bigint NOT NULL, note text)",
    "CREATE TABLE ledger (id bigint PRIMARY KEY, acct int NOT NULL, amount int, memo text)",
    "CREATE TABLE kv (k text PRIMARY KEY, v text)",
    "ALTER TABLE kv REPLICA IDENTITY FULL",
]


@dataclass
class TxnOutcome:
    """One source transaction of the workload: its xid, fate and expected events."""

    xid: int
    committed: bool
    events: dict[str, int] = field(default_factory=dict)  # table -> change events
    commit_from: int = 0  # its commit record starts at or after this LSN
    statements: list[str] = field(default_factory=list)  # for failure messages

    @property
    def total(self) -> int:
        return sum(self.events.values())


class Workload:
    """Random transactions (seeded) over acct/ledger/kv; every outcome is recorded.

    Statements are inserts, updates and deletes of random size, ON CONFLICT upserts, and
    statements inside savepoints that are rolled back (ROLLBACK TO) or released; some
    transactions end in ROLLBACK. `outcomes` lists every transaction in commit (or
    abort) order; events are counted from each kept statement's rowcount.
    """

    def __init__(self, p: Pipeline, seed: int) -> None:
        import random  # noqa: PLC0415  (only this helper needs it)

        self.p = p
        self.rng = random.Random(seed)
        self.conn = p.connect()
        self.outcomes: list[TxnOutcome] = []
        self.next_acct = 1
        self.next_ledger = 10_000_000

    def close(self) -> None:
        self.conn.close()

    def _statement(self) -> tuple[str, str]:
        rng = self.rng
        kind = rng.choice(["ins", "ins", "upd", "del", "kv", "ledger"])
        if kind == "ins" or self.next_acct < 50:
            n = rng.choice([1, 2, 5, 20, 100, 400])
            a = self.next_acct
            self.next_acct += n
            return "acct", (
                f"INSERT INTO acct SELECT g, g % 7, g * 10, 'n' || g "
                f"FROM generate_series({a}, {a + n - 1}) g"
            )
        if kind == "upd":
            ids = [rng.randrange(1, self.next_acct) for _ in range(rng.choice([1, 3, 30]))]
            return "acct", (
                f"UPDATE acct SET val = val + {rng.randint(1, 9)}, "
                f"note = 'u{rng.randint(0, 999)}' WHERE id = ANY(ARRAY{ids})"
            )
        if kind == "del":
            ids = [rng.randrange(1, self.next_acct) for _ in range(rng.choice([1, 4]))]
            return "acct", f"DELETE FROM acct WHERE id = ANY(ARRAY{ids})"
        if kind == "kv":
            k = rng.randrange(40)
            return "kv", (
                f"INSERT INTO kv VALUES ('k{k}', 'v{rng.randint(0, 99999)}') "
                "ON CONFLICT (k) DO UPDATE SET v = EXCLUDED.v"
            )
        n = rng.choice([1, 10, 50])
        a = self.next_ledger
        self.next_ledger += n
        return "ledger", (
            f"INSERT INTO ledger SELECT g, g % 100, g % 1000, 'm' || g "
            f"FROM generate_series({a}, {a + n - 1}) g"
        )

    def transaction(self) -> TxnOutcome:
        """One random transaction on the workload's connection."""
        rng, cur = self.rng, self.conn.cursor()
        cur.execute("BEGIN")
        out = TxnOutcome(current_xid(cur), committed=True)
        for i in range(rng.randint(1, 6)):
            table, sql = self._statement()
            mode = rng.random()
            if mode < 0.15:
                cur.execute(f"SAVEPOINT s{i}")
                cur.execute(sql)
                cur.execute(f"ROLLBACK TO SAVEPOINT s{i}")
                out.statements.append(f"rolled back: {sql} ({cur.rowcount})")
                continue
            if mode < 0.25:
                cur.execute(f"SAVEPOINT s{i}")
                cur.execute(sql)
                rows = cur.rowcount
                out.statements.append(f"released: {sql} ({rows})")
                cur.execute(f"RELEASE SAVEPOINT s{i}")
            else:
                cur.execute(sql)
                rows = cur.rowcount
                out.statements.append(f"{sql} ({rows})")
            out.events[table] = out.events.get(table, 0) + rows
        if not out.total:  # every committed transaction publishes something
            cur.execute(
                "INSERT INTO kv VALUES ('k0', 'touch') ON CONFLICT (k) DO UPDATE SET v = EXCLUDED.v"
            )
            out.events["kv"] = 1
        out.commit_from = insert_lsn(cur)
        out.committed = rng.random() >= 0.12
        cur.execute("COMMIT" if out.committed else "ROLLBACK")
        cur.close()
        self.outcomes.append(out)
        return out

    def run(self, n: int, pause_s: float = 0.0) -> None:
        for _ in range(n):
            self.transaction()
            if pause_s:
                time.sleep(self.rng.uniform(0, pause_s))

    def big_interleaved(self, rows: int, small_between: int) -> TxnOutcome:
        """One `rows`-row ledger transaction in two halves, with small transactions
        committing on the other connection in between (so it commits after them)."""
        conn = self.p.connect()
        cur = conn.cursor()
        cur.execute("BEGIN")
        out = TxnOutcome(current_xid(cur), committed=True, events={"ledger": rows})
        half = rows // 2
        for a, b in ((1, half), (half + 1, rows)):
            cur.execute(
                "INSERT INTO ledger SELECT g, g % 977, g % 10000, 'big ' || g "
                f"FROM generate_series({a}, {b}) g"
            )
            assert cur.rowcount == b - a + 1
            if a == 1:
                self.run(small_between)
        out.commit_from = insert_lsn(cur)
        cur.execute("COMMIT")
        conn.close()
        self.outcomes.append(out)
        return out

    def committed(self) -> list[TxnOutcome]:
        return [o for o in self.outcomes if o.committed]


def materialize(reads: Sequence[Any], key_of: Callable[[Any], Any]) -> dict[Any, Any]:
    """Apply c/u/r (upsert), d (remove) and t (clear) events by key, in topic order."""
    rows: dict[Any, Any] = {}
    for r in reads:
        if r.value is None:
            continue  # a tombstone
        op = r.value["op"]
        if op in ("c", "u", "r"):
            rows[key_of(r.key)] = r.value["after"]
        elif op == "d":
            rows.pop(key_of(r.key), None)
        elif op == "t":
            rows.clear()
        else:
            raise AssertionError(f"unexpected op {op!r}")
    return rows


# --- reading back ---------------------------------------------------------------------


@dataclass
class Rec:
    """One committed Kafka record, deserialized (None for a tombstone's value)."""

    topic: str
    partition: int
    offset: int
    key: Any
    value: Any
    headers: dict[str, bytes]
    raw_value: bytes | None
    timestamp_ms: int
    received: float  # time.time() when the consumer got it


def read_all(
    settings: Settings,
    topics: Sequence[str],
    *,
    timeout_s: float = 60.0,
    deserialize: bool = True,
    missing_ok: bool = False,
) -> list[Rec]:
    """Every committed record of `topics`, from the start to the end, as a downstream
    consumer sees them: `isolation.level=read_committed`, decoded by the writer's schema
    (`writer_schema`: AvroDeserializer's value, checked against it), connected with
    the settings' security options (TLS, SASL, registry CA and basic auth). A topic that
    does not exist is an error, unless `missing_ok` (a worker creates a table's topic with
    its first record, so mid-workload some may not exist yet): then it has no record."""
    from confluent_kafka import KafkaError  # noqa: PLC0415  (only this helper needs it)
    from confluent_kafka.schema_registry import SchemaRegistryClient  # noqa: PLC0415  (only this helper needs it)

    from tests.integration.writer_schema import WriterSchemaDecoder  # noqa: PLC0415  (only this helper needs it)

    consumer = Consumer(
        {
            "bootstrap.servers": settings.kafka.bootstrap_servers,
            "group.id": unique("reader"),
            "isolation.level": "read_committed",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
            **security_conf(settings),
        }
    )
    registry = SchemaRegistryClient(client_conf(settings))
    deser = WriterSchemaDecoder(registry)
    try:
        parts = []
        for topic in topics:
            meta = consumer.list_topics(topic, timeout=10).topics[topic]
            err = meta.error
            if missing_ok and err is not None and err.code() == KafkaError.UNKNOWN_TOPIC_OR_PART:
                continue
            assert meta.error is None, f"{topic}: {meta.error}"
            for part in meta.partitions:
                low, high = consumer.get_watermark_offsets(
                    TopicPartition(topic, part), timeout=10, cached=False
                )
                if high > low:
                    parts.append(TopicPartition(topic, part, 0))
        await_markers(settings, parts)
        consumer.assign(parts)
        pending = {(tp.topic, tp.partition) for tp in parts}
        out: list[Rec] = []
        deadline = time.monotonic() + timeout_s
        while pending:
            assert time.monotonic() < deadline, f"did not reach the end of {pending}"
            for msg in consumer.consume(1000, 0.5):
                err = msg.error()
                if err is not None:
                    assert err.code() == KafkaError._PARTITION_EOF, err.str()
                    pending.discard((msg.topic(), msg.partition()))
                    continue
                topic = str(msg.topic())
                raw_key, raw_value = msg.key(), msg.value()
                key: Any = raw_key
                value: Any = raw_value
                if deserialize:
                    key = deser(raw_key) if raw_key is not None else None
                    value = deser(raw_value) if raw_value is not None else None
                pairs = cast(list[tuple[str, Any]], msg.headers() or [])
                headers = {
                    name: (h if isinstance(h, bytes) else str(h).encode()) for name, h in pairs
                }
                out.append(
                    Rec(
                        topic,
                        int(msg.partition() or 0),
                        int(msg.offset() or 0),
                        key,
                        value,
                        headers,
                        raw_value,
                        int(msg.timestamp()[1]),
                        time.time(),
                    )
                )
        return out
    finally:
        consumer.close()
        registry.close()
