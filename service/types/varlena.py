"""Varlena headers, inline compression and TOAST pointers (varatt.h, detoast.c).

Receives: the bytes of one tuple (or nested datum) and the offset of a variable-length
attribute within them. Hands on: the attribute's total stored length, and its value as
either the *payload* (the bytes after the varlena header, decompressed when the datum
was compressed inline) or a `ToastPointer` when the value lives in a TOAST table.

Header forms, told apart by the first byte (little-endian layout, as on x86/ARM):

- `0x01`: external (`VARATT_IS_1B_E`); the second byte is the vartag. Only
  `VARTAG_ONDISK` (18) can appear in a tuple on disk or in WAL: a `varatt_external`
  of 16 unaligned bytes follows (`va_rawsize`, `va_extinfo`, `va_valueid`,
  `va_toastrelid`).
- low bit 1: short 1-byte header; total length (header included) is `byte >> 1`.
- low two bits `00`: 4-byte header, uncompressed; total length is `uint32 >> 2`.
- low two bits `10`: 4-byte header, compressed inline; `va_tcinfo` follows, its low
  30 bits the raw size (header excluded), its top 2 bits the method (0 pglz, 1 lz4).

`resolve_toast` turns a `ToastPointer` into the payload, given the TOAST chunks the
reorder buffer has reassembled keyed by chunk id (`va_valueid`). A pointer whose chunks
are absent (an UPDATE that left a toasted column unchanged logs only the pointer) yields
the `UNCHANGED_TOAST` marker, never an empty or wrong value.

Pure; no I/O. Malformed input raises `DecodeError`.
"""

from __future__ import annotations

import struct
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

import lz4.block

from service._binary import U32
from service.errors import DecodeError
from service.wal.pglz import decompress as pglz_decompress

_EXTERNAL = struct.Struct("<iIII")

VARTAG_INDIRECT: Final = 1
VARTAG_EXPANDED_RO: Final = 2
VARTAG_EXPANDED_RW: Final = 3
VARTAG_ONDISK: Final = 18

TOAST_PGLZ_COMPRESSION_ID: Final = 0
TOAST_LZ4_COMPRESSION_ID: Final = 1

_VARLENA_EXTSIZE_MASK: Final = 0x3FFFFFFF


@dataclass(slots=True, frozen=True)
class ToastPointer:
    """An on-disk TOAST pointer (`varatt_external`).

    `va_rawsize` is the original size *including* its 4-byte varlena header.
    `va_extinfo` packs the stored (external) size in its low 30 bits and the
    compression method in its top 2 bits. `va_valueid` is the chunk id in the TOAST
    table `va_toastrelid`.
    """

    va_rawsize: int
    va_extinfo: int
    va_valueid: int
    va_toastrelid: int

    @property
    def extsize(self) -> int:
        """Bytes stored in the TOAST table (compressed size if compressed)."""
        return self.va_extinfo & _VARLENA_EXTSIZE_MASK

    @property
    def compression_method(self) -> int:
        return self.va_extinfo >> 30

    @property
    def is_compressed(self) -> bool:
        # VARATT_EXTERNAL_IS_COMPRESSED
        return self.extsize < self.va_rawsize - 4


class Unchanged:
    """Type of `UNCHANGED_TOAST`: a toasted value whose chunks are not in this change."""

    _instance: Unchanged | None = None
    __slots__ = ()

    def __new__(cls) -> Unchanged:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "UNCHANGED_TOAST"

    def __reduce__(self) -> str:
        return "UNCHANGED_TOAST"


UNCHANGED_TOAST: Final = Unchanged()


def varsize_any(buf: bytes, off: int) -> int:
    """Total stored length of the varlena at `off`, header included (VARSIZE_ANY)."""
    b0 = buf[off]
    if b0 == 0x01:
        tag = buf[off + 1]
        if tag == VARTAG_ONDISK:
            return 2 + _EXTERNAL.size
        if tag in (VARTAG_INDIRECT, VARTAG_EXPANDED_RO, VARTAG_EXPANDED_RW):
            return 2 + 8  # a pointer; never on disk, but sized as VARTAG_SIZE says
        raise DecodeError(f"unknown varlena external tag {tag} at offset {off}")
    if b0 & 0x01:
        return b0 >> 1
    return int(U32.unpack_from(buf, off)[0]) >> 2


def decompress_inline(method: int, data: bytes, rawsize: int) -> bytes:
    """Decompress a compressed varlena body (as toast_decompress_datum)."""
    if method == TOAST_PGLZ_COMPRESSION_ID:
        return pglz_decompress(data, rawsize)
    if method == TOAST_LZ4_COMPRESSION_ID:
        try:
            out: bytes = lz4.block.decompress(data, uncompressed_size=rawsize)
        except Exception as exc:  # lz4 raises LZ4BlockError, not exported as a type
            raise DecodeError(f"lz4 decompression failed: {exc}") from exc
        if len(out) != rawsize:
            raise DecodeError(f"lz4: produced {len(out)} bytes, expected {rawsize}")
        return out
    raise DecodeError(f"unknown TOAST compression method {method}")


def read_varlena(buf: bytes, off: int) -> tuple[bytes | ToastPointer, int]:
    """The varlena at `off`: (payload or ToastPointer, total stored length)."""
    if off >= len(buf):
        raise DecodeError(f"varlena at offset {off} is past the end of a {len(buf)}-byte datum")
    b0 = buf[off]
    if b0 == 0x01:
        if off + 2 + _EXTERNAL.size > len(buf):
            raise DecodeError(f"external varlena at offset {off} overruns datum")
        tag = buf[off + 1]
        if tag != VARTAG_ONDISK:
            raise DecodeError(f"varlena external tag {tag} cannot appear on disk (offset {off})")
        rawsize, extinfo, valueid, toastrelid = _EXTERNAL.unpack_from(buf, off + 2)
        return ToastPointer(rawsize, extinfo, valueid, toastrelid), 2 + _EXTERNAL.size
    if b0 & 0x01:
        size = b0 >> 1
        if size < 1 or off + size > len(buf):
            raise DecodeError(f"short varlena of {size} bytes at offset {off} overruns datum")
        return buf[off + 1 : off + size], size
    if off + 4 > len(buf):
        raise DecodeError(f"varlena header at offset {off} overruns datum")
    word = U32.unpack_from(buf, off)[0]
    size = word >> 2
    if size < 4 or off + size > len(buf):
        raise DecodeError(f"varlena of {size} bytes at offset {off} overruns datum")
    if b0 & 0x03 == 0x02:
        tcinfo = U32.unpack_from(buf, off + 4)[0]
        raw = tcinfo & _VARLENA_EXTSIZE_MASK
        return decompress_inline(tcinfo >> 30, buf[off + 8 : off + size], raw), size
    return buf[off + 4 : off + size], size


def toast_pointer_at(buf: bytes, off: int) -> ToastPointer | None:
    """The on-disk TOAST pointer at `off`, or None when the varlena there is not one."""
    if buf[off] != 0x01 or buf[off + 1] != VARTAG_ONDISK:
        return None
    rawsize, extinfo, valueid, toastrelid = _EXTERNAL.unpack_from(buf, off + 2)
    return ToastPointer(rawsize, extinfo, valueid, toastrelid)


def payload(buf: bytes) -> bytes:
    """The payload of a whole varlena held in `buf` (nested datums, array elements).

    External pointers are not allowed inside other datums (toast_flatten_tuple_to_datum
    and construct_md_array detoast them first), so one here is a `DecodeError`.
    """
    value, _ = read_varlena(buf, 0)
    if isinstance(value, ToastPointer):
        raise DecodeError("TOAST pointer nested inside a composite or array datum")
    return value


def resolve_toast(ptr: ToastPointer, chunks: Mapping[int, bytes]) -> bytes | Unchanged:
    """The payload a TOAST pointer stands for (as detoast_external_attr).

    `chunks` maps chunk id to the chunk_data of all its chunks concatenated in
    chunk_seq order. A compressed value's chunks hold `va_tcinfo` then the compressed
    stream, exactly like an inline-compressed body. A missing chunk id yields
    `UNCHANGED_TOAST`; a present but wrong-sized one is a `DecodeError`.
    """
    data = chunks.get(ptr.va_valueid)
    if data is None:
        return UNCHANGED_TOAST
    if len(data) != ptr.extsize:
        raise DecodeError(
            f"TOAST value {ptr.va_valueid} has {len(data)} bytes, pointer says {ptr.extsize}"
        )
    if not ptr.is_compressed:
        return bytes(data)
    tcinfo = U32.unpack_from(data, 0)[0]
    rawsize = tcinfo & _VARLENA_EXTSIZE_MASK
    if rawsize != ptr.va_rawsize - 4:
        raise DecodeError(
            f"TOAST value {ptr.va_valueid}: tcinfo raw size {rawsize}, "
            f"pointer raw size {ptr.va_rawsize - 4}"
        )
    return decompress_inline(tcinfo >> 30, bytes(data[4:]), rawsize)
