"""Type stub of the extension module built from service/native (src/glue/, one module per stage).

The glue that uses it is `service.wal.native` (and `service.decode.native_heap`, and
`connectors.avro.native_rows` for RowPlan/envelope); see the contract there.
"""

from collections.abc import Callable, Mapping, Sequence
from typing import Any, final

from service.decode.events import Event, HeapChange
from service.errors import PgcdcError
from service.wal.record import XLogRecord

__version__: str

class WalReader:
    def __init__(
        self,
        start_lsn: int,
        segment_size: int,
        prev_lsn: int | None,
        verify_crc: bool,
        make_record: type,
        make_block: type,
        make_locator: Callable[..., Any],
        errors: dict[str, type[PgcdcError]],
    ) -> None: ...
    def feed(self, data: bytes, at_lsn: int) -> None: ...
    def records(self) -> tuple[int, PgcdcError | None]: ...
    def walk_headers(self) -> tuple[int, PgcdcError | None]: ...
    def take(self, n: int) -> list[Any]: ...
    def rewind(self, n: int) -> None: ...
    def predecode_heap(
        self,
        decoder: object,
        make: Callable[..., Any],
        bare_rmids: list[int],
        make_run: Callable[[tuple[int, int, int, int, int, HeapRows]], Any] | None = None,
        runs_from: int = 0,
        inert_ops: list[tuple[int, int]] = ...,
    ) -> None:
        """`make_run` gets `(first_lsn, lsn, end_lsn, xid, records, rows)` per run; no run
        holds a record before `runs_from`; the XLOG/Heap/Heap2 (rmid, op) of `inert_ops`
        may sit inside a run (a ValueError for another rmgr's)."""
    def watch_relations(self, locators: list[tuple[int, int, int]]) -> None:
        """Records with a block of one of these (spc, db, rel) come whole."""
    def _arm_panic_probe(self) -> None: ...
    @property
    def end_of_wal(self) -> bool: ...
    @property
    def next_lsn(self) -> int: ...
    @property
    def last_lsn(self) -> int | None: ...
    @property
    def buffered_bytes(self) -> int: ...
    @property
    def page_magic(self) -> int | None: ...

class HeapDecoder:
    def __init__(
        self,
        raw_tuple: type,
        heap_change: type,
        truncate_event: Callable[..., Any],
        new_cid_event: Callable[..., Any],
        locator: Callable[..., Any],
        kinds: list[Any],
        decode_error: type[PgcdcError],
    ) -> None: ...
    def decode(self, op: str, record: XLogRecord) -> list[Event]: ...

@final
class HeapRows:
    """The rows of a run (src/glue/reorder.rs: inserts, updates or deletes), or a window
    of them sharing the run's buffers; indices are relative to the window. Frozen; no
    sequence protocol beyond `len`."""

    @staticmethod
    def load(
        decoder: HeapDecoder, data: bytes, xid: int, locator: Any, toast: Any = None
    ) -> HeapRows:
        """The HeapRows whose `dump()` is `data` (src/reorder/run.rs), of `xid`, its
        HeapChanges holding `locator` (its TOAST chunk rows' `toast`) and built by
        `decoder`: equal `changes()`. DecodeError (with xid, and an LSN once the rows are
        read) for anything else: damaged, short, trailing bytes, another version or xid,
        chunk rows without `toast`."""
    def __len__(self) -> int: ...
    @property
    def kind(self) -> int: ...  # the rows' ChangeKind value (0, 1, 2); ValueError if empty
    @property
    def head(self) -> tuple[int, int, int, int, Any, int, int, int, int, int]:
        """(kind, first_lsn, last_lsn, xid, locator, len, data_bytes, chunks, olds, bares)."""
    @property
    def xid(self) -> int: ...
    @property
    def locator(self) -> Any: ...  # the RelFileLocator of the rows' HeapChanges
    @property
    def toast_locator(self) -> Any: ...  # its chunk rows' (None: a run without chunks)
    @property
    def first_lsn(self) -> int: ...  # ValueError for an empty window
    @property
    def last_lsn(self) -> int: ...  # ValueError for an empty window
    @property
    def data_bytes(self) -> int: ...  # sum of the rows' tuple data lengths
    @property
    def chunks(self) -> int: ...  # chunk rows: TOAST chunk inserts, bare deletes
    @property
    def bares(self) -> int: ...  # chunk rows that are deletes without an old tuple
    @property
    def olds(self) -> int: ...  # rows holding an UPDATE's old tuple besides its new one
    @property
    def ends_reset(self) -> bool: ...  # last row: a main row with clear_toast_afterwards
    def mains(self) -> HeapRows | None: ...  # the rows not chunk rows (None: no such row)
    def toast_replay(
        self, held: list[tuple[int, int, bytes]] = ...
    ) -> tuple[
        list[tuple[HeapChange, dict[int, bytes] | None]],
        Exception | None,
        bool,
        list[tuple[int, int, bytes]],
        list[int],
    ]:
        """(rows, error, reset, held after, lens): the main rows, each with the chunks
        held for it (None: none held), the chunks collected natively
        (ReorderBufferToastAppendChunk / Reset) from `held` on (chunk_id, last seq,
        data); a refused chunk ends the list, the error (DecodeError, as the Python
        replay's) beside it; whether any row reset the chunks; the values held after
        the window; the data length of each of its chunk rows still held."""
    def change(self, i: int) -> HeapChange: ...  # IndexError outside [0, len)
    def changes(self) -> list[HeapChange]: ...
    def lsns(self) -> list[int]: ...
    def slice(self, i: int, j: int) -> HeapRows: ...  # ValueError unless 0 <= i <= j <= len
    def dump(self) -> bytes:
        """The rows as bytes for a spill record (src/reorder/run.rs: version, xid, count,
        per row lsn/block/offset/natts/infomask/infomask2/hoff/clear_toast/length,
        then the data; no locator), for `HeapRows.load`. ValueError if empty or if
        any row is a TOAST chunk insert (`chunks` > 0)."""
    def fill(
        self, at: int, room: int, base: int, overhead: int, old_base: int = 0
    ) -> tuple[int, int]:
        """(end, added) of this loop (ValueError unless 0 <= at <= len):

        end, added = at, 0
        while end < len(self):
            c = self.change(end)  # its tuples: one, or an update's new and old ones
            added += base + sum(len(t.data) for t in (c.new_tuple, c.old_tuple) if t)
            if c.kind is UPDATE and c.old_tuple is not None:
                added += old_base
            end += 1
            if added + (end - at) * overhead >= room:
                break
        """

class NameCache:
    """The catalog names reg* and aclitem print (glue::names): filled by
    connectors.postgres.catalog_types.CatalogNames, read by RowPlan."""

    def __init__(self) -> None: ...
    def put(self, kind: str, oid: int, text: str) -> None: ...  # ValueError: unknown kind
    def clear(self) -> None: ...
    def get(self, kind: str, oid: int) -> str | None: ...
    def __len__(self) -> int: ...

class RowPlan:
    def __init__(
        self,
        columns: list[tuple[str, int, int, bool, bool, str, int, int, bool]],
        key: list[int],
        relation: str,
        mismatch_error: type[PgcdcError],
        decode_error: type[PgcdcError],
        labels: dict[int, dict[int, str]] | None = None,
        elements: dict[int, tuple[str, int, int, int, int, int]] | None = None,
        composites: dict[int, Any] | None = None,
        missing: dict[int, bytes] | None = None,
        names: NameCache | None = None,  # for reg* and aclitem columns (and arrays of them)
        # a varlena column's field for an unchanged TOAST value (Debezium's placeholder)
        placeholders: dict[int, bytes] | None = None,
    ) -> None: ...
    def take_dropped(self) -> list[str]: ...
    def encode(
        self,
        natts: int,
        infomask: int,
        hoff: int,
        data: bytes,
        lsn: int,
        want_key: bool,
        toast: Mapping[int, bytes] | None = None,
    ) -> tuple[bytes, bytes | None] | str: ...
    def encode_events(
        self,
        tuples: list[Any],
        lsns: list[int],
        value_header: bytes,
        key_header: bytes | None,
        parts: tuple[bytes, bytes, bytes, bytes, bytes | None],
        total: int,
        order: int,
        op: str,
        ts_ns: int,
        toasts: list[Mapping[int, bytes] | None] | None = None,
    ) -> tuple[list[bytes | None], list[bytes | None], str | None]: ...
    def encode_rows(
        self,
        rows: HeapRows,
        value_header: bytes,
        key_header: bytes | None,
        parts: tuple[bytes, bytes, bytes, bytes, bytes | None],
        total: int,
        order: int,
        op: str,
        ts_ns: int,
    ) -> tuple[list[bytes | None], list[bytes | None], str | None]: ...
    def encode_update_rows(
        self,
        rows: HeapRows,
        value_header: bytes,
        key_header: bytes | None,
        parts: tuple[bytes, bytes, bytes, bytes, bytes | None],
        total: int,
        order: int,
        ts_ns: int,
        key_exact: bool,
    ) -> tuple[list[bytes | None], list[bytes | None], str | None]:
        """op "u" events of a window whose rows all hold an UPDATE's old tuple too (before:
        the old row, or null for an old key); stops at a fallback or a changed key."""
    def copy_fallback(self, fields: list[int], ncols: int) -> str | None: ...
    def prepare_copy(self, chunk: CopyChunk, fields: list[int], want_key: bool) -> CopyRecords: ...
    def encode_copy(
        self,
        chunk: CopyChunk,
        fields: list[int],
        rows: list[int],
        start: int,
        value_header: bytes,
        key_header: bytes | None,
        parts: tuple[
            tuple[bytes, bytes, bytes, bytes, bytes | None],
            tuple[bytes, bytes, bytes, bytes, bytes | None],
            tuple[bytes, bytes, bytes, bytes, bytes | None],
        ],
        op: str,
        lsn: int,
        ts_ns: int,
        prepared: CopyRecords | None = None,
    ) -> tuple[list[bytes | None], list[bytes | None], str | None]: ...

class CopyRecords:
    """The records of a chunk's first rows, encoded ahead of publication
    (`RowPlan.prepare_copy`)."""

    def __len__(self) -> int: ...

class CopyChunk:
    """A whole COPY BINARY stream split into rows (src/glue/tablesnap.rs); ValueError if
    malformed."""

    def __init__(self, data: bytes, ncols: int) -> None: ...
    def __len__(self) -> int: ...
    @property
    def ncols(self) -> int: ...
    @property
    def nbytes(self) -> int: ...
    def row(self, i: int, n: int | None = None) -> list[bytes | None]: ...
    def field(self, i: int, j: int) -> bytes | None: ...
    def sizes(self) -> list[int]: ...

class DirectProducer:
    """A run of records enqueued on a confluent-kafka Producer's own librdkafka handle
    (src/glue/kafka.rs, connectors.kafka.native_produce); ValueError if the handle cannot
    be vouched for."""

    def __init__(self, producer: object, library: str, version: int, client_id: str) -> None: ...
    def produce(
        self,
        topic: str,
        keys: list[bytes | None],
        values: list[bytes | None],
        start: int,
        headers: Sequence[tuple[str, bytes]],
    ) -> tuple[int, int]: ...

class TextPlan:
    def __init__(
        self,
        columns: list[tuple[str, int, int, bool, bool, str, str]],
        relation: str,
        mismatch_error: type[PgcdcError],
        decode_error: type[PgcdcError],
        labels: dict[int, dict[int, str]] | None = None,
        elements: dict[int, tuple[str, int, int, int]] | None = None,
        composites: dict[int, Any] | None = None,
        missing: dict[int, bytes] | None = None,
        names: NameCache | None = None,  # for reg* and aclitem columns (and arrays of them)
    ) -> None: ...
    def lines(
        self, tuples: list[Any], lsns: list[int], start: int, prefix: str, skip_nulls: bool
    ) -> tuple[list[str], str | None]: ...
    def rows_lines(
        self, rows: HeapRows, start: int, prefix: str, skip_nulls: bool
    ) -> tuple[list[str], str | None]: ...

def envelope(
    header: bytes,
    before: bytes | None,
    after: bytes | None,
    source_head: bytes,
    sequence_head: bytes,
    lsn: int,
    source_mid: bytes,
    source_tail: bytes,
    block_head: bytes | None,
    total: int,
    order: int,
    op: str,
    ts_ns: int,
) -> bytes: ...
def avro_long(n: int) -> bytes: ...
def avro_string(s: str) -> bytes: ...
def transaction_value(
    header: bytes,
    status: str,
    id: str,
    event_count: int | None,
    collections: list[tuple[str, int]] | None,
    ts_ms: int,
) -> bytes: ...
