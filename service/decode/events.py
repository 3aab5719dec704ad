"""Typed events: the contract between the decoder and the stages after it.

`service.decode` turns each `XLogRecord` into zero or more of these events, in record
order (`LogicalDecodingProcessRecord` and the `Decode*` functions of decode.c). The
snapshot builder and the reorder buffer consume them; so does `pgcdc waldump`.

Every event carries `lsn`, the start LSN of the record it came from. Events that belong
to a transaction carry `xid`, the xid written in the record (a subtransaction's own
xid, not its parent's). Tuples stay raw here: turning them into column values needs the
table definition valid at that LSN, which is the schema history's job.

All classes are slotted and frozen: events are shared between stages and spilled to
disk, and must not be mutated after the decoder emits them.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from enum import IntEnum
from typing import TYPE_CHECKING, NamedTuple, overload

from service.wal.record import RelFileLocator

if TYPE_CHECKING:
    from service._native import HeapRows  # the native core's rows of a run


class ChangeKind(IntEnum):
    """What a heap change does (the data-carrying `ReorderBufferChangeType` values)."""

    INSERT = 0
    UPDATE = 1
    DELETE = 2
    SPEC_INSERT = 3  # INSERT ... ON CONFLICT, before it is confirmed or super-deleted
    SPEC_CONFIRM = 4  # XLOG_HEAP_CONFIRM: the preceding SPEC_INSERT stands
    SPEC_ABORT = 5  # DELETE with XLH_DELETE_IS_SUPER: the SPEC_INSERT is withdrawn


@dataclass(slots=True, frozen=True)
class RawTuple:
    """A heap tuple as logged: `xl_heap_header` plus the bytes after it.

    `data` starts where `HeapTupleHeaderData.t_bits` would start (offset 23 in a heap
    tuple): the null bitmap if HEAP_HASNULL is set, padding up to `hoff`, then the
    attribute values. So attribute data begins at `data[hoff - 23:]`.
    """

    natts: int  # infomask2 & HEAP_NATTS_MASK
    infomask: int
    infomask2: int
    hoff: int
    data: bytes

    @property
    def has_nulls(self) -> bool:
        return bool(self.infomask & 0x0001)  # HEAP_HASNULL


@dataclass(slots=True, frozen=True)
class HeapChange:
    """An INSERT, UPDATE, DELETE or speculative-insert step on one heap tuple.

    `old_tuple` is the replica-identity key (DELETE, or UPDATE that changed the key) or
    the whole old row (REPLICA IDENTITY FULL); `old_is_key` says which. `new_tuple` is
    None for DELETE, SPEC_CONFIRM and SPEC_ABORT. For a multi-insert, the decoder emits
    one HeapChange per tuple, all with the record's LSN, in the record's order.
    `clear_toast_afterwards` mirrors ReorderBufferChange's flag: False only for all but
    the last tuple of a multi-insert, whose toast chunks belong to the whole batch.
    """

    lsn: int
    xid: int
    kind: ChangeKind
    locator: RelFileLocator
    block: int
    offset: int
    new_tuple: RawTuple | None
    old_tuple: RawTuple | None
    old_is_key: bool
    clear_toast_afterwards: bool = True
    # XLH_INSERT_ON_TOAST_RELATION: ReorderBufferQueueChange's toast_insert argument
    on_toast_relation: bool = False
    origin: int | None = None  # the record's replication origin (block 253), if any


@dataclass(slots=True, frozen=True)
class TruncateEvent:
    """XLOG_HEAP_TRUNCATE: relation OIDs (not relfilenodes) truncated together."""

    lsn: int
    xid: int
    db_oid: int
    relids: tuple[int, ...]
    cascade: bool
    restart_seqs: bool
    origin: int | None = None


@dataclass(slots=True, frozen=True)
class MessageEvent:
    """XLOG_LOGICAL_MESSAGE from `pg_logical_emit_message`."""

    lsn: int
    xid: int
    db_oid: int
    transactional: bool
    prefix: str
    payload: bytes
    # ReorderBufferQueueMessage is handed the record's end, not its start
    end_lsn: int = 0
    origin: int | None = None


@dataclass(slots=True, frozen=True)
class NewCidEvent:
    """XLOG_HEAP2_NEW_CID: the transaction touched a catalog tuple (so changed the catalog)."""

    lsn: int
    xid: int
    locator: RelFileLocator
    block: int
    offset: int
    cmin: int
    cmax: int
    combocid: int
    top_xid: int = 0  # xl_heap_new_cid.top_xid: whose tuple-cid map gets the entry


@dataclass(slots=True, frozen=True)
class InplaceEvent:
    """XLOG_HEAP_INPLACE: an in-place catalog update (pg_class stats, relfrozenxid...).

    From PG18 the record also carries the invalidations of the update
    (`xl_heap_inplace.msgs`); on PG15..17 `invalidations` is empty.
    """

    lsn: int
    xid: int
    locator: RelFileLocator
    block: int
    offset: int
    invalidations: tuple[Invalidation, ...] = ()


@dataclass(slots=True, frozen=True)
class Invalidation:
    """One `SharedInvalidationMessage`. `kind` is its id byte, as in sinval.h.

    Ids >= 0 are catcache messages (the id is the cache id); -1 catalog, -2 relcache,
    -3 smgr, -4 relmap, -5 snapshot (-6 relsync on PG18). `rel_oid` is set for relcache
    messages (0 means "all relations"), `db_oid` where the message carries one.
    """

    kind: int
    db_oid: int
    rel_oid: int
    raw: bytes


@dataclass(slots=True, frozen=True)
class InvalidationsEvent:
    """XLOG_XACT_INVALIDATIONS: invalidations logged mid-transaction (PG14+)."""

    lsn: int
    xid: int
    invalidations: tuple[Invalidation, ...]


@dataclass(slots=True, frozen=True)
class AssignmentEvent:
    """XLOG_XACT_ASSIGNMENT: subtransactions assigned to a top-level xid."""

    lsn: int
    xid: int  # the top-level xid
    subxids: tuple[int, ...]


@dataclass(slots=True, frozen=True)
class CommitEvent:
    """XLOG_XACT_COMMIT or XLOG_XACT_COMMIT_PREPARED, parsed as `ParseCommitRecord`.

    `xid` is the committing top-level xid (for a prepared transaction, `twophase_xid`).
    `subxids` lists only the subtransactions that survived. `end_lsn` is the commit
    record's end, which is what a consumer confirms. `commit_time` is the record's own
    `xact_time`; when XACT_XINFO_HAS_ORIGIN is set, DecodeCommit reports `origin_time`
    as the commit time instead, and a consumer should do the same.
    """

    lsn: int
    end_lsn: int
    xid: int
    commit_time: int  # microseconds since 2000-01-01 (TimestampTz)
    xinfo: int
    db_oid: int
    ts_oid: int
    subxids: tuple[int, ...]
    dropped_rels: tuple[RelFileLocator, ...]
    invalidations: tuple[Invalidation, ...]
    twophase_xid: int | None
    gid: str | None
    origin_lsn: int | None
    origin_time: int | None
    origin: int | None  # the record's replication origin id (block 253), if any
    prepared: bool  # COMMIT PREPARED rather than a plain commit


@dataclass(slots=True, frozen=True)
class AbortEvent:
    """XLOG_XACT_ABORT or XLOG_XACT_ABORT_PREPARED, parsed as `ParseAbortRecord`."""

    lsn: int
    end_lsn: int
    xid: int
    abort_time: int
    xinfo: int
    db_oid: int
    subxids: tuple[int, ...]
    dropped_rels: tuple[RelFileLocator, ...]
    twophase_xid: int | None
    gid: str | None
    origin: int | None
    prepared: bool
    origin_lsn: int | None = None
    origin_time: int | None = None


@dataclass(slots=True, frozen=True)
class PrepareEvent:
    """XLOG_XACT_PREPARE, parsed as `ParsePrepareRecord`."""

    lsn: int
    end_lsn: int
    xid: int
    prepared_at: int
    db_oid: int
    gid: str
    subxids: tuple[int, ...]
    invalidations: tuple[Invalidation, ...]
    origin_lsn: int
    origin_time: int
    origin: int | None
    # The relfilenodes COMMIT PREPARED will unlink (the record's commit rels): those
    # the transaction dropped, or replaced by a rewrite (CLUSTER, VACUUM FULL).
    dropped_rels: tuple[RelFileLocator, ...] = ()


@dataclass(slots=True, frozen=True)
class RunningXactsEvent:
    """XLOG_RUNNING_XACTS (`xl_running_xacts`): drives the snapshot builder."""

    lsn: int
    next_xid: int
    oldest_running_xid: int
    latest_completed_xid: int
    xids: tuple[int, ...]  # top-level xids running
    subxids: tuple[int, ...]
    subxid_overflow: bool


@dataclass(slots=True, frozen=True)
class CheckpointEvent:
    """XLOG_CHECKPOINT_SHUTDOWN or XLOG_CHECKPOINT_ONLINE."""

    lsn: int
    redo: int
    timeline: int
    next_xid: int  # 32-bit part of the FullTransactionId
    oldest_xid: int
    oldest_active_xid: int
    online: bool


@dataclass(slots=True, frozen=True)
class ParameterChangeEvent:
    """XLOG_PARAMETER_CHANGE. `wal_level`: 0 minimal, 1 replica, 2 logical."""

    lsn: int
    wal_level: int
    max_connections: int
    max_wal_senders: int
    max_prepared_xacts: int
    wal_log_hints: bool


@dataclass(slots=True, frozen=True)
class SwitchEvent:
    """XLOG_SWITCH: the rest of the segment is unused; the reader skips to the next."""

    lsn: int


@dataclass(slots=True, frozen=True)
class SmgrCreateEvent:
    """XLOG_SMGR_CREATE: a new relfilenode (a rewrite, TRUNCATE, VACUUM FULL, CREATE)."""

    lsn: int
    xid: int
    locator: RelFileLocator
    fork: int


@dataclass(slots=True, frozen=True)
class SmgrTruncateEvent:
    """XLOG_SMGR_TRUNCATE: physical truncation (VACUUM), not SQL TRUNCATE."""

    lsn: int
    xid: int
    locator: RelFileLocator
    block: int
    flags: int


@dataclass(slots=True, frozen=True)
class ClassRowEvent:
    """A pg_class row as a heap INSERT, UPDATE or MULTI_INSERT of transaction `xid`
    wrote it at `lsn`, rebuilt off the WAL by the historic pg_class
    (`service.schema.pgclass`): what RelidByRelfilenumber would find under a historic
    snapshot that sees that write. `tablespace` is as stored: 0 for the database's
    default tablespace. `relrewrite` is set on the transient heap of a rewrite
    (make_new_heap), whose changes PostgreSQL never decodes."""

    lsn: int
    xid: int
    db_oid: int
    oid: int
    relfilenode: int
    tablespace: int
    toast_relid: int
    relkind: str
    relrewrite: int


@dataclass(slots=True, frozen=True)
class ClassRowLostEvent:
    """A pg_class row transaction `xid` wrote at `lsn` that the WAL decoded so far cannot
    rebuild: an update compressed against (or an image-less change of) a page whose
    contents the decoded WAL never showed. `reason` says which."""

    lsn: int
    xid: int
    db_oid: int
    block: int
    offset: int
    reason: str


Event = (
    HeapChange
    | TruncateEvent
    | MessageEvent
    | NewCidEvent
    | InplaceEvent
    | InvalidationsEvent
    | AssignmentEvent
    | CommitEvent
    | AbortEvent
    | PrepareEvent
    | RunningXactsEvent
    | CheckpointEvent
    | ParameterChangeEvent
    | SwitchEvent
    | SmgrCreateEvent
    | SmgrTruncateEvent
    | ClassRowEvent
    | ClassRowLostEvent
)
"""Everything the decoder (and the historic pg_class beside it) can emit."""


class PredecodedRecord(NamedTuple):
    """A heap record the native XLog reader decoded itself (once armed: see
    `service.decode.native_heap.predecode`): the header fields the decoding driver reads,
    and exactly the events `Decoder.decode` gives for that record.

    Only table-change records are handed on like this (Heap INSERT, DELETE, UPDATE,
    HOT_UPDATE; Heap2 MULTI_INSERT: decoded in every supported version); every other
    record, and one whose parse fails, still comes as an `XLogRecord`, so that the
    Python decoder raises its errors. A NamedTuple: immutable, and cheap to build from
    Rust (once per record)."""

    lsn: int
    end_lsn: int
    total_len: int
    xid: int
    info: int  # full xl_info byte
    rmid: int
    toplevel_xid: int | None
    origin: int | None
    events: list[Event]


_KINDS = tuple(ChangeKind)  # by value: HeapRows.head's kind


class InsertRows(Sequence[HeapChange]):
    """The rows of an `InsertRun`, held by the native core (`HeapRows`): one
    (sub)transaction's changes of one `kind` to one relation (`locator`), in WAL order,
    none with an origin: plain inserts, and among them, after the first, `chunks` TOAST
    chunk inserts into that relation's toast relation (`on_toast_relation`: what
    DecodeInsert queues for each chunk, and ReorderBufferToastAppendChunk collects at
    replay for the next main-table row); or UPDATEs, all with the old tuple or key
    they logged (`olds`: each row holds both) or all without; or DELETEs that logged
    only their old tuple or key. Among a delete or update run's rows, after the first,
    `bares` of its `chunks` are DELETEs that logged no old tuple (bare), all of one other
    relation (`rows.toast_locator`): a toast relation's chunk deletes (toast_delete after
    each row with a value out of line, or of the values an UPDATE replaces, which the
    replay drops) or a table's without a replica identity; an update run's other chunks
    are the TOAST chunk inserts of its rows' new values. `kind` is the main rows'. Each
    row holds the tuples its change carries (a bare delete none). Item `i` is built
    when it is read, as exactly the `HeapChange` the unbatched reader gives for that
    row; until then a row
    is its logged tuple in Rust, so a run crosses the reorder buffer and reaches a
    native encoder without a Python object per row. Only an InsertRows without chunks
    reaches an encoder; one with chunks is replayed whole (its chunks collected in
    Rust) and spilled whole too (its dump keeps which rows are chunks); of a delete run
    with bare deletes, only `mains` reaches an encoder.

    The reorder buffer queues one as a single entry (ReorderBufferQueueChange of each of
    its rows: `nrows` changes, `data_bytes` of tuple data), and replay hands it on whole
    where it would hand on each of its rows in turn. `lsn` is the first row's LSN (where
    the k-way merge places it: no change of any other transaction lies between its first
    and last row); `last_lsn` the last's. Immutable; slicing (`window`) shares the rows.
    """

    __slots__ = (
        "bares",
        "chunks",
        "data_bytes",
        "kind",
        "last_lsn",
        "locator",
        "lsn",
        "nrows",
        "olds",
        "rows",
        "xid",
    )

    def __init__(self, rows: HeapRows) -> None:
        self.rows = rows
        kind, self.lsn, self.last_lsn, self.xid, self.locator, *sizes = rows.head
        self.kind = _KINDS[kind]
        self.nrows, self.data_bytes, self.chunks, self.olds, self.bares = sizes

    def __len__(self) -> int:
        return self.nrows

    @overload
    def __getitem__(self, index: int) -> HeapChange: ...
    @overload
    def __getitem__(self, index: slice) -> list[HeapChange]: ...
    def __getitem__(self, index: int | slice) -> HeapChange | list[HeapChange]:
        if isinstance(index, slice):
            return self.rows.changes()[index]
        if index < 0:
            index += self.nrows
        return self.rows.change(index)

    def __iter__(self) -> Iterator[HeapChange]:
        return iter(self.rows.changes())

    def mains(self) -> InsertRows | None:
        """The rows that are not chunk rows, as an InsertRows of their own (a delete
        run's keyed deletes without its bare ones); None when every row is one."""
        rows = self.rows.mains()
        return None if rows is None else InsertRows(rows)

    def window(self, start: int, stop: int) -> InsertRows:
        """Rows [start, stop) (0 <= start < stop <= nrows), sharing this one's."""
        return InsertRows(self.rows.slice(start, stop))

    def __repr__(self) -> str:
        return (
            f"InsertRows({self.kind.name} xid={self.xid} {self.locator} x{self.nrows}"
            f" at {self.lsn:X})"
        )


class InsertRun(NamedTuple):
    """Consecutive table-change heap records the native XLog reader gathered into one
    (once armed with runs: see `service.decode.native_heap.predecode`): Heap INSERT and
    Heap2 MULTI_INSERT records of transaction `xid` into one relation, none with a
    top-level xid (block 252) or an origin (block 253), whose events are all plain
    inserts (`ChangeKind.INSERT`) not on a toast relation; after the first of them, the
    single plain inserts of `xid` into one toast relation (TOAST chunks). Or, a run of
    its own kind under the same conditions: Heap UPDATE and HOT_UPDATE records whose one
    event is an UPDATE, all logging an old tuple or key besides the new one (a key
    change, REPLICA IDENTITY FULL) or none of them, with TOAST chunks as an insert run;
    or Heap DELETE records whose one event is a DELETE that logged only its old tuple or
    key (`changes.kind`). After the first record of an update or delete run, the DELETE
    records of `xid` that logged no old tuple, all into one other relation of the same
    database (its chunks' if it has any: bare deletes). Between and after them, besides
    the Heap and Heap2 records the
    decoder does nothing with (inert: Heap LOCK, pruning),
    the records of rmgrs without rm_decode (the index inserts), of `xid` or of none and
    with no top-level xid, which the driver only counts. `records` counts them all.

    `changes` are exactly the events `Decoder.decode` gives for those records, in WAL
    order, kept in Rust until read (`InsertRows`). Every gate the decoding driver passes
    a record through (ReorderBufferProcessXid, SnapBuildProcessChange, the database and
    origin filters) answers the same for each of them, so `Decoding.process_run` takes
    the run as a whole, with the result of `Decoding.process` on each record in turn.
    `lsn` and `end_lsn` are the last record's (where reading continues), `first_lsn` the
    first's."""

    first_lsn: int
    lsn: int
    end_lsn: int
    xid: int
    records: int
    changes: InsertRows
