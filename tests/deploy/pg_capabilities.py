"""Probe what one running PostgreSQL build can do, for the per-version test matrix.

`probe(info)` takes a service's `info()` dict (from `services.py env`) and returns, per
capability, either True or the exact error the server or tool gave. It works in a scratch
database that it drops afterwards, and its logical slot is temporary, so it leaves nothing
behind on a shared server: no setting is changed (lz4 is tried with a session-level SET).

    python tests/deploy/pg_capabilities.py [NAME...]   print the table for running services

Needs psycopg2 (the project's venv).
"""

from __future__ import annotations

import json
import os
import struct
import subprocess
import sys
from pathlib import Path
from typing import Any

import psycopg2
import psycopg2.extensions

REPO = Path(__file__).resolve().parents[2]
SERVICES = REPO / "deploy" / "local" / "services.py"

# Version magic at the start of every WAL page (XLOG_PAGE_MAGIC in xlog_internal.h).
WAL_MAGIC = {15: 0xD110, 16: 0xD113, 17: 0xD116, 18: 0xD118}
# CREATE EXTENSION order matters: earthdistance needs cube.
EXTENSIONS = (
    "pageinspect",
    "hstore",
    "ltree",
    "citext",
    "isn",
    "cube",
    "earthdistance",
    "seg",
    "vector",
    "postgis",
)
COLUMNS = (
    "version",
    "pg_waldump",
    "test_decoding",
    *EXTENSIONS,
    "lz4",
    "libxml",
    "data_checksums",
    "wal_magic",
)

Result = bool | str


def service_env(*names: str) -> dict[str, dict[str, Any]]:
    out = subprocess.run(
        [sys.executable, str(SERVICES), "env", *names], capture_output=True, text=True, check=True
    ).stdout
    env: dict[str, dict[str, Any]] = json.loads(out)
    return env


def _connect(info: dict[str, Any], dbname: str) -> psycopg2.extensions.connection:
    conn = psycopg2.connect(
        host=info["host"], port=info["port"], user=info["user"], dbname=dbname, connect_timeout=5
    )
    conn.autocommit = True
    return conn


def _error(exc: BaseException) -> str:
    return " ".join(str(exc).split())


def _try_sql(cur: psycopg2.extensions.cursor, *statements: str) -> Result:
    try:
        for sql in statements:
            cur.execute(sql)
    except psycopg2.Error as exc:
        return _error(exc)
    return True


def wal_segment(info: dict[str, Any], cur: psycopg2.extensions.cursor) -> Path:
    """The WAL segment file now being written (read from disk, not through the server)."""
    cur.execute("SELECT pg_walfile_name(pg_current_wal_lsn())")
    name = cur.fetchone()[0]
    return Path(info["pgdata"]) / "pg_wal" / name


def wal_magic(segment: Path) -> int:
    """xlp_magic: the first two bytes of the segment's first page, little-endian."""
    with segment.open("rb") as f:
        magic: int = struct.unpack("<H", f.read(2))[0]
    return magic


def _waldump(info: dict[str, Any], segment: Path) -> Result:
    tool = Path(info["bin"]) / "pg_waldump"
    if not tool.is_file():
        return f"no {tool}"
    proc = subprocess.run(
        [str(tool), "-n", "3", str(segment)], capture_output=True, text=True, check=False
    )
    records = [line for line in proc.stdout.splitlines() if line.startswith("rmgr:")]
    if proc.returncode != 0 or len(records) != 3:
        return f"exit {proc.returncode}: {_error(Exception(proc.stderr))}"
    return True


def _test_decoding(cur: psycopg2.extensions.cursor, db: str) -> Result:
    slot = f"{db}_slot"
    try:
        cur.execute("SELECT pg_create_logical_replication_slot(%s, 'test_decoding', true)", (slot,))
        cur.execute("CREATE TABLE probe_td (id int PRIMARY KEY, v text)")
        cur.execute("INSERT INTO probe_td VALUES (1, 'one')")
        cur.execute("SELECT data FROM pg_logical_slot_get_changes(%s, NULL, NULL)", (slot,))
        rows = [r[0] for r in cur.fetchall()]
    except psycopg2.Error as exc:
        return _error(exc)
    finally:
        # A temporary slot goes with the session too; dropping it now frees it at once.
        try:
            cur.execute(
                "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots"
                " WHERE slot_name = %s",
                (slot,),
            )
        except psycopg2.Error as exc:
            print(f"probe: could not drop slot {slot}: {_error(exc)}", file=sys.stderr)
    want = "table public.probe_td: INSERT: id[integer]:1 v[text]:'one'"
    return True if want in rows else f"changes were {rows}"


def _lz4(cur: psycopg2.extensions.cursor) -> Result:
    got = _try_sql(
        cur,
        "SET default_toast_compression = lz4",
        "CREATE TABLE probe_lz4 (v text)",
        "INSERT INTO probe_lz4 SELECT repeat('lz4 ', 10000)",
    )
    if got is not True:
        return got
    cur.execute("SELECT pg_column_compression(v) FROM probe_lz4")
    method = cur.fetchone()[0]
    return True if method == "lz4" else f"value compressed with {method}"


def probe(info: dict[str, Any]) -> dict[str, Result | int | str]:
    """Every capability in COLUMNS for the running server described by info."""
    db = f"pgcdc_probe_{os.getpid()}"
    admin = _connect(info, "postgres")
    out: dict[str, Result | int | str] = {}
    try:
        acur = admin.cursor()
        acur.execute("SHOW server_version")
        out["version"] = acur.fetchone()[0]
        acur.execute(f"DROP DATABASE IF EXISTS {db}")
        acur.execute(f"CREATE DATABASE {db}")
        try:
            conn = _connect(info, db)
            try:
                cur = conn.cursor()
                segment = wal_segment(info, cur)
                out["pg_waldump"] = _waldump(info, segment)
                out["test_decoding"] = _test_decoding(cur, db)
                for ext in EXTENSIONS:
                    out[ext] = _try_sql(cur, f"CREATE EXTENSION {ext}")
                out["vector"] = (
                    out["vector"]
                    if out["vector"] is not True
                    else _try_sql(
                        cur,
                        "CREATE TABLE probe_vec (v vector(3))",
                        "INSERT INTO probe_vec VALUES ('[1,2,3]')",
                    )
                )
                out["lz4"] = _lz4(cur)
                out["libxml"] = _try_sql(cur, "SELECT '<a/>'::xml")
                cur.execute("SHOW data_checksums")
                out["data_checksums"] = cur.fetchone()[0]
                out["wal_magic"] = f"0x{wal_magic(segment):04X}"
            finally:
                conn.close()
        finally:
            acur.execute(f"DROP DATABASE IF EXISTS {db} WITH (FORCE)")
    finally:
        admin.close()
    return out


def main(names: list[str]) -> int:
    env = service_env(*names) if names else service_env("pg15", "pg16", "pg17", "pg18", "pg18v")
    print("| " + " | ".join(("service", *COLUMNS)) + " |")
    print("|" + " --- |" * (len(COLUMNS) + 1))
    errors = []
    for name, info in env.items():
        got = probe(info)
        cells = []
        for col in COLUMNS:
            value = got[col]
            if isinstance(value, str) and col not in {"version", "data_checksums", "wal_magic"}:
                errors.append(f"{name} {col}: {value}")
                value = "no*"
            cells.append("yes" if value is True else str(value))
        print(f"| {name} | " + " | ".join(cells) + " |")
    print("\n" + "\n".join(f"* {e}" for e in errors))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
