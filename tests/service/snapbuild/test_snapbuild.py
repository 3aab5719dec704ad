"""Tests of the snapshot builder's state machine and skip rules (snapbuild.c)."""

from __future__ import annotations

from dataclasses import dataclass, field

from hypothesis import example, given, settings
from hypothesis import strategies as st

from service.decode.events import RunningXactsEvent
from service.snapbuild.snapbuild import SnapBuilder, SnapState, xid_precedes


def rx(lsn: int, next_xid: int, running: tuple[int, ...]) -> RunningXactsEvent:
    oldest = min(running) if running else next_xid
    return RunningXactsEvent(
        lsn=lsn,
        next_xid=next_xid,
        oldest_running_xid=oldest,
        latest_completed_xid=next_xid - 1,
        xids=running,
        subxids=(),
        subxid_overflow=False,
    )


def test_idle_server_is_consistent_at_first_running_xacts() -> None:
    """A RUNNING_XACTS with nothing running jumps straight from START to CONSISTENT."""
    b = SnapBuilder()
    assert b.state is SnapState.START
    assert not b.process_change(100, 10)
    assert b.process_running_xacts(rx(1000, 100, ()))
    assert b.is_consistent
    assert b.consistent_at == 1000
    # Nothing committed at or before the consistent point is emitted...
    assert b.xact_needs_skip(999)
    assert b.xact_needs_skip(1000)
    # ...everything after it is.
    assert not b.xact_needs_skip(1001)
    assert b.process_change(100, 1100)


def test_three_phases_with_running_transactions() -> None:
    """START -> BUILDING -> FULL -> CONSISTENT, each phase waiting on next_phase_at."""
    b = SnapBuilder()
    b.process_running_xacts(rx(100, 50, (40, 45)))
    assert b.state is SnapState.BUILDING_SNAPSHOT
    assert b.next_phase_at == 50
    assert not b.decodes_changes
    # 45 still running: no progress.
    assert not b.process_running_xacts(rx(200, 55, (45, 52)))
    assert b.state is SnapState.BUILDING_SNAPSHOT
    # All of #1's transactions done: FULL, waiting for those before 60.
    assert b.process_running_xacts(rx(300, 60, (52, 58)))
    assert b.state is SnapState.FULL_SNAPSHOT
    assert b.next_phase_at == 60
    assert b.decodes_changes
    # 52 began before the full snapshot: its changes are not collected; 61 is.
    assert not b.process_change(52, 310)
    assert b.process_change(61, 320)
    # 58 commits while FULL: pushed before the start point.
    b.commit(58, 400)
    assert b.xact_needs_skip(400)
    assert b.process_running_xacts(rx(500, 70, (61, 65)))
    assert b.is_consistent
    assert b.process_change(52, 510)  # once consistent every change is queued
    assert not b.xact_needs_skip(600)


def test_must_see_names_commits_still_listed_at_the_consistent_point() -> None:
    """A transaction whose commit record precedes the consistent point, but which that
    RUNNING_XACTS record still lists (its backend had not left the proc array), is one
    a snapshot aligned there must see (SnapBuildWaitSnapshot's reason); one already gone
    from the list, or committing after the point, is not."""
    b = SnapBuilder()
    b.process_running_xacts(rx(100, 50, (40,)))  # BUILDING, next phase at 50
    b.process_running_xacts(rx(200, 60, (55,)))  # FULL, next phase at 60
    b.commit(55, 210)  # 55's commit record, before the next RUNNING_XACTS...
    b.commit(61, 220)
    b.commit(62, 230)  # 62 commits and leaves the proc array before the record
    assert b.must_see == frozenset()  # nothing before CONSISTENT
    # ...which still lists 55 and 61 (committed in the WAL, still in the proc array)
    # while 63 runs on; 55 holds the state back (it began before 60), 61 does not.
    assert not b.process_running_xacts(rx(300, 70, (55, 61, 63)))
    assert b.process_running_xacts(rx(400, 71, (61, 63)))
    assert b.is_consistent
    assert b.must_see == frozenset({61})
    b.commit(63, 500)  # after the consistent point: emitted from the stream
    assert not b.xact_needs_skip(500)
    assert b.must_see == frozenset({61})


def test_must_see_is_empty_when_restored_or_idle() -> None:
    """A builder resumed from offsets, or made consistent by an idle server's record,
    asks nothing of a snapshot."""
    assert SnapBuilder.restored(1000).must_see == frozenset()
    b = SnapBuilder()
    b.commit(7, 10)
    b.process_running_xacts(rx(100, 50, ()))
    assert b.is_consistent and b.must_see == frozenset()


def test_no_running_transactions_shortcut_from_building() -> None:
    """An empty RUNNING_XACTS while BUILDING jumps to CONSISTENT (case a)."""
    b = SnapBuilder()
    b.process_running_xacts(rx(100, 50, (40,)))
    b.process_running_xacts(rx(200, 51, ()))
    assert b.is_consistent
    assert b.next_phase_at == 0


def test_start_lsn_is_never_lowered() -> None:
    """A start LSN past the consistent point keeps transactions before it skipped."""
    b = SnapBuilder(start_lsn=5000)
    b.process_running_xacts(rx(1000, 100, ()))
    assert b.start_decoding_at == 5000
    assert b.xact_needs_skip(4999)
    assert not b.xact_needs_skip(5000)


def test_restored_is_consistent_and_skips_confirmed() -> None:
    """Resuming from stored offsets: consistent at once; commits before confirmed skipped."""
    b = SnapBuilder.restored(0x1_0000_0100)
    assert b.is_consistent
    assert b.process_change(7, 0x1_0000_0000)
    assert b.xact_needs_skip(0x1_0000_00F0)  # the last published commit started before
    assert not b.xact_needs_skip(0x1_0000_0100)
    b.process_running_xacts(rx(0x1_0000_0200, 9, (8,)))
    assert b.is_consistent


def test_non_transactional_messages_only_when_consistent() -> None:
    """Non-transactional messages pass only once consistent and after the start point."""
    b = SnapBuilder()
    b.process_running_xacts(rx(100, 50, (40,)))
    assert not b.message_allowed(150)
    b.process_running_xacts(rx(200, 51, ()))
    assert not b.message_allowed(200)
    assert b.message_allowed(201)


def test_xid_precedes_wraps() -> None:
    """xids compare modulo 2**32, permanent xids as plain numbers."""
    assert xid_precedes(3, 4)
    assert xid_precedes(0xFFFFFFF0, 5)
    assert not xid_precedes(5, 0xFFFFFFF0)
    assert xid_precedes(2, 3)
    assert not xid_precedes(10, 10)


# --- property test: simulate a server and check the emission guarantee ---------------


@dataclass
class _Sim:
    """A toy server: transactions begin, change, commit; RUNNING_XACTS now and then."""

    next_xid: int = 100
    lsn: int = 1000
    running: dict[int, list[int]] = field(default_factory=dict)  # xid -> change LSNs

    def tick(self) -> int:
        self.lsn += 8
        return self.lsn


@settings(max_examples=500)
@example(  # FULL reached while 101 runs; 102 begins and commits before CONSISTENT
    ops=[("rx", 0), ("begin", 0), ("commit", 0), ("rx", 0), ("begin", 0), ("commit", 1)],
    start_offset=0,
    already_running=1,
)
@given(
    st.lists(
        st.tuples(st.sampled_from(["begin", "change", "commit", "rx"]), st.integers(0, 7)),
        max_size=120,
    ),
    st.integers(0, 400),
    st.integers(0, 4),
)
def test_emitted_transactions_are_whole_and_after_start(
    ops: list[tuple[str, int]], start_offset: int, already_running: int
) -> None:
    """Whatever the interleaving: an emitted transaction had every change queued, and
    committed after both the consistent point and the start LSN."""
    sim = _Sim()
    for _ in range(already_running):  # transactions in progress when decoding starts
        sim.running[sim.next_xid] = [sim.tick()]
        sim.next_xid += 1
    start_lsn = sim.lsn + start_offset
    b = SnapBuilder(start_lsn)
    queued: dict[int, list[int]] = {}
    for op, pick in ops:
        match op:
            case "begin":
                sim.running[sim.next_xid] = []
                sim.next_xid += 1
            case "change" if sim.running:
                xid = sorted(sim.running)[pick % len(sim.running)]
                lsn = sim.tick()
                sim.running[xid].append(lsn)
                if b.decodes_changes and b.process_change(xid, lsn):
                    queued.setdefault(xid, []).append(lsn)
            case "commit" if sim.running:
                xid = sorted(sim.running)[pick % len(sim.running)]
                changes = sim.running.pop(xid)
                lsn = sim.tick()
                if b.decodes_changes:
                    b.commit(xid, lsn)
                    if not b.xact_needs_skip(lsn):
                        assert b.is_consistent
                        assert queued.get(xid, []) == changes
                        assert lsn >= start_lsn
                        assert b.consistent_at is not None and lsn > b.consistent_at
                queued.pop(xid, None)
            case "rx":
                running = tuple(sorted(sim.running))
                before = b.state
                b.process_running_xacts(rx(sim.tick(), sim.next_xid, running))
                assert b.state >= before
            case _:
                pass
