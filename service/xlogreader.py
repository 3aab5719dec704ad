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
XLogRecord / BlockRef are built through construction twins (see `_XLogRecordInit`).
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterator
from dataclasses import fields
from typing import cast

import lz4.block
from google_crc32c import extend as _crc_extend
from google_crc32c import value as _crc_value

from service import pglz
from service.errors import DecodeError, WalCorruptionError, WalError, format_lsn
from service.walformat import (
    BKPBLOCK_FORK_MASK,
    BKPBLOCK_HAS_DATA,
    BKPBLOCK_HAS_IMAGE,
    BKPBLOCK_SAME_REL,
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
    XLR_BLOCK_ID_DATA_LONG,
    XLR_BLOCK_ID_DATA_SHORT,
    XLR_BLOCK_ID_ORIGIN,
    XLR_BLOCK_ID_TOPLEVEL_XID,
    XLR_MAX_BLOCK_ID,
    WalFormat,
    format_for_magic,
)
from service.walrecord import BlockRef, RelFileLocator, XLogRecord

_REC_HDR = struct.Struct("<IIQBBxxI")  # XLogRecord
_REC_HDR_NO_CRC = struct.Struct("<IIQBB")  # XLogRecord up to xl_rmid
_PAGE_HDR = struct.Struct("<HHIQI")  # XLogPageHeaderData
_LONG_PAGE_EXTRA = struct.Struct("<QII")  # xlp_sysid, xlp_seg_size, xlp_xlog_blcksz
_BLK_HDR = struct.Struct("<BBH")  # XLogRecordBlockHeader (id, fork_flags, data_length)
_IMG_HDR = struct.Struct("<HHB")  # XLogRecordBlockImageHeader
_LOCATOR = struct.Struct("<III")  # RelFileLocator
_U16 = struct.Struct("<H")
_U32 = struct.Struct("<I")

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


# Construction twins. XLogRecord and BlockRef are frozen slotted dataclasses, whose
# __init__ sets each field through object.__setattr__ (~0.9 us per object, the largest
# cost of records()). A twin has the same __slots__, so its plain __init__ stores fast
# and then retypes the instance (__class__ assignment between layout-identical slotted
# classes): the result is an ordinary, immutable XLogRecord / BlockRef, equal to one
# built by the dataclass __init__. The twins take the classes' own __slots__; the check
# below fails the import if walrecord.py gains a field without the twin following.
class _XLogRecordInit:
    __slots__ = XLogRecord.__slots__

    def __init__(
        self,
        lsn: int,
        end_lsn: int,
        total_len: int,
        xid: int,
        prev: int,
        info: int,
        rmid: int,
        crc: int,
        main_data: bytes,
        blocks: tuple[BlockRef, ...],
        toplevel_xid: int | None,
        origin: int | None,
    ) -> None:
        self.lsn = lsn
        self.end_lsn = end_lsn
        self.total_len = total_len
        self.xid = xid
        self.prev = prev
        self.info = info
        self.rmid = rmid
        self.crc = crc
        self.main_data = main_data
        self.blocks = blocks
        self.toplevel_xid = toplevel_xid
        self.origin = origin
        # Retype to the layout-identical frozen class (see above).
        self.__class__ = XLogRecord  # type: ignore[assignment]


class _BlockRefInit:
    __slots__ = BlockRef.__slots__

    def __init__(
        self,
        block_id: int,
        locator: RelFileLocator,
        fork: int,
        block: int,
        flags: int,
        data: bytes,
        image: bytes | None,
        apply_image: bool,
        image_len: int,
        hole_offset: int,
        hole_length: int,
        bimg_info: int,
    ) -> None:
        self.block_id = block_id
        self.locator = locator
        self.fork = fork
        self.block = block
        self.flags = flags
        self.data = data
        self.image = image
        self.apply_image = apply_image
        self.image_len = image_len
        self.hole_offset = hole_offset
        self.hole_length = hole_length
        self.bimg_info = bimg_info
        self.__class__ = BlockRef  # type: ignore[assignment]


def _check_twin(twin: type, cls: type) -> None:
    code = twin.__dict__["__init__"].__code__
    params = list(code.co_varnames[1 : code.co_argcount])
    if params != [f.name for f in fields(cls)]:
        raise RuntimeError(f"{twin.__name__} no longer matches the fields of {cls.__name__}")


_check_twin(_XLogRecordInit, XLogRecord)
_check_twin(_BlockRefInit, BlockRef)
_new_record = cast("type[XLogRecord]", _XLogRecordInit)
_new_blockref = cast("type[BlockRef]", _BlockRefInit)


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
        self._locators: dict[bytes, RelFileLocator] = {}
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
        decode = self._decode
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
                    tot_len = _U32.unpack_from(buf, off)[0]
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
            self._fmt = fmt
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

    # --- record body (DecodeXLogRecord) ----------------------------------------------

    def _decode(
        self,
        lsn: int,
        end_lsn: int,
        tot_len: int,
        xid: int,
        prev: int,
        info: int,
        rmid: int,
        crc: int,
        buf: bytes,
        off: int,
    ) -> XLogRecord:
        # The verified record at buf[off:off + tot_len] (header included).
        p = off + SIZE_OF_XLOG_RECORD
        if tot_len >= _MIN_ONE_BLOCK:
            # The commonest shape (a heap insert/update/delete without page image):
            # block 0 with data and its own relation, then short main data, nothing
            # else. One unpack parses every header; tot_len must then account for
            # exactly the two payloads, which is the general path's final check.
            block_id, flags, data_len, key, blk, main_id, main_len = _unpack_one_block(buf, p)
            if (
                not block_id
                and main_id == XLR_BLOCK_ID_DATA_SHORT
                and flags & _ONE_BLOCK_FLAGS_MASK == BKPBLOCK_HAS_DATA
                and data_len
                and tot_len == _MIN_ONE_BLOCK + data_len + main_len
            ):
                locators = self._locators
                loc = locators.get(key)
                if loc is None:
                    loc = RelFileLocator(*_LOCATOR.unpack(key))
                    if len(locators) < 4096:
                        locators[key] = loc
                p += _ONE_BLOCK_HEADERS
                data_end = p + data_len
                return _new_record(
                    lsn,
                    end_lsn,
                    tot_len,
                    xid,
                    prev,
                    info,
                    rmid,
                    crc,
                    buf[data_end : data_end + main_len] if main_len else b"",
                    (
                        _new_blockref(
                            0,
                            loc,
                            flags & BKPBLOCK_FORK_MASK,
                            blk,
                            flags,
                            buf[p:data_end],
                            None,
                            False,
                            0,
                            0,
                            0,
                            0,
                        ),
                    ),
                    None,
                    None,
                )
        fmt = self._fmt if self._fmt is not None else DEFAULT_FORMAT
        remaining = tot_len - SIZE_OF_XLOG_RECORD
        datatotal = 0
        origin: int | None = None
        toplevel: int | None = None
        main_len = 0
        max_block_id = -1
        last_loc: RelFileLocator | None = None
        # (block_id, fork_flags, data_len, img_len, hole_off, hole_len, bimg_info, loc, blk)
        heads: list[tuple[int, int, int, int, int, int, int, RelFileLocator, int]] = []
        locators = self._locators
        while remaining > datatotal:
            block_id = buf[p]
            p += 1
            remaining -= 1
            if block_id == XLR_BLOCK_ID_DATA_SHORT:
                if remaining < 1:
                    raise _short(lsn)
                main_len = buf[p]
                p += 1
                remaining -= 1
                datatotal += main_len
                break
            if block_id == XLR_BLOCK_ID_DATA_LONG:
                if remaining < 4:
                    raise _short(lsn)
                main_len = _U32.unpack_from(buf, p)[0]
                p += 4
                remaining -= 4
                datatotal += main_len
                break
            if block_id == XLR_BLOCK_ID_ORIGIN:
                if remaining < 2:
                    raise _short(lsn)
                origin = _U16.unpack_from(buf, p)[0]
                p += 2
                remaining -= 2
                continue
            if block_id == XLR_BLOCK_ID_TOPLEVEL_XID:
                if remaining < 4:
                    raise _short(lsn)
                toplevel = _U32.unpack_from(buf, p)[0]
                p += 4
                remaining -= 4
                continue
            if block_id > XLR_MAX_BLOCK_ID:
                raise WalCorruptionError(f"invalid block_id {block_id}", lsn=lsn)
            if block_id <= max_block_id:
                raise WalCorruptionError(f"out-of-order block_id {block_id}", lsn=lsn)
            max_block_id = block_id
            if remaining < 3:
                raise _short(lsn)
            fork_flags = buf[p]
            data_len = _U16.unpack_from(buf, p + 1)[0]
            p += 3
            remaining -= 3
            has_data = fork_flags & BKPBLOCK_HAS_DATA
            if has_data and data_len == 0:
                raise WalCorruptionError("BKPBLOCK_HAS_DATA set, but no data included", lsn=lsn)
            if not has_data and data_len != 0:
                raise WalCorruptionError(
                    f"BKPBLOCK_HAS_DATA not set, but data length is {data_len}", lsn=lsn
                )
            datatotal += data_len
            img_len = hole_off = hole_len = bimg_info = 0
            if fork_flags & BKPBLOCK_HAS_IMAGE:
                if remaining < 5:
                    raise _short(lsn)
                img_len, hole_off, bimg_info = _IMG_HDR.unpack_from(buf, p)
                p += 5
                remaining -= 5
                has_hole = bimg_info & fmt.bkpimage_has_hole
                compressed = bimg_info & fmt.bkpimage_compressed_mask
                if has_hole and compressed:
                    if remaining < 2:
                        raise _short(lsn)
                    hole_len = _U16.unpack_from(buf, p)[0]
                    p += 2
                    remaining -= 2
                elif has_hole:
                    hole_len = BLCKSZ - img_len
                datatotal += img_len
                if (
                    (has_hole and (hole_off == 0 or hole_len <= 0 or img_len == BLCKSZ))
                    or (not has_hole and (hole_off != 0 or hole_len != 0))
                    or (compressed and img_len == BLCKSZ)
                    or (not has_hole and not compressed and img_len != BLCKSZ)
                    or hole_off + hole_len > BLCKSZ
                    or img_len == 0
                ):
                    raise WalCorruptionError(
                        f"invalid block image header (length {img_len}, hole offset "
                        f"{hole_off}, hole length {hole_len}, flags 0x{bimg_info:02X}) "
                        f"for block_id {block_id}",
                        lsn=lsn,
                    )
            if not fork_flags & BKPBLOCK_SAME_REL:
                if remaining < 12:
                    raise _short(lsn)
                key = buf[p : p + 12]
                loc = locators.get(key)
                if loc is None:
                    loc = RelFileLocator(*_LOCATOR.unpack_from(buf, p))
                    if len(locators) < 4096:
                        locators[key] = loc
                p += 12
                remaining -= 12
                last_loc = loc
            elif last_loc is None:
                raise WalCorruptionError("BKPBLOCK_SAME_REL set but no previous rel", lsn=lsn)
            else:
                loc = last_loc
            if remaining < 4:
                raise _short(lsn)
            blk = _U32.unpack_from(buf, p)[0]
            p += 4
            remaining -= 4
            heads.append(
                (block_id, fork_flags, data_len, img_len, hole_off, hole_len, bimg_info, loc, blk)
            )
        if remaining != datatotal:
            raise _short(lsn)
        blocks: list[BlockRef] = []
        for (
            block_id,
            fork_flags,
            data_len,
            img_len,
            hole_off,
            hole_len,
            bimg_info,
            loc,
            blk,
        ) in heads:
            image: bytes | None = None
            if img_len:
                image = _restore_image(
                    fmt,
                    buf[p : p + img_len],
                    hole_off=hole_off,
                    hole_len=hole_len,
                    bimg_info=bimg_info,
                    lsn=lsn,
                    block_id=block_id,
                )
                p += img_len
            data = buf[p : p + data_len] if data_len else b""
            p += data_len
            blocks.append(
                _new_blockref(
                    block_id,
                    loc,
                    fork_flags & BKPBLOCK_FORK_MASK,
                    blk,
                    fork_flags,
                    data,
                    image,
                    bool(bimg_info & fmt.bkpimage_apply),
                    img_len,
                    hole_off,
                    hole_len,
                    bimg_info,
                )
            )
        main_data = buf[p : p + main_len] if main_len else b""
        return _new_record(
            lsn,
            end_lsn,
            tot_len,
            xid,
            prev,
            info,
            rmid,
            crc,
            main_data,
            tuple(blocks),
            toplevel,
            origin,
        )


# XLogRecordBlockHeader (id, fork_flags, data_length), RelFileLocator (kept as the
# 12-byte cache key), BlockNumber, then XLR_BLOCK_ID_DATA_SHORT and its length byte.
_ONE_BLOCK = struct.Struct("<BBH12sIBB")
_unpack_one_block = _ONE_BLOCK.unpack_from
_ONE_BLOCK_HEADERS = _ONE_BLOCK.size  # 22
_MIN_ONE_BLOCK = SIZE_OF_XLOG_RECORD + _ONE_BLOCK_HEADERS
_ONE_BLOCK_FLAGS_MASK = BKPBLOCK_HAS_IMAGE | BKPBLOCK_HAS_DATA | BKPBLOCK_SAME_REL


def _short(lsn: int) -> WalCorruptionError:
    return WalCorruptionError("record with invalid length (block headers overrun it)", lsn=lsn)


def _restore_image(
    fmt: WalFormat,
    img: bytes,
    *,
    hole_off: int,
    hole_len: int,
    bimg_info: int,
    lsn: int,
    block_id: int,
) -> bytes:
    """The full BLCKSZ page of a block image: decompressed, hole zero-filled
    (RestoreBlockImage)."""
    want = BLCKSZ - hole_len
    if bimg_info & fmt.bkpimage_compress_pglz:
        try:
            raw = pglz.decompress(img, want, lsn=lsn)
        except DecodeError as exc:
            raise WalCorruptionError(
                f"could not decompress pglz image of block_id {block_id}: {exc.message}", lsn=lsn
            ) from exc
    elif bimg_info & fmt.bkpimage_compress_lz4:
        try:
            raw = lz4.block.decompress(img, uncompressed_size=want)
        except lz4.block.LZ4BlockError as exc:
            raise WalCorruptionError(
                f"could not decompress lz4 image of block_id {block_id}", lsn=lsn
            ) from exc
        if len(raw) != want:
            raise WalCorruptionError(
                f"lz4 image of block_id {block_id} is {len(raw)} bytes, expected {want}",
                lsn=lsn,
            )
    elif bimg_info & fmt.bkpimage_compress_zstd:
        raise WalError(
            f"block_id {block_id} has a zstd-compressed image; pgcdc cannot decompress zstd "
            "(set wal_compression to pglz or lz4)",
            lsn=lsn,
        )
    else:
        raw = img
    if hole_len == 0:
        return raw
    return raw[:hole_off] + _ZERO_PAGE[:hole_len] + raw[hole_off:]
