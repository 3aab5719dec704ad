"""Fuzz the native XLog reader with cheap mutations of real WAL; print counts and outcomes.

    python tests/perf/fuzz_native_reader.py [--count N] [--procs P] [--seed S]
                                            [--python-every K] [--armed]

Inputs: the golden WAL windows in tests/service/data/ (PG15 and PG18, with pglz and lz4
full-page images; refresh them with tests/perf/fuzz_xlogreader.py --capture). Each case
starts `service.wal.native.NativeXLogReader` at a real record, feeds a window of a few
records in random chunks, after one mutation:

- flip, byte, truncate, zeropage, magic, prev, tot_len: as fuzz_xlogreader.py (most end
  at a page-header, record-header or CRC check);
- body+crc: damage inside one record's body and then recompute its CRC32C, so that the
  damage gets past ValidXLogRecord into DecodeXLogRecord, RestoreBlockImage and the
  pglz / lz4 decompressors.

The only acceptable outcomes are records equal to a prefix of the undamaged ones followed
by a typed error (a PgcdcError subclass with an lsn), end of WAL, or a stop for more
bytes. Anything else is a failure and printed: a wrong record, an untyped exception, and
a Rust panic (which the boundary turns into a WalError "internal error in the native WAL
reader", so it is recognised by that message). Every K-th case (`--python-every`) also
runs through the Python reader, and any difference in records, error class, lsn or
message is a failure too. The exit status is 1 if there was any failure.

With `--armed`, the reader is armed as a decoding session arms it
(`service.impl.predecoding`: table-change heap records parsed in the walk, records of
rmgrs without rm_decode bodiless, plain inserts gathered into InsertRuns), and what it
yields is held to the undamaged records as the armed reader must give them
(`armed_view`: the Python decoder's events in a PredecodedRecord, or the record itself
when the parse fails; an InsertRun, the events of the records it stands for); body+crc
damage then also reaches the Rust heap parsers.
"""

from __future__ import annotations

import argparse
import multiprocessing
import random
import struct
import sys
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

import google_crc32c

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from service.decode.dispatch import decoder_for  # noqa: E402
from service.decode.events import (  # noqa: E402
    ChangeKind,
    HeapChange,
    InsertRun,
    PredecodedRecord,
)
from service.errors import PgcdcError  # noqa: E402
from service.impl import predecoding  # noqa: E402
from service.wal.native import NativeXLogReader  # noqa: E402
from service.wal.reader import XLogReader  # noqa: E402
from service.wal.record import XLogRecord  # noqa: E402

DATA = ROOT / "tests" / "service" / "data"
BLCK = 8192
PANIC = "internal error in the native WAL reader"
Fixture = tuple[int, bytes, list[XLogRecord]]


ARMED = False  # --armed (set in each process before the fixtures load)
VERSIONS: dict[int, int] = {}  # fixture lsn -> PostgreSQL version


def load_fixtures() -> list[Fixture]:
    """(lsn, bytes, undamaged records) of every golden window (wal<ver>_<lsnhex>.bin);
    armed, the records as the armed reader gives them (`armed_view`)."""
    out = []
    for f in sorted(DATA.glob("wal*_*.bin")):
        lsn = int(f.stem.split("_")[1], 16)
        data = f.read_bytes()
        r = XLogReader(lsn)
        r.feed(data, lsn)
        version = VERSIONS[lsn] = int(f.stem[3:5])  # wal15_..., wal18_...
        records = list(r.records())
        if ARMED:
            records = [armed_view(rec, version) for rec in records]  # type: ignore[misc]
        out.append((lsn, data, records))
    return out


TABLE_CHANGES = {(10, 0x00), (10, 0x10), (10, 0x20), (10, 0x40), (9, 0x50)}


def armed_view(rec: XLogRecord, version: int) -> XLogRecord | PredecodedRecord:
    """What the armed reader yields for `rec`: the Python decoder's events in a
    PredecodedRecord for a table-change heap record it parses and for a record of an
    rmgr without rm_decode, none for an inert XLOG, Heap or Heap2 record; else the
    record."""
    decoder = decoder_for(version)
    bare = rec.rmid in decoder.without_decode
    head = (rec.lsn, rec.end_lsn, rec.total_len, rec.xid, rec.info, rec.rmid)
    mask = 0xF0 if rec.rmid == 0 else 0x70  # XLOG's op mask, Heap's and Heap2's
    if rec.rmid in (0, 9, 10) and (rec.rmid, rec.info & mask) in decoder.inert_ops:
        # an XLOG, Heap or Heap2 record the decoder does nothing with (FPI, Heap LOCK,
        # pruning): outside a run it comes as a bare rmgr's, with no events
        return PredecodedRecord(*head, rec.toplevel_xid, rec.origin, [])
    if not bare and (rec.rmid, rec.info & 0x70) not in TABLE_CHANGES:
        return rec
    try:
        events = [] if bare else decoder.decode(rec)
    except PgcdcError:
        return rec
    # A catalog's INSERT, UPDATE or MULTI_INSERT logged for redo only (no new tuple for
    # logical decoding) comes whole: the historic pg_class reads its block data.
    catalog_write = not bare and (
        not events
        or (
            len(events) == 1
            and isinstance(events[0], HeapChange)
            and events[0].kind is ChangeKind.UPDATE
            and events[0].new_tuple is None
        )
    )
    if catalog_write:  # as src/glue/wal.rs catalog_write
        return rec
    return PredecodedRecord(*head, rec.toplevel_xid, rec.origin, events)


def mutate(rng: random.Random, window: bytearray, rec_off: int, rec: XLogRecord) -> str:
    """Damage `window` in place (the record `rec` starts at `rec_off`); returns the kind."""
    kind = rng.choice(
        ["flip", "flip", "byte", "truncate", "zeropage", "magic", "prev", "tot_len"]
        + ["body+crc"] * 4
    )
    n = len(window)
    if kind == "flip":
        window[rng.randrange(n)] ^= 1 << rng.randrange(8)
    elif kind == "byte":
        window[rng.randrange(n)] = rng.randrange(256)
    elif kind == "truncate":
        del window[rng.randrange(n) :]
    elif kind in ("zeropage", "magic"):
        off = rng.randrange((n + BLCK - 1) // BLCK) * BLCK
        if kind == "zeropage":
            window[off : off + BLCK] = bytes(len(window[off : off + BLCK]))
        elif off + 2 <= n:
            struct.pack_into("<H", window, off, rng.choice([0xD106, 0xD101, 0xD113, 0x0000]))
    elif kind == "prev":
        struct.pack_into("<Q", window, rec_off + 8, rng.randrange(1 << 40))
    elif kind == "tot_len":
        struct.pack_into("<I", window, rec_off, rng.randrange(1 << rng.choice([5, 8, 16, 31])))
    else:
        end = rec_off + rec.total_len
        if (rec.lsn % BLCK) + rec.total_len > BLCK or end > n or rec.total_len <= 24:
            kind = "body+crc(skipped)"
        else:
            # Damage the block headers and payloads, then make the CRC right again.
            for _ in range(rng.choice([1, 1, 2, 4])):
                window[rng.randrange(rec_off + 24, end)] = rng.randrange(256)
            body = bytes(window[rec_off + 24 : end])
            crc = google_crc32c.extend(
                google_crc32c.value(body), bytes(window[rec_off : rec_off + 20])
            )
            struct.pack_into("<I", window, rec_off + 20, crc)
    return kind


def run(
    cls: type[NativeXLogReader] | type[XLogReader],
    start: int,
    prev: int,
    feed_at: int,
    window: bytes,
    chunk: int,
) -> tuple[list[XLogRecord], tuple[str, int | None, str] | str]:
    """Feed the window in chunks and drain records(); (records, outcome). Armed, the
    native reader is armed as a session arms it, and drained by decoded_records()."""
    r = cls(start, prev_lsn=prev)
    records = r.records
    if ARMED and cls is NativeXLogReader:
        decoder = decoder_for(VERSIONS[_window_of(start)])
        armed = predecoding(r, decoder.without_decode, runs=True, inert_ops=decoder.inert_ops)
        assert armed is not None
        records = armed  # type: ignore[assignment]
    got: list[XLogRecord] = []
    try:
        for c in range(0, len(window), chunk):
            r.feed(window[c : c + chunk], feed_at + c)
            got.extend(records())
    except PgcdcError as exc:
        return got, (type(exc).__name__, exc.lsn, str(exc))
    return got, "end_of_wal" if r.end_of_wal else "stop"


def _window_of(lsn: int) -> int:
    """The fixture (its first LSN) that `lsn` lies in."""
    return max(w for w in VERSIONS if w <= lsn)


def one_case(rng: random.Random, fx: Fixture, check_python: bool) -> str:
    """Run one mutated input; returns the outcome name ('FAIL:...' on a violation)."""
    page_lsn, data, base = fx
    i = rng.randrange(1, len(base) - 1)
    start = base[i].lsn
    feed_at = start & ~(BLCK - 1)
    ws = feed_at - page_lsn
    window = bytearray(data[ws : min(len(data), start - page_lsn + rng.randrange(64, 3 * BLCK))])
    kind = mutate(rng, window, start - feed_at, base[i])
    raw = bytes(window)
    chunk = rng.choice([len(raw) or 1, rng.randrange(1, 9000)])
    try:
        got, outcome = run(NativeXLogReader, start, base[i - 1].lsn, feed_at, raw, chunk)
    except Exception as exc:  # counting untyped errors is the point
        return f"FAIL:untyped {type(exc).__name__}: {exc} ({kind}, start {start:X})"
    if isinstance(outcome, tuple) and outcome[2].startswith(PANIC):
        return f"FAIL:panic {outcome[2]} ({kind}, start {start:X})"
    if isinstance(outcome, tuple) and outcome[1] is None:
        return f"FAIL:error without lsn {outcome} ({kind})"
    # body+crc may legitimately yield the damaged record itself (damage in payload bytes
    # that no check can see, as in PostgreSQL): the records after it must still match.
    if not _match(got, base, i) and not (
        kind == "body+crc" and got and _match(got[1:], base, i + _covers(got[0]))
    ):
        return f"FAIL:wrong record ({kind}, start {start:X})"
    if check_python and not ARMED:
        theirs = run(XLogReader, start, base[i - 1].lsn, feed_at, raw, chunk)
        if theirs != (got, outcome):
            return f"FAIL:differs from the Python reader ({kind}, start {start:X}, chunk {chunk})"
    name = outcome[0] if isinstance(outcome, tuple) else outcome
    return f"{kind}:{name}"


def _covers(item: object) -> int:
    """How many records an item stands for: an InsertRun its `records`, else one."""
    return item.records if isinstance(item, InsertRun) else 1


def _run_events(record: object) -> list[object]:
    """The events a record inside an InsertRun adds to it: a predecoded one's, none for
    a whole XLOG/Heap/Heap2 record the decoder does nothing with (inert: it only joins
    the run), and an impossible one for anything else (so that the run mismatches)."""
    if isinstance(record, PredecodedRecord):
        return list(record.events)
    if isinstance(record, XLogRecord) and record.rmid in (0, 9, 10):
        inert = decoder_for(VERSIONS[_window_of(record.lsn)]).inert_ops
        mask = 0xF0 if record.rmid == 0 else 0x70  # XLOG's op mask, Heap's and Heap2's
        if (record.rmid, record.info & mask) in inert:
            return []
    return [None]


def _match(got: Sequence[object], base: Sequence[object], at: int) -> bool:
    """Whether `got` is what the reader must give for the undamaged records from `at`
    on: each item equal to its record (as `armed_view` gives it), and an InsertRun the
    events of the records it stands for, ending at the last one's LSNs."""
    for item in got:
        n = _covers(item)
        part = base[at : at + n]
        if len(part) < n:
            return False
        if isinstance(item, InsertRun):
            events = [e for p in part for e in _run_events(p)]
            last = part[-1]
            if list(item.changes) != events or (item.lsn, item.end_lsn) != (
                last.lsn,  # type: ignore[attr-defined]
                last.end_lsn,  # type: ignore[attr-defined]
            ):
                return False
        elif item != part[0]:
            return False
        at += n
    return True


_FIXTURES: list[Fixture] = []


def _load(armed: bool) -> None:
    """Pool initializer: each worker process decodes the fixtures once."""
    global ARMED  # noqa: PLW0603 (the process-wide mode of this script)
    ARMED = armed
    _FIXTURES[:] = load_fixtures()


def worker(args: tuple[int, int, int]) -> Counter[str]:
    """Run `count` cases with seed `seed`; every `every`-th also through Python."""
    seed, count, every = args
    rng = random.Random(seed)
    fixtures = _FIXTURES
    hist: Counter[str] = Counter()
    for k in range(count):
        hist[one_case(rng, rng.choice(fixtures), every > 0 and k % every == 0)] += 1
    return hist


def main() -> int:
    """Parse options, fan out over processes, print the counts."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--count", type=int, default=1_000_000)
    ap.add_argument("--procs", type=int, default=1)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--python-every", type=int, default=200)
    ap.add_argument("--armed", action="store_true", help="arm the reader as a session does")
    a = ap.parse_args()
    batches = 50
    per = a.count // batches
    jobs = [
        (a.seed * 1000 + k, per + (1 if k < a.count % batches else 0), a.python_every)
        for k in range(batches)
    ]
    t = time.perf_counter()
    total: Counter[str] = Counter()
    with multiprocessing.Pool(a.procs, initializer=_load, initargs=(a.armed,)) as pool:
        for h in pool.imap_unordered(worker, jobs):
            total.update(h)
    took = time.perf_counter() - t
    n = sum(total.values())
    checked = (
        sum((c + a.python_every - 1) // a.python_every for _, c, _ in jobs)
        if a.python_every and not a.armed
        else 0
    )
    mode = "armed native reader" if a.armed else "native reader"
    print(f"inputs: {n} through the {mode} in {took:.0f}s ({n / took:.0f}/s)")
    print(f"of which also through the Python reader: {checked}")
    for k, v in sorted(total.items(), key=lambda kv: -kv[1]):
        print(f"{v:9d}  {k}")
    fails = sum(v for k, v in total.items() if k.startswith("FAIL"))
    print(f"failures: {fails}")
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
