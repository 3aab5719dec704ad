"""One workload through a real test_decoding slot and through pgcdc, with slot stats.

`run_vs_pg(pg, workload, work_mem_kb=...)`:
1. creates a fresh database (and a second one, `<db>_other`, for transactions the
   slot must not decode), turns autovacuum off for its catalogs (an autoanalyze of
   pg_database there would be one more transaction for both sides to count), installs
   pgcdc's DDL capture, and creates the tables;
2. creates a test_decoding slot; its restart LSN is where pgcdc starts reading;
3. starts a pgcdc `Session` with `work_mem = work_mem_kb * 1024` and forces
   RUNNING_XACTS;
4. runs the workload (a list of `Step`s), then takes `end = pg_current_wal_lsn()`;
5. decodes pg_wal with pgcdc, record by record, stopping after the first record whose
   end reaches `end` (exactly what `pg_logical_slot_get_changes(slot, upto_lsn => end)`
   does), so WAL written later by autovacuum or anyone else is decoded by neither;
6. on its own connection, `SET logical_decoding_work_mem` to the same size (a session
   setting: the decoding runs in this backend), reads the slot's changes up to `end`,
   and reads the slot's row of `pg_stat_replication_slots`.

Both sides' outputs are reduced to a line count and a SHA-256 over the lines (or kept
whole with `keep_lines=True`), so a 1,000,000-row run does not hold two copies of its
output. The spill directory is a fresh temporary directory, checked empty afterwards.
"""

from __future__ import annotations

import hashlib
import resource
import subprocess
import tempfile
import time
import uuid
import warnings
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg2

from connectors.postgres.archive import detect_segment_size, iter_wal_chunks
from connectors.postgres.server import force_running_xacts
from connectors.postgres.setup import setup, teardown
from service.app.metrics import SLOT_STATS
from service.app.session import Session, SessionConfig
from service.lsn import format_lsn, parse_lsn
from service.output.text import TestDecodingPlugin
from service.reorder.buffer import ReorderBufferStats
from service.reorder.changes import change_size
from tests.fixtures.slots import create_reference_slot

OPTIONS = {"include-xids": "0", "skip-empty-xacts": "1"}


@dataclass(frozen=True)
class Step:
    """One autocommit statement (possibly a whole BEGIN ... COMMIT block).

    `db` is "main" (the slot's database) or "other" (a database the slot ignores).
    `watch` marks the WAL the step writes as a window in which a commit with catalog
    changes (from anyone, in any database) is counted: PostgreSQL then queues a new
    catalog snapshot into every transaction in progress that has a base snapshot
    (SnapBuildDistributeNewCatalogSnapshot), which its size counters include and
    pgcdc, whose schema history is versioned by LSN, has no need to buffer.
    """

    sql: str
    db: str = "main"
    watch: bool = False


@dataclass
class Output:
    """A stream of output lines reduced to their count and a digest (lines optional)."""

    keep_lines: bool = False
    count: int = 0
    lines: list[str] = field(default_factory=list)
    _digest: Any = field(default_factory=hashlib.sha256)

    def add(self, line: str) -> None:
        self.count += 1
        self._digest.update(line.encode())
        self._digest.update(b"\n")
        if self.keep_lines:
            self.lines.append(line)

    @property
    def digest(self) -> str:
        return str(self._digest.hexdigest())


@dataclass
class Result:
    server_stats: dict[str, int]  # settled (two equal reads 0.2 s apart)
    server_stats_at_once: dict[str, int]  # read right after get_changes returned
    pgcdc_stats: dict[str, int]
    rb_stats: ReorderBufferStats  # the reorder buffer's own object
    catalog_commits_in_watch: int  # commits with catalog changes in the watched WAL
    # counted (total_txns) transactions that queued no change (row or DDL message), as
    # (xid, commit LSN)
    counted_without_rows: list[tuple[int, int]]
    wal_range: tuple[int, int]  # the decoded WAL: the slot's restart LSN to the end
    server_out: Output
    pgcdc_out: Output
    work_mem: int
    peak_memory: int  # pgcdc's peak buffered bytes
    largest_change: int  # the largest accounted change size pgcdc saw
    run_changes: int  # of them, how many were queued in InsertRuns (the native reader's)
    run_chunks: int  # of those, how many were TOAST chunk inserts (InsertRows.chunks)
    spill_left: list[str]  # files left in the spill directory after close
    pgcdc_seconds: float
    server_seconds: float
    workload_seconds: float
    rss_after_pgcdc_kb: int  # ru_maxrss of this process right after pgcdc's run


def _dsn(pg: dict[str, Any], db: str) -> str:
    return f"host={pg['host']} port={pg['port']} user={pg['user']} dbname={db}"


def _one(cur: Any) -> str:
    row = cur.fetchone()
    if row is None:
        raise AssertionError("query returned no row")
    return str(row[0])


def _pump_until(session: Session, wal: Path, start: int, end: int) -> None:
    """Session.feed, but stopping at the record that reaches `end` (not per chunk)."""
    chunks = iter_wal_chunks(wal, start, segment_size=detect_segment_size(wal))
    for lsn, data in chunks:
        if lsn >= end:
            return
        # Bytes past `end` may not be written yet in a live pg_wal: never feed them.
        session.reader.feed(data[: end - lsn], lsn)
        for record in session.records():
            if record.lsn >= end:
                return
            if record.lsn >= session.start_lsn:
                session.decoding.process(record)
            if record.end_lsn >= end:
                return
    raise AssertionError(f"WAL ended before {end:X}")


class _CatalogCommits:
    """Commit LSNs of transactions that changed the catalog, in any database.

    A transaction (or one of its subtransactions) is marked by the driver's
    `set_has_catalog_changes` (NEW_CID, inplace and invalidation records) before its
    commit reaches the reorder buffer as `commit` (this database) or `forget` (another
    database, or before the start point).
    """

    def __init__(self, session: Session) -> None:
        self.lsns: set[int] = set()
        self._xids: set[int] = set()
        rb = session.rb
        mark, commit, forget = rb.set_has_catalog_changes, rb.commit, rb.forget

        def marking(xid: int, lsn: int) -> None:
            self._xids.add(xid)
            mark(xid, lsn)

        def committing(xid: int, commit_lsn: int, *args: Any, **kwargs: Any) -> None:
            subxids = kwargs.get("subxids", ())
            if xid in self._xids or self._xids.intersection(subxids):
                self.lsns.add(commit_lsn)
            commit(xid, commit_lsn, *args, **kwargs)

        def forgetting(xid: int, lsn: int) -> None:
            if xid in self._xids:
                self.lsns.add(lsn)
            forget(xid, lsn)

        rb.set_has_catalog_changes = marking  # type: ignore[method-assign]
        rb.commit = committing  # type: ignore[method-assign]
        rb.forget = forgetting  # type: ignore[method-assign]

    def within(self, windows: Sequence[tuple[int, int]]) -> int:
        return sum(1 for lsn in self.lsns if any(a <= lsn < b for a, b in windows))


class _CountedWithoutRows:
    """The transactions pgcdc counted in total_txns (a commit in this database with a
    base snapshot) although neither they nor their subtransactions queued a change (a
    row, or the DDL capture's message): ANALYZE, or shared-catalog-only transactions of
    this database, or a DDL made without the event trigger. A test whose workload
    has none can tell another session's (autovacuum's ANALYZE, say) from its own.
    Wraps queue_change, queue_run and commit (instance-only)."""

    def __init__(self, session: Session) -> None:
        self.commits: list[tuple[int, int]] = []
        self._changed: set[int] = set()
        rb = session.rb
        queue, queue_run, commit = rb.queue_change, rb.queue_run, rb.commit

        def queuing(xid: int, lsn: int, change: Any) -> None:
            self._changed.add(xid)
            queue(xid, lsn, change)

        def queuing_run(xid: int, lsn: int, inserts: Any) -> None:
            self._changed.add(xid)
            queue_run(xid, lsn, inserts)

        def committing(xid: int, commit_lsn: int, *args: Any, **kwargs: Any) -> None:
            before = int(rb.stats.total_txns)
            commit(xid, commit_lsn, *args, **kwargs)
            counted = int(rb.stats.total_txns) > before
            own = {xid, *kwargs.get("subxids", ())}
            if counted and not own & self._changed:
                self.commits.append((xid, commit_lsn))

        rb.queue_change = queuing  # type: ignore[method-assign]
        rb.queue_run = queuing_run  # type: ignore[method-assign]
        rb.commit = committing  # type: ignore[method-assign]


def run_vs_pg_quiet(
    pg: dict[str, Any],
    tables: Sequence[str],
    workload: Sequence[Step],
    *,
    work_mem_kb: int,
    attempts: int = 3,
) -> Result:
    """run_vs_pg for a workload whose every counted transaction changes rows, so that a
    test may expect exact counts. The servers are shared: a run in which another session
    committed a row-less transaction in the test's database (counted_without_rows, both
    sides must have counted it) is warned about, with that transaction's WAL records,
    and repeated on a fresh database, at most `attempts` runs in all."""
    for attempt in range(1, attempts + 1):
        r = run_vs_pg(pg, tables, workload, work_mem_kb=work_mem_kb)
        if not r.counted_without_rows:
            return r
        assert r.pgcdc_stats["total_txns"] == r.server_stats["total_txns"], _describe(pg, r)
        warnings.warn(
            f"run {attempt} of {attempts} on {pg['service']}: a transaction this workload"
            f" did not make was counted (by both sides): {_describe(pg, r)}",
            stacklevel=2,
        )
    raise AssertionError(
        f"every run had a transaction the workload did not make: {_describe(pg, r)}"
    )


def _describe(pg: dict[str, Any], r: Result) -> str:
    """The row-less counted transactions, each with its WAL records (pg_waldump)."""
    start, end = (format_lsn(v) for v in r.wal_range)
    parts = []
    for xid, lsn in r.counted_without_rows:
        proc = subprocess.run(
            [
                str(Path(pg["bin"]) / "pg_waldump"),
                "-p",
                str(Path(pg["pgdata"]) / "pg_wal"),
                "-s",
                start,
                "-e",
                end,
                "-x",
                str(xid),
            ],
            capture_output=True,
            text=True,
            check=False,
        )
        lines = (proc.stdout or proc.stderr).splitlines()[:12]
        parts.append(f"xid {xid} committed at {format_lsn(lsn)}:\n" + "\n".join(lines))
    return "\n".join(parts)


def _largest_change_tracker(session: Session) -> list[int]:
    """Wrap queue_change and queue_run to remember the largest accounted change size
    and count the changes queued in runs, and the TOAST chunks among them
    (instance-only)."""
    largest = [0, 0, 0]
    rb = session.rb
    queue = rb.queue_change

    def tracking(xid: int, lsn: int, change: Any) -> None:
        size = change_size(change)
        largest[0] = max(largest[0], size)
        queue(xid, lsn, change)

    queue_run = rb.queue_run

    def tracking_run(xid: int, lsn: int, inserts: Any) -> None:
        largest[0] = max(largest[0], *(change_size(c) for c in inserts))
        largest[1] += len(inserts)
        largest[2] += inserts.chunks
        queue_run(xid, lsn, inserts)

    rb.queue_change = tracking  # type: ignore[method-assign]
    rb.queue_run = tracking_run  # type: ignore[method-assign]
    return largest


def read_slot_stats(cur: Any, slot: str) -> dict[str, int]:
    cur.execute("SELECT pg_stat_clear_snapshot()")
    cols = ", ".join(SLOT_STATS)
    cur.execute(f"SELECT {cols} FROM pg_stat_replication_slots WHERE slot_name = %s", (slot,))
    row = cur.fetchone()
    if row is None:
        raise AssertionError(f"no pg_stat_replication_slots row for {slot}")
    return dict(zip(SLOT_STATS, (int(v) for v in row), strict=True))


def settled_slot_stats(cur: Any, slot: str, timeout: float = 5.0) -> dict[str, int]:
    """The slot's stats once two reads 0.2 s apart agree (they are written at once on
    PG15+, so the first pair normally agrees; the poll only guards against a lag)."""
    deadline = time.monotonic() + timeout
    last = read_slot_stats(cur, slot)
    while True:
        time.sleep(0.2)
        now = read_slot_stats(cur, slot)
        if now == last or time.monotonic() > deadline:
            return now
        last = now


def _no_catalog_autoanalyze(dsn: str) -> None:
    """Turn autovacuum off for every catalog table in the fresh database, shared ones
    included (their pg_class rows, and so their reloptions, are per database).

    The shared servers create and drop databases all the time, so autovacuum often
    analyzes pg_database. When it does so connected to this database, the ANALYZE
    writes pg_statistic here: a transaction with catalog changes in the slot's
    database, counted in total_txns by both sides. The counts stay equal, but a test's
    exact expected total_txns would be off by one (seen once in CI on pg18).
    allow_system_table_mods is superuser-settable since PostgreSQL 12.
    """
    conn = psycopg2.connect(dsn)
    conn.autocommit = True
    try:
        cur = conn.cursor()
        cur.execute("SET allow_system_table_mods = on")
        cur.execute(
            "SELECT oid::regclass::text FROM pg_class"
            " WHERE relnamespace = 'pg_catalog'::regnamespace AND relkind = 'r'"
        )
        for (name,) in cur.fetchall():
            cur.execute(f"ALTER TABLE {name} SET (autovacuum_enabled = off)")
    finally:
        conn.close()


def run_vs_pg(
    pg: dict[str, Any],
    tables: Sequence[str],
    workload: Sequence[Step],
    *,
    work_mem_kb: int,
    keep_lines: bool = False,
) -> Result:
    db = f"rbpg_{uuid.uuid4().hex[:10]}"
    other = f"{db}_other"
    admin = psycopg2.connect(_dsn(pg, "postgres"))
    admin.autocommit = True
    admin.cursor().execute(f"CREATE DATABASE {db}")
    admin.cursor().execute(f"CREATE DATABASE {other}")
    dsn = _dsn(pg, db)
    _no_catalog_autoanalyze(dsn)
    phys = f"{db}_phys"
    setup(dsn, phys)
    conns = {"main": psycopg2.connect(dsn), "other": psycopg2.connect(_dsn(pg, other))}
    decoder_conn = psycopg2.connect(dsn)
    for c in (*conns.values(), decoder_conn):
        c.autocommit = True
    cur = decoder_conn.cursor()
    session: Session | None = None
    spill_dir = Path(tempfile.mkdtemp(prefix=f"pgcdc-spill-{db}-"))
    try:
        for sql in tables:
            conns["main"].cursor().execute(sql)
            conns["other"].cursor().execute(sql)
        create_reference_slot(dsn, db)
        cur.execute("SELECT restart_lsn FROM pg_replication_slots WHERE slot_name = %s", (db,))
        start = parse_lsn(_one(cur))
        pgcdc_out = Output(keep_lines)
        session = Session(
            SessionConfig(
                dsn=dsn,
                slot=db,
                work_mem=work_mem_kb * 1024,
                spill_dir=spill_dir,
                plugin_options={**OPTIONS, "server-version": str(pg["version"])},
            ),
            TestDecodingPlugin(),
            "text",
            lambda lsn, xid, data: pgcdc_out.add(data),
            version=int(pg["version"]),
            start_lsn=start,
        )
        largest = _largest_change_tracker(session)
        catalog_commits = _CatalogCommits(session)
        without_rows = _CountedWithoutRows(session)
        force_running_xacts(dsn, int(pg["version"]))
        t0 = time.monotonic()
        windows: list[tuple[int, int]] = []  # one span: from the first watched step's
        for step in workload:  # start to the last one's end, gaps included
            if step.watch:
                cur.execute("SELECT pg_current_wal_insert_lsn()")
                before = parse_lsn(_one(cur))
            conns[step.db].cursor().execute(step.sql)
            if step.watch:
                cur.execute("SELECT pg_current_wal_insert_lsn()")
                after = parse_lsn(_one(cur))
                windows[:] = [(windows[0][0] if windows else before, after)]
        workload_seconds = time.monotonic() - t0
        cur.execute("SELECT pg_current_wal_lsn()")
        end = parse_lsn(_one(cur))

        t0 = time.monotonic()
        _pump_until(session, Path(pg["pgdata"]) / "pg_wal", start, end)
        pgcdc_seconds = time.monotonic() - t0
        rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        pgcdc_stats = {name: int(getattr(session.rb.stats, name)) for name in SLOT_STATS}
        peak = session.rb.peak_memory_bytes
        # Only transactions with changes: the servers are shared, and another test's
        # transaction still running at `end` is known to the buffer by its xid alone.
        if session.rb.txns_with_changes:
            raise AssertionError(
                f"{session.rb.txns_with_changes} transactions with changes left in the buffer"
            )

        # The decoding runs in this backend, so a session SET is what it uses.
        cur.execute(f"SET logical_decoding_work_mem = '{work_mem_kb}kB'")
        args: list[str] = []
        for key, value in OPTIONS.items():
            args += [key, value]
        placeholders = ", ".join(["%s"] * len(args))
        server_out = Output(keep_lines)
        t0 = time.monotonic()
        decoder_conn.autocommit = False  # a named (server-side) cursor needs a transaction
        with decoder_conn.cursor(name="changes") as changes:  # streamed, not fetched whole
            changes.itersize = 10_000
            changes.execute(
                f"SELECT data FROM pg_logical_slot_get_changes(%s, %s, NULL, {placeholders})",
                (db, f"{end >> 32:X}/{end & 0xFFFFFFFF:X}", *args),
            )
            for (line,) in changes:
                server_out.add(line)
        decoder_conn.commit()
        decoder_conn.autocommit = True
        server_seconds = time.monotonic() - t0
        server_stats_at_once = read_slot_stats(cur, db)
        server_stats = settled_slot_stats(cur, db)

        session_stats = session.rb.stats
        session.close()
        spill_left = [str(p) for p in spill_dir.rglob("*") if p.is_file()]
        session = None
        return Result(
            server_stats=server_stats,
            server_stats_at_once=server_stats_at_once,
            pgcdc_stats=pgcdc_stats,
            rb_stats=session_stats,
            catalog_commits_in_watch=catalog_commits.within(windows),
            counted_without_rows=without_rows.commits,
            wal_range=(start, end),
            server_out=server_out,
            pgcdc_out=pgcdc_out,
            work_mem=work_mem_kb * 1024,
            peak_memory=peak,
            largest_change=largest[0],
            run_changes=largest[1],
            run_chunks=largest[2],
            spill_left=spill_left,
            pgcdc_seconds=pgcdc_seconds,
            server_seconds=server_seconds,
            workload_seconds=workload_seconds,
            rss_after_pgcdc_kb=rss,
        )
    finally:
        if session is not None:
            session.close()
        cur.execute("SELECT pg_drop_replication_slot(%s)", (db,))
        for c in (*conns.values(), decoder_conn):
            c.close()
        teardown(dsn, phys)
        admin.cursor().execute(f"DROP DATABASE {db} WITH (FORCE)")
        admin.cursor().execute(f"DROP DATABASE {other} WITH (FORCE)")
        admin.close()
        for p in sorted(spill_dir.rglob("*"), reverse=True):
            p.unlink() if p.is_file() else p.rmdir()
        spill_dir.rmdir()


def small_and_large(
    small: int, large_rows: int, *, savepoint: bool = False, interloper: str = ""
) -> Iterator[Step]:
    """`small` single-row autocommit inserts, then one `large_rows`-row transaction.

    With `savepoint`, the large transaction puts its second half in a released
    subtransaction and also rolls back a spilled subtransaction; `interloper` is SQL
    run in the other database while the large transaction is open.
    """
    for i in range(small):
        yield Step(f"INSERT INTO small VALUES ({i}, 'row {i}')")
    if not savepoint:
        yield Step(f"INSERT INTO big SELECT g FROM generate_series(1, {large_rows}) g", watch=True)
        return
    half = large_rows // 2
    yield Step(
        "BEGIN;"
        f" INSERT INTO big SELECT g FROM generate_series(1, {half}) g;"
        " SAVEPOINT kept;"
        f" INSERT INTO big SELECT g FROM generate_series({half + 1}, {large_rows}) g;",
        watch=True,
    )
    if interloper:
        yield Step(interloper, db="other", watch=True)
    yield Step(
        "RELEASE SAVEPOINT kept;"
        " SAVEPOINT dropped;"
        f" INSERT INTO big SELECT -g FROM generate_series(1, {half}) g;"
        " ROLLBACK TO SAVEPOINT dropped;"
        " COMMIT",
        watch=True,
    )
