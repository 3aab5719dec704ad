"""The services script's PostgreSQL builds and fault instances, against the real servers.

For each PostgreSQL build: the version it reports, `wal_level = logical`, the data-checksum
default, the version magic at the start of its WAL, and what it can do (test_decoding,
contrib and third-party extensions, lz4, libxml) as the table in BUILDS says, which is
what the differential suite is parametrised over. For the fault instances: they run on
ports of their own, apart from the shared services, and `services.py kill` + `up` brings
one back from the data it left, without touching any shared service.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
import urllib.request
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg2
import pytest
from confluent_kafka import Consumer, KafkaError, Producer

from tests.deploy.pg_capabilities import WAL_MAGIC, probe, wal_magic, wal_segment
from tests.fixtures.services import (
    SERVICES,
    ensure_service,
    kill_service,
    restart_service,
    stop_service,
)

pytestmark = pytest.mark.integration

CONTRIB = {"pageinspect", "hstore", "ltree", "citext", "isn", "cube", "earthdistance", "seg"}


@dataclass(frozen=True, slots=True)
class Build:
    version: str  # SHOW server_version, exactly, or its prefix ending in "." (Debian moves)
    port: int
    checksums: str  # SHOW data_checksums on a cluster made with initdb's defaults
    has: frozenset[str]  # capabilities of pg_capabilities.COLUMNS that work


BUILDS = {
    "pg15": Build(
        "15.",
        55415,
        "off",
        frozenset({"pg_waldump", "test_decoding", *CONTRIB, "postgis", "lz4", "libxml"}),
    ),
    "pg16": Build(
        "16.15", 55416, "off", frozenset({"pg_waldump", "test_decoding", *CONTRIB, "lz4", "libxml"})
    ),
    "pg16v": Build("16.2", 55420, "off", frozenset({"pg_waldump", "vector"})),
    "pg17": Build(
        "17.10", 55417, "off", frozenset({"pg_waldump", "test_decoding", *CONTRIB, "lz4", "libxml"})
    ),
    "pg18": Build(
        "18.6", 55418, "on", frozenset({"pg_waldump", "test_decoding", *CONTRIB, "vector"})
    ),
    "pg18v": Build("18.3", 55419, "on", frozenset({"pg_waldump", "vector"})),
}
# Shared services the fault tests must leave alone, and what the fault instances use.
SHARED = ("pg15", "pg18", "kafka", "registry")
FAULT_PORTS = {
    "fault-pg15": {56415},
    "fault-pg18": {56418},
    "fault-kafka": {29092, 29093, 29094, 29095},
    "fault-registry": {28081},
}
SHARED_PORTS = {55415, 55416, 55417, 55418, 55419, 55420, 19092, 19093, 18081}


def _connect(info: dict[str, Any]) -> psycopg2.extensions.connection:
    conn = psycopg2.connect(info["dsn"], connect_timeout=5)
    conn.autocommit = True
    return conn


def _scalar(conn: psycopg2.extensions.connection, sql: str) -> Any:
    with conn.cursor() as cur:
        cur.execute(sql)
        return cur.fetchone()[0]


@pytest.mark.parametrize("name", list(BUILDS))
def test_build_reports_its_version_wal_level_checksums_and_wal_magic(name: str) -> None:
    """Each PostgreSQL build answers on its own port with the expected server_version,
    runs with wal_level=logical and its initdb's checksum default, writes WAL whose first
    page carries its major's magic (15 0xD110, 16 0xD113, 17 0xD116, 18 0xD118), and
    ships a pg_waldump of the same version."""
    build, info = BUILDS[name], ensure_service(name)
    assert info["port"] == build.port
    conn = _connect(info)
    try:
        version = _scalar(conn, "SHOW server_version")
        if build.version.endswith("."):
            assert version.startswith(build.version), version
        else:
            assert version == build.version
        major = int(_scalar(conn, "SHOW server_version_num")) // 10000
        assert major == info["version"]
        assert _scalar(conn, "SHOW wal_level") == "logical"
        assert _scalar(conn, "SHOW data_checksums") == build.checksums
        with conn.cursor() as cur:
            segment = wal_segment(info, cur)
    finally:
        conn.close()
    assert wal_magic(segment) == WAL_MAGIC[major]
    waldump = subprocess.run(
        [str(Path(info["bin"]) / "pg_waldump"), "--version"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    # "pg_waldump (PostgreSQL) 15.18 (Debian 15.18-0+deb12u1)" against "15.18 (Debian ...)"
    assert waldump.split()[2] == version.split()[0]


@pytest.mark.parametrize("name", list(BUILDS))
def test_build_can_do_what_the_table_says(name: str) -> None:
    """Each build's capabilities, tried for real (a test_decoding slot that returns the
    insert, CREATE EXTENSION of each, lz4 TOAST compression, an xml value), are exactly
    the table's, and `info()["features"]` (judged from the installed files) agrees."""
    info = ensure_service(name)
    got = probe(info)
    works = {cap for cap, result in got.items() if result is True}
    failures = {cap: got[cap] for cap in BUILDS[name].has - works}
    assert not failures, f"{name} cannot do what BUILDS says: {failures}"
    assert works == BUILDS[name].has
    for feature, present in info["features"].items():
        if feature == "data_checksums":  # SHOW data_checksums: "on" or "off"
            assert present == (got[feature] == "on"), feature
        elif feature in got:
            assert present == (feature in works), feature


# --- fault instances -----------------------------------------------------------------


def _healthy() -> set[str]:
    out = subprocess.run(
        [sys.executable, str(SERVICES), "status"], capture_output=True, text=True, check=True
    ).stdout
    return {line.split()[0] for line in out.splitlines() if line.split()[1:2] == ["healthy"]}


def _pid(name: str) -> int | None:
    out = subprocess.run(
        [sys.executable, str(SERVICES), "env", name], capture_output=True, text=True, check=True
    ).stdout
    pid: int | None = json.loads(out)[name]["pid"]
    return pid


@pytest.fixture(scope="module")
def shared_pids() -> Iterator[dict[str, int | None]]:
    """The shared services' pids before the fault tests; after them, they must be the
    same. Fault instances this module started are stopped again at its end: only those
    its selected cases named (`_touched`), so that a lane running some of them never
    stops an instance another lane uses (fault-pg18, in the HA lane)."""
    before_healthy = _healthy()
    pids = {name: _pid(name) for name in SHARED}
    _touched.clear()
    yield pids
    stop_service(*(name for name in _touched if name not in before_healthy))


# The fault instances this module's cases ensured (shared_pids stops those it started).
_touched: set[str] = set()


def _ensure_fault(name: str) -> dict[str, Any]:
    _touched.add(name)
    return ensure_service(name)


@pytest.mark.parametrize("name", list(FAULT_PORTS), ids=lambda n: n.replace("-", "_"))
def test_fault_instance_runs_apart_from_the_shared_services(
    name: str, shared_pids: dict[str, int | None]
) -> None:
    """Each fault instance starts when named, on its own ports, with its own data
    directory and process, none shared with a default service. One instance per case:
    `.ci/run` selects by these ids, so that the fault lane never touches fault-pg18,
    which the HA lane uses meanwhile (a session stops the fault instances it touched when
    it ends); fault_pg18's case runs in the HA lane."""
    info = _ensure_fault(name)
    assert not FAULT_PORTS[name] & SHARED_PORTS
    assert info["pid"] is not None
    assert info["pid"] not in set(shared_pids.values())
    if name.startswith("fault-pg"):
        assert {info["port"]} == FAULT_PORTS[name]
        shared = ensure_service(name.removeprefix("fault-"))
        assert info["pgdata"] != shared["pgdata"]
        conn = _connect(info)
        try:
            assert _scalar(conn, "SHOW wal_level") == "logical"
        finally:
            conn.close()
    elif name == "fault-kafka":
        assert info["bootstrap"] == "127.0.0.1:29092"
        assert info["controller"] == "127.0.0.1:29093"
        assert info["data"] != ensure_service("kafka")["data"]
    else:
        assert info["url"] == "http://127.0.0.1:28081/apis/ccompat/v7"
        with urllib.request.urlopen(f"{info['url']}/subjects", timeout=5) as resp:
            assert resp.status == 200


def _pg_write(info: dict[str, Any], token: str) -> None:
    conn = _connect(info)
    try:
        with conn.cursor() as cur:
            cur.execute("CREATE TABLE IF NOT EXISTS fault_restart (token text)")
            cur.execute("INSERT INTO fault_restart VALUES (%s)", (token,))
    finally:
        conn.close()


def _pg_read(info: dict[str, Any], token: str) -> bool:
    conn = _connect(info)
    try:
        with conn.cursor() as cur:
            cur.execute("SELECT count(*) FROM fault_restart WHERE token = %s", (token,))
            return bool(cur.fetchone()[0] == 1)
    finally:
        conn.close()


def _kafka_write(info: dict[str, Any], token: str) -> None:
    producer = Producer(
        {"bootstrap.servers": info["bootstrap"], "transactional.id": f"pgcdc-fault-{token}"}
    )
    producer.init_transactions(30)
    producer.begin_transaction()
    producer.produce(f"pgcdc-fault-{token}", token.encode())
    producer.commit_transaction(30)


def _kafka_read(info: dict[str, Any], token: str) -> bool:
    consumer = Consumer(
        {
            "bootstrap.servers": info["bootstrap"],
            "group.id": f"g-{token}",
            "auto.offset.reset": "earliest",
            "isolation.level": "read_committed",
            "enable.partition.eof": True,
        }
    )
    try:
        consumer.subscribe([f"pgcdc-fault-{token}"])
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            msg = consumer.poll(1.0)
            if msg is None:
                continue
            if msg.error():
                # Until the restarted broker has the partition's leader, polls fail; retry.
                if msg.error().code() == KafkaError._PARTITION_EOF:
                    return False
                continue
            return bool(msg.value() == token.encode())
    finally:
        consumer.close()
    return False


def _registry_write(info: dict[str, Any], token: str) -> None:
    """Nothing to keep: the registry is in memory, so a restart starts it empty."""


def _registry_read(info: dict[str, Any], token: str) -> bool:
    with urllib.request.urlopen(f"{info['url']}/subjects", timeout=5) as resp:
        return bool(resp.status == 200)


CHECKS = {
    "fault-pg15": (_pg_write, _pg_read),
    "fault-kafka": (_kafka_write, _kafka_read),
    "fault-registry": (_registry_write, _registry_read),
}


@pytest.mark.parametrize("name", list(CHECKS))
def test_kill_then_up_restarts_a_fault_instance(
    name: str, shared_pids: dict[str, int | None]
) -> None:
    """`services.py kill NAME` SIGKILLs the instance and names its pid, after which it no
    longer answers; `up NAME` starts it again within a few seconds, under a new pid, with
    what was committed before the crash (a row, a transactional Kafka record) still
    there; the shared services keep their pids throughout."""
    write, read = CHECKS[name]
    info = _ensure_fault(name)
    token = uuid.uuid4().hex[:12]
    write(info, token)
    old = _pid(name)
    assert old is not None
    assert kill_service(name) == old
    assert _pid(name) is None
    assert name not in _healthy()
    began = time.monotonic()
    info = restart_service(name)
    took = time.monotonic() - began
    assert info["pid"] not in (None, old)
    assert took < 60, f"{name} took {took:.1f}s to restart"
    assert read(info, token)
    assert kill_service(name) is not None  # and once more, right after a restart
    restart_service(name)
    assert {n: _pid(n) for n in SHARED} == shared_pids
