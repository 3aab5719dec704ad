"""The fault suite's verifier on hand-made reads (no service): what it counts as out of
order. A data event's `transaction.id` carries that event's LSN (as Debezium's); the
order of transactions is their commit order, which the END records give."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.faults.verifier import commit_lsns, story, verify
from tests.integration.pipeline_kafka_support import Rec, TxnOutcome, WorkerProcess

PREFIX = "v"


@dataclass
class FakePipeline:
    """What `verify` asks of a Pipeline: the topic names and the tables' rows."""

    rows: dict[str, list[tuple[Any, ...]]]
    prefix: str = PREFIX

    def topic(self, table: str) -> str:
        return f"{PREFIX}.public.{table}"

    def query(self, sql: str) -> list[tuple[Any, ...]]:
        return self.rows[sql.rsplit(" ", 1)[-1]]


def _insert(xid: int, ledger_id: int, lsn: int, order: int, offset: int) -> Rec:
    row = {"id": ledger_id, "acct": 1, "amount": 1, "memo": "m"}
    value = {
        "op": "c",
        "after": row,
        "source": {"txId": xid},
        "transaction": {"id": f"{xid}:{lsn}", "total_order": order},
    }
    return Rec(f"{PREFIX}.public.ledger", 0, offset, {"id": ledger_id}, value, {}, None, 0, 0.0)


def _end(xid: int, commit_lsn: int, offset: int) -> Rec:
    value = {"status": "END", "id": f"{xid}:{commit_lsn}"}
    return Rec(f"{PREFIX}.transaction", 0, offset, {"id": f"{xid}"}, value, {}, None, 0, 0.0)


def _pipeline() -> FakePipeline:
    ledger = [(i, 1, 1, "m") for i in (1, 2, 3)]
    return FakePipeline({"acct": [], "ledger": ledger, "kv": []})


def _outcomes() -> list[TxnOutcome]:
    return [TxnOutcome(10, True, {"ledger": 2}), TxnOutcome(11, True, {"ledger": 1})]


def test_a_transaction_that_wrote_before_an_earlier_commit_is_in_order() -> None:
    """10 writes at LSN 100 and 300 and commits at 310; 11 wrote at 200 (inside 10's
    span) and commits at 320: 10 then 11 is commit order, though 11's only event has a
    lower LSN than 10's last."""
    reads = [
        _insert(10, 1, 100, 1, 0),
        _insert(10, 2, 300, 2, 1),
        _insert(11, 3, 200, 1, 2),
        _end(10, 310, 0),
        _end(11, 320, 1),
    ]
    assert commit_lsns(_pipeline(), reads) == {10: 310, 11: 320}  # type: ignore[arg-type]
    verdict = verify(_pipeline(), _outcomes(), reads)  # type: ignore[arg-type]
    assert verdict.clean, verdict
    assert verdict.committed == 2


def test_a_later_commit_published_first_is_out_of_order() -> None:
    reads = [
        _insert(11, 3, 200, 1, 0),
        _insert(10, 1, 100, 1, 1),
        _insert(10, 2, 300, 2, 2),
        _end(11, 320, 0),
        _end(10, 310, 1),
    ]
    verdict = verify(_pipeline(), _outcomes(), reads)  # type: ignore[arg-type]
    assert verdict.out_of_order == 1, verdict
    assert verdict.examples == ["out of order: [10]"]


def test_a_run_broken_by_another_transaction_is_out_of_order() -> None:
    reads = [
        _insert(10, 1, 100, 1, 0),
        _insert(11, 3, 200, 1, 1),
        _insert(10, 2, 300, 2, 2),
        _end(10, 310, 0),
        _end(11, 320, 1),
    ]
    verdict = verify(_pipeline(), _outcomes(), reads)  # type: ignore[arg-type]
    assert verdict.out_of_order == 1, verdict


def test_data_events_without_an_end_record_are_out_of_order() -> None:
    reads = [_insert(10, 1, 100, 1, 0), _insert(10, 2, 300, 2, 1), _insert(11, 3, 200, 1, 2)]
    reads.append(_end(11, 320, 0))
    verdict = verify(_pipeline(), _outcomes(), reads)  # type: ignore[arg-type]
    assert verdict.out_of_order == 1 and verdict.examples == ["out of order: [10]"], verdict


def test_the_story_is_the_key_lines_of_every_worker_in_time_order(tmp_path: Path) -> None:
    """A failed verdict's message carries the workers' key lines (STORY_EVENTS, and every
    warning or error), merged by time; other info lines and non-JSON output are left out."""

    def line(second: int, level: str, event: str, **fields: str) -> str:
        stamp = f"2026-12-06T10:00:0{second}.000Z"
        return json.dumps({"timestamp": stamp, "level": level, "event": event, **fields})

    first = "\n".join(
        [
            line(1, "info", "worker_consistent", snapshot_lsn="0/10"),
            line(2, "info", "avro_schema_registered"),
            "Traceback (most recent call last):",
            line(4, "warning", "kafka_txn_replay", lsn="0/20"),
        ]
    )
    second = line(3, "info", "worker_resumed")
    p = _pipeline()
    workers = []
    for n, text in enumerate((first, second)):
        log = tmp_path / f"worker-{n}.log"
        log.write_text(text + "\n")
        workers.append(WorkerProcess(None, log))  # type: ignore[arg-type]  # no process
    p.workers = workers  # type: ignore[attr-defined]
    lines = story(p).splitlines()  # type: ignore[arg-type]
    assert [line.split()[1:3] for line in lines] == [
        ["w0", "worker_consistent"],
        ["w1", "worker_resumed"],
        ["w0", "kafka_txn_replay"],
    ]
    assert '"lsn": "0/20"' in lines[2]


def test_the_story_traces_the_lost_transactions_and_their_neighbours(tmp_path: Path) -> None:
    """With the verdict's lost xids, the story adds the `txn_published` lines (debug) of
    those transactions and of the two before and after each, and no other."""

    def line(second: int, xid: int, records: int) -> str:
        stamp = f"2026-12-06T10:00:0{second}.000Z"
        fields = {"xid": xid, "commit_lsn": "0/1", "records": records}
        return json.dumps(
            {"timestamp": stamp, "level": "debug", "event": "txn_published", **fields}
        )

    log = tmp_path / "worker-0.log"
    log.write_text("\n".join(line(n, xid, 3) for n, xid in enumerate((7, 8, 10, 12, 13))) + "\n")
    p = _pipeline()
    p.workers = [WorkerProcess(None, log)]  # type: ignore[attr-defined,arg-type]
    traced = [ln.split('"xid": ')[1].split(",")[0] for ln in story(p, lost=[10]).splitlines()]  # type: ignore[arg-type]
    assert traced == ["8", "10", "12"]
    assert story(p).splitlines() == []  # type: ignore[arg-type]
    verdict = verify(_pipeline(), _outcomes(), [])  # type: ignore[arg-type]
    assert verdict.lost_xids == [10, 11], verdict
