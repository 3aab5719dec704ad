"""COPY BINARY parsing: `COPY ... TO STDOUT (FORMAT binary)` output, split into rows.

Receives the bytes the server streams, in arbitrary pieces (as psycopg2's
`copy_expert` writes them into a file-like target); hands on, in order, one list of
fields per tuple: `None` for NULL, else the field's bytes in its type's send format
(the caller rewrites them into the stored form, service.types.sendform). The layout is
PostgreSQL's copy.c: an 11-byte signature, flags and a header extension, then per
tuple an int16 field count and per field an int32 length (-1: NULL) and the bytes, then
the trailer (a field count of -1).

No I/O: the caller owns the connection. Memory: the unparsed tail only (at most one row
plus one network chunk). Errors: a bad signature, a row of the wrong width, data after
the trailer or an end without it raise `DecodeError`.

Under the native core (connectors.tablesnap.chunks decides), a chunk's stream is kept
whole instead (`CopyBuffer`) and split by `service._native.CopyChunk`
(tablesnap::copy::parse, the same layout and errors): `native_chunk` turns its ValueError
into the DecodeError naming the table, and `ChunkRows` shows its rows as the lists of
fields `CopyRows` hands on, built only for the rows Python reads.
"""

from __future__ import annotations

import io
import struct
from collections.abc import Callable, Iterator, Sequence
from typing import Any, overload

from service._binary import BE_I16, BE_I32
from service.errors import DecodeError

COPY_SIGNATURE = b"PGCOPY\n\xff\r\n\x00"
_HEADER = struct.Struct(">ii")  # flags, header extension length


class CopyRows:
    """A file-like target for `copy_expert`: parses COPY BINARY as it arrives.

    Calls `on_row(fields)` per tuple (`None` for NULL, else the send-format bytes).
    Memory: the unparsed tail only (at most one row plus one network chunk).
    """

    def __init__(self, ncols: int, on_row: Callable[[list[bytes | None]], None]) -> None:
        self.ncols = ncols
        self.on_row = on_row
        self.rows = 0
        self.finished = False
        self._buf = bytearray()
        self._header = False

    def write(self, data: bytes | memoryview) -> int:
        if self.finished:
            raise DecodeError("COPY data after its trailer")
        self._buf += data
        self._parse()
        return len(data)

    def _parse(self) -> None:
        buf = self._buf
        pos = 0
        if not self._header:
            if len(buf) < len(COPY_SIGNATURE) + _HEADER.size:
                return
            if bytes(buf[: len(COPY_SIGNATURE)]) != COPY_SIGNATURE:
                raise DecodeError("COPY BINARY output does not start with its signature")
            _flags, ext = _HEADER.unpack_from(buf, len(COPY_SIGNATURE))
            start = len(COPY_SIGNATURE) + _HEADER.size + ext
            if len(buf) < start:
                return
            pos, self._header = start, True
        n = len(buf)
        while pos + 2 <= n:
            count = BE_I16.unpack_from(buf, pos)[0]
            if count == -1:
                self.finished = True
                pos += 2
                break
            if count != self.ncols:
                raise DecodeError(f"COPY row has {count} fields, expected {self.ncols}")
            at = pos + 2
            fields: list[bytes | None] = []
            for _ in range(count):
                if at + 4 > n:
                    break
                size = BE_I32.unpack_from(buf, at)[0]
                at += 4
                if size < 0:
                    fields.append(None)
                    continue
                if at + size > n:
                    break
                fields.append(bytes(buf[at : at + size]))
                at += size
            if len(fields) < count:
                break  # the rest of this row is in a later chunk
            pos = at
            self.rows += 1
            self.on_row(fields)
        del buf[:pos]

    def close(self) -> None:
        if not self.finished or self._buf:
            raise DecodeError("COPY BINARY output ended without its trailer")


class CopyBuffer(io.BytesIO):
    """A file-like target for `copy_expert` that keeps the whole stream (one chunk).

    A BytesIO: its `getvalue` hands over the buffer it grew (shrunk to size, not
    copied), so a chunk is held once while it is turned into bytes, not twice (a list
    of the parts joined held both the parts and the joined copy at once)."""


def native_chunk(native: Any, data: bytes, ncols: int, relation: str) -> Any:
    """`service._native.CopyChunk` of a whole COPY BINARY stream of rows of `ncols`
    fields; a malformed stream raises DecodeError naming `relation`."""
    try:
        return native.CopyChunk(data, ncols)
    except ValueError as exc:
        raise DecodeError(str(exc), relation=relation) from exc


class ChunkRows(Sequence[list[bytes | None]]):
    """The first `nrows` rows of a native `CopyChunk`, each as its first `width` fields
    (what `CopyRows` hands on for the selected columns), made on access."""

    __slots__ = ("chunk", "nrows", "width")

    def __init__(self, chunk: Any, width: int, nrows: int) -> None:
        self.chunk = chunk
        self.width = width  # the fields a row's values are made of (the rest: key text)
        self.nrows = nrows

    def __len__(self) -> int:
        return self.nrows

    @overload
    def __getitem__(self, i: int) -> list[bytes | None]: ...
    @overload
    def __getitem__(self, i: slice) -> list[list[bytes | None]]: ...
    def __getitem__(self, i: int | slice) -> list[bytes | None] | list[list[bytes | None]]:
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(self.nrows))]
        if i < 0:
            i += self.nrows
        if not 0 <= i < self.nrows:
            raise IndexError(f"row {i} of {self.nrows}")
        row: list[bytes | None] = self.chunk.row(i, self.width)
        return row

    def __iter__(self) -> Iterator[list[bytes | None]]:
        for i in range(self.nrows):
            yield self.chunk.row(i, self.width)
