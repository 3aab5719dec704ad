"""COPY BINARY parsing (connectors.postgres.copy_binary): rows whole and in order
however the stream is cut, and typed errors for malformed output."""

from __future__ import annotations

import struct
from collections.abc import Sequence

import pytest

from connectors.postgres.copy_binary import (
    COPY_SIGNATURE,
    ChunkRows,
    CopyBuffer,
    CopyRows,
    native_chunk,
)
from service import _native
from service.errors import DecodeError


def _copy(rows: Sequence[Sequence[bytes | None]]) -> bytes:
    out = bytearray(COPY_SIGNATURE + struct.pack(">ii", 0, 0))
    for row in rows:
        out += struct.pack(">h", len(row))
        for f in row:
            out += struct.pack(">i", -1) if f is None else struct.pack(">i", len(f)) + f
    return bytes(out + struct.pack(">h", -1))


ROWS: list[list[bytes | None]] = [[b"1", None, b""], [b"22", b"x" * 300, None], [None, None, None]]


@pytest.mark.parametrize("chunk", [1, 2, 3, 7, 19, 64, 10_000])
def test_copy_rows_any_chunking(chunk: int) -> None:
    """Rows come out whole and in order however the stream is cut into writes."""
    got: list[list[bytes | None]] = []
    target = CopyRows(3, got.append)
    data = _copy(ROWS)
    for i in range(0, len(data), chunk):
        target.write(data[i : i + chunk])
    target.close()
    assert got == ROWS and target.rows == 3 and target.finished


def test_copy_rows_errors() -> None:
    """Bad signature, wrong field count and a missing trailer are DecodeErrors."""
    with pytest.raises(DecodeError):
        CopyRows(1, lambda f: None).write(b"NOTCOPY\n\xff\r\n\x00" + bytes(8))
    with pytest.raises(DecodeError):
        CopyRows(2, lambda f: None).write(_copy([[b"1"]]))
    truncated = CopyRows(3, lambda f: None)
    truncated.write(_copy(ROWS)[:-2])
    with pytest.raises(DecodeError):
        truncated.close()


def test_native_chunk_rows_equal_python_rows() -> None:
    """The native split (`CopyChunk` through `native_chunk`, shown by `ChunkRows`) gives
    the Python parser's fields, row for row, for the first `width` fields and whole."""
    data = _copy(ROWS)
    python: list[list[bytes | None]] = []
    target = CopyRows(3, python.append)
    buffer = CopyBuffer()
    for i in range(0, len(data), 5):  # as copy_expert writes it, in pieces
        target.write(data[i : i + 5])
        buffer.write(data[i : i + 5])
    target.close()
    chunk = native_chunk(_native, buffer.getvalue(), 3, "public.t")
    assert [chunk.row(i) for i in range(len(chunk))] == python
    rows = ChunkRows(chunk, 2, 2)  # the first two rows' first two fields
    assert len(rows) == 2 and list(rows) == [r[:2] for r in python[:2]]
    assert rows[-1] == python[1][:2] and rows[0:2] == list(rows)
    assert chunk.sizes() == [sum(len(f) for f in r if f is not None) for r in python]
    with pytest.raises(IndexError):
        rows[2]


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"PGCOPY\n\xff\r\n\x01" + b"\x00" * 8 + b"\xff\xff", "signature"),
        (_copy(ROWS)[:-1], "without its trailer"),
        (_copy(ROWS) + b"\x00", "after its trailer"),
        (_copy([[b"1", b"2"]]), "fields, expected 3"),
    ],
)
def test_native_chunk_errors_name_the_table(data: bytes, message: str) -> None:
    """A malformed stream is a DecodeError naming the table, with the Python parser's
    wording."""
    with pytest.raises(DecodeError, match=message) as err:
        native_chunk(_native, data, 3, "public.t")
    assert err.value.relation == "public.t"
