"""The fixed-width integer unpackers every stage shares, compiled once (as psycopg does).

WAL records and stored datums are little-endian on the machines PostgreSQL writes them
on (x86-64, aarch64): `U16`, `I16`, `U32`, `I32`, `I64`. The binary send format of the
initial snapshot's COPY is network order: `BE_*`. Formats with several fields stay beside
the struct they mirror.
"""

from __future__ import annotations

import struct

U16 = struct.Struct("<H")
I16 = struct.Struct("<h")
U32 = struct.Struct("<I")
I32 = struct.Struct("<i")
I64 = struct.Struct("<q")

BE_U16 = struct.Struct(">H")
BE_I16 = struct.Struct(">h")
BE_U32 = struct.Struct(">I")
BE_I32 = struct.Struct(">i")
