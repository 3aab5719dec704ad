"""Smoke tests: each real PostgreSQL server streams raw WAL over a physical slot."""

from __future__ import annotations

import struct
import uuid
from typing import Any

import psycopg2
import psycopg2.extras
import pytest

from service.wal.format import FORMATS
from tests.fixtures.slots import drop_slot_when_released

pytestmark = pytest.mark.integration

WAL_PAGE_MAGIC = {fmt.version: magic for magic, fmt in FORMATS.items()}
XLOG_BLCKSZ = 8192


def _connect(info: dict[str, Any], **kwargs: Any) -> Any:
    return psycopg2.connect(
        host=info["host"], port=info["port"], user=info["user"], dbname=info["dbname"], **kwargs
    )


def test_server_is_configured_for_logical_decoding(pg: dict[str, Any]) -> None:
    """The test clusters run the expected major version with wal_level=logical."""
    with _connect(pg) as conn, conn.cursor() as cur:
        cur.execute("SHOW server_version_num")
        (version_num,) = cur.fetchone()
        cur.execute("SHOW wal_level")
        (wal_level,) = cur.fetchone()
    conn.close()
    assert int(version_num) // 10000 == pg["version"]
    assert wal_level == "logical"


def test_physical_slot_streams_raw_wal(pg: dict[str, Any]) -> None:
    """A physical slot created with RESERVE_WAL streams raw WAL pages from its restart LSN.

    The first message starts at the slot's restart LSN; when that is a page boundary the
    bytes begin with a page header whose magic names the server's major version.
    """
    slot = f"smoke_{uuid.uuid4().hex[:12]}"
    repl = _connect(pg, connection_factory=psycopg2.extras.PhysicalReplicationConnection)
    try:
        cur = repl.cursor()
        # psycopg2's create_replication_slot() does not reserve WAL for a physical slot;
        # the replication command does, which is what pgcdc relies on.
        cur.execute(f"CREATE_REPLICATION_SLOT {slot} PHYSICAL RESERVE_WAL")
        with _connect(pg) as conn, conn.cursor() as sql:
            sql.execute(
                "SELECT restart_lsn FROM pg_replication_slots WHERE slot_name = %s", (slot,)
            )
            (restart_lsn,) = sql.fetchone()
            # Produce some WAL so there is something past the restart point.
            sql.execute("CREATE TEMP TABLE smoke (i int)")
            sql.execute("INSERT INTO smoke SELECT generate_series(1, 1000)")
        conn.close()
        hi, lo = (int(part, 16) for part in restart_lsn.split("/"))
        start = ((hi << 32) | lo) & ~(XLOG_BLCKSZ - 1)  # the page holding the restart LSN
        cur.start_replication(
            slot_name=slot, slot_type=psycopg2.extras.REPLICATION_PHYSICAL, start_lsn=start
        )
        received = bytearray()
        first_start = None
        while len(received) < XLOG_BLCKSZ:
            msg = cur.read_message()
            if msg is None:
                continue
            if first_start is None:
                first_start = msg.data_start
            received += msg.payload
        assert first_start == start
        magic, _info = struct.unpack_from("<HH", received, 0)
        assert magic == WAL_PAGE_MAGIC[pg["version"]]
        (pageaddr,) = struct.unpack_from("<Q", received, 8)
        assert pageaddr == start
    finally:
        repl.close()
        with _connect(pg) as conn:
            drop_slot_when_released(conn, slot)  # the walsender exits after close()
        conn.close()
