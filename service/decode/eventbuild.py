"""Fast constructors of `RawTuple` and `HeapChange` for the native boundary.

Receives: the fields of one raw tuple or heap change, positionally, in the order of
the dataclass fields (`service.decode.events`), from the Rust heap parsers
(`service._native.HeapDecoder`, armed by `service.decode.native_heap`), once per change.
Hands on: an ordinary, immutable `RawTuple` / `HeapChange`, equal (and hash-equal) to
the one the dataclass constructor builds from the same fields.

Why: both are frozen slotted dataclasses, whose `__init__` sets each field through
`object.__setattr__`, the largest cost of turning a natively parsed change into Python
objects. A twin class here has the same `__slots__`, so its plain `__init__` stores fast
and then retypes the instance (`__class__` assignment between layout-identical slotted
classes). A speed trick of the native path only, as `service.wal.recordbuild` is for
records: the Python reference (`service.decode.heap`) builds its events with the
dataclass constructors. The import fails if `events.py` gains a field without the twins
following.
"""

from __future__ import annotations

from dataclasses import fields
from typing import cast

from service.decode.events import ChangeKind, HeapChange, RawTuple
from service.wal.record import RelFileLocator


class _RawTupleInit:
    __slots__ = RawTuple.__slots__

    def __init__(self, natts: int, infomask: int, infomask2: int, hoff: int, data: bytes) -> None:
        self.natts = natts
        self.infomask = infomask
        self.infomask2 = infomask2
        self.hoff = hoff
        self.data = data
        self.__class__ = RawTuple  # type: ignore[assignment]


class _HeapChangeInit:
    __slots__ = HeapChange.__slots__

    def __init__(
        self,
        lsn: int,
        xid: int,
        kind: ChangeKind,
        locator: RelFileLocator,
        block: int,
        offset: int,
        new_tuple: RawTuple | None,
        old_tuple: RawTuple | None,
        old_is_key: bool,
        clear_toast_afterwards: bool = True,
        on_toast_relation: bool = False,
        origin: int | None = None,
    ) -> None:
        self.lsn = lsn
        self.xid = xid
        self.kind = kind
        self.locator = locator
        self.block = block
        self.offset = offset
        self.new_tuple = new_tuple
        self.old_tuple = old_tuple
        self.old_is_key = old_is_key
        self.clear_toast_afterwards = clear_toast_afterwards
        self.on_toast_relation = on_toast_relation
        self.origin = origin
        self.__class__ = HeapChange  # type: ignore[assignment]


def _check_twin(twin: type, cls: type) -> None:
    code = twin.__dict__["__init__"].__code__
    if list(code.co_varnames[1 : code.co_argcount]) != [f.name for f in fields(cls)]:
        raise RuntimeError(f"{twin.__name__} no longer matches the fields of {cls.__name__}")


_check_twin(_RawTupleInit, RawTuple)
_check_twin(_HeapChangeInit, HeapChange)
new_raw_tuple = cast("type[RawTuple]", _RawTupleInit)
new_heap_change = cast("type[HeapChange]", _HeapChangeInit)
