"""Three gaps of the chunked snapshot, each proven end to end on pg15, Kafka, registry.

- The `last` / `last_in_data_collection` markers of a table whose rows end exactly at
  a chunk's row limit (the last chunk must not be an empty one behind the real last).
- A table without a key (CTID chunks) under constant writes: any change of it inside a
  window forces a re-read, so the snapshot must still end, with a bounded number of
  reads, every row published once as r or c.
- An UPDATE that leaves a TOASTed value unchanged, of a row whose chunk row the window
  dropped: the stream's event carries Debezium's placeholder, and the row must still
  end in the topic (materialized as a Debezium consumer does: a placeholder keeps the
  value it had) with its full latest value.
"""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

from tests.integration.avro_kafka_support import Read, read_topics
from tests.integration.pipeline_kafka_support import Pipeline, insert_lsn, pipeline

pytestmark = pytest.mark.integration

PLACEHOLDER = "__debezium_unavailable_value"


def _finish(p: Pipeline, worker: Any) -> None:
    conn = p.connect()
    end = insert_lsn(conn.cursor())
    conn.close()
    p.wait_confirmed(end - 1, 180, worker)


class _Loop(threading.Thread):
    """Runs one SQL statement (given a counter) in its own transaction until `stop`,
    one every `pause_s` or so (the stream must keep up: windows close when decoding
    reaches them)."""

    def __init__(self, p: Pipeline, sql: str, params: Any, pause_s: float = 0.005) -> None:
        super().__init__(daemon=True)
        self.p, self.sql, self.params, self.pause_s = p, sql, params, pause_s
        self.stop = threading.Event()
        self.commits = 0
        self.error: BaseException | None = None

    def run(self) -> None:
        conn = self.p.connect()
        try:
            with conn.cursor() as cur:
                while not self.stop.is_set():
                    cur.execute(self.sql, self.params(self.commits))
                    self.commits += 1
                    time.sleep(self.pause_s)
        except BaseException as exc:  # reported by the test
            self.error = exc
        finally:
            conn.close()

    def end(self) -> None:
        self.stop.set()
        self.join(30)
        assert self.error is None, self.error


def test_last_markers_when_a_table_ends_at_the_chunk_limit(
    pg15: dict[str, Any], kafka: dict[str, Any], registry: dict[str, Any]
) -> None:
    """Chunked initial snapshot, chunk_rows 2500: `one` holds exactly 2500 rows, `two`
    exactly 5000. The row with the highest key of `one` carries
    `last_in_data_collection`, that of `two` (the last table) `last`; each marker once."""
    ddl = [
        "CREATE TABLE one (id int PRIMARY KEY, v int)",
        "CREATE TABLE two (id int PRIMARY KEY, v int)",
        "INSERT INTO one SELECT i, i FROM generate_series(1, 2500) i",
        "INSERT INTO two SELECT i, i FROM generate_series(1, 5000) i",
    ]
    env = {
        "PGCDC_SNAPSHOT__METHOD": "chunked",
        "PGCDC_SNAPSHOT__CHUNK_ROWS": "2500",
        "PGCDC_SNAPSHOT__PARALLELISM": "1",
    }
    with pipeline(pg15, kafka, registry, "snapmark", ddl, extra_env=env) as p:
        worker = p.start_worker()
        worker.wait_event(["snapshot_done"], 120)
        _finish(p, worker)
        markers: dict[str, dict[int, str]] = {}
        for t in ("one", "two"):
            reads = read_topics(p.settings(), [p.topic(t)])
            markers[t] = {
                r.value["after"]["id"]: r.value["source"]["snapshot"]
                for r in reads
                if r.value is not None and r.value["op"] == "r"
            }
        assert sorted(markers["one"]) == list(range(1, 2501))
        assert sorted(markers["two"]) == list(range(1, 5001))
        assert markers["one"][2500] == "last_in_data_collection", markers["one"][2500]
        assert markers["two"][5000] == "last", markers["two"][5000]
        assert markers["one"][1] == "first"
        assert markers["two"][1] == "first_in_data_collection"
        every = [m for t in markers.values() for m in t.values()]
        for m in ("first", "first_in_data_collection", "last_in_data_collection", "last"):
            assert every.count(m) == 1, (m, every.count(m))
        # The chunks: one per 2500 rows, and no empty one behind them.
        chunks = [e for e in worker.events() if e.get("event") == "snapshot_chunk_committed"]
        assert [c["rows"] for c in chunks] == [2500, 2500, 2500], chunks
        assert worker.terminate() == 0


def test_keyless_table_under_constant_writes_is_snapshotted_with_bounded_reads(
    pg15: dict[str, Any], kafka: dict[str, Any], registry: dict[str, Any]
) -> None:
    """`pgcdc snapshot public.nokey` (no key: CTID chunks) while a writer inserts into
    it without pause: the snapshot ends; every chunk is read at most
    KEYLESS_OPTIMISTIC_READS + 1 times (then under the table lock, whose window no
    change enters); r events hold no row twice; r and c together are the table."""
    from connectors.tablesnap.snapshotter import KEYLESS_OPTIMISTIC_READS  # noqa: PLC0415  (the bound under test)

    ddl = [
        "CREATE TABLE nokey (n int NOT NULL, note text)",
        "INSERT INTO nokey SELECT i, repeat('x', 50) FROM generate_series(1, 5000) i",
        "ANALYZE nokey",
    ]
    env = {
        "PGCDC_SNAPSHOT__MODE": "never",
        "PGCDC_SNAPSHOT__CHUNK_ROWS": "2000",
        "PGCDC_SNAPSHOT__PARALLELISM": "1",
    }
    with pipeline(pg15, kafka, registry, "snapnokey", ddl, extra_env=env) as p:
        worker = p.start_worker()
        worker.wait_ready()
        writer = _Loop(p, "INSERT INTO nokey VALUES (%s, 'new')", lambda i: (100_000 + i,))
        writer.start()
        time.sleep(1.0)
        p.cli("snapshot", "public.nokey")
        worker.wait_event(["snapshot_done"], 120)
        writer.end()
        assert writer.commits > 200
        _finish(p, worker)
        events = worker.events()
        reads = [e for e in events if e.get("event") == "snapshot_chunk_read"]
        commits = [e for e in events if e.get("event") == "snapshot_chunk_committed"]
        retries = [e for e in events if e.get("event") == "snapshot_chunk_retry"]
        assert retries, "no window saw a change: the test did not exercise the re-reads"
        per_chunk: dict[str, int] = {}
        for e in reads:
            per_chunk[repr(e["bounds"])] = per_chunk.get(repr(e["bounds"]), 0) + 1
        assert max(per_chunk.values()) <= KEYLESS_OPTIMISTIC_READS + 1, per_chunk
        assert len(reads) <= len(commits) * (KEYLESS_OPTIMISTIC_READS + 1)
        recs = [r.value for r in read_topics(p.settings(), [p.topic("nokey")]) if r.value]
        snap = [v["after"]["n"] for v in recs if v["op"] == "r"]
        made = [v["after"]["n"] for v in recs if v["op"] == "c"]
        assert len(snap) == len(set(snap)), "a keyless row was read twice"
        table = {int(r[0]) for r in p.query("SELECT n FROM nokey")}
        assert set(range(1, 5001)) <= set(snap)
        assert set(snap) | set(made) == table
        assert worker.terminate() == 0


def _materialize_debezium(reads: list[Read]) -> dict[Any, dict[str, Any]]:
    """Per key, as a Debezium consumer keeps it: r/c/u set the row, a placeholder
    keeping the value the row had (or staying a placeholder if it had none), d drops."""
    state: dict[Any, dict[str, Any]] = {}
    for rec in reads:
        if rec.value is None:
            continue
        op = rec.value["op"]
        if op == "d":
            state.pop(rec.value["before"]["id"], None)
            continue
        after = dict(rec.value["after"])
        prev = state.get(after["id"], {})
        for col, val in after.items():
            if val == PLACEHOLDER and col in prev:
                after[col] = prev[col]
        state[after["id"]] = after
    return state


def test_unchanged_toast_of_a_dropped_chunk_row_ends_with_its_full_value(
    pg15: dict[str, Any], kafka: dict[str, Any], registry: dict[str, Any]
) -> None:
    """`pgcdc snapshot public.tt` (snapshot.mode never: the topic has nothing of the
    rows before) while a writer updates only `v`: the stream's u events carry the
    placeholder for the TOASTed `big`; rows the windows dropped are filled; the
    materialized topic equals SELECT, with no placeholder left."""
    ddl = [
        "CREATE TABLE tt (id int PRIMARY KEY, v int NOT NULL, big text)",
        "ALTER TABLE tt ALTER big SET STORAGE EXTERNAL",
        "INSERT INTO tt SELECT i, 0, repeat(md5(i::text), 100) FROM generate_series(1, 120) i",
    ]
    env = {
        "PGCDC_SNAPSHOT__MODE": "never",
        "PGCDC_SNAPSHOT__CHUNK_ROWS": "10",
        "PGCDC_SNAPSHOT__PARALLELISM": "1",
        # the placeholder the stream writes without the fill (toast.unchanged: fill
        # would publish the value itself, tests/integration/test_toast_fill.py)
        "PGCDC_TOAST__UNCHANGED": "placeholder",
    }
    with pipeline(pg15, kafka, registry, "snaptoast", ddl, extra_env=env) as p:
        worker = p.start_worker()
        worker.wait_ready()
        writer = _Loop(p, "UPDATE tt SET v = v + 1 WHERE id = %s", lambda i: ((i * 37) % 120 + 1,))
        writer.start()
        time.sleep(1.0)
        p.cli("snapshot", "public.tt")
        worker.wait_event(["snapshot_done"], 120)
        writer.end()
        _finish(p, worker)
        commits = [e for e in worker.events() if e.get("event") == "snapshot_chunk_committed"]
        assert sum(c["dropped"] for c in commits) > 0, "no chunk row was dropped"
        reads = read_topics(p.settings(), [p.topic("tt")])
        ups = [r.value for r in reads if r.value is not None and r.value["op"] == "u"]
        assert ups and all(v["after"]["big"] == PLACEHOLDER for v in ups), "no placeholder"
        state = _materialize_debezium(reads)
        expected = {
            r[0]: {"id": r[0], "v": r[1], "big": r[2]} for r in p.query("SELECT id, v, big FROM tt")
        }
        left = sorted(k for k, row in state.items() if row["big"] == PLACEHOLDER)
        assert not left, f"rows ending as the placeholder: {left}"
        got = {k: {c: row[c] for c in ("id", "v", "big")} for k, row in state.items()}
        wrong = sorted(k for k in expected if got.get(k) != expected[k])
        assert got == expected, f"wrong rows: {wrong[:10]}"
        assert sum(c.get("filled", 0) for c in commits) > 0
        assert worker.terminate() == 0
