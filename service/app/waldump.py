"""pg_waldump-style text for records and decoded events (`pgcdc waldump`).

Receives: `XLogRecord` values (from the XLog reader) and the WAL's major version.
Hands on: one line per record in pg_waldump's layout, and optionally, under each
record, one indented line per event the decoder made of it.

What matches pg_waldump byte for byte: the fixed columns (`rmgr: %-11s len (rec/tot):
%6u/%6u, tx: %10u, lsn: %X/%08X, prev %X/%08X, `), `desc: ` followed by the record type
name as the rmgr's `*_identify` returns it (`UNKNOWN (%x)` for the rmgrs pgcdc has no
names for), and the block reference list (`, blkref #N: rel s/d/r [fork f] blk B
[FPW]`). The text between the type name and the block references is pgcdc's own
summary of the record (`key: value` pairs in the PG16+ style, e.g. `off: 2, flags:
0x08`), not a copy of each rmgr's `*_desc`. rec_len is xl_tot_len minus the stored
(compressed, hole-less) length of the full-page images, as pg_waldump computes it.

Pure formatting; `dump` decodes through `service.decode` and so raises what it raises.
"""

from __future__ import annotations

import dataclasses
import struct
from collections.abc import Iterable, Iterator

import service.wal.rmgr as rt
from service._binary import U16
from service.decode.dispatch import decoder_for
from service.decode.events import Event, HeapChange, RawTuple
from service.wal.record import BlockRef, RelFileLocator, XLogRecord

FORK_NAMES = ("main", "fsm", "vm", "init")


def lsn_text(lsn: int) -> str:
    """An LSN as pg_waldump prints it (`%X/%08X`)."""
    return f"{lsn >> 32:X}/{lsn & 0xFFFFFFFF:08X}"


def rec_len(record: XLogRecord) -> int:
    """pg_waldump's rec_len: xl_tot_len without the stored full-page images."""
    return record.total_len - sum(ref.image_len for ref in record.blocks if ref.image is not None)


def blkref_text(ref: BlockRef) -> str:
    """One `, blkref #N: ...` item, as XLogRecGetBlockRefInfo (pretty, not detailed)."""
    loc = ref.locator
    fork = "" if ref.fork == 0 else f" fork {_fork_name(ref.fork)}"
    text = f", blkref #{ref.block_id}: rel {loc.spc_oid}/{loc.db_oid}/{loc.rel_number}{fork}"
    text += f" blk {ref.block}"
    if ref.image is not None:
        text += " FPW" if ref.apply_image else " FPW for WAL verification"
    return text


def _fork_name(fork: int) -> str:
    return FORK_NAMES[fork] if 0 <= fork < len(FORK_NAMES) else str(fork)


def record_prefix(record: XLogRecord, version: int) -> str:
    """The fixed columns and `desc: <type name> ` of pg_waldump's line."""
    name = rt.rmgr_name(record.rmid) or f"rmgr{record.rmid}"
    ident = rt.identify(version, record.rmid, record.info)
    if ident is None:
        ident = f"UNKNOWN ({record.info & 0xF0:x})"
    return (
        f"rmgr: {name:<11} len (rec/tot): {rec_len(record):6}/{record.total_len:6}, "
        f"tx: {record.xid:10}, lsn: {lsn_text(record.lsn)}, prev {lsn_text(record.prev)}, "
        f"desc: {ident} "
    )


def format_record(record: XLogRecord, version: int) -> str:
    """One pg_waldump-style line for `record` (see the module docstring for what matches)."""
    return (
        record_prefix(record, version)
        + _summary(record)
        + "".join(blkref_text(ref) for ref in record.blocks)
    )


_U16_U8 = struct.Struct("<HB")


def _summary(record: XLogRecord) -> str:
    """A short `key: value` summary of the main data of the decoded rmgrs."""
    main = record.main_data
    rmid = record.rmid
    if rmid == rt.RM_HEAP_ID and len(main) >= 2:
        op = record.info & rt.XLOG_HEAP_OPMASK
        if op == rt.XLOG_HEAP_INSERT and len(main) >= 3:
            off, flags = _U16_U8.unpack_from(main)
            return f"off: {off}, flags: 0x{flags:02X}"
        if op == rt.XLOG_HEAP_DELETE and len(main) >= 8:
            return f"off: {U16.unpack_from(main, 4)[0]}, flags: 0x{main[7]:02X}"
        if op in (rt.XLOG_HEAP_UPDATE, rt.XLOG_HEAP_HOT_UPDATE) and len(main) >= 14:
            return (
                f"old_off: {U16.unpack_from(main, 4)[0]}, flags: 0x{main[7]:02X}, "
                f"new_off: {U16.unpack_from(main, 12)[0]}"
            )
        if op in (rt.XLOG_HEAP_CONFIRM, rt.XLOG_HEAP_INPLACE):
            return f"off: {U16.unpack_from(main)[0]}"
        if op == rt.XLOG_HEAP_LOCK and len(main) >= 6:
            return f"off: {U16.unpack_from(main, 4)[0]}"
    if rmid == rt.RM_HEAP2_ID and len(main) >= 4:
        op = record.info & rt.XLOG_HEAP_OPMASK
        if op == rt.XLOG_HEAP2_MULTI_INSERT:
            return f"ntuples: {U16.unpack_from(main, 2)[0]}, flags: 0x{main[0]:02X}"
    return ""


def format_event(event: Event) -> str:
    """One event as `EventName field: value, ...`, tuples shown by shape, not bytes."""
    parts: list[str] = []
    for field in dataclasses.fields(event):
        value = getattr(event, field.name)
        parts.append(f"{field.name}: {_value_text(field.name, value)}")
    name = type(event).__name__
    if isinstance(event, HeapChange):
        name += f" {event.kind.name}"
    return f"{name} " + ", ".join(parts)


def _value_text(name: str, value: object) -> str:
    if isinstance(value, RawTuple):
        return f"(natts {value.natts}, infomask 0x{value.infomask:04X}, {len(value.data)} bytes)"
    if isinstance(value, RelFileLocator):
        return f"{value.spc_oid}/{value.db_oid}/{value.rel_number}"
    if isinstance(value, bytes):
        return f"{len(value)} bytes"
    if isinstance(value, int) and not isinstance(value, bool) and name.endswith("lsn"):
        return lsn_text(value)
    if isinstance(value, tuple) and value and not isinstance(value[0], int):
        return f"[{len(value)} items]"
    return str(value)


def dump(records: Iterable[XLogRecord], version: int, *, events: bool = False) -> Iterator[str]:
    """Lines for `records`: one per record, plus indented event lines when `events`."""
    decoder = decoder_for(version)
    for record in records:
        yield format_record(record, version)
        if events:
            for event in decoder.decode(record):
                yield "    " + format_event(event)
