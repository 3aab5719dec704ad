"""Pure tests of varlena headers, TOAST resolution and tuple deforming on built bytes."""

from __future__ import annotations

import struct

import lz4.block
import pytest

from service.decode.events import RawTuple
from service.errors import DecodeError, SchemaMismatchError
from service.types.deform import Column, deform
from service.types.varlena import (
    UNCHANGED_TOAST,
    ToastPointer,
    read_varlena,
    resolve_toast,
    varsize_any,
)
from service.wal.pglz import compress_literal


def short(data: bytes) -> bytes:
    return bytes([((len(data) + 1) << 1) | 1]) + data


def long4(data: bytes) -> bytes:
    return struct.pack("<I", (len(data) + 4) << 2) + data


def compressed(method: int, raw: bytes, body: bytes) -> bytes:
    return struct.pack("<II", ((len(body) + 8) << 2) | 2, len(raw) | (method << 30)) + body


def external(rawsize: int, extsize: int, method: int, valueid: int) -> bytes:
    return b"\x01\x12" + struct.pack("<iIII", rawsize, extsize | (method << 30), valueid, 99)


def test_header_forms_give_payload_and_size() -> None:
    """Short, 4-byte, pglz- and lz4-compressed varlenas decode to the same payload."""
    raw = b"hello world " * 20
    for blob in (
        short(b"abc"),
        long4(raw),
        compressed(0, raw, compress_literal(raw)),
        compressed(1, raw, lz4.block.compress(raw, store_size=False)),
    ):
        value, size = read_varlena(blob + b"tail", 0)
        assert size == len(blob) == varsize_any(blob, 0)
        assert value in (b"abc", raw)


def test_external_pointer_and_resolution() -> None:
    """An on-disk pointer parses; chunks resolve it, plain or compressed; absent = UNCHANGED."""
    raw = b"x" * 5000
    ptr, size = read_varlena(external(len(raw) + 4, len(raw), 0, 7), 0)
    assert size == 18 and isinstance(ptr, ToastPointer)
    assert (ptr.va_valueid, ptr.va_toastrelid, ptr.extsize, ptr.is_compressed) == (
        7,
        99,
        5000,
        False,
    )
    assert resolve_toast(ptr, {7: raw}) == raw
    assert resolve_toast(ptr, {8: raw}) is UNCHANGED_TOAST
    with pytest.raises(DecodeError):
        resolve_toast(ptr, {7: raw[:-1]})
    body = struct.pack("<I", len(raw) | (1 << 30)) + lz4.block.compress(raw, store_size=False)
    cptr, _ = read_varlena(external(len(raw) + 4, len(body), 1, 9), 0)
    assert isinstance(cptr, ToastPointer) and cptr.is_compressed and cptr.compression_method == 1
    assert resolve_toast(cptr, {9: body}) == raw


def test_bad_compression_method_is_an_error() -> None:
    """Compression method 3 does not exist and is refused, not guessed."""
    with pytest.raises(DecodeError):
        read_varlena(compressed(3, b"ab", b"ab"), 0)


COLS = [
    Column(1, "a", 16, -1, 1, True, "c"),  # bool
    Column(2, "b", 25, -1, -1, False, "i"),  # text
    Column(3, "c", 20, -1, 8, True, "d"),  # int8
    Column(4, "gone", 0, -1, 4, True, "i", dropped=True),
    Column(5, "d", 23, -1, 4, True, "i", missing=struct.pack("<i", 42)),
    Column(6, "e", 25, -1, -1, False, "i"),
]


def _tuple(body: bytes, natts: int, nulls: list[int] | None = None) -> RawTuple:
    bitmap = b""
    infomask = 0
    if nulls is not None:
        bits = 0
        for i in range(natts):
            if i not in nulls:
                bits |= 1 << i
        bitmap = bits.to_bytes((natts + 7) // 8, "little")
        infomask = 1
    hoff = (23 + len(bitmap) + 7) & ~7
    head = bitmap.ljust(hoff - 23, b"\x00")
    return RawTuple(natts, infomask, natts, hoff, head + body)


def test_deform_alignment_short_headers_dropped_and_missing() -> None:
    """A short varlena is not aligned, int8 is; dropped -> None; absent attrs -> missing."""
    # hoff 24: a at 24; b (short) at 25 unaligned; c aligned to 32; gone at 40.
    body = b"\x01" + short(b"xy") + b"\x00" * 4 + struct.pack("<q", -5) + struct.pack("<i", 3)
    assert deform(_tuple(body, 4), COLS) == [
        b"\x01",
        b"xy",
        struct.pack("<q", -5),
        None,
        struct.pack("<i", 42),
        None,
    ]


def test_deform_nulls_and_4byte_alignment() -> None:
    """Null bits skip storage; a 4-byte-header varlena is aligned to its typalign."""
    # natts 6 with bitmap -> hoff 24; a NULL; b at 24 (aligned) 4-byte header.
    b = long4(b"z" * 200)
    pad = b"\x00" * ((-(24 + len(b))) % 8)
    body = b + pad + struct.pack("<q", 1) + struct.pack("<ii", 3, 9) + short(b"e")
    out = deform(_tuple(body, 6, nulls=[0]), COLS)
    assert out == [None, b"z" * 200, struct.pack("<q", 1), None, struct.pack("<i", 9), b"e"]


def test_deform_overrun_is_schema_mismatch() -> None:
    """A tuple too short for its columns is a SchemaMismatchError naming the relation."""
    with pytest.raises(SchemaMismatchError) as info:
        deform(_tuple(b"\x01" + short(b"xy") + b"\x00" * 4 + b"\x01\x02", 3), COLS, relation="t")
    assert info.value.relation == "t"
    with pytest.raises(SchemaMismatchError):
        deform(_tuple(b"", 7), COLS)


def test_a_varlena_past_the_end_or_a_cut_pointer_is_a_decode_error() -> None:
    """A damaged datum whose next varlena starts at or past its end (a jsonb numeric
    entry of length 0, say), or whose TOAST pointer is cut short, raises the typed
    DecodeError, never IndexError."""
    for buf, off in ((b"", 0), (b"\x05abcd", 5), (b"\x01\x12\x00\x00", 0), (b"\x01", 0)):
        with pytest.raises(DecodeError):
            read_varlena(buf, off)
