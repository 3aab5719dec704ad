"""The native XLog reader: the Rust twin of `service.wal.reader.XLogReader` (glue).

Receives: what `XLogReader` receives, through the same interface: `feed(data, at_lsn)`
with contiguous raw WAL in LSN order, in chunks of any size, the first possibly starting
mid-page; then `records()` or `walk_headers()`.
Hands on: the same values. `records()` yields `service.wal.record.XLogRecord`s equal field
for field to the Python reader's (block references, restored page images, main data,
top-level xid, origin), `walk_headers()` the same `(lsn, tot_len, rmid, info, xid)`
tuples, and the position properties (`version`, `wal_format`, `last_lsn`, `end_lsn`,
`next_lsn`, `end_of_wal`, `buffered_bytes`) follow the same rules.

Guarantees: every guarantee of `XLogReader` (page headers, record headers and CRC32C
checked; typed errors naming the same LSN with the same message; end of WAL sticky;
XLOG_SWITCH skips to the next segment; nothing skipped, nothing guessed). The Rust side
(`service/native`, module `service._native`) is a port of that reference, held to it by
tests/service/wal/test_native_reader.py.

How it crosses the boundary: once per `records()` call for the walk, which runs in Rust
with the GIL released over every record the fed bytes hold and returns how many it found
plus the error that ended it, if any; then once per slice of 1024 records to turn them
into Python objects (never once per record or field). This generator yields them and
then raises that error, so a caller sees what the Python generator shows. While it
yields, the position properties describe the record just yielded (as the Python
reader's do). A caller that stops early (a `break`, a `return`, a closed generator) puts
the native reader back to just after the last record it took (`rewind`), so the next
`records()` resumes exactly where the Python reader would.
Records are built in Rust slot by slot (service/native/src/glue/slots.rs): the very
`XLogRecord` / `BlockRef` objects the Python reader's dataclass constructors give,
without a Python frame per object.

Memory: the native reader keeps the last batch's bytes until the next `feed`/`records()`
call (for `rewind`); `buffered_bytes` still reports what the Python reader would hold.
Pure: no I/O. Not thread-safe. Do not call `feed` while iterating.
"""

from __future__ import annotations

from collections.abc import Collection, Iterator
from functools import partial
from typing import TYPE_CHECKING

from service import _native
from service.errors import PgcdcError, UnsupportedVersionError, WalCorruptionError, WalError
from service.wal.format import DEFAULT_FORMAT, DEFAULT_SEGMENT_SIZE, FORMATS, WalFormat
from service.wal.reader import HeaderTuple
from service.wal.record import BlockRef, RelFileLocator, XLogRecord

if TYPE_CHECKING:
    from service._native import HeapRows
    from service.decode.events import (  # the caller's classes
        InsertRows,
        InsertRun,
        PredecodedRecord,
    )

# How many walked records become Python objects per `take`: enough to make the call
# cost vanish, few enough that a 16 MB chunk never lives as 100k+ objects at once. An
# InsertRun open at a slice's end goes on past it (it is one object, its rows in Rust),
# so runs are as long as the WAL makes them, not cut every 512 inserts with their index
# inserts: the per-run Python of the driver, the reorder buffer and the plugin is paid
# once per run.
_SLICE = 1024

# The classes a native error kind becomes (wal::ErrorKind::class_name in Rust).
_ERRORS: dict[str, type[PgcdcError]] = {
    "WalError": WalError,
    "WalCorruptionError": WalCorruptionError,
    "UnsupportedVersionError": UnsupportedVersionError,
}


class NativeXLogReader:
    """Incremental WAL page/record reader in Rust, with `XLogReader`'s interface.

    `_at` is the record being yielded by a running `records()` generator (None between
    calls): while set, the position properties answer for it, as the Python reader's do
    at its `yield`; `_held` is then what the Python reader holds during its walk (its
    buffer as trimmed when the walk began).
    """

    __slots__ = ("_armed", "_at", "_held", "_native", "_run")

    def __init__(
        self,
        start_lsn: int,
        *,
        segment_size: int = DEFAULT_SEGMENT_SIZE,
        prev_lsn: int | None = None,
        verify_crc: bool = True,
    ) -> None:
        self._native = _native.WalReader(
            start_lsn,
            segment_size,
            prev_lsn,
            verify_crc,
            XLogRecord,
            BlockRef,
            RelFileLocator,
            _ERRORS,
        )
        self._at: XLogRecord | PredecodedRecord | InsertRun | None = None
        self._held = 0
        self._armed = False  # predecode_heap
        self._run: type[InsertRun] | None = None  # predecode_heap's, if given

    # --- public API (as XLogReader) ---------------------------------------------------

    @property
    def version(self) -> int | None:
        """PostgreSQL major version from the page magic (None before any page header)."""
        magic = self._native.page_magic
        return FORMATS[magic].version if magic is not None else None

    @property
    def wal_format(self) -> WalFormat:
        """The format table in use (the shared default before any page header)."""
        magic = self._native.page_magic
        return FORMATS[magic] if magic is not None else DEFAULT_FORMAT

    @property
    def end_of_wal(self) -> bool:
        """True once the end of valid WAL was reached (sticky)."""
        return False if self._at is not None else self._native.end_of_wal

    @property
    def last_lsn(self) -> int | None:
        """ReadRecPtr of the last record yielded (or the `prev_lsn` given)."""
        return self._at.lsn if self._at is not None else self._native.last_lsn

    @property
    def end_lsn(self) -> int:
        """EndRecPtr of the last record yielded: where reading continues."""
        return self._at.end_lsn if self._at is not None else self._native.next_lsn

    @property
    def next_lsn(self) -> int:
        """Where the next record (or page header) will be read."""
        return self.end_lsn

    @property
    def buffered_bytes(self) -> int:
        """How many fed bytes the Python reader would still hold here."""
        return self._held if self._at is not None else self._native.buffered_bytes

    def feed(self, data: bytes, at_lsn: int) -> None:
        """Append raw WAL bytes that start at `at_lsn` (see `XLogReader.feed`)."""
        self._native.feed(data if type(data) is bytes else bytes(data), at_lsn)

    def records(self) -> Iterator[XLogRecord]:
        """Yield every complete record available, fully decoded (DecodeXLogRecord).
        Not for an armed reader (`predecode_heap`): its records are `decoded_records`'."""
        if self._armed:
            raise RuntimeError("a reader armed by predecode_heap yields decoded_records()")
        return self._records()  # type: ignore[return-value]  # unarmed: XLogRecords only

    def watch_relations(self, locators: Collection[RelFileLocator]) -> None:
        """Hand on every record with a block of one of `locators` whole, as its
        `XLogRecord` (blocks, data, page images), even once armed (`predecode_heap`):
        the historic pg_class (`service.schema.pgclass`) rebuilds its pages from them.
        Replaces the last set; the Python reader hands on every record whole anyway."""
        self._native.watch_relations([(x.spc_oid, x.db_oid, x.rel_number) for x in locators])

    def predecode_heap(
        self,
        decoder: object,
        record: type[PredecodedRecord],
        bare_rmids: Collection[int] = (),
        run: type[InsertRun] | None = None,
        rows: type[InsertRows] | None = None,
        runs_from: int = 0,
        inert_ops: Collection[tuple[int, int]] = (),
    ) -> None:
        """Arm the reader: from now on every table-change heap record (Heap INSERT,
        DELETE, UPDATE, HOT_UPDATE; Heap2 MULTI_INSERT) is parsed in the walk by
        `decoder` (service._native.HeapDecoder, the parsers of
        `service.decode.native_heap`) and handed on by `decoded_records` as a `record`
        (the PredecodedRecord NamedTuple, built from its fields' tuple by
        `tuple.__new__`: its generated `__new__` would cost a Python call per record).
        A record the parser refuses still comes as its `XLogRecord`. A record of an rmgr
        in `bare_rmids` (one the decoder gives no events for) comes the same way, with
        no events, and without its block references and data ever being built.
        With `run` (the InsertRun NamedTuple) and `rows` (InsertRows), consecutive plain
        inserts of one transaction into one relation come as one `run` instead of a
        record each, its inserts as the `rows` of the native core's HeapRows; no run
        holds a record logged before `runs_from` (those come one by one, so a consumer
        that skips them never meets a run straddling that LSN). The XLOG, Heap and
        Heap2 records of `inert_ops` ((rmid, op) the decoder does nothing with) may sit
        inside a run, counted in its `records` as a bare rmgr's record is; outside one
        they come as a bare rmgr's record does (no events, no blocks built). A record
        with a block of a watched relation (`watch_relations`) always comes whole."""
        make_run = None
        if run is not None:
            if rows is None:
                raise TypeError("predecode_heap: a run needs the class of its rows")
            make_run = partial(_make_run, run, rows)
        self._native.predecode_heap(
            decoder,
            partial(tuple.__new__, record),
            sorted(bare_rmids),
            make_run,
            runs_from,
            sorted(inert_ops),
        )
        self._armed = True
        self._run = run

    def decoded_records(self) -> Iterator[XLogRecord | PredecodedRecord | InsertRun]:
        """`records()` of an armed reader: table-change heap records come decoded."""
        return self._records()

    def walk_headers(self) -> Iterator[HeaderTuple]:
        """Yield `(lsn, tot_len, rmid, info, xid)` per record: pages, headers and CRCs
        checked exactly as `records()`, without decoding block references. The position
        properties are up to date when the walk pauses, raises or is closed, not after
        every record (the Python reader's follow every record; a caller that reads them
        only after the walk, as every caller does, sees the same values)."""
        return self._walk_headers()

    # --- the batch, yielded -----------------------------------------------------------

    def _records(self) -> Iterator[XLogRecord | PredecodedRecord | InsertRun]:
        self._held = self._native.buffered_bytes
        count, error = self._native.records()
        run = self._run
        taken = 0
        try:
            while taken < count:
                for rec in self._native.take(_SLICE):
                    self._at = rec
                    taken += rec.records if type(rec) is run else 1  # a run: its records
                    yield rec
        except BaseException:
            # The caller stopped (or threw) at a yield: stand where the Python reader
            # stands after that record, then let the exception go on.
            self._native.rewind(taken)
            raise
        finally:
            self._at = None
        if error is not None:
            raise error

    def _walk_headers(self) -> Iterator[HeaderTuple]:
        count, error = self._native.walk_headers()
        taken = 0
        try:
            while taken < count:
                for head in self._native.take(_SLICE):
                    taken += 1
                    yield head
        except BaseException:
            self._native.rewind(taken)
            raise
        if error is not None:
            raise error


def _make_run(
    run: type[InsertRun],
    rows: type[InsertRows],
    fields: tuple[int, int, int, int, int, HeapRows],
) -> InsertRun:
    """`run` from the walk's `(first_lsn, lsn, end_lsn, xid, records, heap_rows)`, its
    rows wrapped as `rows` (once per run, not per row)."""
    first_lsn, lsn, end_lsn, xid, records, heap_rows = fields
    return tuple.__new__(run, (first_lsn, lsn, end_lsn, xid, records, rows(heap_rows)))
