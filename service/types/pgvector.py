"""pgvector (vector.h, halfvec.h, sparsevec.h): vector, halfvec and sparsevec.

Receives: the varlena payload, little-endian:
- vector: int16 dim, int16 unused, float4 x[dim];
- halfvec: int16 dim, int16 unused, float2 (IEEE half) x[dim];
- sparsevec: int32 dim, int32 nnz, int32 unused, int32 indices[nnz] (0-based,
  ascending), float4 values[nnz].

Hands on: the text of vector_out `[1,2.5]`, halfvec_out (the half widened to float4,
same digits) and sparsevec_out `{1:1.5,3:2}/5` (1-based indices), each number by
float_to_shortest_decimal (float4out's shortest digits). Python values: `vector` and
`halfvec` a list of float (the stored float4/half value), `sparsevec` a `SparseVector`
{dim, indices (1-based), values}.

`*_send_to_stored` turn vector_send / halfvec_send / sparsevec_send (the same fields,
big-endian) into the stored payload, for the initial snapshot's COPY BINARY.

Pure; malformed input raises `DecodeError`.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from service._binary import BE_I16, BE_I32, I16, I32
from service.errors import DecodeError
from service.types.numeric import float_text


@dataclass(slots=True, frozen=True)
class SparseVector:
    """A sparsevec: `dim` dimensions, `values[k]` at 1-based index `indices[k]`."""

    dim: int
    indices: tuple[int, ...]
    values: tuple[float, ...]


def _dense(buf: bytes, width: int, fmt: str, name: str) -> list[float]:
    if len(buf) < 4:
        raise DecodeError(f"{name} datum of {len(buf)} bytes is too short")
    dim = I16.unpack_from(buf, 0)[0]
    if dim < 0 or len(buf) < 4 + width * dim:
        raise DecodeError(f"{name} of {dim} dimensions in {len(buf)} bytes")
    return [float(v) for v in struct.unpack_from(f"<{dim}{fmt}", buf, 4)]


def vector_value(buf: bytes) -> list[float]:
    return _dense(buf, 4, "f", "vector")


def halfvec_value(buf: bytes) -> list[float]:
    return _dense(buf, 2, "e", "halfvec")


def _join(values: list[float]) -> str:
    return "[" + ",".join(float_text(v, single=True) for v in values) + "]"


def vector_text(buf: bytes) -> str:
    """vector_out."""
    return _join(vector_value(buf))


def halfvec_text(buf: bytes) -> str:
    """halfvec_out (HalfToFloat4, then the float4 digits)."""
    return _join(halfvec_value(buf))


def sparsevec_value(buf: bytes) -> SparseVector:
    if len(buf) < 12:
        raise DecodeError(f"sparsevec datum of {len(buf)} bytes is too short")
    dim, nnz = I32.unpack_from(buf, 0)[0], I32.unpack_from(buf, 4)[0]
    if nnz < 0 or len(buf) < 12 + 8 * nnz:
        raise DecodeError(f"sparsevec of {nnz} elements in {len(buf)} bytes")
    indices = struct.unpack_from(f"<{nnz}i", buf, 12)
    values = struct.unpack_from(f"<{nnz}f", buf, 12 + 4 * nnz)
    return SparseVector(dim, tuple(i + 1 for i in indices), tuple(float(v) for v in values))


def sparsevec_text(buf: bytes) -> str:
    """sparsevec_out."""
    sv = sparsevec_value(buf)
    body = ",".join(
        f"{i}:{float_text(v, single=True)}" for i, v in zip(sv.indices, sv.values, strict=True)
    )
    return f"{{{body}}}/{sv.dim}"


def _swap_dense(data: bytes, width: int, name: str) -> bytes:
    if len(data) < 4:
        raise DecodeError(f"{name} send value is too short")
    dim = BE_I16.unpack_from(data, 0)[0]
    if dim < 0 or len(data) != 4 + width * dim:
        raise DecodeError(f"{name} send value of {len(data)} bytes for {dim} dimensions")
    code = "f" if width == 4 else "e"
    items = struct.unpack_from(f">{dim}{code}", data, 4)
    return I16.pack(dim) + data[2:4][::-1] + struct.pack(f"<{dim}{code}", *items)


def vector_send_to_stored(data: bytes) -> bytes:
    return _swap_dense(data, 4, "vector")


def halfvec_send_to_stored(data: bytes) -> bytes:
    return _swap_dense(data, 2, "halfvec")


def sparsevec_send_to_stored(data: bytes) -> bytes:
    if len(data) < 12:
        raise DecodeError("sparsevec send value is too short")
    dim, nnz, unused = (BE_I32.unpack_from(data, 4 * k)[0] for k in range(3))
    if nnz < 0 or len(data) != 12 + 8 * nnz:
        raise DecodeError(f"sparsevec send value of {len(data)} bytes for {nnz} elements")
    indices = struct.unpack_from(f">{nnz}i", data, 12)
    values = struct.unpack_from(f">{nnz}f", data, 12 + 4 * nnz)
    return (
        I32.pack(dim)
        + I32.pack(nnz)
        + I32.pack(unused)
        + struct.pack(f"<{nnz}i", *indices)
        + struct.pack(f"<{nnz}f", *values)
    )
