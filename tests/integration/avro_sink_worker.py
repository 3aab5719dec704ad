"""A worker process for the exactly-once tests: replays a fixed workload into Kafka.

    python -m tests.integration.avro_sink_worker BOOTSTRAP REGISTRY PREFIX SLOT MODE AT

It recovers the last committed offset, skips every source transaction whose commit end
LSN is at or below it, and publishes the rest. MODE says where it stops dead (printing
READY, then sleeping until the test SIGKILLs it): `mid_txn` after producing the rows of
transaction AT without ending it; `before_commit` just before the AT-th
commit_transaction (the offset record already produced); `none` runs to the end.
"""

from __future__ import annotations

import random
import sys
import time
from typing import Any

from service.output.api import RelationInfo
from tests.integration.avro_kafka_support import Harness, col, insert, make_settings

N_TXNS = 30
BIG_TXN = 11  # this one has BIG_ROWS rows
BIG_ROWS = 5000
REL = RelationInfo(
    17000,
    "public",
    "eo",
    "d",
    ("id",),
    (col("id", 20, 1, notnull=True), col("txn", 23, 2, notnull=True), col("payload", 25, 3)),
    defined_at=1,
)


def workload() -> list[tuple[int, int, list[int]]]:
    """(xid, end_lsn, row ids) per source transaction, the same on every run."""
    rng = random.Random(42)
    out = []
    for i in range(N_TXNS):
        n = BIG_ROWS if i == BIG_TXN else rng.randint(1, 60)
        out.append((9000 + i, 0x100000 * (i + 1), [i * 100_000 + j for j in range(n)]))
    return out


class _StopBeforeCommit:
    """Delegates to the real producer; hangs at the `at`-th commit_transaction."""

    def __init__(self, producer: Any, at: int) -> None:
        self._p, self._at, self._n = producer, at, 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self._p, name)

    def commit_transaction(self, *args: Any) -> None:
        self._n += 1
        if self._n == self._at:
            self._p.flush(10)
            print("READY", flush=True)
            time.sleep(3600)
        self._p.commit_transaction(*args)


def main(argv: list[str]) -> int:
    bootstrap, registry, prefix, slot, mode, at_text = argv
    at = int(at_text)
    # Batches of exactly 4 source transactions: no age cap can commit one early on a
    # loaded machine (the test reads the offset the kill leaves).
    settings = make_settings(
        {"bootstrap": bootstrap},
        {"url": registry},
        prefix,
        slot,
        max_batch_txns=4,
        max_batch_age_s=600,
    )
    h = Harness(settings)
    last = h.start()
    confirmed = last.confirmed_lsn if last else 0
    if mode == "before_commit":
        h.sink._producer = _StopBeforeCommit(h.sink._producer, at)  # type: ignore[assignment]
    for i, (xid, end, ids) in enumerate(workload()):
        if end <= confirmed:
            continue
        events = [
            insert(REL, end - 0x80000 + k, id=rid, txn=i, payload=f"row {rid}")
            for k, rid in enumerate(ids)
        ]
        if mode == "mid_txn" and i == at:
            from service.output.api import TxnInfo  # noqa: PLC0415  (only this helper needs it)

            info = TxnInfo(xid, events[0].lsn, end - 16, end, 0, None)
            h.wrapper.call("begin", info.first_lsn, xid, info)
            for ev in events:
                h.wrapper.call("change", ev.lsn, xid, info, ev)
            h.sink._producer.flush(10)
            print("READY", flush=True)
            time.sleep(3600)
        h.txn(xid, end, events)
    h.sink.flush()
    h.close()
    print("DONE", confirmed, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
