"""The Python jsonpath printer (service.types.jsonpath) on datums the server's
recursion would follow without end, and on a valid path longer than Python's recursion
limit. A long accessor chain prints; offsets that loop or share items without end, and
nesting past MAX_DEPTH, are DecodeError (before: RecursionError, which no caller
classifies). The native printer stops at the same points
(service/native/src/types/jsonpath.rs)."""

from __future__ import annotations

import struct

import pytest

from service.errors import DecodeError
from service.types.jsonpath import ADD, KEY, MAX_DEPTH, NOT, ROOT, jsonpath_text

LAX = struct.pack("<I", 0x80000001)


def _key(name: bytes, nxt: int) -> bytes:
    """A KEY item (type, padding, next offset, length, text, NUL), padded to 4."""
    item = bytes([KEY, 0, 0, 0]) + struct.pack("<iI", nxt, len(name)) + name + b"\0"
    return item + bytes(-len(item) % 4)


def test_an_accessor_chain_longer_than_the_recursion_limit_prints() -> None:
    n = 5000
    key = _key(b"a", 0)
    size = len(key)
    items = bytes([ROOT, 0, 0, 0]) + struct.pack("<i", 8)
    items += b"".join(_key(b"a", size if i < n - 1 else 0) for i in range(n))
    assert jsonpath_text(LAX + items) == "$" + '."a"' * n


def test_offsets_that_share_items_without_end_are_a_decode_error() -> None:
    # 40 ADD items, both arguments of each the next one: 2^40 visits of a 700-byte
    # datum (within MAX_DEPTH, so only the visit count stops it).
    add = bytes([ADD, 0, 0, 0]) + struct.pack("<iii", 0, 16, 16)
    items = add * 40 + bytes([ROOT, 0, 0, 0]) + struct.pack("<i", 0)
    with pytest.raises(DecodeError, match="without end"):
        jsonpath_text(LAX + items)


def test_arguments_nested_past_max_depth_are_a_decode_error() -> None:
    def nots(depth: int) -> bytes:
        # NOT(NOT(...(ROOT))): each NOT is 12 bytes, its argument right after it
        return b"".join(bytes([NOT, 0, 0, 0]) + struct.pack("<ii", 0, 12) for _ in range(depth)) + (
            bytes([ROOT, 0, 0, 0]) + struct.pack("<i", 0)
        )

    assert jsonpath_text(LAX + nots(MAX_DEPTH)) == "!(" * MAX_DEPTH + "$" + ")" * MAX_DEPTH
    with pytest.raises(DecodeError, match="nested deeper"):
        jsonpath_text(LAX + nots(MAX_DEPTH + 1))
