"""XLog reader on synthetic WAL built byte by byte (tests.service.walwriter)."""

from __future__ import annotations

import struct
from pathlib import Path

import lz4.block
import pytest
from hypothesis import given
from hypothesis import strategies as st

from service.errors import UnsupportedVersionError, WalCorruptionError, WalError
from service.wal import pglz
from service.wal.reader import XLogReader
from service.wal.record import XLogRecord
from tests.service.walwriter import BLCK, Block, WalWriter, record_body

SEG = 64 * 1024


def read_all(w: WalWriter, data: bytes | None = None, start: int | None = None) -> XLogReader:
    """A reader fed the writer's whole stream."""
    r = XLogReader(w.base if start is None else start, segment_size=w.seg_size)
    r.feed(w.data() if data is None else data, w.base)
    return r


def heap_like(w: WalWriter, n: int, size: int = 100) -> list[int]:
    """Append n small records with one block reference each."""
    return [
        w.add(10, 0x00, 700 + i, record_body([Block(0, blk=i, data=b"d" * 20)], b"m" * size))
        for i in range(n)
    ]


def test_short_and_long_headers_across_segments() -> None:
    """Records are found on pages with short headers and on the long-header first page
    of the next segment, in order, with the version taken from the magic."""
    w = WalWriter()
    lsns = heap_like(w, 1200)
    assert lsns[-1] - w.base > SEG  # crossed into the second segment
    r = read_all(w)
    recs = list(r.records())
    assert [x.lsn for x in recs] == lsns
    assert r.version == 15
    assert r.end_of_wal
    assert recs[5].blocks[0].block == 5 and recs[5].main_data == b"m" * 100
    assert recs[5].xid == 705 and recs[5].prev == lsns[4]


def test_records_spanning_pages_and_segments() -> None:
    """A record larger than a page is reassembled across continuation pages, also
    across a segment boundary (long header on the continuation page)."""
    w = WalWriter()
    big = bytes(range(256)) * 300  # 76800 bytes: > one 64 KB segment
    a = w.add(1, 0x00, 9, record_body(main=b"x" * 50))
    b = w.add(9, 0x10, 10, record_body([Block(0, data=b"q" * 3000)], big))
    c = w.add(1, 0x00, 11, record_body(main=b"y" * 50))
    recs = list(read_all(w).records())
    assert [x.lsn for x in recs] == [a, b, c]
    assert recs[1].main_data == big and recs[1].blocks[0].data == b"q" * 3000
    assert recs[2].prev == b


@pytest.mark.parametrize("offset", [BLCK - 8, BLCK - 16, BLCK - 24])
def test_record_header_straddling_a_page_boundary(offset: int) -> None:
    """A record whose 24-byte header itself crosses the page end is read correctly."""
    w = WalWriter()
    heap_like(w, 3)
    w.filler_to(offset)
    lsn = w.add(10, 0x00, 42, record_body([Block(0, blk=7, data=b"z" * 10)], b"main"))
    assert lsn % BLCK == offset
    after = w.add(1, 0x00, 43, record_body(main=b"e"))
    recs = list(read_all(w).records())
    got = {x.lsn: x for x in recs}
    assert got[lsn].xid == 42 and got[lsn].main_data == b"main"
    assert got[after].prev == lsn


def test_contrecord_with_wrong_rem_len_is_corruption() -> None:
    """xlp_rem_len on a continuation page must equal what the record still lacks."""
    w = WalWriter()
    w.add(1, 0, 1, record_body(main=b"a" * 10))
    lsn = w.add(1, 0, 2, record_body(main=b"b" * 20000))
    data = bytearray(w.data())
    page = (lsn - w.base) // BLCK + 1
    rem_off = page * BLCK + 16
    (rem,) = struct.unpack_from("<I", data, rem_off)
    struct.pack_into("<I", data, rem_off, rem + 8)
    r = read_all(w, bytes(data))
    with pytest.raises(WalCorruptionError) as exc:
        list(r.records())
    assert exc.value.lsn == lsn
    assert "contrecord length" in str(exc.value)


def test_missing_contrecord_flag_is_corruption() -> None:
    """A continuation page without XLP_FIRST_IS_CONTRECORD fails at the record's LSN."""
    w = WalWriter()
    lsn = w.add(1, 0, 2, record_body(main=b"b" * 9000))
    data = bytearray(w.data())
    struct.pack_into("<H", data, BLCK + 2, 0)
    with pytest.raises(WalCorruptionError) as exc:
        list(read_all(w, bytes(data)).records())
    assert exc.value.lsn == lsn


def test_xlog_switch_skips_to_next_segment() -> None:
    """After XLOG_SWITCH the rest of the segment (even garbage) is skipped and the
    switch record's end_lsn is the next segment start."""
    w = WalWriter()
    heap_like(w, 3)
    sw = w.switch(junk=b"\xff" * 5000)
    nxt = w.add(1, 0, 5, record_body(main=b"after"))
    recs = list(read_all(w).records())
    by = {x.lsn: x for x in recs}
    assert by[sw].end_lsn == w.base + SEG
    assert nxt == w.base + SEG + 40
    assert by[nxt].main_data == b"after" and by[nxt].prev == sw


@pytest.mark.parametrize(
    ("magic", "version"), [(0xD110, 15), (0xD113, 16), (0xD116, 17), (0xD118, 18)]
)
def test_version_from_magic(magic: int, version: int) -> None:
    """Each supported page magic is recognised and pins the version."""
    w = WalWriter(magic=magic)
    heap_like(w, 2)
    r = read_all(w)
    assert len(list(r.records())) == 2
    assert r.version == version


def test_unknown_magic_is_unsupported_version() -> None:
    """A page magic with no format table raises UnsupportedVersionError at that page."""
    w = WalWriter(magic=0xD106)
    heap_like(w, 2)
    with pytest.raises(UnsupportedVersionError) as exc:
        list(read_all(w).records())
    assert exc.value.lsn == w.base


GOLDEN = sorted((Path(__file__).resolve().parents[1] / "data").glob("wal*_*.bin"))


@pytest.mark.parametrize("window", GOLDEN, ids=lambda f: f.stem)
@pytest.mark.parametrize("magic", [0xD106, 0xD10D, 0xD11A, 0x0000])
def test_real_wal_with_unknown_magic_is_refused(window: Path, magic: int) -> None:
    """Real WAL (the golden windows of PG15 and PG18) whose second page claims a version
    with no format table (13, 14, a future one, none) reads up to that page, then raises
    UnsupportedVersionError naming the magic and the page's LSN; nothing after it."""
    lsn = int(window.stem.split("_")[1], 16)
    data = bytearray(window.read_bytes())
    r = XLogReader(lsn)
    r.feed(bytes(data), lsn)
    intact = list(r.records())
    struct.pack_into("<H", data, BLCK, magic)
    r = XLogReader(lsn)
    r.feed(bytes(data), lsn)
    got: list[XLogRecord] = []
    with pytest.raises(UnsupportedVersionError, match=f"0x{magic:04X}") as exc:
        got.extend(r.records())
    assert exc.value.lsn == lsn + BLCK
    assert got == [rec for rec in intact if rec.end_lsn <= lsn + BLCK][: len(got)]
    assert got and all(rec.lsn < lsn + BLCK for rec in got)


def test_bad_crc() -> None:
    """A flipped bit in a record's data fails the CRC at that record's LSN."""
    w = WalWriter()
    lsns = heap_like(w, 5)
    data = bytearray(w.data())
    data[lsns[3] - w.base + 60] ^= 0x04
    r = read_all(w, bytes(data))
    got = []
    with pytest.raises(WalCorruptionError) as exc:
        got.extend(r.records())
    assert exc.value.lsn == lsns[3]
    assert [x.lsn for x in got] == lsns[:3]


def test_wrong_prev_link() -> None:
    """xl_prev must be the previous record's LSN."""
    w = WalWriter()
    a = w.add(1, 0, 1, record_body(main=b"a"))
    b = w.add(1, 0, 2, record_body(main=b"b"), prev=a - 8)
    with pytest.raises(WalCorruptionError) as exc:
        list(read_all(w).records())
    assert exc.value.lsn == b


def test_zero_tail_is_end_of_wal() -> None:
    """Zeros where a record would start end the WAL quietly (sticky, no error)."""
    w = WalWriter()
    heap_like(w, 3)
    r = read_all(w)
    assert len(list(r.records())) == 3 and r.end_of_wal
    assert list(r.records()) == []


def _zero_from(w: WalWriter, page_lsn: int, pages: int = 2) -> bytes:
    """The writer's stream with everything from `page_lsn` on zeroed (the live tail of
    pg_wal: the rest of a pre-allocated or recycled segment), padded by `pages` pages."""
    data = bytearray(w.data()) + bytes(pages * BLCK)
    off = page_lsn - w.base
    data[off:] = bytes(len(data) - off)
    return bytes(data)


@pytest.mark.parametrize("size", [9000, 30000])
def test_zeroed_continuation_page_is_end_of_wal(size: int) -> None:
    """A record whose continuation page is all zeros (its tail not yet written to
    pg_wal) is the end of WAL, not an unsupported version 0x0000: the records before it
    are yielded, the position stays at that record, and it stays so when read again.
    With a 30000-byte record the zero page is the third of four: the second page is
    validated first."""
    w = WalWriter()
    before = heap_like(w, 3)
    lsn = w.add(1, 0, 2, record_body(main=b"b" * size))
    zero_page = (lsn & ~(BLCK - 1)) + (BLCK if size < 20000 else 2 * BLCK)
    r = read_all(w, _zero_from(w, zero_page))
    assert [x.lsn for x in r.records()] == before
    assert r.end_of_wal
    assert r.next_lsn == lsn and r.last_lsn == before[-1]
    assert list(r.records()) == []
    assert r.next_lsn == lsn


def test_zeroed_page_under_a_straddling_record_header_is_end_of_wal() -> None:
    """A record whose 24-byte header crosses into an all-zero page: end of WAL at it."""
    w = WalWriter()
    heap_like(w, 3)
    w.filler_to(BLCK - 16)
    lsn = w.add(10, 0x00, 42, record_body([Block(0, blk=7, data=b"z" * 10)], b"main"))
    assert lsn % BLCK == BLCK - 16
    r = read_all(w, _zero_from(w, (lsn & ~(BLCK - 1)) + BLCK))
    got = [x.lsn for x in r.records()]
    assert got[-1] < lsn and r.end_of_wal and r.next_lsn == lsn


def test_zeroed_next_segment_under_a_record_is_end_of_wal() -> None:
    """A record that continues into the next segment, whose file is still all zeros
    (the long-header page of a pre-allocated segment): end of WAL at that record."""
    w = WalWriter()
    heap_like(w, 500)
    while (w.pos + 4000) // SEG == w.pos // SEG:
        heap_like(w, 1)
    lsn = w.add(1, 0, 2, record_body(main=b"s" * 6000))
    seg_start = (lsn // SEG + 1) * SEG
    r = read_all(w, _zero_from(w, seg_start))
    recs = list(r.records())
    assert recs[-1].end_lsn == lsn and r.end_of_wal and r.next_lsn == lsn


def test_zeroed_continuation_page_fed_alone_is_end_of_wal_at_once() -> None:
    """Fed in chunks that end with just the zero page's header, the reader reports the
    end of WAL without waiting for the rest of a record that will never come."""
    w = WalWriter()
    before = heap_like(w, 3)
    lsn = w.add(1, 0, 2, record_body(main=b"b" * 60000))
    zero_page = (lsn & ~(BLCK - 1)) + 2 * BLCK
    data = _zero_from(w, zero_page)
    r = XLogReader(w.base, segment_size=w.seg_size)
    r.feed(data[: zero_page - w.base + 24], w.base)
    assert [x.lsn for x in r.records()] == before
    assert r.end_of_wal and r.next_lsn == lsn


def test_damaged_page_before_a_zeroed_page_is_still_an_error() -> None:
    """A continuation page with a damaged magic, before the zero page, is still
    UnsupportedVersionError naming that page: the zeros after it do not hide it."""
    w = WalWriter()
    heap_like(w, 3)
    lsn = w.add(1, 0, 2, record_body(main=b"b" * 30000))
    page = (lsn & ~(BLCK - 1)) + BLCK
    data = bytearray(_zero_from(w, page + 2 * BLCK))
    struct.pack_into("<H", data, page - w.base, 0xD0FF)
    r = read_all(w, bytes(data))
    with pytest.raises(UnsupportedVersionError, match="0xD0FF") as exc:
        list(r.records())
    assert exc.value.lsn == page
    assert not r.end_of_wal


@pytest.mark.parametrize("where", ["continuation", "segment start"])
def test_zero_magic_on_a_nonzero_page_is_unsupported_version(where: str) -> None:
    """A page whose magic is 0x0000 but whose header is not all zeros is damage, not the
    end of WAL: UnsupportedVersionError naming the page's LSN (on a continuation page,
    and on the long-header page where the record after an XLOG_SWITCH starts)."""
    w = WalWriter()
    heap_like(w, 3)
    if where == "continuation":
        lsn = w.add(1, 0, 2, record_body(main=b"b" * 9000))
        page = (lsn & ~(BLCK - 1)) + BLCK
    else:
        w.switch()
        heap_like(w, 3)
        page = w.base + SEG
    data = bytearray(w.data())
    struct.pack_into("<H", data, page - w.base, 0x0000)
    with pytest.raises(UnsupportedVersionError, match="0x0000") as exc:
        list(read_all(w, bytes(data)).records())
    assert exc.value.lsn == page


def test_wrong_pageaddr() -> None:
    """A page whose xlp_pageaddr is not its own address (a recycled page) is refused."""
    w = WalWriter()
    lsns = heap_like(w, 200)
    data = bytearray(w.data())
    struct.pack_into("<Q", data, 2 * BLCK + 8, 0x7000000)
    got: list[XLogRecord] = []
    with pytest.raises(WalCorruptionError) as exc:
        got.extend(read_all(w, bytes(data)).records())
    assert exc.value.lsn is not None and exc.value.lsn <= w.base + 2 * BLCK
    assert [x.lsn for x in got] == lsns[: len(got)]


@given(st.lists(st.integers(min_value=1, max_value=20000), min_size=1, max_size=30))
def test_any_chunking_gives_the_same_records(cuts: list[int]) -> None:
    """Feeding the same WAL in arbitrary chunks yields exactly the records of one feed."""
    w = WalWriter()
    heap_like(w, 150)
    w.add(1, 0, 2, record_body(main=b"b" * 20000))
    heap_like(w, 20)
    data = w.data()
    whole = list(read_all(w).records())
    r = XLogReader(w.base, segment_size=SEG)
    out: list[XLogRecord] = []
    pos = 0
    for c in cuts:
        r.feed(data[pos : pos + c], w.base + pos)
        pos += c
        out.extend(r.records())
        if pos >= len(data):
            break
    if pos < len(data):
        r.feed(data[pos:], w.base + pos)
        out.extend(r.records())
    assert out == whole
    assert r.buffered_bytes < len(data)


def test_start_mid_page_like_streaming() -> None:
    """A first chunk starting at a record inside a page (no page header) works."""
    w = WalWriter()
    lsns = heap_like(w, 100)
    data = w.data()
    start = lsns[10]
    r = XLogReader(start, segment_size=SEG, prev_lsn=lsns[9])
    r.feed(data[start - w.base :], start)
    assert [x.lsn for x in r.records()] == lsns[10:]


def test_page_start_with_contrecord_skips_continuation() -> None:
    """Starting at a page whose top is a continuation skips it (XLogFindNextRecord)."""
    w = WalWriter()
    w.add(1, 0, 1, record_body(main=b"a" * 10))
    big = w.add(1, 0, 2, record_body(main=b"b" * 9000))
    after = heap_like(w, 5)
    start = w.base + BLCK
    r = XLogReader(start, segment_size=SEG)
    r.feed(w.data()[BLCK:], start)
    recs = list(r.records())
    assert [x.lsn for x in recs] == after
    assert recs[0].prev == big


def test_new_record_on_contrecord_page_is_error() -> None:
    """A record expected at a page top whose header says continuation is corruption."""
    w = WalWriter()
    w.add(1, 0, 1, record_body(main=b"a" * 10))
    w.filler_to(BLCK - 32)
    w.add(1, 0, 1, record_body(main=b"a" * 6))  # ends exactly at the page end
    heap_like(w, 2)
    data = bytearray(w.data())
    struct.pack_into("<HI", data, BLCK + 2, 1, 0)  # set contrecord flag (info, tli low)
    struct.pack_into("<I", data, BLCK + 4, 1)
    with pytest.raises(WalCorruptionError):
        list(read_all(w, bytes(data)).records())


def _page(seed: int) -> bytes:
    body = bytes((i * seed) % 251 for i in range(BLCK - 1000))
    return struct.pack("<QHHHHHHI", 0x1_0000_3000, 0, 0, 48, 1000, 8192, 0x2004, 0) + body[:960]


def test_images_with_hole_plain_pglz_lz4() -> None:
    """Full-page images come back as BLCKSZ pages with the hole zero-filled, whether
    stored plain, pglz- or lz4-compressed; BKPIMAGE_APPLY is reported."""
    head = _page(3)[:48]
    tail = bytes((i * 7) % 253 for i in range(BLCK - 1000))
    page = head + bytes(1000 - 48) + tail
    hole_off, hole_len = 48, 1000 - 48
    stored = page[:hole_off] + page[hole_off + hole_len :]
    w = WalWriter()
    blocks = [
        Block(0, image=stored, hole_offset=hole_off, bimg_info=0x01 | 0x02),
        Block(
            1,
            image=pglz.compress_literal(stored),
            hole_offset=hole_off,
            hole_length=hole_len,
            bimg_info=0x01 | 0x04,
            same_rel=True,
        ),
        Block(
            2,
            image=lz4.block.compress(stored, store_size=False),
            hole_offset=hole_off,
            hole_length=hole_len,
            bimg_info=0x01 | 0x08 | 0x02,
            same_rel=True,
            data=b"blockdata",
        ),
        Block(3, image=page, bimg_info=0x02, rel=(1663, 5, 999)),
    ]
    # pglz_literal is larger than the page; PG never stores that, but it must decode.
    lsn = w.add(0, 0xB0, 1, record_body(blocks, b"fpi"))
    (rec,) = [x for x in read_all(w).records() if x.lsn == lsn]
    assert [b.image for b in rec.blocks] == [page] * 4
    assert [b.apply_image for b in rec.blocks] == [True, False, True, True]
    assert rec.blocks[2].data == b"blockdata"
    assert rec.blocks[1].locator == rec.blocks[0].locator
    assert rec.blocks[3].locator.rel_number == 999
    assert rec.blocks[1].hole_length == hole_len and rec.blocks[1].hole_offset == hole_off


def test_zstd_image_is_a_clear_error() -> None:
    """A zstd-compressed image is refused with a WalError naming the record's LSN."""
    w = WalWriter()
    lsn = w.add(0, 0xB0, 1, record_body([Block(0, image=b"\x28\xb5\x2f\xfd" * 10, bimg_info=0x10)]))
    with pytest.raises(WalError) as exc:
        list(read_all(w).records())
    assert exc.value.lsn == lsn and "zstd" in str(exc.value)


def test_bad_lz4_image_is_corruption() -> None:
    """An lz4 image that does not decompress to the page size is corruption."""
    w = WalWriter()
    lsn = w.add(0, 0xB0, 1, record_body([Block(0, image=b"\x10abc" * 3, bimg_info=0x08)]))
    with pytest.raises(WalCorruptionError) as exc:
        list(read_all(w).records())
    assert exc.value.lsn == lsn


def test_origin_toplevel_long_main_data_and_forks() -> None:
    """Origin (253), top-level xid (252), long main data (254), forks, WILL_INIT."""
    w = WalWriter()
    main = b"L" * 1000
    blocks = [Block(0, fork=2, blk=3, will_init=True), Block(4, blk=9, same_rel=True, data=b"x")]
    lsn = w.add(10, 0x00, 800, record_body(blocks, main, origin=7, toplevel=777))
    (rec,) = list(read_all(w).records())
    assert rec.lsn == lsn and rec.origin == 7 and rec.toplevel_xid == 777
    assert rec.main_data == main
    assert [(b.block_id, b.fork, b.block) for b in rec.blocks] == [(0, 2, 3), (4, 0, 9)]
    assert rec.blocks[0].flags & 0x40 and rec.block(4) is rec.blocks[1]
    assert rec.block(1) is None


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (
            struct.pack("<BBHIIII", 3, 0, 0, 1, 2, 3, 0) + struct.pack("<BBHI", 1, 0x80, 0, 0),
            "block_id",
        ),
        (struct.pack("<BBHIIII", 0, 0x20, 0, 1, 2, 3, 0), "HAS_DATA"),
        (struct.pack("<BBHIIII", 0, 0x00, 5, 1, 2, 3, 0) + b"12345", "HAS_DATA"),
        (struct.pack("<BBHI", 0, 0x80, 0, 0), "SAME_REL"),
        (struct.pack("<B", 40), "invalid block_id"),
        (struct.pack("<BB", 255, 200) + b"x", "invalid length"),
        (struct.pack("<BBHHHBIIII", 0, 0x10, 0, 8192, 5, 0, 1, 2, 3, 0), "image header"),
    ],
)
def test_malformed_block_headers(body: bytes, message: str) -> None:
    """DecodeXLogRecord's checks raise WalCorruptionError with the record's LSN."""
    w = WalWriter()
    lsn = w.add(10, 0, 1, body)
    with pytest.raises(WalCorruptionError) as exc:
        list(read_all(w).records())
    assert exc.value.lsn == lsn
    assert message in str(exc.value)


def test_invalid_rmid_and_length() -> None:
    """An rmgr id outside the built-in and custom ranges, or a tiny xl_tot_len, fails."""
    w = WalWriter()
    lsn = w.add(60, 0, 1, record_body(main=b"x"))
    with pytest.raises(WalCorruptionError, match="resource manager ID") as exc:
        list(read_all(w).records())
    assert exc.value.lsn == lsn
    w2 = WalWriter()
    lsn2 = w2.add(1, 0, 1, record_body(main=b"x"))
    data = bytearray(w2.data())
    struct.pack_into("<I", data, lsn2 - w2.base, 12)
    with pytest.raises(WalCorruptionError, match="record length") as exc2:
        list(read_all(w2, bytes(data)).records())
    assert exc2.value.lsn == lsn2


def test_segment_size_mismatch_and_noncontiguous_feed() -> None:
    """The long header's segment size must match; chunks must be contiguous."""
    w = WalWriter()
    heap_like(w, 2)
    r = XLogReader(w.base, segment_size=2 * SEG)
    r.feed(w.data(), w.base)
    with pytest.raises(WalCorruptionError, match="segment size"):
        list(r.records())
    r2 = XLogReader(w.base, segment_size=SEG)
    r2.feed(w.data()[:100], w.base)
    with pytest.raises(WalError, match=r"position|contiguous"):
        r2.feed(b"x", w.base + 50)


def test_walk_headers_matches_records() -> None:
    """The header walk sees the same (lsn, len, rmid, info, xid) as the full decode."""
    w = WalWriter()
    heap_like(w, 300)
    w.add(1, 0x20, 2, record_body(main=b"b" * 20000))
    full = [(x.lsn, x.total_len, x.rmid, x.info, x.xid) for x in read_all(w).records()]
    assert list(read_all(w).walk_headers()) == full
