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
snapshot's COPY BINARY; `tsquery_send_to_stored` turns tsquerysend's (int32 item count,
then per item in prefix order its int8 type and, for an operand, its weight, prefix
flag and NUL-terminated text, for an operator its oper and, for a phrase, the int16
distance) into the stored tsquery as tsqueryrecv builds it (valcrc the legacy CRC-32,
`left` as findoprnd sets it).

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


def _legacy_crc_table() -> tuple[int, ...]:
    """pg_crc32_table (pg_crc.c): the table of the reflected CRC-32 polynomial."""
    out = []
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ 0xEDB88320 if c & 1 else c >> 1
        out.append(c)
    return tuple(out)


_LEGACY_CRC = _legacy_crc_table()
MAXSTRLEN = (1 << 11) - 1
MAXSTRPOS = (1 << 20) - 1


def legacy_crc32(data: bytes) -> int:
    """INIT/COMP/FIN_LEGACY_CRC32 (pg_crc.h): the pre-9.5 CRC, which runs the reflected
    table with the unreflected shift; tsquery operands still store it (valcrc)."""
    crc = 0xFFFFFFFF
    for b in data:
        crc = _LEGACY_CRC[((crc >> 24) ^ b) & 0xFF] ^ ((crc << 8) & 0xFFFFFFFF)
    return crc ^ 0xFFFFFFFF


def _lefts(kinds: list[tuple[int, int]]) -> list[int]:
    """findoprnd's `left` of each item (0 for an operand), from (type, oper) in prefix
    order; a tree that is not exactly the items is a DecodeError. Subtree sizes are
    computed from the end, without recursion: every item of a prefix expression starts
    the subtree it is the root of."""
    size = len(kinds)
    sizes = [0] * size
    lefts = [0] * size
    for i in range(size - 1, -1, -1):
        kind, oper = kinds[i]
        if kind == QI_VAL:
            sizes[i] = 1
            continue
        if i + 1 >= size:
            raise DecodeError("malformed tsquery: operand not found")
        if oper == OP_NOT:
            lefts[i], sizes[i] = 1, 1 + sizes[i + 1]
            continue
        left = 1 + sizes[i + 1]
        if i + left >= size:
            raise DecodeError("malformed tsquery: operand not found")
        lefts[i], sizes[i] = left, left + sizes[i + left]
    if size and sizes[0] != size:
        raise DecodeError("malformed tsquery: extra nodes")
    return lefts


def tsquery_send_to_stored(data: bytes) -> bytes:
    """tsquerysend → the stored tsquery, as tsqueryrecv builds it: the items in the sent
    (prefix) order, an operand with its weight, prefix flag, valcrc, length and string
    offset, an operator with its phrase distance and findoprnd's left offset, then the
    operand strings, each with its NUL, in item order (tsquery_in keeps them in the
    order of the text instead: the bytes differ from the heap's, the value does not)."""
    if len(data) < 4:
        raise DecodeError("tsquery send value is too short")
    size = _BE_I32.unpack_from(data, 0)[0]
    if size < 0 or size > len(data):
        raise DecodeError(f"tsquery send value says {size} items")
    off = 4
    parsed: list[tuple[int, int, int, bytes]] = []  # type, oper or weight, flag/dist, text
    for _ in range(size):
        if off + 2 > len(data):
            raise DecodeError("tsquery send value ends inside an item")
        kind, arg = data[off], data[off + 1]
        off += 2
        if kind == QI_VAL:
            end = data.find(b"\x00", off + 1)
            if off >= len(data) or end < 0:
                raise DecodeError("tsquery send value ends inside an operand")
            if arg > 0xF:
                raise DecodeError("invalid tsquery: invalid weight bitmap")
            parsed.append((kind, arg, data[off], data[off + 1 : end]))
            off = end + 1
        elif kind == QI_OPR:
            if arg not in _PRIORITY:
                raise DecodeError(f"invalid tsquery: unrecognized operator type {arg}")
            distance = 0
            if arg == OP_PHRASE:
                if off + 2 > len(data):
                    raise DecodeError("tsquery send value ends inside an item")
                distance = struct.unpack_from(">h", data, off)[0]
                off += 2
            parsed.append((kind, arg, distance, b""))
        else:
            raise DecodeError(f"unrecognized tsquery node type: {kind}")
    if off != len(data):
        raise DecodeError(f"tsquery send value has {len(data) - off} trailing bytes")
    lefts = _lefts([(kind, arg) for kind, arg, _, _ in parsed])
    items = bytearray(_I32.pack(size))
    strings = bytearray()
    for (kind, arg, extra, text), left in zip(parsed, lefts, strict=True):
        if kind == QI_OPR:
            items += bytes((QI_OPR, arg)) + _I16.pack(extra) + _U32.pack(left) + bytes(4)
            continue
        if len(text) > MAXSTRLEN or len(strings) > MAXSTRPOS:
            raise DecodeError("invalid tsquery: operand too long")
        items += bytes((QI_VAL, arg, 1 if extra else 0, 0))
        items += _U32.pack(legacy_crc32(text)) + _U32.pack(len(text) | len(strings) << 12)
        strings += text + b"\x00"
    return bytes(items + strings)
