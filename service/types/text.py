"""Scalar and character types: bool, integers, oid, "char", name, text-like, bytea, uuid.

Receives: one datum's bytes (fixed-size image or varlena payload). Hands on: the Python
value or the exact text of the type's output function (boolout, int2out/int4out/
int8out, oidout, xidout, cidout, charout, nameout, textout/varcharout/bpcharout,
xml_out, json_out, byteaout with bytea_output=hex, uuid_out, int2vectorout,
oidvectorout, tidout, pg_lsn_out).

Text-like types are stored as their text in the database encoding; pgcdc requires a
UTF8 database, so invalid UTF-8 is a `DecodeError`, never replaced characters. bpchar
keeps its blank padding (bpcharout prints it). `"char"` prints a byte with the high bit
set as a backslash and three octal digits, and the zero byte as the empty string.

Pure; no I/O.
"""

from __future__ import annotations

import struct
import uuid

from service._binary import I16, I32, I64, U32
from service.errors import DecodeError

_U64 = struct.Struct("<Q")
_TID = struct.Struct("<HHH")


def _fixed(buf: bytes, size: int, name: str) -> None:
    if len(buf) != size:
        raise DecodeError(f"{name} datum has {len(buf)} bytes, expected {size}")


def bool_value(buf: bytes) -> bool:
    _fixed(buf, 1, "bool")
    return buf[0] != 0


def bool_text(buf: bytes) -> str:
    return "t" if bool_value(buf) else "f"


def int2_value(buf: bytes) -> int:
    _fixed(buf, 2, "int2")
    return int(I16.unpack(buf)[0])


def int4_value(buf: bytes) -> int:
    _fixed(buf, 4, "int4")
    return int(I32.unpack(buf)[0])


def int8_value(buf: bytes) -> int:
    _fixed(buf, 8, "int8")
    return int(I64.unpack(buf)[0])


_I16_UNPACK, _I32_UNPACK, _I64_UNPACK, _U32_UNPACK = (
    I16.unpack,
    I32.unpack,
    I64.unpack,
    U32.unpack,
)


def int2_text(buf: bytes) -> str:
    """int2out; as str(int2_value(buf)), without the intermediate calls."""
    if len(buf) != 2:
        _fixed(buf, 2, "int2")
    return str(_I16_UNPACK(buf)[0])


def int4_text(buf: bytes) -> str:
    """int4out."""
    if len(buf) != 4:
        _fixed(buf, 4, "int4")
    return str(_I32_UNPACK(buf)[0])


def int8_text(buf: bytes) -> str:
    """int8out."""
    if len(buf) != 8:
        _fixed(buf, 8, "int8")
    return str(_I64_UNPACK(buf)[0])


def uint4_text(buf: bytes) -> str:
    """oidout, xidout, cidout."""
    if len(buf) != 4:
        _fixed(buf, 4, "oid")
    return str(_U32_UNPACK(buf)[0])


def uint4_value(buf: bytes) -> int:
    """oid, xid, cid, regproc...: unsigned 32-bit."""
    _fixed(buf, 4, "oid")
    return int(U32.unpack(buf)[0])


def uint8_value(buf: bytes) -> int:
    """xid8: unsigned 64-bit."""
    _fixed(buf, 8, "xid8")
    return int(_U64.unpack(buf)[0])


def char_text(buf: bytes) -> str:
    """charout: one byte; high-bit bytes as \\ooo, NUL as empty."""
    _fixed(buf, 1, '"char"')
    b = buf[0]
    if b == 0:
        return ""
    if b & 0x80:
        return f"\\{b:03o}"
    return chr(b)


def utf8(buf: bytes) -> str:
    try:
        return buf.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise DecodeError(f"text value is not valid UTF-8: {exc}") from exc


def name_text(buf: bytes) -> str:
    """nameout: the bytes up to the first NUL of the 64-byte NameData."""
    end = buf.find(b"\x00")
    return utf8(buf if end < 0 else buf[:end])


def bytea_text(buf: bytes) -> str:
    return "\\x" + buf.hex()


def uuid_value(buf: bytes) -> uuid.UUID:
    _fixed(buf, 16, "uuid")
    return uuid.UUID(bytes=bytes(buf))


def uuid_text(buf: bytes) -> str:
    return str(uuid_value(buf))


def tid_text(buf: bytes) -> str:
    _fixed(buf, 6, "tid")
    hi, lo, pos = _TID.unpack(buf)
    return f"({(hi << 16) | lo},{pos})"


def pg_lsn_text(buf: bytes) -> str:
    value = uint8_value(buf)
    return f"{value >> 32:X}/{value & 0xFFFFFFFF:X}"


_XML_BLANK = " \t\n\r"


def _skip_blank(s: str, p: int) -> int:
    while p < len(s) and s[p] in _XML_BLANK:
        p += 1
    return p


def _quoted(s: str, p: int) -> tuple[str, int] | None:
    if p >= len(s) or s[p] not in "'\"":
        return None
    end = s.find(s[p], p + 1)
    if end < 0:
        return None
    return s[p + 1 : end], end + 1


def _attribute(s: str, p: int, name: str) -> tuple[str | None, int] | None:
    """An optional ` name = "value"` at `p`: (value or None when absent, new p); None
    when it is malformed (parse_xml_decl's XML_ERR_* returns)."""
    q = _skip_blank(s, p)
    if not s.startswith(name, q):
        return None, p
    if q == p:  # CHECK_XML_SPACE: the attribute must follow a blank
        return None
    q = _skip_blank(s, q + len(name))
    if q >= len(s) or s[q] != "=":
        return None
    found = _quoted(s, _skip_blank(s, q + 1))
    if found is None:
        return None
    return found


def _parse_xml_decl(s: str) -> tuple[int, str | None, int] | None:
    """parse_xml_decl: (length of the XML declaration, version, standalone 1/0/-1), or
    None when the declaration is malformed (xml_out_internal then prints the value as
    it is stored)."""
    version: str | None = None
    standalone = -1
    p = 0
    if s.startswith("<?xml") and not (len(s) > 5 and (s[5].isalnum() or s[5] in "._-:")):
        p = 5
        if p >= len(s) or s[p] not in _XML_BLANK:
            return None
        p = _skip_blank(s, p)
        if not s.startswith("version", p):
            return None
        p = _skip_blank(s, p + 7)
        if p >= len(s) or s[p] != "=":
            return None
        found = _quoted(s, _skip_blank(s, p + 1))
        if found is None:
            return None
        version, p = found
        enc = _attribute(s, p, "encoding")
        if enc is None:
            return None
        p = enc[1]
        q = _skip_blank(s, p)
        if s.startswith("standalone", q):
            if q == p:
                return None
            q = _skip_blank(s, q + 10)
            if q >= len(s) or s[q] != "=":
                return None
            q = _skip_blank(s, q + 1)
            if s.startswith(("'yes'", '"yes"'), q):
                standalone, p = 1, q + 5
            elif s.startswith(("'no'", '"no"'), q):
                standalone, p = 0, q + 4
            else:
                return None
        p = _skip_blank(s, p)
        if not s.startswith("?>", p):
            return None
        p += 2
    if any(ord(ch) > 127 for ch in s[:p]):
        return None
    return p, version, standalone


def xml_text(buf: bytes) -> str:
    """xml_out (xml_out_internal with libxml): the stored text with its XML declaration
    dropped unless it says something besides version 1.0 (print_xml_decl: a version
    other than 1.0, or standalone; the encoding is never printed), and then one newline
    after a dropped declaration eaten as well."""
    s = utf8(buf)
    decl = _parse_xml_decl(s)
    if decl is None:
        return s
    length, version, standalone = decl
    if (version is not None and version != "1.0") or standalone != -1:
        head = f'<?xml version="{version or "1.0"}"'
        if standalone == 1:
            head += ' standalone="yes"'
        elif standalone == 0:
            head += ' standalone="no"'
        return head + "?>" + s[length:]
    if s[length : length + 1] == "\n":
        length += 1
    return s[length:]
