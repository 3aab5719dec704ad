"""The blocking initial snapshot end to end: PostgreSQL -> `pgcdc run` -> Kafka, exactly once.

(`snapshot.method = blocking`, the single-transaction snapshot; the chunked one, the
default, is tested in test_snapshot_chunked.py.)

Two tables hold rows before the worker starts; a writer thread inserts, updates and
deletes in small transactions from before the worker starts until after the snapshot
was committed (so before, during and after it). The topics are read back read_committed
and replayed per key: every key's events must form a valid life cycle (at most one `r`,
first; `c` only while absent; `u`/`d` only while present), which fails on any row seen
twice (as `r` and as the `c` of the same insert) or lost; the replayed state must equal
the final `SELECT`. Variant: the first worker is SIGKILLed in the middle of the
snapshot, after its first table's chunks were committed: those stay, and the next
worker finishes the rest by watermarks while streaming (connectors.tablesnap.export),
so for a table not finished before the kill a row may see its change before its `r`
(DBLog): there the replay checks the state and that no key is read twice.
`snapshot.mode = never` publishes no `r` at all.
"""

from __future__ import annotations

import random
import threading
import time
from datetime import datetime
from typing import Any

import pytest

from tests.integration.avro_kafka_support import Read, read_topics
from tests.integration.pipeline_kafka_support import Pipeline, insert_lsn, pipeline

pytestmark = pytest.mark.integration

TABLES = [
    "CREATE TABLE a (id int PRIMARY KEY, v int NOT NULL, note text)",
    "CREATE TABLE b (id bigint PRIMARY KEY, v text)",
    "INSERT INTO a SELECT i, i, 'pre ' || i FROM generate_series(1, 6000) i",
    "INSERT INTO b SELECT i, 'pre ' || i FROM generate_series(1, 4000) i",
]


class Writer(threading.Thread):
    """Small random transactions on both tables until `stop` is set."""

    def __init__(self, p: Pipeline) -> None:
        super().__init__(daemon=True)
        self.p = p
        self.stop = threading.Event()
        self.commits: list[float] = []  # wall-clock time of each commit
        self.error: BaseException | None = None

    def run(self) -> None:
        rnd = random.Random(7)
        conn = self.p.connect()
        conn.autocommit = False
        cur = conn.cursor()
        next_id = 100_000
        try:
            while not self.stop.is_set():
                for _ in range(rnd.randint(1, 4)):
                    table = rnd.choice("ab")
                    op = rnd.random()
                    if op < 0.4:
                        next_id += 1
                        if table == "a":
                            cur.execute("INSERT INTO a VALUES (%s, %s, 'new')", (next_id, next_id))
                        else:
                            cur.execute("INSERT INTO b VALUES (%s, 'new')", (next_id,))
                    elif op < 0.8:
                        key = rnd.randint(1, next_id)
                        if table == "a":
                            cur.execute(
                                "UPDATE a SET v = v + 1, note = 'upd' WHERE id = %s", (key,)
                            )
                        else:
                            cur.execute("UPDATE b SET v = 'upd ' || id WHERE id = %s", (key,))
                    else:
                        cur.execute(
                            f"DELETE FROM {table} WHERE id = %s", (rnd.randint(1, next_id),)
                        )
                conn.commit()
                self.commits.append(time.time())
                time.sleep(0.002)
        except BaseException as exc:  # reported by the test
            self.error = exc
        finally:
            conn.close()


def _replay(reads: list[Read], table: str) -> tuple[dict[Any, dict[str, Any]], list[str]]:
    """Apply r/c/u/d per key in topic order; return the state and life-cycle violations."""
    state: dict[Any, dict[str, Any]] = {}
    seen: set[Any] = set()
    bad: list[str] = []
    for rec in reads:
        if rec.value is None:
            continue  # tombstone after a delete
        op = rec.value["op"]
        row = rec.value["after"] if op != "d" else rec.value["before"]
        key = row["id"]
        present = key in state
        if op == "r":
            if key in seen:
                bad.append(f"{table} {key}: r after other events")
            state[key] = row
        elif op == "c":
            if present:
                bad.append(f"{table} {key}: c while present (seen twice)")
            state[key] = row
        elif op == "u":
            if not present:
                bad.append(f"{table} {key}: u while absent (insert lost)")
            state[key] = row
        elif op == "d":
            if not present:
                bad.append(f"{table} {key}: d while absent")
            state.pop(key, None)
        else:
            bad.append(f"{table} {key}: unexpected op {op}")
        seen.add(key)
    return state, bad


def _ts(event: dict[str, Any]) -> float:
    return datetime.fromisoformat(str(event["timestamp"]).replace("Z", "+00:00")).timestamp()


def _finish(p: Pipeline, worker: Any) -> dict[str, list[Read]]:
    conn = p.connect()
    end = insert_lsn(conn.cursor())
    conn.close()
    p.wait_confirmed(end - 1, 120)
    assert worker.terminate() == 0
    reads = read_topics(p.settings(), [p.topic("a"), p.topic("b")])
    return {t: [r for r in reads if r.topic == p.topic(t)] for t in ("a", "b")}


@pytest.mark.parametrize("kill_during_snapshot", [False, True])
def test_snapshot_and_stream_exactly_once(
    pg_ends: dict[str, Any],
    kafka: dict[str, Any],
    registry: dict[str, Any],
    kill_during_snapshot: bool,
) -> None:
    """Rows read by the snapshot plus the stream give every row exactly once, with
    concurrent writes before, during and after the snapshot (and across a SIGKILL in
    the middle of it): the replayed topics equal the final tables."""
    env = {"PGCDC_SNAPSHOT__METHOD": "blocking"}
    if kill_during_snapshot:
        # Table a's chunk (6,000 rows) costs its reader some 2 s before it reads table b
        # (the limit's burst is one second's rows): the SIGKILL lands in the middle of
        # the snapshot. Unthrottled, b's one chunk was at times also published within
        # the moments between a's `snapshot_table_done` and the kill, leaving the next
        # worker no snapshot to finish.
        env["PGCDC_SNAPSHOT__RATE_LIMIT_ROWS_PER_S"] = "2000"
    with pipeline(pg_ends, kafka, registry, "snapk", TABLES, extra_env=env) as p:
        writer = Writer(p)
        writer.start()
        time.sleep(0.5)  # writes before the worker starts
        worker = p.start_worker()
        finished_first: set[str] = {"public.a", "public.b"}
        if kill_during_snapshot:
            worker.wait_event(["snapshot_table_done"], 120)
            worker.kill()
            assert p.last_offset() is not None  # the committed chunks stay committed
            finished_first = {
                e["table"] for e in worker.events() if e.get("event") == "snapshot_table_done"
            }
            assert finished_first == {"public.a"}, "the SIGKILL came after the snapshot"
            worker = p.start_worker()
        started = worker.wait_event(["snapshot_started"], 120)
        done = worker.wait_event(["snapshot_done"], 300)
        worker.wait_event(["snapshot_committed"], 120)
        time.sleep(2.0)  # writes after the snapshot
        writer.stop.set()
        writer.join(30)
        assert writer.error is None, writer.error
        during = [t for t in writer.commits if _ts(started) <= t <= _ts(done)]
        assert during, "no transaction committed while the snapshot was read"
        assert [t for t in writer.commits if t > _ts(done)]
        topics = _finish(p, worker)

        table_done = {
            e["table"]: e["rows"]
            for w in p.workers
            for e in w.events()
            if e.get("event") == "snapshot_table_done"
        }
        for table, key_cols in (("a", ("id", "v", "note")), ("b", ("id", "v"))):
            reads = topics[table]
            ops = [r.value["op"] for r in reads if r.value is not None]
            assert ops.count("r") == table_done[f"public.{table}"] > 0
            assert {"c", "u", "d"} <= set(ops)
            state, bad = _replay(reads, table)
            if f"public.{table}" not in finished_first:  # finished by watermarks
                dblog = ("r after other events", "u while absent (insert lost)", "d while absent")
                bad = [b for b in bad if not b.endswith(dblog)]
                keys = [r.value["after"]["id"] for r in reads if r.value and r.value["op"] == "r"]
                assert len(keys) == len(set(keys)), "a key read twice"
            assert not bad, bad[:20]
            rows = p.query(f"SELECT {', '.join(key_cols)} FROM {table}")
            expected = {r[0]: dict(zip(key_cols, r, strict=True)) for r in rows}
            assert {k: {c: v[c] for c in key_cols} for k, v in state.items()} == expected
            snap = [r.value for r in reads if r.value is not None and r.value["op"] == "r"]
            # Debezium 3.6's markers: the first table (a, lowest OID) opens with "first"
            # and ends "last_in_data_collection"; the last one (b) opens with
            # "first_in_data_collection" and ends "last".
            head, tail = (
                ("first", "last_in_data_collection")
                if table == "a"
                else (
                    "first_in_data_collection",
                    "last",
                )
            )
            markers = [v["source"]["snapshot"] for v in snap]
            assert markers == [head, *["true"] * (len(markers) - 2), tail], markers[:3]
            # No transaction block, one xid for the whole snapshot (its xmax, never 0).
            assert all(v["transaction"] is None for v in snap)
            assert len({v["source"]["txId"] for v in snap}) == 1 and snap[0]["source"]["txId"]
        last = [
            r.value
            for t in ("a", "b")
            for r in topics[t]
            if r.value is not None and r.value["source"]["snapshot"] == "last"
        ]
        assert len(last) == 1 and last[0]["op"] == "r"


def test_snapshot_never_publishes_no_reads(
    pg_ends: dict[str, Any], kafka: dict[str, Any], registry: dict[str, Any]
) -> None:
    """`snapshot.mode = never`: existing rows are not published; only later changes."""
    with pipeline(
        pg_ends,
        kafka,
        registry,
        "snapn",
        [*TABLES[:2], "INSERT INTO a VALUES (1, 1, 'old'), (2, 2, 'old')"],
        extra_env={"PGCDC_SNAPSHOT__MODE": "never"},
    ) as p:
        worker = p.start_worker()
        worker.wait_ready()
        p.execute(
            "INSERT INTO a VALUES (3, 3, 'new')",
            "UPDATE a SET v = 20 WHERE id = 2",
            "INSERT INTO b VALUES (9, 'new')",
        )
        topics = _finish(p, worker)
        ops = [
            (t, r.value["op"], (r.value["after"] or r.value["before"])["id"])
            for t in ("a", "b")
            for r in topics[t]
            if r.value is not None
        ]
        assert ops == [("a", "c", 3), ("a", "u", 2), ("b", "c", 9)]
        assert not worker.has_event("snapshot_started")


@pytest.mark.parametrize("method", ["blocking", "chunked"])
@pytest.mark.parametrize("parallelism", [1, 2])
def test_last_marker_skips_empty_tables_at_the_end(
    pg15: dict[str, Any],
    kafka: dict[str, Any],
    registry: dict[str, Any],
    parallelism: int,
    method: str,
) -> None:
    """The snapshot's final record is marked `last` when the tables after it are empty
    (Debezium marks the last record it emits; before, an empty last table left no `last`
    at all, and `a` ended with `last_in_data_collection`), under either snapshot method."""
    # read_topics keeps each partition's order, and each of these topics has one.
    ddl = [
        "CREATE TABLE a (id int PRIMARY KEY, v int)",
        "INSERT INTO a SELECT i, i FROM generate_series(1, 5) i",
        "CREATE TABLE y (id int PRIMARY KEY)",
        "CREATE TABLE z (n int)",
    ]
    env = {
        "PGCDC_SNAPSHOT__PARALLELISM": str(parallelism),
        "PGCDC_SNAPSHOT__CHUNK_ROWS": "2",
        "PGCDC_SNAPSHOT__METHOD": method,
    }
    with pipeline(pg15, kafka, registry, "snapl", ddl, extra_env=env) as p:
        worker = p.start_worker()
        worker.wait_event(["snapshot_done"], 120)
        worker.wait_event(["snapshot_committed"], 120)
        conn = p.connect()
        end = insert_lsn(conn.cursor())
        conn.close()
        p.wait_confirmed(end - 1, 120)
        assert worker.terminate() == 0
        reads = read_topics(p.settings(), [p.topic("a"), p.topic("y"), p.topic("z")])
        # In publication (offset) order: `first` and `last` mark the first and the last
        # record emitted. Two chunked readers may publish a's chunks out of key order.
        markers = [(r.value["after"]["id"], r.value["source"]["snapshot"]) for r in reads]
        assert [m for _, m in markers] == ["first", "true", "true", "true", "last"], markers
        assert sorted(i for i, _ in markers) == [1, 2, 3, 4, 5], markers
        if parallelism == 1:
            assert [i for i, _ in markers] == [1, 2, 3, 4, 5], markers
