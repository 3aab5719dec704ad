"""Table rewrites decoded after a restart, through `pgcdc run` into Kafka.

The issue's five workloads (CLUSTER, VACUUM FULL and TRUNCATE each followed by a
DROP; TRUNCATE twice; VACUUM FULL twice), each statement its own transaction, run while
the worker is stopped (SIGTERM, exit 0). The restarted worker must decode past them,
never stopping at a relfilenode no known table owns (it once exited 1 at the same LSN on
every restart), and its topics must hold exactly the changes test_decoding prints for
the same WAL through a logical slot in the same database: every insert, delete and
truncate, in order, per table.
"""

from __future__ import annotations

import re
from typing import Any

import pytest

from tests.integration.pipeline_kafka_support import parse_lsn, pipeline, read_all

pytestmark = pytest.mark.integration

TABLES = ("vcl", "vvf", "vtr", "vtr2", "vvf2")


def _workload(t: str) -> list[str]:
    five = f"INSERT INTO {t} SELECT g, 'row ' || g FROM generate_series(1, 5) g"
    after = f"INSERT INTO {t} VALUES (100, 'after')"
    return {
        "vcl": [five, f"CLUSTER {t} USING {t}_pkey", after, f"DROP TABLE {t}"],
        "vvf": [five, f"VACUUM FULL {t}", after, f"DROP TABLE {t}"],
        "vtr": [five, f"TRUNCATE {t}", after, f"DROP TABLE {t}"],
        "vtr2": [
            five,
            f"BEGIN; TRUNCATE {t}; INSERT INTO {t} VALUES (50, 'in'); COMMIT",
            after,
            f"TRUNCATE {t}",
            f"INSERT INTO {t} VALUES (101, 'last')",
        ],
        "vvf2": [five, f"VACUUM FULL {t}", after, f"VACUUM FULL {t}", f"DELETE FROM {t}"],
    }[t]


_LINE = re.compile(
    r"table public\.(\w+): (INSERT|UPDATE|DELETE|TRUNCATE):(?: id\[integer\]:(\d+))?"
)
_OPS = {"INSERT": "c", "UPDATE": "u", "DELETE": "d", "TRUNCATE": "t"}


def _text_changes(lines: list[str]) -> list[tuple[str, str, int | None]]:
    out = []
    for line in lines:
        m = _LINE.match(line)
        if m is not None:
            out.append((m[1], _OPS[m[2]], int(m[3]) if m[3] else None))
    return out


@pytest.mark.parametrize("version", ["pg15", "pg18"])
def test_rewrites_while_stopped_reach_kafka(
    request: pytest.FixtureRequest, kafka: dict[str, Any], registry: dict[str, Any], version: str
) -> None:
    """Stopped worker, the five rewrite workloads, restarted worker: it resumes, passes
    them, and every table's topic equals test_decoding's changes for that table."""
    pg = request.getfixturevalue(version)
    ddl = [f"CREATE TABLE {t} (id int PRIMARY KEY, data text)" for t in TABLES]
    with pipeline(pg, kafka, registry, f"rw{pg['version']}", ddl) as p:
        p.execute(f"SELECT pg_create_logical_replication_slot('{p.slot}_td', 'test_decoding')")
        try:
            worker = p.start_worker()
            worker.wait_ready(90)
            worker.wait_event(["snapshot_done"], 90)
            assert worker.terminate() == 0, worker.tail()
            for t in TABLES:
                for sql in _workload(t):
                    p.execute(sql)
            end = parse_lsn(p.query("SELECT pg_current_wal_insert_lsn()")[0][0])
            worker = p.start_worker()
            assert worker.wait_ready(90)["event"] == "worker_resumed", worker.tail()
            p.execute("SELECT pg_logical_emit_message(true, 'rw', 'end')")  # a commit past end
            p.wait_confirmed(end, 120, worker)
            assert worker.terminate() == 0, worker.tail()
            lines = [
                str(r[0])
                for r in p.query(
                    "SELECT data FROM pg_logical_slot_get_changes(%s, NULL, NULL,"
                    " 'include-xids', '0', 'skip-empty-xacts', '1')",
                    (f"{p.slot}_td",),
                )
            ]
        finally:
            p.execute(f"SELECT pg_drop_replication_slot('{p.slot}_td')")
        expected = _text_changes(lines)
        reads = read_all(p.settings(), [p.topic(t) for t in TABLES])
        published = []
        for r in reads:
            if r.value is None:
                continue  # a tombstone after a delete
            table = r.value["source"]["table"]
            row = r.value["after"] if r.value["op"] in ("c", "u") else r.value["before"]
            published.append((table, r.value["op"], row["id"] if row else None))
        for t in TABLES:
            want = [c for c in expected if c[0] == t]
            got = [c for c in published if c[0] == t]
            assert got == want, t
            assert (t, "c", 100) in got
