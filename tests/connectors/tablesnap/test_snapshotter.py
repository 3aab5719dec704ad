"""The snapshotter's state without services: JSON round trip, signals, chunk commits.

The state is what a restart resumes from, so it must survive its JSON form exactly;
signals change it once (a Kafka signal re-emitted after a restart is dropped by its
offset); chunks committed out of order advance the committed prefix only when the
chunks before them are committed too.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from structlog.testing import capture_logs

from connectors.tablesnap.chunks import ChunkSpec
from connectors.tablesnap.progress import ProgressRecord
from connectors.tablesnap.snapshotter import Snapshotter, _Pending, chunk_budget
from service.config import load_settings
from service.output.api import ChangeOp, PluginContext, RelationInfo, RowChange, TxnInfo
from service.tablesnap.plan import Interval, SnapshotState, TableJob


class _Port:
    def __init__(self) -> None:
        self.staged: list[bytes] = []
        self.commits: list[tuple[int, bool]] = []  # (lsn, now) of each chunk's call

    def snapshot_ready(self) -> bool:
        return True

    def relation_at(self, oid: int, lsn: int) -> Any:
        return None

    def stage_snapshot_progress(self, topic: str, key: bytes, value: bytes) -> None:
        self.staged.append(value)

    def commit_snapshot_chunk(self, lsn: int, *, now: bool) -> None:
        self.commits.append((lsn, now))


def _snapshotter() -> tuple[Snapshotter, _Port]:
    snap = Snapshotter(load_settings(), None)
    port = _Port()
    snap.port = port
    return snap, port


def test_state_round_trips_through_its_progress_record() -> None:
    """Every field a restart needs comes back from the encoded progress record."""
    job = TableJob("public.t", "initial", "v > 1", 42, True, ("10",), ("30",))
    job.open = [Interval(("10",), ("20",), False), Interval(("20",), ("30",), True)]
    job.rows, job.chunks = 7, 2
    state = SnapshotState([job, TableJob("public.u", "incremental", keyed=False)], True, 5, ["a"])
    record = ProgressRecord.decode(ProgressRecord({"x": 1}, state.to_json()).encode())
    again = SnapshotState.from_json(dict(record.state))
    assert again.to_json() == state.to_json()
    assert again.jobs[0].open[1].committed and again.jobs[0].committed_to == ("10",)


def test_signals_queue_pause_resume_stop_and_drop_replayed_kafka_copies() -> None:
    """execute-snapshot queues tables (with a filter), pause/resume flip the flag,
    stop drops unfinished tables; a Kafka signal's copy re-emitted with an older offset
    changes nothing; every applied signal stages a progress record."""
    snap, port = _snapshotter()
    signal = {
        "type": "execute-snapshot",
        "data": {
            "data-collections": ["public.a", "b"],
            "additional-conditions": [{"data-collection": "public.b", "filter": "id > 5"}],
        },
        "kafka_offset": 3,
    }
    snap.on_signal(1, json.dumps(signal).encode())
    assert [(j.table, j.where, j.marker) for j in snap.state.jobs] == [
        ("public.a", None, "incremental"),
        ("public.b", "id > 5", "incremental"),
    ]
    assert snap.state.signal_offset == 4
    snap.on_signal(2, json.dumps(signal).encode())  # the same Kafka offset again
    assert len(snap.state.jobs) == 2 and len(port.staged) == 1
    snap.on_signal(3, b'{"type": "pause-snapshot"}')
    assert snap.state.paused
    snap.on_signal(4, b'{"type": "resume-snapshot"}')
    assert not snap.state.paused
    snap.on_signal(5, b'{"type": "stop-snapshot", "data": {"data-collections": ["public.a"]}}')
    assert [(j.table, j.done, j.stopped) for j in snap.state.jobs] == [
        ("public.a", True, True),
        ("public.b", False, False),
    ]
    assert [j.table for j in snap.state.pending()] == ["public.b"]
    snap.on_signal(6, b"not json")
    assert len(port.staged) == 4


def test_out_of_order_commits_advance_the_committed_prefix_in_plan_order() -> None:
    """A chunk committed before the one planned ahead of it stays listed; once the
    earlier one commits, both leave the list and the prefix moves past them."""
    snap, _ = _snapshotter()
    job = TableJob("public.t", "initial", oid=1, planned_to="end")
    first, second = Interval(None, ("10",)), Interval(("10",), None)
    job.open = [first, second]
    snap.state.jobs = [job]
    second.committed = True
    snap._advance(job)
    assert job.open == [first, second] and job.committed_to is None and not job.done
    first.committed = True
    snap._advance(job)
    assert job.open == [] and job.committed_to is None and job.done


def test_chunks_are_said_committed_only_when_their_kafka_transaction_is() -> None:
    """A chunk that does not end its table leaves the commit to the worker (`now`
    False) and is not announced; a table's last chunk asks for the commit at once. Only
    `kafka_committed` (the worker's commit callback) logs `snapshot_chunk_committed`,
    and `snapshot_table_done`/`snapshot_done` with the chunk that finished the table;
    while a published chunk waits, `in_flight` holds the commit for a chunk on its
    way, and no more once none is."""
    snap, port = _snapshotter()
    job = TableJob("public.t", "initial", oid=1, planned_to="end")
    first, second = Interval(None, ("10",)), Interval(("10",), None)
    job.open = [first, second]
    snap.state.jobs = [job]
    spec = ChunkSpec(1, "public.t", True, None, ("10",))
    one = _Pending("1", job, first, spec)
    two = _Pending("2", job, second, ChunkSpec(1, "public.t", True, ("10",), None))

    def publish(p: _Pending, lsn: int) -> list[dict[str, Any]]:
        with capture_logs() as logs:
            with snap.lock:
                p.interval.committed = True
                snap._advance(job)
            snap._commit(lsn, p, 5)
        return logs

    assert not snap.in_flight()  # nothing published waits
    snap._pending["2"] = two  # being read
    assert publish(one, 100) == [] and port.commits == [(100, False)]
    assert snap.in_flight()  # chunk 2 is on its way: hold the commit for it
    with capture_logs() as logs:
        snap.kafka_committed()
    assert [(e["event"], e["chunk"]) for e in logs] == [("snapshot_chunk_committed", "1")]
    assert not snap.in_flight()  # nothing published waits for a commit now

    snap._pending.pop("2")
    assert publish(two, 200) == [] and port.commits[-1] == (200, True)
    with capture_logs() as logs:
        snap.kafka_committed()
    assert [e["event"] for e in logs] == [
        "snapshot_chunk_committed",
        "snapshot_table_done",
        "snapshot_done",
    ]
    with capture_logs() as logs:
        snap.kafka_committed()  # a later commit (a heartbeat's) says nothing again
    assert logs == []


def test_new_tables_are_queued_once() -> None:
    """A table captured now but not before is queued alone, and only once."""
    snap, _ = _snapshotter()
    snap.fresh(["public.a"], snapshot=False)
    assert snap.add_new_tables(["public.a", "public.b"])
    assert not snap.add_new_tables(["public.a", "public.b"])
    assert [j.table for j in snap.state.jobs] == ["public.b"]


class _Recorder:
    """An output plugin that records which callback got which change LSNs."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, list[int]]] = []

    def begin(self, ctx: PluginContext, txn: TxnInfo) -> None:
        return None

    def change(self, ctx: PluginContext, txn: TxnInfo, change: RowChange) -> None:
        self.calls.append(("change", [change.lsn]))

    def changes(self, ctx: PluginContext, txn: TxnInfo, changes: list[RowChange]) -> None:
        self.calls.append(("changes", [c.lsn for c in changes]))

    def commit(self, ctx: PluginContext, txn: TxnInfo, commit_lsn: int) -> None:
        return None


def test_a_run_of_changes_passes_the_window_tracker_row_by_row_only_when_watched() -> None:
    """SnapshotHooks.changes hands a run to the plugin's `changes` when no window
    watches its tables; once a window on one of them is open, every change of the run
    goes through `change` (the tracker records it), in order."""
    snap, _ = _snapshotter()
    plugin = _Recorder()
    hooks = snap.hooks(plugin)
    a = RelationInfo(41, "public", "a", "d", ())
    b = RelationInfo(42, "public", "b", "d", ())
    run = [
        RowChange(ChangeOp.INSERT, lsn, rel, (), None, False)
        for lsn, rel in ((1, a), (2, b), (3, a))
    ]
    ctx = PluginContext("s", "avro", {}, lambda _l, _x, _d: None)
    txn = TxnInfo(7, 1, 10, 11, 1, None)
    hooks.changes(ctx, txn, run)
    assert plugin.calls == [("changes", [1, 2, 3])]
    snap.tracker.low("c1", 42, keyed=False)
    hooks.changes(ctx, txn, run)
    assert plugin.calls[1:] == [("change", [1]), ("change", [2]), ("change", [3])]
    window = snap.tracker._open["c1"]
    assert window.all_changed  # the keyless table's change reached the window


def test_chunks_of_wide_rows_are_planned_within_the_byte_budget() -> None:
    """A table whose heap holds ~819 bytes a row gets chunks of chunk_bytes / 819 rows,
    not chunk_rows (a chunk planned past its byte budget is read whole and then cut);
    narrow rows keep chunk_rows; a chunk cut at its budget sets the table's rows."""
    snap = Snapshotter(
        load_settings(snapshot={"chunk_rows": 20_000, "chunk_bytes": 8 * 1024 * 1024}), None
    )
    job = TableJob("public.wide", "initial")
    assert snap._chunk_rows(job, estimate=10_000, pages=1_000) == 10_240
    assert snap._chunk_rows(job, estimate=1_000_000, pages=5_000) == 20_000
    assert snap._chunk_rows(job, estimate=0, pages=0) == 20_000  # never analyzed

    class _Cut:
        cut, rows = True, [()] * 7_000

    snap.learn_cut(job, _Cut())  # type: ignore[arg-type]
    assert snap._chunk_rows(job, estimate=0, pages=0) == 7_000
    assert snap._chunk_rows(TableJob("public.other", "initial"), estimate=0, pages=0) == 20_000


def test_readers_past_three_share_the_byte_budget_of_three() -> None:
    """With more than three readers each chunk is planned and read within chunk_bytes *
    3 / parallelism (`chunk_budget`), never below chunk_bytes' least value; one to three
    readers keep chunk_bytes."""
    mib = 1024 * 1024
    for readers, budget in (
        (1, 8 * mib),
        (2, 8 * mib),
        (3, 8 * mib),
        (4, 6 * mib),
        (16, 1.5 * mib),
    ):
        settings = load_settings(
            snapshot={"chunk_rows": 20_000, "chunk_bytes": 8 * mib, "parallelism": readers}
        )
        assert chunk_budget(settings.snapshot) == int(budget), readers
        snap = Snapshotter(settings, None)
        # 819.2 heap bytes a row (1,000 pages of 8 KiB, 10,000 rows): `budget`'s rows
        rows = snap._chunk_rows(TableJob("public.wide", "initial"), estimate=10_000, pages=1_000)
        assert rows == int(budget / 819.2), readers
    tiny = load_settings(snapshot={"chunk_bytes": 64 * 1024, "parallelism": 16})
    assert chunk_budget(tiny.snapshot) == 64 * 1024


def test_a_published_chunk_lets_go_of_its_rows() -> None:
    """At its high watermark a chunk is published and its read dropped from the
    `_Pending`, which its reader may still hold while it waits for room: the rows are
    not kept past publication (nor when publication found nothing to do)."""
    snap, _port = _snapshotter()
    spec = ChunkSpec(42, "public.t", False, None, None)
    p = _Pending("c9", TableJob("public.t", "initial"), Interval(None, None), spec)
    p.read = object()  # type: ignore[assignment]
    snap._pending["c9"] = p
    snap._publish = lambda ctx, lsn, pending: None  # type: ignore[method-assign]
    high = json.dumps({"run": snap.run_id, "chunk": "c9", "kind": "high"}).encode()
    snap.on_watermark(PluginContext("s", "avro", {}, lambda _l, _x, _d: None), 1, high)
    assert p.published.is_set() and p.read is None and "c9" not in snap._pending


def test_rate_limit_gives_idle_time_no_more_than_a_second_of_credit(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """rate_limit_rows_per_s = 1000. After a minute idle (streaming, no snapshot) the
    next reads run at full speed for one second's rows only, then wait their due time:
    the rate counted from the worker's start let an on-demand snapshot after an hour of
    streaming read everything unlimited."""
    snap = Snapshotter(load_settings(snapshot={"rate_limit_rows_per_s": 1000}), None)
    clock = [1000.0]
    waits: list[float] = []
    monkeypatch.setattr("connectors.tablesnap.snapshotter.time.monotonic", lambda: clock[0])

    def wait(timeout: float) -> bool:
        waits.append(timeout)
        return False

    monkeypatch.setattr(snap.stop, "wait", wait)
    snap._rate_due = clock[0]
    clock[0] += 60.0  # a minute of streaming
    snap._throttle(500)
    snap._throttle(500)
    assert waits == []  # one second of credit: 1000 rows
    snap._throttle(500)
    assert waits == [pytest.approx(0.5)]
    clock[0] += 0.5
    snap._throttle(2000)
    assert waits[-1] == pytest.approx(2.0)
