"""The XLog reader: raw WAL bytes in, verified `XLogRecord`s out (xlogreader.c).

Receives: contiguous raw WAL (page headers included) through `feed(data, at_lsn)`, in
LSN order, in chunks of any size; the first chunk may start anywhere at or before the
reader's start LSN, including mid-page (a streaming message's `data_start`).
Hands on: `records()` yields every complete record that the bytes fed so far contain,
in LSN order, each CRC32C-checked and decoded (`DecodeXLogRecord`), and stops when it
needs more bytes. `walk_headers()` is the same walk without block decoding, for
statistics and benchmarks.

Guarantees:
- Every page header a record touches is validated (`XLogReaderValidatePageHeader`):
  magic (which pins the major version; an unknown magic is `UnsupportedVersionError`),
  xlp_info bits, long header exactly on segment starts (with segment size, block size
  and system identifier cross-checked), xlp_pageaddr, a timeline that never goes
  backwards, and on continuation pages `XLP_FIRST_IS_CONTRECORD` with
  `xlp_rem_len` equal to what the record still lacks. The one exception is the page
  the first chunk starts in when it starts after that page's header: that header was
  never fed, so it cannot be checked.
- Every record header is validated (`ValidXLogRecordHeader`: length, rmgr id, xl_prev
  equal to the previous record's LSN, or below the record's own LSN for the first
  one) and every record's CRC32C is verified (`ValidXLogRecord`) before it is yielded.
- Any failure raises `WalCorruptionError` / `UnsupportedVersionError` / `WalError`
  with `lsn` set, and leaves the reader positioned at the failing record: it never
  yields a wrong record and never skips one.
- End of WAL: a zero `xl_tot_len` at a record boundary, or an all-zero page header
  where a record would start, is how a pg_wal tail looks. `records()` then stops and
  `end_of_wal` becomes true (sticky); it is not an error.
- After `XLOG_SWITCH` the next record is read at the next segment start; the bytes in
  between are not examined (as XLogDecodeNextRecord).
- Start position: a page-aligned `start_lsn` gets `XLogFindNextRecord` semantics (a
  continuation at the top of the page is skipped); any other `start_lsn` must be a
  record start (as a slot's restart LSN or a record's `end_lsn` always is).
- Memory: bytes before the current record are dropped at each `records()` /
  `walk_headers()` call; the reader holds at most the unconsumed tail plus one record.
- Pure: no I/O. Not thread-safe. Do not call `feed` while iterating.

Speed (the walk is the hot loop of the service): records that lie wholly inside an
already validated page go through an inlined fast loop on buffer offsets; anything
else (page headers, records crossing pages, XLOG records, any failed check) goes
through the general path, which performs every check itself. The fast loop checks
the CRC as crc32c(body + whole header) == CRC32C_RESIDUE, which is equivalent to the
ValidXLogRecord comparison, with header and body taken by one cached Struct per length.
Record bodies are decoded by `service.wal.recorddecode.RecordDecoder` (DecodeXLogRecord).
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterator
from typing import cast

from google_crc32c import extend as _crc_extend
from google_crc32c import value as _crc_value

from service._binary import U32
from service.errors import WalCorruptionError, WalError
from service.lsn import format_lsn
from service.wal.format import (
    BLCKSZ,
    DEFAULT_FORMAT,
    DEFAULT_SEGMENT_SIZE,
    MAXALIGN,
    RM_XLOG_ID,
    SIZE_OF_LONG_PHD,
    SIZE_OF_SHORT_PHD,
    SIZE_OF_XLOG_RECORD,
    XL_CRC_OFFSET,
    XLOG_BLCKSZ,
    XLOG_RECORD_MAX_SIZE,
    XLOG_SWITCH,
    XLP_ALL_FLAGS,
    XLP_FIRST_IS_CONTRECORD,
    XLP_LONG_HEADER,
    WalFormat,
    format_for_magic,
)
from service.wal.record import XLogRecord
from service.wal.recorddecode import RecordDecoder

_REC_HDR = struct.Struct("<IIQBBxxI")  # XLogRecord
_REC_HDR_NO_CRC = struct.Struct("<IIQBB")  # XLogRecord up to xl_rmid
_PAGE_HDR = struct.Struct("<HHIQI")  # XLogPageHeaderData
_LONG_PAGE_EXTRA = struct.Struct("<QII")  # xlp_sysid, xlp_seg_size, xlp_xlog_blcksz

_PAGE_MASK = XLOG_BLCKSZ - 1
_BAD_CRC = "incorrect resource manager data checksum"  # ValidXLogRecord's message
_ZERO_PAGE = bytes(BLCKSZ)

# (lsn, tot_len, rmid, info, xid): what walk_headers() yields
HeaderTuple = tuple[int, int, int, int, int]


# CRC32C of any message followed by its own CRC32C (little-endian): the residue. A
# record's stored header (xl_crc last) thus checks as crc(body + header) == residue,
# which holds exactly when xl_crc == crc(body + header[:XL_CRC_OFFSET]) (appending 4
# fixed bytes is a bijection on CRC states), and lets the header be taken whole.
CRC32C_RESIDUE = 0x48674BC7

# tot_len -> (unpack_from returning (24-byte header, body) of an in-page record, which
# is one C call instead of two slices; MAXALIGN(tot_len)). Keys are 24..XLOG_BLCKSZ.
_Splitter = tuple[Callable[[bytes, int], tuple[bytes, bytes]], int]
_SPLITTERS: dict[int, _Splitter] = {}


def _splitter(tot_len: int) -> _Splitter:
    fmt = f"<{SIZE_OF_XLOG_RECORD}s{tot_len - SIZE_OF_XLOG_RECORD}s"
    entry = _SPLITTERS[tot_len] = (struct.Struct(fmt).unpack_from, _maxalign(tot_len))
    return entry


# tot_len -> (unpack_from returning the 24-byte header and body of an in-page record
# followed by xl_tot_len, xl_xid, xl_prev, xl_info, xl_rmid of the record after it,
# MAXALIGN(tot_len)): the walk carries the next header's fields instead of unpacking
# them again. Reads _NEXT_FIELDS bytes past the aligned end of the record.
_Chained = tuple[Callable[[bytes, int], tuple[bytes, bytes, int, int, int, int, int]], int]
_CHAINED: dict[int, _Chained] = {}
_NEXT_FIELDS = _REC_HDR_NO_CRC.size


def _chained_splitter(tot_len: int) -> _Chained:
    pad = -tot_len & (MAXALIGN - 1)
    fmt = f"<{SIZE_OF_XLOG_RECORD}s{tot_len - SIZE_OF_XLOG_RECORD}s{pad}xIIQBB"
    entry = _CHAINED[tot_len] = (struct.Struct(fmt).unpack_from, tot_len + pad)
    return entry


def _maxalign(n: int) -> int:
    return (n + 7) & ~7


class XLogReader:
    """Incremental WAL page/record reader (XLogReaderState + XLogReadRecord).

    `version` is None until the first page header is seen.
    """

    def __init__(
        self,
        start_lsn: int,
        *,
        segment_size: int = DEFAULT_SEGMENT_SIZE,
        prev_lsn: int | None = None,
        verify_crc: bool = True,
    ) -> None:
        if segment_size < XLOG_BLCKSZ or segment_size & (segment_size - 1):
            raise WalError(f"invalid WAL segment size {segment_size}", lsn=start_lsn)
        page_off = start_lsn & _PAGE_MASK
        if start_lsn & 7 or (0 < page_off < SIZE_OF_SHORT_PHD):
            raise WalError("start position is not a possible record start", lsn=start_lsn)
        self._seg = segment_size
        self._verify_crc = verify_crc
        self._buf = b""
        self._buf_lsn = start_lsn
        self._fed_end: int | None = None
        self._next = start_lsn  # NextRecPtr
        self._prev = prev_lsn  # ReadRecPtr of the previous record, when known
        self._find_first = page_off == 0
        self._valid_upto = start_lsn & ~_PAGE_MASK  # pages below this are validated
        self._fmt: WalFormat | None = None
        self._tli = 0
        self._sysid: int | None = None
        self._decoder = RecordDecoder()  # DecodeXLogRecord; its fmt follows self._fmt
        self.end_of_wal = False

    # --- public API ----------------------------------------------------------------

    @property
    def version(self) -> int | None:
        """PostgreSQL major version from the page magic (None before any page header)."""
        return self._fmt.version if self._fmt is not None else None

    @property
    def wal_format(self) -> WalFormat:
        """The format table in use (the shared default before any page header)."""
        return self._fmt if self._fmt is not None else DEFAULT_FORMAT

    @property
    def last_lsn(self) -> int | None:
        """ReadRecPtr of the last record yielded (or the `prev_lsn` given)."""
        return self._prev

    @property
    def end_lsn(self) -> int:
        """EndRecPtr of the last record yielded: where reading continues."""
        return self._next

    @property
    def next_lsn(self) -> int:
        """Where the next record (or page header) will be read."""
        return self._next

    @property
    def buffered_bytes(self) -> int:
        """How many fed bytes the reader still holds."""
        return len(self._buf)

    def feed(self, data: bytes, at_lsn: int) -> None:
        """Append raw WAL bytes that start at `at_lsn`.

        Chunks must be contiguous. The first chunk may start anywhere at or before the
        reader's position; a later chunk may also jump forward as long as it starts at
        or before the position (the bytes between were never needed, e.g. after an
        XLOG_SWITCH).
        """
        if self._fed_end is not None and at_lsn == self._fed_end:
            self._buf += data
            self._fed_end += len(data)
            return
        if at_lsn > self._next:
            raise WalError(
                f"WAL chunk starts at {format_lsn(at_lsn)}, after the reader's position",
                lsn=self._next,
            )
        if self._fed_end is not None and self._fed_end > self._next:
            raise WalError(
                f"WAL chunk at {format_lsn(at_lsn)} is not contiguous with the bytes fed "
                f"up to {format_lsn(self._fed_end)}",
                lsn=self._next,
            )
        # (Re)start the buffer. When the chunk starts inside the page of the reader's
        # position, past its header, that header is unavailable: trust the page.
        page = self._next & ~_PAGE_MASK
        if self._next & _PAGE_MASK and at_lsn > page and self._valid_upto <= page:
            self._valid_upto = page + XLOG_BLCKSZ
        self._buf = bytes(data)
        self._buf_lsn = at_lsn
        self._fed_end = at_lsn + len(data)

    def records(self) -> Iterator[XLogRecord]:
        """Yield every complete record available, fully decoded (DecodeXLogRecord)."""
        # The walk decodes and yields itself: one generator resume per record.
        return cast("Iterator[XLogRecord]", self._walk())

    def walk_headers(self) -> Iterator[HeaderTuple]:
        """Yield `(lsn, tot_len, rmid, info, xid)` per record: pages, headers and CRCs
        checked exactly as `records()`, without decoding block references.

        For speed, the position properties (`last_lsn`, `next_lsn`, `end_lsn`) are
        brought up to date when the walk leaves a page, pauses for bytes, raises, or is
        closed (a `for` loop that breaks closes it), not after every record."""
        # The walk's own generator, not a delegating one: one frame resume per record.
        return cast("Iterator[HeaderTuple]", self._walk(headers_only=True))

    # --- the page/record walk (XLogDecodeNextRecord) ---------------------------------

    def _trim(self) -> None:
        # Never past the fed end: the next chunk must still line up with _buf_lsn.
        # Keep the header of a page not yet validated.
        keep = self._next if self._next < self._valid_upto else self._next & ~_PAGE_MASK
        drop = min(keep - self._buf_lsn, len(self._buf))
        if drop > 0:
            self._buf = self._buf[drop:]
            self._buf_lsn += drop

    def _walk(self, headers_only: bool = False) -> Iterator[XLogRecord | HeaderTuple]:
        # Yields XLogRecords (records()), or HeaderTuples with headers_only (walk_headers).
        if self.end_of_wal:
            return
        self._trim()
        buf = self._buf
        base = self._buf_lsn
        blen = len(buf)
        seg = self._seg
        verify = self._verify_crc
        unpack_rec = _REC_HDR.unpack_from
        unpack_hdr = _REC_HDR_NO_CRC.unpack_from
        splitters = _SPLITTERS
        decode = self._decoder.decode
        chained = _CHAINED
        crc_value = _crc_value
        crc_extend = _crc_extend
        pos = self._next
        fmt = self._fmt if self._fmt is not None else DEFAULT_FORMAT
        rm_max = fmt.rm_max_builtin_id
        page_mask = _PAGE_MASK
        blcksz = XLOG_BLCKSZ
        hdr_size = SIZE_OF_XLOG_RECORD
        max_size = XLOG_RECORD_MAX_SIZE
        crc_off = XL_CRC_OFFSET
        valid_upto = self._valid_upto
        fed_end = base + blen
        last = self._prev
        in_walk = False  # inside the walk_headers fast loop, which defers the position
        off = 0
        try:
            while True:
                if pos < valid_upto and last is not None and not base & 7:
                    # Fast loop over the records that lie wholly in this (validated) page
                    # and in the bytes fed: the common case, with the checks of the general
                    # path below inlined. It works on offsets into buf (small ints, cheap
                    # arithmetic; base is MAXALIGNed so aligning offsets aligns LSNs).
                    # Anything unusual (a record crossing the page end, a header the fast
                    # checks reject, an XLOG record, a bad CRC) breaks out to the general
                    # path, which handles it or raises.
                    lim = (pos | page_mask) + 1
                    lim = min(lim, fed_end)
                    lim -= base
                    lim_hdr = lim - hdr_size
                    off = pos - base
                    if headers_only and verify and lim + _NEXT_FIELDS <= blen:
                        # As below, but one C call per record takes its header and body
                        # (for the CRC) and the next record's header fields.
                        in_walk = True
                        if off <= lim_hdr:
                            tot_len, xid, prev, info, rmid = unpack_hdr(buf, off)
                            while True:
                                if tot_len < hdr_size or prev != last or not rmid or rmid > rm_max:
                                    break
                                try:
                                    csplit, size = chained[tot_len]
                                except KeyError:
                                    if tot_len > blcksz:
                                        break
                                    csplit, size = _chained_splitter(tot_len)
                                nxt = off + size
                                if nxt > lim:
                                    break
                                split_out = csplit(buf, off)
                                if (
                                    crc_extend(crc_value(split_out[1]), split_out[0])
                                    != CRC32C_RESIDUE
                                ):
                                    break
                                last = base + off
                                off = nxt
                                yield last, tot_len, rmid, info, xid
                                if off > lim_hdr:
                                    break
                                # the next record's fields, straight out of the split result
                                _, _, tot_len, xid, prev, info, rmid = split_out
                    elif headers_only:
                        # The position is written back when the loop ends, or by the
                        # finally below if the caller stops while the walk is here.
                        in_walk = True
                        while off <= lim_hdr:
                            tot_len, xid, prev, info, rmid = unpack_hdr(buf, off)
                            if tot_len < hdr_size or prev != last or not rmid or rmid > rm_max:
                                break
                            try:
                                split, size = splitters[tot_len]
                            except KeyError:
                                if tot_len > blcksz:
                                    break
                                split, size = _splitter(tot_len)
                            # MAXALIGNed end; past lim also when only the padding is
                            # not fed yet (then the general path takes the record).
                            nxt = off + size
                            if nxt > lim:
                                break
                            if verify:
                                head, body = split(buf, off)
                                if crc_extend(crc_value(body), head) != CRC32C_RESIDUE:
                                    break
                            last = base + off
                            off = nxt
                            yield last, tot_len, rmid, info, xid
                    else:
                        while off <= lim_hdr:
                            tot_len, xid, prev, info, rmid, crc = unpack_rec(buf, off)
                            if tot_len < hdr_size or prev != last or not rmid or rmid > rm_max:
                                break
                            try:
                                split, size = splitters[tot_len]
                            except KeyError:
                                if tot_len > blcksz:
                                    break
                                split, size = _splitter(tot_len)
                            if off + size > lim:
                                break
                            if verify:
                                head, body = split(buf, off)
                                if crc_extend(crc_value(body), head) != CRC32C_RESIDUE:
                                    break
                            last = self._prev = base + off
                            roff = off
                            off += size
                            nxt = self._next = base + off
                            yield decode(last, nxt, tot_len, xid, prev, info, rmid, crc, buf, roff)
                    pos = self._next = base + off
                    self._prev = last
                    in_walk = False
                    if pos >= valid_upto:
                        continue
                if pos >= valid_upto:
                    # First touch of this page: validate its header.
                    page = pos & ~page_mask
                    hoff = page - base
                    if hoff < 0:
                        raise WalError("page header needed but not fed", lsn=page)
                    if hoff + (SIZE_OF_LONG_PHD if page % seg == 0 else SIZE_OF_SHORT_PHD) > blen:
                        return
                    if buf[hoff : hoff + SIZE_OF_SHORT_PHD] == _ZERO_PAGE[:SIZE_OF_SHORT_PHD]:
                        self.end_of_wal = True
                        return
                    info, rem_len, hsize = self._check_page(buf, hoff, page)
                    valid_upto = self._valid_upto = page + blcksz
                    if pos == page:
                        pos = page + hsize
                        if info & XLP_FIRST_IS_CONTRECORD:
                            if not self._find_first:
                                raise WalCorruptionError(
                                    "page starts with a continuation record where a new "
                                    "record was expected",
                                    lsn=page,
                                )
                            # XLogFindNextRecord: skip the tail of a record begun earlier.
                            if rem_len >= blcksz - hsize:
                                pos = page + blcksz
                            else:
                                pos = page + hsize + _maxalign(rem_len)
                            self._next = pos
                            continue
                    self._find_first = False
                    self._next = pos
                    rm_max = self.wal_format.rm_max_builtin_id
                off = pos - base
                poff = pos & page_mask
                if poff <= blcksz - hdr_size:
                    # The whole record header is on this page (the common case).
                    if off + hdr_size > blen:
                        return
                    tot_len, xid, prev, info, rmid, crc = unpack_rec(buf, off)
                else:
                    if off + 8 > blen:
                        return
                    tot_len = U32.unpack_from(buf, off)[0]
                    xid = prev = info = rmid = crc = 0
                if tot_len < hdr_size or tot_len > max_size:
                    if tot_len == 0:
                        self.end_of_wal = True
                        return
                    raise WalCorruptionError(f"invalid record length {tot_len}", lsn=pos)
                if poff + tot_len <= blcksz:
                    # Fast path: the whole record lies on this page.
                    end = off + tot_len
                    if end > blen:
                        return
                    # ValidXLogRecordHeader, inlined for the common case.
                    if prev != self._prev or rmid > rm_max:
                        self._check_header(pos, prev, rmid)
                    if (
                        verify
                        and crc_extend(
                            crc_value(buf[off + hdr_size : end]), buf[off : off + crc_off]
                        )
                        != crc
                    ):
                        raise WalCorruptionError(_BAD_CRC, lsn=pos)
                    nxt = (pos + tot_len + 7) & ~7
                    rbuf = buf
                    roff = off
                else:
                    got = self._assemble(pos, tot_len)
                    if got is None:
                        return
                    valid_upto = self._valid_upto
                    rbuf, nxt = got
                    roff = 0
                    _, xid, prev, info, rmid, crc = unpack_rec(rbuf, 0)
                    self._check_header(pos, prev, rmid)
                    if verify and crc_extend(crc_value(rbuf[hdr_size:]), rbuf[:crc_off]) != crc:
                        raise WalCorruptionError(_BAD_CRC, lsn=pos)
                if rmid == RM_XLOG_ID and info & 0xF0 == XLOG_SWITCH:
                    # Pretend the switch record extends to the end of the segment.
                    nxt = (nxt + seg - 1) & ~(seg - 1)
                    valid_upto = self._valid_upto = nxt
                last = self._prev = pos
                self._next = nxt
                if headers_only:
                    yield pos, tot_len, rmid, info, xid
                else:
                    yield decode(pos, nxt, tot_len, xid, prev, info, rmid, crc, rbuf, roff)
                pos = nxt
        finally:
            if in_walk:
                self._prev = last
                self._next = base + off
            # Drop what was read, also when the caller stops early or on an error.
            self._trim()

    def _check_header(self, lsn: int, prev: int, rmid: int) -> None:
        # ValidXLogRecordHeader (the full check; the walk inlines the common case)
        fmt = self._fmt if self._fmt is not None else DEFAULT_FORMAT
        if not fmt.rmid_is_valid(rmid):
            raise WalCorruptionError(f"invalid resource manager ID {rmid}", lsn=lsn)
        if self._prev is None:
            if prev >= lsn:
                raise WalCorruptionError(
                    f"record with incorrect prev-link {format_lsn(prev)}", lsn=lsn
                )
        elif prev != self._prev:
            raise WalCorruptionError(
                f"record with incorrect prev-link {format_lsn(prev)}, expected "
                f"{format_lsn(self._prev)}",
                lsn=lsn,
            )

    def _check_page(self, buf: bytes, hoff: int, page: int) -> tuple[int, int, int]:
        """Validate the page header at buf[hoff:] for WAL page `page`
        (XLogReaderValidatePageHeader). Returns (xlp_info, xlp_rem_len, header size)."""
        magic, info, tli, pageaddr, rem_len = _PAGE_HDR.unpack_from(buf, hoff)
        fmt = format_for_magic(magic, lsn=page)
        if self._fmt is None:
            self._fmt = self._decoder.fmt = fmt
        elif fmt is not self._fmt:
            raise WalCorruptionError(
                f"page magic 0x{magic:04X} differs from 0x{self._fmt.page_magic:04X} seen earlier",
                lsn=page,
            )
        if info & ~XLP_ALL_FLAGS:
            raise WalCorruptionError(f"invalid info bits {info:04X} in page header", lsn=page)
        seg_start = page % self._seg == 0
        if info & XLP_LONG_HEADER:
            if not seg_start:
                raise WalCorruptionError("long page header not at a segment start", lsn=page)
            sysid, seg_size, blcksz = _LONG_PAGE_EXTRA.unpack_from(buf, hoff + 24)
            if seg_size != self._seg:
                raise WalCorruptionError(
                    f"WAL segment size {seg_size} in page header, reader expects {self._seg}",
                    lsn=page,
                )
            if blcksz != XLOG_BLCKSZ:
                raise WalCorruptionError(f"WAL block size {blcksz} is not supported", lsn=page)
            if self._sysid is None:
                self._sysid = sysid
            elif sysid != self._sysid:
                raise WalCorruptionError(
                    f"WAL belongs to system {sysid}, earlier pages to {self._sysid}", lsn=page
                )
            hsize = SIZE_OF_LONG_PHD
        elif seg_start:
            raise WalCorruptionError("first page of a segment lacks a long header", lsn=page)
        else:
            hsize = SIZE_OF_SHORT_PHD
        if pageaddr != page:
            raise WalCorruptionError(f"unexpected pageaddr {format_lsn(pageaddr)}", lsn=page)
        if tli < self._tli:
            raise WalCorruptionError(
                f"out-of-sequence timeline ID {tli} (after {self._tli})", lsn=page
            )
        self._tli = tli
        return info, rem_len, hsize

    def _assemble(self, lsn: int, tot_len: int) -> tuple[bytes, int] | None:
        """Gather a record that crosses page boundaries; None if bytes are missing.

        Returns the record bytes and NextRecPtr. Each continuation page must carry
        XLP_FIRST_IS_CONTRECORD with xlp_rem_len equal to what is still missing.
        """
        buf = self._buf
        base = self._buf_lsn
        blen = len(buf)
        avail_end = base + blen
        seg = self._seg
        first = XLOG_BLCKSZ - (lsn & _PAGE_MASK)
        # Cheap availability check first, so that a huge record fed in small chunks
        # is not re-assembled once per chunk.
        got = first
        page = (lsn & ~_PAGE_MASK) + XLOG_BLCKSZ
        while got < tot_len:
            hsize = SIZE_OF_LONG_PHD if page % seg == 0 else SIZE_OF_SHORT_PHD
            take = min(tot_len - got, XLOG_BLCKSZ - hsize)
            if page + hsize + take > avail_end:
                return None
            got += take
            page += XLOG_BLCKSZ
        off = lsn - base
        parts = [buf[off : off + first]]
        got = first
        page = (lsn & ~_PAGE_MASK) + XLOG_BLCKSZ
        nxt = page
        while got < tot_len:
            hoff = page - base
            info, rem_len, hsize = self._check_page(buf, hoff, page)
            if not info & XLP_FIRST_IS_CONTRECORD:
                raise WalCorruptionError(
                    f"there is no contrecord flag at {format_lsn(page)}", lsn=lsn
                )
            if rem_len != tot_len - got:
                raise WalCorruptionError(
                    f"invalid contrecord length {rem_len} (expected {tot_len - got}) at "
                    f"{format_lsn(page)}",
                    lsn=lsn,
                )
            take = min(tot_len - got, XLOG_BLCKSZ - hsize)
            parts.append(buf[hoff + hsize : hoff + hsize + take])
            got += take
            self._valid_upto = page + XLOG_BLCKSZ
            nxt = page + hsize + _maxalign(take)
            page += XLOG_BLCKSZ
        return b"".join(parts), nxt
