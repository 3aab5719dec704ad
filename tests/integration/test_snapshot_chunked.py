"""The chunked snapshot end to end: watermarks, resume across SIGKILL, signals.

Real PostgreSQL, Kafka and registry; `pgcdc run` subprocesses. Tables `big` and
`small` (keyed) and `nokey` (no key: CTID page chunks) hold rows before the worker
starts; a writer inserts, updates and deletes on the keyed ones throughout. The
topics are read back read_committed and replayed per key as a materializing consumer
would: the result must equal the final `SELECT`, and no key may be read (op r) twice.
The workers' logs count chunk reads: no committed chunk may be read again.
"""

from __future__ import annotations

import random
import time
from typing import Any

import pytest

from tests.integration.avro_kafka_support import read_topics
from tests.integration.pipeline_kafka_support import Pipeline, insert_lsn, pipeline
from tests.integration.snapshot_chunked_support import Writer, reads_after_commit, replay

pytestmark = pytest.mark.integration

BIG = 60_000

TABLES = [
    "CREATE TABLE big (id int PRIMARY KEY, v int NOT NULL, note text)",
    "CREATE TABLE small (id bigint PRIMARY KEY, v int NOT NULL, note text)",
    "CREATE TABLE nokey (n int, note text)",
    f"INSERT INTO big SELECT i, i, 'pre ' || i FROM generate_series(1, {BIG}) i",
    "INSERT INTO small SELECT i, i, 'pre' FROM generate_series(1, 3000) i",
    "INSERT INTO nokey SELECT i, repeat('x', 50) FROM generate_series(1, 5000) i",
    "ANALYZE",
]

CHUNKED = {
    "PGCDC_SNAPSHOT__METHOD": "chunked",
    # Small enough that the native path (~100k rows/s) is still mid-snapshot after the
    # test's three kills (each after a few more committed chunks).
    "PGCDC_SNAPSHOT__CHUNK_ROWS": "500",
    "PGCDC_SNAPSHOT__CHUNK_BYTES": "128KiB",
    "PGCDC_SNAPSHOT__PARALLELISM": "2",
}


def _committed(worker: Any) -> int:
    return sum(1 for e in worker.events() if e.get("event") == "snapshot_chunk_committed")


def _check_tables(p: Pipeline, tables: list[str]) -> dict[str, int]:
    """Replay each keyed table's topic; compare with SELECT; return r counts."""
    reads = read_topics(p.settings(), [p.topic(t) for t in tables])
    counts = {}
    for t in tables:
        state, twice, nr = replay([r for r in reads if r.topic == p.topic(t)])
        assert not twice, f"{t}: keys read twice: {twice[:10]}"
        rows = p.query(f"SELECT id, v, note FROM {t}")
        expected = {r[0]: {"id": r[0], "v": r[1], "note": r[2]} for r in rows}
        got = {k: {c: v[c] for c in ("id", "v", "note")} for k, v in state.items()}
        missing = sorted(set(expected) - set(got))[:10]
        extra = sorted(set(got) - set(expected))[:10]
        wrong = [k for k in expected if k in got and got[k] != expected[k]][:10]
        assert got == expected, f"{t}: missing {missing}, extra {extra}, wrong {wrong}"
        counts[t] = nr
    return counts


def _finish(p: Pipeline, worker: Any) -> None:
    conn = p.connect()
    end = insert_lsn(conn.cursor())
    conn.close()
    p.wait_confirmed(end - 1, 180, worker)


def test_chunked_snapshot_survives_kills_under_writes(
    pg_ends: dict[str, Any], kafka: dict[str, Any], registry: dict[str, Any]
) -> None:
    """Two readers, small chunks, writes throughout, SIGKILL at random points in the
    middle of the snapshot (three times): the replayed topics equal the tables, every
    key is read at most once, no committed chunk is read again, the keyless table is
    read exactly once per row, and the stream's committed position kept moving (it
    caught up with the server's while chunks were read)."""
    rnd = random.Random(5)
    with pipeline(pg_ends, kafka, registry, "snapc", TABLES, extra_env=CHUNKED) as p:
        writer = Writer(p, {"big": BIG, "small": 3000})
        writer.start()
        worker = p.start_worker()
        samples: list[tuple[int, int]] = []
        for _ in range(3):
            target = _committed(worker) + rnd.randint(2, 8)
            deadline = time.monotonic() + 240
            while _committed(worker) < target and time.monotonic() < deadline:
                assert worker.proc.poll() is None, worker.tail()
                time.sleep(rnd.uniform(0.05, 0.4))
            assert not worker.has_event("snapshot_done"), "snapshot ended before the kill"
            worker.kill()
            worker = p.start_worker()
        # While the snapshot runs: (server position, committed position) samples. The
        # server's position moves with every database's WAL (other tests' included), so
        # the stream is judged by catching up with it, not by a byte distance.
        while not worker.has_event("snapshot_done"):
            assert worker.proc.poll() is None, worker.tail()
            conn = p.connect()
            server = insert_lsn(conn.cursor())
            conn.close()
            last = p.last_offset()
            if last is not None:
                samples.append((server, last.confirmed_lsn))
            time.sleep(0.25)
        time.sleep(1.0)
        writer.stop.set()
        writer.join(30)
        assert writer.error is None, writer.error
        assert writer.commits > 100
        _finish(p, worker)
        counts = _check_tables(p, ["big", "small"])
        assert counts["big"] > BIG // 2
        again, reads, commits = reads_after_commit(p.workers)
        assert not again, again[:10]
        assert reads >= commits > BIG // 2500
        nokey = [
            r.value
            for r in read_topics(p.settings(), [p.topic("nokey")])
            if r.value is not None and r.value["op"] == "r"
        ]
        assert sorted(v["after"]["n"] for v in nokey) == list(range(1, 5001))
        # The stream kept moving while chunks were read: a committed position sampled
        # during the snapshot passed a server position sampled earlier in it (a stream
        # held until the snapshot's end would commit nothing past it meanwhile).
        assert len(samples) >= 2, f"{len(samples)} samples taken during the snapshot"
        caught = [
            j - i
            for i, (server, _) in enumerate(samples)
            for j in range(i + 1, len(samples))
            if samples[j][1] >= server
        ]
        assert caught, f"the committed position never passed the server's: {samples[:20]}"
        markers = {
            r.value["source"]["snapshot"]
            for r in read_topics(p.settings(), [p.topic("small")])
            if r.value is not None and r.value["op"] == "r"
        }
        assert markers <= {
            "first",
            "first_in_data_collection",
            "true",
            "last_in_data_collection",
            "last",
        }
        assert worker.terminate() == 0


def test_cli_snapshot_of_one_table_while_writes_continue(
    pg_ends: dict[str, Any], kafka: dict[str, Any], registry: dict[str, Any]
) -> None:
    """`pgcdc snapshot public.small --where ...` on a streaming worker (snapshot.mode
    never) re-reads only that table's matching rows as op r (marker incremental) while
    writes continue; replaying the topic still equals the table for the rows it read."""
    env = {**CHUNKED, "PGCDC_SNAPSHOT__MODE": "never"}
    with pipeline(pg_ends, kafka, registry, "snapi", TABLES[:2] + TABLES[4:5], extra_env=env) as p:
        worker = p.start_worker()
        worker.wait_ready()
        writer = Writer(p, {"small": 3000}, seed=3)
        writer.start()
        time.sleep(1.0)
        p.cli("snapshot", "public.small")
        worker.wait_event(["snapshot_done"], 180)
        time.sleep(1.0)
        writer.stop.set()
        writer.join(30)
        assert writer.error is None, writer.error
        _finish(p, worker)
        reads = read_topics(p.settings(), [p.topic("small")])
        snap = [r.value for r in reads if r.value is not None and r.value["op"] == "r"]
        assert snap and {v["source"]["snapshot"] for v in snap} == {"incremental"}
        counts = _check_tables(p, ["small"])
        assert counts["small"] > 2000
        assert worker.terminate() == 0
