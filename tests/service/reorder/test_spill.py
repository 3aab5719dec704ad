"""The spill-file store: format checks, leftover cleanup, and a kill during a spill."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from service.errors import SpillFileError
from service.reorder.spill import LocalSpillStore
from tests.service.reorder.reorderbuffer_support import heap, make_buffer

CHILD = """
import sys
from pathlib import Path
from service.reorder.buffer import ReorderBuffer, ReorderBufferSettings
from service.reorder.spill import LocalSpillStore
from tests.service.reorder.reorderbuffer_support import RecordingSink, heap, toast_of

store = LocalSpillStore(Path(sys.argv[1]))
rb = ReorderBuffer(ReorderBufferSettings(work_mem=4096), RecordingSink(), store, toast_of)
print(store.run_dir, flush=True)
lsn = 0
while True:  # one endless transaction: spills every few changes until killed
    lsn += 1
    rb.queue_change(7, lsn, heap(7, lsn, data=b"x" * 500))
"""


def test_round_trip_and_count_check(tmp_path: Path) -> None:
    """Records come back in order; asking for more or fewer than written is an error."""
    store = LocalSpillStore(tmp_path)
    changes = [heap(1, n) for n in range(5)]
    assert store.write(1, changes[:2]) == 2
    assert store.write(1, changes[2:]) == 3
    assert list(store.read(1, 5)) == changes
    with pytest.raises(SpillFileError, match="ends after 5"):
        list(store.read(1, 6))
    with pytest.raises(SpillFileError, match="more than 4"):
        list(store.read(1, 4))
    store.remove(1)
    assert store.files() == []


def test_truncated_file_is_detected(tmp_path: Path) -> None:
    """A file cut in the middle of a record (a crash mid-write) is never read as valid."""
    store = LocalSpillStore(tmp_path)
    store.write(1, [heap(1, n) for n in range(3)])
    path = store.path(1)
    path.write_bytes(path.read_bytes()[:-5])
    with pytest.raises(SpillFileError, match="truncated"):
        list(store.read(1, 3))


def test_corrupt_record_is_detected(tmp_path: Path) -> None:
    """A flipped byte fails the record CRC."""
    store = LocalSpillStore(tmp_path)
    store.write(1, [heap(1, 1, data=b"payload" * 10)])
    raw = bytearray(store.path(1).read_bytes())
    raw[-10] ^= 0xFF
    store.path(1).write_bytes(bytes(raw))
    with pytest.raises(SpillFileError, match="CRC"):
        list(store.read(1, 1))


def test_file_of_another_run_is_refused(tmp_path: Path) -> None:
    """A file whose header names another run is refused even if it sits in our run dir."""
    old = LocalSpillStore(tmp_path / "a")
    old.write(1, [heap(1, 1)])
    new = LocalSpillStore(tmp_path / "b")
    new.path(1).write_bytes(old.path(1).read_bytes())
    with pytest.raises(SpillFileError, match="another run"):
        list(new.read(1, 1))


def test_new_store_deletes_leftovers(tmp_path: Path) -> None:
    """Constructing a store removes every earlier run's directory (and only those)."""
    first = LocalSpillStore(tmp_path)
    first.write(5, [heap(5, 1)])
    (tmp_path / "unrelated.txt").write_text("keep")
    second = LocalSpillStore(tmp_path)
    assert not first.run_dir.exists()
    assert second.run_dir.exists()
    assert (tmp_path / "unrelated.txt").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        [second.run_dir.name, "unrelated.txt"]
    )


def test_kill_during_spill_leaves_nothing_readable(tmp_path: Path) -> None:
    """A process SIGKILLed while spilling leaves files behind; the next buffer on the
    same directory deletes them and replays only its own changes for the same xid."""
    spill_dir = tmp_path / "spill"
    root = Path(__file__).resolve().parents[3]
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, str(spill_dir)],
        cwd=root,
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(root)},
    )
    try:
        assert child.stdout is not None
        run_dir = Path(child.stdout.readline().strip())
        leftover = run_dir / "xid-7.spill"
        deadline = time.monotonic() + 60
        while not (leftover.exists() and leftover.stat().st_size > 200_000):
            assert time.monotonic() < deadline, "child never spilled"
            assert child.poll() is None, "child exited"
            time.sleep(0.02)
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait()
        if child.stdout is not None:
            child.stdout.close()
    assert leftover.exists()

    rb, sink, store = make_buffer(tmp_path, work_mem=4096)
    assert not run_dir.exists()
    for lsn in range(1, 40):
        rb.queue_change(7, lsn, heap(7, lsn, data=b"y" * 500))
    assert store.path(7).exists()
    rb.commit(7, 100, 101, 0)
    lsns = [e[2].lsn for e in sink.log if e[0] == "change"]
    assert lsns == list(range(1, 40))
    assert all(e[2].new_tuple.data.endswith(b"y") for e in sink.log if e[0] == "change")
    rb.close()
    assert list(spill_dir.iterdir()) == []
