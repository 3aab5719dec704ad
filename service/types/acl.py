"""aclitem (acl.h, acl.c): one access-control entry, printed as aclitemout does.

Receives: the fixed-length image of an AclItem: Oid ai_grantee, Oid ai_grantor, AclMode
ai_privs. AclMode is a uint32 on PostgreSQL 15 (privileges in the low 16 bits, grant
options in the high 16: a 12-byte, int-aligned datum) and a uint64 from 16 on (grant
options in the high 32 bits: 16 bytes, double-aligned), so the datum's own length
tells the layout. Also receives the registry, whose `oid_names` (the catalog stage's
resolver) gives role names. Hands on: `grantee=privs/grantor` with PUBLIC (grantee 0)
printed as nothing, each privilege as its letter in ACL_ALL_RIGHTS_STR order followed
by `*` when grantable, and a role name quoted as putid does (double quotes unless every
character is an ASCII letter, digit or `_`, inner `"` doubled), or its OID when the role is gone.
The text is also the Python value (Debezium has no mapping for aclitem).

The letters `arwdDxtXUCTcsAm`: PostgreSQL 15 and 16 have the first 14 (no MAINTAIN);
a bit that is set is printed whichever version wrote it.

Pure (role names come through the injected resolver); malformed input raises
`DecodeError`.
"""

from __future__ import annotations

import struct

from service.errors import DecodeError, UnknownTypeError
from service.types.registry import TypeRegistry

ACL_ALL_RIGHTS_STR = "arwdDxtXUCTcsAm"
_PG15 = struct.Struct("<III")
_PG16 = struct.Struct("<IIQ")


def putid(name: str) -> str:
    """putid: quote unless every character is alphanumeric or an underscore. putid tests
    each byte with isalnum((unsigned char) c), which no byte of a multibyte UTF-8
    character passes: a non-ASCII name is always quoted."""
    if name and all((ch.isascii() and ch.isalnum()) or ch == "_" for ch in name):
        return name
    return '"' + name.replace('"', '""') + '"'


def role_text(oid: int, name: str | None) -> str:
    """What aclitemout prints for a grantee or grantor: its name as putid quotes it, or
    its OID when there is no such role (`name` None). The catalog stage hands the native
    encoder this text (service._native.NameCache), so the quoting lives here only."""
    return str(oid) if name is None else putid(name)


def _role(oid: int, registry: TypeRegistry) -> str:
    names = registry.oid_names
    if names is None:
        raise UnknownTypeError("aclitem needs role names: no catalog resolver attached")
    return role_text(oid, names("role", oid))


def aclitem_text(buf: bytes, registry: TypeRegistry) -> str:
    """aclitemout."""
    if len(buf) == _PG15.size:
        grantee, grantor, privs = _PG15.unpack(buf)
        shift = 16
    elif len(buf) == _PG16.size:
        grantee, grantor, privs = _PG16.unpack(buf)
        shift = 32
    else:
        raise DecodeError(f"aclitem datum has {len(buf)} bytes, not 12 or 16")
    out = [] if grantee == 0 else [_role(grantee, registry)]
    out.append("=")
    for i, letter in enumerate(ACL_ALL_RIGHTS_STR):
        if privs & (1 << i):
            out.append(letter)
            if privs & (1 << (i + shift)):
                out.append("*")
    out.append("/")
    out.append(_role(grantor, registry))
    return "".join(out)
