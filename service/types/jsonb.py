"""jsonb: the binary container format rendered as the text jsonb_out prints (jsonb.h).

Receives: a jsonb varlena payload. Hands on: the JSON text exactly as jsonb_out prints
it: `{"a": 1, "b": [1, 2]}` with `", "` and `": "`, object keys in stored order (by
length, then bytes), numbers as numeric_out prints them, strings escaped as escape_json
does (`\\"`, `\\\\`, `\\b \\f \\n \\r \\t`, other control characters as `\\u00XX`).
The Python value of a jsonb datum is this text.

Layout: a container is a uint32 header (count in the low 28 bits; 0x10000000 scalar,
0x20000000 object, 0x40000000 array), then one uint32 JEntry per element (an object
holds all keys, then all values), then the data. A JEntry's top bit says whether its
low 28 bits are the entry's end offset or its length; bits 28..30 give the type
(0 string, 1 numeric, 2 false, 3 true, 4 null, 5 container). A numeric or nested
container starts at the next 4-byte boundary of its offset (padding counts toward the
entry's length). A top-level scalar is a one-element array flagged scalar.

Pure; malformed input raises `DecodeError`.
"""

from __future__ import annotations

from service._binary import U32
from service.errors import DecodeError
from service.types.numeric import numeric_text
from service.types.varlena import payload

JB_CMASK = 0x0FFFFFFF
JB_FSCALAR = 0x10000000
JB_FOBJECT = 0x20000000
JB_FARRAY = 0x40000000
JENTRY_OFFLENMASK = 0x0FFFFFFF
JENTRY_TYPEMASK = 0x70000000
JENTRY_HAS_OFF = 0x80000000
JENTRY_ISSTRING = 0x00000000
JENTRY_ISNUMERIC = 0x10000000
JENTRY_ISBOOL_FALSE = 0x20000000
JENTRY_ISBOOL_TRUE = 0x30000000
JENTRY_ISNULL = 0x40000000
JENTRY_ISCONTAINER = 0x50000000

# escape_json's replacements, as a str.translate table: the named escapes, and \u00XX
# for every other character below 0x20.
_ESCAPES: dict[int, str] = {c: f"\\u{c:04x}" for c in range(0x20)}
_ESCAPES.update(
    {
        ord("\b"): "\\b",
        ord("\f"): "\\f",
        ord("\n"): "\\n",
        ord("\r"): "\\r",
        ord("\t"): "\\t",
        ord('"'): '\\"',
        ord("\\"): "\\\\",
    }
)


def escape_json(text: str) -> str:
    """escape_json: the quoted JSON string PostgreSQL prints."""
    return '"' + text.translate(_ESCAPES) + '"'


def _intalign(n: int) -> int:
    return (n + 3) & ~3


class _Reader:
    __slots__ = ("buf",)

    def __init__(self, buf: bytes) -> None:
        self.buf = buf

    def container(self, pos: int, end: int, out: list[str]) -> None:
        buf = self.buf
        if pos + 4 > end:
            raise DecodeError("jsonb container header overruns its datum")
        header = U32.unpack_from(buf, pos)[0]
        count = header & JB_CMASK
        is_object = bool(header & JB_FOBJECT)
        if is_object == bool(header & JB_FARRAY):
            raise DecodeError(f"jsonb container header {header:#x} is neither object nor array")
        nentries = 2 * count if is_object else count
        base = pos + 4 + 4 * nentries
        if base > end:
            raise DecodeError("jsonb entries overrun their container")
        spans: list[tuple[int, int, int]] = []  # (type, start, length)
        offset = 0
        for i in range(nentries):
            je = U32.unpack_from(buf, pos + 4 + 4 * i)[0]
            offlen = je & JENTRY_OFFLENMASK
            stop = offlen if je & JENTRY_HAS_OFF else offset + offlen
            if stop < offset or base + stop > end:
                raise DecodeError("jsonb entry overruns its container")
            spans.append((je & JENTRY_TYPEMASK, offset, stop - offset))
            offset = stop
        if header & JB_FSCALAR:
            if is_object or count != 1:
                raise DecodeError("jsonb scalar container must be a one-element array")
            self.scalar(base, spans[0], out)
            return
        if is_object:
            out.append("{")
            for i in range(count):
                if i:
                    out.append(", ")
                kind, start, length = spans[i]
                if kind != JENTRY_ISSTRING:
                    raise DecodeError("jsonb object key is not a string")
                out.append(escape_json(self._str(base + start, length)))
                out.append(": ")
                self.scalar(base, spans[count + i], out)
            out.append("}")
        else:
            out.append("[")
            for i in range(count):
                if i:
                    out.append(", ")
                self.scalar(base, spans[i], out)
            out.append("]")

    def _str(self, at: int, length: int) -> str:
        try:
            return self.buf[at : at + length].decode("utf-8")
        except UnicodeDecodeError as exc:
            raise DecodeError(f"jsonb string is not valid UTF-8: {exc}") from exc

    def scalar(self, base: int, span: tuple[int, int, int], out: list[str]) -> None:
        kind, start, length = span
        if kind == JENTRY_ISSTRING:
            out.append(escape_json(self._str(base + start, length)))
        elif kind == JENTRY_ISNUMERIC:
            at = base + _intalign(start)
            out.append(numeric_text(payload(self.buf[at : base + start + length])))
        elif kind == JENTRY_ISBOOL_FALSE:
            out.append("false")
        elif kind == JENTRY_ISBOOL_TRUE:
            out.append("true")
        elif kind == JENTRY_ISNULL:
            out.append("null")
        elif kind == JENTRY_ISCONTAINER:
            self.container(base + _intalign(start), base + start + length, out)
        else:
            raise DecodeError(f"jsonb entry type {kind >> 28} is unknown")


def jsonb_text(buf: bytes) -> str:
    """jsonb_out."""
    out: list[str] = []
    _Reader(bytes(buf)).container(0, len(buf), out)
    return "".join(out)
