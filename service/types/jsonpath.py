"""jsonpath (jsonpath.h, jsonpath.c): the flattened item tree printed as jsonpath_out does.

Receives: the varlena payload: uint32 header (version 1 in the low bits, 0x80000000
lax), then the items. Hands on: the exact text jsonpath_out prints (also the Python
value; Debezium has no mapping, so it is published as that string).

Each item starts at a 4-byte-aligned offset (relative to the items' start): a type
byte, padding to 4, an int32 offset of the next item in the chain (0: none, else
relative to this item), then a payload by type; every offset inside it is relative to
the item's own position. The type numbers are JsonPathItemType, on disk and append-only:
0..42 exist in PostgreSQL 15 and 16 (null … like_regex), 43..53 were added in 17
(.bigint() … .timestamp_tz(); .decimal(p,s) has two argument offsets, .time(p) and
friends one), 54.. in later releases (string methods). A type number unknown to this
table raises `DecodeError`: it is never guessed at.

Printing mirrors printJsonPathItem: `strict ` unless lax; binary operators with
parentheses when the parent asks for them (operationPriority), a numeric literal in
parentheses when an accessor follows it, keys and strings escaped as escape_json.

Pure; malformed input raises `DecodeError`.
"""

from __future__ import annotations

import struct

from service.errors import DecodeError
from service.types.jsonb import escape_json
from service.types.numeric import numeric_text

_I32 = struct.Struct("<i")
_U32 = struct.Struct("<I")

JSONPATH_LAX = 0x80000000
UINT32_MAX = 0xFFFFFFFF
# The deepest argument nesting printed; deeper is a DecodeError (as in the native
# printer, whose MAX_DEPTH is the same).
MAX_DEPTH = 256

# JsonPathItemType (jsonpath.h); the order is the on-disk format.
(
    NULL,
    STRING,
    NUMERIC,
    BOOL,
    AND,
    OR,
    NOT,
    IS_UNKNOWN,
    EQUAL,
    NOT_EQUAL,
    LESS,
    GREATER,
    LESS_OR_EQUAL,
    GREATER_OR_EQUAL,
    ADD,
    SUB,
    MUL,
    DIV,
    MOD,
    PLUS,
    MINUS,
    ANY_ARRAY,
    ANY_KEY,
    INDEX_ARRAY,
    ANY,
    KEY,
    CURRENT,
    ROOT,
    VARIABLE,
    FILTER,
    EXISTS,
    TYPE,
    SIZE,
    ABS,
    FLOOR,
    CEILING,
    DOUBLE,
    DATETIME,
    KEY_VALUE,
    SUBSCRIPT,
    LAST,
    STARTS_WITH,
    LIKE_REGEX,
    BIGINT,
    BOOLEAN,
    DATE,
    DECIMAL,
    INTEGER,
    NUMBER,
    STRING_FUNC,
    TIME,
    TIME_TZ,
    TIMESTAMP,
    TIMESTAMP_TZ,
    REPLACE,
    LOWER,
    UPPER,
    LTRIM,
    RTRIM,
    BTRIM,
    INITCAP,
    SPLIT_PART,
) = range(62)

_BINARY = {
    AND: "&&",
    OR: "||",
    EQUAL: "==",
    NOT_EQUAL: "!=",
    LESS: "<",
    GREATER: ">",
    LESS_OR_EQUAL: "<=",
    GREATER_OR_EQUAL: ">=",
    ADD: "+",
    SUB: "-",
    MUL: "*",
    DIV: "/",
    MOD: "%",
    STARTS_WITH: "starts with",
}
_METHODS = {
    TYPE: ".type()",
    SIZE: ".size()",
    ABS: ".abs()",
    FLOOR: ".floor()",
    CEILING: ".ceiling()",
    DOUBLE: ".double()",
    KEY_VALUE: ".keyvalue()",
    BIGINT: ".bigint()",
    BOOLEAN: ".boolean()",
    DATE: ".date()",
    INTEGER: ".integer()",
    NUMBER: ".number()",
    STRING_FUNC: ".string()",
    LOWER: ".lower()",
    UPPER: ".upper()",
    INITCAP: ".initcap()",
}
_ONE_ARG_METHODS = {
    DATETIME: ".datetime(",
    TIME: ".time(",
    TIME_TZ: ".time_tz(",
    TIMESTAMP: ".timestamp(",
    TIMESTAMP_TZ: ".timestamp_tz(",
    LTRIM: ".ltrim(",
    RTRIM: ".rtrim(",
    BTRIM: ".btrim(",
}
_TWO_ARG_METHODS = {DECIMAL: ".decimal(", REPLACE: ".replace(", SPLIT_PART: ".split_part("}
_UNARY_ARG = {NOT, IS_UNKNOWN, EXISTS, PLUS, MINUS, FILTER} | set(_ONE_ARG_METHODS)
_NO_PAYLOAD = {NULL, ROOT, CURRENT, ANY_ARRAY, ANY_KEY, LAST} | set(_METHODS)
_REGEX_FLAGS = ((0x01, "i"), (0x02, "s"), (0x04, "m"), (0x08, "x"), (0x10, "q"))


def _priority(kind: int) -> int:
    """operationPriority."""
    if kind == OR:
        return 0
    if kind == AND:
        return 1
    if kind in (EQUAL, NOT_EQUAL, LESS, GREATER, LESS_OR_EQUAL, GREATER_OR_EQUAL, STARTS_WITH):
        return 2
    if kind in (ADD, SUB):
        return 3
    if kind in (MUL, DIV, MOD):
        return 4
    if kind in (PLUS, MINUS):
        return 5
    return 6


class _Item:
    """One item read at `pos` (jspInitByBuffer)."""

    __slots__ = ("args", "kind", "next", "payload", "pos")

    def __init__(self, data: bytes, pos: int) -> None:
        if not 0 <= pos < len(data):
            raise DecodeError(f"jsonpath item offset {pos} outside its datum")
        self.pos = pos
        self.kind = data[pos]
        at = (pos + 4) & ~3
        self.next = _I32.unpack_from(data, at)[0]
        self.payload = at + 4
        self.args: list[int] = []
        kind, p = self.kind, self.payload
        if kind in _BINARY or kind in _TWO_ARG_METHODS:
            self.args = [_I32.unpack_from(data, p)[0], _I32.unpack_from(data, p + 4)[0]]
        elif kind in _UNARY_ARG:
            self.args = [_I32.unpack_from(data, p)[0]]
        elif kind not in _NO_PAYLOAD and kind not in (
            STRING,
            KEY,
            VARIABLE,
            NUMERIC,
            BOOL,
            INDEX_ARRAY,
            ANY,
            LIKE_REGEX,
        ):
            raise DecodeError(f"jsonpath item of unknown type {kind}")


class _Printer:
    """printJsonPathItem over one datum. Where the server's recursion would follow a
    damaged datum without end, this stops with DecodeError, as the native printer does
    (service/native/src/types/jsonpath.rs): argument nesting deeper than `MAX_DEPTH`,
    and more items visited than the datum has bytes (offsets that make a cycle; a tree
    the server writes visits each item once). A chain of accessors is walked in a
    loop, so a long valid path prints whatever its length."""

    __slots__ = ("data", "visits")

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.visits = 0

    def _string(self, at: int) -> str:
        length = _I32.unpack_from(self.data, at)[0]
        if length < 0 or at + 4 + length > len(self.data):
            raise DecodeError("jsonpath string overruns its datum")
        return escape_json(self.data[at + 4 : at + 4 + length].decode("utf-8"))

    def _numeric(self, at: int) -> str:
        size = (_U32.unpack_from(self.data, at)[0] >> 2) & 0x3FFFFFFF
        if size < 4 or at + size > len(self.data):
            raise DecodeError("jsonpath numeric overruns its datum")
        return numeric_text(self.data[at + 4 : at + size])

    def item(self, pos: int, in_key: bool, brackets: bool, out: list[str], depth: int) -> None:
        """printJsonPathItem: the item at `pos`, then its chain (each next item as an
        accessor: in_key and brackets set). `depth`: the argument nesting so far."""
        if depth > MAX_DEPTH:
            raise DecodeError(f"jsonpath arguments nested deeper than {MAX_DEPTH}")
        while True:
            self.visits += 1
            if self.visits > len(self.data):
                raise DecodeError("jsonpath item offsets loop or share items without end")
            nxt = self._one(pos, in_key, brackets, out, depth)
            if nxt <= 0:
                return
            pos, in_key, brackets = pos + nxt, True, True

    def _one(self, pos: int, in_key: bool, brackets: bool, out: list[str], depth: int) -> int:
        """One item at `pos`, without its chain; returns its next offset."""
        data = self.data
        v = _Item(data, pos)
        kind, p = v.kind, v.payload
        down = depth + 1

        def sub(offset: int, key: bool, br: bool) -> None:
            self.item(pos + offset, key, br, out, down)

        def arg_brackets(offset: int) -> bool:
            return _priority(_Item(data, pos + offset).kind) <= _priority(kind)

        if kind == NULL:
            out.append("null")
        elif kind == STRING:
            out.append(self._string(p))
        elif kind == NUMERIC:
            text = self._numeric(p)
            out.append(f"({text})" if v.next > 0 else text)
        elif kind == BOOL:
            out.append("true" if data[p] else "false")
        elif kind in _BINARY:
            left, right = v.args
            if brackets:
                out.append("(")
            sub(left, False, arg_brackets(left))
            out.append(f" {_BINARY[kind]} ")
            sub(right, False, arg_brackets(right))
            if brackets:
                out.append(")")
        elif kind == NOT:
            out.append("!(")
            sub(v.args[0], False, False)
            out.append(")")
        elif kind == IS_UNKNOWN:
            out.append("(")
            sub(v.args[0], False, False)
            out.append(") is unknown")
        elif kind in (PLUS, MINUS):
            if brackets:
                out.append("(")
            out.append("+" if kind == PLUS else "-")
            sub(v.args[0], False, arg_brackets(v.args[0]))
            if brackets:
                out.append(")")
        elif kind == ANY_ARRAY:
            out.append("[*]")
        elif kind == ANY_KEY:
            out.append(".*" if in_key else "*")
        elif kind == INDEX_ARRAY:
            self._subscripts(pos, p, out, down)
        elif kind == ANY:
            out.append(self._any(p, in_key))
        elif kind == KEY:
            out.append(("." if in_key else "") + self._string(p))
        elif kind == CURRENT:
            out.append("@")
        elif kind == ROOT:
            out.append("$")
        elif kind == VARIABLE:
            out.append("$" + self._string(p))
        elif kind == FILTER:
            out.append("?(")
            sub(v.args[0], False, False)
            out.append(")")
        elif kind == EXISTS:
            out.append("exists (")
            sub(v.args[0], False, False)
            out.append(")")
        elif kind in _METHODS:
            out.append(_METHODS[kind])
        elif kind in _ONE_ARG_METHODS:
            out.append(_ONE_ARG_METHODS[kind])
            if v.args[0]:
                sub(v.args[0], False, False)
            out.append(")")
        elif kind in _TWO_ARG_METHODS:
            out.append(_TWO_ARG_METHODS[kind])
            if v.args[0]:
                sub(v.args[0], False, False)
            if v.args[1]:
                out.append(",")
                sub(v.args[1], False, False)
            out.append(")")
        elif kind == LAST:
            out.append("last")
        elif kind == LIKE_REGEX:
            self._like_regex(pos, p, brackets, out, down)
        else:
            raise DecodeError(f"jsonpath item of unknown type {kind}")
        return int(v.next)

    def _subscripts(self, pos: int, p: int, out: list[str], depth: int) -> None:
        nelems = _I32.unpack_from(self.data, p)[0]
        out.append("[")
        for i in range(nelems):
            frm, to = struct.unpack_from("<ii", self.data, p + 4 + 8 * i)
            if i:
                out.append(",")
            self.item(pos + frm, False, False, out, depth)
            if to:
                out.append(" to ")
                self.item(pos + to, False, False, out, depth)
        out.append("]")

    def _any(self, p: int, in_key: bool) -> str:
        first, last = struct.unpack_from("<II", self.data, p)
        dot = "." if in_key else ""
        if first == 0 and last == UINT32_MAX:
            return dot + "**"
        if first == last:
            return dot + ("**{last}" if first == UINT32_MAX else f"**{{{first}}}")
        if first == UINT32_MAX:
            return dot + f"**{{last to {last}}}"
        if last == UINT32_MAX:
            return dot + f"**{{{first} to last}}"
        return dot + f"**{{{first} to {last}}}"

    def _like_regex(self, pos: int, p: int, brackets: bool, out: list[str], depth: int) -> None:
        flags, expr, patlen = struct.unpack_from("<IiI", self.data, p)
        pattern = self.data[p + 12 : p + 12 + patlen].decode("utf-8")
        if brackets:
            out.append("(")
        inner = _Item(self.data, pos + expr)
        self.item(pos + expr, False, _priority(inner.kind) <= _priority(LIKE_REGEX), out, depth)
        out.append(" like_regex " + escape_json(pattern))
        if flags:
            out.append(' flag "' + "".join(ch for bit, ch in _REGEX_FLAGS if flags & bit) + '"')
        if brackets:
            out.append(")")


def jsonpath_text(buf: bytes) -> str:
    """jsonpath_out (jsonPathToCstring)."""
    if len(buf) < 5:
        raise DecodeError(f"jsonpath datum of {len(buf)} bytes is too short")
    header = _U32.unpack_from(buf, 0)[0]
    if header & ~JSONPATH_LAX != 1:
        raise DecodeError(f"jsonpath version {header & ~JSONPATH_LAX} is not 1")
    out = [] if header & JSONPATH_LAX else ["strict "]
    try:
        _Printer(buf[4:]).item(0, False, True, out, 0)
    except (struct.error, IndexError, UnicodeDecodeError) as exc:
        raise DecodeError(f"malformed jsonpath datum: {exc}") from exc
    return "".join(out)
