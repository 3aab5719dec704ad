"""Pure tests of the offset record and schema-history snapshot encodings."""

from __future__ import annotations

import pytest

from connectors.kafka.offsets import OffsetRecord, decode_snapshot, encode_snapshot
from service.errors import DecodeError


def test_offset_record_round_trips() -> None:
    """An offset record survives encode/decode with every field, LSNs above 2^32 included."""
    rec = OffsetRecord("slot_a", 0x7FFF_FFFF_0000_0010, 0x1_0000_0000, 7, 1_700_000_000_000)
    data = rec.encode()
    assert data[0] == 1
    assert OffsetRecord.decode(data) == rec


def test_offset_record_rejects_unknown_format() -> None:
    """A record with another format byte is refused, not misread."""
    with pytest.raises(DecodeError, match="format byte"):
        OffsetRecord.decode(b"\x02" + OffsetRecord("s", 1, 1, 1, 1).encode()[1:])


def test_snapshot_round_trips() -> None:
    """A schema-history snapshot comes back with its version."""
    snap = {"format": 1, "versions": [[1, {"name": "t"}, 0, 16, [5]]], "db_oid": 5}
    assert decode_snapshot(encode_snapshot(42, snap)) == (42, snap)
    with pytest.raises(DecodeError):
        decode_snapshot(b"\x09" + encode_snapshot(1, snap)[1:])
