"""The archive bridge's pure half: `source.archive`'s two forms, restore-command
expansion, and which archived file holds each segment of a gap (issue 31, part 3).

Receives: the `source.archive` text; for a gap, the stored offsets' restart LSN, the
slot's restart LSN, the segment size and the server's timeline history.
Hands on:
- `archive_kind(value)`: "command" when the text holds a `%` placeholder, else
  "directory"; `check_restore_command` raises `ConfigError` (field `source.archive`)
  unless the command has `%f` and `%p` and no other placeholder than `%%`.
- `expand_restore_command(template, file_name, path)`: the shell command, as
  PostgreSQL's BuildRestoreCommand (replace_percent_placeholders): `%f` the archived
  file's name, `%p` the path to copy it to, `%%` a single `%`, substituted literally
  (no quoting, as PostgreSQL: quote `%p` in the command if the path may hold spaces).
- `bridge_range(stored_restart, slot_restart, segment_size)`: None when the slot
  covers the stored restart LSN, else `(archive_from, stream_from)`. The server keeps
  the whole segment holding the slot's restart LSN (KeepLogSeg counts segments), so the
  stream starts at that segment's first byte (or at the stored LSN's page, if later) and
  the archive supplies `[stored page, stream_from)`: whole segments, never part of one
  the stream also sends, so the seam is a segment boundary and the bytes either side
  are contiguous.
- `segment_plan(history, start, end, segment_size)`: per segment of `[start, end)` the
  timelines whose copy may hold it, newest first (XLogFileReadAnyTLI: only timelines
  that had begun by the segment; and, stricter, only those whose switch point is at or
  past the last byte the bridge needs from it, so a copy holding WAL the history
  abandoned is never read).

Guarantees: pure (no I/O). Errors are `ConfigError` naming `source.archive`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from service.errors import ConfigError
from service.lsn import format_lsn
from service.wal.format import XLOG_BLCKSZ
from service.wal.timeline import TimelineHistory

FIELD = "source.archive"
_PLACEHOLDER = re.compile(r"%(.?)", re.DOTALL)


def archive_kind(value: str) -> Literal["command", "directory"]:
    """A restore command when the text holds any `%` placeholder, else a directory."""
    return "command" if "%" in value else "directory"


def check_restore_command(template: str) -> None:
    """`ConfigError` unless `template` is a usable restore command (see the module
    docstring): `%f` and `%p` present, nothing but `%f`, `%p`, `%%` after a `%`."""
    seen: set[str] = set()
    for m in _PLACEHOLDER.finditer(template):
        code = m.group(1)
        if code in ("f", "p", "%"):
            seen.add(code)
            continue
        if code == "r":
            problem = (
                "%r (the restart point's file name) means nothing to pgcdc, which keeps no "
                "restart point in the archive: remove it"
            )
        elif code == "":
            problem = "it ends in a lone % (write %% for a literal %)"
        else:
            problem = f"%{code} is not a placeholder (use %f, %p, or %% for a literal %)"
        raise ConfigError(f"source.archive restore command {template!r}: {problem}", field=FIELD)
    missing = [p for p in ("f", "p") if p not in seen]
    if missing:
        names = " and ".join(f"%{p}" for p in missing)
        raise ConfigError(
            f"source.archive restore command {template!r} lacks {names}: %f is the "
            "archived file's name, %p the path pgcdc reads it from once copied",
            field=FIELD,
        )


def expand_restore_command(template: str, file_name: str, path: str) -> str:
    """The command to run for `file_name` (BuildRestoreCommand's substitution)."""

    def one(m: re.Match[str]) -> str:
        code = m.group(1)
        if code == "f":
            return file_name
        if code == "p":
            return path
        if code == "%":
            return "%"
        # check_restore_command ran at load: reaching here is a programming error.
        raise ConfigError(f"unexpected placeholder %{code} in {template!r}", field=FIELD)

    return _PLACEHOLDER.sub(one, template)


def bridge_range(
    stored_restart: int, slot_restart: int, segment_size: int
) -> tuple[int, int] | None:
    """`(archive_from, stream_from)`, or None when nothing needs the archive (the slot's
    segment already holds the stored restart LSN's page)."""
    archive_from = stored_restart & ~(XLOG_BLCKSZ - 1)
    stream_from = max(archive_from, slot_restart - slot_restart % segment_size)
    if stream_from <= archive_from:
        return None
    return archive_from, stream_from


@dataclass(frozen=True, slots=True)
class SegmentNeed:
    """One segment of a gap: its number, the LSN range the bridge reads from it, and
    the timelines whose archived copy may hold that range, newest first."""

    segno: int
    begin: int
    end: int
    timelines: tuple[int, ...]

    def describe(self) -> str:
        return f"[{format_lsn(self.begin)}, {format_lsn(self.end)})"


def segment_name(tli: int, segno: int, segment_size: int) -> str:
    """The file name of segment `segno` on timeline `tli` (XLogFileName)."""
    per_id = 0x1_0000_0000 // segment_size
    return f"{tli:08X}{segno // per_id:08X}{segno % per_id:08X}"


def segment_plan(
    history: TimelineHistory, start: int, end: int, segment_size: int
) -> list[SegmentNeed]:
    """The segments covering `[start, end)`, each with the timelines to try (module
    docstring). A segment no timeline can supply has an empty `timelines`."""
    plan: list[SegmentNeed] = []
    segno = start // segment_size
    while segno * segment_size < end:
        seg_begin = segno * segment_size
        begin, stop = max(start, seg_begin), min(end, seg_begin + segment_size)
        candidates = tuple(
            e.tli
            for e in sorted(history.entries, key=lambda e: e.tli, reverse=True)
            if e.begin // segment_size <= segno and (e.end is None or e.end >= stop)
        )
        plan.append(SegmentNeed(segno, begin, stop, candidates))
        segno += 1
    return plan
