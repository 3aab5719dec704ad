"""pglz decompression: hand-made streams, error cases, and a real server's datum."""

from __future__ import annotations

import uuid
from typing import Any

import psycopg2
import pytest
from hypothesis import given
from hypothesis import strategies as st

from service.errors import DecodeError
from service.wal.pglz import compress_literal, decompress


@given(st.binary(max_size=3000))
def test_literal_round_trip(data: bytes) -> None:
    """A literal-only stream decodes to its input."""
    assert decompress(compress_literal(data), len(data)) == data


def test_back_references_and_overlapping_runs() -> None:
    """Tags copy from `off` bytes back; an offset shorter than the length repeats a run;
    len 18 takes an extra length byte."""
    # ctrl 0b0110: literal 'a', tag(off=1,len=3+15+2=20), tag(off=2,len=3), literal 'z'
    stream = bytes([0b0110]) + b"a" + bytes([0x0F, 0x01, 2]) + bytes([0x00, 0x02]) + b"z"
    assert decompress(stream, 1 + 20 + 3 + 1) == b"a" * 24 + b"z"
    # off 4 with len 6: "abcd" + "abcdab"
    stream = bytes([0b10000]) + b"abcd" + bytes([0x03, 0x04])
    assert decompress(stream, 10) == b"abcdabcdab"


@pytest.mark.parametrize(
    ("stream", "rawsize", "message"),
    [
        (bytes([0b1, 0x00, 0x00]), 3, "offset"),  # offset 0
        (bytes([0b10]) + b"a" + bytes([0x00, 0x05]), 4, "offset"),  # before the start
        (bytes([0b10]) + b"a" + bytes([0x00]), 4, "truncated"),
        (bytes([0b10]) + b"a" + bytes([0x0F, 0x01]), 30, "truncated"),
        (compress_literal(b"abc"), 5, "expected 5"),
        (compress_literal(b"abcdef"), 3, "left after"),
    ],
)
def test_malformed_streams(stream: bytes, rawsize: int, message: str) -> None:
    """Malformed input raises DecodeError, never a wrong-length result."""
    with pytest.raises(DecodeError, match=message):
        decompress(stream, rawsize, lsn=0x10)


def test_incomplete_check_can_be_relaxed() -> None:
    """Without check_complete, trailing input after rawsize bytes is ignored."""
    assert decompress(compress_literal(b"abcdef"), 3, check_complete=False) == b"abc"


@pytest.mark.integration
def test_real_server_pglz_datum(pg15: dict[str, Any]) -> None:
    """An inline pglz-compressed text datum read raw from a heap page (pageinspect)
    decompresses to the value the server returns."""
    db = f"pglz_{uuid.uuid4().hex[:8]}"
    admin = psycopg2.connect(pg15["dsn"])
    admin.autocommit = True
    admin.cursor().execute(f"CREATE DATABASE {db}")
    conn = psycopg2.connect(pg15["dsn"].replace("dbname=postgres", f"dbname={db}"))
    conn.autocommit = True
    cur = conn.cursor()
    cur.execute("CREATE EXTENSION pageinspect")
    cur.execute("SET default_toast_compression = pglz")
    cur.execute("CREATE TABLE c (v text)")
    cur.execute(
        "INSERT INTO c SELECT string_agg(repeat(md5(g::text), 3) || g, ',') "
        "FROM generate_series(1, 40) g, generate_series(1, 3) k"
    )
    cur.execute("SELECT v, pg_column_compression(v) FROM c")
    value, method = cur.fetchone()
    assert method == "pglz"
    cur.execute("SELECT t_data FROM heap_page_items(get_raw_page('c', 0))")
    t_data = bytes(cur.fetchone()[0])
    conn.close()
    admin.cursor().execute(f"DROP DATABASE {db}")
    admin.close()
    # 4-byte varlena header (compressed flag 0b10 in the low bits), then va_tcinfo
    header = int.from_bytes(t_data[:4], "little")
    assert header & 0x03 == 0x02
    size = header >> 2
    tcinfo = int.from_bytes(t_data[4:8], "little")
    rawsize, cmethod = tcinfo & 0x3FFFFFFF, tcinfo >> 30
    assert cmethod == 0
    assert decompress(t_data[8:size], rawsize).decode() == value
