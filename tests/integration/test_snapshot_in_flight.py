"""The initial snapshot and the stream around a large transaction in flight at start.

issue 13 part 6: a run of the extension snapshot-vs-WAL test once saw PostGIS's
`spatial_ref_sys` rows (CREATE EXTENSION) decoded from the WAL although they should
have been in the snapshot. If such a transaction committed before the consistent point,
the snapshot builder would be wrong (snapbuild.c: SnapBuildFindSnapshot,
SnapBuildXactNeedsSkip) and rows would be duplicated.

Each case starts a session the way the worker does (a physical slot's restart LSN, the
builder made consistent by forced RUNNING_XACTS, the data snapshot taken at the
consistent point: `align=True`) while a bulk insert, or CREATE EXTENSION postgis, is in
flight, and commits it at a chosen moment: before the session exists, or after it but
before the consistent point; or runs it once the session is consistent. Every row of
the transaction must reach the consumer exactly once, through the snapshot or through
the stream, never both and never neither, and the stream must hold the transaction
whole or not at all. With and without the DDL capture.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import psycopg2
import pytest
from structlog.testing import capture_logs

from connectors.postgres.archive import detect_segment_size, iter_wal_chunks
from connectors.postgres.server import force_running_xacts
from connectors.postgres.setup import setup, teardown
from connectors.tablesnap.reader import SnapshotReader
from service.app.session import Session, SessionConfig
from service.config import FilterSettings
from service.lsn import parse_lsn
from service.output.api import ColumnValue, PluginContext, RelationInfo, RowChange, TxnInfo
from service.output.logical import IN_SNAPSHOT_LOGGED
from service.output.text import TestDecodingPlugin
from service.schema.tabledef import CatalogSnapshot
from tests.fixtures.services import require_features
from tests.fixtures.slots import create_reference_slot
from tests.integration.decoding_support import SegmentFeeder, aligned_session

pytestmark = pytest.mark.integration

ROWS = 20000


class _Rows:
    """Output plugin and snapshot sink: (table, first column's text) per row seen."""

    def __init__(self) -> None:
        self.wal: list[tuple[str, str]] = []
        self.snap: list[tuple[str, str]] = []
        self.wal_txns: list[list[tuple[str, str]]] = []

    def begin(self, ctx: PluginContext, txn: TxnInfo) -> None:
        self.wal_txns.append([])

    def change(self, ctx: PluginContext, txn: TxnInfo, change: RowChange) -> None:
        assert change.new is not None
        row = (change.relation.name, str(change.new[0].text))
        self.wal.append(row)
        self.wal_txns[-1].append(row)

    def commit(self, ctx: PluginContext, txn: TxnInfo, lsn: int) -> None:
        pass


class _Sink:
    def __init__(self, out: _Rows) -> None:
        self.out = out

    def begin(self, snapshot: CatalogSnapshot, first_table: int | None) -> None:
        pass

    def row(self, relation: RelationInfo, values: Sequence[ColumnValue]) -> None:
        self.out.snap.append((relation.name, str(values[0].text)))

    def end(self) -> None:
        pass


def _one(cur: Any) -> Any:
    row = cur.fetchone()
    assert row is not None
    return row[0]


def _reader(out: _Rows) -> SnapshotReader:
    """The aligned snapshot's reader, its rows into `out`."""
    return SnapshotReader(FilterSettings(), sink=_Sink(out))


@pytest.fixture(params=[True, False], ids=["capture", "no-capture"])
def db(pg: dict[str, Any], request: pytest.FixtureRequest) -> Iterator[tuple[str, list[Any]]]:
    """A fresh database, with pgcdc's DDL capture installed (`pgcdc setup`, as the
    worker requires) or without it (the live-catalog fallback)."""
    name = f"inflight_{uuid.uuid4().hex[:10]}"
    admin = psycopg2.connect(pg["dsn"])
    admin.autocommit = True
    admin.cursor().execute(f"CREATE DATABASE {name}")
    dsn = pg["dsn"].replace("dbname=postgres", f"dbname={name}")
    phys = f"{name}_phys"
    if request.param:
        setup(dsn, phys)
    conns = [psycopg2.connect(dsn) for _ in range(2)]
    for c in conns:
        c.autocommit = True
    try:
        yield dsn, conns
    finally:
        for c in conns:
            c.close()
        if request.param:
            teardown(dsn, phys)
        admin.cursor().execute(f"DROP DATABASE {name} WITH (FORCE)")
        admin.close()


def _run(
    pg: dict[str, Any], dsn: str, conns: list[Any], tmp_path: Path, work: str, when: str
) -> _Rows:
    """`work` runs in a transaction on conns[1], open while the session starts, that
    commits at `when`: "before-session" or "before-consistent" (an open transaction
    keeps the builder from consistency, as it keeps a new slot from being created); with
    "after-consistent" it starts and commits once the session is consistent."""
    version = int(pg["version"])
    cur = conns[0].cursor()
    tx = conns[1].cursor()
    if when != "after-consistent":
        tx.execute("BEGIN")
        tx.execute(work)
        # A physical slot's restart_lsn is the last checkpoint's redo pointer
        # (ReplicationSlotReserveWal), which another test's checkpoint on the shared
        # server may have put before this transaction began: the session would then
        # read it whole from its start and may rightly be consistent before it ends.
        # A checkpoint requested now starts after it, so the session starts with it in
        # flight.
        cur.execute("CHECKPOINT")
    slot = f"inflight_{uuid.uuid4().hex[:8]}"
    cur.execute("SELECT pg_create_physical_replication_slot(%s, true)", (slot,))
    out = _Rows()
    try:
        cur.execute("SELECT restart_lsn FROM pg_replication_slots WHERE slot_name = %s", (slot,))
        start = parse_lsn(_one(cur))
        if when == "before-session":
            tx.execute("COMMIT")
        session = aligned_session(dsn, slot, version, start, out, _reader(out), tmp_path)
        feeder = SegmentFeeder(pg, cur, start)

        def catch_up() -> None:
            feeder.catch_up(session)

        try:
            force_running_xacts(dsn, version)
            catch_up()
            if when == "before-consistent":
                assert not session.aligned  # the open transaction holds it back
                tx.execute("COMMIT")
            # The servers are shared: another test's transaction running at a forced
            # RUNNING_XACTS keeps the builder from consistency too; force more.
            for _ in range(60):
                if session.aligned:
                    break
                force_running_xacts(dsn, version)
                catch_up()
                time.sleep(0.5)
            assert session.aligned
            if when == "after-consistent":
                tx.execute("BEGIN")
                tx.execute(work)
                force_running_xacts(dsn, version)  # a RUNNING_XACTS while it runs
                catch_up()
                tx.execute("COMMIT")
            cur.execute("INSERT INTO marker VALUES (1)")
            force_running_xacts(dsn, version)
            catch_up()
            assert ("marker", "1") in out.wal
        finally:
            session.close()
    finally:
        if conns[1].get_transaction_status() != psycopg2.extensions.TRANSACTION_STATUS_IDLE:
            tx.execute("ROLLBACK")
        cur.execute("SELECT pg_drop_replication_slot(%s)", (slot,))
    return out


def _exactly_once(out: _Rows, table: str, expected: set[str]) -> None:
    snap = [key for name, key in out.snap if name == table]
    wal = [key for name, key in out.wal if name == table]
    assert len(snap) == len(set(snap)) and len(wal) == len(set(wal))
    both = set(snap) & set(wal)
    assert not both, f"{len(both)} rows of {table} in the snapshot and the stream"
    assert set(snap) | set(wal) == expected, (len(snap), len(wal), len(expected))
    whole = [t for t in out.wal_txns if any(name == table for name, _ in t)]
    assert len(whole) <= 1, "the transaction reached the stream in pieces"


@pytest.mark.parametrize("when", ["before-session", "before-consistent", "after-consistent"])
def test_bulk_insert_in_flight(
    pg: dict[str, Any], db: tuple[str, list[Any]], tmp_path: Path, when: str
) -> None:
    dsn, conns = db
    cur = conns[0].cursor()
    cur.execute("CREATE TABLE bulk (id int PRIMARY KEY, v text)")
    cur.execute("CREATE TABLE marker (id int PRIMARY KEY)")
    out = _run(
        pg,
        dsn,
        conns,
        tmp_path,
        f"INSERT INTO bulk SELECT g, md5(g::text) FROM generate_series(1, {ROWS}) g",
        when,
    )
    _exactly_once(out, "bulk", {str(i) for i in range(1, ROWS + 1)})
    if when == "after-consistent":
        assert len([r for r in out.wal if r[0] == "bulk"]) == ROWS
    else:
        assert len([r for r in out.snap if r[0] == "bulk"]) == ROWS


def test_create_table_as_after_consistent(
    pg: dict[str, Any], db: tuple[str, list[Any]], tmp_path: Path
) -> None:
    """Rows a transaction writes into a table it creates (CREATE TABLE AS) are the
    table's: PostgreSQL prints them (relrewrite is unset), and so must pgcdc, with the
    DDL capture and through the live-catalog fallback without it."""
    dsn, conns = db
    conns[0].cursor().execute("CREATE TABLE marker (id int PRIMARY KEY)")
    work = (
        f"CREATE TABLE born AS SELECT g AS id, md5(g::text) AS v FROM generate_series(1, {ROWS}) g"
    )
    out = _run(pg, dsn, conns, tmp_path, work, "after-consistent")
    _exactly_once(out, "born", {str(i) for i in range(1, ROWS + 1)})
    assert len([r for r in out.wal if r[0] == "born"]) == ROWS


@pytest.mark.parametrize("when", ["before-session", "before-consistent", "after-consistent"])
def test_create_extension_postgis_in_flight(
    pg: dict[str, Any], db: tuple[str, list[Any]], tmp_path: Path, when: str
) -> None:
    """The case of the issue: CREATE EXTENSION postgis fills spatial_ref_sys (~8,500
    rows) in one large transaction, with many catalog changes."""
    require_features(pg, "postgis")
    dsn, conns = db
    cur = conns[0].cursor()
    cur.execute("CREATE TABLE marker (id int PRIMARY KEY)")
    out = _run(pg, dsn, conns, tmp_path, "CREATE EXTENSION postgis", when)
    cur.execute("SELECT srid::text FROM spatial_ref_sys")
    expected = {str(r[0]) for r in cur.fetchall()}
    assert len(expected) > 8000
    _exactly_once(out, "spatial_ref_sys", expected)


@pytest.mark.parametrize("delay", [0.0, 0.3, 1.0])
def test_slot_created_while_bulk_insert_in_flight(
    pg: dict[str, Any], db: tuple[str, list[Any]], tmp_path: Path, delay: float
) -> None:
    """A test_decoding slot created while a bulk insert is in flight waits for it
    (SnapBuildWaitSnapshot) and does not print it: it committed before the consistent
    point. pgcdc, started at the slot's restart LSN (the RUNNING_XACTS that lists it),
    must print exactly the same transactions, line for line."""
    dsn, conns = db
    cur = conns[0].cursor()
    cur.execute("CREATE TABLE bulk (id int PRIMARY KEY, v text)")
    tx = conns[1].cursor()
    tx.execute("BEGIN")
    tx.execute(f"INSERT INTO bulk SELECT g, md5(g::text) FROM generate_series(1, {ROWS}) g")
    slot = f"inflight_{uuid.uuid4().hex[:8]}"

    def commit_later() -> None:
        time.sleep(delay + 0.2)
        conns[1].cursor().execute("INSERT INTO bulk VALUES (0, 'last of the big one')")
        conns[1].cursor().execute("COMMIT")

    committer = threading.Thread(target=commit_later)
    began = time.monotonic()
    committer.start()
    create_reference_slot(dsn, slot)
    waited = time.monotonic() - began
    committer.join()
    assert waited >= delay + 0.15, "the slot did not wait for the transaction in flight"
    try:
        cur.execute("SELECT restart_lsn FROM pg_replication_slots WHERE slot_name = %s", (slot,))
        start = parse_lsn(_one(cur))
        lines: list[str] = []
        options = {"include-xids": "0", "skip-empty-xacts": "1"}
        session = Session(
            SessionConfig(
                dsn=dsn,
                slot=slot,
                spill_dir=tmp_path / "spill",
                plugin_options={**options, "server-version": str(pg["version"])},
            ),
            TestDecodingPlugin(),
            "text",
            lambda lsn, xid, data: lines.append(data),
            version=int(pg["version"]),
            start_lsn=start,
            decode_from=start,
        )
        try:
            force_running_xacts(dsn, int(pg["version"]))
            cur.execute("INSERT INTO bulk VALUES (-1, 'after the slot')")
            cur.execute("SELECT pg_current_wal_lsn()")
            end = parse_lsn(_one(cur))
            cur.execute(
                "SELECT data FROM pg_logical_slot_get_changes(%s, NULL, NULL,"
                " 'include-xids', '0', 'skip-empty-xacts', '1')",
                (slot,),
            )
            expected = [r[0] for r in cur.fetchall()]
            wal = Path(pg["pgdata"]) / "pg_wal"
            session.pump(
                iter_wal_chunks(wal, start, segment_size=detect_segment_size(wal)),
                until_lsn=end,
            )
        finally:
            session.close()
    finally:
        cur.execute("SELECT pg_drop_replication_slot(%s)", (slot,))
    bulk = [e for e in expected if e.startswith("table public.bulk:")]
    assert bulk == ["table public.bulk: INSERT: id[integer]:-1 v[text]:'after the slot'"]
    assert lines == expected


def test_backlog_the_snapshot_holds_is_not_queued(
    pg: dict[str, Any], db: tuple[str, list[Any]], tmp_path: Path
) -> None:
    """A first start decodes from the slot's restart point, so the WAL between the
    consistent point and the aligned snapshot can be a large backlog. Here it holds a
    20k-row bulk insert that committed before the snapshot, and a transaction still
    open at the snapshot whose rows are in a subtransaction. The bulk insert is visible
    in the snapshot: its rows come from the snapshot once, and are never queued (no
    spill with a 256 kB work_mem, where queueing them spills). The open transaction is
    not: every row comes from the stream once it commits, although its
    subtransaction's xid, which a snapshot's xip does not list, looks visible alone.
    Each skipped commit of this database is logged (the first IN_SNAPSHOT_LOGGED at
    info), and no other database's."""
    dsn, conns = db
    version = int(pg["version"])
    cur, tx = conns[0].cursor(), conns[1].cursor()
    cur.execute("CREATE TABLE bulk (id int PRIMARY KEY, v text)")
    cur.execute("CREATE TABLE opened (id int PRIMARY KEY)")
    cur.execute("CREATE TABLE marker (id int PRIMARY KEY)")
    # The servers are shared: another session's transaction running at the forced
    # RUNNING_XACTS can put the consistent point after the backlog began; then the
    # case is set up again (a new slot, the tables emptied).
    for attempt in range(5):
        cur.execute("TRUNCATE bulk, opened, marker")
        cur.execute("CHECKPOINT")
        slot = f"backlog_{uuid.uuid4().hex[:8]}"
        cur.execute("SELECT pg_create_physical_replication_slot(%s, true)", (slot,))
        out = _Rows()
        try:
            cur.execute(
                "SELECT restart_lsn FROM pg_replication_slots WHERE slot_name = %s", (slot,)
            )
            start = parse_lsn(_one(cur))
            for _ in range(3):
                force_running_xacts(dsn, version)
                time.sleep(0.2)
            cur.execute("SELECT pg_current_wal_insert_lsn()")
            backlog = parse_lsn(_one(cur))
            tx.execute("BEGIN")
            tx.execute("INSERT INTO opened VALUES (0)")
            tx.execute("SAVEPOINT s")
            tx.execute("INSERT INTO opened SELECT g FROM generate_series(1, 100) g")
            cur.execute(
                f"INSERT INTO bulk SELECT g, md5(g::text) FROM generate_series(1, {ROWS}) g"
            )
            small = IN_SNAPSHOT_LOGGED + 50  # commits of one row each, in the backlog too
            for i in range(small):
                cur.execute("INSERT INTO marker VALUES (%s)", (1000 + i,))
            # and a commit of another database (its catalog changes name that database)
            other = psycopg2.connect(pg["dsn"])
            with other, other.cursor() as oc:
                oc.execute("CREATE TEMP TABLE backlog_other (n int)")
                oc.execute("SELECT pg_current_xact_id()::text")
                other_xid = int(_one(oc))
            other.close()
            session = aligned_session(
                dsn, slot, version, start, out, _reader(out), tmp_path, work_mem=256 << 10
            )
            feeder = SegmentFeeder(pg, cur, start)
            try:
                with capture_logs() as logs:
                    feeder.catch_up(session)
                consistent = session.snap.consistent_at
                if consistent is None or consistent >= backlog:
                    continue  # not the case to test: set it up again
                assert session.aligned and session.snapshot_lsn is not None
                assert session.snapshot_lsn > backlog
                tx.execute("RELEASE SAVEPOINT s")
                tx.execute("COMMIT")
                cur.execute("INSERT INTO marker VALUES (%s)", (attempt,))
                force_running_xacts(dsn, version)
                feeder.catch_up(session)
                assert ("marker", str(attempt)) in out.wal
                spills = session.rb.stats.spill_count
            finally:
                session.close()
        finally:
            if conns[1].get_transaction_status() != psycopg2.extensions.TRANSACTION_STATUS_IDLE:
                tx.execute("ROLLBACK")
            cur.execute("SELECT pg_drop_replication_slot(%s)", (slot,))
        _exactly_once(out, "bulk", {str(i) for i in range(1, ROWS + 1)})
        assert len([r for r in out.snap if r[0] == "bulk"]) == ROWS
        _exactly_once(out, "opened", {str(i) for i in range(101)})
        assert len([r for r in out.wal if r[0] == "opened"]) == 101
        assert spills == 0, f"{spills} spills: the backlog the snapshot holds was queued"
        # Every commit of this database in the backlog (autovacuum's too, at random), at
        # info up to IN_SNAPSHOT_LOGGED, and none of another database's.
        skipped = [e for e in logs if e["event"] == "commit_in_snapshot"]
        levels = [e["log_level"] for e in skipped]
        assert len(levels) >= small + 1, len(levels)
        assert levels == ["info"] * IN_SNAPSHOT_LOGGED + ["debug"] * (
            len(levels) - IN_SNAPSHOT_LOGGED
        )
        assert other_xid not in {e["xid"] for e in skipped}
        assert [e for e in logs if e["event"] == "commit_in_snapshot_more_at_debug"]
        return
    pytest.fail("the consistent point fell after the backlog began in 5 attempts")
