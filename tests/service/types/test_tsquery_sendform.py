"""tsquerysend → the stored tsquery (service.types.tsearch.tsquery_send_to_stored), the
rewrite the initial snapshot now reads tsquery columns with instead of their text."""

from __future__ import annotations

import struct

import pytest

from service.errors import DecodeError
from service.types.tsearch import legacy_crc32, tsquery_send_to_stored, tsquery_text

# The items of `'a' & !('b' | 'c':*) <-> 'd':AB` as a PG15 heap stored them
# (pageinspect), before the operand strings.
HEAP_ITEMS = bytes.fromhex(
    "08000000"
    "020200000700000000000000"
    "020401000200000000000000"
    "010c0000334add6701600000"
    "020100000100000000000000"
    "020300000200000000000000"
    "0100010090dfb9f901400000"
    "0100000006efbe8e01200000"
    "01000000bcbeb71701000000"
)


def _val(text: bytes, weight: int = 0, prefix: int = 0) -> bytes:
    return bytes((1, weight, prefix)) + text + b"\x00"


def _op(oper: int, distance: int | None = None) -> bytes:
    return bytes((2, oper)) + (b"" if distance is None else struct.pack(">h", distance))


def _send(*items: bytes) -> bytes:
    return struct.pack(">i", len(items)) + b"".join(items)


QUERY = _send(
    _op(2),
    _op(4, 1),
    _val(b"d", 0xC),
    _op(1),
    _op(3),
    _val(b"c", 0, 1),
    _val(b"b"),
    _val(b"a"),
)


def test_tsquery_rewrite_matches_the_heap_but_for_operand_order() -> None:
    """Items, valcrc (the legacy CRC-32) and findoprnd's left offsets equal a real heap's;
    the operand strings follow the items (tsqueryrecv), the heap's the text (tsquery_in),
    so only the offsets differ; the text printed back is tsqueryout's."""
    stored = tsquery_send_to_stored(QUERY)
    items = bytearray(HEAP_ITEMS)
    for item, offset in ((2, 0), (5, 2), (6, 4), (7, 6)):
        at = 4 + 12 * item + 8
        bits = struct.unpack_from("<I", items, at)[0] & 0xFFF
        struct.pack_into("<I", items, at, bits | offset << 12)
    assert stored == bytes(items) + b"d\x00c\x00b\x00a\x00"
    assert tsquery_text(stored) == "'a' & !( 'b' | 'c':* ) <-> 'd':AB"
    assert legacy_crc32(b"a") == 0x17B7BEBC
    assert tsquery_text(tsquery_send_to_stored(_send())) == ""


def test_deep_not_chain_needs_no_recursion() -> None:
    """5,000 nested NOTs are rewritten (findoprnd's lefts computed without recursion)."""
    stored = tsquery_send_to_stored(_send(*[_op(1)] * 5000, _val(b"z")))
    assert len(stored) == 4 + 12 * 5001 + 2


@pytest.mark.parametrize(
    "send",
    [
        QUERY[:-1],
        QUERY + b"\x00",
        _send(bytes((3, 0))),
        _send(_op(5), _val(b"x")),
        _send(_val(b"x", 0x10)),
        _send(_op(2), _val(b"x")),
        _send(_op(1)),
        _send(_val(b"x"), _val(b"y")),
        struct.pack(">i", 99),
    ],
)
def test_malformed_tsquery_send_values_are_decode_errors(send: bytes) -> None:
    """Truncated, trailing, unknown type or operator, a weight above 0xF, an operator
    without its operands, extra nodes and a count past the value: DecodeError."""
    with pytest.raises(DecodeError):
        tsquery_send_to_stored(send)
