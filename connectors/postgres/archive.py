"""WAL source: a directory of WAL segment files (pg_wal, or an archive directory).

Receives: a directory path and a start LSN.
Hands on: `(start_lsn, bytes)` chunks of raw WAL in LSN order, contiguous, ready for
`XLogReader.feed`; the first chunk starts at the page holding the start LSN, so that
page's header is validated too. `read_records` wraps this with the reader `service.impl` selects.

Segment files are named `TTTTTTTTXXXXXXXXYYYYYYYY` (timeline, log id, segment);
`.partial`, `.backup` files and `archive_status/` are ignored. Timelines follow the
newest history file in the directory (`TTTTTTTT.history`, or the one given): as
XLogFileReadAnyTLI, segment N is read from the newest timeline of that history that
had begun by segment N, so segments of a timeline the history abandoned are never read,
and the segment a switch happened in is read from the new timeline (whose copy holds
the old timeline's WAL up to the switch point). Every page header's timeline ID is
checked against the history (`service.wal.timeline.TimelineGate`). Without a history
file the directory must hold one timeline; segments of several timelines without one
are a `TimelineHistoryError`, never a guess. A missing segment in the
middle of the range is a `WalError`; running out of segments ends the iteration, or in
tail mode waits for the next segment file to appear complete (archive directories,
where segments arrive whole; for a live server use streaming instead).

Memory: at most one chunk (`chunk_size`, default 1 MiB) is held at a time.
"""

from __future__ import annotations

import os
import re
import threading
import time
from collections.abc import Iterator
from pathlib import Path

from service.errors import TimelineHistoryError, WalError
from service.impl import xlog_reader_class
from service.wal.format import DEFAULT_SEGMENT_SIZE, XLOG_BLCKSZ
from service.wal.record import XLogRecord
from service.wal.timeline import TimelineGate, TimelineHistory

_NAME = re.compile(r"^([0-9A-F]{8})([0-9A-F]{8})([0-9A-F]{8})$")
_HISTORY = re.compile(r"^([0-9A-F]{8})\.history$")


def read_history(directory: str | os.PathLike[str]) -> TimelineHistory | None:
    """The history of the newest timeline with a history file here, None without one
    (readTimeLineHistory on the file findNewestTimeLine picks)."""
    newest = 0
    with os.scandir(directory) as entries:
        for entry in entries:
            m = _HISTORY.match(entry.name)
            if m is not None and entry.is_file():
                newest = max(newest, int(m.group(1), 16))
    if not newest:
        return None
    text = (Path(directory) / f"{newest:08X}.history").read_text()
    return TimelineHistory.parse(newest, text)


def segment_name(tli: int, segno: int, segment_size: int = DEFAULT_SEGMENT_SIZE) -> str:
    """The file name of segment `segno` on timeline `tli` (XLogFileName)."""
    per_id = 0x1_0000_0000 // segment_size
    return f"{tli:08X}{segno // per_id:08X}{segno % per_id:08X}"


def list_segments(
    directory: str | os.PathLike[str],
    segment_size: int = DEFAULT_SEGMENT_SIZE,
    history: TimelineHistory | None = None,
) -> dict[int, tuple[int, Path]]:
    """Map segno -> (timeline, path): per segment, the newest timeline of `history`
    that had begun by that segment and has the file (XLogFileReadAnyTLI). Without a
    history every segment must be on one timeline."""
    per_id = 0x1_0000_0000 // segment_size
    files: dict[int, dict[int, Path]] = {}
    timelines: set[int] = set()
    with os.scandir(directory) as entries:
        for entry in entries:
            m = _NAME.match(entry.name)
            if m is None or not entry.is_file():
                continue
            tli, log, seg = (int(g, 16) for g in m.groups())
            files.setdefault(log * per_id + seg, {})[tli] = Path(entry.path)
            timelines.add(tli)
    if history is None:
        if len(timelines) > 1:
            raise TimelineHistoryError(
                f"{directory} holds WAL segments of timelines {sorted(timelines)} but no "
                "history file says how they follow each other: copy the newest timeline's "
                "TTTTTTTT.history file there"
            )
        return {segno: next(iter(by_tli.items())) for segno, by_tli in files.items()}
    newest_first = sorted(history.entries, key=lambda e: e.tli, reverse=True)
    found: dict[int, tuple[int, Path]] = {}
    for segno, by_tli in files.items():
        for timeline in newest_first:
            if timeline.begin // segment_size > segno:
                continue  # the timeline had not begun yet at this segment
            path = by_tli.get(timeline.tli)
            if path is not None:
                found[segno] = (timeline.tli, path)
            break  # an older timeline's copy of a segment the newer one owns is stale
    return found


def detect_segment_size(directory: str | os.PathLike[str]) -> int:
    """The segment size, from the size of the segment files (default if none)."""
    with os.scandir(directory) as entries:
        for entry in entries:
            if _NAME.match(entry.name) and entry.is_file():
                size = entry.stat().st_size
                if size >= XLOG_BLCKSZ and not size & (size - 1):
                    return size
    return DEFAULT_SEGMENT_SIZE


def iter_wal_chunks(
    directory: str | os.PathLike[str],
    start_lsn: int,
    *,
    segment_size: int = DEFAULT_SEGMENT_SIZE,
    chunk_size: int = 1 << 20,
    tail: bool = False,
    stop: threading.Event | None = None,
    poll_interval: float = 1.0,
    timeout: float | None = None,
    history: TimelineHistory | None = None,
) -> Iterator[tuple[int, bytes]]:
    """Yield raw WAL `(lsn, bytes)` from `start_lsn`'s page onward, segment by segment.

    In tail mode, after the last segment it polls every `poll_interval` seconds for the
    next one, until `stop` is set or `timeout` seconds pass without a new segment.
    `history`: the timelines to follow (default: the directory's newest history file).
    """
    segno = start_lsn // segment_size
    offset = (start_lsn % segment_size) & ~(XLOG_BLCKSZ - 1)
    if history is None:
        history = read_history(directory)
    gate = TimelineGate(history) if history is not None else None
    segments = list_segments(directory, segment_size, history)
    if segno not in segments:
        raise WalError(
            f"WAL segment {segment_name(1, segno, segment_size)[8:]} holding the start "
            f"position is not in {directory}",
            lsn=start_lsn,
        )
    waited_since: float | None = None
    while True:
        entry = segments.get(segno)
        if entry is None or entry[1].stat().st_size < segment_size:
            if any(s > segno for s in segments):
                raise WalError(
                    f"WAL segment {segment_name(1, segno, segment_size)[8:]} is missing "
                    f"from {directory} while later ones exist",
                    lsn=segno * segment_size,
                )
            # Outside tail mode a short final file (being written) is read as it is.
            if entry is None or tail:
                if not tail:
                    return
                now = time.monotonic()
                waited_since = now if waited_since is None else waited_since
                if (stop is not None and stop.is_set()) or (
                    timeout is not None and now - waited_since >= timeout
                ):
                    return
                if stop is not None:
                    stop.wait(poll_interval)
                else:
                    time.sleep(poll_interval)
                segments = list_segments(directory, segment_size, history)
                continue
        waited_since = None
        path = entry[1]
        with path.open("rb") as f:
            f.seek(offset)
            pos = offset
            while pos < segment_size:
                data = f.read(min(chunk_size, segment_size - pos))
                if not data:
                    break
                if gate is not None:
                    gate.check(data, segno * segment_size + pos)
                yield segno * segment_size + pos, data
                pos += len(data)
        if pos < segment_size:
            return
        segno += 1
        offset = 0
        if segno not in segments:
            segments = list_segments(directory, segment_size, history)


def read_records(
    directory: str | os.PathLike[str],
    start_lsn: int,
    end_lsn: int | None = None,
    *,
    segment_size: int | None = None,
    prev_lsn: int | None = None,
) -> Iterator[XLogRecord]:
    """Every record from `start_lsn` (a record start, or a page start) up to, not
    including, the first record at or after `end_lsn`, or to the end of valid WAL."""
    size = detect_segment_size(directory) if segment_size is None else segment_size
    reader = xlog_reader_class()(start_lsn, segment_size=size, prev_lsn=prev_lsn)
    for lsn, data in iter_wal_chunks(directory, start_lsn, segment_size=size):
        reader.feed(data, lsn)
        for rec in reader.records():
            if end_lsn is not None and rec.lsn >= end_lsn:
                return
            yield rec
        if reader.end_of_wal:
            return
