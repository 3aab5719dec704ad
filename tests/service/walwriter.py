"""A tiny WAL *writer* for tests: builds byte-exact pages and records with struct.

It lays records out as XLogInsertRecord/CopyXLogRecordToWAL do: MAXALIGNed record
starts, long page header on each segment's first page, XLP_FIRST_IS_CONTRECORD with
xlp_rem_len on continuation pages, xl_prev chaining and CRC32C over data then header.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

import google_crc32c

BLCK = 8192
SYSID = 7_000_000_000_000_000_001


@dataclass
class Block:
    """One block reference to encode (XLogRecordBlockHeader and what follows it)."""

    block_id: int
    rel: tuple[int, int, int] = (1663, 5, 16384)
    fork: int = 0
    blk: int = 0
    data: bytes = b""
    image: bytes | None = None  # bytes as stored (already hole-removed / compressed)
    hole_offset: int = 0
    hole_length: int = 0
    bimg_info: int = 0
    same_rel: bool = False
    will_init: bool = False


def record_body(
    blocks: list[Block] | None = None,
    main: bytes = b"",
    *,
    origin: int | None = None,
    toplevel: int | None = None,
) -> bytes:
    """Everything after the 24-byte XLogRecord header (as XLogRecordAssemble)."""
    heads = bytearray()
    datas = bytearray()
    for b in blocks or []:
        flags = b.fork
        if b.image is not None:
            flags |= 0x10
        if b.data:
            flags |= 0x20
        if b.will_init:
            flags |= 0x40
        if b.same_rel:
            flags |= 0x80
        heads += struct.pack("<BBH", b.block_id, flags, len(b.data))
        if b.image is not None:
            heads += struct.pack("<HHB", len(b.image), b.hole_offset, b.bimg_info)
            if b.bimg_info & 0x01 and b.bimg_info & 0x1C:
                heads += struct.pack("<H", b.hole_length)
            datas += b.image
        if not b.same_rel:
            heads += struct.pack("<III", *b.rel)
        heads += struct.pack("<I", b.blk)
        datas += b.data
    if origin is not None:
        heads += struct.pack("<BH", 253, origin)
    if toplevel is not None:
        heads += struct.pack("<BI", 252, toplevel)
    if main:
        if len(main) < 256:
            heads += struct.pack("<BB", 255, len(main))
        else:
            heads += struct.pack("<BI", 254, len(main))
    return bytes(heads + datas + main)


@dataclass
class WalWriter:
    """Append records to an in-memory WAL stream starting at a segment start."""

    base: int = 0x1000000
    seg_size: int = 64 * 1024
    magic: int = 0xD110
    tli: int = 1
    buf: bytearray = field(default_factory=bytearray)
    pos: int = 0
    prev: int = 0
    lsns: list[int] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.pos = self.base

    def _put(self, data: bytes) -> None:
        off = self.pos - self.base
        if len(self.buf) < off + len(data):
            self.buf.extend(bytes(off + len(data) - len(self.buf)))
        self.buf[off : off + len(data)] = data
        self.pos += len(data)

    def _page_header(self, rem_len: int) -> None:
        info = 0x0001 if rem_len else 0
        if self.pos % self.seg_size == 0:
            info |= 0x0002
            hdr = struct.pack("<HHIQI", self.magic, info, self.tli, self.pos, rem_len)
            hdr += b"\0" * 4 + struct.pack("<QII", SYSID, self.seg_size, BLCK)
        else:
            hdr = struct.pack("<HHIQI", self.magic, info, self.tli, self.pos, rem_len) + b"\0" * 4
        self._put(hdr)

    def add(self, rmid: int, info: int, xid: int, body: bytes, *, prev: int | None = None) -> int:
        """Append one record; returns its LSN."""
        tot = 24 + len(body)
        hdr = struct.pack("<IIQBBxx", tot, xid, self.prev if prev is None else prev, info, rmid)
        crc = google_crc32c.extend(google_crc32c.value(body), hdr)
        rec = hdr + struct.pack("<I", crc) + body
        if self.pos % BLCK == 0:
            self._page_header(0)
        lsn = self.pos
        written = 0
        while written < len(rec):
            if self.pos % BLCK == 0:
                self._page_header(len(rec) - written)
            space = BLCK - self.pos % BLCK
            chunk = rec[written : written + space]
            self._put(chunk)
            written += len(chunk)
        pad = (-self.pos) % 8
        if pad:
            self._put(b"\0" * pad)
        self.prev = lsn
        self.lsns.append(lsn)
        return lsn

    def filler_to(self, page_offset: int) -> None:
        """Add one record so the next record starts at `page_offset` in the current page."""
        here = self.pos % BLCK
        if here == 0:
            self._page_header(0)
            here = self.pos % BLCK
        gap = page_offset - here
        assert gap >= 32 and gap % 8 == 0, gap
        n = gap - 26 if gap - 26 < 256 else gap - 29
        self.add(0, 0x00, 0, record_body(main=b"f" * n))

    def switch(self, junk: bytes = b"") -> int:
        """XLOG_SWITCH; the rest of the segment gets page headers and `junk`/zeros."""
        lsn = self.add(0, 0x40, 0, b"")
        filler = junk
        while self.pos % self.seg_size:
            if self.pos % BLCK == 0:
                self._page_header(0)
            space = BLCK - self.pos % BLCK
            self._put((filler[:space]).ljust(space, b"\0"))
            filler = filler[space:]
        return lsn

    def data(self, pad_to_page: bool = True) -> bytes:
        """The WAL written so far (zero-filled to the end of the current page)."""
        out = bytes(self.buf)
        if pad_to_page and len(out) % BLCK:
            out += bytes(BLCK - len(out) % BLCK)
        return out
