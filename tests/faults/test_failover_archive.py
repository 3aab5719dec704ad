"""A failover to a server with no slot for pgcdc, the gap bridged from the WAL archive
(`source.archive`, issue 31 part 3), against services.py's ha-pg15/ha-pg15s and
ha-pg18/ha-pg18s pairs.

One failover per major version (`failed_over`, module-scoped): the worker streams from
the primary over its slot there and stops; while it is down the workload goes on with
segment switches, so the WAL its offsets need spans several archived segments of
timeline 1; the standby replays it all, the primary stops, the standby is promoted
(timeline 2). The new primary has no slot for pgcdc. Each test points a worker at it
with another `source.archive`:
- a directory lacking one segment of the gap: fatal SlotGapError naming both sides;
- a restore command that cannot run: fatal RestoreCommandError naming it;
- an archive whose 00000002.history differs from the server's: fatal
  TimelineHistoryError;
- a restore command over both servers' archive directories (the old primary's holds
  timeline 1, the new one's timeline 2 and its history): the gap is read from the
  archive and streaming goes on from the new slot. Every committed transaction of the
  three workloads is checked against the topics (the fault suite's verifier), and a
  text session decoding the same bridged WAL (`ArchiveBridge` then the stream) against
  test_decoding: a logical slot on the old primary for timeline 1 (read before it
  stops: logical slots do not fail over to a PG15 standby) and one on the new primary
  created before the last workload.
The error tests drop the slot their worker created, so each test starts from a new
primary without one. The pair is held exclusively from its rebuild to the end of the
module's tests for that version (tests/faults/ha_exclusive.py).
"""

from __future__ import annotations

import itertools
import shutil
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg2
import pytest

from connectors.kafka.offsets import OffsetRecord
from connectors.postgres.stream import PhysicalStream, source_timeline
from connectors.postgres.walarchive import ArchiveBridge, WalArchive
from service.app.session import Session, SessionConfig
from service.lsn import format_lsn, parse_lsn
from service.output.text import TestDecodingPlugin
from service.wal.bridge import bridge_range, segment_name
from tests.faults.ha_exclusive import rebuilt_pair, services
from tests.faults.verifier import story, topics, verify
from tests.faults.workload import ContinuousWorkload
from tests.fixtures.services import ensure_service, stop_service
from tests.integration.pipeline_kafka_support import (
    EO_TABLES,
    Pipeline,
    TxnOutcome,
    insert_lsn,
    pipeline,
    read_all,
)

pytestmark = [pytest.mark.integration, pytest.mark.faults]

SEG = 16 * 1024 * 1024
TEXT_OPTIONS = {"include-xids": "0", "skip-empty-xacts": "1"}


@dataclass
class Failover:
    """One failover: the pipeline (now on the new primary), the stored offsets, the
    workload outcomes so far, both archive directories, and the text comparison's
    start (a redo point), its first commit and test_decoding's lines of timeline 1."""

    p: Pipeline
    version: int
    stored: OffsetRecord
    outcomes: list[TxnOutcome]
    next_ids: tuple[int, int]
    old_archive: Path
    new_archive: Path
    text_start: int
    text_from: int
    text_slot: str
    expected_old: list[str]


def _one(conn: Any, sql: str, params: tuple[Any, ...] = ()) -> Any:
    with conn.cursor() as cur:
        cur.execute(sql, params)
        row = cur.fetchone()
    return row[0] if row is not None else None


def _lines(conn: Any, slot: str) -> list[str]:
    args = [x for kv in TEXT_OPTIONS.items() for x in kv]
    with conn.cursor() as cur:
        cur.execute(
            "SELECT data FROM pg_logical_slot_get_binary_changes(%s, NULL, NULL, "
            + ", ".join(["%s"] * len(args))
            + ")",
            (slot, *args),
        )
        return [bytes(r[0]).decode("utf-8", errors="replace") for r in cur.fetchall()]


def _wait(what: str, done: Any, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while not done():
        assert time.monotonic() < deadline, f"{what} within {timeout}s"
        time.sleep(0.3)


def _replayed(standby: dict[str, Any], lsn: int) -> bool:
    conn = psycopg2.connect(standby["dsn"])
    try:
        return (
            float(_one(conn, "SELECT pg_last_wal_replay_lsn() - %s::pg_lsn", (format_lsn(lsn),)))
            >= 0
        )
    finally:
        conn.close()


def _workload(
    p: Pipeline, seed: int, next_ids: tuple[int, int], seconds: float
) -> ContinuousWorkload:
    load = ContinuousWorkload(p, seed=seed)
    load.next_acct, load.next_ledger = next_ids
    load.start(pause_s=0.05)
    time.sleep(seconds)
    load.finish()
    return load


@pytest.fixture(scope="module", params=["15", "18"])
def failed_over(
    request: pytest.FixtureRequest, kafka: dict[str, Any], registry: dict[str, Any]
) -> Iterator[Failover]:
    """The failover of the module docstring, on a freshly built pair."""
    with (
        rebuilt_pair(request.param) as (primary, standby),
        pipeline(primary, kafka, registry, "haarc", EO_TABLES) as p,
    ):
        yield _fail_over(p, primary, standby)


def _fail_over(p: Pipeline, primary: dict[str, Any], standby: dict[str, Any]) -> Failover:
    old = p.connect()
    text_slot = f"{p.slot}_txt"
    old.cursor().execute("CHECKPOINT")
    text_start = parse_lsn(_one(old, "SELECT redo_lsn::text FROM pg_control_checkpoint()"))
    text_from = parse_lsn(
        _one(
            old,
            "SELECT lsn::text FROM pg_create_logical_replication_slot(%s, 'test_decoding')",
            (text_slot,),
        )
    )
    # 1. The worker streams from the primary, over its slot there, and stops.
    worker = p.start_worker()
    worker.wait_ready(120)
    first = _workload(p, 41, (1, 10_000_000), 4)
    p.wait_confirmed(insert_lsn(old.cursor()) - 1, 120, worker)
    assert worker.terminate() == 0, worker.tail()
    stored = p.last_offset()
    assert stored is not None
    # 2. While it is down: more transactions, with segment switches among them.
    switching = threading.Event()

    def switch() -> None:
        conn = p.connect()
        while not switching.wait(0.8):
            conn.cursor().execute("SELECT pg_switch_wal()")
        conn.close()

    switcher = threading.Thread(target=switch, daemon=True)
    switcher.start()
    second = _workload(p, 42, (first.next_acct, first.next_ledger), 5)
    switching.set()
    switcher.join(30)
    expected_old = _lines(old, text_slot)
    end_old = insert_lsn(old.cursor())
    last_full = parse_lsn(_one(old, "SELECT pg_switch_wal()::text"))
    old.close()
    old_archive = Path(primary["archive"])
    needed = [segment_name(1, s, SEG) for s in range(text_start // SEG, last_full // SEG)]
    _wait("archived " + needed[-1], lambda: all((old_archive / n).exists() for n in needed))
    _wait("standby replay", lambda: _replayed(standby, end_old))
    # 3. The primary stops; the standby is promoted. It has no slot for pgcdc.
    stop_service(primary["service"])
    assert int(services("promote", standby["service"]).split()[1]) == 2
    p.pg = ensure_service(standby["service"])
    p.dsn = p.pg["dsn"].replace("dbname=postgres", f"dbname={p.db}")
    new = p.connect()
    new.cursor().execute("CHECKPOINT")  # the new slots start on timeline 2
    new.cursor().execute("SELECT pg_create_physical_replication_slot(%s, true)", (text_slot,))
    new.cursor().execute(
        "SELECT pg_create_logical_replication_slot(%s, 'test_decoding')", (text_slot + "_2",)
    )
    assert (
        _one(new, "SELECT count(*) FROM pg_replication_slots WHERE slot_name = %s", (p.slot,)) == 0
    )
    new.close()
    new_archive = Path(p.pg["archive"])
    _wait("00000002.history archived", (new_archive / "00000002.history").exists)
    p.extra_env["PGCDC_SOURCE__HOST"] = str(p.pg["host"])
    p.extra_env["PGCDC_SOURCE__PORT"] = str(p.pg["port"])
    return Failover(
        p,
        int(p.pg["version"]),
        stored,
        first.outcomes + second.outcomes,
        (second.next_acct, second.next_ledger),
        old_archive,
        new_archive,
        text_start,
        text_from,
        text_slot,
        expected_old,
    )


def _archive_copy(f: Failover) -> Path:
    """One directory holding both servers' archived files, as a shared archive would."""
    d = Path(tempfile.mkdtemp(prefix="pgcdc-arch-"))
    for src in (f.old_archive, f.new_archive):
        for path in src.iterdir():
            if path.is_file():
                shutil.copy(path, d / path.name)
    return d


def _drop_inactive(p: Pipeline) -> bool:
    """Drop the worker's slot once no walsender holds it; True when it is gone."""
    rows = p.query("SELECT active FROM pg_replication_slots WHERE slot_name = %s", (p.slot,))
    if rows and not rows[0][0]:
        p.execute(f"SELECT pg_drop_replication_slot('{p.slot}')")
        return True
    return not rows


def _refused(f: Failover, archive: str) -> str:
    """A worker with `archive` exits 1 having published nothing; its slot is dropped."""
    f.p.extra_env["PGCDC_SOURCE__ARCHIVE"] = archive
    worker = f.p.start_worker()
    try:
        code = worker.wait(90)
    finally:
        worker.kill()
        _wait("slot released", lambda: _drop_inactive(f.p), 30)
    log = worker.log_text()
    assert code == 1, f"exit {code}:\n{log[-3000:]}"
    assert f.p.last_offset() == f.stored
    return log


def test_archive_missing_a_segment_is_a_slot_gap(failed_over: Failover) -> None:
    """A directory lacking one segment of the gap: the worker exits 1 before publishing,
    with SlotGapError naming the slot's restart LSN, the stored restart LSN, the missing
    file and the LSN range it was needed for."""
    f = failed_over
    d = _archive_copy(f)
    segno = f.stored.restart_lsn // SEG + 1
    gone = segment_name(1, segno, SEG)
    (d / gone).unlink()
    try:
        log = _refused(f, str(d))
    finally:
        shutil.rmtree(d)
    needle = f"[{format_lsn(segno * SEG)}, {format_lsn((segno + 1) * SEG)})"
    for text in ("SlotGapError", format_lsn(f.stored.restart_lsn), "was missing", gone, needle):
        assert text in log, f"{text!r} not in:\n{log[-3000:]}"


def test_failing_restore_command_is_fatal(failed_over: Failover) -> None:
    """A restore command the shell cannot run (exit 127): the worker exits 1 with
    RestoreCommandError naming the command, the first file it asked for (the server's
    timeline history, checked before any segment) and the status."""
    f = failed_over
    command = "/nonexistent/fetch-wal %f %p"
    log = _refused(f, command)
    for text in (
        "RestoreCommandError",
        "/nonexistent/fetch-wal",
        "failed for 00000002.history",
        "exit status 127",
    ):
        assert text in log, f"{text!r} not in:\n{log[-3000:]}"


def test_archive_history_that_does_not_match_is_fatal(failed_over: Failover) -> None:
    """An archive whose 00000002.history puts the switch elsewhere than the server's
    history does: the worker exits 1 with TimelineHistoryError naming both."""
    f = failed_over
    d = _archive_copy(f)
    history = d / "00000002.history"
    assert history.exists()
    history.write_text("1\t0/1000000\tanother failover\n")
    try:
        log = _refused(f, str(d))
    finally:
        shutil.rmtree(d)
    for text in ("TimelineHistoryError", "00000002.history", "0/1000000"):
        assert text in log, f"{text!r} not in:\n{log[-3000:]}"


def test_gap_bridged_from_the_archive(failed_over: Failover) -> None:
    """With a restore command over both archives the worker creates its slot on the new
    primary, reads the gap from the archive and streams on: every committed transaction
    of the three workloads exactly once, whole and in order; and a text session decoding
    the same bridged WAL prints what test_decoding prints."""
    f = failed_over
    p = f.p
    restore = f"cp {f.old_archive}/%f %p 2>/dev/null || cp {f.new_archive}/%f %p"
    p.extra_env["PGCDC_SOURCE__ARCHIVE"] = restore
    worker = p.start_worker()
    worker.wait_ready(120)
    created = worker.wait_event(["slot_created_for_resume"], 5)
    assert created["stored_restart_lsn"] == format_lsn(f.stored.restart_lsn)
    bridged = worker.wait_event(["archive_bridge_done"], 120)
    assert bridged["segments"] >= 3, bridged
    third = _workload(p, 43, f.next_ids, 4)
    end = insert_lsn(p.connect().cursor())
    p.wait_confirmed(end - 1, 120, worker)
    assert worker.terminate() == 0, worker.tail()
    assert not worker.has_event("worker_fresh_start")
    verdict = verify(p, f.outcomes + third.outcomes, read_all(p.settings(), topics(p)))
    print(f"PG{f.version} gap bridged from the archive: {verdict}")
    assert verdict.committed > 20 and verdict.clean, f"{verdict}\n{story(p)}"

    conn = p.connect()
    try:
        expected = f.expected_old + _lines(conn, f.text_slot + "_2")
        slot_restart = parse_lsn(
            _one(
                conn,
                "SELECT restart_lsn::text FROM pg_replication_slots WHERE slot_name = %s",
                (f.text_slot,),
            )
        )
        actual = _text_over_bridge(f, restore, slot_restart, end)
        assert len(expected) > 100
        assert actual == expected
    finally:
        for slot in (f.text_slot, f.text_slot + "_2"):
            conn.cursor().execute("SELECT pg_drop_replication_slot(%s)", (slot,))
        conn.close()


def _text_over_bridge(f: Failover, restore: str, slot_restart: int, end: int) -> list[str]:
    """pgcdc's text plugin over [text_start, end): the archive up to the physical text
    slot's segment, then that slot's stream, joined as the worker joins them."""
    p = f.p
    gap = bridge_range(f.text_start, slot_restart, SEG)
    assert gap is not None
    system_id, history = source_timeline(p.dsn)
    work = Path(tempfile.mkdtemp(prefix="pgcdc-txt-"))
    bridge = ArchiveBridge(
        WalArchive(restore, work), history, system_id, gap[0], gap[1], SEG, "text"
    )
    lines: list[str] = []
    session = Session(
        SessionConfig(
            dsn=p.dsn,
            slot=f.text_slot,
            spill_dir=work / "spill",
            plugin_options={**TEXT_OPTIONS, "server-version": str(f.version), "two-phase": "0"},
        ),
        TestDecodingPlugin(),
        "text",
        lambda lsn, xid, data: lines.append(data),
        version=f.version,
        start_lsn=f.text_start,
        decode_from=f.text_from,
    )
    stream = PhysicalStream(p.dsn, f.text_slot, start_lsn=gap[1], create_slot=False)
    try:
        session.pump(itertools.chain(bridge.chunks(), stream.chunks(idle_timeout=5)), until_lsn=end)
    finally:
        stream.close()
        session.close()
        shutil.rmtree(work, ignore_errors=True)
    assert bridge.segments_read >= 3
    return lines
