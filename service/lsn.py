"""Log sequence numbers: how PostgreSQL prints them, and back.

An LSN is a 64-bit byte position in the WAL. PostgreSQL prints it as two hex halves,
`XXX/XXXXXXXX` (`LSN_FORMAT_ARGS`); pgcdc keeps it as an int everywhere and converts only
at the edges (configuration, SQL, logs, error messages).
"""

from __future__ import annotations


def format_lsn(lsn: int) -> str:
    """Render an LSN the way PostgreSQL prints it: `XXX/XXXXXXXX` in hex."""
    return f"{lsn >> 32:X}/{lsn & 0xFFFFFFFF:X}"


def parse_lsn(text: str) -> int:
    """`X/Y` as PostgreSQL prints an LSN, to an integer (format_lsn's inverse)."""
    hi, lo = text.split("/")
    return (int(hi, 16) << 32) | int(lo, 16)
