"""On-demand snapshots driven by signals, end to end (pg15, Kafka, registry).

A streaming worker (snapshot.mode never, or initial_and_new_tables) gets its signals
from `pgcdc snapshot` (a logical message in the WAL) or from the Kafka topic
`<prefix>.signals` (Debezium's format) while a writer changes the tables:

- pause really stops chunk reads (counted while paused), resume goes on with the next
  chunk, and the snapshot ends with the topics equal to SELECT;
- a WHERE-filtered snapshot reads only the matching rows;
- stop ends a running snapshot: no chunk committed after the stop, no r event beyond
  the committed chunks' rows, and the progress record says stopped;
- after kill -9 and a restart, no signal is applied a second time (and a Kafka signal
  replayed into the WAL with an offset already acted on is dropped);
- a table newly added to filters.include_tables is snapshotted alone.
"""

from __future__ import annotations

import json
import time
from typing import Any

import pytest
from confluent_kafka import Producer

from connectors.tablesnap.progress import read_last_progress, signal_topic
from tests.integration.avro_kafka_support import read_topics
from tests.integration.pipeline_kafka_support import Pipeline, insert_lsn, pipeline
from tests.integration.snapshot_chunked_support import Writer, replay

pytestmark = pytest.mark.integration

N = 20_000

TABLES = [
    "CREATE TABLE big (id int PRIMARY KEY, v int NOT NULL, note text)",
    "CREATE TABLE small (id bigint PRIMARY KEY, v int NOT NULL, note text)",
    f"INSERT INTO big SELECT i, i, 'pre ' || i FROM generate_series(1, {N}) i",
    "INSERT INTO small SELECT i, i, 'pre' FROM generate_series(1, 3000) i",
    "ANALYZE",
]

ENV = {
    "PGCDC_SNAPSHOT__MODE": "never",
    "PGCDC_SNAPSHOT__CHUNK_ROWS": "500",
    "PGCDC_SNAPSHOT__PARALLELISM": "1",
    "PGCDC_SNAPSHOT__RATE_LIMIT_ROWS_PER_S": "2500",
}


# --- helpers ----------------------------------------------------------------------------


def _cli(p: Pipeline, *args: str) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads(p.cli(*args))
    return doc


def _kafka_signal(p: Pipeline, kind: str, data: dict[str, Any] | None = None) -> None:
    """A signal as Debezium's Kafka signal channel takes it (key: the connector name)."""
    producer = Producer({"bootstrap.servers": p.kafka["bootstrap"]})
    value = {"id": f"{kind}-{time.time_ns()}", "type": kind, "data": data or {}}
    producer.produce(signal_topic(p.settings()), key=p.slot, value=json.dumps(value))
    assert producer.flush(30) == 0


def _events(worker: Any, name: str) -> list[dict[str, Any]]:
    return [e for e in worker.events() if e.get("event") == name]


def _wait_count(worker: Any, name: str, n: int, timeout: float = 180.0) -> list[dict[str, Any]]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = _events(worker, name)
        if len(found) >= n:
            return found
        assert worker.proc.poll() is None, worker.tail()
        time.sleep(0.2)
    raise AssertionError(f"fewer than {n} {name} within {timeout}s:\n{worker.tail()}")


def _settled(worker: Any, timeout: float = 60.0) -> tuple[int, int]:
    """Wait until every chunk read was published, retried or abandoned (read before a
    stop was decoded, not published after it); (reads, commits)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        reads = len(_events(worker, "snapshot_chunk_read"))
        commits = len(_events(worker, "snapshot_chunk_committed"))
        retries = len(_events(worker, "snapshot_chunk_retry"))
        abandoned = len(_events(worker, "snapshot_chunk_abandoned"))  # its table stopped
        if reads == commits + retries + abandoned:
            return reads, commits
        time.sleep(0.2)
    raise AssertionError(f"a chunk read stayed unpublished:\n{worker.tail()}")


def _nothing_read_after_the_stop(worker: Any) -> None:
    """Nothing read after `snapshot_stopped` is published: a chunk whose read ends after
    it (begun before the stop was decoded) is abandoned, and a chunk said committed
    after it is one read before it, published at a high watermark decoded before the
    stop into the open Kafka transaction, whose commit came after."""
    events = worker.events()
    at = [e["event"] for e in events].index("snapshot_stopped")
    before = {e["chunk"] for e in events[:at] if e["event"] == "snapshot_chunk_read"}
    after = events[at:]
    late_reads = {e["chunk"] for e in after if e["event"] == "snapshot_chunk_read"}
    abandoned = {e["chunk"] for e in after if e["event"] == "snapshot_chunk_abandoned"}
    assert late_reads <= abandoned, (late_reads, abandoned)
    late = [e for e in after if e["event"] == "snapshot_chunk_committed"]
    assert all(e["chunk"] in before for e in late), (late, sorted(before))


def _finish(p: Pipeline, worker: Any) -> None:
    conn = p.connect()
    end = insert_lsn(conn.cursor())
    conn.close()
    p.wait_confirmed(end - 1, 180, worker)


def _equal(p: Pipeline, table: str, where: str = "true", keep: Any = None) -> int:
    """Replay `table`'s topic and compare the rows whose key passes `keep` with
    `SELECT ... WHERE where` (the same rows, in SQL); returns the number of r events."""
    state, twice, nr = replay(read_topics(p.settings(), [p.topic(table)], timeout_s=120))
    assert not twice, f"{table}: keys read twice: {twice[:10]}"
    rows = p.query(f"SELECT id, v, note FROM {table} WHERE {where}")
    expected = {r[0]: {"id": r[0], "v": r[1], "note": r[2]} for r in rows}
    got = {
        k: {c: v[c] for c in ("id", "v", "note")}
        for k, v in state.items()
        if keep is None or keep(k)
    }
    missing = sorted(set(expected) - set(got))[:10]
    extra = sorted(set(got) - set(expected))[:10]
    wrong = [k for k in expected if k in got and got[k] != expected[k]][:10]
    assert got == expected, f"{table}: missing {missing}, extra {extra}, wrong {wrong}"
    return nr


def _r_events(p: Pipeline, table: str) -> list[dict[str, Any]]:
    return [
        r.value
        for r in read_topics(p.settings(), [p.topic(table)], timeout_s=120)
        if r.value is not None and r.value["op"] == "r"
    ]


def _pause_resume(p: Pipeline, worker: Any, send: Any) -> None:
    """Pause after three chunks; no read while paused; resume reads the next chunk."""
    _wait_count(worker, "snapshot_chunk_committed", 3)
    send("pause")
    deadline = time.monotonic() + 60
    while not any(e.get("type") == "pause-snapshot" for e in _events(worker, "snapshot_signal")):
        assert time.monotonic() < deadline, worker.tail()
        time.sleep(0.2)
    # A chunk handed to the reader before the pause was decoded may still be read, once.
    reads, commits = _settled(worker)
    time.sleep(1.0)
    reads, commits = _settled(worker)
    time.sleep(5.0)  # at 2500 rows/s and 500-row chunks: ten chunks if it read on
    now = (
        len(_events(worker, "snapshot_chunk_read")),
        len(_events(worker, "snapshot_chunk_committed")),
    )
    assert now == (reads, commits), "a chunk was read while the snapshot was paused"
    assert not worker.has_event("snapshot_done"), "the snapshot ended before the pause"
    status = _cli(p, "status")["snapshot"]
    assert status["paused"] is True, status
    last = _events(worker, "snapshot_chunk_committed")[-1]
    send("resume")
    after = _wait_count(worker, "snapshot_chunk_read", reads + 1)[reads]
    assert after["bounds"][0] == last["bounds"][1], (last, after)


# --- the tests --------------------------------------------------------------------------


def test_cli_signals_pause_resume_where_stop_and_restart(
    pg15: dict[str, Any], kafka: dict[str, Any], registry: dict[str, Any]
) -> None:
    """`pgcdc snapshot` and its --pause/--resume/--stop on a streaming worker while a
    writer changes both tables (see the module docstring for what is proven)."""
    with pipeline(pg15, kafka, registry, "sigcli", TABLES, extra_env=ENV) as p:
        worker = p.start_worker()
        worker.wait_ready()
        writer = Writer(p, {"big": N, "small": 3000}, seed=7)
        writer.start()
        time.sleep(1.0)
        _cli(p, "snapshot", "public.big")

        def send(kind: str) -> None:
            _cli(p, "snapshot", f"--{kind}")

        _pause_resume(p, worker, send)
        worker.wait_event(["snapshot_done"], 180)
        _cli(p, "snapshot", "small", "--where", "id <= 1000")
        _wait_count(worker, "snapshot_done", 2)
        time.sleep(1.0)
        writer.stop.set()
        writer.join(30)
        assert writer.error is None, writer.error
        assert writer.commits > 100
        _finish(p, worker)
        assert _equal(p, "big") > N // 2
        assert _equal(p, "small", "id <= 1000", lambda k: k <= 1000) > 500
        small_r = _r_events(p, "small")
        assert small_r and all(v["after"]["id"] <= 1000 for v in small_r)
        assert {v["source"]["snapshot"] for v in small_r} == {"incremental"}

        # Stop: a second snapshot of big, stopped after two of its chunks.
        before = len(_events(worker, "snapshot_chunk_committed"))
        _cli(p, "snapshot", "public.big")
        _wait_count(worker, "snapshot_chunk_committed", before + 2)
        _cli(p, "snapshot", "--stop", "big")
        stopped = worker.wait_event(["snapshot_stopped"], 60)
        assert stopped["tables"] == ["public.big"]
        _settled(worker)
        time.sleep(3.0)
        _nothing_read_after_the_stop(worker)
        _finish(p, worker)
        big_commits = [
            e for e in _events(worker, "snapshot_chunk_committed") if e["table"] == "public.big"
        ]
        assert len(_r_events(p, "big")) == sum(e["rows"] for e in big_commits)
        record = read_last_progress(p.settings())
        assert record is not None
        job = [j for j in record.state["jobs"] if j["table"] == "public.big"][-1]
        assert job["stopped"] is True and job["done"] is True, job
        status = _cli(p, "status")["snapshot"]
        assert [t["stopped"] for t in status["tables"] if t["table"] == "public.big"][-1]

        # A restart acts on no signal again and reads no chunk.
        worker.kill()
        worker = p.start_worker()
        worker.wait_ready()
        p.execute("UPDATE small SET v = v + 1 WHERE id = 2")
        _finish(p, worker)
        time.sleep(2.0)
        again = [
            e["event"]
            for e in worker.events()
            if e.get("event") in ("snapshot_signal", "snapshot_chunk_read", "snapshot_stopped")
        ]
        assert not again, again
        assert len(_r_events(p, "big")) == sum(e["rows"] for e in big_commits)
        assert worker.terminate() == 0


def test_kafka_signals_pause_resume_stop_and_replay(
    pg15: dict[str, Any], kafka: dict[str, Any], registry: dict[str, Any]
) -> None:
    """The same through `<prefix>.signals` in Debezium's format (execute-snapshot with
    additional-conditions, pause-snapshot, resume-snapshot, stop-snapshot); then a
    restart, and a replayed copy of an acted-on signal, are not acted on again."""
    with pipeline(pg15, kafka, registry, "sigkafka", TABLES, extra_env=ENV) as p:
        worker = p.start_worker()
        worker.wait_ready()
        writer = Writer(p, {"big": N, "small": 3000}, seed=9)
        writer.start()
        time.sleep(1.0)
        _kafka_signal(
            p,
            "execute-snapshot",
            {
                "data-collections": ["public.big", "public.small"],
                "type": "incremental",
                "additional-conditions": [
                    {"data-collection": "public.small", "filter": "id > 2000"}
                ],
            },
        )
        _pause_resume(p, worker, lambda kind: _kafka_signal(p, f"{kind}-snapshot"))
        worker.wait_event(["snapshot_done"], 240)
        time.sleep(1.0)
        writer.stop.set()
        writer.join(30)
        assert writer.error is None, writer.error
        _finish(p, worker)
        assert _equal(p, "big") > N // 2
        assert _equal(p, "small", "id > 2000", lambda k: k > 2000) > 500
        assert all(v["after"]["id"] > 2000 for v in _r_events(p, "small"))

        before = len(_events(worker, "snapshot_chunk_committed"))
        _kafka_signal(p, "execute-snapshot", {"data-collections": ["public.big"]})
        _wait_count(worker, "snapshot_chunk_committed", before + 2)
        _kafka_signal(p, "stop-snapshot", {"data-collections": ["public.big"]})
        worker.wait_event(["snapshot_stopped"], 60)
        _settled(worker)
        time.sleep(3.0)
        _nothing_read_after_the_stop(worker)
        _finish(p, worker)
        record = read_last_progress(p.settings())
        assert record is not None
        job = [j for j in record.state["jobs"] if j["table"] == "public.big"][-1]
        assert job["stopped"] is True, job
        offset = int(record.state["signal_offset"])
        assert offset == 5, record.state  # five signals acted on: offsets 0..4
        signals = len(_events(worker, "snapshot_signal"))
        assert signals == 5
        big_rows = sum(
            e["rows"]
            for e in _events(worker, "snapshot_chunk_committed")
            if e["table"] == "public.big"
        )

        worker.kill()
        worker = p.start_worker()
        worker.wait_ready()
        # What a worker that died after re-emitting a Kafka signal leaves in the WAL: a
        # copy of an acted-on signal (offset 0: the first execute-snapshot).
        conn = p.connect()
        with conn.cursor() as cur:
            cur.execute(
                "SELECT pg_logical_emit_message(true, '__pgcdc.snapshot.signal', %s)",
                (
                    json.dumps(
                        {
                            "type": "execute-snapshot",
                            "data": {"data-collections": ["public.big"]},
                            "kafka_offset": 0,
                        }
                    ),
                ),
            )
        conn.close()
        _finish(p, worker)
        time.sleep(3.0)
        again = [
            e["event"]
            for e in worker.events()
            if e.get("event")
            in ("snapshot_signal", "snapshot_chunk_read", "snapshot_table_started")
        ]
        assert not again, again
        assert len(_r_events(p, "big")) == big_rows
        record = read_last_progress(p.settings())
        assert record is not None and int(record.state["signal_offset"]) == offset
        assert worker.terminate() == 0


def test_table_added_to_include_tables_is_snapshotted_alone(
    pg15: dict[str, Any], kafka: dict[str, Any], registry: dict[str, Any]
) -> None:
    """snapshot.mode initial_and_new_tables, chunked: the first worker captures only
    `big` and snapshots it; the next one, with `small` added to include_tables,
    snapshots `small` alone (marker incremental) while writes continue, reads no chunk
    of `big`; both topics equal SELECT."""
    env = {
        **ENV,
        "PGCDC_SNAPSHOT__MODE": "initial_and_new_tables",
        "PGCDC_SNAPSHOT__METHOD": "chunked",
        "PGCDC_SNAPSHOT__RATE_LIMIT_ROWS_PER_S": "0",
        "PGCDC_FILTERS__INCLUDE_TABLES": '["public.big"]',
    }
    with pipeline(pg15, kafka, registry, "signew", TABLES, extra_env=env) as p:
        writer = Writer(p, {"big": N, "small": 3000}, seed=13)
        writer.start()
        worker = p.start_worker()
        worker.wait_event(["snapshot_done"], 240)
        tables = {e["table"] for e in _events(worker, "snapshot_chunk_committed")}
        assert tables == {"public.big"}
        big_r = len(_r_events(p, "big"))
        assert worker.terminate() == 0
        p.extra_env["PGCDC_FILTERS__INCLUDE_TABLES"] = '["public.big", "public.small"]'
        worker = p.start_worker()
        new = worker.wait_event(["snapshot_new_table"], 60)
        assert new["table"] == "public.small"
        worker.wait_event(["snapshot_done"], 240)
        time.sleep(1.0)
        writer.stop.set()
        writer.join(30)
        assert writer.error is None, writer.error
        _finish(p, worker)
        assert [e["table"] for e in _events(worker, "snapshot_new_table")] == ["public.small"]
        read_tables = {e["table"] for e in _events(worker, "snapshot_chunk_read")}
        assert read_tables == {"public.small"}
        assert len(_r_events(p, "big")) == big_r
        assert _equal(p, "big") == big_r
        assert _equal(p, "small") > 2000
        assert {v["source"]["snapshot"] for v in _r_events(p, "small")} == {"incremental"}
        assert worker.terminate() == 0
