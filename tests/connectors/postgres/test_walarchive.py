"""The archive bridge's edge on synthetic segment files: a directory and a restore
command (run by sh) hand on the same bytes; a missing segment is a SlotGapError naming
both sides; a failing command, an archive history that differs from the server's and a
segment of another cluster are fatal typed errors."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest

from connectors.postgres.walarchive import ArchiveBridge, WalArchive
from service.errors import (
    RestoreCommandError,
    SlotGapError,
    SourceSetupError,
    TimelineHistoryError,
)
from service.wal.bridge import segment_name
from service.wal.timeline import TimelineHistory
from tests.service.walwriter import SYSID, Block, WalWriter, record_body

SEG = 64 * 1024
BASE = 0x1000000


@pytest.fixture
def archive_dir(tmp_path: Path) -> tuple[Path, bytes]:
    """Five segments of timeline 1 in `tmp_path/archive`, and the bytes they hold."""
    w = WalWriter(base=BASE)
    for i in range(1500):
        w.add(10, 0, 100 + i, record_body([Block(0, blk=i, data=b"d" * 30)], b"m" * 90))
    data = w.data()
    data += bytes(-len(data) % SEG)
    d = tmp_path / "archive"
    d.mkdir()
    for i in range(0, len(data), SEG):
        (d / segment_name(1, (BASE + i) // SEG, SEG)).write_bytes(data[i : i + SEG])
    return d, data


def bridge(
    archive: WalArchive, start: int, end: int, history: TimelineHistory | None = None
) -> ArchiveBridge:
    return ArchiveBridge(
        archive, history or TimelineHistory.single(1), str(SYSID), start, end, SEG, "slot s has X"
    )


def collect(b: ArchiveBridge) -> tuple[int, bytes]:
    chunks = list(b.chunks())
    for (lsn, data), (nxt, _) in itertools.pairwise(chunks):
        assert lsn + len(data) == nxt  # contiguous
    return chunks[0][0], b"".join(d for _, d in chunks)


def test_directory_and_restore_command_hand_on_the_same_range(
    archive_dir: tuple[Path, bytes], tmp_path: Path
) -> None:
    """[start, end) from its first page to the seam, byte for byte, from a directory
    and from `cp DIR/%f %p`; restored copies are deleted once read."""
    d, data = archive_dir
    start, end = BASE + 0x2000 + 0x10, BASE + 3 * SEG
    want = data[0x2000 : 3 * SEG]
    for spec in (str(d), f"cp {d}/%f %p"):
        work = tmp_path / "work"
        b = bridge(WalArchive(spec, work), start & ~0x1FFF, end)
        b.check_history()
        b.check_present()
        assert collect(b) == (BASE + 0x2000, want)
        assert b.segments_read == 3
        assert not (work / "RECOVERYXLOG").exists()


def test_missing_segment_names_the_slot_and_the_archive_range(
    archive_dir: tuple[Path, bytes], tmp_path: Path
) -> None:
    """A segment gone from a directory fails before any byte (check_present); from a
    restore command exiting 1, when reached: SlotGapError naming the slot's side, the
    file tried and the segment's LSN range."""
    d, _ = archive_dir
    gone = segment_name(1, BASE // SEG + 1, SEG)
    (d / gone).unlink()
    b = bridge(WalArchive(str(d), tmp_path / "w"), BASE, BASE + 3 * SEG)
    with pytest.raises(SlotGapError, match=f"slot s has X; and archive directory .*{gone}") as exc:
        b.check_present()
    assert "[0/1010000, 0/1020000)" in str(exc.value)
    cmd = WalArchive(f"cp {d}/%f %p", tmp_path / "w")
    b = bridge(cmd, BASE, BASE + 3 * SEG)
    b.check_present()  # not run ahead for a command
    got = []
    with pytest.raises(SlotGapError, match=f"{gone}.*last answer: exit status 1") as exc:
        for lsn, _ in b.chunks():
            got.append(lsn)
    assert got and max(got) < BASE + SEG  # the first segment only
    assert exc.value.lsn == BASE + SEG


@pytest.mark.parametrize(
    ("command", "status"),
    [
        ("/nonexistent/fetch-wal %f %p", 127),  # the shell: command not found
        ("true %f %p", 0),  # success without the file
        ("kill -9 $$ # %f %p", -9),  # killed by a signal
        ("head -c 100 /dev/zero > %p # %f", 0),  # a file of the wrong size
    ],
)
def test_failing_restore_command_is_fatal_naming_it(
    archive_dir: tuple[Path, bytes], tmp_path: Path, command: str, status: int
) -> None:
    """Exit > 125, a signal, exit 0 without the file or with a short one: a fatal
    RestoreCommandError naming the command, the file and the exit status."""
    b = bridge(WalArchive(command, tmp_path / "w"), BASE, BASE + SEG)
    with pytest.raises(RestoreCommandError) as exc:
        list(b.chunks())
    err = exc.value
    assert (err.command, err.file_name, err.status) == (
        command,
        segment_name(1, BASE // SEG, SEG),
        status,
    )
    assert err.field == "source.archive" and err.file_name in str(err)


def test_archive_history_must_be_the_servers(
    archive_dir: tuple[Path, bytes], tmp_path: Path
) -> None:
    """The archive's history file of the server's timeline must equal the server's:
    the same text passes, another switch point is a TimelineHistoryError naming both,
    an unparsable one too; an absent one is not an error."""
    d, _ = archive_dir
    server = TimelineHistory.parse(2, "1\t0/1050000\tno recovery target specified\n")
    archive = WalArchive(str(d), tmp_path / "w")
    bridge(archive, BASE, BASE + SEG, server).check_history()  # no history file there
    (d / "00000002.history").write_text("1\t0/1050000\tanother reason\n")
    bridge(archive, BASE, BASE + SEG, server).check_history()  # reasons are not compared
    (d / "00000002.history").write_text("1\t0/1048000\tno recovery target specified\n")
    with pytest.raises(TimelineHistoryError, match=r"0/1048000.*server's history.*0/1050000"):
        bridge(archive, BASE, BASE + SEG, server).check_history()
    (d / "00000002.history").write_text("garbage\n")
    with pytest.raises(TimelineHistoryError, match="not a valid history"):
        bridge(archive, BASE, BASE + SEG, server).check_history()


def test_segment_of_another_cluster_is_refused(
    archive_dir: tuple[Path, bytes], tmp_path: Path
) -> None:
    """A segment whose long page header names another system identifier: SourceSetupError
    naming source.archive, before any of its bytes is handed on."""
    d, _ = archive_dir
    b = ArchiveBridge(
        WalArchive(str(d), tmp_path / "w"),
        TimelineHistory.single(1),
        "42",
        BASE,
        BASE + SEG,
        SEG,
        "g",
    )
    with pytest.raises(
        SourceSetupError, match="system 7000000000000000001, the source is system 42"
    ):
        list(b.chunks())
