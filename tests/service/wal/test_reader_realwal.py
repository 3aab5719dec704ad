"""XLog reader against WAL written by real PostgreSQL 15 to 18, checked by pg_waldump."""

from __future__ import annotations

import re
import shutil
import struct
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg2
import pytest

from connectors.postgres.archive import read_records
from service.errors import UnsupportedVersionError, WalError
from service.impl import xlog_reader_class
from service.wal.format import FORMATS
from service.wal.record import XLogRecord
from tests.fixtures.services import require_features
from tests.service.realwal import (
    Workload,
    as_tuple,
    fresh_db,
    lsn_str,
    run_workload,
    segment_names,
    waldump,
)

pytestmark = pytest.mark.integration

WAL_PAGE_MAGIC = {fmt.version: magic for magic, fmt in FORMATS.items()}

_workloads: dict[int, Workload] = {}
_pins: list[Any] = []


@pytest.fixture(scope="module", autouse=True)
def _release_pins() -> Iterator[None]:
    yield
    while _pins:
        _pins.pop().close()  # the temporary slots go with their sessions


def workload(info: dict[str, Any]) -> Workload:
    """One workload per server for this module (in its own database). Its WAL is kept
    for the module by a temporary physical slot reserved before it: the servers are
    shared, and others' checkpoints would otherwise recycle the segments between the
    tests that read them."""
    if info["version"] not in _workloads:
        pin = psycopg2.connect(info["dsn"])
        pin.autocommit = True
        _pins.append(pin)
        with pin.cursor() as cur:
            cur.execute(
                "SELECT pg_create_physical_replication_slot(%s, true, true)",
                (f"xlr_pin_{uuid.uuid4().hex[:10]}",),
            )
        db = fresh_db(info, "xlr")
        _workloads[info["version"]] = run_workload(info, db)
    return _workloads[info["version"]]


def ours(info: dict[str, Any], w: Workload) -> list[XLogRecord]:
    """Our reader over the server's pg_wal for the workload's range."""
    return list(read_records(info["pgdata"] + "/pg_wal", w.start, w.end))


def test_records_match_pg_waldump(pg: dict[str, Any]) -> None:
    """Every record of a varied workload matches pg_waldump on LSN, rmgr, lengths, xid,
    prev and block references (rel, fork, block, FPW, apply, hole, compression)."""
    w = workload(pg)
    theirs = waldump(pg, w.start, w.end)
    mine = [as_tuple(r, pg["version"]) for r in ours(pg, w)]
    last = theirs[-1][0]
    mine_cut = [r for r in mine if r[0] <= last]
    assert len(theirs) > 500
    assert len(mine) - len(mine_cut) <= 1
    for a, b in zip(mine_cut, theirs, strict=True):
        assert a == b
    rmgrs = {r[1] for r in theirs}
    assert {"Heap", "Heap2", "Transaction", "XLOG", "Btree", "LogicalMessage"} <= rmgrs
    assert any(b[6] for r in theirs for b in r[6]), "workload produced no full-page image"
    assert any(b[10] == "pglz" for r in theirs for b in r[6]), "no pglz image"
    print(f"\nPostgreSQL {pg['version']}: {len(theirs)} records compared with pg_waldump")


def test_lz4_images_match_pg_waldump(pg: dict[str, Any]) -> None:
    """Where the build has lz4, the workload's lz4-compressed full-page images are among
    the records that matched pg_waldump (their compression method included)."""
    require_features(pg, "lz4")
    w = workload(pg)
    theirs = waldump(pg, w.start, w.end)
    mine = {as_tuple(r, pg["version"]) for r in ours(pg, w)}
    lz4 = [r for r in theirs if any(b[10] == "lz4" for b in r[6])]
    assert lz4, "no lz4 image"
    assert all(r in mine for r in lz4)


def test_restored_images_are_plausible_pages(pg: dict[str, Any]) -> None:
    """Every restored image is a BLCKSZ page whose header is sane: pd_lower/pd_upper/
    pd_special within the page and ordered, page size/version 8192|4."""
    w = workload(pg)
    n = 0
    for rec in ours(pg, w):
        for b in rec.blocks:
            if b.image is None:
                continue
            page = b.image
            assert len(page) == 8192
            lower, upper, special, size_version = struct.unpack_from("<HHHH", page, 12)
            if lower == 0 and upper == 0:
                continue  # a new (all-zero) page
            assert 24 <= lower <= upper <= special <= 8192, (rec.lsn, b)
            assert size_version == 8192 | 4
            n += 1
    assert n > 10


# pg_waldump --save-fullpage names each file TLI-LSNHI-LSNLO.spc.db.rel.blk_FORK with
# the fork's name from forkNames[] (XLogRecordSaveFPWs in pg_waldump.c).
_FORKS = {"_main": 0, "_fsm": 1, "_vm": 2, "_init": 3}


def test_images_equal_pg_waldump_save_fullpage(pg: dict[str, Any], tmp_path: Path) -> None:
    """pg_waldump --save-fullpage (PG16+) writes the pages it restores (RestoreBlockImage,
    written unchanged); ours are byte for byte equal, for every fork.

    The files are told apart by the fork too: a record can carry images of the same
    block number of two forks of one relation (a heap page and its visibility-map page,
    with data checksums on, as initdb's default is from PG18), and those files differ
    only in the fork suffix."""
    require_features(pg, "pg_waldump_save_fullpage")
    w = workload(pg)
    subprocess.run(
        [
            pg["bin"] + "/pg_waldump",
            "-p",
            pg["pgdata"] + "/pg_wal",
            "-s",
            lsn_str(w.start),
            "-e",
            lsn_str(w.end),
            f"--save-fullpage={tmp_path}",
            *segment_names(pg, w.start, w.end),
        ],
        capture_output=True,
        check=False,
    )
    name = re.compile(
        r"^([0-9A-F]{8})-([0-9A-F]{8})-([0-9A-F]{8})\.(\d+)\.(\d+)\.(\d+)\.(\d+)(_\w+)$"
    )
    saved: dict[tuple[int, int, int, int, int, int], bytes] = {}
    for f in tmp_path.iterdir():
        m = name.match(f.name)
        assert m, f.name
        g = m.groups()
        lsn = (int(g[1], 16) << 32) | int(g[2], 16)
        key = (lsn, int(g[3]), int(g[4]), int(g[5]), int(g[6]), _FORKS[g[7]])
        saved[key] = f.read_bytes()
    assert len(saved) > 10
    compared = compressed = 0
    forks: set[int] = set()
    for rec in ours(pg, w):
        for b in rec.blocks:
            if b.image is None:
                continue
            loc = b.locator
            key = (rec.lsn, loc.spc_oid, loc.db_oid, loc.rel_number, b.block, b.fork)
            if key not in saved:
                continue  # an image of a record past the range pg_waldump read
            assert saved.pop(key) == b.image, (rec.lsn, b)
            compared += 1
            compressed += b.bimg_info & 0x04 != 0
            forks.add(b.fork)
    print(
        f"\nPostgreSQL {pg['version']}: {compared} images (forks {sorted(forks)}) equal to "
        "--save-fullpage's"
    )
    assert compared > 10 and compressed > 0
    assert not saved, f"pg_waldump saved images we did not restore: {sorted(saved)[:5]}"


def _completed_segment(
    info: dict[str, Any], tmp_path: Path, *, lead: bool = False
) -> tuple[Path, int]:
    """A copy of a whole segment the server has finished (after a WAL switch), alone in
    a directory of its own, and the segment's start LSN. With `lead`, a small message
    comes before the big one (else, right after another switch, the big message is the
    segment's first record)."""
    conn = psycopg2.connect(info["dsn"])
    conn.autocommit = True
    try:
        with conn.cursor() as cur:
            # One statement, so that another test's switch cannot come in between: a
            # 40 kB message fills a few pages of the segment that is then switched.
            cur.execute(
                "SELECT pg_logical_emit_message(false, 'pgcdc.lead', %s::text),"
                " pg_walfile_name(pg_logical_emit_message(false, 'pgcdc.magic',"
                " repeat('m', 40000))), pg_switch_wal()",
                ("x" if lead else None,),
            )
            name = cur.fetchone()[1]
    finally:
        conn.close()
    wal = tmp_path / "pg_wal"
    wal.mkdir()
    shutil.copyfile(Path(info["pgdata"]) / "pg_wal" / name, wal / name)
    size = (wal / name).stat().st_size
    return wal / name, int(name[8:16], 16) * (1 << 32) + int(name[16:24], 16) * size


@pytest.mark.parametrize("where", ["first page", "last page"])
def test_real_segment_with_another_magic_is_refused(
    pg: dict[str, Any], tmp_path: Path, where: str
) -> None:
    """A real segment of this server reads whole, with the version its magic names; with
    one page's magic changed to 0xD106 (PostgreSQL 13, which has no format table) it is
    refused with UnsupportedVersionError naming that magic and that page's LSN, and with
    a later page claiming another supported version, refused as a change of version."""
    segment, start = _completed_segment(pg, tmp_path)
    records = list(read_records(segment.parent, start))
    assert records[-1].rmid == 0 and records[-1].info == 0x40  # XLOG_SWITCH
    page = 0 if where == "first page" else (records[-1].lsn - start) // 8192
    assert where == "first page" or page >= 4  # the message's pages came first
    data = bytearray(segment.read_bytes())
    assert struct.unpack_from("<H", data, 0)[0] == WAL_PAGE_MAGIC[pg["version"]]

    struct.pack_into("<H", data, page * 8192, 0xD106)
    segment.write_bytes(data)
    with pytest.raises(UnsupportedVersionError) as exc:
        list(read_records(segment.parent, start))
    assert "0xD106" in str(exc.value)
    assert exc.value.lsn == start + page * 8192

    if page:
        other = next(m for v, m in WAL_PAGE_MAGIC.items() if v != pg["version"])
        struct.pack_into("<H", data, page * 8192, other)
        segment.write_bytes(data)
        with pytest.raises(WalError, match=f"page magic 0x{other:04X} differs"):
            list(read_records(segment.parent, start))


def test_real_segment_zeroed_under_a_record_ends_where_pg_waldump_stops(
    pg: dict[str, Any], tmp_path: Path
) -> None:
    """The live tail of pg_wal: a real segment whose pages from the middle of a record
    on are zeros (never written yet). Our reader yields exactly the records pg_waldump
    prints, then reports the end of WAL at that record (not an unsupported version
    0x0000), where pg_waldump stops on XLogReaderValidatePageHeader's "invalid magic
    number 0000" at the first zeroed page."""
    segment, start = _completed_segment(pg, tmp_path, lead=True)
    whole = list(read_records(segment.parent, start))
    message = next(r for r in whole if r.rmid == 21 and len(r.main_data) > 40000)
    assert whole[0].lsn < message.lsn, "the small message leads (a segment boundary came between)"
    zero_page = (message.lsn & ~8191) + 8192
    data = bytearray(segment.read_bytes())
    data[zero_page - start :] = bytes(len(data) - (zero_page - start))
    segment.write_bytes(data)

    reader = xlog_reader_class()(start, segment_size=len(data))
    reader.feed(bytes(data), start)
    mine = [r.lsn for r in reader.records()]
    assert reader.end_of_wal and reader.next_lsn == message.lsn
    assert mine == [r.lsn for r in whole if r.lsn < message.lsn]

    proc = subprocess.run(
        [pg["bin"] + "/pg_waldump", "-p", str(segment.parent), "-s", lsn_str(start), segment.name],
        capture_output=True,
        text=True,
        check=False,
    )
    theirs = [
        (int(m.group(1), 16) << 32) | int(m.group(2), 16)
        for m in re.finditer(r"lsn: ([0-9A-F]+)/([0-9A-F]+),", proc.stdout)
    ]
    assert theirs == mine
    assert "invalid magic number 0000" in proc.stderr, proc.stderr
    # "... in log segment S, offset N" (PG15), "... in WAL segment S, LSN L, offset N"
    at = re.search(r"invalid magic number 0000 in \w+ segment \w+, .*offset (\d+)", proc.stderr)
    assert at is not None and int(at.group(1)) == zero_page - start, proc.stderr
