"""Unit tests of Transaction-record decoding (ParseCommitRecord / Abort / Prepare layouts)."""

from __future__ import annotations

import struct

import pytest

from service.decode.dispatch import decode
from service.decode.events import (
    AbortEvent,
    AssignmentEvent,
    CommitEvent,
    InvalidationsEvent,
    PrepareEvent,
)
from service.decode.xact import stats_item_size
from service.errors import DecodeError
from service.wal.record import RelFileLocator
from tests.service.decode.decode_support import inval, record

XACT = 1
HAS_INFO = 0x80


def _commit_body(version: int, *, gid: bytes | None = b"g1", origin: bool = True) -> bytes:
    """A commit with every xinfo part: dbinfo, 2 subxacts, 1 rel, 2 stats, 2 invals, ..."""
    xinfo = 0x01 | 0x02 | 0x04 | 0x08 | 0x10 | 0x40 | 0x100
    if gid is not None:
        xinfo |= 0x80
    if origin:
        xinfo |= 0x20
    body = struct.pack("<qI", 777_000_000, xinfo)
    body += struct.pack("<II", 5, 1663)
    body += struct.pack("<iII", 2, 736, 737)
    body += struct.pack("<iIII", 1, 1663, 5, 16400)
    body += struct.pack("<i", 2) + b"\xee" * (2 * stats_item_size(version))
    body += struct.pack("<i", 2) + inval(-2, 5, 16384) + inval(7, 5, 0xDEADBEEF)
    body += struct.pack("<I", 740)
    if gid is not None:
        body += gid + b"\x00"
    if origin:
        body += struct.pack("<Qq", 0x0A000000, 555)  # unaligned, right after the gid
    return body


@pytest.mark.parametrize("version", [15, 18])
def test_commit_prepared_full_xinfo(version: int) -> None:
    """COMMIT_PREPARED with every xinfo part, including dropped stats of the version's size."""
    rec = record(XACT, 0x30 | HAS_INFO, _commit_body(version), xid=0, origin=3)
    [ev] = decode(rec, version)
    assert isinstance(ev, CommitEvent)
    assert ev.prepared and ev.xid == 740 and ev.twophase_xid == 740 and ev.gid == "g1"
    assert (ev.db_oid, ev.ts_oid, ev.subxids) == (5, 1663, (736, 737))
    assert ev.dropped_rels == (RelFileLocator(1663, 5, 16400),)
    assert [(i.kind, i.db_oid, i.rel_oid) for i in ev.invalidations] == [(-2, 5, 16384), (7, 5, 0)]
    assert (ev.origin_lsn, ev.origin_time, ev.origin) == (0x0A000000, 555, 3)
    assert ev.commit_time == 777_000_000 and ev.xinfo & 0x40  # AE_LOCKS passed through


def test_dropped_stats_size_differs_between_versions() -> None:
    """A PG15 commit read with PG18's stats item size would misplace the invals: it fails."""
    rec = record(XACT, 0x30 | HAS_INFO, _commit_body(15, origin=False), xid=0)
    [ok] = decode(rec, 15)
    assert isinstance(ok, CommitEvent) and ok.gid == "g1"
    with pytest.raises(DecodeError):
        decode(rec, 18)


def test_plain_commit_without_xinfo() -> None:
    """A commit without XLOG_XACT_HAS_INFO is just xact_time; xid is the record's."""
    [ev] = decode(record(XACT, 0x00, struct.pack("<q", 42)), 15)
    assert isinstance(ev, CommitEvent)
    assert (ev.xid, ev.commit_time, ev.xinfo, ev.subxids, ev.gid) == (735, 42, 0, (), None)
    assert not ev.prepared and ev.twophase_xid is None


def test_commit_truncations() -> None:
    """Counts that overrun the main data, or a GID without NUL, raise DecodeError with LSN."""
    with pytest.raises(DecodeError, match="xact_time"):
        decode(record(XACT, 0x00, b"\x00" * 7), 15)
    body = struct.pack("<qI", 1, 0x02) + struct.pack("<iI", 3, 736)
    with pytest.raises(DecodeError, match=r"subxacts.*0/150A3C8"):
        decode(record(XACT, HAS_INFO, body), 15)
    body = struct.pack("<qI", 1, 0x10 | 0x80) + struct.pack("<I", 9) + b"nonul"
    with pytest.raises(DecodeError, match="unterminated gid"):
        decode(record(XACT, HAS_INFO, body), 18)
    body = struct.pack("<qI", 1, 0x02) + struct.pack("<i", -1)
    with pytest.raises(DecodeError, match="negative"):
        decode(record(XACT, HAS_INFO, body), 18)


def test_abort_of_subxact_and_abort_prepared() -> None:
    """ABORT (ROLLBACK TO) uses the record's xid; ABORT_PREPARED the twophase xid and gid."""
    body = struct.pack("<qI", 9, 0x02) + struct.pack("<iI", 1, 800)
    [ev] = decode(record(XACT, 0x20 | HAS_INFO, body, xid=799), 15)
    assert isinstance(ev, AbortEvent)
    assert (ev.xid, ev.subxids, ev.prepared) == (799, (800,), False)
    body = struct.pack("<qI", 9, 0x10 | 0x80 | 0x01) + struct.pack("<IIi", 5, 1663, 801)
    body += b"gid-x\x00"
    [ab] = decode(record(XACT, 0x40 | HAS_INFO, body, xid=0), 18)
    assert isinstance(ab, AbortEvent)
    assert (ab.xid, ab.gid, ab.db_oid, ab.prepared) == (801, "gid-x", 5, True)


def _prepare(version: int, *, gid: bytes = b"pgcdc_gid\x00") -> bytes:
    stat = stats_item_size(version)
    head = struct.pack(
        "<IIIIqIiiiiii?xHQq",
        0x57F94534,
        0,
        900,
        5,
        123456,
        10,
        2,  # nsubxacts
        1,  # ncommitrels
        1,  # nabortrels
        1,  # ncommitstats
        1,  # nabortstats
        1,  # ninvalmsgs
        False,
        len(gid),
        0x0B000000,
        99,
    )

    def pad(b: bytes) -> bytes:
        return b + b"\x00" * (-len(b) % 8)

    return (
        head
        + pad(gid)
        + pad(struct.pack("<II", 901, 902))
        + pad(b"\x01" * 12)
        + pad(b"\x02" * 12)
        + pad(b"\x03" * stat)
        + pad(b"\x04" * stat)
        + inval(-1, 5, 1259)
    )


@pytest.mark.parametrize("version", [15, 18])
def test_prepare(version: int) -> None:
    """PREPARE: xl_xact_prepare header, then MAXALIGNed gid/subxacts/rels/stats/invals."""
    [ev] = decode(record(XACT, 0x10, _prepare(version), xid=900), version)
    assert isinstance(ev, PrepareEvent)
    assert (ev.xid, ev.db_oid, ev.gid, ev.subxids) == (900, 5, "pgcdc_gid", (901, 902))
    assert (ev.prepared_at, ev.origin_lsn, ev.origin_time) == (123456, 0x0B000000, 99)
    assert [(i.kind, i.db_oid) for i in ev.invalidations] == [(-1, 5)]
    with pytest.raises(DecodeError, match="invals"):
        decode(record(XACT, 0x10, _prepare(version)[:-1]), version)
    with pytest.raises(DecodeError, match="xl_xact_prepare"):
        decode(record(XACT, 0x10, b"\x00" * 71), version)


def test_assignment_and_invalidations() -> None:
    """ASSIGNMENT names the top xid and subxids; INVALIDATIONS parses the messages."""
    [asg] = decode(record(XACT, 0x50, struct.pack("<IiII", 735, 2, 736, 737)), 15)
    assert isinstance(asg, AssignmentEvent)
    assert (asg.xid, asg.subxids) == (735, (736, 737))
    main = struct.pack("<i", 2) + inval(-3, 0, 0) + inval(-5, 5, 2610)
    main = main[:4] + struct.pack("<bbHIII", -3, 0, 0, 1663, 5, 16400) + main[20:]
    [inv] = decode(record(XACT, 0x60, main), 18)
    assert isinstance(inv, InvalidationsEvent)
    assert [(i.kind, i.db_oid, i.rel_oid) for i in inv.invalidations] == [(-3, 5, 0), (-5, 5, 0)]
    with pytest.raises(DecodeError, match="invals"):
        decode(record(XACT, 0x60, main[:-1]), 18)


def test_unknown_xact_op_is_an_error() -> None:
    """0x70 is a free XACT opcode: DecodeError naming the LSN, never a skip."""
    with pytest.raises(DecodeError, match=r"Transaction record type 0x70.*lsn=0/150A3C8"):
        decode(record(XACT, 0x70, b""), 18)
