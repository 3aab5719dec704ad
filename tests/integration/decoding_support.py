"""Run one workload through a real test_decoding slot and through pgcdc, same server.

`compare(pg, setup_sql, workload, options)`:
1. creates a fresh database and installs pgcdc's DDL capture (`connectors.setup`);
2. runs `setup_sql` (tables, types) — before any slot, so neither side decodes it;
3. creates a test_decoding logical slot; its restart LSN is where pgcdc starts reading;
4. starts a pgcdc `Session` (catalog snapshot, text plugin) and forces RUNNING_XACTS;
5. runs `workload`: a list of steps, each a SQL string (on connection 0) or a tuple
   (connection index, SQL), so transactions can interleave across sessions;
6. reads the slot's changes with the same options and decodes pg_wal with pgcdc up to
   the LSN after the workload;
and returns both outputs as lists of lines.

The WAL is read straight from the cluster's pg_wal (the logical slot keeps it there).
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg2

from connectors.catalog import parse_lsn
from connectors.setup import setup, teardown
from connectors.walsource_dir import detect_segment_size, iter_wal_chunks
from service.pipeline import Session, SessionConfig, force_running_xacts
from service.text_plugin import TestDecodingPlugin

Step = str | tuple[int, str]


@dataclass
class Outcome:
    expected: list[str]  # test_decoding's lines
    actual: list[str]  # pgcdc's lines
    session: Session


def _dsn(pg: dict[str, Any], db: str) -> str:
    return f"host={pg['host']} port={pg['port']} user={pg['user']} dbname={db}"


def compare(
    pg: dict[str, Any],
    setup_sql: Sequence[str],
    workload: Sequence[Step],
    options: dict[str, str] | None = None,
    *,
    work_mem: int = 64 * 1024 * 1024,
    spill_dir: Path | None = None,
    connections: int = 2,
) -> Outcome:
    options = {"include-xids": "0", "skip-empty-xacts": "1", **(options or {})}
    db = f"cmp_{uuid.uuid4().hex[:10]}"
    admin = psycopg2.connect(_dsn(pg, "postgres"))
    admin.autocommit = True
    admin.cursor().execute(f"CREATE DATABASE {db}")
    dsn = _dsn(pg, db)
    phys = f"{db}_phys"
    setup(dsn, phys)
    conns = [psycopg2.connect(dsn) for _ in range(connections)]
    for c in conns:
        c.autocommit = True
    cur = conns[0].cursor()
    session: Session | None = None
    try:
        for sql in setup_sql:
            cur.execute(sql)
        cur.execute("SELECT lsn FROM pg_create_logical_replication_slot(%s, 'test_decoding')",
                    (db,))
        cur.execute("SELECT restart_lsn FROM pg_replication_slots WHERE slot_name = %s", (db,))
        start = parse_lsn(cur.fetchone()[0])
        lines: list[str] = []
        session = Session(
            SessionConfig(
                dsn=dsn,
                slot=db,
                work_mem=work_mem,
                spill_dir=spill_dir or Path("/tmp") / f"pgcdc-spill-{db}",
                plugin_options={**options, "server-version": str(pg["version"])},
            ),
            TestDecodingPlugin(),
            "text",
            lambda lsn, xid, data: lines.append(data),
            version=int(pg["version"]),
            start_lsn=start,
        )
        force_running_xacts(dsn, int(pg["version"]))
        for step in workload:
            index, sql = (0, step) if isinstance(step, str) else step
            conns[index].cursor().execute(sql)
        cur.execute("SELECT pg_current_wal_lsn()")
        end = parse_lsn(cur.fetchone()[0])
        args: list[str] = []
        for key, value in options.items():
            args += [key, value]
        placeholders = ", ".join(["%s"] * len(args))
        cur.execute(
            f"SELECT data FROM pg_logical_slot_get_changes(%s, NULL, NULL, {placeholders})",
            (db, *args),
        )
        expected = [row[0] for row in cur.fetchall()]
        wal = Path(pg["pgdata"]) / "pg_wal"
        session.pump(iter_wal_chunks(wal, start, segment_size=detect_segment_size(wal)),
                     until_lsn=end)
        return Outcome(expected, lines, session)
    finally:
        if session is not None:
            session.close()
        cur.execute("SELECT pg_drop_replication_slot(%s)", (db,))
        for c in conns:
            c.close()
        teardown(dsn, phys)
        admin.cursor().execute(f"DROP DATABASE {db} WITH (FORCE)")
        admin.close()
