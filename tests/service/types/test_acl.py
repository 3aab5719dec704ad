"""aclitem's text (service.types.acl) against what aclitemout prints, without a server.

putid's quoting (a name of ASCII letters, digits and `_` bare; anything else, a
non-ASCII letter included, double-quoted with inner quotes doubled), and aclitem_text
of both layouts (15's 12 bytes, 16's 16) with PUBLIC, grant options and a role OID that
no longer names a role. The integration tests compare the same texts with a real
server's (tests/integration/test_native_text_regtypes.py).
"""

from __future__ import annotations

import struct

import pytest

from service.errors import DecodeError
from service.types.acl import aclitem_text, putid, role_text
from service.types.registry import TypeRegistry


@pytest.mark.parametrize(
    ("name", "printed"),
    [
        ("postgres", "postgres"),
        ("Role_9", "Role_9"),
        ("a b", '"a b"'),
        ('say "hi"', '"say ""hi"""'),
        ("rôle", '"rôle"'),  # putid's isalnum((unsigned char) c) fails on UTF-8 bytes
        ("日本", '"日本"'),
        ("", '""'),
    ],
)
def test_putid_quotes_all_but_ascii_alphanumerics(name: str, printed: str) -> None:
    """A role name prints bare only when every character is an ASCII letter, digit or _."""
    assert putid(name) == printed


def test_aclitem_text_in_both_layouts() -> None:
    """aclitemout of a 12-byte (15) and a 16-byte (16+) datum; a gone role is its OID."""
    names = {10: "postgres", 20: "rôle"}
    registry = TypeRegistry(oid_names=lambda kind, oid: names.get(oid))
    pg15 = struct.pack("<III", 0, 10, 0b11 | 1 << 17)
    assert aclitem_text(pg15, registry) == "=ar*/postgres"
    pg16 = struct.pack("<IIQ", 20, 30, 1 << 14 | 1 << 46)
    assert aclitem_text(pg16, registry) == '"rôle"=m*/30'
    assert role_text(30, None) == "30"
    with pytest.raises(DecodeError):
        aclitem_text(pg15[:11], registry)
