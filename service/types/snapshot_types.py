"""Transaction snapshots (xid8funcs.c): pg_snapshot and txid_snapshot.

Receives: the varlena payload. Both types share one layout and one output function,
pg_snapshot_out: int32 nxip, then FullTransactionId (uint64) xmin, xmax and nxip xips
(the struct's 8-byte alignment does not apply: after the 4-byte varlena header and
nxip, xmin sits at offset 8). Hands on: the text `xmin:xmax:xip,xip,...` (also the
Python value; Debezium has no mapping for these types).

`snapshot_send_to_stored` turns pg_snapshot_send (int32 nxip, int64 xmin, xmax, xips,
big-endian) into the stored form for the initial snapshot's COPY BINARY.

Pure; malformed input raises `DecodeError`.
"""

from __future__ import annotations

import struct

from service.errors import DecodeError

_I32 = struct.Struct("<i")
_U64 = struct.Struct("<Q")
_BE_I32 = struct.Struct(">i")
_BE_U64 = struct.Struct(">Q")


def snapshot_text(buf: bytes) -> str:
    """pg_snapshot_out."""
    if len(buf) < 20:
        raise DecodeError(f"pg_snapshot datum of {len(buf)} bytes is too short")
    nxip = _I32.unpack_from(buf, 0)[0]
    if nxip < 0 or len(buf) != 20 + 8 * nxip:
        raise DecodeError(f"pg_snapshot of {len(buf)} bytes says {nxip} xips")
    xmin, xmax = _U64.unpack_from(buf, 4)[0], _U64.unpack_from(buf, 12)[0]
    xips = ",".join(str(_U64.unpack_from(buf, 20 + 8 * i)[0]) for i in range(nxip))
    return f"{xmin}:{xmax}:{xips}"


def snapshot_send_to_stored(data: bytes) -> bytes:
    if len(data) < 20:
        raise DecodeError("pg_snapshot send value is too short")
    nxip = _BE_I32.unpack_from(data, 0)[0]
    if nxip < 0 or len(data) != 20 + 8 * nxip:
        raise DecodeError(f"pg_snapshot send value of {len(data)} bytes says {nxip} xips")
    values = [_BE_U64.unpack_from(data, 4 + 8 * i)[0] for i in range(nxip + 2)]
    return _I32.pack(nxip) + b"".join(_U64.pack(v) for v in values)
