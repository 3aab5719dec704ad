"""contrib/isn (isn.c): ean13, isbn, isbn13, ismn, ismn13, issn, issn13 and upc.

Receives: the 8-byte datum (uint64, little-endian, by value): the 13-digit EAN number
shifted left by one, its low bit set when the number was entered with a wrong check
digit in weak mode (then printed with a trailing `!`). Hands on: the exact text of the
type's output function, which is also its Python value (Debezium publishes isbn as a
string; the other isn types are published as their text too):

- `ean13_out` (ean13, isbn13, ismn13, issn13): the full EAN13, hyphenated by the range
  tables: `978-0-393-04002-9`;
- `isn_out` (isbn, ismn, issn, upc): the short form of the type the number belongs to
  (by prefix: 978/979 ISBN, 977 ISSN, 9790 ISMN, 0 UPC), with its own check digit:
  `0-393-04002-X`, `M-...`, `1234-567X`, a 12-digit UPC.

ean2string's hyphenation works in place on one C buffer, binary-searching the range
table of the number's prefix (hyphenate) and shifting the digits left as it inserts
hyphens; `_Buf` replays those exact steps (including its unsigned index arithmetic),
since any shortcut would differ on the odd corner the tables leave open.

Pure; a number over 13 digits raises `DecodeError`, as ean2string refuses it.
"""

from __future__ import annotations

from service._binary import I64
from service.errors import DecodeError
from service.types.isn_ranges import TABLES

_U32 = 0xFFFFFFFF
_MAXEAN13LEN = 18
_Table = tuple[tuple[tuple[int, int], ...], tuple[tuple[str, str], ...]]


def _digit(c: int) -> bool:
    return 48 <= c <= 57


class _Buf:
    """The C string buffer ean2string works in: bytes with NUL-terminated reads."""

    __slots__ = ("b",)

    def __init__(self) -> None:
        self.b = bytearray(_MAXEAN13LEN + 8)

    def cstr(self, at: int) -> bytes:
        end = self.b.index(0, at)
        return bytes(self.b[at:end])

    def hyphenate(self, o: int, i: int, table: _Table | None) -> int:
        """hyphenate(): copy the digits at `i` to `o`, adding the range's hyphens.
        Returns the characters written, or 0 when no range holds the number."""
        b = self.b
        ret = 0
        if table is None:
            while b[i]:
                b[o] = b[i]
                o, i, ret = o + 1, i + 1, ret + 1
            b[o] = 0
            return ret + 1
        index, ranges = table
        search = b[i] - 48
        lower = index[search][0]
        upper = lower + index[search][1]
        lower = (lower - 1) & _U32
        step = ((upper - lower) & _U32) // 2
        if step == 0:
            return 0
        search = (lower + step) & _U32
        first = i
        in1 = in2 = False
        lo, hi = (s.encode() + b"\0" for s in ranges[search])
        p = 0
        while True:
            c = b[first]
            if (in1 or c >= lo[p]) and (in2 or c <= hi[p]):
                if c > lo[p]:
                    in1 = True
                if c < hi[p]:
                    in2 = True
                if in1 and in2:
                    break
                first, p = first + 1, p + 1
                if not (lo[p] and hi[p] and b[first]):
                    break
                if not _digit(lo[p]):
                    p += 1
            else:
                if c < lo[p] and not in1:
                    upper = search
                else:
                    lower = search
                step = ((upper - lower) & _U32) // 2
                search = (lower + step) & _U32
                first = i
                in1 = in2 = False
                lo, hi = (s.encode() + b"\0" for s in ranges[search]) if step else (lo, hi)
                p = 0
            if not step:
                break
        if not step:
            return ret
        pattern = ranges[search][0].encode() + b"\0"
        k, a1, a2 = 0, o, i
        while pattern[k] and b[a2]:
            if pattern[k] != 45:  # '-'
                b[a1] = b[a2]
                a2 += 1
            else:
                b[a1] = 45
            k, a1, ret = k + 1, a1 + 1, ret + 1
        b[a1] = 45
        b[a1 + 1] = b[a2]  # the lookahead character
        return ret + 1

    def strneq(self, literal: bytes, n: int) -> bool:
        """strncmp(literal, buffer, n) == 0."""
        for k in range(n):
            a = literal[k] if k < len(literal) else 0
            if a != self.b[k]:
                return False
            if a == 0:
                return True
        return True

    def dehyphenate(self, o: int, i: int) -> None:
        b = self.b
        while b[i]:
            if _digit(b[i]):
                b[o] = b[i]
                o += 1
            i += 1
        b[o] = 0


def _weight_checkdig(text: bytes, size: int) -> int:
    """weight_checkdig(): the mod-11 check digit of the first size-1 digits."""
    weight = 0
    for c in text:
        if size <= 1:
            break
        if _digit(c):
            weight += size * (c - 48)
            size -= 1
    weight %= 11
    return 11 - weight if weight else 0


def _check_char(check: int) -> int:
    return ord("X") if check == 10 else check + 48


def ean_text(buf: bytes, *, short: bool) -> str:
    """ean2string(): ean13_out (short=False) or isn_out (short=True)."""
    if len(buf) != 8:
        raise DecodeError(f"isn datum has {len(buf)} bytes, not 8")
    ean = I64.unpack(buf)[0] & 0xFFFFFFFFFFFFFFFF
    valid = ord("!") if ean & 1 else 0
    ean >>= 1
    if ean > 9999999999999:
        raise DecodeError(f'value "{ean}" is out of range for EAN13/UPC/ISxN type')
    out = _Buf()
    b = out.b
    aux = _MAXEAN13LEN
    b[aux] = 0
    aux -= 1
    b[aux] = valid
    search = 0
    while True:
        digval, ean = ean % 10, ean // 10
        aux -= 1
        b[aux] = digval + 48
        if search == 0:
            aux -= 1
            b[aux] = 45
        more = bool(ean) and search < 13
        search += 1
        if not more:
            break
    while search < 13:
        aux -= 1
        b[aux] = 48
        search += 1
    kind = "EAN13"
    search = out.hyphenate(0, 3, TABLES["EAN13"])
    if search == 0:
        out.hyphenate(0, 3, None)
    else:
        table: _Table | None
        if out.strneq(b"978-", search):
            kind, table = "ISBN", TABLES["ISBN"]
        elif out.strneq(b"977-", search):
            kind, table = "ISSN", TABLES["ISSN"]
        elif out.strneq(b"979-0", search + 1):
            kind, table = "ISMN", TABLES["ISMN"]
        elif out.strneq(b"979-", search):
            kind, table = "ISBN", TABLES["ISBN_NEW"]
        elif b[0] == 48:
            kind, table = "UPC", TABLES["UPC"]
        else:
            kind, table = "EAN13", None
        at = search
        if out.hyphenate(at, at + 2, table) == 0:
            out.hyphenate(at, at + 2, None)
    if short:
        _shorten(out, kind)
    return out.cstr(0).decode("ascii")


def _shorten(out: _Buf, kind: str) -> None:
    """ean2ISBN / ean2ISMN / ean2ISSN / ean2UPC: the old short forms, in place."""
    b = out.b
    match kind:
        case "ISBN":
            if bytes(b[:4]) == b"978-":
                out.hyphenate(0, 4, None)
                text = out.cstr(0)
                check = _weight_checkdig(text, 10)
                last = len(text) - 1
                while not _digit(b[last]):
                    last -= 1
                b[last] = _check_char(check)
        case "ISMN":
            out.hyphenate(0, 4, None)
            b[0] = ord("M")
        case "ISSN":
            out.hyphenate(0, 4, None)
            check = _weight_checkdig(out.cstr(0), 8)
            b[8] = _check_char(check)
            b[9] = 0
        case "UPC":
            out.dehyphenate(0, 1)
            b[12] = 0
        case "EAN13":
            return
        case _:
            raise DecodeError(f"no short form for isn kind {kind}")


def isn_text(buf: bytes) -> str:
    """isn_out: isbn, ismn, issn and upc."""
    return ean_text(buf, short=True)


def ean13_text(buf: bytes) -> str:
    """ean13_out: ean13, isbn13, ismn13 and issn13."""
    return ean_text(buf, short=False)
