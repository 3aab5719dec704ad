"""contrib/ltree (ltree.h, ltree_io.c): label paths (ltree) and path queries (lquery).

Receives: the varlena payload; offsets below are from the payload (the C structs' minus
the 4-byte varlena header), every struct MAXALIGNed (8) from the datum's start.

- ltree: uint16 numlevel at 0, the levels from 4: each uint16 len and the label, the
  next level MAXALIGN(len + 2) further. ltree_out joins the labels with `.`.
- lquery: uint16 numlevel, firstgood, flag at 0, the levels from 12. A level: uint16
  totallen, flag, numvar, low, high, its variants from 16 on (the next level
  MAXALIGN(totallen) further); a variant: int32 crc, uint16 len, uint8 flag, the label
  at 7 (the next variant MAXALIGN(len) + 8 further). deparse_lquery prints `!` for
  LQL_NOT, the variants joined by `|` each followed by `%` (LVAR_SUBLEXEME), `@`
  (LVAR_INCASE), `*` (LVAR_ANYEND), `*` for a level without variants, then the repeat
  counts `{n}`, `{,m}`, `{n,}`, `{n,m}` or `{,}` (LQL_COUNT, or always for `*` unless
  it is the default {0,65535}).

Hands on: the exact text; it is the Python value too (Debezium publishes ltree as the
string io.debezium.data.Ltree; lquery has no Debezium mapping and is its text). The
initial snapshot reads both as their text (ltree_send/lquery_send are a version byte
and that text).

Pure; malformed input raises `DecodeError`.
"""

from __future__ import annotations

import struct

from service._binary import U16
from service.errors import DecodeError

_LEVEL = struct.Struct("<HHHHH")  # totallen, flag, numvar, low, high
_VARIANT = struct.Struct("<iHB")  # crc, len, flag
LVAR_ANYEND, LVAR_INCASE, LVAR_SUBLEXEME = 0x01, 0x02, 0x04
LQL_NOT, LQL_COUNT = 0x10, 0x20
LTREE_MAX_LEVELS = 0xFFFF
_VARHDRSZ = 4


def _maxalign(n: int) -> int:
    return (n + 7) & ~7


def _label(buf: bytes, at: int, n: int) -> str:
    if at + n > len(buf):
        raise DecodeError("ltree label runs out of its datum")
    return buf[at : at + n].decode("utf-8")


def ltree_text(buf: bytes) -> str:
    """ltree_out (deparse_ltree)."""
    if len(buf) < 2:
        raise DecodeError(f"ltree datum of {len(buf)} bytes is too short")
    numlevel = U16.unpack_from(buf, 0)[0]
    at = 8 - _VARHDRSZ
    labels = []
    for _ in range(numlevel):
        if at + 2 > len(buf):
            raise DecodeError("ltree level runs out of its datum")
        n = U16.unpack_from(buf, at)[0]
        labels.append(_label(buf, at + 2, n))
        at += _maxalign(n + 2)
    return ".".join(labels)


def _counts(low: int, high: int, numvar: int) -> str:
    if low == high:
        return f"{{{low}}}"
    if low == 0:
        if high == LTREE_MAX_LEVELS:
            return "" if numvar == 0 else "{,}"
        return f"{{,{high}}}"
    if high == LTREE_MAX_LEVELS:
        return f"{{{low},}}"
    return f"{{{low},{high}}}"


def lquery_text(buf: bytes) -> str:
    """lquery_out (deparse_lquery)."""
    if len(buf) < 6:
        raise DecodeError(f"lquery datum of {len(buf)} bytes is too short")
    numlevel = U16.unpack_from(buf, 0)[0]
    at = 16 - _VARHDRSZ
    parts = []
    for _ in range(numlevel):
        if at + _LEVEL.size > len(buf):
            raise DecodeError("lquery level runs out of its datum")
        totallen, flag, numvar, low, high = _LEVEL.unpack_from(buf, at)
        text = ""
        if numvar:
            if flag & LQL_NOT:
                text += "!"
            variants = []
            vat = at + 16
            for _v in range(numvar):
                if vat + _VARIANT.size > len(buf):
                    raise DecodeError("lquery variant runs out of its datum")
                _crc, n, vflag = _VARIANT.unpack_from(buf, vat)
                one = _label(buf, vat + 7, n)
                if vflag & LVAR_SUBLEXEME:
                    one += "%"
                if vflag & LVAR_INCASE:
                    one += "@"
                if vflag & LVAR_ANYEND:
                    one += "*"
                variants.append(one)
                vat += _maxalign(n) + 8
            text += "|".join(variants)
        else:
            text += "*"
        if flag & LQL_COUNT or numvar == 0:
            text += _counts(low, high, numvar)
        parts.append(text)
        if totallen == 0:
            raise DecodeError("lquery level of length 0")
        at += _maxalign(totallen)
    return ".".join(parts)
