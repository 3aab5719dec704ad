"""COPY BINARY parsing (connectors.postgres.copy_binary): rows whole and in order
however the stream is cut, and typed errors for malformed output."""

from __future__ import annotations

import struct
from collections.abc import Sequence

import pytest

from connectors.postgres.copy_binary import COPY_SIGNATURE, CopyRows
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
