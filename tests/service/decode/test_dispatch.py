"""Unit tests of the decoder's dispatch and of the XLOG, Standby, LogicalMessage and Storage
rmgrs, on hand-built records; plus the per-version table's exhaustiveness."""

from __future__ import annotations

import struct

import pytest

import service.wal.rmgr as rt
from service.decode.dispatch import Decoder, decode, toplevel_assignment, xid_to_process
from service.decode.events import (
    CheckpointEvent,
    MessageEvent,
    ParameterChangeEvent,
    RunningXactsEvent,
    SmgrCreateEvent,
    SmgrTruncateEvent,
    SwitchEvent,
)
from service.errors import DecodeError, UnsupportedVersionError, WalLevelError
from service.wal.record import RelFileLocator
from tests.service.decode.decode_support import LSN, record


def _checkpoint() -> bytes:
    return (
        struct.pack(
            "<QIIB3xiQ7I4xqIII",
            0x01500028,  # redo
            1,
            1,
            True,
            2,
            (3 << 32) | 750,  # nextXid: epoch 3, xid 750
            24576,
            1,
            0,
            722,  # oldestXid
            1,
            1,
            1,
            1_700_000_000,
            0,
            0,
            749,  # oldestActiveXid
        )
        + b"\x00" * 4
    )


@pytest.mark.parametrize(("info", "online"), [(0x00, False), (0x10, True)])
def test_checkpoint(info: int, online: bool) -> None:
    """CHECKPOINT_SHUTDOWN/ONLINE: redo, timeline, 32-bit next xid, oldest xids."""
    [ev] = decode(record(0, info, _checkpoint(), xid=0), 15)
    assert isinstance(ev, CheckpointEvent)
    assert (ev.redo, ev.timeline, ev.next_xid, ev.oldest_xid, ev.oldest_active_xid) == (
        0x01500028,
        1,
        750,
        722,
        749,
    )
    assert ev.online is online
    with pytest.raises(DecodeError, match="checkpoint record truncated"):
        decode(record(0, info, _checkpoint()[:83]), 18)


def test_switch_and_irrelevant_xlog_records() -> None:
    """SWITCH is an event; FPI, NOOP, NEXTOID, ... are listed irrelevant."""
    assert decode(record(0, 0x40), 18) == [SwitchEvent(lsn=LSN)]
    for info in (0x20, 0x30, 0x50, 0x70, 0x80, 0x90, 0xA0, 0xB0, 0xD0):
        assert decode(record(0, info, b"\x00" * 8), 15) == []


def test_checkpoint_redo_exists_only_from_pg17() -> None:
    """XLOG 0xE0 is CHECKPOINT_REDO on PG17+, and not a PG15 or PG16 record type."""
    for version in (17, 18):
        assert decode(record(0, 0xE0, b"\x00" * 4), version) == []
    for version in (15, 16):
        with pytest.raises(DecodeError, match=rf"XLOG record type 0xE0 for PostgreSQL {version}"):
            decode(record(0, 0xE0, b"\x00" * 4), version)
    with pytest.raises(DecodeError, match="0xC0"):
        decode(record(0, 0xC0), 18)


def _param(wal_level: int) -> bytes:
    return struct.pack("<6i??2x", 100, 8, 10, 20, 64, wal_level, True, False)


def test_parameter_change() -> None:
    """PARAMETER_CHANGE at wal_level=logical is an event; below logical it is fatal."""
    [ev] = decode(record(0, 0x60, _param(2), xid=0), 18)
    assert ev == ParameterChangeEvent(
        lsn=LSN,
        wal_level=2,
        max_connections=100,
        max_wal_senders=10,
        max_prepared_xacts=20,
        wal_log_hints=True,
    )
    with pytest.raises(WalLevelError, match=r"replica.*lsn=0/150A3C8"):
        decode(record(0, 0x60, _param(1), xid=0), 15)
    with pytest.raises(DecodeError, match="parameter change record truncated"):
        decode(record(0, 0x60, _param(2)[:20]), 15)


def test_running_xacts() -> None:
    """RUNNING_XACTS: counts, xids then subxids, overflow flag, the three horizons."""
    main = struct.pack("<ii?3xIII", 2, 1, True, 760, 741, 759) + struct.pack("<III", 741, 755, 756)
    [ev] = decode(record(8, 0x10, main, xid=0), 18)
    assert ev == RunningXactsEvent(
        lsn=LSN,
        next_xid=760,
        oldest_running_xid=741,
        latest_completed_xid=759,
        xids=(741, 755),
        subxids=(756,),
        subxid_overflow=True,
    )
    with pytest.raises(DecodeError, match="needs 36"):
        decode(record(8, 0x10, main[:-4]), 18)


def test_standby_lock_and_invalidations_are_irrelevant() -> None:
    """Standby LOCK and INVALIDATIONS are for hot standby: no events; 0x30 is unknown."""
    assert decode(record(8, 0x00, b"\x00" * 16), 15) == []
    assert decode(record(8, 0x20, b"\x00" * 16), 18) == []
    with pytest.raises(DecodeError, match="Standby record type 0x30"):
        decode(record(8, 0x30), 18)


@pytest.mark.parametrize("transactional", [True, False])
def test_logical_message(transactional: bool) -> None:
    """MESSAGE: prefix without its NUL, payload bytes, the transactional flag, end LSN."""
    main = struct.pack("<I?3xQQ", 5, transactional, 7, 3) + b"pgcdc.\x00" + b"\x01\x02\x03"
    [ev] = decode(record(21, 0x00, main, origin=2), 15)
    assert isinstance(ev, MessageEvent)
    assert (ev.db_oid, ev.transactional, ev.prefix, ev.payload, ev.origin) == (
        5,
        transactional,
        "pgcdc.",
        b"\x01\x02\x03",
        2,
    )
    assert ev.end_lsn > ev.lsn
    with pytest.raises(DecodeError, match="logical message record truncated"):
        decode(record(21, 0x00, main[:-1]), 15)
    bad = struct.pack("<I?3xQQ", 5, transactional, 2, 0) + b"ab"
    with pytest.raises(DecodeError, match="NUL"):
        decode(record(21, 0x00, bad), 15)
    with pytest.raises(DecodeError, match="LogicalMessage record type 0x10"):
        decode(record(21, 0x10, main), 18)


def test_smgr_create_and_truncate() -> None:
    """Storage CREATE / TRUNCATE become relfilenode events."""
    [c] = decode(record(2, 0x10, struct.pack("<IIIi", 1663, 5, 16500, 0)), 18)
    assert c == SmgrCreateEvent(lsn=LSN, xid=735, locator=RelFileLocator(1663, 5, 16500), fork=0)
    [t] = decode(record(2, 0x20, struct.pack("<IIIIi", 3, 1663, 5, 16500, 7)), 15)
    assert isinstance(t, SmgrTruncateEvent) and (t.block, t.flags) == (3, 7)
    with pytest.raises(DecodeError, match="smgr create record truncated"):
        decode(record(2, 0x10, b"\x00" * 15), 15)
    with pytest.raises(DecodeError, match="Storage record type 0x30"):
        decode(record(2, 0x30), 15)


@pytest.mark.parametrize("rmid", [3, 4, 6, 7, 11, 15, 18, 19, 20, 128, 255])
def test_other_rmgrs_register_their_xid_only(rmid: int) -> None:
    """Other built-in and custom rmgrs yield nothing; their xid still goes to the driver."""
    rec = record(rmid, 0x10, b"\x00" * 8, toplevel_xid=730)
    assert decode(rec, 18) == []
    assert xid_to_process(rec) == 735
    assert toplevel_assignment(rec) == (730, 735)


def test_unknown_rmgr_and_version() -> None:
    """An rmgr id that is neither built-in nor custom, or an unknown version, is refused."""
    with pytest.raises(DecodeError, match="unknown resource manager id 22"):
        decode(record(22, 0x00), 18)
    with pytest.raises(UnsupportedVersionError):
        Decoder(14)


def test_xact_records_register_no_xid() -> None:
    """xact_decode does not call ReorderBufferProcessXid: xid_to_process is 0 for them."""
    rec = record(1, 0x00, struct.pack("<q", 1))
    assert xid_to_process(rec) == 0
    assert toplevel_assignment(rec) is None


@pytest.mark.parametrize("version", rt.SUPPORTED_VERSIONS)
def test_table_is_exhaustive_and_consistent(version: int) -> None:
    """Every op of each decoded rmgr is either in the table or raises; names for all entries."""
    tables = rt.info_tables(version)
    assert set(tables) == rt.DECODED_RMGRS
    for rmid, table in tables.items():
        mask = rt.OP_MASKS[rmid]
        for op in range(0, 0x100, 0x10):
            if op & ~mask:
                continue
            if op not in table:
                with pytest.raises(DecodeError, match="record type"):
                    decode(record(rmid, op, b"\x00" * 128), version)
            else:
                assert rt.identify(version, rmid, op) == table[op][0]


def test_identify_names_follow_pg_waldump() -> None:
    """Type names: +INIT variants, the PG17 prune split, xact's INVALIDATION."""
    assert rt.identify(15, rt.RM_HEAP_ID, 0x80) == "INSERT+INIT"
    assert rt.identify(18, rt.RM_HEAP2_ID, 0xD0) == "MULTI_INSERT+INIT"
    for version, names in {
        15: ("PRUNE", "VACUUM", "FREEZE_PAGE"),
        16: ("PRUNE", "VACUUM", "FREEZE_PAGE"),
        17: ("PRUNE_ON_ACCESS", "PRUNE_VACUUM_SCAN", "PRUNE_VACUUM_CLEANUP"),
        18: ("PRUNE_ON_ACCESS", "PRUNE_VACUUM_SCAN", "PRUNE_VACUUM_CLEANUP"),
    }.items():
        got = tuple(rt.identify(version, rt.RM_HEAP2_ID, info) for info in (0x10, 0x20, 0x30))
        assert got == names, version
    assert rt.identify(18, rt.RM_XACT_ID, 0x60 | 0x80) == "INVALIDATION"
    assert rt.identify(18, rt.RM_BTREE_ID, 0x00) is None
    assert rt.rmgr_name(130) == "custom130" and rt.rmgr_name(40) is None
