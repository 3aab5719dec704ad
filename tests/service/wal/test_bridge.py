"""The archive bridge's pure half: source.archive's two forms, the restore command's
%f/%p/%% expansion, the gap's seam, and which timeline's file holds each segment."""

from __future__ import annotations

import pytest

from service.errors import ConfigError
from service.wal.bridge import (
    archive_kind,
    bridge_range,
    check_restore_command,
    expand_restore_command,
    segment_name,
    segment_plan,
)
from service.wal.timeline import TimelineHistory

SEG = 16 * 1024 * 1024


def test_text_with_a_placeholder_is_a_command() -> None:
    """Any % makes the text a restore command; a plain path is a directory."""
    assert archive_kind("cp /mnt/a/%f %p") == "command"
    assert archive_kind("/mnt/archive") == "directory"


@pytest.mark.parametrize(
    ("template", "file_name", "path", "expected"),
    [
        (
            "cp /a/%f %p",
            "000000010000000000000003",
            "/s/RECOVERYXLOG",
            "cp /a/000000010000000000000003 /s/RECOVERYXLOG",
        ),
        # %% is one literal %, never the start of another placeholder
        ("x=100%% cp /a/%f '%p' %%f", "F", "/p", "x=100% cp /a/F '/p' %f"),
        # repeated placeholders are each replaced
        ("test -f /a/%f && cp /a/%f %p", "F", "/p", "test -f /a/F && cp /a/F /p"),
    ],
)
def test_expansion_as_build_restore_command(
    template: str, file_name: str, path: str, expected: str
) -> None:
    """%f is the file name, %p the target path, %% a single %, substituted literally."""
    check_restore_command(template)
    assert expand_restore_command(template, file_name, path) == expected


@pytest.mark.parametrize(
    ("template", "names"),
    [
        ("cp /a/x %p", "lacks %f"),
        ("cp /a/%f /tmp/x", "lacks %p"),
        ("cp /a/%f %p %r", "%r"),
        ("cp /a/%f %p %x", "%x is not a placeholder"),
        ("cp /a/%f %p 100%", "lone %"),
    ],
)
def test_bad_restore_commands_name_the_field(template: str, names: str) -> None:
    """A command without %f or %p, or with %r, an unknown placeholder or a lone %, is a
    ConfigError naming source.archive and the problem."""
    with pytest.raises(ConfigError, match=names) as exc:
        check_restore_command(template)
    assert exc.value.field == "source.archive"


def test_bridge_range_ends_at_the_slot_segment() -> None:
    """The archive supplies the stored restart LSN's page up to the first byte of the
    segment holding the slot's restart LSN; a slot in the stored LSN's own segment, or
    behind it, needs no archive."""
    stored = 3 * SEG + 0x1234
    assert bridge_range(stored, 7 * SEG + 0x5000, SEG) == (3 * SEG + 0x0000, 7 * SEG)
    assert bridge_range(stored, 3 * SEG + 0x9000, SEG) is None  # same segment: kept
    assert bridge_range(stored, 2 * SEG, SEG) is None  # the slot covers it
    assert bridge_range(3 * SEG + 0x3000, 4 * SEG, SEG) == (3 * SEG + 0x2000, 4 * SEG)


def test_segment_plan_follows_the_history() -> None:
    """Before the switch segment only timeline 1's file; the switch segment, read up to
    past the switch point, only from timeline 2 (timeline 1's copy may hold abandoned
    WAL there); read only up to the switch point, from 2 then 1 (XLogFileReadAnyTLI)."""
    history = TimelineHistory.parse(2, f"1\t0/{5 * SEG + 0x800:X}\tno recovery target\n")
    plan = segment_plan(history, 3 * SEG + 0x2000, 7 * SEG, SEG)
    assert [(n.segno, n.timelines) for n in plan] == [(3, (1,)), (4, (1,)), (5, (2,)), (6, (2,))]
    assert (plan[0].begin, plan[0].end) == (3 * SEG + 0x2000, 4 * SEG)
    short = segment_plan(history, 4 * SEG, 5 * SEG + 0x800, SEG)
    assert [(n.segno, n.timelines) for n in short] == [(4, (1,)), (5, (2, 1))]
    assert segment_name(2, 5, SEG) == "000000020000000000000005"
    assert segment_name(1, 0x100, SEG) == "000000010000000100000000"
