"""The fault suite's verifier: what a read_committed consumer saw, counted per source
transaction against what the workload did.

`verify(p, outcomes, reads)` takes the workload's outcomes (in-doubt commits already
resolved with pg_xact_status(), see tests/faults/workload.py) and every committed
record of the output topics (`read_all`: isolation.level=read_committed), and counts:

- lost: a committed transaction with none of its events published;
- duplicated: one with an event (a `transaction.total_order`) published more than once;
- partial: one with some, not all, of its events (orders 1..n, n = rows the SQL touched);
- out of order: one whose events are not one contiguous run in a topic partition, or
  whose run comes before that of a transaction that committed earlier (by the commit
  LSN its END record on the transaction topic names: a data event's `transaction.id`
  carries that event's own LSN, as Debezium's does, and a transaction that began
  earlier and committed later may have written its last event before another's);
- aborted visible: a rolled-back (or in-doubt, then aborted) transaction with events;
- rows differing: keys whose materialized value (c/u/r upsert, d delete, by key in
  topic order) differs from `SELECT *` of the table, over the workload's columns.

Counting instead of asserting lets the scenario table show every kind of failure.
"""

from __future__ import annotations

import json
import operator
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field

from service.lsn import format_lsn
from tests.integration.pipeline_kafka_support import Pipeline, Rec, TxnOutcome, materialize

TABLES = (
    ("acct", "id", ("id", "grp", "val", "note")),
    ("ledger", "id", ("id", "acct", "amount", "memo")),
    ("kv", "k", ("k", "v")),
)


@dataclass
class Verdict:
    committed: int = 0
    aborted: int = 0
    lost: int = 0
    duplicated: int = 0
    partial: int = 0
    out_of_order: int = 0
    aborted_visible: int = 0
    rows_differing: int = 0
    examples: list[str] = field(default_factory=list)
    lost_xids: list[int] = field(default_factory=list)  # the story shows what became of them
    partial_xids: list[int] = field(default_factory=list)  # and of these

    @property
    def clean(self) -> bool:
        return not (
            self.lost
            or self.duplicated
            or self.partial
            or self.out_of_order
            or self.aborted_visible
            or self.rows_differing
        )

    def note(self, text: str) -> None:
        if len(self.examples) < 5:
            self.examples.append(text)


def transaction_topic(p: Pipeline) -> str:
    return f"{p.prefix}.transaction"


def topics(p: Pipeline) -> list[str]:
    return [*(p.topic(t) for t, _, _ in TABLES), transaction_topic(p)]


def commit_lsns(p: Pipeline, reads: Sequence[Rec]) -> dict[int, int]:
    """Each transaction's commit LSN, from its END record on the transaction topic
    (`id` "xid:commit end LSN"), by xid."""
    found: dict[int, int] = {}
    for r in reads:
        if r.topic == transaction_topic(p) and r.value and r.value["status"] == "END":
            xid, lsn = r.value["id"].split(":")
            found[int(xid)] = int(lsn)
    return found


def verify(p: Pipeline, outcomes: Sequence[TxnOutcome], reads: Sequence[Rec]) -> Verdict:
    v = Verdict()
    committed = [o for o in outcomes if o.committed]
    aborted = {o.xid for o in outcomes if not o.committed}
    v.committed, v.aborted = len(committed), len(aborted)
    data = [
        r
        for r in reads
        if r.value is not None and r.value.get("transaction") and r.topic != transaction_topic(p)
    ]
    orders: dict[int, list[int]] = defaultdict(list)
    for r in data:
        orders[r.value["source"]["txId"]].append(r.value["transaction"]["total_order"])
    commit_lsn = commit_lsns(p, reads)
    v.aborted_visible = sum(1 for x in aborted if x in orders)
    for o in committed:
        got = orders.get(o.xid, [])
        if o.total == 0:
            continue
        if not got:
            v.lost += 1
            v.lost_xids.append(o.xid)
            since = format_lsn(o.commit_from)
            v.note(f"lost {o.xid} ({o.total} events, commit at or after {since})")
            continue
        counts = Counter(got)
        if any(n > 1 for n in counts.values()):
            v.duplicated += 1
            v.note(f"duplicated {o.xid}: {len(got)} events for {o.total}")
        if set(counts) != set(range(1, o.total + 1)):
            v.partial += 1
            v.partial_xids.append(o.xid)
            v.note(f"partial {o.xid}: {len(counts)} of {o.total} events")
    # Contiguous runs per partition, in commit order.
    runs: dict[tuple[str, int], list[int]] = defaultdict(list)
    disordered: set[int] = set()
    for r in data:
        run = runs[(r.topic, r.partition)]
        xid = r.value["source"]["txId"]
        if not run or run[-1] != xid:
            if xid in run:
                disordered.add(xid)
            run.append(xid)
    for run in runs.values():
        highest = -1
        for xid in run:
            lsn = commit_lsn.get(xid)
            if lsn is None:  # data events with no END: said wherever the END is missing
                disordered.add(xid)
                continue
            if lsn < highest:
                disordered.add(xid)
            highest = max(highest, lsn)
    v.out_of_order = len(disordered)
    if disordered:
        v.note(f"out of order: {sorted(disordered)[:5]}")
    for table, key, cols in TABLES:
        final = materialize(
            [r for r in reads if r.topic == p.topic(table)], operator.itemgetter(key)
        )
        want = {
            row[0]: dict(zip(cols, row, strict=True))
            for row in p.query(f"SELECT {', '.join(cols)} FROM {table}")
        }
        projected = {k: {c: row.get(c) for c in cols} for k, row in final.items()}
        differing = {k for k in set(want) | set(projected) if want.get(k) != projected.get(k)}
        v.rows_differing += len(differing)
        if differing:
            v.note(f"{table}: {len(differing)} keys differ, e.g. {sorted(differing, key=str)[:3]}")
    return v


# The worker log events a failed verdict is read against: where decoding started, the
# snapshot's batch, and every retry, replay, reconnect and restart.
STORY_EVENTS = frozenset(
    {
        "worker_consistent",
        "commit_in_snapshot",
        "rewrite_changes_skipped",
        "worker_resumed",
        "worker_bridging_gap",
        "snapshot_committed",
        "worker_signal",
        "worker_stopped",
    }
)


_STORY_LEFT_OUT = frozenset({"timestamp", "level", "logger", "event"})


def story(p: Pipeline, limit: int = 40, lost: Sequence[int] = ()) -> str:
    """The workers' key log lines, in time order (STORY_EVENTS, and every warning or
    error), for a failed verdict's message: what the worker did around a lost or
    misplaced transaction, which the counts alone cannot say. With `lost` (the verdict's
    lost_xids), also the `txn_published` lines (debug level) of those transactions and
    the two before and after each: whether the worker decoded them, and how many
    records each produced."""
    near = {x + d for x in lost for d in range(-2, 3)}
    lines: list[tuple[str, str]] = []
    for n, w in enumerate(p.workers):
        for e in w.events():
            event = e.get("event", "")
            traced = event == "txn_published" and e.get("xid") in near
            if (
                not traced
                and event not in STORY_EVENTS
                and e.get("level") not in ("warning", "error")
            ):
                continue
            rest = {k: v for k, v in e.items() if k not in _STORY_LEFT_OUT}
            stamp = str(e.get("timestamp", ""))[11:23]
            lines.append((stamp, f"{stamp} w{n} {event} {json.dumps(rest, default=str)[:200]}"))
    lines.sort()
    if len(lines) > limit:
        half = limit // 2
        skipped = f"... {len(lines) - limit} more ..."
        lines = [*lines[:half], ("", skipped), *lines[-half:]]
    return "\n".join(text for _, text in lines)
