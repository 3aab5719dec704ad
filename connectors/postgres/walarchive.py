"""WAL source: a gap the slot no longer covers, read from `source.archive` (issue 31).

Receives: a `WalArchive` (`source.archive`: a directory of archived WAL files, or a
restore command in PostgreSQL's `restore_command` syntax), the server's timeline
history and system identifier, and the range `[start, end)` to bridge
(`service.wal.bridge.bridge_range`: whole segments, ending where the stream begins).
Hands on: `(lsn, bytes)` chunks of raw WAL covering exactly `[start, end)`, in LSN
order, contiguous, ready for `XLogReader.feed`; then the caller streams on from `end`.

Behaviour:
- A file is asked for by name, as the startup process does (RestoreArchivedFile): from
  a directory, it is read where it lies; a restore command is run by `sh -c` with `%f`
  the file name and `%p` `<decoding.state_dir>/archive/RECOVERYXLOG`, which is read
  and then deleted. Exit 0 with the file there: found. Exit 1..125: the archive has no
  such file (a restore command is asked for files that may not exist; it must fail
  then). Killed by a signal, exit 126..255 (not executable, not found, or the shell's
  report of a signal), exit 0 without the file, or a file of the wrong size:
  `RestoreCommandError` naming the command, the file and the status (fatal). The
  command may block; nothing bounds it (as in PostgreSQL).
- Each segment is asked for under the timelines `segment_plan` gives, newest first
  (XLogFileReadAnyTLI); one that no timeline yields is a `SlotGapError` naming the
  slot's range (the caller's `gap` text) and the segment with the LSN range it was
  needed for. A directory is checked for every segment before any byte is handed on
  (`check_present`), so that error comes before anything is published; a restore
  command is only run when its segment is reached.
- `check_history()`: the archive's `TTTTTTTT.history` for the server's timeline, when
  it has one, must equal the server's history (`TimelineHistoryError` naming both):
  an archive of another failover or cluster is never guessed around. Every segment's
  long page header must carry the server's system identifier (`SourceSetupError`
  naming `source.archive`), and every page header the timeline the server's history
  assigns to its page (`TimelineGate`: `UnexpectedTimelineError`).

Memory: one chunk (1 MiB) at a time; a restored file occupies the disk until read.
"""

from __future__ import annotations

import struct
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path

import structlog

from service.errors import (
    RestoreCommandError,
    SlotGapError,
    SourceSetupError,
    TimelineHistoryError,
    WalError,
)
from service.lsn import format_lsn
from service.wal.bridge import (
    SegmentNeed,
    archive_kind,
    expand_restore_command,
    segment_name,
    segment_plan,
)
from service.wal.timeline import TimelineGate, TimelineHistory, history_file_name

log = structlog.get_logger(__name__)

_LONG_PAGE = struct.Struct("<QII")  # xlp_sysid, xlp_seg_size, xlp_xlog_blcksz
_LONG_PAGE_AT = 24  # after the short header (XLogPageHeaderData, MAXALIGNed)
CHUNK = 1 << 20


class WalArchive:
    """`source.archive`: fetch archived files by name (see the module docstring).

    `last_failure` describes the last "no such file" answer of a restore command (its
    status and the tail of its stderr), for the `SlotGapError` that may follow.
    """

    __slots__ = ("_spec", "kind", "last_failure", "workdir")

    def __init__(self, spec: str, workdir: Path) -> None:
        self._spec = spec
        self.kind = archive_kind(spec)
        self.workdir = workdir
        self.last_failure = ""

    def describe(self) -> str:
        if self.kind == "directory":
            return f"archive directory {self._spec}"
        return f"restore command {self._spec!r}"

    def present(self, name: str) -> bool | None:
        """Whether a directory holds `name` (None for a restore command: unknown
        without running it)."""
        if self.kind != "directory":
            return None
        return (Path(self._spec) / name).is_file()

    def fetch(self, name: str, expected_size: int | None = None) -> Path | None:
        """The file `name` on local disk, or None if the archive has no such file."""
        if self.kind == "directory":
            path = Path(self._spec) / name
            if not path.is_file():
                return None
            self._check_size(path, name, expected_size, 0)
            return path
        self.workdir.mkdir(parents=True, exist_ok=True)
        target = self.workdir / "RECOVERYXLOG"
        target.unlink(missing_ok=True)
        command = expand_restore_command(self._spec, name, str(target))
        proc = subprocess.run(
            ["/bin/sh", "-c", command], capture_output=True, text=True, check=False
        )
        status = proc.returncode
        stderr = proc.stderr.strip()[-300:]
        if status < 0 or status > 125:
            # As RestoreArchivedFile: a signal or the shell's own failure is fatal.
            why = f"killed by signal {-status}" if status < 0 else f"exit status {status}"
            raise RestoreCommandError(
                f"restore command {command!r} (source.archive {self._spec!r}) failed for "
                f"{name}: {why}" + (f": {stderr}" if stderr else ""),
                command=self._spec,
                file_name=name,
                status=status,
            )
        if status != 0:
            self.last_failure = f"exit status {status}" + (f": {stderr}" if stderr else "")
            log.info("archive_file_absent", file=name, status=status)
            return None
        if not target.is_file():
            raise RestoreCommandError(
                f"restore command {command!r} exited 0 for {name} but left no file at "
                f"{target} (%p)",
                command=self._spec,
                file_name=name,
                status=0,
            )
        self._check_size(target, name, expected_size, status)
        return target

    def release(self, path: Path) -> None:
        """Done with a fetched file: a restored copy is deleted, an archived one kept."""
        if self.kind == "command":
            path.unlink(missing_ok=True)

    def _check_size(self, path: Path, name: str, expected: int | None, status: int) -> None:
        size = path.stat().st_size
        if expected is None or size == expected:
            return
        message = f"archived file {name} has size {size}, not {expected}"
        if self.kind == "command":
            raise RestoreCommandError(
                f"{message} (restore command {self._spec!r})",
                command=self._spec,
                file_name=name,
                status=status,
            )
        raise WalError(f"{message} (source.archive {self._spec})")


class ArchiveBridge:
    """The WAL of `[start, end)` from the archive (see the module docstring).

    `gap` is the caller's sentence about the slot's side of the gap (which slot, from
    where it has WAL), put first in a `SlotGapError`.
    """

    def __init__(
        self,
        archive: WalArchive,
        history: TimelineHistory,
        system_id: str,
        start: int,
        end: int,
        segment_size: int,
        gap: str,
    ) -> None:
        self.archive = archive
        self.history = history
        self.system_id = int(system_id)
        self.start, self.end = start, end
        self.segment_size = segment_size
        self.gap = gap
        self.plan = segment_plan(history, start, end, segment_size)
        self.segments_read = 0

    def check_history(self) -> None:
        """The archive's history of the server's timeline must be the server's."""
        tli = self.history.target
        if tli <= 1:
            return
        name = history_file_name(tli)
        path = self.archive.fetch(name)
        if path is None:
            return
        try:
            text = path.read_text()
        finally:
            self.archive.release(path)
        try:
            archived = TimelineHistory.parse(tli, text)
        except TimelineHistoryError as exc:
            raise TimelineHistoryError(
                f"{name} from {self.archive.describe()} is not a valid history: {exc}"
            ) from exc
        if archived.entries != self.history.entries:
            raise TimelineHistoryError(
                f"{name} from {self.archive.describe()} says {archived!r}, but the source "
                f"server's history of timeline {tli} is {self.history!r}: the archive "
                "belongs to another failover or cluster; point source.archive at this "
                "server's archive"
            )

    def check_present(self) -> None:
        """For a directory: every segment is there (`SlotGapError` naming the first
        one missing). A restore command is not run ahead: a no-op."""
        for need in self.plan:
            names = [segment_name(t, need.segno, self.segment_size) for t in need.timelines]
            found = [self.archive.present(n) for n in names]
            if None in found:
                return
            if not any(found):
                raise self._missing(need, names)

    def chunks(self, stop: threading.Event | None = None) -> Iterator[tuple[int, bytes]]:
        """Yield the range's WAL, segment by segment, until done or `stop` is set."""
        gate = TimelineGate(self.history)
        log.info(
            "archive_bridge_started",
            archive=self.archive.describe(),
            start_lsn=format_lsn(self.start),
            end_lsn=format_lsn(self.end),
            segments=len(self.plan),
        )
        for need in self.plan:
            if stop is not None and stop.is_set():
                return
            path, tli = self._fetch(need)
            try:
                yield from self._read(path, need, gate, stop)
            finally:
                self.archive.release(path)
            self.segments_read += 1
            log.info(
                "archive_bridge_segment",
                file=segment_name(tli, need.segno, self.segment_size),
                range=need.describe(),
            )
        log.info("archive_bridge_done", end_lsn=format_lsn(self.end), segments=self.segments_read)

    def _fetch(self, need: SegmentNeed) -> tuple[Path, int]:
        names = []
        for tli in need.timelines:
            name = segment_name(tli, need.segno, self.segment_size)
            names.append(name)
            path = self.archive.fetch(name, self.segment_size)
            if path is not None:
                return path, tli
        raise self._missing(need, names)

    def _missing(self, need: SegmentNeed, names: list[str]) -> SlotGapError:
        tried = ", ".join(names) if names else "none: no timeline of the history can hold it"
        detail = f" (last answer: {self.archive.last_failure})" if self.archive.last_failure else ""
        return SlotGapError(
            f"{self.gap}; and {self.archive.describe()} lacks the WAL of "
            f"{need.describe()} (segment files tried: {tried}){detail}. The WAL of "
            f"[{format_lsn(self.start)}, {format_lsn(self.end)}) exists neither in the slot "
            "nor in the archive, so resuming would skip committed transactions: restore "
            "the missing segment into the archive, or start over deliberately with a new "
            "snapshot (`pgcdc run --fresh-start`)",
            lsn=need.begin,
        )

    def _read(
        self, path: Path, need: SegmentNeed, gate: TimelineGate, stop: threading.Event | None
    ) -> Iterator[tuple[int, bytes]]:
        seg_start = need.segno * self.segment_size
        with path.open("rb") as f:
            head = f.read(_LONG_PAGE_AT + _LONG_PAGE.size)
            sysid = _LONG_PAGE.unpack_from(head, _LONG_PAGE_AT)[0]
            if sysid != self.system_id:
                raise SourceSetupError(
                    f"{path.name} from {self.archive.describe()} belongs to database system "
                    f"{sysid}, the source is system {self.system_id}: point source.archive "
                    "at this cluster's archive",
                    lsn=seg_start,
                    field="source.archive",
                )
            pos = need.begin - seg_start
            f.seek(pos)
            while seg_start + pos < need.end:
                data = f.read(min(CHUNK, need.end - seg_start - pos))
                if not data:
                    raise WalError(
                        f"{path.name} ended at {format_lsn(seg_start + pos)}",
                        lsn=seg_start + pos,
                    )
                gate.check(data, seg_start + pos)
                yield seg_start + pos, data
                pos += len(data)
                if stop is not None and stop.is_set() and seg_start + pos < need.end:
                    return


def open_archive(spec: str, state_dir: Path) -> WalArchive:
    """The `source.archive` setting as a `WalArchive`, restored files under `state_dir`."""
    return WalArchive(spec, state_dir / "archive")
