"""Fast constructors of `XLogRecord` and `BlockRef` for the native reader's boundary.

Receives: the fields of one record or block reference, positionally, in the order of
the dataclass fields (`service.wal.record`), from the Rust walk (`service._native`)
through `service.wal.native`, once per record.
Hands on: an ordinary, immutable `XLogRecord` / `BlockRef`, equal (and hash-equal) to
the one the dataclass constructor builds from the same fields.

Why: XLogRecord and BlockRef are frozen slotted dataclasses, whose `__init__` sets each
field through `object.__setattr__` (~0.9 us per object, the largest cost of turning
natively walked records into Python objects). A twin class here has the same
`__slots__`, so its plain `__init__` stores fast and then retypes the instance
(`__class__` assignment between layout-identical slotted classes). This is a speed trick
of the native path only; the Python reference (`service.wal.recorddecode`) builds
records with the dataclass constructors. The import fails if `record.py` gains a field
without the twins following.
"""

from __future__ import annotations

from dataclasses import fields
from typing import cast

from service.wal.record import BlockRef, RelFileLocator, XLogRecord


class _XLogRecordInit:
    __slots__ = XLogRecord.__slots__

    def __init__(
        self,
        lsn: int,
        end_lsn: int,
        total_len: int,
        xid: int,
        prev: int,
        info: int,
        rmid: int,
        crc: int,
        main_data: bytes,
        blocks: tuple[BlockRef, ...],
        toplevel_xid: int | None,
        origin: int | None,
    ) -> None:
        self.lsn = lsn
        self.end_lsn = end_lsn
        self.total_len = total_len
        self.xid = xid
        self.prev = prev
        self.info = info
        self.rmid = rmid
        self.crc = crc
        self.main_data = main_data
        self.blocks = blocks
        self.toplevel_xid = toplevel_xid
        self.origin = origin
        # Retype to the layout-identical frozen class (see above).
        self.__class__ = XLogRecord  # type: ignore[assignment]


class _BlockRefInit:
    __slots__ = BlockRef.__slots__

    def __init__(
        self,
        block_id: int,
        locator: RelFileLocator,
        fork: int,
        block: int,
        flags: int,
        data: bytes,
        image: bytes | None,
        apply_image: bool,
        image_len: int,
        hole_offset: int,
        hole_length: int,
        bimg_info: int,
    ) -> None:
        self.block_id = block_id
        self.locator = locator
        self.fork = fork
        self.block = block
        self.flags = flags
        self.data = data
        self.image = image
        self.apply_image = apply_image
        self.image_len = image_len
        self.hole_offset = hole_offset
        self.hole_length = hole_length
        self.bimg_info = bimg_info
        self.__class__ = BlockRef  # type: ignore[assignment]


def _check_twin(twin: type, cls: type) -> None:
    code = twin.__dict__["__init__"].__code__
    params = list(code.co_varnames[1 : code.co_argcount])
    if params != [f.name for f in fields(cls)]:
        raise RuntimeError(f"{twin.__name__} no longer matches the fields of {cls.__name__}")


_check_twin(_XLogRecordInit, XLogRecord)
_check_twin(_BlockRefInit, BlockRef)
new_record = cast("type[XLogRecord]", _XLogRecordInit)
new_blockref = cast("type[BlockRef]", _BlockRefInit)
