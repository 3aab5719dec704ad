"""Spill-file store behind the reorder buffer (the on-disk side of ReorderBufferSerializeTXN).

The reorder buffer (`service.reorder.buffer`) hands this store the in-memory changes of
one (sub)transaction when it evicts it, and reads them back in LSN order, lazily, when
the transaction is replayed (`ReorderBufferRestoreChanges`). The buffer itself does no
I/O; everything that touches files is here, behind the `SpillStore` protocol, so a test
can wrap or replace it.

Contract:

- **One directory, one buffer.** `LocalSpillStore(directory)` owns `directory` the way a
  replication slot owns `pg_replslot/<slot>/`. On construction it deletes every
  `run-*` subdirectory left by an earlier run (a crash, a kill, a missing `close()`),
  as `ReorderBufferCleanupSerializedTXNs` does, and then writes only into a fresh
  `run-<pid>-<random>` subdirectory. Files of an earlier run are therefore never read.
- **One file per xid**, `xid-<xid>.spill`, appended to by each serialization of that
  (sub)transaction and deleted by `remove(xid)` (abort, forget, after replay, after a
  streamed run). `close()` deletes the run directory.
- **Format.** A file starts with a 24-byte header: the magic `b"PGCDCSP2"` and the
  16-byte run id. Then records, each `<u32 length><u32 crc32c>` (little-endian: the
  CRC-32C of the payload, as the WAL's records carry, computed in hardware by
  google-crc32c) followed by `length` bytes of payload, whose first byte is its tag:
  - 1: a `HeapChange` in a fixed binary layout (`_HEAP`, then per present tuple
    `_TUPLE` + its data), the hot case;
  - 2: an `InsertRows` (an InsertRun's plain inserts, held by the native core) as ONE
    record for all its rows: the tag, the locator (`_ROWS`: spc, db, rel, u32 each),
    then its rows' `HeapRows.dump()` (service/native/src/reorder/run.rs: version, xid,
    count, per row its LSN, ctid, tuple header, flags (clear_toast, TOAST chunk row) and
    data length, then the data). Read back, it is an InsertRows again (`HeapRows.load`,
    through `service.decode.native_heap.load_rows`, imported only when such a record is
    read, or the `load_rows` the store was given), equal row for row;
  - 3: the same for an InsertRows that holds TOAST chunk rows (`InsertRows.chunks`):
    the tag, the relation's and its toast relation's locators (`_TOAST_ROWS`), then the
    dump, whose chunk rows are read back into the toast relation, so the replay collects
    them natively as it does a run that never spilled. An InsertRows whose rows cannot
    dump (a pure-Python double) or that is not of the file's xid is written as its rows,
    one tag-1 record each;
  - 0: a `pickle` (protocol 5) of any other change object (`TruncateEvent`,
    `MessageEvent`, the buffer's `InternalChange`).
  `write` returns the number of RECORDS written, which is what `read` needs; the
  changes they stand for (an InsertRows, its rows) are the buffer's to count
  (`service.reorder.changes.held`). Without the native extension nothing here needs it:
  only tag 2 does, and only the native reader makes InsertRows.
- **Truncation and damage are detected.** `read(xid, count)` yields exactly `count`
  records (the buffer knows how many it wrote) and raises `SpillFileError` (with the
  xid, and the LSN where known) if the header is not this run's, a record is short,
  fails its CRC or has an unknown tag, a tag-2 record's dump is not one (short,
  trailing bytes, wrong version, count or xid: the native `DecodeError`, chained), or
  the file ends before `count` records or holds more than that. A half-written file is
  never taken as valid.
- **A large record is not copied on its way.** A spill is what holds a transaction
  bigger than work_mem, mostly its TOAST chunk rows: megabytes per record. The writer
  hands a dump to the file as it is (not joined into a buffer first), and the reader
  takes the body of a record larger than its read-ahead straight from the file, as the
  one bytes object the native `load` reads.
- **A failed write leaves the file as it was:** it is cut back to its size before the
  write, so a later append never follows a torn record.
- No fsync: a spill file is worthless after a crash (it is deleted at the next start),
  so durability would only cost time.
"""

from __future__ import annotations

import os
import pickle
import shutil
import struct
import uuid
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import BinaryIO, Protocol

from google_crc32c import extend as _crc_extend
from google_crc32c import value as _crc_value

from service.decode.events import ChangeKind, HeapChange, InsertRows, RawTuple
from service.errors import DecodeError, SpillFileError
from service.wal.record import RelFileLocator

# (dump bytes, xid, locator, toast locator) -> the InsertRows of that dump
# (`HeapRows.load`; the toast relation's locator for a dump with TOAST chunk rows)
LoadRows = Callable[[bytes, int, RelFileLocator, RelFileLocator | None], InsertRows]

MAGIC = b"PGCDCSP2"
_TAG_PICKLE = b"\x00"
_TAG_HEAP = 1
_TAG_ROWS = 2
_ROWS = struct.Struct("<BIII")  # tag, spc, db, rel; then the HeapRows dump
_TAG_TOAST_ROWS = 3
_TOAST_ROWS = struct.Struct("<BIIIIII")  # tag, then the relation's and its toast's locators
# tag, lsn, xid, kind, spc, db, rel, block, offset, flags, origin
_HEAP = struct.Struct("<BQIBIIIIHBI")
_TUPLE = struct.Struct("<HHHBI")  # natts, infomask, infomask2, hoff, data length
_NEW, _OLD, _OLD_IS_KEY, _CLEAR_TOAST, _ON_TOAST, _HAS_ORIGIN = 1, 2, 4, 8, 16, 32
_KINDS = tuple(ChangeKind)
_HEADER_LEN = len(MAGIC) + 16
_RECORD = struct.Struct("<II")  # payload length, CRC-32C of the payload
_READ_CHUNK = 1 << 20
_WRITE_BUFFER = 1 << 18  # records gather up to this; a larger dump is written as it is


def checksum(payload: bytes) -> int:
    """A record's CRC: the CRC-32C of its payload (what `_RECORD` carries)."""
    return int(_crc_value(payload))


class SpillStore(Protocol):
    """What the reorder buffer needs from a spill-file store."""

    def write(self, xid: int, changes: Iterable[object]) -> int:
        """Append `changes` (in LSN order) to xid's file; return how many records were
        written (an InsertRows may be one record for all its rows)."""
        ...

    def read(self, xid: int, count: int) -> Iterator[object]:
        """Yield the `count` records spilled for xid, each as the change it holds, in
        the order they were written."""
        ...

    def remove(self, xid: int) -> None:
        """Delete xid's spilled changes, if any."""
        ...

    def close(self) -> None:
        """Delete everything this store wrote."""
        ...


class LocalSpillStore:
    """`SpillStore` on a local directory (one run subdirectory, one file per xid)."""

    __slots__ = ("_closed", "_load_rows", "_run_dir", "_run_id", "directory")

    def __init__(
        self, directory: str | os.PathLike[str], *, load_rows: LoadRows | None = None
    ) -> None:
        """`load_rows` reads a tag-2 record's dump back; by default the native core's
        (`service.decode.native_heap.load_rows`), imported when first needed."""
        self._load_rows = load_rows
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        # As ReorderBufferCleanupSerializedTXNs: whatever an earlier run left is garbage.
        for entry in self.directory.iterdir():
            if entry.name.startswith("run-"):
                if entry.is_dir() and not entry.is_symlink():
                    shutil.rmtree(entry)
                else:
                    entry.unlink()
        self._run_id = uuid.uuid4().bytes
        self._run_dir = self.directory / f"run-{os.getpid()}-{self._run_id.hex()[:12]}"
        self._run_dir.mkdir()
        self._closed = False

    @property
    def run_dir(self) -> Path:
        """The subdirectory this run writes into."""
        return self._run_dir

    def path(self, xid: int) -> Path:
        """Where xid's changes are spilled (ReorderBufferSerializedPath)."""
        return self._run_dir / f"xid-{xid}.spill"

    def files(self) -> list[Path]:
        """Every spill file currently present (for tests and diagnostics)."""
        if not self._run_dir.exists():
            return []
        return sorted(self._run_dir.iterdir())

    def write(self, xid: int, changes: Iterable[object]) -> int:
        path = self.path(xid)
        try:
            with open(path, "ab", buffering=0) as fh:
                start = os.fstat(fh.fileno()).st_size
                try:
                    return self._write(fh, start == 0, xid, changes)
                except OSError:
                    os.ftruncate(fh.fileno(), start)  # nothing torn stays for an append
                    raise
        except OSError as exc:
            raise SpillFileError(f"could not write spill file {path}: {exc}", xid=xid) from exc

    def _write(self, fh: BinaryIO, new: bool, xid: int, changes: Iterable[object]) -> int:
        """Append `changes` as records to the unbuffered `fh` (the header first when the
        file is `new`); how many records. Small records gather in one buffer; a dump
        is written as its own bytes, never copied into it."""
        out = bytearray()
        if new:
            out += MAGIC
            out += self._run_id
        count = 0
        dumps = pickle.dumps
        pack = _RECORD.pack
        crc = _crc_value
        for change in changes:
            if type(change) is HeapChange:
                payload = _encode_heap(change)
            elif type(change) is InsertRows:
                dump = getattr(change.rows, "dump", None)
                # its rows, one record each: no native dump
                if dump is None or change.xid != xid:
                    for row in change:
                        payload = _encode_heap(row)
                        out += pack(len(payload), crc(payload))
                        out += payload
                    count += change.nrows
                    continue
                loc = change.locator
                toast = change.rows.toast_locator if change.chunks else None
                if toast is None:
                    head = _ROWS.pack(_TAG_ROWS, loc.spc_oid, loc.db_oid, loc.rel_number)
                else:
                    head = _TOAST_ROWS.pack(
                        _TAG_TOAST_ROWS, loc.spc_oid, loc.db_oid, loc.rel_number,
                        toast.spc_oid, toast.db_oid, toast.rel_number,
                    )  # fmt: skip
                body: bytes = dump()
                out += pack(len(head) + len(body), _crc_extend(crc(head), body))
                out += head
                if len(body) < _WRITE_BUFFER:
                    out += body
                else:
                    _write_all(fh, out)
                    out = bytearray()
                    _write_all(fh, body)
                count += 1
                continue
            else:
                payload = _TAG_PICKLE + dumps(change, protocol=5)
            out += pack(len(payload), crc(payload))
            out += payload
            count += 1
            if len(out) >= _WRITE_BUFFER:
                _write_all(fh, out)
                out = bytearray()
        _write_all(fh, out)
        return count

    def read(self, xid: int, count: int) -> Iterator[object]:
        path = self.path(xid)
        try:
            fh = open(path, "rb")  # noqa: SIM115 - closed in the generator's finally
        except OSError as exc:
            raise SpillFileError(f"could not open spill file {path}: {exc}", xid=xid) from exc
        return self._records(fh, path, xid, count)

    def _records(self, fh: BinaryIO, path: Path, xid: int, count: int) -> Iterator[object]:
        unpack_from = _RECORD.unpack_from
        buf = b""
        pos = 0
        eof = False

        def fill(need: int) -> bool:
            nonlocal buf, pos, eof
            while len(buf) - pos < need and not eof:
                chunk = fh.read(max(_READ_CHUNK, need))
                if not chunk:
                    eof = True
                    break
                buf = buf[pos:] + chunk
                pos = 0
            return len(buf) - pos >= need

        try:
            if not fill(_HEADER_LEN) or buf[pos : pos + len(MAGIC)] != MAGIC:
                raise SpillFileError(f"spill file {path} has no valid header", xid=xid)
            if buf[pos + len(MAGIC) : pos + _HEADER_LEN] != self._run_id:
                raise SpillFileError(f"spill file {path} belongs to another run", xid=xid)
            pos += _HEADER_LEN
            for index in range(count):
                if not fill(_RECORD.size):
                    raise SpillFileError(
                        f"spill file {path} ends after {index} of {count} records", xid=xid
                    )
                length, crc = unpack_from(buf, pos)
                pos += _RECORD.size
                if length > _READ_CHUNK and length > len(buf) - pos:
                    # a large record (a dump): from the file, not through `buf`
                    fh.seek(pos - len(buf), os.SEEK_CUR)
                    buf, pos = b"", 0
                    yield self._large(fh, length, crc, path, xid, index)
                    continue
                if not fill(length):
                    raise SpillFileError(
                        f"spill file {path} is truncated in record {index}", xid=xid
                    )
                payload = buf[pos : pos + length]
                pos += length
                if _crc_value(payload) != crc:
                    raise SpillFileError(f"spill file {path} record {index} fails its CRC", xid=xid)
                yield self._record(payload, None, path, xid, index)
            if fill(1):
                raise SpillFileError(f"spill file {path} holds more than {count} records", xid=xid)
        finally:
            fh.close()

    def _large(
        self, fh: BinaryIO, length: int, crc: int, path: Path, xid: int, index: int
    ) -> object:
        """Record `index`, of `length` bytes at `fh`'s position, read straight from the
        file: a dump's body as the one bytes object `load` takes (no copy of it)."""
        first = fh.read(1)
        head_size = {_TAG_ROWS: _ROWS.size, _TAG_TOAST_ROWS: _TOAST_ROWS.size}.get(
            first[0] if first else -1, 1
        )
        head = first + fh.read(min(head_size, length) - 1)
        body = fh.read(length - len(head))
        if len(head) + len(body) != length:
            raise SpillFileError(f"spill file {path} is truncated in record {index}", xid=xid)
        if _crc_extend(_crc_value(head), body) != crc:
            raise SpillFileError(f"spill file {path} record {index} fails its CRC", xid=xid)
        if head_size == 1:  # not a dump: the payload is whole
            return self._record(head + body, None, path, xid, index)
        return self._record(head, body, path, xid, index)

    def _record(
        self, payload: bytes, body: bytes | None, path: Path, xid: int, index: int
    ) -> object:
        """The change record `index` holds: `payload` (with its dump's body apart as
        `body`, for a large one)."""
        tag = payload[0] if payload else -1
        if tag == _TAG_HEAP:
            return _decode_heap(payload)
        if tag in (_TAG_ROWS, _TAG_TOAST_ROWS):
            return self._rows(payload, body, path, xid, index)
        if tag == 0:
            return pickle.loads(payload[1:])
        raise SpillFileError(f"spill file {path} record {index} has unknown tag {tag}", xid=xid)

    def _rows(
        self, payload: bytes, body: bytes | None, path: Path, xid: int, index: int
    ) -> InsertRows:
        """The InsertRows of tag-2 or tag-3 record `index` of xid's file: `payload`, or
        its head with the dump apart (`body`)."""
        head = _ROWS if payload[0] == _TAG_ROWS else _TOAST_ROWS
        if len(payload) < head.size:
            raise SpillFileError(
                f"spill file {path} record {index} is too short for insert rows", xid=xid
            )
        _, spc, db, rel, *on_toast = head.unpack_from(payload)
        toast = _locator(*on_toast) if on_toast else None
        load = self._load_rows
        if load is None:
            try:
                from service.decode.native_heap import load_rows  # noqa: PLC0415 (lazily)
            except ImportError as exc:
                raise SpillFileError(
                    f"spill file {path} record {index} holds native insert rows, but the "
                    f"native core is unavailable: {exc}",
                    xid=xid,
                ) from exc
            load = self._load_rows = load_rows
        dump = payload[head.size :] if body is None else body
        try:
            return load(dump, xid, _locator(spc, db, rel), toast)
        except DecodeError as exc:
            raise SpillFileError(
                f"spill file {path} record {index} holds damaged insert rows: {exc.message}",
                xid=xid,
                lsn=exc.lsn,
            ) from exc

    def remove(self, xid: int) -> None:
        try:
            self.path(xid).unlink(missing_ok=True)
        except OSError as exc:
            raise SpillFileError(f"could not remove spill file: {exc}", xid=xid) from exc

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            shutil.rmtree(self._run_dir, ignore_errors=True)


def _write_all(fh: BinaryIO, data: bytes | bytearray) -> None:
    """Write all of `data` to the unbuffered `fh` (a raw write may take only part)."""
    view = memoryview(data)
    while view:
        n = fh.write(view)
        if not n:
            raise OSError("the file took no bytes")
        view = view[n:]


def _encode_heap(c: HeapChange) -> bytes:
    flags = (
        (_NEW if c.new_tuple is not None else 0)
        | (_OLD if c.old_tuple is not None else 0)
        | (_OLD_IS_KEY if c.old_is_key else 0)
        | (_CLEAR_TOAST if c.clear_toast_afterwards else 0)
        | (_ON_TOAST if c.on_toast_relation else 0)
        | (_HAS_ORIGIN if c.origin is not None else 0)
    )
    loc = c.locator
    parts = [
        _HEAP.pack(
            _TAG_HEAP, c.lsn, c.xid, c.kind, loc.spc_oid, loc.db_oid, loc.rel_number,
            c.block, c.offset, flags, c.origin or 0,
        )
    ]  # fmt: skip
    for t in (c.new_tuple, c.old_tuple):
        if t is not None:
            parts.append(_TUPLE.pack(t.natts, t.infomask, t.infomask2, t.hoff, len(t.data)))
            parts.append(t.data)
    return b"".join(parts)


_locators: dict[tuple[int, int, int], RelFileLocator] = {}


def _locator(spc: int, db: int, rel: int) -> RelFileLocator:
    """One RelFileLocator object per relation read back (shared by its changes)."""
    key = (spc, db, rel)
    locator = _locators.get(key)
    if locator is None:
        locator = _locators[key] = RelFileLocator(spc, db, rel)
    return locator


def _decode_heap(payload: bytes) -> HeapChange:
    _, lsn, xid, kind, spc, db, rel, block, offset, flags, origin = _HEAP.unpack_from(payload)
    locator = _locator(spc, db, rel)
    pos = _HEAP.size
    tuples: list[RawTuple | None] = []
    for bit in (_NEW, _OLD):
        if flags & bit:
            natts, infomask, infomask2, hoff, length = _TUPLE.unpack_from(payload, pos)
            pos += _TUPLE.size
            tuples.append(RawTuple(natts, infomask, infomask2, hoff, payload[pos : pos + length]))
            pos += length
        else:
            tuples.append(None)
    return HeapChange(
        lsn, xid, _KINDS[kind], locator, block, offset, tuples[0], tuples[1],
        bool(flags & _OLD_IS_KEY), bool(flags & _CLEAR_TOAST), bool(flags & _ON_TOAST),
        origin if flags & _HAS_ORIGIN else None,
    )  # fmt: skip
