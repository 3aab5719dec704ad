"""Unit tests of the reorder buffer, one path each (pure logic over a local spill dir)."""

from __future__ import annotations

from pathlib import Path
from typing import cast

import pytest

from service.decode.events import ChangeKind, CheckpointEvent
from service.errors import ConfigError, DecodeError
from service.reorder.buffer import ReorderBuffer, ReorderBufferSettings, xid_precedes
from service.reorder.changes import Change, InternalChange, change_size
from service.reorder.replay import RUN_MAX
from tests.service.reorder.reorderbuffer_support import (
    MAIN,
    TOAST,
    RecordingSink,
    heap,
    make_buffer,
    message,
    toast_insert,
    truncate,
)


def emitted(sink: RecordingSink, name: str = "change") -> list[int]:
    """LSNs of the events of one callback kind, in call order."""
    return [entry[2].lsn for entry in sink.log if entry[0] == name]


def test_txns_with_changes_leaves_out_xids_without_changes(tmp_path: Path) -> None:
    """An xid only seen (another database's running transaction) counts in txn_count
    but not in txns_with_changes; a spilled transaction still counts."""
    rb, _, _ = make_buffer(tmp_path, work_mem=1)
    rb.process_xid(100, 10)
    assert (rb.txn_count, rb.txns_with_changes) == (1, 0)
    rb.process_xid(200, 20)
    rb.queue_change(200, 20, heap(200, 20))  # over work_mem: spilled at once
    assert rb.get_txn(200) is not None and rb.get_txn(200).serialized  # type: ignore[union-attr]
    assert (rb.txn_count, rb.txns_with_changes) == (2, 1)


def test_commit_replays_begin_changes_commit(tmp_path: Path) -> None:
    """A committed transaction comes out as begin, its changes in LSN order, commit."""
    rb, sink, _ = make_buffer(tmp_path)
    rb.process_xid(100, 10)
    for lsn in (10, 20, 30):
        rb.queue_change(100, lsn, heap(100, lsn))
    rb.commit(100, 40, 48, 1234)
    assert sink.names() == ["begin", "change", "change", "change", "commit"]
    assert emitted(sink) == [10, 20, 30]
    assert sink.log[-1] == ("commit", 100, 40)
    assert rb.txn_count == 0
    assert rb.memory_bytes == 0
    assert rb.stats.total_txns == 1
    assert rb.stats.total_bytes == 3 * change_size(heap(100, 10))


def test_transactions_come_out_in_commit_order(tmp_path: Path) -> None:
    """Interleaved transactions are emitted whole, in the order of their commits."""
    rb, sink, _ = make_buffer(tmp_path)
    rb.queue_change(1, 10, heap(1, 10))
    rb.queue_change(2, 20, heap(2, 20))
    rb.queue_change(1, 30, heap(1, 30))
    rb.commit(2, 40, 41, 0)
    rb.commit(1, 50, 51, 0)
    assert [(e[0], e[1]) for e in sink.log] == [
        ("begin", 2), ("change", 2), ("commit", 2),
        ("begin", 1), ("change", 1), ("change", 1), ("commit", 1),
    ]  # fmt: skip


def test_subtransactions_are_merged_by_lsn(tmp_path: Path) -> None:
    """Changes of the top-level and its subtransactions interleave by LSN at replay,
    whether the child was assigned early (block 252) or only by the commit record."""
    rb, sink, _ = make_buffer(tmp_path)
    rb.queue_change(1, 10, heap(1, 10))
    rb.assign_child(1, 2, 20)
    rb.queue_change(2, 20, heap(2, 20))
    rb.queue_change(3, 25, heap(3, 25))  # subxact not yet known as such
    rb.queue_change(1, 30, heap(1, 30))
    rb.queue_change(2, 40, heap(2, 40))
    rb.queue_change(3, 45, heap(3, 45))
    assert rb.restart_lsn() == 10
    rb.commit(1, 50, 51, 0, subxids=(2, 3))
    assert emitted(sink) == [10, 20, 25, 30, 40, 45]
    assert rb.txn_count == 0


def test_rollback_to_savepoint_drops_the_subtransaction(tmp_path: Path) -> None:
    """An aborted subtransaction's changes are discarded; the rest commits."""
    rb, sink, _ = make_buffer(tmp_path)
    rb.queue_change(1, 10, heap(1, 10))
    rb.assign_child(1, 2, 20)
    rb.queue_change(2, 20, heap(2, 20))
    rb.abort(2, 25)
    rb.queue_change(1, 30, heap(1, 30))
    rb.commit(1, 40, 41, 0)
    assert emitted(sink) == [10, 30]
    assert rb.memory_bytes == 0


def test_abort_and_forget_emit_nothing(tmp_path: Path) -> None:
    """Abort and forget discard the transaction with no callbacks and free its memory."""
    rb, sink, store = make_buffer(tmp_path, work_mem=300)
    for lsn in range(10, 60, 10):
        rb.queue_change(1, lsn, heap(1, lsn))
        rb.queue_change(2, lsn + 1, heap(2, lsn + 1))
    assert store.files()
    rb.abort(1, 100)
    rb.forget(2, 101)
    assert sink.log == []
    assert rb.txn_count == 0
    assert rb.memory_bytes == 0
    assert store.files() == []


def test_abort_old_uses_wraparound_order(tmp_path: Path) -> None:
    """abort_old drops transactions preceding the oldest running xid modulo 2^32,
    walking in first-LSN order and stopping at the first one still running."""
    rb, sink, _ = make_buffer(tmp_path)
    rb.queue_change(0xFFFFFFF0, 10, heap(0xFFFFFFF0, 10))
    rb.queue_change(5, 20, heap(5, 20))  # after wraparound: newer than 0xFFFFFFF0
    rb.queue_change(9, 30, heap(9, 30))
    rb.abort_old(6)
    assert rb.get_txn(0xFFFFFFF0) is None
    assert rb.get_txn(5) is None
    assert rb.get_txn(9) is not None
    assert rb.restart_lsn() == 30
    assert sink.log == []


def test_xid_precedes_matches_transaction_id_precedes() -> None:
    """TransactionIdPrecedes: modular for normal xids, plain for special ones."""
    assert xid_precedes(3, 4)
    assert xid_precedes(0xFFFFFFFF, 3)
    assert not xid_precedes(3, 0xFFFFFFFF)
    assert xid_precedes(2, 0xFFFFFFFF)
    assert not xid_precedes(7, 7)


def test_spill_and_restore_in_batches(tmp_path: Path) -> None:
    """Over work_mem without streaming, the largest txn spills; replay restores it in
    batches, in order, counters match what was written, and the file is removed."""
    rb, sink, store = make_buffer(tmp_path, work_mem=1000, restore_batch=3)
    one = change_size(heap(1, 1))
    for lsn in range(1, 51):
        rb.queue_change(1, lsn, heap(1, lsn))
        assert rb.memory_bytes < 1000
    assert store.files()
    assert rb.peak_memory_bytes <= 1000 + one
    rb.commit(1, 100, 101, 0)
    assert emitted(sink) == list(range(1, 51))
    assert rb.stats.spill_txns == 1
    assert rb.stats.spill_count == len(store.writes)
    written = [cast(Change, c) for _, batch in store.writes for c in batch]
    assert rb.stats.spill_bytes == sum(change_size(c) for c in written)
    assert rb.stats.total_bytes == 50 * one
    assert store.files() == []
    assert rb.peak_memory_bytes <= 1000 + one


def test_change_overhead_counts_against_work_mem_but_not_the_counters(tmp_path: Path) -> None:
    """With a per-change overhead (the worker's real-memory accounting) the buffer
    spills once the accounted bytes plus the overhead of every held change reach
    work_mem, restores no more than that at replay, and still counts spill and total
    bytes as PostgreSQL does (without the overhead)."""
    overhead = 100
    rb, sink, store = make_buffer(tmp_path, work_mem=1000, change_overhead=overhead)
    one = change_size(heap(1, 1))
    first = -(-1000 // (one + overhead))  # the change that reaches work_mem
    for lsn in range(1, 51):
        rb.queue_change(1, lsn, heap(1, lsn))
        assert bool(store.files()) == (lsn >= first), lsn
        assert rb.memory_bytes <= rb.held_bytes < 1000
    during: list[int] = []
    change = sink.change

    def watch(txn: object, rc: object) -> None:
        during.append(rb.held_bytes)
        change(txn, rc)  # type: ignore[arg-type]

    sink.change = watch  # type: ignore[method-assign]
    rb.commit(1, 100, 101, 0)
    assert emitted(sink) == list(range(1, 51))
    assert max(during) < 1000 + one + overhead  # restored within work_mem, plus one
    assert rb.held_bytes == 0 and rb.memory_bytes == 0
    written = [cast(Change, c) for _, batch in store.writes for c in batch]
    assert rb.stats.spill_bytes == sum(change_size(c) for c in written)
    assert rb.stats.total_bytes == 50 * one
    # The same workload without the overhead spills later: PostgreSQL's decisions.
    pg, _, pg_store = make_buffer(tmp_path / "pg", work_mem=1000)
    for lsn in range(1, first + 1):
        pg.queue_change(1, lsn, heap(1, lsn))
    assert not pg_store.files()


def test_spilled_subtransactions_merge_with_memory(tmp_path: Path) -> None:
    """Spilled and in-memory subtransactions merge by LSN; aborted spilled children
    leave no file."""
    rb, sink, store = make_buffer(tmp_path, work_mem=600, restore_batch=2)
    rb.assign_child(1, 2, 1)
    rb.assign_child(1, 3, 1)
    for lsn in range(1, 31):
        xid = (1, 2, 3)[(lsn - 1) % 3]
        rb.queue_change(xid, lsn, heap(xid, lsn))
    rb.abort(3, 1000)
    rb.commit(1, 1001, 1002, 0, subxids=(2,))
    assert emitted(sink) == [n for n in range(1, 31) if n % 3 != 0]
    assert store.files() == []
    assert rb.stats.spill_txns >= 2


def test_empty_subtransaction_flagged_by_parent_spill_is_not_counted(tmp_path: Path) -> None:
    """spill_txns follows ReorderBufferSerializeTXN's flags, not the xids written: the
    parent's spill visits (and flags) an empty known subtransaction, so that one's own
    later spill is not counted, as on the server (two xids written, one counted)."""
    rb, _, store = make_buffer(tmp_path, work_mem=1000)
    # A known child with nothing queued yet (on the server: its first record was a row
    # lock, which carries the top-level xid, so ReorderBufferAssignChild ran).
    rb.assign_child(1, 3, 1)
    lsn = 1
    while not store.writes:  # the parent grows until it is spilled
        lsn += 1
        rb.queue_change(1, lsn, heap(1, lsn))
    assert [xid for xid, _ in store.writes] == [1]
    child = rb.get_txn(3)
    assert child is not None and child.serialized and child.spilled == 0
    while len(store.writes) == 1:  # now the child alone is the largest
        lsn += 1
        rb.queue_change(3, lsn, heap(3, lsn))
    assert store.writes[-1][0] == 3
    assert rb.stats.spill_txns == 1
    rb.commit(1, lsn + 1, lsn + 2, 0, subxids=(3,))
    assert {xid for xid, _ in store.writes} == {1, 3}
    assert rb.stats.spill_txns == 1
    assert rb.stats.spill_count == len(store.writes)
    assert store.files() == []


def test_serialized_clear_after_streaming_is_not_counted_again(tmp_path: Path) -> None:
    """The property test's counterexample (work_mem 1, streaming): the parent's spill
    flags the empty child 102, the streamed run turns both flags into
    RBTXN_IS_SERIALIZED_CLEAR (ReorderBufferTruncateTXN), and 102's first own spill is
    not counted: spill_txns 1 for two xids written, as PostgreSQL counts it."""
    rb, sink, store = make_buffer(tmp_path, work_mem=1, restore_batch=1, can_stream=True)
    rb.process_xid(100, 1008)
    rb.process_xid(101, 1016)
    rb.assign_child(100, 102, 1016)
    rb.queue_change(102, 1024, heap(102, 1024, data=b"m0", clear=False))
    rb.queue_change(102, 1024, heap(102, 1024, data=b"m1"))
    assert sink.names().count("stream_start") == 2  # both streamed, 102 now empty
    rb.queue_change(100, 1032, toast_insert(100, 1032, 1, 0, b"\x01" * 3))
    assert [xid for xid, _ in store.writes] == [100]  # partial row: spilled, not streamed
    rb.queue_change(100, 1040, heap(100, 1040, data=b"main"))  # complete: streamed
    for txn in (rb.get_txn(100), rb.get_txn(102)):
        assert txn is not None and not txn.serialized and txn.serialized_clear
    rb.queue_change(102, 1048, toast_insert(102, 1048, 2, 0, b"\x02" * 3))
    rb.queue_change(102, 1056, heap(102, 1056, data=b"main"))
    rb.commit(100, 1064, 1072, 0, subxids=(102,))
    assert [xid for xid, _ in store.writes] == [100, 100, 102, 102]
    stats = rb.stats
    assert (stats.spill_txns, stats.spill_count, stats.spill_bytes) == (1, 4, 550)
    assert (stats.stream_txns, stats.stream_count) == (1, 5)  # 4 runs + the commit run
    assert sink.names()[-1] == "stream_commit"
    assert store.files() == []


def test_streaming_large_transaction(tmp_path: Path) -> None:
    """With a streaming sink and a consistent snapshot the largest transaction is
    streamed; the commit streams the rest and sends stream_commit."""
    rb, sink, store = make_buffer(tmp_path, work_mem=500, can_stream=True)
    for lsn in range(1, 21):
        rb.queue_change(1, lsn, heap(1, lsn))
    rb.commit(1, 100, 101, 0)
    names = sink.names()
    assert "begin" not in names and "commit" not in names
    assert names[0] == "stream_start"
    assert names[-1] == "stream_commit"
    assert emitted(sink, "stream_change") == list(range(1, 21))
    assert store.writes == []
    assert rb.stats.stream_txns == 1
    assert rb.stats.total_txns == 1
    assert rb.stats.stream_count == names.count("stream_start") + 1  # the commit run
    assert rb.stats.total_bytes == 20 * change_size(heap(1, 1))


def test_streamed_subtransaction_abort(tmp_path: Path) -> None:
    """Aborting a subtransaction already streamed sends stream_abort with its xid;
    aborting the top-level sends stream_abort without one."""
    rb, sink, _ = make_buffer(tmp_path, work_mem=400, can_stream=True)
    rb.assign_child(1, 2, 1)
    for lsn in range(1, 9):
        rb.queue_change(2, lsn, heap(2, lsn))
    assert "stream_start" in sink.names()
    rb.abort(2, 50)
    assert sink.log.pop() == ("stream_abort", 1, 50, 2)
    rb.abort(1, 60)
    assert sink.log.pop() == ("stream_abort", 1, 60, None)
    assert rb.txn_count == 0


def test_no_streaming_before_consistent(tmp_path: Path) -> None:
    """A streaming sink still gets spilled transactions until decoding is consistent."""
    rb, sink, store = make_buffer(tmp_path, work_mem=400, can_stream=True, consistent=False)
    for lsn in range(1, 9):
        rb.queue_change(1, lsn, heap(1, lsn))
    assert sink.log == []
    assert store.writes
    rb.consistent = True
    rb.queue_change(1, 9, heap(1, 9))  # complete change on a spilled txn: stream it now
    assert sink.names()[0] == "stream_start"
    rb.commit(1, 10, 11, 0)
    assert emitted(sink, "stream_change") == list(range(1, 10))
    assert store.files() == []


def test_toast_chunks_are_reassembled_for_the_main_change(tmp_path: Path) -> None:
    """Toast chunks (1- and 4-byte varlena) are joined per chunk_id in seq order and
    attached to the next main-table change; toast rows are never emitted; a
    multi-insert keeps the chunks until the tuple that clears them."""
    rb, sink, _ = make_buffer(tmp_path)
    rb.queue_change(1, 1, toast_insert(1, 1, 77, 0, b"abc"))
    rb.queue_change(1, 2, toast_insert(1, 2, 77, 1, b"def"))
    rb.queue_change(1, 3, toast_insert(1, 3, 78, 0, b"X" * 300))
    rb.queue_change(1, 4, heap(1, 4, clear=False))
    rb.queue_change(1, 4, heap(1, 4, data=b"second"))
    rb.queue_change(1, 5, heap(1, 5, ChangeKind.DELETE, locator=TOAST))
    rb.queue_change(1, 6, heap(1, 6, ChangeKind.UPDATE))
    rb.commit(1, 10, 11, 0)
    changes = [e for e in sink.log if e[0] == "change"]
    assert [c[2].locator for c in changes] == [MAIN, MAIN, MAIN]
    assert changes[0][3] == {77: b"abcdef", 78: b"X" * 300}
    assert changes[1][3] == {77: b"abcdef", 78: b"X" * 300}
    assert changes[2][3] == {}  # an unchanged toast pointer finds no chunk: "unchanged"
    assert rb.memory_bytes == 0


def test_toast_chunk_out_of_sequence_is_an_error(tmp_path: Path) -> None:
    """A chunk that does not continue its value's sequence raises DecodeError."""
    rb, _, _ = make_buffer(tmp_path)
    rb.queue_change(1, 1, toast_insert(1, 1, 77, 1, b"abc"))
    rb.queue_change(1, 2, heap(1, 2))
    with pytest.raises(DecodeError, match="sequence"):
        rb.commit(1, 10, 11, 0)


def test_speculative_insert_confirm_and_abort(tmp_path: Path) -> None:
    """SPEC_INSERT + CONFIRM comes out as one INSERT; SPEC_INSERT + SPEC_ABORT as
    nothing; a confirm without an insert is an error."""
    rb, sink, _ = make_buffer(tmp_path)
    rb.queue_change(1, 1, heap(1, 1, ChangeKind.SPEC_INSERT, b"a"))
    rb.queue_change(1, 2, heap(1, 2, ChangeKind.SPEC_CONFIRM))
    rb.queue_change(1, 3, heap(1, 3, ChangeKind.SPEC_INSERT, b"b"))
    rb.queue_change(1, 4, heap(1, 4, ChangeKind.SPEC_ABORT))
    rb.commit(1, 10, 11, 0)
    changes = [e[2] for e in sink.log if e[0] == "change"]
    assert len(changes) == 1
    assert changes[0].kind is ChangeKind.INSERT and changes[0].lsn == 1
    assert rb.memory_bytes == 0
    rb.queue_change(2, 20, heap(2, 20, ChangeKind.SPEC_CONFIRM))
    with pytest.raises(DecodeError, match="speculative"):
        rb.commit(2, 30, 31, 0)


def test_two_phase_default_emits_at_commit_prepared(tmp_path: Path) -> None:
    """Without decode_at_prepare, PREPARE emits nothing; COMMIT PREPARED replays as a
    commit; ROLLBACK PREPARED discards."""
    rb, sink, _ = make_buffer(tmp_path)
    rb.queue_change(1, 1, heap(1, 1))
    rb.prepare(1, 5, 6, 100, gid="g1")
    rb.queue_change(2, 7, heap(2, 7))
    rb.prepare(2, 8, 9, 100, gid="g2")
    assert sink.log == []
    rb.finish_prepared(1, 10, 11, 200, is_commit=True)
    rb.finish_prepared(2, 12, 13, 200, is_commit=False)
    assert sink.names() == ["begin", "change", "commit"]
    assert sink.log[-1] == ("commit", 1, 10)
    assert rb.txn_count == 0


def test_two_phase_decode_at_prepare(tmp_path: Path) -> None:
    """With decode_at_prepare: begin_prepare..prepare at PREPARE, then
    commit_prepared or rollback_prepared (with the prepare's end LSN and time)."""
    rb, sink, _ = make_buffer(tmp_path, decode_at_prepare=True)
    rb.queue_change(1, 1, heap(1, 1))
    rb.prepare(1, 5, 6, 100, gid="g1")
    rb.queue_change(2, 7, heap(2, 7))
    rb.prepare(2, 8, 9, 101, gid="g2")
    assert sink.names() == ["begin_prepare", "change", "prepare"] * 2
    rb.finish_prepared(1, 10, 11, 200, is_commit=True)
    rb.finish_prepared(2, 12, 13, 201, is_commit=False)
    assert sink.log[-2:] == [("commit_prepared", 1, 10), ("rollback_prepared", 2, 9, 101)]
    assert rb.stats.total_txns == 2
    assert rb.txn_count == 0


def test_skipped_prepare_is_decoded_at_commit_prepared(tmp_path: Path) -> None:
    """A prepare that was skipped is decoded at COMMIT PREPARED, then committed."""
    rb, sink, _ = make_buffer(tmp_path, decode_at_prepare=True)
    rb.queue_change(1, 1, heap(1, 1))
    rb.skip_prepared(1)
    rb.prepare(1, 5, 6, 100, gid="g1")
    assert sink.log == []
    rb.finish_prepared(1, 10, 11, 200, is_commit=True)
    assert sink.names() == ["begin_prepare", "change", "prepare", "commit_prepared"]


def test_messages_truncates_and_internal_changes(tmp_path: Path) -> None:
    """Transactional messages, truncates and internal changes replay in place; a
    non-transactional message is handed on immediately."""
    rb, sink, _ = make_buffer(tmp_path)
    rb.queue_change(1, 1, message(1, 1))
    rb.queue_change(1, 2, truncate(1, 2))
    rb.queue_change(1, 3, InternalChange(lsn=3, xid=1, payload={"ddl": 1}, size=10))
    rb.queue_message_nontransactional(1, 4, message(1, 4, transactional=False))
    assert sink.names() == ["message"]
    rb.commit(1, 10, 11, 0)
    assert sink.names() == ["message", "begin", "message", "truncate", "internal", "commit"]


def test_empty_transaction_is_not_replayed(tmp_path: Path) -> None:
    """A transaction with no change and no base snapshot commits silently."""
    rb, sink, _ = make_buffer(tmp_path)
    rb.process_xid(1, 1)
    rb.set_has_catalog_changes(1, 2)
    rb.commit(1, 10, 11, 0)
    assert sink.log == []
    assert rb.stats.total_txns == 0
    assert rb.txn_count == 0


def test_unknown_change_type_is_an_error(tmp_path: Path) -> None:
    """Anything but a change event is refused with the LSN."""
    rb, _, _ = make_buffer(tmp_path)
    event = CheckpointEvent(lsn=5, redo=1, timeline=1, next_xid=1, oldest_xid=1,
                            oldest_active_xid=1, online=True)  # fmt: skip
    with pytest.raises(DecodeError, match="CheckpointEvent"):
        rb.queue_change(1, 5, event)  # type: ignore[arg-type]


def test_bad_settings_are_refused(tmp_path: Path) -> None:
    """work_mem and restore_batch must be positive."""
    with pytest.raises(ConfigError):
        ReorderBuffer(
            ReorderBufferSettings(work_mem=0), RecordingSink(), make_buffer(tmp_path)[2], bool
        )


def test_close_deletes_spill_files(tmp_path: Path) -> None:
    """close() removes whatever is still spilled, including the run directory."""
    rb, _, store = make_buffer(tmp_path, work_mem=200)
    for lsn in range(1, 10):
        rb.queue_change(1, lsn, heap(1, lsn))
    assert store.files()
    rb.close()
    assert not store.run_dir.exists()


def test_unconfirmed_speculative_insert_is_dropped(tmp_path: Path) -> None:
    """A SPEC_INSERT followed by another change instead of its confirmation is dropped,
    as ReorderBufferProcessTXN does at change_done; so is one pending at the end."""
    rb, sink, _ = make_buffer(tmp_path)
    rb.queue_change(1, 1, heap(1, 1, ChangeKind.SPEC_INSERT, b"a"))
    rb.queue_change(1, 2, heap(1, 2, ChangeKind.INSERT, b"b"))
    rb.queue_change(1, 3, heap(1, 3, ChangeKind.SPEC_INSERT, b"c"))
    rb.commit(1, 10, 11, 0)
    assert [(e[2].lsn, e[2].kind) for e in sink.log if e[0] == "change"] == [(2, ChangeKind.INSERT)]
    assert rb.memory_bytes == 0


def test_plain_changes_reach_the_sink_in_runs_that_keep_the_order(tmp_path: Path) -> None:
    """Plain main-table changes go to `sink.changes` in runs of at most RUN_MAX; a run
    is handed on before a truncate, a message, a confirmed speculative insertion or a
    change carrying TOAST chunks, so every callback keeps its LSN order."""
    rb, sink, _ = make_buffer(tmp_path)
    lsn = 0

    def next_lsn() -> int:
        nonlocal lsn
        lsn += 1
        return lsn

    for _ in range(RUN_MAX + 3):
        rb.queue_change(1, lsn + 1, heap(1, next_lsn()))
    rb.queue_change(1, lsn + 1, truncate(1, next_lsn()))
    for _ in range(2):
        rb.queue_change(1, lsn + 1, heap(1, next_lsn(), ChangeKind.UPDATE))
    rb.queue_change(1, lsn + 1, message(1, next_lsn()))
    rb.queue_change(1, lsn + 1, heap(1, next_lsn(), ChangeKind.DELETE))
    rb.queue_change(1, lsn + 1, heap(1, next_lsn(), ChangeKind.SPEC_INSERT))
    rb.queue_change(1, lsn + 1, heap(1, next_lsn(), ChangeKind.SPEC_CONFIRM))
    rb.queue_change(1, lsn + 1, heap(1, next_lsn()))
    rb.queue_change(1, lsn + 1, toast_insert(1, next_lsn(), 77, 0, b"x" * 300))
    rb.queue_change(1, lsn + 1, heap(1, next_lsn()))  # gets the chunk: a single call
    rb.queue_change(1, lsn + 1, heap(1, next_lsn()))
    rb.commit(1, 1000, 1001, 0)
    assert sink.runs == [RUN_MAX, 3, 2, 1, 1, 1]
    assert [entry[0] for entry in sink.log].count("change") == RUN_MAX + 3 + 2 + 1 + 1 + 1 + 2
    order = [entry[2].lsn for entry in sink.log if entry[0] != "begin" and entry[0] != "commit"]
    assert order == sorted(order) and len(order) == len(set(order))
    with_toast = [entry for entry in sink.log if entry[0] == "change" and entry[3]]
    assert len(with_toast) == 1 and with_toast[0][2].lsn == lsn - 1
    assert rb.memory_bytes == 0 and rb.held_bytes == 0
