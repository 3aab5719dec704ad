"""Oracle property test of the reorder buffer over random WAL interleavings.

Hypothesis drives a model of many concurrent transactions through the buffer:
subtransactions (assigned early, as block 252 does, or only by the commit record),
ROLLBACK TO, top-level aborts, crashes cut off by RUNNING_XACTS (`abort_old`), two-phase
commit (committed or rolled back, decoded at COMMIT PREPARED or at PREPARE), TOAST rows,
speculative inserts (confirmed or aborted), multi-inserts, messages, truncates and
internal changes, with memory limits from one change to unlimited and streaming on or
off. A consumer rebuilds committed transactions from the sink's callbacks (applying
stream_abort of subtransactions) and must get exactly the oracle: committed
transactions in commit order, each the LSN-sorted changes of its surviving parts.

The slot counters are predicted from the callbacks and spill writes alone. `spill_txns`
follows PostgreSQL's exact rule, not "distinct xids written": ReorderBufferSerializeTXN
counts a write unless the (sub)transaction is already flagged RBTXN_IS_SERIALIZED or
RBTXN_IS_SERIALIZED_CLEAR, and it flags every (sub)transaction it visits (a top-level
one visits all its known subtransactions), whether it wrote anything for it or not;
ReorderBufferTruncateTXN (after a streamed run) turns SERIALIZED into SERIALIZED_CLEAR.
So a subtransaction that was empty when its parent spilled is never counted.
"""

from __future__ import annotations

import dataclasses
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hypothesis import event, given, settings
from hypothesis import strategies as st

from service.decode.events import ChangeKind, HeapChange, MessageEvent, TruncateEvent
from service.reorder.changes import Change, InternalChange, change_size, toast_chunk
from tests.service.reorder.reorderbuffer_support import (
    TOAST,
    heap,
    make_buffer,
    message,
    toast_insert,
    truncate,
)

MAX_CHUNKS_PER_ROW = 4


@dataclass
class Tx:
    """The model of one top-level transaction."""

    xid: int
    state: str = "open"  # open | prepared | crashed
    subs: list[int] = field(default_factory=list)  # alive subtransactions
    late: set[int] = field(default_factory=set)  # subs the buffer learns of at commit
    queued: dict[int, list[Change]] = field(default_factory=dict)
    ever: bool = False  # a change reached the buffer's view of this txn


def expected_events(changes: list[Change]) -> list[tuple[str, Any, dict[int, bytes]]]:
    """What a sink must see for these changes (LSN-ordered): toast and spec resolved."""
    out: list[tuple[str, Any, dict[int, bytes]]] = []
    toast: dict[int, bytes] = {}
    spec: HeapChange | None = None
    for c in changes:
        if isinstance(c, HeapChange):
            if c.kind is ChangeKind.SPEC_CONFIRM:
                assert spec is not None
                out.append(("change", dataclasses.replace(spec, kind=ChangeKind.INSERT), toast))
                toast, spec = {}, None
            elif c.kind is ChangeKind.SPEC_ABORT:
                toast, spec = {}, None
            elif c.kind is ChangeKind.SPEC_INSERT:
                spec = c
            elif c.locator == TOAST:
                if c.kind is ChangeKind.INSERT:
                    cid, _, data = toast_chunk(c)
                    toast = {**toast, cid: toast.get(cid, b"") + data}
            else:
                out.append(("change", c, toast))
                if c.clear_toast_afterwards:
                    toast = {}
                spec = None
        elif isinstance(c, TruncateEvent):
            out.append(("truncate", c, {}))
        elif isinstance(c, MessageEvent):
            out.append(("message", c, {}))
        else:
            out.append(("internal", c, {}))
    return out


def streamed_xids(log: list[tuple[Any, ...]]) -> set[int]:
    return {e[1] for e in log if e[0] == "stream_start"}


def consume(log: list[tuple[Any, ...]]) -> list[tuple[int, list[Any]]]:
    """Rebuild committed transactions from the callbacks, as a downstream would."""
    committed: list[tuple[int, list[Any]]] = []
    current: list[Any] | None = None
    streams: dict[int, list[Any]] = {}
    prepared: dict[int, list[Any]] = {}
    for entry in log:
        name = entry[0]
        if name in ("begin", "begin_prepare"):
            assert current is None
            current = []
        elif name in ("change", "truncate", "message", "internal"):
            if name == "message" and not entry[2].transactional:
                continue
            assert current is not None, entry
            current.append((name, entry[2], entry[3] if name == "change" else {}))
        elif name == "commit":
            assert current is not None
            committed.append((entry[1], current))
            current = None
        elif name == "prepare":
            assert current is not None
            prepared[entry[1]] = current
            current = None
        elif name == "stream_start":
            assert current is None
            current = streams.setdefault(entry[1], [])
        elif name.startswith("stream_") and name[7:] in ("change", "truncate", "message"):
            assert current is not None
            kind = name[7:]
            current.append((kind, entry[2], entry[3] if kind == "change" else {}))
        elif name == "stream_stop":
            current = None
        elif name == "stream_abort":
            _, xid, _, sub = entry
            if sub is None:
                streams.pop(xid, None)
            else:
                streams[xid] = [e for e in streams.get(xid, []) if e[1].xid != sub]
        elif name == "stream_commit":
            committed.append((entry[1], streams.pop(entry[1], [])))
        elif name == "stream_prepare":
            prepared[entry[1]] = streams.pop(entry[1], [])
        elif name == "commit_prepared":
            committed.append((entry[1], prepared.pop(entry[1])))
        elif name == "rollback_prepared":
            prepared.pop(entry[1])
        elif name != "spill_write":
            raise AssertionError(f"unexpected callback {entry}")
    return committed


@settings(max_examples=150, deadline=None)
@given(data=st.data())
def test_reorder_buffer_matches_oracle(data: st.DataObject) -> None:
    """The sink's reconstructed output equals the oracle; memory, files and counters
    hold their invariants, whatever the limit, interleaving and streaming mode."""
    work_mem = data.draw(st.sampled_from([1, 150, 600, 3000, 1 << 30]), label="work_mem")
    can_stream = data.draw(st.booleans(), label="can_stream")
    two_phase = data.draw(st.booleans(), label="decode_at_prepare")
    restore_batch = data.draw(st.sampled_from([1, 3, 4096]), label="restore_batch")
    first_xid = data.draw(st.sampled_from([100, 0xFFFFFFF8]), label="first_xid")
    with tempfile.TemporaryDirectory() as tmp:
        run(data, Path(tmp), (work_mem, can_stream, two_phase, restore_batch, first_xid))


def run(data: st.DataObject, tmp: Path, params: tuple[int, bool, bool, int, int]) -> None:
    """Drive one random program; `params` = (work_mem, can_stream, decode_at_prepare,
    restore_batch, first_xid)."""
    work_mem, can_stream, two_phase, restore_batch, first_xid = params
    rb, sink, store = make_buffer(
        tmp,
        work_mem=work_mem,
        restore_batch=restore_batch,
        can_stream=can_stream,
        decode_at_prepare=two_phase,
    )
    log = sink.log
    original_write = store.write

    def logged_write(xid: int, changes: Any) -> int:
        batch = list(changes)
        log.append(("spill_write", xid, batch))
        return original_write(xid, batch)

    store.write = logged_write  # type: ignore[method-assign]

    state = {"xid": first_xid, "lsn": 1000, "chunk": 1}
    txns: dict[int, Tx] = {}
    owner: dict[int, int] = {}  # sub xid -> top xid
    expected: list[tuple[int, list[Any]]] = []
    pending: dict[int, list[tuple[int, int]]] = {}  # top -> (part, size) unprocessed
    pending_sub: dict[int, list[int]] = {}  # late sub xid -> sizes (own pending)
    processed_bytes = 0
    stream_commit_ops = 0
    stream_starts_in_commit_ops = 0
    max_change = 0
    max_inputs = 1
    seen = 0
    # The RBTXN_IS_SERIALIZED / RBTXN_IS_SERIALIZED_CLEAR flags, as the log implies them.
    serialized: set[int] = set()
    serialized_clear: set[int] = set()
    spill_txns = 0

    def next_xid() -> int:
        xid = state["xid"]
        nxt = (xid + 1) & 0xFFFFFFFF
        state["xid"] = nxt if nxt >= 3 else 3
        return xid

    def next_lsn() -> int:
        state["lsn"] += 8
        return state["lsn"]

    def known_subs(xid: int) -> list[int]:
        """The subtransactions the buffer has linked to xid (none unless top-level)."""
        tx = txns.get(xid)
        return [] if tx is None else [s for s in tx.subs if s not in tx.late]

    def spill_flags(entry: tuple[Any, ...]) -> None:
        """Mirror the flags behind spill_txns (ReorderBufferSerializeTXN,
        ReorderBufferIterTXNInit, ReorderBufferTruncateTXN)."""
        nonlocal spill_txns
        name, xid = entry[0], entry[1]
        if name == "spill_write":
            if xid not in serialized and xid not in serialized_clear:
                spill_txns += 1
            # The recursion visited (and flagged) every child, spilled or empty.
            serialized.update([xid, *known_subs(xid)])
        elif name == "stream_start":
            family = [xid, *known_subs(xid)]
            if xid in serialized:  # IterTXNInit serializes the rest, children too
                serialized.update(family)
            for part in family:  # the streamed run ends in ReorderBufferTruncateTXN
                if part in serialized:
                    serialized.discard(part)
                    serialized_clear.add(part)

    def drain(commit_op: bool = False) -> None:
        """Account what the buffer handed on since the last call."""
        nonlocal seen, processed_bytes, stream_commit_ops, stream_starts_in_commit_ops
        new = log[seen:]
        seen = len(log)
        for entry in new:
            spill_flags(entry)
            if entry[0] in ("stream_start", "begin", "begin_prepare"):
                processed_bytes += sum(size for _, size in pending.pop(entry[1], []))
        if commit_op and any(e[0] in ("stream_commit", "stream_prepare") for e in new):
            stream_commit_ops += 1
            stream_starts_in_commit_ops += sum(1 for e in new if e[0] == "stream_start")
        assert rb.memory_bytes < work_mem or commit_op
        assert rb.held_changes >= 0 and (rb.held_changes > 0) == (rb.memory_bytes > 0)

    def queue(tx: Tx, xid: int, change: Change) -> None:
        nonlocal max_change
        size = change_size(change)
        max_change = max(max_change, size)
        tx.queued.setdefault(xid, []).append(change)
        if xid in tx.late:
            pending_sub.setdefault(xid, []).append(size)
        else:
            pending.setdefault(tx.xid, []).append((xid, size))
            tx.ever = True
        rb.queue_change(xid, change.lsn, change)
        drain()

    def pick_target(tx: Tx) -> int:
        choice = data.draw(st.integers(0, len(tx.subs) + 1), label="target")
        if choice == len(tx.subs) + 1 and len(tx.subs) < 4:
            sub = next_xid()
            owner[sub] = tx.xid
            tx.subs.append(sub)
            if not can_stream and data.draw(st.booleans(), label="late"):
                tx.late.add(sub)
            else:
                rb.assign_child(tx.xid, sub, state["lsn"])
            return sub
        return tx.xid if choice >= len(tx.subs) else tx.subs[choice]

    def end_subs(tx: Tx) -> None:
        for sub in tx.late:
            if sub in tx.subs:
                pending.setdefault(tx.xid, []).extend((sub, n) for n in pending_sub.pop(sub, []))
                if tx.queued.get(sub):
                    tx.ever = True
            else:
                pending_sub.pop(sub, None)

    def commit_order(tx: Tx) -> None:
        nonlocal max_inputs
        parts = [tx.xid, *tx.subs]
        max_inputs = max(max_inputs, len(parts))
        changes = sorted(
            (c for part in parts for c in tx.queued.get(part, [])), key=lambda c: c.lsn
        )
        if tx.ever:
            expected.append((tx.xid, expected_events(changes)))

    steps = data.draw(st.integers(1, 70), label="steps")
    for _ in range(steps):
        open_txns = [t for t in txns.values() if t.state == "open"]
        op = data.draw(
            st.sampled_from(
                ["new", "change", "change", "toast", "spec", "multi", "rollback_to", "commit",
                 "commit", "abort", "prepare", "finish", "crash", "running_xacts"]
            ),
            label="op",
        )  # fmt: skip
        if op == "new" or (not open_txns and op in ("change", "toast", "spec", "multi")):
            xid = next_xid()
            txns[xid] = Tx(xid)
            rb.process_xid(xid, next_lsn())
            continue
        if op in ("change", "toast", "spec", "multi") and open_txns:
            tx = data.draw(st.sampled_from(open_txns), label="txn")
            target = pick_target(tx)
            if op == "change":
                kind = data.draw(st.sampled_from(["ins", "upd", "del", "msg", "trunc", "int"]))
                lsn = next_lsn()
                payload = b"v" * data.draw(st.integers(0, 120), label="len")
                change: Change
                if kind == "ins":
                    change = heap(target, lsn, ChangeKind.INSERT, payload)
                elif kind == "upd":
                    change = heap(target, lsn, ChangeKind.UPDATE, payload)
                elif kind == "del":
                    change = heap(target, lsn, ChangeKind.DELETE, payload)
                elif kind == "msg":
                    change = message(target, lsn, payload)
                elif kind == "trunc":
                    change = truncate(target, lsn)
                else:
                    change = InternalChange(lsn=lsn, xid=target, payload=("ddl", lsn), size=32)
                queue(tx, target, change)
            elif op == "multi":
                lsn = next_lsn()
                n = data.draw(st.integers(2, 3), label="ntuples")
                for i in range(n):
                    queue(tx, target, heap(target, lsn, data=b"m%d" % i, clear=i == n - 1))
            else:
                with_toast = op == "toast" or data.draw(st.booleans(), label="spec_toast")
                if with_toast:
                    ids = data.draw(st.integers(1, 2), label="values")
                    for _ in range(ids):
                        cid = state["chunk"]
                        state["chunk"] += 1
                        nchunks = data.draw(st.integers(1, MAX_CHUNKS_PER_ROW // ids))
                        for seq in range(nchunks):
                            size = data.draw(st.sampled_from([3, 20, 200]), label="chunk")
                            chunk = bytes([cid % 256]) * size
                            queue(tx, target, toast_insert(target, next_lsn(), cid, seq, chunk))
                if op == "toast":
                    main = data.draw(st.sampled_from([ChangeKind.INSERT, ChangeKind.UPDATE]))
                    queue(tx, target, heap(target, next_lsn(), main, b"main"))
                else:
                    queue(tx, target, heap(target, next_lsn(), ChangeKind.SPEC_INSERT, b"s"))
                    end = data.draw(
                        st.sampled_from([ChangeKind.SPEC_CONFIRM, ChangeKind.SPEC_ABORT])
                    )
                    queue(tx, target, heap(target, next_lsn(), end))
            continue
        if op == "rollback_to":
            with_subs = [t for t in open_txns if t.subs]
            if with_subs:
                tx = data.draw(st.sampled_from(with_subs), label="txn")
                sub = data.draw(st.sampled_from(tx.subs), label="sub")
                tx.subs.remove(sub)
                tx.queued.pop(sub, None)
                pending[tx.xid] = [e for e in pending.get(tx.xid, []) if e[0] != sub]
                pending_sub.pop(sub, None)
                rb.abort(sub, next_lsn())
                drain()
            continue
        if op in ("commit", "abort", "prepare", "crash") and open_txns:
            tx = data.draw(st.sampled_from(open_txns), label="txn")
            if op == "commit":
                end_subs(tx)
                tx.late.clear()  # ReorderBufferCommitChild links them before the replay
                commit_order(tx)
                lsn = next_lsn()
                rb.commit(tx.xid, lsn, lsn + 8, 0, subxids=tuple(tx.subs))
                drain(commit_op=True)
                del txns[tx.xid]
            elif op == "abort":
                lsn = next_lsn()
                for sub in tx.subs:
                    rb.abort(sub, lsn)
                rb.abort(tx.xid, lsn)
                drain(commit_op=True)
                pending.pop(tx.xid, None)
                for sub in tx.late:
                    pending_sub.pop(sub, None)
                del txns[tx.xid]
            elif op == "prepare":
                end_subs(tx)
                tx.late.clear()
                tx.state = "prepared"
                lsn = next_lsn()
                rb.prepare(tx.xid, lsn, lsn + 8, 7, gid=f"g{tx.xid}", subxids=tuple(tx.subs))
                drain(commit_op=True)
            else:
                tx.state = "crashed"
            continue
        if op == "finish":
            prepared = [t for t in txns.values() if t.state == "prepared"]
            if prepared:
                tx = data.draw(st.sampled_from(prepared), label="txn")
                is_commit = data.draw(st.booleans(), label="commit_prepared")
                if is_commit:
                    commit_order(tx)
                lsn = next_lsn()
                rb.finish_prepared(
                    tx.xid, lsn, lsn + 8, 9, is_commit=is_commit, subxids=tuple(tx.subs)
                )
                drain(commit_op=True)
                pending.pop(tx.xid, None)
                del txns[tx.xid]
            continue
        if op == "running_xacts":
            alive = [t.xid for t in txns.values() if t.state != "crashed"]
            oldest = (
                min(alive, key=lambda x: (x - first_xid) & 0xFFFFFFFF) if alive else state["xid"]
            )
            rb.abort_old(oldest)
            drain(commit_op=True)
            for tx in list(txns.values()):
                if tx.state == "crashed" and rb.get_txn(tx.xid) is None:
                    pending.pop(tx.xid, None)
                    del txns[tx.xid]

    # Wind down: roll back what is open or prepared, cut off the crashed ones.
    for tx in list(txns.values()):
        lsn = next_lsn()
        if tx.state == "open":
            for sub in tx.subs:
                rb.abort(sub, lsn)
            rb.abort(tx.xid, lsn)
        elif tx.state == "prepared":
            rb.finish_prepared(tx.xid, lsn, lsn + 8, 9, is_commit=False)
        drain(commit_op=True)
    rb.abort_old(state["xid"])
    drain(commit_op=True)
    for sub in list(owner):
        rb.abort(sub, next_lsn())  # late subs of crashed txns are top-level in the buffer
    drain(commit_op=True)

    event(f"committed={min(len(expected), 5)}")
    event(f"streamed={bool(streamed_xids(log))} spilled={any(e[0] == 'spill_write' for e in log)}")
    assert consume(log) == expected
    assert rb.txn_count == 0
    assert rb.memory_bytes == 0
    assert rb.held_changes == 0
    assert store.files() == []
    held = max_change * (max_inputs + MAX_CHUNKS_PER_ROW + 2)
    assert rb.peak_memory_bytes <= max(work_mem, 1) + held

    stats = rb.stats
    starts = [e for e in log if e[0] == "stream_start"]
    begins = [e for e in log if e[0] in ("begin", "begin_prepare")]
    streamed = {e[1] for e in starts}
    writes = [e for e in log if e[0] == "spill_write"]
    assert stats.stream_txns == len(streamed)
    assert stats.total_txns == len(begins) + len(streamed)
    assert stats.stream_count == len(starts) - stream_starts_in_commit_ops + stream_commit_ops
    assert stats.spill_count == len(writes)
    assert stats.spill_txns == spill_txns <= len({e[1] for e in writes})
    assert (spill_txns > 0) == bool(writes)
    assert stats.spill_bytes == sum(change_size(c) for e in writes for c in e[2])
    assert stats.total_bytes == processed_bytes
    assert 0 <= stats.stream_bytes <= stats.total_bytes
    assert (stats.stream_bytes > 0) <= bool(streamed)
    if not can_stream:
        assert not streamed
    if work_mem >= 1 << 30:
        assert not writes and not streamed
