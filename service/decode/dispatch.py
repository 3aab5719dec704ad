"""The decoder: rmgr dispatch from `XLogRecord` to typed events (decode.c).

Receives: `XLogRecord` values from the XLog reader, in LSN order, and the PostgreSQL
major version of the WAL they came from.
Hands on: for each record, a list of zero or more `service.decode.events` events in the order
decode.c would hand them to the snapshot builder and the reorder buffer. A
multi-insert yields one `HeapChange` per tuple, in the record's order.

What the caller must do besides (as LogicalDecodingProcessRecord does for every
record, decodable or not):

1. if `toplevel_assignment(record)` is not None, assign the subxact to its parent
   (ReorderBufferAssignChild);
2. pass `xid_to_process(record)` to the reorder buffer (ReorderBufferProcessXid); it
   is 0 (InvalidTransactionId) for Transaction records, which xact_decode does not
   register, and for records without an xid.

State: none. `Decoder` only holds the version's tables; `decode()` keeps one per
version. Snapshot-state gating (SNAPBUILD_FULL_SNAPSHOT, database and origin filters,
fast-forward) is the caller's: the decoder reports everything it can parse.

Guarantees and errors:

- Dispatch is exhaustive. In the seven rmgrs decoded here (XLOG, Transaction,
  Storage, Standby, Heap2, Heap, LogicalMessage) every info value of the version's
  table (`service.wal.rmgr`) is either decoded or explicitly irrelevant; a value
  not in the table raises `DecodeError` naming the LSN. Records of the other built-in
  rmgrs, and of custom rmgrs (ids 128..255), yield no events; an rmgr id that is
  neither raises `DecodeError`.
- Main data shorter than its struct, or counts that overrun it, raise `DecodeError`
  with the LSN. Nothing is guessed.
- XLOG_PARAMETER_CHANGE that sets wal_level below logical raises `WalLevelError`.
"""

from __future__ import annotations

import struct
from collections.abc import Callable

import service.wal.rmgr as rt
from service.decode import heap, xact
from service.decode.events import (
    CheckpointEvent,
    Event,
    MessageEvent,
    ParameterChangeEvent,
    PredecodedRecord,
    RunningXactsEvent,
    SmgrCreateEvent,
    SmgrTruncateEvent,
    SwitchEvent,
)
from service.errors import DecodeError, WalLevelError
from service.wal.record import RelFileLocator, XLogRecord

WAL_LEVEL_LOGICAL = 2

# bound once for the per-record hot path in Decoder.decode
_RM_HEAP_ID = rt.RM_HEAP_ID
_XLOG_HEAP_OPMASK = rt.XLOG_HEAP_OPMASK
_decode_insert = heap.decode_insert

# CheckPoint (pg_control.h), x86-64 layout. PG17 put wal_level into what was padding
# after fullPageWrites, so every later offset is the same in PG15..18:
# redo, ThisTimeLineID, PrevTimeLineID, fullPageWrites, wal_level, nextXid (64-bit),
# nextOid, nextMulti, nextMultiOffset, oldestXid, oldestXidDB, oldestMulti,
# oldestMultiDB, time, oldestCommitTsXid, newestCommitTsXid, oldestActiveXid
_CHECKPOINT = struct.Struct("<QIIB3xiQ7I4xqIII")
# xl_parameter_change: MaxConnections, max_worker_processes, max_wal_senders,
# max_prepared_xacts, max_locks_per_xact, wal_level, wal_log_hints, track_commit_ts
_PARAMETER_CHANGE = struct.Struct("<6i??")
# xl_running_xacts: xcnt, subxcnt, subxid_overflow, nextXid, oldestRunningXid,
# latestCompletedXid, then xids[xcnt + subxcnt]
_RUNNING_XACTS = struct.Struct("<ii?3xIII")
# xl_logical_message: dbId, transactional, prefix_size, message_size (Size = 8 bytes)
_LOGICAL_MESSAGE = struct.Struct("<I?3xQQ")
_SMGR_CREATE = struct.Struct("<IIIi")  # rlocator, forkNum
_SMGR_TRUNCATE = struct.Struct("<IIIIi")  # blkno, rlocator, flags

Handler = Callable[[XLogRecord], list[Event]]


def _short(record: XLogRecord, size: int, what: str) -> DecodeError:
    return DecodeError(
        f"{what} record truncated: main data has {len(record.main_data)} bytes, needs {size}",
        lsn=record.lsn,
    )


def toplevel_assignment(record: XLogRecord | PredecodedRecord) -> tuple[int, int] | None:
    """(top-level xid, subxact xid) when the record carries block 252, else None.

    LogicalDecodingProcessRecord calls ReorderBufferAssignChild with these for every
    record whose XLogRecGetTopXid is valid, before any rmgr dispatch.
    """
    top = record.toplevel_xid
    if top:
        return top, record.xid
    return None


def xid_to_process(record: XLogRecord | PredecodedRecord) -> int:
    """The xid to pass to ReorderBufferProcessXid for this record (0: none).

    Every rmgr's decode routine (or the default path) registers the record's xid,
    except xact_decode: commit/abort/prepare records name their transaction themselves.
    """
    if record.rmid == rt.RM_XACT_ID:
        return 0
    return record.xid


class Decoder:
    """Stateless rmgr dispatch for one PostgreSQL major version."""

    __slots__ = ("_dispatch", "_tables", "inert_ops", "version", "without_decode")

    def __init__(self, version: int) -> None:
        self.version = version
        self._tables = rt.info_tables(version)
        self._dispatch: dict[int, Handler] = {
            rt.RM_XLOG_ID: self._xlog,
            rt.RM_XACT_ID: self._xact,
            rt.RM_SMGR_ID: self._smgr,
            rt.RM_STANDBY_ID: self._standby,
            rt.RM_HEAP2_ID: self._heap2,
            rt.RM_HEAP_ID: self._heap,
            rt.RM_LOGICALMSG_ID: self._logicalmsg,
        }
        # The known rmgrs without rm_decode (btree, sequences, ...): `decode` gives no
        # events for their records, so the driver may skip the call (issue 12: they are
        # about half the records of an indexed table's inserts).
        self.without_decode = frozenset(set(rt.RMGR_NAMES) - set(self._dispatch))
        # The XLOG, Heap and Heap2 record types xlog_decode, heap_decode and
        # heap2_decode do nothing with (IRRELEVANT: only their xid is registered; FPI
        # and FPI_FOR_HINT among them), as (rmid, op): the native reader lets them sit
        # inside a run (`service.decode.native_heap.predecode`).
        self.inert_ops = frozenset(
            (rmid, op)
            for rmid in (rt.RM_XLOG_ID, rt.RM_HEAP_ID, rt.RM_HEAP2_ID)
            for op, (_, relevance) in self._tables[rmid].items()
            if relevance is rt.Relevance.IRRELEVANT
        )

    def decode(self, record: XLogRecord) -> list[Event]:
        """Events for one record, as LogicalDecodingProcessRecord dispatches it."""
        rmid = record.rmid
        if rmid == _RM_HEAP_ID and not record.info & _XLOG_HEAP_OPMASK:
            # hot path: XLOG_HEAP_INSERT (+INIT) is DECODED in every version's table
            return _decode_insert(record)
        handler = self._dispatch.get(rmid)
        if handler is not None:
            return handler(record)
        if rt.rmgr_name(rmid) is not None:
            return []  # no rm_decode: the caller registers the xid, nothing else
        raise DecodeError(f"unknown resource manager id {rmid}", lsn=record.lsn)

    # --- table lookup --------------------------------------------------------------

    def _relevance(self, record: XLogRecord, rmid: int, op: int) -> rt.Relevance:
        entry = self._tables[rmid].get(op)
        if entry is None:
            raise DecodeError(
                f"unexpected {rt.RMGR_NAMES[rmid]} record type 0x{op:02X} for "
                f"PostgreSQL {self.version} (xl_info 0x{record.info:02X})",
                lsn=record.lsn,
            )
        return entry[1]

    def _not_decoded(self, record: XLogRecord, op: int) -> DecodeError:
        return DecodeError(
            f"{rt.RMGR_NAMES[record.rmid]} record type 0x{op:02X} is marked decoded "
            "but has no decoder",
            lsn=record.lsn,
        )

    # --- rmgrs ---------------------------------------------------------------------

    def _heap(self, record: XLogRecord) -> list[Event]:
        # as heap_decode
        op = record.info & rt.XLOG_HEAP_OPMASK
        if self._relevance(record, rt.RM_HEAP_ID, op) is rt.Relevance.IRRELEVANT:
            return []
        match op:
            case rt.XLOG_HEAP_INSERT:
                return heap.decode_insert(record)
            case rt.XLOG_HEAP_UPDATE | rt.XLOG_HEAP_HOT_UPDATE:
                return heap.decode_update(record)
            case rt.XLOG_HEAP_DELETE:
                return heap.decode_delete(record)
            case rt.XLOG_HEAP_TRUNCATE:
                return heap.decode_truncate(record)
            case rt.XLOG_HEAP_CONFIRM:
                return heap.decode_confirm(record)
            case rt.XLOG_HEAP_INPLACE:
                return heap.decode_inplace(record)
            case _:
                raise self._not_decoded(record, op)

    def _heap2(self, record: XLogRecord) -> list[Event]:
        # as heap2_decode
        op = record.info & rt.XLOG_HEAP_OPMASK
        if self._relevance(record, rt.RM_HEAP2_ID, op) is rt.Relevance.IRRELEVANT:
            return []
        match op:
            case rt.XLOG_HEAP2_MULTI_INSERT:
                return heap.decode_multi_insert(record)
            case rt.XLOG_HEAP2_NEW_CID:
                return heap.decode_new_cid(record)
            case _:
                raise self._not_decoded(record, op)

    def _xact(self, record: XLogRecord) -> list[Event]:
        # as xact_decode
        op = record.info & rt.XLOG_XACT_OPMASK
        if self._relevance(record, rt.RM_XACT_ID, op) is rt.Relevance.IRRELEVANT:
            return []
        match op:
            case rt.XLOG_XACT_COMMIT:
                return [xact.decode_commit(record, self.version, prepared=False)]
            case rt.XLOG_XACT_COMMIT_PREPARED:
                return [xact.decode_commit(record, self.version, prepared=True)]
            case rt.XLOG_XACT_ABORT:
                return [xact.decode_abort(record, self.version, prepared=False)]
            case rt.XLOG_XACT_ABORT_PREPARED:
                return [xact.decode_abort(record, self.version, prepared=True)]
            case rt.XLOG_XACT_PREPARE:
                return [xact.decode_prepare(record, self.version)]
            case rt.XLOG_XACT_ASSIGNMENT:
                return [xact.decode_assignment(record)]
            case rt.XLOG_XACT_INVALIDATIONS:
                return [xact.decode_invalidations(record)]
            case _:
                raise self._not_decoded(record, op)

    def _xlog(self, record: XLogRecord) -> list[Event]:
        # as xlog_decode
        op = record.info & 0xF0
        if self._relevance(record, rt.RM_XLOG_ID, op) is rt.Relevance.IRRELEVANT:
            return []
        match op:
            case rt.XLOG_CHECKPOINT_SHUTDOWN | rt.XLOG_CHECKPOINT_ONLINE:
                return [self._checkpoint(record, online=op == rt.XLOG_CHECKPOINT_ONLINE)]
            case rt.XLOG_SWITCH:
                return [SwitchEvent(lsn=record.lsn)]
            case rt.XLOG_PARAMETER_CHANGE:
                return [self._parameter_change(record)]
            case _:
                raise self._not_decoded(record, op)

    def _checkpoint(self, record: XLogRecord, *, online: bool) -> CheckpointEvent:
        main = record.main_data
        if len(main) < _CHECKPOINT.size:
            raise _short(record, _CHECKPOINT.size, "checkpoint")
        f = _CHECKPOINT.unpack_from(main)
        return CheckpointEvent(
            lsn=record.lsn,
            redo=f[0],
            timeline=f[1],
            next_xid=f[5] & 0xFFFFFFFF,
            oldest_xid=f[9],
            oldest_active_xid=f[16],
            online=online,
        )

    def _parameter_change(self, record: XLogRecord) -> ParameterChangeEvent:
        main = record.main_data
        if len(main) < _PARAMETER_CHANGE.size:
            raise _short(record, _PARAMETER_CHANGE.size, "parameter change")
        max_conn, _workers, senders, prepared, _locks, wal_level, hints, _cts = (
            _PARAMETER_CHANGE.unpack_from(main)
        )
        if wal_level < WAL_LEVEL_LOGICAL:
            raise WalLevelError(
                f"wal_level was lowered to {_WAL_LEVELS.get(wal_level, wal_level)}; "
                "logical decoding needs wal_level=logical",
                lsn=record.lsn,
            )
        return ParameterChangeEvent(
            lsn=record.lsn,
            wal_level=wal_level,
            max_connections=max_conn,
            max_wal_senders=senders,
            max_prepared_xacts=prepared,
            wal_log_hints=hints,
        )

    def _standby(self, record: XLogRecord) -> list[Event]:
        # as standby_decode
        op = record.info & 0xF0
        if self._relevance(record, rt.RM_STANDBY_ID, op) is rt.Relevance.IRRELEVANT:
            return []
        match op:
            case rt.XLOG_RUNNING_XACTS:
                return [self._running_xacts(record)]
            case _:
                raise self._not_decoded(record, op)

    def _running_xacts(self, record: XLogRecord) -> RunningXactsEvent:
        main = record.main_data
        if len(main) < _RUNNING_XACTS.size:
            raise _short(record, _RUNNING_XACTS.size, "running xacts")
        xcnt, subxcnt, overflow, next_xid, oldest, latest = _RUNNING_XACTS.unpack_from(main)
        need = _RUNNING_XACTS.size + 4 * (xcnt + subxcnt)
        if xcnt < 0 or subxcnt < 0 or len(main) < need:
            raise _short(record, need, "running xacts")
        xids = struct.unpack_from(f"<{xcnt + subxcnt}I", main, _RUNNING_XACTS.size)
        return RunningXactsEvent(
            lsn=record.lsn,
            next_xid=next_xid,
            oldest_running_xid=oldest,
            latest_completed_xid=latest,
            xids=xids[:xcnt],
            subxids=xids[xcnt:],
            subxid_overflow=overflow,
        )

    def _logicalmsg(self, record: XLogRecord) -> list[Event]:
        # as logicalmsg_decode
        op = record.info & 0xF0
        if self._relevance(record, rt.RM_LOGICALMSG_ID, op) is rt.Relevance.IRRELEVANT:
            return []
        match op:
            case rt.XLOG_LOGICAL_MESSAGE:
                return [self._message(record)]
            case _:
                raise self._not_decoded(record, op)

    def _message(self, record: XLogRecord) -> MessageEvent:
        main = record.main_data
        head = _LOGICAL_MESSAGE.size
        if len(main) < head:
            raise _short(record, head, "logical message")
        db_oid, transactional, prefix_size, message_size = _LOGICAL_MESSAGE.unpack_from(main)
        need = head + prefix_size + message_size
        if len(main) < need:
            raise _short(record, need, "logical message")
        prefix = main[head : head + prefix_size]
        if not prefix.endswith(b"\x00"):
            raise DecodeError("logical message prefix is not NUL-terminated", lsn=record.lsn)
        return MessageEvent(
            lsn=record.lsn,
            xid=record.xid,
            db_oid=db_oid,
            transactional=transactional,
            prefix=prefix[:-1].decode("utf-8", errors="replace"),
            payload=main[head + prefix_size : need],
            end_lsn=record.end_lsn,
            origin=record.origin,
        )

    def _smgr(self, record: XLogRecord) -> list[Event]:
        # Storage has no rm_decode in PostgreSQL; pgcdc tracks relfilenodes from it
        op = record.info & 0xF0
        if self._relevance(record, rt.RM_SMGR_ID, op) is rt.Relevance.IRRELEVANT:
            return []
        main = record.main_data
        match op:
            case rt.XLOG_SMGR_CREATE:
                if len(main) < _SMGR_CREATE.size:
                    raise _short(record, _SMGR_CREATE.size, "smgr create")
                spc, db, rel, fork = _SMGR_CREATE.unpack_from(main)
                return [
                    SmgrCreateEvent(
                        lsn=record.lsn,
                        xid=record.xid,
                        locator=RelFileLocator(spc, db, rel),
                        fork=fork,
                    )
                ]
            case rt.XLOG_SMGR_TRUNCATE:
                if len(main) < _SMGR_TRUNCATE.size:
                    raise _short(record, _SMGR_TRUNCATE.size, "smgr truncate")
                blkno, spc, db, rel, flags = _SMGR_TRUNCATE.unpack_from(main)
                return [
                    SmgrTruncateEvent(
                        lsn=record.lsn,
                        xid=record.xid,
                        locator=RelFileLocator(spc, db, rel),
                        block=blkno,
                        flags=flags,
                    )
                ]
            case _:
                raise self._not_decoded(record, op)


_WAL_LEVELS = {0: "minimal", 1: "replica", 2: "logical"}

_decoders: dict[int, Decoder] = {}


def decoder_for(version: int) -> Decoder:
    """The (stateless, shared) decoder for `version`."""
    dec = _decoders.get(version)
    if dec is None:
        dec = _decoders[version] = Decoder(version)
    return dec


def decode(record: XLogRecord, version: int) -> list[Event]:
    """Events for one record of a PG`version` WAL; see the module docstring."""
    return decoder_for(version).decode(record)
