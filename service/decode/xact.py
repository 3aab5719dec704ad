"""Transaction-record parsers for the decoder: XLOG_XACT_* main data into events.

Receives: an `XLogRecord` of rmgr Transaction and the PostgreSQL major version.
Hands on: one `CommitEvent`, `AbortEvent`, `PrepareEvent`, `AssignmentEvent` or
`InvalidationsEvent`, parsed as xactdesc.c's ParseCommitRecord / ParseAbortRecord /
ParsePrepareRecord lay the data out. Pure: no I/O, no state.

Layout facts (xact.h, PG15..PG18; all chunks are int32-aligned except the origin):

- commit/abort: `xact_time` (int64); `xinfo` (uint32) if XLOG_XACT_HAS_INFO is set in
  xl_info; then, in this order and each only if its xinfo bit is set: dbinfo (dbId,
  tsId), subxacts (n, xids), relfilelocators (n, 12-byte locators), dropped stats
  (n, items), invals (commit only; n, 16-byte messages), twophase xid, the GID as a
  NUL-terminated string (inside the twophase part, when XACT_XINFO_HAS_GID), and the
  origin (lsn, timestamp) stored unaligned right after.
- `xl_xact_stats_item` is 12 bytes (kind, dboid, objoid) up to PG17 and 16 bytes
  (kind, dboid, objid_lo, objid_hi) from PG18.
- prepare: a 72-byte `xl_xact_prepare`, then MAXALIGNed chunks: gid (gidlen bytes,
  NUL included), subxacts, commit rels, abort rels, commit stats, abort stats, invals.

Errors: a record shorter than its own counts say raises `DecodeError` with the LSN.
"""

from __future__ import annotations

import struct

from service._binary import I32, I64, U32
from service.decode.events import (
    AbortEvent,
    AssignmentEvent,
    CommitEvent,
    Invalidation,
    InvalidationsEvent,
    PrepareEvent,
)
from service.errors import DecodeError
from service.wal.record import RelFileLocator, XLogRecord

XACT_XINFO_HAS_DBINFO = 1 << 0
XACT_XINFO_HAS_SUBXACTS = 1 << 1
XACT_XINFO_HAS_RELFILELOCATORS = 1 << 2
XACT_XINFO_HAS_INVALS = 1 << 3
XACT_XINFO_HAS_TWOPHASE = 1 << 4
XACT_XINFO_HAS_ORIGIN = 1 << 5
XACT_XINFO_HAS_AE_LOCKS = 1 << 6
XACT_XINFO_HAS_GID = 1 << 7
XACT_XINFO_HAS_DROPPED_STATS = 1 << 8
XACT_COMPLETION_UPDATE_RELCACHE_FILE = 1 << 30

XLOG_XACT_HAS_INFO = 0x80

SIZE_OF_INVAL_MSG = 16  # sizeof(SharedInvalidationMessage)
SIZE_OF_RELFILELOCATOR = 12
SIZE_OF_XACT_PREPARE = 72  # sizeof(xl_xact_prepare), already MAXALIGNed
SHAREDINVALRELCACHE_ID = -2
SHAREDINVALSMGR_ID = -3

_U32X2 = struct.Struct("<II")
_ORIGIN = struct.Struct("<Qq")  # xl_xact_origin: origin_lsn, origin_timestamp
_LOCATOR = struct.Struct("<III")
_INVAL_HEAD = struct.Struct("<bxxxII")  # id, then two 4-byte fields at offsets 4 and 8
# xl_xact_prepare: magic, total_len, xid, database, prepared_at, owner, nsubxacts,
# ncommitrels, nabortrels, ncommitstats, nabortstats, ninvalmsgs, initfileinval, gidlen,
# origin_lsn, origin_timestamp
_PREPARE = struct.Struct("<IIIIqIiiiiii?xHQq")
assert _PREPARE.size == SIZE_OF_XACT_PREPARE


def stats_item_size(version: int) -> int:
    """sizeof(xl_xact_stats_item): the objid became 64-bit in PG18."""
    return 16 if version >= 18 else 12


def _maxalign(n: int) -> int:
    return (n + 7) & ~7


class _Cursor:
    """Bounds-checked reads over one record's main data."""

    __slots__ = ("data", "lsn", "pos", "what")

    def __init__(self, data: bytes, lsn: int, what: str, pos: int = 0) -> None:
        self.data = data
        self.lsn = lsn
        self.what = what
        self.pos = pos

    def need(self, n: int, part: str) -> int:
        """Reserve n bytes; return their start. DecodeError if the record is too short."""
        start = self.pos
        if n < 0 or start + n > len(self.data):
            raise DecodeError(
                f"{self.what} record truncated in {part}: needs {start + n} bytes of main "
                f"data, has {len(self.data)}",
                lsn=self.lsn,
            )
        self.pos = start + n
        return start

    def u32(self, part: str) -> int:
        value: int = U32.unpack_from(self.data, self.need(4, part))[0]
        return value

    def count(self, part: str) -> int:
        value: int = I32.unpack_from(self.data, self.need(4, part))[0]
        if value < 0:
            raise DecodeError(f"{self.what} record has negative {part} count", lsn=self.lsn)
        return value

    def u32_array(self, n: int, part: str) -> tuple[int, ...]:
        start = self.need(4 * n, part)
        return struct.unpack_from(f"<{n}I", self.data, start)

    def locators(self, n: int, part: str) -> tuple[RelFileLocator, ...]:
        start = self.need(SIZE_OF_RELFILELOCATOR * n, part)
        return tuple(
            RelFileLocator(*_LOCATOR.unpack_from(self.data, start + SIZE_OF_RELFILELOCATOR * i))
            for i in range(n)
        )

    def invals(self, n: int, part: str) -> tuple[Invalidation, ...]:
        start = self.need(SIZE_OF_INVAL_MSG * n, part)
        return parse_invalidations(self.data, start, n)

    def cstring(self, part: str) -> str:
        end = self.data.find(b"\x00", self.pos)
        if end < 0:
            raise DecodeError(f"{self.what} record: unterminated {part}", lsn=self.lsn)
        text = self.data[self.pos : end].decode("utf-8", errors="replace")
        self.pos = end + 1
        return text


def parse_invalidations(data: bytes, start: int, n: int) -> tuple[Invalidation, ...]:
    """`n` SharedInvalidationMessages from `data[start:]` (bounds already checked)."""
    out = []
    for i in range(n):
        pos = start + SIZE_OF_INVAL_MSG * i
        raw = data[pos : pos + SIZE_OF_INVAL_MSG]
        kind, first, second = _INVAL_HEAD.unpack_from(raw)
        if kind == SHAREDINVALSMGR_ID:
            # SharedInvalSmgrMsg: id, backend_hi, backend_lo, then spc/db/relNumber
            db_oid = U32.unpack_from(raw, 8)[0]
            rel_oid = 0
        else:
            # every other kind has dbId at offset 4; relcache has relId at offset 8
            db_oid = first
            rel_oid = second if kind == SHAREDINVALRELCACHE_ID else 0
        out.append(Invalidation(kind=kind, db_oid=db_oid, rel_oid=rel_oid, raw=raw))
    return tuple(out)


class _Parsed:
    """The common part of ParseCommitRecord / ParseAbortRecord."""

    __slots__ = (
        "db_oid",
        "gid",
        "invals",
        "origin_lsn",
        "origin_time",
        "rels",
        "subxids",
        "ts_oid",
        "twophase_xid",
        "xact_time",
        "xinfo",
    )

    def __init__(self) -> None:
        self.xact_time = 0
        self.xinfo = 0
        self.db_oid = 0
        self.ts_oid = 0
        self.subxids: tuple[int, ...] = ()
        self.rels: tuple[RelFileLocator, ...] = ()
        self.invals: tuple[Invalidation, ...] = ()
        self.twophase_xid: int | None = None
        self.gid: str | None = None
        self.origin_lsn: int | None = None
        self.origin_time: int | None = None


def _parse_commit_or_abort(record: XLogRecord, version: int, *, commit: bool) -> _Parsed:
    # as ParseCommitRecord / ParseAbortRecord (xactdesc.c)
    what = "commit" if commit else "abort"
    cur = _Cursor(record.main_data, record.lsn, what)
    p = _Parsed()
    p.xact_time = I64.unpack_from(cur.data, cur.need(8, "xact_time"))[0]
    if record.info & XLOG_XACT_HAS_INFO:
        p.xinfo = cur.u32("xinfo")
    xinfo = p.xinfo
    if xinfo & XACT_XINFO_HAS_DBINFO:
        p.db_oid, p.ts_oid = _U32X2.unpack_from(cur.data, cur.need(8, "dbinfo"))
    if xinfo & XACT_XINFO_HAS_SUBXACTS:
        p.subxids = cur.u32_array(cur.count("subxacts"), "subxacts")
    if xinfo & XACT_XINFO_HAS_RELFILELOCATORS:
        p.rels = cur.locators(cur.count("relfilelocators"), "relfilelocators")
    if xinfo & XACT_XINFO_HAS_DROPPED_STATS:
        cur.need(cur.count("dropped stats") * stats_item_size(version), "dropped stats")
    if commit and xinfo & XACT_XINFO_HAS_INVALS:
        p.invals = cur.invals(cur.count("invals"), "invals")
    if xinfo & XACT_XINFO_HAS_TWOPHASE:
        p.twophase_xid = cur.u32("twophase xid")
        if xinfo & XACT_XINFO_HAS_GID:
            p.gid = cur.cstring("gid")
    if xinfo & XACT_XINFO_HAS_ORIGIN:
        p.origin_lsn, p.origin_time = _ORIGIN.unpack_from(cur.data, cur.need(16, "origin"))
    return p


def decode_commit(record: XLogRecord, version: int, *, prepared: bool) -> CommitEvent:
    """XLOG_XACT_COMMIT / XLOG_XACT_COMMIT_PREPARED (xact_decode + ParseCommitRecord)."""
    p = _parse_commit_or_abort(record, version, commit=True)
    xid = p.twophase_xid if p.twophase_xid else record.xid
    return CommitEvent(
        lsn=record.lsn,
        end_lsn=record.end_lsn,
        xid=xid,
        commit_time=p.xact_time,
        xinfo=p.xinfo,
        db_oid=p.db_oid,
        ts_oid=p.ts_oid,
        subxids=p.subxids,
        dropped_rels=p.rels,
        invalidations=p.invals,
        twophase_xid=p.twophase_xid,
        gid=p.gid,
        origin_lsn=p.origin_lsn,
        origin_time=p.origin_time,
        origin=record.origin,
        prepared=prepared,
    )


def decode_abort(record: XLogRecord, version: int, *, prepared: bool) -> AbortEvent:
    """XLOG_XACT_ABORT / XLOG_XACT_ABORT_PREPARED (xact_decode + ParseAbortRecord)."""
    p = _parse_commit_or_abort(record, version, commit=False)
    xid = p.twophase_xid if p.twophase_xid else record.xid
    return AbortEvent(
        lsn=record.lsn,
        end_lsn=record.end_lsn,
        xid=xid,
        abort_time=p.xact_time,
        xinfo=p.xinfo,
        db_oid=p.db_oid,
        subxids=p.subxids,
        dropped_rels=p.rels,
        twophase_xid=p.twophase_xid,
        gid=p.gid,
        origin=record.origin,
        prepared=prepared,
        origin_lsn=p.origin_lsn,
        origin_time=p.origin_time,
    )


def decode_prepare(record: XLogRecord, version: int) -> PrepareEvent:
    """XLOG_XACT_PREPARE, laid out as ParsePrepareRecord reads it."""
    cur = _Cursor(record.main_data, record.lsn, "prepare")
    (
        _magic,
        _total_len,
        xid,
        database,
        prepared_at,
        _owner,
        nsubxacts,
        ncommitrels,
        nabortrels,
        ncommitstats,
        nabortstats,
        ninvalmsgs,
        _initfileinval,
        gidlen,
        origin_lsn,
        origin_time,
    ) = _PREPARE.unpack_from(cur.data, cur.need(SIZE_OF_XACT_PREPARE, "xl_xact_prepare"))
    for name, n in (
        ("subxacts", nsubxacts),
        ("commit rels", ncommitrels),
        ("abort rels", nabortrels),
        ("commit stats", ncommitstats),
        ("abort stats", nabortstats),
        ("invals", ninvalmsgs),
    ):
        if n < 0:
            raise DecodeError(f"prepare record has negative {name} count", lsn=record.lsn)
    gid_start = cur.need(_maxalign(gidlen), "gid")
    gid_bytes = cur.data[gid_start : gid_start + gidlen].split(b"\x00", 1)[0]
    sub_start = cur.need(_maxalign(4 * nsubxacts), "subxacts")
    subxids: tuple[int, ...] = struct.unpack_from(f"<{nsubxacts}I", cur.data, sub_start)
    commit_start = cur.need(_maxalign(SIZE_OF_RELFILELOCATOR * ncommitrels), "commit rels")
    dropped = tuple(
        RelFileLocator(*_LOCATOR.unpack_from(cur.data, commit_start + SIZE_OF_RELFILELOCATOR * i))
        for i in range(ncommitrels)
    )
    cur.need(_maxalign(SIZE_OF_RELFILELOCATOR * nabortrels), "abort rels")
    stat = stats_item_size(version)
    cur.need(_maxalign(stat * ncommitstats), "commit stats")
    cur.need(_maxalign(stat * nabortstats), "abort stats")
    inval_start = cur.need(SIZE_OF_INVAL_MSG * ninvalmsgs, "invals")
    return PrepareEvent(
        lsn=record.lsn,
        end_lsn=record.end_lsn,
        xid=xid,
        prepared_at=prepared_at,
        db_oid=database,
        gid=gid_bytes.decode("utf-8", errors="replace"),
        subxids=subxids,
        invalidations=parse_invalidations(cur.data, inval_start, ninvalmsgs),
        origin_lsn=origin_lsn,
        origin_time=origin_time,
        origin=record.origin,
        dropped_rels=dropped,
    )


def decode_assignment(record: XLogRecord) -> AssignmentEvent:
    """XLOG_XACT_ASSIGNMENT (`xl_xact_assignment`: xtop, nsubxacts, xsub[])."""
    cur = _Cursor(record.main_data, record.lsn, "assignment")
    xtop = cur.u32("xtop")
    subxids = cur.u32_array(cur.count("subxacts"), "subxacts")
    return AssignmentEvent(lsn=record.lsn, xid=xtop, subxids=subxids)


def decode_invalidations(record: XLogRecord) -> InvalidationsEvent:
    """XLOG_XACT_INVALIDATIONS (`xl_xact_invals`: nmsgs, msgs[])."""
    cur = _Cursor(record.main_data, record.lsn, "invalidations")
    invals = cur.invals(cur.count("invals"), "invals")
    return InvalidationsEvent(lsn=record.lsn, xid=record.xid, invalidations=invals)
