"""Text search types (ts_type.h, tsvector.c, tsquery.c): tsvector and tsquery.

Receives: the varlena payload (without its header). Hands on: the exact text
tsvectorout / tsqueryout print; that text is also the Python value (Debezium publishes
tsvector as the string io.debezium.data.Tsvector).

tsvector layout: int32 size, then `size` WordEntry words (uint32 bit fields, lowest
first: haspos:1, len:11, pos:20), then the lexemes; `pos` counts from the end of the
entries. An entry with positions has, at the next even offset after its lexeme, a
uint16 npos and npos WordEntryPos (uint16: weight in the top 2 bits, 3 = A … 0 = D,
position in the low 14 bits).
Text: `'lexeme'` with `'` and `\\` doubled, then `:` and the positions with their
weight letter (none for D), entries separated by a space.

tsquery layout: int32 size, then `size` 12-byte QueryItems in prefix (Polish) order,
then the operand strings. An operand (type 1, QI_VAL): int8 type, uint8 weight (bit
3 A, 2 B, 1 C, 0 D), bool prefix, int32 valcrc, uint32 {length:12, distance:20};
`distance` is its string's offset. An operator (type 2, QI_OPR): int8 type, int8 oper
(1 NOT, 2 AND, 3 OR, 4 PHRASE), int16 distance (phrase), uint32 left. A binary
operator is followed by its right operand's subtree, then its left one.
Text: infix() with priorities NOT 4 > PHRASE 3 > AND 2 > OR 1, `( … )` around a lower
priority (and a phrase on the right of a phrase), `!`, ` & `, ` | `, ` <-> `, ` <N> `.

`tsvector_send_to_stored` turns tsvectorsend's format (int32 count, then per lexeme
the text, a NUL, uint16 npos and the positions) into the stored form for the initial
snapshot's COPY BINARY; tsquery is read there as its text.

Pure; malformed input raises `DecodeError`.
"""

from __future__ import annotations

import struct

from service.errors import DecodeError

_I32 = struct.Struct("<i")
_U32 = struct.Struct("<I")
_U16 = struct.Struct("<H")
_I16 = struct.Struct("<h")
_BE_I32 = struct.Struct(">i")
_BE_U16 = struct.Struct(">H")

_WEIGHT = ("", "C", "B", "A")  # WEP_GETWEIGHT 0..3
QI_VAL, QI_OPR = 1, 2
OP_NOT, OP_AND, OP_OR, OP_PHRASE = 1, 2, 3, 4
_PRIORITY = {OP_NOT: 4, OP_AND: 2, OP_OR: 1, OP_PHRASE: 3}  # tsearch_op_priority
_ITEM = 12


def _quote(lexeme: bytes) -> str:
    text = lexeme.decode("utf-8")
    return "'" + text.replace("\\", "\\\\").replace("'", "''") + "'"


def tsvector_text(buf: bytes) -> str:
    """tsvectorout."""
    if len(buf) < 4:
        raise DecodeError(f"tsvector datum of {len(buf)} bytes is too short")
    size = _I32.unpack_from(buf, 0)[0]
    strbase = 4 + 4 * size
    if size < 0 or strbase > len(buf):
        raise DecodeError(f"tsvector of {len(buf)} bytes says {size} entries")
    out: list[str] = []
    for i in range(size):
        word = _U32.unpack_from(buf, 4 + 4 * i)[0]
        haspos, length, pos = word & 1, (word >> 1) & 0x7FF, word >> 12
        start = strbase + pos
        if start + length > len(buf):
            raise DecodeError("tsvector lexeme overruns its datum")
        entry = _quote(buf[start : start + length])
        if haspos:
            at = strbase + ((pos + length + 1) & ~1)  # SHORTALIGN
            npos = _U16.unpack_from(buf, at)[0]
            if npos:
                marks = []
                for j in range(npos):
                    wep = _U16.unpack_from(buf, at + 2 + 2 * j)[0]
                    marks.append(f"{wep & 0x3FFF}{_WEIGHT[wep >> 14]}")
                entry += ":" + ",".join(marks)
        out.append(entry)
    return " ".join(out)


class _Infix:
    """tsquery.c infix(): walks the Polish-order items from `cur`."""

    __slots__ = ("buf", "cur", "opbase", "size")

    def __init__(self, buf: bytes, size: int) -> None:
        self.buf, self.size, self.cur = buf, size, 0
        self.opbase = 4 + _ITEM * size

    def render(self, parent: int, right_phrase: bool) -> str:
        if self.cur >= self.size:
            raise DecodeError("tsquery operator lacks an operand")
        at = 4 + _ITEM * self.cur
        kind = self.buf[at]
        self.cur += 1
        if kind == QI_VAL:
            return self._operand(at)
        if kind != QI_OPR:
            raise DecodeError(f"tsquery item of type {kind}")
        oper = self.buf[at + 1]
        if oper not in _PRIORITY:
            raise DecodeError(f"tsquery operator {oper}")
        priority = _PRIORITY[oper]
        if oper == OP_NOT:
            inner = "!" + self.render(priority, False)
            return f"( {inner} )" if priority < parent else inner
        distance = _I16.unpack_from(self.buf, at + 2)[0]
        right = self.render(priority, oper == OP_PHRASE)
        left = self.render(priority, False)
        match oper:
            case 2:
                op = " & "
            case 3:
                op = " | "
            case _:
                op = " <-> " if distance == 1 else f" <{distance}> "
        text = left + op + right
        if priority < parent or (oper == OP_PHRASE and right_phrase):
            return f"( {text} )"
        return text

    def _operand(self, at: int) -> str:
        weight, prefix = self.buf[at + 1], self.buf[at + 2]
        bits = _U32.unpack_from(self.buf, at + 8)[0]
        length, distance = bits & 0xFFF, bits >> 12
        start = self.opbase + distance
        if start + length > len(self.buf):
            raise DecodeError("tsquery operand overruns its datum")
        text = _quote(self.buf[start : start + length])
        if weight or prefix:
            text += ":" + ("*" if prefix else "")
            text += "".join(
                ch for bit, ch in ((8, "A"), (4, "B"), (2, "C"), (1, "D")) if weight & bit
            )
        return text


def tsquery_text(buf: bytes) -> str:
    """tsqueryout."""
    if len(buf) < 4:
        raise DecodeError(f"tsquery datum of {len(buf)} bytes is too short")
    size = _I32.unpack_from(buf, 0)[0]
    if size < 0 or 4 + _ITEM * size > len(buf):
        raise DecodeError(f"tsquery of {len(buf)} bytes says {size} items")
    if size == 0:
        return ""
    walker = _Infix(buf, size)
    text = walker.render(-1, False)
    if walker.cur != size:
        raise DecodeError(f"tsquery has {size - walker.cur} items beyond its tree")
    return text


def tsvector_send_to_stored(data: bytes) -> bytes:
    """tsvectorsend → the stored tsvector (entries in the sent order, which is sorted)."""
    if len(data) < 4:
        raise DecodeError("tsvector send value is too short")
    count = _BE_I32.unpack_from(data, 0)[0]
    off = 4
    words: list[int] = []
    strings = bytearray()
    for _ in range(count):
        end = data.index(b"\x00", off)
        lexeme = data[off:end]
        off = end + 1
        npos = _BE_U16.unpack_from(data, off)[0]
        off += 2
        pos = len(strings)
        words.append((1 if npos else 0) | (len(lexeme) << 1) | (pos << 12))
        strings += lexeme
        if npos:
            if len(strings) & 1:
                strings.append(0)
            strings += _U16.pack(npos)
            for _ in range(npos):
                strings += _U16.pack(_BE_U16.unpack_from(data, off)[0])
                off += 2
    if off != len(data):
        raise DecodeError(f"tsvector send value has {len(data) - off} trailing bytes")
    return _I32.pack(count) + b"".join(_U32.pack(w) for w in words) + bytes(strings)
