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
"""

from __future__ import annotations

import struct
from collections.abc import Callable

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
