"""The `pgcdc` command line: help, configuration errors, and the commands that need no Kafka."""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import psycopg2
import pytest
from structlog.testing import capture_logs

from connectors.postgres.setup import setup
from service.app import commands
from service.app.cli import build_parser, main
from service.errors import SourceSetupError
from tests.fixtures.slots import drop_slot_when_released, holding


def checkpoint_until_consistent(cur: Any) -> None:
    """Write RUNNING_XACTS records (by CHECKPOINT) until decoding from before the first is
    consistent at the last, whatever other tests run on the shared server.

    Mirrors SnapBuildProcessRunningXacts: a record listing running transactions moves the
    builder one step (BUILDING, FULL, CONSISTENT), and the next step needs every xid up to
    that record's nextXid finished. So: three checkpoints, and between two of them wait
    until no transaction older than an xid assigned just after the previous one still runs.
    Running means what RUNNING_XACTS lists (GetRunningTransactionData): every backend's
    xid, and prepared ones. pg_current_snapshot() is no measure of that: its xmin leaves
    out the xids of backends doing logical decoding or lazy VACUUM (GetSnapshotData).
    """
    older = (
        "SELECT count(*) FROM (SELECT backend_xid AS x FROM pg_catalog.pg_stat_activity"
        " WHERE backend_xid IS NOT NULL UNION ALL"
        " SELECT transaction FROM pg_catalog.pg_prepared_xacts) r"
        " WHERE age(r.x) > age(%s::text::xid)"
    )
    for step in range(3):
        cur.execute("CHECKPOINT")
        if step == 2:
            return
        # An xid of our own, assigned after the record: it is at least the record's
        # nextXid (a snapshot's xmax is latestCompletedXid + 1, which can be less).
        cur.execute("SELECT pg_current_xact_id()::text::bigint % 4294967296")
        (after,) = cur.fetchone()
        deadline = time.monotonic() + 60
        while True:
            cur.execute(older, (str(after),))
            if cur.fetchone()[0] == 0:
                break
            assert time.monotonic() < deadline, f"a transaction older than xid {after} runs on"
            time.sleep(0.2)


def run_cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    import os  # noqa: PLC0415  (only this helper needs it)

    full = {**os.environ, **(env or {})}
    return subprocess.run(
        [sys.executable, "-m", "service.app.cli", *args],
        capture_output=True,
        text=True,
        env=full,
        timeout=120,
        check=False,
    )


def test_help_lists_every_command() -> None:
    """`pgcdc --help` names each command and shows the first steps."""
    text = build_parser().format_help()
    for name in ("setup", "teardown", "run", "demo", "peek", "status", "replay", "waldump"):
        assert name in text
    assert "first steps" in text


def test_no_command_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    """Without a command pgcdc prints its help on stderr and exits 2 (a usage error, as
    argparse's own), in process and as the `pgcdc` executable."""
    assert main([]) == 2
    out, err = capsys.readouterr()
    assert out == "" and "COMMAND" in err and "first steps" in err
    proc = run_cli()
    assert proc.returncode == 2 and "COMMAND" in proc.stderr and proc.stdout == ""


def test_bad_setting_names_the_field() -> None:
    """A malformed environment setting exits 2 with the dotted field name."""
    proc = run_cli("status", env={"PGCDC_SOURCE__PORT": "70000"})
    assert proc.returncode == 2
    assert "source.port" in proc.stderr


def test_bad_yaml_value_names_the_field(tmp_path: Path) -> None:
    """A malformed YAML value exits 2 naming the field; a missing file names --config."""
    cfg = tmp_path / "c.yaml"
    cfg.write_text("decoding:\n  work_mem: lots\n")
    proc = run_cli("status", "--config", str(cfg))
    assert proc.returncode == 2
    assert "decoding.work_mem" in proc.stderr
    proc = run_cli("status", "--config", str(tmp_path / "missing.yaml"))
    assert proc.returncode == 2
    assert "--config" in proc.stderr


def test_unreachable_source_is_a_clear_error() -> None:
    """A source nobody listens on exits 3 (retryable) naming host and port, once it was
    retried for source.retry_budget_s (here 2 s) and not before."""
    began = time.monotonic()
    proc = run_cli(
        "status",
        env={
            "PGCDC_SOURCE__PORT": "1",
            "PGCDC_SOURCE__RETRY_BUDGET_S": "2",
            "PGCDC_KAFKA__BOOTSTRAP_SERVERS": "127.0.0.1:1",
        },
    )
    assert proc.returncode == 3
    assert "127.0.0.1:1" in proc.stderr and "source.retry_budget_s" in proc.stderr
    assert time.monotonic() - began >= 2


def test_bad_lsn_argument_is_refused() -> None:
    """An LSN argument that is not X/Y is refused by the parser."""
    proc = run_cli("waldump", "--dir", "/tmp", "--start", "nonsense")
    assert proc.returncode == 2
    assert "is not an LSN" in proc.stderr


def test_waldump_at_a_zero_filled_page_says_no_wal_was_written(tmp_path: Path) -> None:
    """A start in a pre-allocated (zero-filled) segment is "no WAL written yet" naming
    the LSN, not an unsupported version 0x0000."""
    (tmp_path / "000000010000000000000003").write_bytes(bytes(16 * 1024 * 1024))
    proc = run_cli("waldump", "--dir", str(tmp_path), "--start", "0/3000100")
    assert proc.returncode != 0
    assert "no WAL has been written" in proc.stderr
    assert "0/3000100" in proc.stderr
    assert "0x0000" not in proc.stderr


def test_replay_of_missing_directory_names_it() -> None:
    """replay on a directory that does not exist is a configuration error naming --dir."""
    proc = run_cli("replay", "--dir", "/nonexistent/wal", "--start", "0/0")
    assert proc.returncode == 2
    assert "--dir" in proc.stderr


@pytest.mark.integration
def test_setup_waldump_replay_teardown(pg15: dict[str, Any]) -> None:
    """setup installs the slot, waldump prints the records, replay decodes a commit."""
    db = f"cli_{uuid.uuid4().hex[:8]}"
    admin = psycopg2.connect(pg15["dsn"])
    admin.autocommit = True
    admin.cursor().execute(f"CREATE DATABASE {db}")
    env = {
        "PGCDC_SOURCE__PORT": str(pg15["port"]),
        "PGCDC_SOURCE__DBNAME": db,
        "PGCDC_SOURCE__SLOT": db,
        "PGCDC_DECODING__STATE_DIR": f"/tmp/{db}",
    }
    try:
        proc = run_cli("setup", env=env)
        assert proc.returncode == 0, proc.stderr
        assert '"slot_created": true' in proc.stdout
        conn = psycopg2.connect(pg15["dsn"].replace("dbname=postgres", f"dbname={db}"))
        conn.autocommit = True
        cur = conn.cursor()
        cur.execute("CREATE TABLE cli_t (id int PRIMARY KEY, v text)")
        cur.execute("SELECT pg_current_wal_lsn()")
        (start,) = cur.fetchone()
        checkpoint_until_consistent(cur)  # RUNNING_XACTS after start: replay becomes consistent
        cur.execute("INSERT INTO cli_t VALUES (1, 'via replay')")
        cur.execute("SELECT pg_current_wal_lsn()")
        (end,) = cur.fetchone()
        conn.close()
        wal = str(Path(pg15["pgdata"]) / "pg_wal")
        # Up to `end`, not a record count: other tests' records may come in between.
        proc = run_cli("waldump", "--dir", wal, "--start", start, "--end", end, env=env)
        assert proc.returncode == 0, proc.stderr
        assert "rmgr: Heap" in proc.stdout and "desc: INSERT" in proc.stdout
        proc = run_cli(
            "replay", "--dir", wal, "--start", start, "--end", end, "-o", "include-xids=0", env=env
        )
        assert proc.returncode == 0, proc.stderr
        assert proc.stdout.splitlines() == [
            "BEGIN",
            "table public.cli_t: INSERT: id[integer]:1 v[text]:'via replay'",
            "COMMIT",
        ], proc.stderr
        assert "replay_consistent" in proc.stderr
        proc = run_cli("teardown", env=env)
        assert proc.returncode == 0, proc.stderr
    finally:
        admin.cursor().execute(
            "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots "
            "WHERE slot_name = %s AND NOT active",
            (db,),
        )
        admin.cursor().execute(f"DROP DATABASE {db} WITH (FORCE)")
        admin.close()


@pytest.mark.integration
def test_replay_that_never_becomes_consistent_says_so(pg15: dict[str, Any]) -> None:
    """A range in which an older transaction stays open never becomes decodable: replay
    prints nothing and says why on stderr, naming the start LSN and the builder's state."""
    conn = psycopg2.connect(pg15["dsn"])
    conn.autocommit = True
    cur = conn.cursor()
    holder = psycopg2.connect(pg15["dsn"])  # an xid that runs through the whole range
    try:
        cur.execute("CREATE TABLE IF NOT EXISTS cli_never (id int)")
        cur.execute("SELECT pg_current_wal_lsn()")
        (start,) = cur.fetchone()
        holder.cursor().execute("SELECT pg_current_xact_id()")
        cur.execute("CHECKPOINT")
        cur.execute("INSERT INTO cli_never VALUES (1)")
        cur.execute("SELECT pg_current_wal_lsn()")
        (end,) = cur.fetchone()
        wal = str(Path(pg15["pgdata"]) / "pg_wal")
        env = {"PGCDC_SOURCE__PORT": str(pg15["port"])}
        proc = run_cli("replay", "--dir", wal, "--start", start, "--end", end, env=env)
        assert proc.returncode == 0, proc.stderr
        assert proc.stdout == ""
        assert "replay_never_consistent" in proc.stderr
        assert start in proc.stderr
        assert "BUILDING_SNAPSHOT" in proc.stderr
    finally:
        holder.rollback()
        holder.close()
        cur.execute("DROP TABLE IF EXISTS cli_never")
        conn.close()


@pytest.mark.integration
def test_peek_reports_the_decoding_error_and_drops_its_slot(
    pg16: dict[str, Any], tmp_path: Path
) -> None:
    """A row that `pgcdc peek` cannot decode (intarray's query_int has no decoder and
    decoding.unknown_types is `fail` by default) ends peek with exit 1 and the
    UnknownTypeError naming the column, not with the "slot in use" its cleanup used to
    raise over it while the walsender still held the slot (issue 27); and the peek slot
    is gone once peek has exited."""
    db = f"cli_peek_{uuid.uuid4().hex[:8]}"
    peek_slot = f"{db}_peek"
    admin = psycopg2.connect(pg16["dsn"])
    admin.autocommit = True
    admin.cursor().execute(f"CREATE DATABASE {db}")
    dsn = pg16["dsn"].replace("dbname=postgres", f"dbname={db}")
    env = {
        "PGCDC_SOURCE__PORT": str(pg16["port"]),
        "PGCDC_SOURCE__DBNAME": db,
        "PGCDC_SOURCE__SLOT": db,
        "PGCDC_DECODING__STATE_DIR": str(tmp_path),
        "PGCDC_LOG__FORMAT": "json",
    }
    conn = psycopg2.connect(dsn)
    conn.autocommit = True
    cur = conn.cursor()
    proc: subprocess.Popen[str] | None = None
    try:
        cur.execute("CREATE EXTENSION intarray")
        cur.execute("CREATE TABLE peek_t (id int PRIMARY KEY, q query_int, note text)")
        setup(dsn, db)
        proc = subprocess.Popen(
            [sys.executable, "-m", "service.app.cli", "peek", "--timeout", "60"],
            env={**os.environ, **env},
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        # Rows until peek stops: those before its consistent point are not decoded.
        deadline = time.monotonic() + 90
        key = 0
        while proc.poll() is None:
            assert time.monotonic() < deadline, "peek decoded undecodable rows for 90 s"
            key += 1
            cur.execute("INSERT INTO peek_t VALUES (%s, '1&(2|3)', 'n')", (key,))
            time.sleep(0.3)
        _, stderr = proc.communicate(timeout=30)
        cur.execute("SELECT count(*) FROM pg_replication_slots WHERE slot_name = %s", (peek_slot,))
        (left,) = cur.fetchone()
    finally:
        if proc is not None and proc.poll() is None:
            proc.kill()
            proc.communicate(timeout=30)
        conn.close()
        drop_slot_when_released(admin, peek_slot)
        drop_slot_when_released(admin, db)
        admin.cursor().execute(f"DROP DATABASE {db} WITH (FORCE)")
        admin.close()
    assert proc.returncode == 1, stderr[-3000:]
    assert "pgcdc: UnknownTypeError:" in stderr, stderr[-3000:]
    assert "public.peek_t.q query_int" in stderr, stderr[-3000:]
    assert "in use" not in stderr, stderr[-3000:]
    assert left == 0, f"peek left slot {peek_slot} behind:\n{stderr[-3000:]}"


@pytest.mark.integration
def test_peek_names_a_slot_it_cannot_drop(
    pg16: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """When peek's slot is still held after the wait (here by another replication
    connection), cleanup after an error only warns `peek_slot_left_behind` with the
    slot's name, so the error that stopped peek is the one reported; after a clean peek
    it is a SourceSetupError naming the slot and how to drop it."""
    monkeypatch.setattr(commands, "PEEK_SLOT_RELEASE_S", 0.5)
    slot = f"pgcdc_t_{uuid.uuid4().hex[:10]}"
    admin = psycopg2.connect(pg16["dsn"])
    admin.autocommit = True
    admin.cursor().execute("SELECT pg_create_physical_replication_slot(%s, true)", (slot,))
    try:
        with holding(pg16["dsn"], slot):
            with capture_logs() as logs:
                commands._drop_peek_slot(admin, slot, unwinding=True)
            assert [e["slot"] for e in logs if e["event"] == "peek_slot_left_behind"] == [slot]
            with pytest.raises(SourceSetupError) as info:
                commands._drop_peek_slot(admin, slot, unwinding=False)
            assert slot in str(info.value) and "pg_drop_replication_slot" in str(info.value)
    finally:
        drop_slot_when_released(admin, slot)
        admin.close()


@contextmanager
def _database(pg: dict[str, Any], prefix: str) -> Iterator[tuple[str, str, Any]]:
    """A fresh database, its name (also the slot's) and an admin connection; the slot
    (and the peek slot) and the database are dropped at the end."""
    db = f"{prefix}_{uuid.uuid4().hex[:8]}"
    admin = psycopg2.connect(pg["dsn"])
    admin.autocommit = True
    admin.cursor().execute(f"CREATE DATABASE {db}")
    try:
        yield db, pg["dsn"].replace("dbname=postgres", f"dbname={db}"), admin
    finally:
        drop_slot_when_released(admin, f"{db}_peek")
        drop_slot_when_released(admin, db)
        admin.cursor().execute(f"DROP DATABASE {db} WITH (FORCE)")
        admin.close()


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.mark.integration
def test_status_says_what_to_do(pg15: dict[str, Any], kafka: dict[str, Any]) -> None:
    """`pgcdc status` without the slot hints at `pgcdc setup`; with the slot but no worker
    on the metrics port it hints at `pgcdc run` and says why the counters are missing
    in words ("connection refused"), not urllib's `<urlopen error ...>`; stderr stays
    JSON with log.format json."""
    with _database(pg15, "cli_status") as (db, dsn, _):
        env = {
            "PGCDC_SOURCE__PORT": str(pg15["port"]),
            "PGCDC_SOURCE__DBNAME": db,
            "PGCDC_SOURCE__SLOT": db,
            "PGCDC_KAFKA__BOOTSTRAP_SERVERS": kafka["bootstrap"],
            "PGCDC_KAFKA__TOPIC_PREFIX": db,
            "PGCDC_METRICS__HOST": "127.0.0.1",
            "PGCDC_METRICS__PORT": str(_closed_port()),
            "PGCDC_LOG__FORMAT": "json",
        }
        proc = run_cli("status", env=env)
        assert proc.returncode == 0, proc.stderr
        out = json.loads(proc.stdout)
        assert out["slot"] is None
        (hint,) = out["hints"]
        assert f"no replication slot {db}" in hint and "`pgcdc setup`" in hint
        assert "<urlopen error" not in proc.stdout
        assert "(connection refused)" in out["counters"], out["counters"]
        assert all(json.loads(line) for line in proc.stderr.splitlines())

        setup(dsn, db)
        out = json.loads(run_cli("status", env=env).stdout)
        assert out["slot"]["name"] == db
        (hint,) = out["hints"]
        assert "no worker serves metrics" in hint and "`pgcdc run`" in hint


@pytest.mark.integration
def test_snapshot_signal_needs_a_slot_and_a_worker(pg15: dict[str, Any]) -> None:
    """`pgcdc snapshot TABLE` without the slot fails (exit 1) naming `pgcdc setup` and
    emits nothing; with the slot and no worker streaming from it, it fails naming
    --queue, and with --queue it emits the signal; while a walsender holds the slot (a
    running worker) it emits it without --queue."""
    with _database(pg15, "cli_signal") as (db, dsn, _):
        env = {
            "PGCDC_SOURCE__PORT": str(pg15["port"]),
            "PGCDC_SOURCE__DBNAME": db,
            "PGCDC_SOURCE__SLOT": db,
        }
        proc = run_cli("snapshot", "orders", env=env)
        assert proc.returncode == 1 and proc.stdout == "", proc.stderr
        assert f"no replication slot {db}" in proc.stderr and "`pgcdc setup`" in proc.stderr

        setup(dsn, db)
        proc = run_cli("snapshot", "orders", env=env)
        assert proc.returncode == 1 and proc.stdout == "", proc.stderr
        assert "no worker is streaming" in proc.stderr and "--queue" in proc.stderr

        proc = run_cli("snapshot", "orders", "--queue", env=env)
        assert proc.returncode == 0, proc.stderr
        queued = json.loads(proc.stdout)
        assert queued["signal"]["data"]["data-collections"] == ["public.orders"]
        assert queued["lsn"]

        with holding(dsn, db):
            proc = run_cli("snapshot", "--pause", env=env)
        assert proc.returncode == 0, proc.stderr
        assert json.loads(proc.stdout)["signal"] == {"type": "pause-snapshot"}


def _peek_lines(pg: dict[str, Any], db: str, dsn: str, *flags: str) -> list[str]:
    """`pgcdc peek --max-lines 3 FLAGS` while transactions that create a table (so the
    DDL capture writes its __pgcdc.ddl message) and insert into it commit every 0.3 s,
    until peek has printed its lines and exited."""
    env = {
        "PGCDC_SOURCE__PORT": str(pg["port"]),
        "PGCDC_SOURCE__DBNAME": db,
        "PGCDC_SOURCE__SLOT": db,
        "PGCDC_LOG__FORMAT": "json",
    }
    args = ["--timeout", "60", "--max-lines", "3", "-o", "skip-empty-xacts=1"]
    proc = subprocess.Popen(
        [sys.executable, "-m", "service.app.cli", "peek", *args, "-o", "include-xids=0", *flags],
        env={**os.environ, **env},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    conn = psycopg2.connect(dsn)
    cur = conn.cursor()
    deadline = time.monotonic() + 90
    n, tag = 0, "s" if flags else "h"
    try:
        while proc.poll() is None:
            assert time.monotonic() < deadline, "peek printed nothing for 90 s"
            n += 1
            cur.execute(f"CREATE TABLE pk_{tag}{n} (id int)")
            cur.execute(f"INSERT INTO pk_{tag}{n} VALUES ({n})")
            conn.commit()
            time.sleep(0.3)
        stdout, stderr = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate(timeout=30)
        conn.close()
    assert proc.returncode == 0, stderr[-3000:]
    return stdout.splitlines()


@pytest.mark.integration
def test_peek_hides_pgcdc_messages_unless_asked(pg15: dict[str, Any]) -> None:
    """peek prints a transaction that creates a table and inserts into it as BEGIN, the
    INSERT, COMMIT: without the DDL capture's 1 kB `__pgcdc.ddl` message, which the
    worker does not publish either; `--show-internal` prints it."""
    with _database(pg15, "cli_peekddl") as (db, dsn, _):
        setup(dsn, db)
        lines = _peek_lines(pg15, db, dsn)
        assert not [line for line in lines if "__pgcdc" in line], lines
        assert lines[0] == "BEGIN" and lines[2] == "COMMIT", lines
        assert re.fullmatch(r"table public\.pk_h(\d+): INSERT: id\[integer\]:\1", lines[1])

        lines = _peek_lines(pg15, db, dsn, "--show-internal")
        ddl = [line for line in lines if "prefix: __pgcdc.ddl" in line]
        assert ddl and ddl[0].startswith("message: transactional: 1 prefix: __pgcdc.ddl, sz: ")


@pytest.mark.integration
def test_peek_refuses_a_logical_slot_of_its_name_and_leaves_it(pg16: dict[str, Any]) -> None:
    """A logical slot already named as peek's is not peek's: peek exits 1 with a
    SlotTypeError naming it, and its cleanup (which drops a slot it has just created,
    however it is interrupted) leaves that slot where it was."""
    with _database(pg16, "cli_peeklogical") as (db, dsn, admin):
        conn = psycopg2.connect(dsn)
        conn.autocommit = True
        conn.cursor().execute(
            "SELECT pg_create_logical_replication_slot(%s, 'test_decoding')", (f"{db}_peek",)
        )
        conn.close()
        env = {
            "PGCDC_SOURCE__PORT": str(pg16["port"]),
            "PGCDC_SOURCE__DBNAME": db,
            "PGCDC_SOURCE__SLOT": db,
        }
        proc = subprocess.run(
            [sys.executable, "-m", "service.app.cli", "peek", "--timeout", "5"],
            env={**os.environ, **env},
            capture_output=True,
            check=False,
            text=True,
            timeout=60,
        )
        cur = admin.cursor()
        cur.execute(
            "SELECT slot_type FROM pg_replication_slots WHERE slot_name = %s", (f"{db}_peek",)
        )
        left = cur.fetchall()
    assert proc.returncode == 1, proc.stderr[-3000:]
    assert f"pgcdc: SlotTypeError: replication slot {db}_peek is a logical slot" in proc.stderr
    assert left == [("logical",)]
