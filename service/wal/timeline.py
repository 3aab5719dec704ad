"""Timeline histories and the page headers' timeline IDs (timeline.c, xlogreader.c).

Receives: the text of a timeline history file (`TTTTTTTT.history`, from the
`TIMELINE_HISTORY` replication command or a WAL archive) with the timeline it belongs
to; then, through `TimelineGate.check(data, at_lsn)`, the raw WAL chunks a source hands
on, in LSN order.
Hands on: a `TimelineHistory` that says which timeline holds an LSN (as
tliOfPointInHistory) and where a timeline ended (as tliSwitchPoint); the gate hands the
chunks on unchanged, having checked the timeline ID of every page header they hold.

Guarantees:
- A history is parsed as readTimeLineHistory does: one line per ancestor,
  `parentTLI <tab> switchpoint <tab> reason`, `#` comments and blank lines ignored;
  timeline IDs strictly increasing and below the file's own timeline, switch points
  never going backwards. Anything else is `TimelineHistoryError` (fatal) naming the
  line: a history that does not match is never guessed around.
- Timeline `t` covers `[begin, end)`: its parent's switch point (inclusive) up to its
  own switch point (exclusive); the newest timeline has no end. The switch point
  itself belongs to the child, as the walsender decides in StartReplication.
- Page timeline IDs: the page at `p` must carry the timeline the history assigns to `p`.
  A page in which the switch happened began on the parent, so it carries the parent's
  ID (StartupXLOG copies that page into the new timeline's first segment); every page
  after it carries the child's. Any other ID is `UnexpectedTimelineError` naming the
  page's LSN and both IDs. All-zero page headers (the unwritten tail of a segment) are
  left to the reader, which ends the WAL there. The reader's own check (a timeline never
  goes backwards, as XLogReaderValidatePageHeader) stays; this one is stricter because
  it knows the history, which the reader does not.
- Pure: no I/O. The gate holds at most 7 bytes between chunks (a page header's first
  bytes, when a chunk ends inside one).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from service._binary import U32
from service.errors import TimelineHistoryError, UnexpectedTimelineError
from service.lsn import format_lsn
from service.wal.format import XLOG_BLCKSZ

_PAGE_MASK = XLOG_BLCKSZ - 1
_TLI_END = 8  # xlp_magic (2), xlp_info (2), xlp_tli (4)
_LINE = re.compile(r"^\s*(\d+)\s+([0-9A-Fa-f]{1,8})/([0-9A-Fa-f]{1,8})(?:\s.*)?$")


def history_file_name(tli: int) -> str:
    """`TTTTTTTT.history` (TLHistoryFileName)."""
    return f"{tli:08X}.history"


@dataclass(frozen=True, slots=True)
class TimelineEntry:
    """One timeline of a history (TimeLineHistoryEntry): `begin` is where it forked
    from its parent (0 for the first), `end` its switch point, None while current."""

    tli: int
    begin: int
    end: int | None


class TimelineHistory:
    """The timelines leading to `target`, oldest first (`entries[-1].tli == target`)."""

    __slots__ = ("entries", "target")

    def __init__(self, entries: list[TimelineEntry]) -> None:
        self.entries = tuple(entries)
        self.target = entries[-1].tli

    @classmethod
    def single(cls, tli: int = 1) -> TimelineHistory:
        """A timeline with no history file (timeline 1, or one whose file is absent)."""
        return cls([TimelineEntry(tli, 0, None)])

    @classmethod
    def parse(cls, target: int, text: str) -> TimelineHistory:
        """The history of timeline `target` from its history file (readTimeLineHistory)."""
        entries: list[TimelineEntry] = []
        begin = 0
        for number, line in enumerate(text.splitlines(), 1):
            stripped = line.strip()
            if not stripped or stripped.startswith("#"):
                continue
            m = _LINE.match(line)
            if m is None:
                raise TimelineHistoryError(
                    f"invalid data in history file {history_file_name(target)} line "
                    f"{number}: {line!r} (expected: parentTLI, switchpoint X/X, reason)"
                )
            tli = int(m.group(1))
            end = (int(m.group(2), 16) << 32) | int(m.group(3), 16)
            if entries and tli <= entries[-1].tli:
                raise TimelineHistoryError(
                    f"history file {history_file_name(target)} line {number}: timeline "
                    f"IDs must be in increasing sequence ({tli} after {entries[-1].tli})"
                )
            if end < begin:
                raise TimelineHistoryError(
                    f"history file {history_file_name(target)} line {number}: switch "
                    f"point {format_lsn(end)} is before the previous one {format_lsn(begin)}",
                    lsn=end,
                )
            entries.append(TimelineEntry(tli, begin, end))
            begin = end
        if entries and entries[-1].tli >= target:
            raise TimelineHistoryError(
                f"history file {history_file_name(target)}: timeline IDs must be less than "
                f"the file's own timeline {target} (found {entries[-1].tli})"
            )
        entries.append(TimelineEntry(target, begin, None))
        return cls(entries)

    def tli_of(self, lsn: int) -> int:
        """The timeline holding `lsn` (tliOfPointInHistory)."""
        for entry in self.entries:
            if entry.begin <= lsn and (entry.end is None or lsn < entry.end):
                return entry.tli
        # Unreachable: the ranges cover [0, inf) without gaps by construction.
        raise TimelineHistoryError(f"no timeline of {self} holds {format_lsn(lsn)}", lsn=lsn)

    def entry(self, tli: int) -> TimelineEntry | None:
        """Timeline `tli`'s entry, None when it is not in this history."""
        for entry in self.entries:
            if entry.tli == tli:
                return entry
        return None

    def switch_point(self, tli: int) -> tuple[int, int] | None:
        """Where timeline `tli` ended and the timeline that follows it (tliSwitchPoint);
        None for the current timeline. `tli` not in the history: TimelineHistoryError."""
        for i, entry in enumerate(self.entries):
            if entry.tli == tli:
                if entry.end is None:
                    return None
                return entry.end, self.entries[i + 1].tli
        raise TimelineHistoryError(
            f"requested timeline {tli} is not in the server's history (timelines "
            f"{[e.tli for e in self.entries]})"
        )

    def extends(self, other: TimelineHistory) -> bool:
        """True when this history continues `other` (every timeline of `other` is here,
        ending where it ends, except `other`'s newest, which may have ended since)."""
        mine = {e.tli: e for e in self.entries}
        for entry in other.entries:
            found = mine.get(entry.tli)
            if found is None or found.begin != entry.begin:
                return False
            if entry.end is not None and found.end != entry.end:
                return False
        return True

    def __repr__(self) -> str:
        parts = [
            f"{e.tli}:{format_lsn(e.begin)}-{format_lsn(e.end) if e.end is not None else ''}"
            for e in self.entries
        ]
        return f"TimelineHistory({', '.join(parts)})"


class TimelineGate:
    """Checks the timeline ID of every page header in the chunks passing through.

    `history` may be replaced between chunks (a source that moved to a newer timeline
    hands the newer history); `_carry` holds the first bytes of a page header a chunk
    ended inside, and `_carry_lsn` their LSN (None when nothing is carried).
    """

    __slots__ = ("_carry", "_carry_lsn", "history")

    def __init__(self, history: TimelineHistory) -> None:
        self.history = history
        self._carry = b""
        self._carry_lsn: int | None = None

    def check(self, data: bytes, at_lsn: int) -> None:
        """Raise `UnexpectedTimelineError` if a page header in `data` carries a timeline
        the history does not assign to its page (see the module docstring)."""
        if self._carry_lsn is not None:
            carried, page = self._carry, self._carry_lsn
            self._carry, self._carry_lsn = b"", None
            if at_lsn == page + len(carried):
                head = carried + data[: _TLI_END - len(carried)]
                if len(head) == _TLI_END:
                    self._check_page(head, 0, page)
                else:
                    self._carry, self._carry_lsn = head, page
        end = at_lsn + len(data)
        page = (at_lsn + _PAGE_MASK) & ~_PAGE_MASK  # the first page header in the chunk
        while page < end:
            off = page - at_lsn
            if page + _TLI_END > end:
                self._carry, self._carry_lsn = bytes(data[off:]), page
                return
            self._check_page(data, off, page)
            page += XLOG_BLCKSZ

    def _check_page(self, data: bytes, off: int, page: int) -> None:
        tli = U32.unpack_from(data, off + 4)[0]
        if tli == 0 and not any(data[off : off + _TLI_END]):
            return  # an unwritten page: the reader ends the WAL there
        expected = self.history.tli_of(page)
        if tli != expected:
            raise UnexpectedTimelineError(
                f"page header carries timeline ID {tli} where the timeline history "
                f"({self.history!r}) has timeline {expected}",
                lsn=page,
            )
