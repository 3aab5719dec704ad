"""The native XLog reader against the Python reference: the same records, the same typed
errors at the same LSNs with the same messages, the same positions (differential).

Both readers are driven through one harness (`drive`): every chunk is fed, then
`records()` is drained, and every record, every error and the position properties after
each chunk go into an event list. The two lists must be equal. Errors do not end a run:
the harness goes on feeding, as a caller that logs and retries would, so the behaviour
after an error is compared too.
"""

from __future__ import annotations

import random
import struct
import threading
import time
from collections.abc import Iterator
from functools import cache
from pathlib import Path

import lz4.block
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from service.errors import PgcdcError, WalError
from service.impl import XLogReaderFactory, XLogReaderLike
from service.wal import pglz
from service.wal.native import NativeXLogReader
from service.wal.reader import XLogReader
from service.wal.record import XLogRecord
from tests.service.walwriter import BLCK, Block, WalWriter, record_body

DATA = Path(__file__).parents[1] / "data"
READERS: tuple[XLogReaderFactory, XLogReaderFactory] = (XLogReader, NativeXLogReader)

Event = object


def state(r: XLogReaderLike) -> tuple[object, ...]:
    """Every position property of a reader."""
    return ("state", r.end_of_wal, r.next_lsn, r.last_lsn, r.end_lsn, r.version, r.buffered_bytes)


def error(where: str, exc: PgcdcError) -> tuple[object, ...]:
    """An error as compared: where it surfaced, its class, lsn and full text."""
    return (where, type(exc).__name__, exc.lsn, str(exc))


def drive(
    cls: XLogReaderFactory,
    start: int,
    chunks: list[tuple[int, bytes]],
    *,
    seg: int = 16 << 20,
    prev_lsn: int | None = None,
    headers: bool = False,
) -> list[Event]:
    """Feed `chunks` one by one, draining `records()` (or `walk_headers()`) after each."""
    try:
        r = cls(start, segment_size=seg, prev_lsn=prev_lsn)
    except PgcdcError as exc:
        return [error("init", exc)]
    events: list[Event] = []
    for lsn, data in chunks:
        try:
            r.feed(data, lsn)
        except PgcdcError as exc:
            events.append(error("feed", exc))
        try:
            events.extend(r.walk_headers() if headers else r.records())
        except PgcdcError as exc:
            events.append(error("walk", exc))
        events.append(state(r))
    return events


def chunked(data: bytes, at: int, sizes: list[int]) -> list[tuple[int, bytes]]:
    """`data` (starting at LSN `at`) cut into chunks of the given sizes, cycled."""
    out = []
    i = 0
    k = 0
    while i < len(data):
        n = sizes[k % len(sizes)]
        out.append((at + i, data[i : i + n]))
        i += n
        k += 1
    return out


def same(start: int, chunks: list[tuple[int, bytes]], **kw: object) -> list[Event]:
    """Drive both readers; assert equal event lists; return them."""
    py, native = (drive(cls, start, chunks, **kw) for cls in READERS)  # type: ignore[arg-type]
    assert native == py
    return py


@cache
def golden() -> list[tuple[int, bytes]]:
    """The captured PG15 and PG18 WAL windows (tests/service/data)."""
    return [(int(f.stem.split("_")[1], 16), f.read_bytes()) for f in sorted(DATA.glob("wal*.bin"))]


@cache
def golden_records(which: int) -> list[XLogRecord]:
    """The Python reader's records of one undamaged golden window."""
    lsn, data = golden()[which]
    r = XLogReader(lsn)
    r.feed(data, lsn)
    return list(r.records())


# Chunk sizes: any mix of tiny (1 byte: headers split anywhere) and large chunks, with
# one large size in every cycle so that a window is not fed a byte at a time throughout.
CHUNKS = st.lists(st.integers(1, 9000), min_size=1, max_size=4).map(lambda s: [*s, 6000])


# --- real WAL ---------------------------------------------------------------------------


@pytest.mark.parametrize("which", range(4))
def test_golden_wal_whole(which: int) -> None:
    """Each golden window fed whole: identical records (every field, images included),
    end state and header walk."""
    lsn, data = golden()[which]
    events = same(lsn, [(lsn, data)])
    assert sum(isinstance(e, XLogRecord) for e in events) > 300
    assert same(lsn, [(lsn, data)], headers=True)


@settings(max_examples=40, deadline=None)
@given(which=st.integers(0, 3), sizes=CHUNKS)
def test_golden_wal_in_random_chunks(which: int, sizes: list[int]) -> None:
    """Golden WAL in random chunk sizes (1 byte .. 9 KB): identical records and
    identical positions after every chunk."""
    lsn, data = golden()[which]
    same(lsn, chunked(data, lsn, sizes))


def _damage(rng: random.Random, window: bytearray, rec_off: int) -> None:
    kind = rng.choice(["flip", "flip", "byte", "truncate", "zeropage", "magic", "prev", "len"])
    n = len(window)
    off = rng.randrange(n)
    page = off - off % BLCK
    if kind == "flip":
        window[off] ^= 1 << rng.randrange(8)
    elif kind == "byte":
        window[off] = rng.randrange(256)
    elif kind == "truncate":
        del window[off:]
    elif kind == "zeropage":
        window[page : page + BLCK] = bytes(len(window[page : page + BLCK]))
    elif kind == "magic" and page + 2 <= n:
        struct.pack_into("<H", window, page, rng.choice([0xD106, 0xD113, 0xD118, 0]))
    elif kind == "prev" and rec_off + 16 <= n:
        struct.pack_into("<Q", window, rec_off + 8, rng.randrange(1 << 40))
    elif rec_off + 4 <= n:
        struct.pack_into("<I", window, rec_off, rng.choice([0, 1, 23, 9000, 1 << 31]))


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    which=st.integers(0, 3),
    seed=st.integers(0, 2**32),
    span=st.integers(64, 4 * BLCK),
    sizes=CHUNKS,
    with_prev=st.booleans(),
    from_page=st.booleans(),
)
def test_damaged_golden_wal(
    *, which: int, seed: int, span: int, sizes: list[int], with_prev: bool, from_page: bool
) -> None:
    """Bit flips, byte changes, truncation, a zeroed page, a wrong magic, a wrong xl_prev
    or xl_tot_len in real WAL, read from a real record (fed from its page start or from
    the record itself), in random chunks: identical records, then the identical error
    (class, lsn, message), and identical behaviour when reading goes on after it."""
    rng = random.Random(seed)
    page_lsn, data = golden()[which]
    base = golden_records(which)
    i = rng.randrange(1, len(base) - 1)
    start = base[i].lsn
    feed_at = (start & ~(BLCK - 1)) if from_page else start
    ws = feed_at - page_lsn
    window = bytearray(data[ws : min(len(data), start - page_lsn + span)])
    _damage(rng, window, start - feed_at)
    prev = base[i - 1].lsn if with_prev else None
    same(start, chunked(bytes(window), feed_at, sizes), prev_lsn=prev)


# --- synthetic WAL (tests.service.walwriter) ---------------------------------------------


def _page(rng: random.Random) -> bytes:
    """A page-sized byte string with some structure (so that it compresses)."""
    return bytes(rng.choices(b"abc\0", k=BLCK))


def _image_block(rng: random.Random, block_id: int, same_rel: bool) -> Block:
    page = _page(rng)
    method = rng.choice(["raw", "hole", "pglz", "lz4", "lz4-bad", "pglz-bad", "zstd"])
    hole_off = rng.randrange(1, BLCK // 2) // 8 * 8 + 8
    hole_len = rng.randrange(1, BLCK // 2)
    kept = page[:hole_off] + page[hole_off + hole_len :]
    apply = rng.choice([0, 0x02])
    blk = Block(block_id, blk=rng.randrange(1000), same_rel=same_rel, data=b"d" * rng.randrange(3))
    if method == "raw":
        blk.image, blk.bimg_info = page, apply
    elif method == "hole":
        blk.image, blk.hole_offset, blk.bimg_info = kept, hole_off, 0x01 | apply
    elif method in ("pglz", "pglz-bad"):
        img = bytearray(pglz.compress_literal(kept))
        if method == "pglz-bad":
            img[rng.randrange(len(img))] = rng.randrange(256)
            if rng.random() < 0.5:
                del img[rng.randrange(len(img)) :]
        blk.image, blk.hole_offset, blk.hole_length = bytes(img), hole_off, hole_len
        blk.bimg_info = 0x01 | 0x04 | apply
    elif method in ("lz4", "lz4-bad"):
        img = bytearray(lz4.block.compress(kept, store_size=False))
        if method == "lz4-bad":
            for _ in range(rng.randrange(1, 3)):
                img[rng.randrange(len(img))] = rng.randrange(256)
            if rng.random() < 0.3:
                del img[rng.randrange(len(img)) :]
        blk.image, blk.hole_offset, blk.hole_length = bytes(img), hole_off, hole_len
        blk.bimg_info = 0x01 | 0x08 | apply
    else:
        blk.image, blk.hole_offset, blk.hole_length = b"z" * 100, hole_off, hole_len
        blk.bimg_info = 0x01 | 0x10
    if not blk.image:
        blk.image = b"\0"
    return blk


def write_stream(rng: random.Random) -> WalWriter:
    """A stream of varied records: small and page-spanning, with and without block
    references and (compressed, damaged-but-CRC-valid) images, origins, top-level xids,
    long main data, XLOG_SWITCH, garbage bodies with a valid CRC."""
    w = WalWriter(magic=rng.choice([0xD110, 0xD118]), seg_size=rng.choice([64 << 10, 128 << 10]))
    for _ in range(rng.randrange(1, 40)):
        kind = rng.choice(["small", "blocks", "blocks", "images", "big", "switch", "garbage"])
        xid = rng.randrange(1 << 32)
        if kind == "small":
            w.add(
                rng.randrange(1, 22),
                rng.randrange(256),
                xid,
                record_body(main=b"m" * rng.randrange(300)),
            )
        elif kind in ("blocks", "images"):
            blocks: list[Block] = []
            for bid in sorted(rng.sample(range(33), rng.randrange(1, 4))):
                same_rel = bool(blocks) and rng.random() < 0.5
                if kind == "images" and rng.random() < 0.7:
                    blocks.append(_image_block(rng, bid, same_rel))
                else:
                    blocks.append(
                        Block(
                            bid,
                            rel=(rng.randrange(5), rng.randrange(5), rng.randrange(1 << 32)),
                            fork=rng.randrange(4),
                            blk=rng.randrange(1 << 32),
                            data=rng.randbytes(rng.randrange(40)),
                            same_rel=same_rel,
                        )
                    )
            body = record_body(
                blocks,
                b"M" * rng.randrange(400),
                origin=rng.choice([None, rng.randrange(1 << 16)]),
                toplevel=rng.choice([None, rng.randrange(1 << 32)]),
            )
            w.add(rng.choice([9, 10, 11]), rng.randrange(256), xid, body)
        elif kind == "big":
            w.add(10, 0, xid, record_body(main=rng.randbytes(rng.randrange(8000, 30000))))
        elif kind == "switch":
            w.switch(junk=b"j" * rng.randrange(2000))
        else:
            # Mostly a valid rmgr id, so that the body reaches the block-header checks.
            rmid = rng.randrange(1, 22) if rng.random() < 0.9 else rng.randrange(256)
            w.add(rmid, rng.randrange(256), xid, rng.randbytes(rng.randrange(60)))
    return w


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    seed=st.integers(0, 2**32),
    sizes=CHUNKS,
    where=st.sampled_from(["base", "record", "record-page", "record-prev", "mid-feed"]),
)
def test_synthetic_wal(seed: int, sizes: list[int], where: str) -> None:
    """Generated WAL of every record shape the writer knows, read from the segment start,
    from a record (with or without its prev-link known), from the page holding a record
    (XLogFindNextRecord), or fed from mid-page: identical event lists."""
    rng = random.Random(seed)
    w = write_stream(rng)
    data = w.data()
    k = rng.randrange(len(w.lsns))
    lsn = w.lsns[k]
    start, feed_at, prev = w.base, w.base, None
    if where == "record":
        start = feed_at = lsn
    elif where == "record-page":
        start = feed_at = lsn & ~(BLCK - 1)
    elif where == "record-prev":
        start, feed_at, prev = lsn, lsn & ~(BLCK - 1), (w.lsns[k - 1] if k else None)
    elif where == "mid-feed":
        start, feed_at = lsn, lsn - rng.randrange(0, (lsn - w.base) // 8 + 1) * 8
    same(start, chunked(data[feed_at - w.base :], feed_at, sizes), seg=w.seg_size, prev_lsn=prev)
    same(
        start,
        chunked(data[feed_at - w.base :], feed_at, sizes),
        seg=w.seg_size,
        prev_lsn=prev,
        headers=True,
    )


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32), flips=st.integers(1, 3))
def test_damaged_synthetic_wal(seed: int, flips: int) -> None:
    """Generated WAL with random byte damage (page headers, record headers, bodies),
    read in random chunks: identical records, errors and positions."""
    rng = random.Random(seed)
    w = write_stream(rng)
    data = bytearray(w.data())
    for _ in range(flips):
        data[rng.randrange(len(data))] ^= 1 << rng.randrange(8)
    sizes = [rng.randrange(1, 9000), rng.randrange(1, 9000), 6000]
    same(w.base, chunked(bytes(data), w.base, sizes), seg=w.seg_size)


# --- interface details ------------------------------------------------------------------


def _take(r: XLogReaderLike, n: int) -> list[tuple[object, ...]]:
    seen = []
    it: Iterator[XLogRecord] = r.records()
    for rec in it:
        seen.append((rec.lsn, *state(r)))
        if len(seen) == n:
            break
    return seen


@settings(max_examples=30, deadline=None)
@given(which=st.integers(0, 3), stops=st.lists(st.integers(1, 200), min_size=1, max_size=6))
def test_stopping_early_resumes_where_python_does(which: int, stops: list[int]) -> None:
    """A caller that breaks out of records() after n records, then calls records()
    again: both readers resume at the same record, and the position properties seen
    while iterating (after each yielded record) are the same."""
    lsn, data = golden()[which]
    runs = []
    for cls in READERS:
        r = cls(lsn)
        r.feed(data, lsn)
        seen = [_take(r, n) for n in stops]
        seen.append([(rec.lsn,) for rec in r.records()])
        runs.append((seen, state(r)))
    assert runs[0] == runs[1]


def test_constructor_and_feed_errors_are_the_same() -> None:
    """Bad segment sizes, impossible start positions and chunks that do not line up
    raise the same class with the same lsn and message from both readers."""
    cases: list[tuple[int, int, list[tuple[int, bytes]]]] = [
        (0x1000000, 1000, []),
        (0x1000000, 3 << 20, []),
        (0x1000004, 16 << 20, []),
        (0x1000008, 16 << 20, []),
        (0x1000000, 16 << 20, [(0x1000100, b"x" * 10)]),
        (0x1000000, 16 << 20, [(0x1000000, bytes(100)), (0x1000050, b"y")]),
    ]
    for start, seg, chunks in cases:
        got = [drive(cls, start, chunks, seg=seg) for cls in READERS]
        assert got[0] == got[1]
        assert any(isinstance(e, tuple) and e[0] in ("init", "feed") for e in got[0]), (start, seg)


def test_records_are_real_walrecord_objects() -> None:
    """The native reader yields `service.wal.record` dataclasses, not look-alikes: frozen
    XLogRecord, BlockRef and RelFileLocator instances equal to the Python reader's."""
    lsn, data = golden()[0]
    recs = []
    for cls in READERS:
        r = cls(lsn)
        r.feed(data, lsn)
        recs.append(next(x for x in r.records() if x.blocks))
    py, native = recs
    assert type(native) is XLogRecord
    assert type(native.blocks[0]) is type(py.blocks[0])
    assert type(native.blocks[0].locator) is type(py.blocks[0].locator)
    assert native == py and hash(native.blocks[0].locator) == hash(py.blocks[0].locator)
    with pytest.raises(AttributeError):
        native.lsn = 0  # type: ignore[misc]


def test_a_panic_becomes_a_typed_error_and_poisons_the_reader() -> None:
    """A panic inside the native walk (armed by a test hook where a bug would strike)
    reaches Python as a WalError naming the reader's position, never as a
    PanicException; the reader then refuses every later call with the same error."""
    lsn, data = golden()[0]
    r = NativeXLogReader(lsn)
    r.feed(data, lsn)
    r._native._arm_panic_probe()
    with pytest.raises(WalError, match="internal error in the native WAL reader") as first:
        list(r.records())
    assert type(first.value) is WalError and first.value.lsn == lsn
    with pytest.raises(WalError) as again:
        list(r.records())
    assert str(again.value) == str(first.value)
    with pytest.raises(WalError):
        r.feed(b"", lsn + len(data))


def test_the_walk_releases_the_gil() -> None:
    """While the native walk runs over 24 MB of WAL (page-spanning 1 MB records, each
    CRC-checked), another Python thread keeps running: the walk does not hold the GIL.
    The walks are repeated on fresh readers until they have run for 0.3 s in all, so
    that on a loaded machine the other thread is scheduled at all while they run (one
    walk takes a few milliseconds)."""
    w = WalWriter(seg_size=16 << 20)
    for i in range(24):
        w.add(10, 0, i, record_body(main=bytes([i]) * (1 << 20)))
    data = w.data()
    ticks = 0
    stop = threading.Event()

    def spin() -> None:
        nonlocal ticks
        while not stop.is_set():
            ticks += 1

    t = threading.Thread(target=spin)
    t.start()
    walks, spent, gained = 0, 0.0, 0
    try:
        time.sleep(0.01)
        before = ticks
        time.sleep(0.05)
        free = (ticks - before) / 0.05  # the spinner's rate while this thread sleeps
        while spent < 0.3 and walks < 200:
            r = NativeXLogReader(w.base, segment_size=w.seg_size)
            r.feed(data, w.base)
            before, t0 = ticks, time.perf_counter()
            count, err = r._native.walk_headers()  # the GIL-free walk alone
            spent += time.perf_counter() - t0
            gained += ticks - before
            walks += 1
            assert (count, err) == (24, None)
    finally:
        stop.set()
        t.join()
    rate = gained / spent
    # Holding the GIL would leave the spinner about 0.5% of its free rate (a C loop that
    # keeps the GIL, measured here); released, it keeps about half.
    assert rate > 0.1 * free, (rate, free, walks, spent)
