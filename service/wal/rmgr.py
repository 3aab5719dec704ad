"""Per-version resource-manager tables: which rmgr ids exist and what each info value means.

Receives: a PostgreSQL major version (15..18) and a record's `rmid` / `xl_info`.
Hands on: the rmgr's name as pg_waldump prints it, the record type's name as the
rmgr's `*_identify` function returns it, and, for the seven rmgrs the decoder
handles (XLOG, Transaction, Storage, Standby, Heap2, Heap, LogicalMessage), whether
the info value is DECODED (turned into events) or IRRELEVANT (listed on purpose as
having nothing for logical decoding). An info value missing from its rmgr's table is
not a silent skip: `service.decode` raises `DecodeError` naming the LSN.

Sources (facts only): rmgrlist.h, pg_control.h, xact.h, storage_xlog.h,
standbydefs.h, heapam_xlog.h, message.h and the `*_identify` functions of
src/backend/access/rmgrdesc/ on REL_15_STABLE .. REL_18_STABLE. Differences:

- HEAP2 0x10/0x20/0x30 are PRUNE / VACUUM / FREEZE_PAGE up to PG16 and
  PRUNE_ON_ACCESS / PRUNE_VACUUM_SCAN / PRUNE_VACUUM_CLEANUP from PG17.
- XLOG 0xE0 (CHECKPOINT_REDO) exists from PG17. 0xC0 has been unused since PG12.
- The rmgr id list (0..21) is the same in all four versions; ids 128..255 are
  custom rmgrs (PG15+), which pg_waldump names `custom###`.
"""

from __future__ import annotations

from enum import Enum

from service.errors import UnsupportedVersionError

SUPPORTED_VERSIONS = (15, 16, 17, 18)

# rmgr ids (rmgrlist.h), identical in PG15..PG18
RM_XLOG_ID = 0
RM_XACT_ID = 1
RM_SMGR_ID = 2
RM_CLOG_ID = 3
RM_DBASE_ID = 4
RM_TBLSPC_ID = 5
RM_MULTIXACT_ID = 6
RM_RELMAP_ID = 7
RM_STANDBY_ID = 8
RM_HEAP2_ID = 9
RM_HEAP_ID = 10
RM_BTREE_ID = 11
RM_HASH_ID = 12
RM_GIN_ID = 13
RM_GIST_ID = 14
RM_SEQ_ID = 15
RM_SPGIST_ID = 16
RM_BRIN_ID = 17
RM_COMMIT_TS_ID = 18
RM_REPLORIGIN_ID = 19
RM_GENERIC_ID = 20
RM_LOGICALMSG_ID = 21
RM_MIN_CUSTOM_ID = 128
RM_MAX_CUSTOM_ID = 255

RMGR_NAMES: dict[int, str] = {
    RM_XLOG_ID: "XLOG",
    RM_XACT_ID: "Transaction",
    RM_SMGR_ID: "Storage",
    RM_CLOG_ID: "CLOG",
    RM_DBASE_ID: "Database",
    RM_TBLSPC_ID: "Tablespace",
    RM_MULTIXACT_ID: "MultiXact",
    RM_RELMAP_ID: "RelMap",
    RM_STANDBY_ID: "Standby",
    RM_HEAP2_ID: "Heap2",
    RM_HEAP_ID: "Heap",
    RM_BTREE_ID: "Btree",
    RM_HASH_ID: "Hash",
    RM_GIN_ID: "Gin",
    RM_GIST_ID: "Gist",
    RM_SEQ_ID: "Sequence",
    RM_SPGIST_ID: "SPGist",
    RM_BRIN_ID: "BRIN",
    RM_COMMIT_TS_ID: "CommitTs",
    RM_REPLORIGIN_ID: "ReplicationOrigin",
    RM_GENERIC_ID: "Generic",
    RM_LOGICALMSG_ID: "LogicalMessage",
}

# XLOG info values (pg_control.h)
XLOG_CHECKPOINT_SHUTDOWN = 0x00
XLOG_CHECKPOINT_ONLINE = 0x10
XLOG_NOOP = 0x20
XLOG_NEXTOID = 0x30
XLOG_SWITCH = 0x40
XLOG_BACKUP_END = 0x50
XLOG_PARAMETER_CHANGE = 0x60
XLOG_RESTORE_POINT = 0x70
XLOG_FPW_CHANGE = 0x80
XLOG_END_OF_RECOVERY = 0x90
XLOG_FPI_FOR_HINT = 0xA0
XLOG_FPI = 0xB0
XLOG_OVERWRITE_CONTRECORD = 0xD0
XLOG_CHECKPOINT_REDO = 0xE0  # PG17+

# XACT info values (xact.h); the op is info & XLOG_XACT_OPMASK
XLOG_XACT_COMMIT = 0x00
XLOG_XACT_PREPARE = 0x10
XLOG_XACT_ABORT = 0x20
XLOG_XACT_COMMIT_PREPARED = 0x30
XLOG_XACT_ABORT_PREPARED = 0x40
XLOG_XACT_ASSIGNMENT = 0x50
XLOG_XACT_INVALIDATIONS = 0x60
XLOG_XACT_OPMASK = 0x70
XLOG_XACT_HAS_INFO = 0x80

# Storage (storage_xlog.h)
XLOG_SMGR_CREATE = 0x10
XLOG_SMGR_TRUNCATE = 0x20

# Standby (standbydefs.h)
XLOG_STANDBY_LOCK = 0x00
XLOG_RUNNING_XACTS = 0x10
XLOG_INVALIDATIONS = 0x20

# Heap (heapam_xlog.h); the op is info & XLOG_HEAP_OPMASK
XLOG_HEAP_INSERT = 0x00
XLOG_HEAP_DELETE = 0x10
XLOG_HEAP_UPDATE = 0x20
XLOG_HEAP_TRUNCATE = 0x30
XLOG_HEAP_HOT_UPDATE = 0x40
XLOG_HEAP_CONFIRM = 0x50
XLOG_HEAP_LOCK = 0x60
XLOG_HEAP_INPLACE = 0x70
XLOG_HEAP_OPMASK = 0x70
XLOG_HEAP_INIT_PAGE = 0x80

# Heap2
XLOG_HEAP2_REWRITE = 0x00
XLOG_HEAP2_PRUNE = 0x10  # PG15-16; PRUNE_ON_ACCESS from PG17
XLOG_HEAP2_VACUUM = 0x20  # PG15-16; PRUNE_VACUUM_SCAN from PG17
XLOG_HEAP2_FREEZE_PAGE = 0x30  # PG15-16; PRUNE_VACUUM_CLEANUP from PG17
XLOG_HEAP2_VISIBLE = 0x40
XLOG_HEAP2_MULTI_INSERT = 0x50
XLOG_HEAP2_LOCK_UPDATED = 0x60
XLOG_HEAP2_NEW_CID = 0x70  # xl_heap_new_cid: the same 34 bytes in 15..18

# LogicalMessage (message.h)
XLOG_LOGICAL_MESSAGE = 0x00


class Relevance(Enum):
    """What the decoder does with a record type."""

    DECODED = "decoded"  # turned into one or more events
    IRRELEVANT = "irrelevant"  # nothing for logical decoding; only the xid is registered


D = Relevance.DECODED
I = Relevance.IRRELEVANT  # noqa: E741 - mirrors D; short names keep the tables readable

InfoTable = dict[int, tuple[str, Relevance]]
"""op value (info & the rmgr's op mask) -> (identify name, relevance)."""

_XLOG_COMMON: InfoTable = {
    XLOG_CHECKPOINT_SHUTDOWN: ("CHECKPOINT_SHUTDOWN", D),
    XLOG_CHECKPOINT_ONLINE: ("CHECKPOINT_ONLINE", D),
    XLOG_NOOP: ("NOOP", I),
    XLOG_NEXTOID: ("NEXTOID", I),
    XLOG_SWITCH: ("SWITCH", D),
    XLOG_BACKUP_END: ("BACKUP_END", I),
    XLOG_PARAMETER_CHANGE: ("PARAMETER_CHANGE", D),
    XLOG_RESTORE_POINT: ("RESTORE_POINT", I),
    XLOG_FPW_CHANGE: ("FPW_CHANGE", I),
    # decode.c makes it a snapshot serialization point, which pgcdc does not keep.
    # xl_end_of_recovery gains wal_level in 17; not decoded, so no layout is read.
    XLOG_END_OF_RECOVERY: ("END_OF_RECOVERY", I),
    XLOG_FPI_FOR_HINT: ("FPI_FOR_HINT", I),
    XLOG_FPI: ("FPI", I),
    XLOG_OVERWRITE_CONTRECORD: ("OVERWRITE_CONTRECORD", I),
}
# 17 adds XLOG_CHECKPOINT_REDO (0xE0), the redo point an online checkpoint starts at;
# 15 and 16 have no 0xE0, so there it is a DecodeError like any unknown info value.
_XLOG_17: InfoTable = {**_XLOG_COMMON, XLOG_CHECKPOINT_REDO: ("CHECKPOINT_REDO", I)}

# The same in 15..18: xl_xact_commit/abort/prepare and their xinfo parts keep their
# layout, except xl_xact_stats_item (dropped stats), whose objid is 64-bit from 18
# (service/decode/xact.py stats_item_size).
_XACT: InfoTable = {
    XLOG_XACT_COMMIT: ("COMMIT", D),
    XLOG_XACT_PREPARE: ("PREPARE", D),
    XLOG_XACT_ABORT: ("ABORT", D),
    XLOG_XACT_COMMIT_PREPARED: ("COMMIT_PREPARED", D),
    XLOG_XACT_ABORT_PREPARED: ("ABORT_PREPARED", D),
    XLOG_XACT_ASSIGNMENT: ("ASSIGNMENT", D),
    XLOG_XACT_INVALIDATIONS: ("INVALIDATION", D),  # sic: xact_identify says INVALIDATION
}

_SMGR: InfoTable = {
    XLOG_SMGR_CREATE: ("CREATE", D),
    XLOG_SMGR_TRUNCATE: ("TRUNCATE", D),
}

_STANDBY: InfoTable = {
    XLOG_STANDBY_LOCK: ("LOCK", I),
    # xl_running_xacts is the same in 15..18. Written by the bgwriter about every 15 s
    # and by CHECKPOINT; from 16 also on demand by pg_log_standby_snapshot(), which
    # connectors.postgres.server.force_running_xacts uses there (CHECKPOINT on 15).
    XLOG_RUNNING_XACTS: ("RUNNING_XACTS", D),
    # hot-standby invalidations; logical decoding uses XLOG_XACT_INVALIDATIONS
    XLOG_INVALIDATIONS: ("INVALIDATIONS", I),
}

# xl_heap_insert/delete/update/truncate/confirm and xl_heap_header are laid out alike
# in 15..18 (checked against pg_waldump's offsets on all four). XLOG_HEAP_INPLACE is
# not: from 18 xl_heap_inplace carries the invalidation messages (dbId, tsId,
# relcacheInitFileInval, nmsgs, msgs) after the offnum (service/decode/heap.py).
_HEAP: InfoTable = {
    XLOG_HEAP_INSERT: ("INSERT", D),
    XLOG_HEAP_DELETE: ("DELETE", D),
    XLOG_HEAP_UPDATE: ("UPDATE", D),
    XLOG_HEAP_TRUNCATE: ("TRUNCATE", D),
    XLOG_HEAP_HOT_UPDATE: ("HOT_UPDATE", D),
    XLOG_HEAP_CONFIRM: ("HEAP_CONFIRM", D),
    XLOG_HEAP_LOCK: ("LOCK", I),
    XLOG_HEAP_INPLACE: ("INPLACE", D),
}

_HEAP2_15: InfoTable = {
    XLOG_HEAP2_REWRITE: ("REWRITE", I),
    # xl_heap_prune / xl_heap_vacuum / xl_heap_freeze_page: 16 adds isCatalogRel to
    # prune and freeze (and turns freeze's tuples into freeze plans); nothing here
    # decodes them, only their xid is registered, so the layouts are never read.
    XLOG_HEAP2_PRUNE: ("PRUNE", I),
    XLOG_HEAP2_VACUUM: ("VACUUM", I),
    XLOG_HEAP2_FREEZE_PAGE: ("FREEZE_PAGE", I),
    XLOG_HEAP2_VISIBLE: ("VISIBLE", I),
    XLOG_HEAP2_MULTI_INSERT: ("MULTI_INSERT", D),
    XLOG_HEAP2_LOCK_UPDATED: ("LOCK_UPDATED", I),
    XLOG_HEAP2_NEW_CID: ("NEW_CID", D),
}
# 17 merges prune, vacuum and freeze into one xl_heap_prune (reason, flags, then
# optional parts) logged under three info values named by why it was written; the
# other HEAP2 values are unchanged. Still not decoded (IRRELEVANT).
_HEAP2_17: InfoTable = {
    **_HEAP2_15,
    0x10: ("PRUNE_ON_ACCESS", I),
    0x20: ("PRUNE_VACUUM_SCAN", I),
    0x30: ("PRUNE_VACUUM_CLEANUP", I),
}

_LOGICALMSG: InfoTable = {XLOG_LOGICAL_MESSAGE: ("MESSAGE", D)}

# op masks: which bits of xl_info select the record type, per rmgr
OP_MASKS: dict[int, int] = {
    RM_XLOG_ID: 0xF0,
    RM_XACT_ID: XLOG_XACT_OPMASK,
    RM_SMGR_ID: 0xF0,
    RM_STANDBY_ID: 0xF0,
    RM_HEAP2_ID: XLOG_HEAP_OPMASK,
    RM_HEAP_ID: XLOG_HEAP_OPMASK,
    RM_LOGICALMSG_ID: 0xF0,
}

_TABLES: dict[int, dict[int, InfoTable]] = {
    15: {
        RM_XLOG_ID: _XLOG_COMMON,
        RM_XACT_ID: _XACT,
        RM_SMGR_ID: _SMGR,
        RM_STANDBY_ID: _STANDBY,
        RM_HEAP2_ID: _HEAP2_15,
        RM_HEAP_ID: _HEAP,
        RM_LOGICALMSG_ID: _LOGICALMSG,
    },
    16: {
        RM_XLOG_ID: _XLOG_COMMON,
        RM_XACT_ID: _XACT,
        RM_SMGR_ID: _SMGR,
        RM_STANDBY_ID: _STANDBY,
        RM_HEAP2_ID: _HEAP2_15,
        RM_HEAP_ID: _HEAP,
        RM_LOGICALMSG_ID: _LOGICALMSG,
    },
    17: {
        RM_XLOG_ID: _XLOG_17,
        RM_XACT_ID: _XACT,
        RM_SMGR_ID: _SMGR,
        RM_STANDBY_ID: _STANDBY,
        RM_HEAP2_ID: _HEAP2_17,
        RM_HEAP_ID: _HEAP,
        RM_LOGICALMSG_ID: _LOGICALMSG,
    },
    18: {
        RM_XLOG_ID: _XLOG_17,
        RM_XACT_ID: _XACT,
        RM_SMGR_ID: _SMGR,
        RM_STANDBY_ID: _STANDBY,
        RM_HEAP2_ID: _HEAP2_17,
        RM_HEAP_ID: _HEAP,
        RM_LOGICALMSG_ID: _LOGICALMSG,
    },
}

DECODED_RMGRS = frozenset(OP_MASKS)
"""The rmgrs whose every info value must be in the version's table."""


def info_tables(version: int) -> dict[int, InfoTable]:
    """The decoded rmgrs' info tables for `version`; UnsupportedVersionError otherwise."""
    try:
        return _TABLES[version]
    except KeyError:
        raise UnsupportedVersionError(
            f"no rmgr table for PostgreSQL {version}; supported: {SUPPORTED_VERSIONS}"
        ) from None


def rmgr_name(rmid: int) -> str | None:
    """pg_waldump's name for `rmid` (`custom###` for custom rmgrs), None if not valid."""
    name = RMGR_NAMES.get(rmid)
    if name is not None:
        return name
    if RM_MIN_CUSTOM_ID <= rmid <= RM_MAX_CUSTOM_ID:
        return f"custom{rmid:03d}"
    return None


def identify(version: int, rmid: int, info: int) -> str | None:
    """The record type name, as the rmgr's `*_identify` returns it (None if unknown here).

    Only the decoded rmgrs have names; pg_waldump prints `UNKNOWN (%x)` where its
    identify function returns NULL, and callers may do the same for the others.
    """
    table = info_tables(version).get(rmid)
    if table is None:
        return None
    entry = table.get(info & OP_MASKS[rmid])
    if entry is None:
        return None
    name = entry[0]
    # heap_identify / heap2_identify append +INIT when XLOG_HEAP_INIT_PAGE is set
    if info & XLOG_HEAP_INIT_PAGE and (
        (rmid == RM_HEAP_ID and info & XLOG_HEAP_OPMASK in _HEAP_INIT_OPS)
        or (rmid == RM_HEAP2_ID and info & XLOG_HEAP_OPMASK == XLOG_HEAP2_MULTI_INSERT)
    ):
        name += "+INIT"
    return name


_HEAP_INIT_OPS = frozenset({XLOG_HEAP_INSERT, XLOG_HEAP_UPDATE, XLOG_HEAP_HOT_UPDATE})
