"""contrib/hstore (hstore.h, hstore_io.c): key/value bags.

Receives: the varlena payload. Layout: uint32 size_ (HS_FLAG_NEWVERSION 0x80000000 and
the pair count in the low 28 bits), then 2 * count HEntry (uint32: HENTRY_ISFIRST
0x80000000, HENTRY_ISNULL 0x40000000, the end offset in the low 30 bits), key then
value for each pair, then the strings; an entry starts where the previous one ended
(0 for the one flagged ISFIRST). Pairs are stored sorted (by key length, then bytes),
and hstore_out prints them in that order.

Hands on: `hstore_text` (hstore_out: `"k"=>"v", "k2"=>NULL`, `"` and `\\` escaped with
a backslash, empty for no pairs) and `hstore_value`, a dict in the same order, a NULL
value as None. `hstore_send_to_stored` rebuilds the stored form from hstore_send's
(int32 count; per pair int32 key length, key, int32 value length or -1, value), for the
initial snapshot's COPY BINARY.

An hstore in the pre-9.0 layout (no NEWVERSION flag: only in clusters upgraded from
8.4) raises `DecodeError`; pgcdc does not guess between the two layouts as
hstore_upgrade does. Pure.
"""

from __future__ import annotations

from service._binary import BE_I32, U32
from service.errors import DecodeError

HS_FLAG_NEWVERSION = 0x80000000
HENTRY_ISFIRST = 0x80000000
HENTRY_ISNULL = 0x40000000
HENTRY_POSMASK = 0x3FFFFFFF


def _pairs(buf: bytes) -> list[tuple[bytes, bytes | None]]:
    if len(buf) == 0:
        return []  # hstore_upgrade: a bare header is an empty hstore in either layout
    if len(buf) < 4:
        raise DecodeError(f"hstore datum of {len(buf)} bytes is too short")
    size = U32.unpack_from(buf, 0)[0]
    if not size & HS_FLAG_NEWVERSION:
        raise DecodeError("hstore in the pre-9.0 layout (not upgraded) cannot be decoded")
    count = size & 0x0FFFFFFF
    base = 4 + 8 * count
    if len(buf) < base:
        raise DecodeError(f"hstore of {count} pairs in {len(buf)} bytes")
    out: list[tuple[bytes, bytes | None]] = []
    prev_end = 0
    for i in range(count):
        parts: list[bytes | None] = []
        for j in (0, 1):
            entry = U32.unpack_from(buf, 4 + 8 * i + 4 * j)[0]
            start = 0 if entry & HENTRY_ISFIRST else prev_end
            end = entry & HENTRY_POSMASK
            if end < start or base + end > len(buf):
                raise DecodeError(f"hstore entry {2 * i + j} runs out of its datum")
            parts.append(None if j and entry & HENTRY_ISNULL else buf[base + start : base + end])
            prev_end = end
        key = parts[0]
        assert key is not None
        out.append((key, parts[1]))
    return out


def _quoted(raw: bytes) -> str:
    return '"' + raw.decode("utf-8").replace("\\", "\\\\").replace('"', '\\"') + '"'


def hstore_text(buf: bytes) -> str:
    """hstore_out."""
    return ", ".join(f"{_quoted(k)}=>{'NULL' if v is None else _quoted(v)}" for k, v in _pairs(buf))


def hstore_value(buf: bytes) -> dict[str, str | None]:
    """The pairs in stored order; a NULL value is None."""
    return {k.decode("utf-8"): None if v is None else v.decode("utf-8") for k, v in _pairs(buf)}


def hstore_send_to_stored(data: bytes) -> bytes:
    """hstore_send's format → the stored payload (pairs kept in the order sent, which
    is the stored, sorted order)."""
    if len(data) < 4:
        raise DecodeError("hstore send value is too short")
    count = BE_I32.unpack_from(data, 0)[0]
    at = 4
    entries: list[int] = []
    strings = bytearray()
    for _ in range(count):
        parts: list[bytes | None] = []
        for _j in (0, 1):
            if at + 4 > len(data):
                raise DecodeError("hstore send value ends inside a pair")
            n = BE_I32.unpack_from(data, at)[0]
            at += 4
            if n < 0:
                parts.append(None)
                continue
            parts.append(data[at : at + n])
            at += n
        key, value = parts
        if key is None:
            raise DecodeError("hstore send value has a NULL key")
        strings += key
        entries.append(len(strings) | (HENTRY_ISFIRST if not entries else 0))
        if value is not None:
            strings += value
        entries.append(len(strings) | (HENTRY_ISNULL if value is None else 0))
    head = U32.pack(count | HS_FLAG_NEWVERSION)
    return head + b"".join(U32.pack(e) for e in entries) + bytes(strings)
