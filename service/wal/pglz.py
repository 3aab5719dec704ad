"""PGLZ decompression (PostgreSQL's built-in LZ77 variant), pure Python.

Receives: a compressed byte string as PostgreSQL writes it (a full-page image with
`BKPIMAGE_COMPRESS_PGLZ`, or the payload of a pglz-compressed TOAST datum after its
varlena header) and the exact raw size.
Hands on: the decompressed bytes, exactly `rawsize` long.
Errors: any malformed input raises `DecodeError` (with `lsn` when the caller gave one);
never returns a wrong-length result. Pure, no I/O.

Format facts (pg_lzcompress.c, pglz_decompress): the stream is a sequence of groups,
each a control byte followed by up to 8 items, taken from the control byte's bits
least significant first. A 0 bit is one literal byte. A 1 bit is a back-reference tag:
`len = (b0 & 0x0F) + 3`, `off = ((b0 & 0xF0) << 4) | b1`, and when `len == 18` a third
byte is added to len. The copy reads `off` bytes back in the output and may overlap
what it writes (a run). `off` is 1..4095 and must not reach before the start.
Decoding stops when the output is full or the input is exhausted; with
`check_complete` both must hold at the same time.
"""

from __future__ import annotations

from service.errors import DecodeError


def decompress(
    src: bytes, rawsize: int, *, check_complete: bool = True, lsn: int | None = None
) -> bytes:
    """Decompress `src` into exactly `rawsize` bytes (as pglz_decompress).

    With `check_complete` (what RestoreBlockImage and toast use) the input must be
    consumed exactly when the output is full. Without it, decoding stops as soon as
    `rawsize` bytes are produced (a slice decompression) and trailing input is ignored.
    """
    out = bytearray()
    sp = 0
    srcend = len(src)
    while sp < srcend and len(out) < rawsize:
        ctrl = src[sp]
        sp += 1
        if ctrl == 0 and sp + 8 <= srcend and len(out) + 8 <= rawsize:
            # Eight literals: the common case in poorly compressible data.
            out += src[sp : sp + 8]
            sp += 8
            continue
        for _ in range(8):
            if sp >= srcend or len(out) >= rawsize:
                break
            if ctrl & 1:
                if sp + 1 >= srcend:
                    raise DecodeError("pglz: truncated back-reference tag", lsn=lsn)
                b0 = src[sp]
                length = (b0 & 0x0F) + 3
                off = ((b0 & 0xF0) << 4) | src[sp + 1]
                sp += 2
                if length == 18:
                    if sp >= srcend:
                        raise DecodeError("pglz: truncated back-reference length", lsn=lsn)
                    length += src[sp]
                    sp += 1
                dp = len(out)
                if off == 0 or off > dp:
                    raise DecodeError(f"pglz: back-reference offset {off} at {dp}", lsn=lsn)
                length = min(length, rawsize - dp)
                start = dp - off
                if off >= length:
                    out += out[start : start + length]
                else:
                    # Overlapping copy: the last `off` bytes repeat as a run.
                    pattern = bytes(out[start:dp])
                    reps = -(-length // off)
                    out += (pattern * reps)[:length]
            else:
                out.append(src[sp])
                sp += 1
            ctrl >>= 1
    if len(out) != rawsize:
        raise DecodeError(f"pglz: produced {len(out)} bytes, expected {rawsize}", lsn=lsn)
    if check_complete and sp != srcend:
        raise DecodeError(
            f"pglz: {srcend - sp} bytes of input left after {rawsize} bytes of output", lsn=lsn
        )
    return bytes(out)


def compress_literal(data: bytes) -> bytes:
    """Encode `data` as a valid pglz stream of literals only (for tests and tools).

    The result is larger than `data`; PostgreSQL would store such data uncompressed,
    but `decompress` must (and does) accept it.
    """
    out = bytearray()
    for i in range(0, len(data), 8):
        out.append(0)
        out += data[i : i + 8]
    return bytes(out)
