"""The default initial snapshot (`snapshot.method = blocking`): readers sharing one
exported snapshot, one Kafka transaction per chunk, resumed by watermarks after a kill.

Real PostgreSQL, Kafka and registry; `pgcdc run` subprocesses (connectors.tablesnap.export).

- `test_readers_share_the_exported_snapshot` (parallelism 1 and 3): `pg_stat_activity`
  shows exactly N snapshot readers while the snapshot runs, all with the same
  backend_xmin; every reader logged the same imported `pg_current_snapshot()`; rows
  inserted and updated after the export are in no reader's chunk (their `r` events
  hold the state `SELECT` gave before the worker started, and the new rows come as
  `c`); each key is read once; every `r` of a table lies before its first change;
  every chunk read once and committed in its own Kafka transaction (one progress record
  per chunk); the replayed topics equal the final `SELECT`.
- `test_sigkill_mid_snapshot_resumes_by_watermarks`: a writer runs throughout, the
  worker is SIGKILLed after a few committed chunks; the next worker resumes (the rest by
  watermarks): the replayed topics equal the final `SELECT`, no key is read twice and
  no insert is published twice (the restart skips again the transactions the shared
  snapshot holds), no committed chunk is read again, the keyless table is read exactly
  once per row.
"""

from __future__ import annotations

import time
from collections import Counter
from typing import Any

import pytest
from confluent_kafka import Consumer, TopicPartition

from connectors.tablesnap.progress import progress_topic
from tests.integration.avro_kafka_support import Read, read_topics
from tests.integration.pipeline_kafka_support import Pipeline, insert_lsn, pipeline, unique
from tests.integration.snapshot_chunked_support import Writer, reads_after_commit, replay

pytestmark = pytest.mark.integration

BIG = 24_000
CHUNK = 1500

TABLES = [
    "CREATE TABLE big (id int PRIMARY KEY, v int NOT NULL, note text)",
    "CREATE TABLE small (id bigint PRIMARY KEY, v int NOT NULL, note text)",
    "CREATE TABLE nokey (n int, note text)",
    "CREATE TABLE empty (id int PRIMARY KEY, v int NOT NULL, note text)",
    f"INSERT INTO big SELECT i, i, 'pre ' || i FROM generate_series(1, {BIG}) i",
    "INSERT INTO small SELECT i, i, 'pre' FROM generate_series(1, 2000) i",
    "INSERT INTO nokey SELECT i, repeat('x', 50) FROM generate_series(1, 4000) i",
    "ANALYZE",
]


# For the kill: `small` first (lowest OID, so read first): the writer's inserts that
# commit between the consistent point and the shared snapshot land in its last chunk,
# committed before the kill, where publishing them again would show as a second `c`.
TABLES_KILL = [TABLES[1], TABLES[0], *TABLES[2:]]


def _env(parallelism: int, rate: int) -> dict[str, str]:
    return {
        "PGCDC_SNAPSHOT__METHOD": "blocking",
        "PGCDC_SNAPSHOT__PARALLELISM": str(parallelism),
        "PGCDC_SNAPSHOT__CHUNK_ROWS": str(CHUNK),
        "PGCDC_SNAPSHOT__CHUNK_BYTES": "64MiB",
        "PGCDC_SNAPSHOT__RATE_LIMIT_ROWS_PER_S": str(rate),
    }


def _rows(p: Pipeline, table: str) -> dict[Any, dict[str, Any]]:
    return {
        r[0]: {"id": r[0], "v": r[1], "note": r[2]}
        for r in p.query(f"SELECT id, v, note FROM {table}")
    }


def _state(reads: list[Read]) -> tuple[dict[Any, dict[str, Any]], list[Any], int]:
    state, twice, nr = replay(reads)
    return {k: {c: v[c] for c in ("id", "v", "note")} for k, v in state.items()}, twice, nr


def _inserted_twice(reads: list[Read]) -> list[Any]:
    """Keys that get a `c` while present (after their `r` or `c`, with no `d` between):
    an insert published twice, e.g. a transaction both in the snapshot and in the stream.
    (Under DBLog a `c` may come before its `r`; never after it.)"""
    present: set[Any] = set()
    twice: list[Any] = []
    for rec in reads:
        if rec.value is None:
            continue
        op = rec.value["op"]
        key = (rec.value["after"] or rec.value["before"])["id"]
        if op == "c" and key in present:
            twice.append(key)
        if op == "d":
            present.discard(key)
        else:
            present.add(key)
    return twice


def _finish(p: Pipeline, worker: Any) -> None:
    conn = p.connect()
    end = insert_lsn(conn.cursor())
    conn.close()
    p.wait_confirmed(end - 1, 180, worker)


def _progress_records(p: Pipeline) -> int:
    """Committed records in the snapshot-progress topic (one per chunk commit)."""
    topic = progress_topic(p.settings())
    consumer = Consumer(
        {
            "bootstrap.servers": p.settings().kafka.bootstrap_servers,
            "group.id": unique("progress"),
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
        }
    )
    try:
        lo, _hi = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
        consumer.assign([TopicPartition(topic, 0, lo)])
        n = 0
        while True:
            msgs = consumer.consume(500, timeout=2.0)
            if not msgs:
                return n
            n += sum(1 for m in msgs if m.error() is None)
    finally:
        consumer.close()


@pytest.mark.parametrize("parallelism", [1, 3])
def test_readers_share_the_exported_snapshot(
    pg_ends: dict[str, Any], kafka: dict[str, Any], registry: dict[str, Any], parallelism: int
) -> None:
    with pipeline(
        pg_ends, kafka, registry, "snapx", TABLES, extra_env=_env(parallelism, 6000)
    ) as p:
        before = {t: _rows(p, t) for t in ("big", "small", "empty")}
        worker = p.start_worker()
        exported = worker.wait_event(["snapshot_exported"], 120)
        # After the export: new rows and changed rows, in no reader's snapshot.
        p.execute(
            f"INSERT INTO big SELECT i, -i, 'after' FROM generate_series({BIG + 1}, {BIG + 500}) i",
            f"UPDATE big SET note = 'after' WHERE id % 1000 = 7 AND id <= {BIG}",
            "DELETE FROM small WHERE id <= 10",
            "INSERT INTO empty VALUES (1, 1, 'after')",
        )
        # The readers while the snapshot runs: exactly N, sharing one snapshot's xmin.
        seen: list[tuple[str, Any]] = []
        while not worker.has_event("snapshot_done"):
            assert worker.proc.poll() is None, worker.tail()
            seen = [
                (str(r[0]), r[1])
                for r in p.query(
                    "SELECT application_name, backend_xmin::text FROM pg_stat_activity"
                    " WHERE datname = current_database()"
                    " AND application_name LIKE %s",
                    ("pgcdc-snapshot-export-%",),
                )
            ]
            if seen:
                break
            time.sleep(0.05)
        assert len(seen) == parallelism, seen
        assert len({x for _, x in seen}) == 1, f"readers on different snapshots: {seen}"
        assert not worker.has_event("snapshot_done"), "snapshot ended before the check"
        worker.wait_event(["snapshot_committed"], 300)
        imported = [e for e in worker.events() if e.get("event") == "snapshot_export_imported"]
        assert len(imported) == parallelism == exported["readers"]
        assert len({e["snapshot"] for e in imported}) == 1
        assert {e["snapshot_id"] for e in imported} == {exported["snapshot_id"]}
        _finish(p, worker)

        topics = [p.topic(t) for t in ("big", "small", "empty")]
        reads = read_topics(p.settings(), topics, timeout_s=120)
        for table in ("big", "small", "empty"):
            mine = [r for r in reads if r.topic == p.topic(table) and r.value is not None]
            snap = [r.value["after"] for r in mine if r.value["op"] == "r"]
            ids = [a["id"] for a in snap]
            assert len(ids) == len(set(ids)), f"{table}: a key read twice"
            # The r events are the table as SELECT gave it at the snapshot point.
            assert {a["id"]: {c: a[c] for c in ("id", "v", "note")} for a in snap} == before[table]
            ops = [r.value["op"] for r in mine]
            if "r" in ops and set(ops) != {"r"}:
                last_r = max(i for i, o in enumerate(ops) if o == "r")
                first_change = min(i for i, o in enumerate(ops) if o != "r")
                assert last_r < first_change, f"{table}: a change before an r"
            state, twice, _ = _state(mine)
            assert not twice and not _inserted_twice(mine)
            assert state == _rows(p, table), table
        new = [
            r.value["op"]
            for r in reads
            if r.topic == p.topic("big") and r.value and (r.value["after"] or {}).get("id", 0) > BIG
        ]
        assert new == ["c"] * 500
        big_r = [r.value for r in reads if r.topic == p.topic("big") and r.value["op"] == "r"]
        assert len({v["source"]["txId"] for v in big_r}) == 1 and big_r[0]["source"]["txId"]
        nokey = [
            r.value["after"]["n"]
            for r in read_topics(p.settings(), [p.topic("nokey")], timeout_s=120)
            if r.value is not None and r.value["op"] == "r"
        ]
        assert sorted(nokey) == list(range(1, 4001))
        events = worker.events()
        read_bounds = [
            (e["table"], repr(e["bounds"]))
            for e in events
            if e.get("event") == "snapshot_chunk_read"
        ]
        commits = [e for e in events if e.get("event") == "snapshot_chunk_committed"]
        assert not [b for b, n in Counter(read_bounds).items() if n > 1], "a chunk read twice"
        assert len(read_bounds) == len(commits) >= BIG // CHUNK
        readers = {e.get("reader") for e in events if e.get("event") == "snapshot_chunk_read"}
        assert readers == set(range(parallelism))
        # One Kafka transaction per chunk, each with its progress record (plus the
        # first state, staged into the first chunk's transaction).
        assert _progress_records(p) >= len(commits)
        assert worker.terminate() == 0


def test_sigkill_mid_snapshot_resumes_by_watermarks(
    pg_ends: dict[str, Any], kafka: dict[str, Any], registry: dict[str, Any]
) -> None:
    with pipeline(pg_ends, kafka, registry, "snapxk", TABLES_KILL, extra_env=_env(2, 5000)) as p:
        writer = Writer(p, {"big": BIG, "small": 2000}, seed=17)
        writer.start()
        worker = p.start_worker()
        deadline = time.monotonic() + 180

        def committed() -> list[str]:
            return [
                e["table"] for e in worker.events() if e.get("event") == "snapshot_chunk_committed"
            ]

        while (
            committed().count("public.big") < 3 or "public.small" not in committed()
        ) and time.monotonic() < deadline:
            assert worker.proc.poll() is None, worker.tail()
            time.sleep(0.05)
        assert not worker.has_event("snapshot_done"), "snapshot ended before the kill"
        worker.kill()
        small_done = "public.small" in {
            e["table"] for e in worker.events() if e.get("event") == "snapshot_table_done"
        }
        assert p.last_offset() is not None
        worker = p.start_worker()
        resumed = worker.wait_event(["snapshot_resumed_by_watermarks"], 120)
        assert "public.big" in resumed["tables"]
        assert small_done == ("public.small" not in resumed["tables"])
        worker.wait_event(["snapshot_committed"], 300)
        time.sleep(1.0)
        writer.stop.set()
        writer.join(30)
        assert writer.error is None, writer.error
        assert writer.commits > 50
        _finish(p, worker)
        reads = read_topics(p.settings(), [p.topic(t) for t in ("big", "small")], timeout_s=120)
        for table in ("big", "small"):
            mine = [r for r in reads if r.topic == p.topic(table)]
            state, twice, nr = _state(mine)
            assert not twice, f"{table}: keys read twice: {twice[:10]}"
            dup = _inserted_twice(mine)
            assert not dup, f"{table}: inserts published twice: {dup[:10]}"
            expected = _rows(p, table)
            missing = sorted(set(expected) - set(state))[:10]
            extra = sorted(set(state) - set(expected))[:10]
            assert state == expected, f"{table}: missing {missing}, extra {extra}"
            assert nr > 0
        again, n_reads, commits = reads_after_commit(p.workers)
        assert not again, again[:10]
        assert n_reads >= commits >= BIG // CHUNK
        nokey = [
            r.value["after"]["n"]
            for r in read_topics(p.settings(), [p.topic("nokey")], timeout_s=120)
            if r.value is not None and r.value["op"] == "r"
        ]
        assert sorted(nokey) == list(range(1, 4001))
        assert worker.terminate() == 0
