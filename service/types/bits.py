"""Bit strings: bit and varbit (varbit.c).

Receives: the varlena payload, an int32 bit length followed by the bits packed most
significant first, the last byte zero-padded. Hands on: the text bit_out/varbit_out
print, a string of `0` and `1` of exactly the stored length (also the Python value).

Pure; malformed input raises `DecodeError`.
"""

from __future__ import annotations

from service._binary import I32
from service.errors import DecodeError


def bits_text(buf: bytes) -> str:
    if len(buf) < 4:
        raise DecodeError(f"bit string datum of {len(buf)} bytes is too short")
    nbits = I32.unpack_from(buf, 0)[0]
    body = buf[4:]
    if nbits < 0 or len(body) != (nbits + 7) // 8:
        raise DecodeError(f"bit string of {nbits} bits has {len(body)} data bytes")
    if not nbits:
        return ""
    return format(int.from_bytes(body, "big"), f"0{len(body) * 8}b")[:nbits]
