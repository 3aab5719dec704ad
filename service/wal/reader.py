"""The XLog reader: raw WAL bytes in, verified `XLogRecord`s out (xlogreader.c).

Receives: contiguous raw WAL (page headers included) through `feed(data, at_lsn)`, in
LSN order, in chunks of any size; the first chunk may start anywhere at or before the
reader's start LSN, including mid-page (a streaming message's `data_start`).
Hands on: `records()` yields every complete record that the bytes fed so far contain,
in LSN order, each CRC32C-checked and decoded (`DecodeXLogRecord`), and stops when it
needs more bytes. `walk_headers()` is the same walk, yielding each record's header
fields instead of decoding its body (for statistics and benchmarks).

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
  yields a wrong record and never skips one. (A record whose body fails to decode is
  the exception: the position has already moved past it when the error is raised.)
- End of WAL: a zero `xl_tot_len` at a record boundary, or an all-zero page header
  where the walk next needs a page (where a record would start, or on a page a record
  continues on), is how the live tail of pg_wal looks: a segment PostgreSQL
  pre-allocated or recycled and zero-filled, not yet written that far. `records()`
  then stops and `end_of_wal` becomes true (sticky); it is not an error, and the
  position stays at the record that is not complete (PostgreSQL's recovery likewise
  ends the WAL where XLogReaderValidatePageHeader rejects such a page). A page header
  that is not all zeros but has a bad magic is still `UnsupportedVersionError`.
- After `XLOG_SWITCH` the next record is read at the next segment start; the bytes in
  between are not examined (as XLogDecodeNextRecord).
- Start position: a page-aligned `start_lsn` gets `XLogFindNextRecord` semantics (a
  continuation at the top of the page is skipped); any other `start_lsn` must be a
  record start (as a slot's restart LSN or a record's `end_lsn` always is).
- Memory: bytes before the current record are dropped at each `records()` /
  `walk_headers()` call; the reader holds at most the unconsumed tail plus one record.
- Pure: no I/O. Not thread-safe. Do not call `feed` while iterating.

This is the readable reference: one walk, every check in one place, in the order
xlogreader.c makes them. The fast path is the native reader (`service.wal.native`),
held to this one by tests/service/wal/. Record bodies are decoded by
`service.wal.recorddecode.RecordDecoder` (DecodeXLogRecord).
"""

from __future__ import annotations

import struct
from collections.abc import Iterator

from google_crc32c import extend as _crc_extend
from google_crc32c import value as _crc_value

from service._binary import U32
from service.errors import WalCorruptionError, WalError
from service.lsn import format_lsn
from service.wal.format import (
    DEFAULT_FORMAT,
    DEFAULT_SEGMENT_SIZE,
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
_PAGE_HDR = struct.Struct("<HHIQI")  # XLogPageHeaderData
_LONG_PAGE_EXTRA = struct.Struct("<QII")  # xlp_sysid, xlp_seg_size, xlp_xlog_blcksz

_PAGE_MASK = XLOG_BLCKSZ - 1
_BAD_CRC = "incorrect resource manager data checksum"  # ValidXLogRecord's message
_ZERO_HEADER = bytes(SIZE_OF_SHORT_PHD)

# (lsn, tot_len, rmid, info, xid): what walk_headers() yields
HeaderTuple = tuple[int, int, int, int, int]


def _maxalign(n: int) -> int:
    return (n + 7) & ~7


class XLogReader:
    """Incremental WAL page/record reader (XLogReaderState + XLogReadRecord).

    `version` is None until the first page header is seen. Fields: `_buf` holds the fed
    bytes from `_buf_lsn` on (up to `_fed_end`); `_next` is NextRecPtr and `_prev` the
    ReadRecPtr of the last record; pages below `_valid_upto` have a validated (or
    trusted) header; `_find_first` is true until the first record was found at a
    page-aligned start (XLogFindNextRecord).
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
        for lsn, end_lsn, record in self._walk():
            yield self._decoder.decode(lsn, end_lsn, record)

    def walk_headers(self) -> Iterator[HeaderTuple]:
        """Yield `(lsn, tot_len, rmid, info, xid)` per record: pages, headers and CRCs
        checked exactly as `records()`, without decoding block references."""
        for lsn, _, record in self._walk():
            tot_len, xid, _prev, info, rmid, _crc = _REC_HDR.unpack_from(record)
            yield lsn, tot_len, rmid, info, xid

    # --- the page/record walk (XLogDecodeNextRecord) ---------------------------------

    def _trim(self) -> None:
        # Never past the fed end: the next chunk must still line up with _buf_lsn.
        # Keep the header of a page not yet validated.
        keep = self._next if self._next < self._valid_upto else self._next & ~_PAGE_MASK
        drop = min(keep - self._buf_lsn, len(self._buf))
        if drop > 0:
            self._buf = self._buf[drop:]
            self._buf_lsn += drop

    def _walk(self) -> Iterator[tuple[int, int, bytes]]:
        """Yield `(lsn, end_lsn, record bytes)` for each verified record; the position
        (`_prev`, `_next`) has moved past a record when it is yielded."""
        if self.end_of_wal:
            return
        self._trim()
        try:
            while True:
                found = self._next_record()
                if found is None:
                    return
                self._prev, self._next = found[0], found[1]
                yield found
        finally:
            # Drop what was read, also when the caller stops early or on an error.
            self._trim()

    def _next_record(self) -> tuple[int, int, bytes] | None:
        """The record at `_next`, verified (XLogDecodeNextRecord), as (lsn, EndRecPtr,
        its tot_len bytes); None when more bytes are needed or at the end of WAL."""
        buf = self._buf
        base = self._buf_lsn
        pos = self._next
        while pos >= self._valid_upto:
            # First touch of this page: validate its header. The position may move (past
            # the header, or past a continuation when finding the first record).
            if not self._enter_page(pos):
                return None
            pos = self._next
        off = pos - base
        if pos & _PAGE_MASK <= XLOG_BLCKSZ - SIZE_OF_XLOG_RECORD:
            # The whole record header is on this page: xl_tot_len comes with it.
            if off + SIZE_OF_XLOG_RECORD > len(buf):
                return None
        elif off + 8 > len(buf):
            # The header continues on the next page; only xl_tot_len is needed here
            # (the rest is validated once the record is assembled).
            return None
        tot_len = U32.unpack_from(buf, off)[0]
        if tot_len < SIZE_OF_XLOG_RECORD or tot_len > XLOG_RECORD_MAX_SIZE:
            if tot_len == 0:
                self.end_of_wal = True
                return None
            raise WalCorruptionError(f"invalid record length {tot_len}", lsn=pos)
        if (pos & _PAGE_MASK) + tot_len <= XLOG_BLCKSZ:
            # The whole record lies on this page.
            if off + tot_len > len(buf):
                return None
            record = buf[off : off + tot_len]
            end_lsn = _maxalign(pos + tot_len)
        else:
            assembled = self._assemble(pos, tot_len)
            if assembled is None:
                return None  # more bytes needed, or end of WAL (_assemble set it)
            record, end_lsn = assembled
        _, _, prev, info, rmid, crc = _REC_HDR.unpack_from(record)
        self._check_header(pos, prev, rmid)
        if self._verify_crc and not _crc_matches(record, crc):
            raise WalCorruptionError(_BAD_CRC, lsn=pos)
        if rmid == RM_XLOG_ID and info & 0xF0 == XLOG_SWITCH:
            # Pretend the switch record extends to the end of the segment.
            end_lsn = (end_lsn + self._seg - 1) & ~(self._seg - 1)
            self._valid_upto = end_lsn
        return pos, end_lsn, record

    def _enter_page(self, pos: int) -> bool:
        """Validate the header of the page `pos` is on and step past it (and, when
        finding the first record, past a continuation). False when its bytes are not
        fed yet or it is the end of WAL."""
        page = pos & ~_PAGE_MASK
        hoff = page - self._buf_lsn
        if hoff < 0:
            raise WalError("page header needed but not fed", lsn=page)
        hsize = SIZE_OF_LONG_PHD if page % self._seg == 0 else SIZE_OF_SHORT_PHD
        if hoff + hsize > len(self._buf):
            return False
        if self._is_zero_page(hoff):
            self.end_of_wal = True
            return False
        info, rem_len, hsize = self._check_page(self._buf, hoff, page)
        self._valid_upto = page + XLOG_BLCKSZ
        if pos == page:
            pos = page + hsize
            if info & XLP_FIRST_IS_CONTRECORD:
                if not self._find_first:
                    raise WalCorruptionError(
                        "page starts with a continuation record where a new record was expected",
                        lsn=page,
                    )
                # XLogFindNextRecord: skip the tail of a record begun earlier.
                if rem_len >= XLOG_BLCKSZ - hsize:
                    pos = page + XLOG_BLCKSZ
                else:
                    pos = page + hsize + _maxalign(rem_len)
                self._next = pos
                return True
        self._find_first = False
        self._next = pos
        return True

    def _is_zero_page(self, hoff: int) -> bool:
        # An all-zero page header: a pre-allocated or recycled segment, zero-filled past
        # the last page PostgreSQL wrote. XLogReaderValidatePageHeader rejects its
        # magic 0000 and recovery ends there; so does this reader, quietly.
        return self._buf[hoff : hoff + SIZE_OF_SHORT_PHD] == _ZERO_HEADER

    def _check_header(self, lsn: int, prev: int, rmid: int) -> None:
        # ValidXLogRecordHeader (its length check is made when xl_tot_len is read)
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
        """Gather a record that crosses page boundaries (XLogDecodeNextRecord's
        reassembly); None if bytes are missing, or at the end of WAL (`end_of_wal` is
        then set and the position stays at `lsn`).

        Returns the record bytes and NextRecPtr. Each continuation page must carry
        XLP_FIRST_IS_CONTRECORD with xlp_rem_len equal to what is still missing; an
        all-zero continuation page is the end of WAL (the record's tail was never
        written), once the pages before it are validated.
        """
        buf = self._buf
        base = self._buf_lsn
        avail_end = base + len(buf)
        first = XLOG_BLCKSZ - (lsn & _PAGE_MASK)
        # Cheap availability check first, so that a huge record fed in small chunks
        # is not re-assembled once per chunk. It stops early at a zero page.
        zero_page: int | None = None
        got = first
        page = (lsn & ~_PAGE_MASK) + XLOG_BLCKSZ
        while got < tot_len:
            if page + SIZE_OF_SHORT_PHD <= avail_end and self._is_zero_page(page - base):
                zero_page = page
                break
            hsize = SIZE_OF_LONG_PHD if page % self._seg == 0 else SIZE_OF_SHORT_PHD
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
            if page == zero_page:
                self.end_of_wal = True
                return None
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


def _crc_matches(record: bytes, crc: int) -> bool:
    # ValidXLogRecord: CRC32C over the body, then the header up to xl_crc.
    got: int = _crc_extend(_crc_value(record[SIZE_OF_XLOG_RECORD:]), record[:XL_CRC_OFFSET])
    return got == crc
