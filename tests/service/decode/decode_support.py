"""Builders of synthetic `XLogRecord`s for the decoder's unit tests (bytes via struct)."""

from __future__ import annotations

import struct

from service.wal.record import BlockRef, RelFileLocator, XLogRecord

LOC = RelFileLocator(1663, 5, 16384)
LSN = 0x0150A3C8


def block(data: bytes = b"", *, block_id: int = 0, blkno: int = 7, fork: int = 0) -> BlockRef:
    """A block reference to LOC carrying `data`."""
    return BlockRef(
        block_id=block_id,
        locator=LOC,
        fork=fork,
        block=blkno,
        flags=0x20 if data else 0,
        data=data,
        image=None,
        apply_image=False,
    )


def record(
    rmid: int,
    info: int,
    main: bytes = b"",
    blocks: tuple[BlockRef, ...] = (),
    *,
    xid: int = 735,
    lsn: int = LSN,
    toplevel_xid: int | None = None,
    origin: int | None = None,
) -> XLogRecord:
    """A record as the reader would hand it on (lengths are nominal)."""
    return XLogRecord(
        lsn=lsn,
        end_lsn=lsn + 24 + len(main) + 8,
        total_len=24 + len(main),
        xid=xid,
        prev=lsn - 0x38,
        info=info,
        rmid=rmid,
        crc=0,
        main_data=main,
        blocks=blocks,
        toplevel_xid=toplevel_xid,
        origin=origin,
    )


def heap_tuple(payload: bytes, *, natts: int = 2, infomask: int = 0x0802, hoff: int = 24) -> bytes:
    """xl_heap_header (t_infomask2, t_infomask, t_hoff) + tuple bytes from t_bits on."""
    return struct.pack("<HHB", natts, infomask, hoff) + payload


def inval(kind: int, a: int, b: int) -> bytes:
    """One 16-byte SharedInvalidationMessage: int8 id, pad, then two 4-byte fields."""
    return struct.pack("<bxxxIII", kind, a, b, 0)
