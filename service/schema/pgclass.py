"""The historic pg_class: which relation a relfilenode was, read off the WAL.

PostgreSQL tells whose relfilenode a change went to (RelidByRelfilenumber in
ReorderBufferProcessTXN) by reading pg_class under a historic snapshot: the catalog's
own pages, kept from vacuum by the slot's catalog_xmin. pgcdc reads no page of the
server's past. It rebuilds what it needs of pg_class's pages from the WAL instead, as
redo would (heap_redo for pg_class's own records, any record's full-page images), far
enough to read every pg_class row an INSERT, UPDATE or MULTI_INSERT writes. This is how
TRUNCATE, CLUSTER and VACUUM FULL, which fire no event trigger, are resolved from the
WAL alone: each writes the pg_class row that points the table at its new relfilenode.

Why pages: a catalog's heap records are logged for redo, not for logical decoding
(RelationIsLogicallyLogged is false for catalogs), so
- under a full-page image the record carries no tuple (no REGBUF_KEEP_DATA): the row is
  read off the image, which is the page after the change;
- an UPDATE whose new row stays on the old row's page logs only the bytes that differ
  (XLH_UPDATE_PREFIX_FROM_OLD / SUFFIX_FROM_OLD, log_heap_update): the row is the old
  row's prefix and suffix around the logged middle (heap_xlog_update).

Receives: `XLogRecord`s in WAL order, of which it takes (`wants`) those with a block of
pg_class's relfilenode in the database, and XLOG_RELMAP_UPDATE records (relmap_redo:
pg_class is a mapped catalog, whose relfilenode only the relation map names, and which
VACUUM FULL pg_class moves). The driver must hand it every such record whole: the
native reader is told which relation to hand on so (`on_move`, `watch_relations`).
Hands on: a `ClassRowEvent` for each pg_class row written by a heap INSERT, UPDATE,
HOT_UPDATE or MULTI_INSERT, in record order; a `ClassRowLostEvent` where a row cannot
be rebuilt (its page was never shown whole since decoding started). Its tablespace is
the database's default where pg_class stores 0.

Completeness: under full_page_writes every page's first change after a checkpoint's redo
point carries an image, so from a redo point on every row is rebuilt. The session
starts at one (a physical slot's restart_lsn is the redo pointer), and must restart at
one: `redo_floor` is the newest redo point decoded at or before an LSN, which is what
the worker confirms to its slot and stores as its restart LSN. Rows of pages changed
only before the start are never needed: an update of such a page after the start is
that page's first change since a redo point, so it carries an image.

Errors: a pg_class row shorter than the columns read here, a relation map of another
format, or an image that is no heap page raise `DecodeError` with the LSN.
Memory: the rows of the pg_class pages changed since decoding started: at most
pg_class's own size. Pure: no I/O.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from dataclasses import dataclass

import service.wal.rmgr as rt
from service.decode.events import ClassRowEvent, ClassRowLostEvent, Event
from service.errors import DecodeError
from service.wal.record import BlockRef, RelFileLocator, XLogRecord

PG_CLASS_OID = 1259  # RelationRelationId
MAIN_FORKNUM = 0
XLOG_RELMAP_UPDATE = 0x00
RELMAP_MAGIC = 0x592717  # RELMAPPER_FILEMAGIC, the same in 15..18
SIZE_OF_PAGE_HEADER = 24  # SizeOfPageHeaderData
SIZE_OF_HEAP_TUPLE_HEADER = 23  # offsetof(HeapTupleHeaderData, t_bits)
SIZE_OF_HEAP_HEADER = 5  # xl_heap_header
LP_NORMAL = 1
REDO_POINTS_KEPT = 64

_U16 = struct.Struct("<H")
_HEAP_HEADER = struct.Struct("<HHB")  # t_infomask2, t_infomask, t_hoff
_UPDATE = struct.Struct("<IHBBIH")  # xl_heap_update
_MULTI = struct.Struct("<BxH")  # xl_heap_multi_insert: flags, ntuples
_MULTI_TUPLE = struct.Struct("<HHHB")  # xl_multi_insert_tuple: datalen, infomask2/1, t_hoff
_RELMAP_UPDATE = struct.Struct("<IIi")  # xl_relmap_update: dbid, tsid, nbytes
_RELMAP_HEAD = struct.Struct("<ii")  # RelMapFile: magic, num_mappings
_RELMAP_ENTRY = struct.Struct("<II")  # RelMapping: mapoid, mapfilenumber
_OID = struct.Struct("<I")

XLH_UPDATE_PREFIX_FROM_OLD = 1 << 5
XLH_UPDATE_SUFFIX_FROM_OLD = 1 << 6
XLH_INSERT_ON_TOAST_RELATION = 1 << 4


@dataclass(slots=True, frozen=True)
class ClassLayout:
    """Where the pg_class columns read here lie in a row's data (after t_hoff). All are
    fixed-width and NOT NULL and precede every nullable column, so they sit at the same
    offsets in every row of one major version (checked against each server's
    pg_attribute by tests/integration/test_pgclass_vs_server.py). `oid` is at 0."""

    relfilenode: int
    reltablespace: int
    reltoastrelid: int
    relkind: int
    relrewrite: int

    @property
    def min_len(self) -> int:
        return self.relrewrite + 4


# oid, relname (name, 64, char-aligned), relnamespace, reltype, reloftype, relowner,
# relam, relfilenode, reltablespace, relpages, reltuples, relallvisible, [18:
# relallfrozen], reltoastrelid, relhasindex, relisshared, relpersistence, relkind,
# relnatts, relchecks, 8 bools, relreplident, relispartition, relrewrite, ...
_LAYOUT_15 = ClassLayout(
    relfilenode=88, reltablespace=92, reltoastrelid=108, relkind=115, relrewrite=128
)
_LAYOUT_18 = ClassLayout(
    relfilenode=88, reltablespace=92, reltoastrelid=112, relkind=119, relrewrite=132
)
LAYOUTS: dict[int, ClassLayout] = {15: _LAYOUT_15, 16: _LAYOUT_15, 17: _LAYOUT_15, 18: _LAYOUT_18}

Tuple = tuple[int, bytes]
"""A stored row: (t_hoff, the tuple's bytes from t_bits on), as xl_heap_header logs it."""


def page_tuples(page: bytes, lsn: int) -> dict[int, Tuple]:
    """The normal line pointers' tuples of a heap page image, by offset number
    (PageGetItemId / PageGetItem)."""
    if len(page) < SIZE_OF_PAGE_HEADER:
        raise DecodeError(f"pg_class page image of {len(page)} bytes", lsn=lsn)
    lower = _U16.unpack_from(page, 12)[0]
    if lower < SIZE_OF_PAGE_HEADER or lower > len(page):
        raise DecodeError(f"pg_class page image with pd_lower {lower}", lsn=lsn)
    out: dict[int, Tuple] = {}
    for i in range((lower - SIZE_OF_PAGE_HEADER) // 4):
        word = _OID.unpack_from(page, SIZE_OF_PAGE_HEADER + 4 * i)[0]
        off, flags, length = word & 0x7FFF, (word >> 15) & 0x3, word >> 17
        if flags != LP_NORMAL:
            continue
        if length < SIZE_OF_HEAP_TUPLE_HEADER or off + length > len(page):
            raise DecodeError(
                f"pg_class page image item {i + 1} at {off} of {length} bytes", lsn=lsn
            )
        hoff = page[off + 22]
        out[i + 1] = (hoff, page[off + SIZE_OF_HEAP_TUPLE_HEADER : off + length])
    return out


class HistoricClass:
    """pg_class's pages, as far as the decoded WAL shows them; see the module docstring.

    `locator` is pg_class's relfilenode in the decoded database (None: nothing is
    tracked, and every row is reported lost); `_pages` maps a block to its rows by
    offset number, each the last one written there. `_redo` holds the newest redo points
    decoded (`note_checkpoint`), ascending; `start_lsn` stands in for one before them.
    """

    __slots__ = ("_layout", "_pages", "_redo", "locator", "on_move", "start_lsn")

    def __init__(self, version: int, locator: RelFileLocator | None, start_lsn: int) -> None:
        layout = LAYOUTS.get(version)
        if layout is None:
            raise DecodeError(f"no pg_class layout for PostgreSQL {version}")
        self._layout = layout
        self.locator = locator
        self.start_lsn = start_lsn
        self._pages: dict[int, dict[int, Tuple]] = {}
        self._redo: list[int] = []
        # Told the new locator when the relation map moves pg_class (the native reader
        # must then hand on that relation's records whole).
        self.on_move: Callable[[RelFileLocator], None] | None = None

    # --- restart points --------------------------------------------------------------

    def note_checkpoint(self, redo: int) -> None:
        """A checkpoint record was decoded: `redo` is a point from which the WAL alone
        rebuilds every page (full-page images from there on)."""
        if redo >= self.start_lsn and (not self._redo or redo > self._redo[-1]):
            self._redo.append(redo)
            del self._redo[:-REDO_POINTS_KEPT]

    def redo_floor(self, lsn: int) -> int:
        """The newest redo point at or before `lsn` (the decoding start if none): where
        decoding must restart to rebuild pg_class's rows from `lsn` on."""
        best = self.start_lsn
        for redo in self._redo:
            if redo > lsn:
                break
            best = redo
        return min(best, lsn)

    # --- records ---------------------------------------------------------------------

    def wants(self, record: XLogRecord) -> bool:
        """Whether `observe` must see `record`."""
        if record.rmid == rt.RM_RELMAP_ID:
            return True
        loc = self.locator
        if loc is None:
            return False
        rel = loc.rel_number
        return any(b.locator.rel_number == rel and b.locator == loc for b in record.blocks)

    def observe(self, record: XLogRecord) -> list[Event]:
        """The pg_class rows `record` writes (heap_redo of pg_class, as far as needed)."""
        if record.rmid == rt.RM_RELMAP_ID:
            self._relmap(record)
            return []
        ours = [b for b in record.blocks if b.locator == self.locator and b.fork == MAIN_FORKNUM]
        for b in ours:
            if b.image is not None:
                self._pages[b.block] = page_tuples(b.image, record.lsn)
        if not ours or ours[0].block_id != 0:
            return []
        b0 = ours[0]
        op = record.info & rt.XLOG_HEAP_OPMASK
        init_page = bool(record.info & rt.XLOG_HEAP_INIT_PAGE)
        match record.rmid, op:
            case rt.RM_HEAP_ID, rt.XLOG_HEAP_INSERT:
                return self._insert(record, b0, init_page)
            case rt.RM_HEAP_ID, rt.XLOG_HEAP_UPDATE | rt.XLOG_HEAP_HOT_UPDATE:
                return self._update(record, b0, ours, init_page)
            case rt.RM_HEAP_ID, rt.XLOG_HEAP_INPLACE:
                self._inplace(record, b0)
                return []
            case rt.RM_HEAP2_ID, rt.XLOG_HEAP2_MULTI_INSERT:
                return self._multi_insert(record, b0, init_page)
            case _:
                # Every other change of a pg_class page (delete, lock, prune, freeze,
                # visibility, hint images) leaves the rows' data as they were; its image,
                # if any, was taken above.
                return []

    def _page(self, block: int, init: bool) -> dict[int, Tuple]:
        if init:
            self._pages[block] = {}
        return self._pages.setdefault(block, {})

    def _insert(self, record: XLogRecord, b0: BlockRef, init: bool) -> list[Event]:
        if len(record.main_data) < 2:
            raise DecodeError("pg_class insert without its offset", lsn=record.lsn)
        offnum = _U16.unpack_from(record.main_data)[0]
        if b0.image is None:
            data = b0.data
            if len(data) < SIZE_OF_HEAP_HEADER:
                raise DecodeError(f"pg_class insert tuple of {len(data)} bytes", lsn=record.lsn)
            self._page(b0.block, init)[offnum] = (data[4], data[SIZE_OF_HEAP_HEADER:])
        return [self._row(record, b0.block, offnum)]

    def _update(
        self, record: XLogRecord, b0: BlockRef, ours: list[BlockRef], init: bool
    ) -> list[Event]:
        main = record.main_data
        if len(main) < _UPDATE.size:
            raise DecodeError("pg_class update record truncated", lsn=record.lsn)
        _xmax, old_off, _bits, flags, _new_xmax, new_off = _UPDATE.unpack_from(main)
        if b0.image is not None:
            return [self._row(record, b0.block, new_off)]
        old_block = next((b.block for b in ours if b.block_id == 1), b0.block)
        old = self._pages.get(old_block, {}).get(old_off)
        data = b0.data
        pos = 2 * (
            bool(flags & XLH_UPDATE_PREFIX_FROM_OLD) + bool(flags & XLH_UPDATE_SUFFIX_FROM_OLD)
        )
        if len(data) < pos + SIZE_OF_HEAP_HEADER:
            raise DecodeError(f"pg_class update tuple of {len(data)} bytes", lsn=record.lsn)
        prefix = _U16.unpack_from(data)[0] if flags & XLH_UPDATE_PREFIX_FROM_OLD else 0
        suffix = _U16.unpack_from(data, pos - 2)[0] if flags & XLH_UPDATE_SUFFIX_FROM_OLD else 0
        hoff = data[pos + 4]
        if hoff < SIZE_OF_HEAP_TUPLE_HEADER:
            raise DecodeError(f"pg_class update tuple with t_hoff {hoff}", lsn=record.lsn)
        rest = data[pos + SIZE_OF_HEAP_HEADER :]
        page = self._page(b0.block, init)
        if prefix or suffix:
            if old is None:
                page.pop(new_off, None)
                return [self._lost(record, b0.block, new_off, "compressed against an unseen row")]
            old_data = old[1][old[0] - SIZE_OF_HEAP_TUPLE_HEADER :]
            if prefix + suffix > len(old_data):
                raise DecodeError(
                    f"pg_class update keeps {prefix}+{suffix} bytes of a {len(old_data)}-byte row",
                    lsn=record.lsn,
                )
            bits = hoff - SIZE_OF_HEAP_TUPLE_HEADER
            body = (
                rest[:bits] + old_data[:prefix] + rest[bits:] + old_data[len(old_data) - suffix :]
            )
        else:
            body = rest
        page[new_off] = (hoff, body)
        return [self._row(record, b0.block, new_off)]

    def _inplace(self, record: XLogRecord, b0: BlockRef) -> None:
        """heap_xlog_inplace: the row's data (after t_hoff) replaced, same length."""
        if b0.image is not None or len(record.main_data) < 2:
            return
        offnum = _U16.unpack_from(record.main_data)[0]
        page = self._pages.get(b0.block)
        if page is None or offnum not in page:
            return
        hoff, body = page[offnum]
        page[offnum] = (hoff, body[: hoff - SIZE_OF_HEAP_TUPLE_HEADER] + b0.data)

    def _multi_insert(self, record: XLogRecord, b0: BlockRef, init: bool) -> list[Event]:
        main = record.main_data
        if len(main) < _MULTI.size:
            raise DecodeError("pg_class multi-insert record truncated", lsn=record.lsn)
        _flags, ntuples = _MULTI.unpack_from(main)
        if init:
            offsets = list(range(1, ntuples + 1))
        else:
            if len(main) < _MULTI.size + 2 * ntuples:
                raise DecodeError("pg_class multi-insert record truncated", lsn=record.lsn)
            offsets = list(struct.unpack_from(f"<{ntuples}H", main, _MULTI.size))
        if b0.image is None:
            page = self._page(b0.block, init)
            data, pos = b0.data, 0
            for offnum in offsets:
                pos = (pos + 1) & ~1  # SHORTALIGN
                if pos + _MULTI_TUPLE.size > len(data):
                    raise DecodeError("pg_class multi-insert overruns its data", lsn=record.lsn)
                datalen, _im2, _im, hoff = _MULTI_TUPLE.unpack_from(data, pos)
                pos += _MULTI_TUPLE.size
                if pos + datalen > len(data):
                    raise DecodeError("pg_class multi-insert overruns its data", lsn=record.lsn)
                page[offnum] = (hoff, data[pos : pos + datalen])
                pos += datalen
        return [self._row(record, b0.block, offnum) for offnum in offsets]

    def _lost(self, record: XLogRecord, block: int, offnum: int, reason: str) -> ClassRowLostEvent:
        loc = self.locator
        return ClassRowLostEvent(
            lsn=record.lsn,
            xid=record.xid,
            db_oid=loc.db_oid if loc is not None else 0,
            block=block,
            offset=offnum,
            reason=reason,
        )

    def _row(self, record: XLogRecord, block: int, offnum: int) -> Event:
        """The row now at (block, offnum), as an event of `record`."""
        loc = self.locator
        assert loc is not None  # observe only takes blocks of the tracked relation
        tup = self._pages.get(block, {}).get(offnum)
        if tup is None:
            return self._lost(record, block, offnum, "not on the page image")
        hoff, body = tup
        data = body[hoff - SIZE_OF_HEAP_TUPLE_HEADER :]
        lay = self._layout
        if hoff < SIZE_OF_HEAP_TUPLE_HEADER or len(data) < lay.min_len:
            raise DecodeError(
                f"pg_class row at {block}/{offnum} has {len(data)} data bytes, needs {lay.min_len}",
                lsn=record.lsn,
            )
        u32 = _OID.unpack_from
        return ClassRowEvent(
            lsn=record.lsn,
            xid=record.xid,
            db_oid=loc.db_oid,
            oid=u32(data, 0)[0],
            relfilenode=u32(data, lay.relfilenode)[0],
            tablespace=u32(data, lay.reltablespace)[0] or loc.spc_oid,
            toast_relid=u32(data, lay.reltoastrelid)[0],
            relkind=chr(data[lay.relkind]),
            relrewrite=u32(data, lay.relrewrite)[0],
        )

    def _relmap(self, record: XLogRecord) -> None:
        """relmap_redo: a database's relation map rewritten whole; follow pg_class."""
        main = record.main_data
        loc = self.locator
        if loc is None or len(main) < _RELMAP_UPDATE.size:
            return
        dbid, tsid, nbytes = _RELMAP_UPDATE.unpack_from(main)
        if dbid != loc.db_oid:
            return  # another database's map, or the shared one (dbid 0)
        body = main[_RELMAP_UPDATE.size : _RELMAP_UPDATE.size + nbytes]
        if len(body) < _RELMAP_HEAD.size:
            raise DecodeError("relation map update truncated", lsn=record.lsn)
        magic, count = _RELMAP_HEAD.unpack_from(body)
        if magic != RELMAP_MAGIC or count < 0 or len(body) < 8 + 8 * count:
            raise DecodeError(
                f"relation map of magic 0x{magic:X} with {count} mappings", lsn=record.lsn
            )
        for i in range(count):
            oid, filenumber = _RELMAP_ENTRY.unpack_from(body, 8 + 8 * i)
            if oid == PG_CLASS_OID and filenumber != loc.rel_number:
                # VACUUM FULL pg_class: its new pages were written by log_newpage before
                # the map moved; they are rebuilt from the images of their next changes.
                self.locator = RelFileLocator(tsid, dbid, filenumber)
                self._pages.clear()
                if self.on_move is not None:
                    self.on_move(self.locator)
