"""End to end: real PostgreSQL -> `pgcdc run` (a subprocess) -> real Kafka + Apicurio.

Every test drives the worker only as an operator would: `python -m service.app.cli run`
configured by `PGCDC_*` environment variables, stopped by SIGTERM or killed by SIGKILL.
What reaches Kafka is read back by a plain `confluent_kafka.Consumer`
(`isolation.level=read_committed`) decoded as confluent's `AvroDeserializer` does
(tests.integration.writer_schema), and checked
against what the SQL did: xids from `pg_current_xact_id()`, LSN ranges from
`pg_current_wal_insert_lsn()` around each statement, commit times bounded by `now()`
and the wall clock, and finally the source tables themselves (`SELECT *`).
"""

from __future__ import annotations

import operator
import signal
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest

from connectors.avro.plugin import MESSAGE_COLLECTION
from tests.integration.pipeline_kafka_support import (
    EO_TABLES,
    Pipeline,
    Rec,
    TxnOutcome,
    WorkerProcess,
    Workload,
    current_xid,
    insert_lsn,
    materialize,
    parse_lsn,
    pipeline,
    read_all,
    uncommitted_count,
)

pytestmark = pytest.mark.integration

TABLES = [
    "CREATE TABLE items (id int PRIMARY KEY, name text NOT NULL, qty int)",
    "CREATE TABLE items_full (id int PRIMARY KEY, name text, qty int)",
    "ALTER TABLE items_full REPLICA IDENTITY FULL",
]


@dataclass
class SourceTxn:
    """What one source transaction did, as seen from inside it."""

    xid: int
    now_ms: int  # now() at its start: its commit time is not earlier
    stmts: list[tuple[str, int, int]] = field(default_factory=list)  # (label, lsn from, to)
    commit_from: int = 0  # the commit record starts at or after this LSN
    commit_to: int = 0  # ... and before this one
    wall_after_ms: int = 0

    def range(self, label: str) -> tuple[int, int]:
        return next((a, b) for name, a, b in self.stmts if name == label)


def run_txn(p: Pipeline, steps: list[tuple[str, str]], *, commit: bool = True) -> SourceTxn:
    """Run `steps` (label, SQL) in one transaction, recording xid and LSN ranges."""
    conn = p.connect()
    cur = conn.cursor()
    cur.execute("BEGIN")
    xid = current_xid(cur)
    cur.execute("SELECT (extract(epoch FROM now()) * 1000)::bigint")
    txn = SourceTxn(xid, int(cur.fetchone()[0]))
    for label, sql in steps:
        start = insert_lsn(cur)
        cur.execute(sql)
        txn.stmts.append((label, start, insert_lsn(cur)))
    txn.commit_from = insert_lsn(cur)
    cur.execute("COMMIT" if commit else "ROLLBACK")
    txn.commit_to = insert_lsn(cur)
    txn.wall_after_ms = int(time.time() * 1000) + 1
    conn.close()
    return txn


def check_source(
    p: Pipeline, value: dict[str, Any], txn: SourceTxn, label: str, table: str
) -> None:
    """Every `source` field against what the SQL did."""
    src = value["source"]
    lo, hi = txn.range(label)
    assert (src["version"], src["connector"], src["name"]) == (
        "3.6.1.Final-pgcdc",
        "postgresql",
        p.prefix,
    )
    assert src["ts_us"] // 1000 == src["ts_ms"] and src["ts_ns"] == src["ts_us"] * 1000
    assert (src["origin"], src["origin_lsn"]) == (None, None)
    assert (src["db"], src["schema"], src["table"]) == (p.db, "public" if table else "", table)
    assert src["snapshot"] == "false"
    assert src["txId"] == txn.xid
    # <= hi: a message's lsn is the end of its record, as PostgreSQL hands it on.
    assert lo <= src["lsn"] <= hi, (label, hex(src["lsn"]), hex(lo), hex(hi))
    assert txn.now_ms <= src["ts_ms"] <= txn.wall_after_ms, (src["ts_ms"], txn.now_ms)
    assert src["xmin"] is None
    last_commit, this = (
        None if s == "null" else int(s)
        for s in src["sequence"].strip("[]").replace('"', "").split(",")
    )
    assert this == src["lsn"]
    assert last_commit is None or last_commit <= txn.commit_from
    assert src["ts_ms"] <= value["ts_ms"] <= int(time.time() * 1000)
    block = value.get("transaction")
    if block is not None:  # Debezium's "<xid>:<lsn>", with this event's lsn
        assert block["id"] == f"{txn.xid}:{src['lsn']}"


def commit_lsn_of(txn: SourceTxn, txn_id: str) -> int:
    """The commit end LSN in an END's id "<xid>:<commit end lsn>", checked."""
    xid, lsn = txn_id.split(":")
    assert int(xid) == txn.xid
    assert txn.commit_from < int(lsn) <= txn.commit_to
    return int(lsn)


def test_envelopes_through_pgcdc_run(
    pg: dict[str, Any], kafka: dict[str, Any], registry: dict[str, Any]
) -> None:
    """Insert, update (REPLICA IDENTITY DEFAULT: no `before`; FULL: the whole old row; a
    key change: delete + tombstone + create), delete + tombstone, truncate and logical
    messages, published by `pgcdc run` and read back by the writer's schema: every
    envelope field (source.lsn/txId/db/schema/table/snapshot/ts_ms/sequence, op, ts_ms,
    transaction block, BEGIN/END metadata) matches what the SQL did, and a rolled-back
    transaction publishes nothing."""
    with pipeline(pg, kafka, registry, f"env{pg['version']}", TABLES) as p:
        worker = p.start_worker()
        worker.wait_ready(90)
        # The chunked snapshot of the empty tables ends first, or it may read the
        # workload's rows as op r too.
        worker.wait_event(["snapshot_done"], 90)
        t_ins = run_txn(
            p,
            [
                ("ins", "INSERT INTO items VALUES (1, 'a', 10), (2, 'b', 20)"),
                ("insf", "INSERT INTO items_full VALUES (1, 'x', 1)"),
            ],
        )
        t_upd = run_txn(p, [("upd", "UPDATE items SET qty = 11 WHERE id = 1")])
        t_updf = run_txn(p, [("updf", "UPDATE items_full SET qty = 2 WHERE id = 1")])
        t_key = run_txn(p, [("key", "UPDATE items SET id = 3 WHERE id = 2")])
        run_txn(p, [("gone", "INSERT INTO items VALUES (99, 'never', 0)")], commit=False)
        t_del = run_txn(p, [("del", "DELETE FROM items WHERE id = 1")])
        t_delf = run_txn(p, [("delf", "DELETE FROM items_full WHERE id = 1")])
        t_msg = run_txn(
            p,
            [
                ("msg", "SELECT pg_logical_emit_message(true, 'app', 'hello')"),
                ("ins4", "INSERT INTO items VALUES (4, 'd', NULL)"),
            ],
        )
        nt_from = parse_lsn(p.query("SELECT pg_current_wal_insert_lsn()")[0][0])
        p.execute("SELECT pg_logical_emit_message(false, 'nt', 'world')")
        t_trunc = run_txn(p, [("trunc", "TRUNCATE items, items_full")])
        t_last = run_txn(p, [("last", "INSERT INTO items VALUES (5, 'e', 5)")])
        p.wait_confirmed(t_last.commit_from, 90, worker)
        assert worker.terminate() == 0

        reads = read_all(
            p.settings(),
            [
                p.topic("items"),
                p.topic("items_full"),
                f"{p.prefix}.transaction",
                f"{p.prefix}.message",
            ],
        )
    by_topic: dict[str, list[Rec]] = defaultdict(list)
    for r in reads:
        by_topic[r.topic.removeprefix(p.prefix + ".")].append(r)
    items, full = by_topic["public.items"], by_topic["public.items_full"]
    assert [(r.value["op"] if r.value else None) for r in items] == [
        "c",
        "c",
        "u",
        "d",
        None,
        "c",
        "d",
        None,
        "c",
        "t",
        "c",
    ]
    assert [(r.value["op"] if r.value else None) for r in full] == ["c", "u", "d", None, "t"]
    assert all(r.value is None or r.value["source"]["txId"] != 0 for r in items)

    # Inserts: two tables in one transaction, one transaction block.
    c1, c2, cf = items[0], items[1], full[0]
    assert (c1.key, c1.value["before"], c1.value["after"]) == (
        {"id": 1},
        None,
        {"id": 1, "name": "a", "qty": 10},
    )
    assert (c2.key, c2.value["after"]) == ({"id": 2}, {"id": 2, "name": "b", "qty": 20})
    assert (cf.key, cf.value["after"]) == ({"id": 1}, {"id": 1, "name": "x", "qty": 1})
    for r, label, table in ((c1, "ins", "items"), (c2, "ins", "items"), (cf, "insf", "items_full")):
        check_source(p, r.value, t_ins, label, table)
    assert c1.value["source"]["lsn"] < c2.value["source"]["lsn"] < cf.value["source"]["lsn"]
    assert [
        (
            r.value["transaction"]["id"],
            r.value["transaction"]["total_order"],
            r.value["transaction"]["data_collection_order"],
        )
        for r in (c1, c2, cf)
    ] == [
        (f"{t_ins.xid}:{r.value['source']['lsn']}", i, o)
        for r, i, o in ((c1, 1, 1), (c2, 2, 2), (cf, 3, 1))
    ]
    assert len({r.value["source"]["ts_ms"] for r in (c1, c2, cf)}) == 1

    # Update, REPLICA IDENTITY DEFAULT: no before; FULL: the old row.
    u = items[2]
    assert (u.key, u.value["before"], u.value["after"]) == (
        {"id": 1},
        None,
        {"id": 1, "name": "a", "qty": 11},
    )
    check_source(p, u.value, t_upd, "upd", "items")
    uf = full[1]
    assert (uf.key, uf.value["before"], uf.value["after"]) == (
        {"id": 1},
        {"id": 1, "name": "x", "qty": 1},
        {"id": 1, "name": "x", "qty": 2},
    )
    check_source(p, uf.value, t_updf, "updf", "items_full")

    # A key change: delete of the old key (+ tombstone), create of the new one, headers
    # naming the other key; DEFAULT identity logs only the key of the old row.
    kd, kt, kc = items[3], items[4], items[5]
    assert (kd.key, kd.value["after"]) == ({"id": 2}, None)
    assert kd.value["before"] == {"id": 2, "name": "", "qty": None}  # Debezium: zero/null
    assert (kt.key, kt.value, kt.raw_value) == ({"id": 2}, None, None)
    assert (kc.key, kc.value["before"], kc.value["after"]) == (
        {"id": 3},
        None,
        {"id": 3, "name": "b", "qty": 20},
    )
    context = {
        "__debezium.context.connectorLogicalName",
        "__debezium.context.taskId",
        "__debezium.context.connectorName",
        "__debezium.context.runId",
    }
    assert set(kd.headers) == {"__debezium.newkey", *context} == set(kt.headers)
    assert set(kc.headers) == {"__debezium.oldkey", *context}
    assert kd.headers["__debezium.newkey"] == b'{"id":3}' == kt.headers["__debezium.newkey"]
    assert kc.headers["__debezium.oldkey"] == b'{"id":2}'
    assert all(set(r.headers) >= context for r in (*items, *full))
    for r in (kd, kc):
        check_source(p, r.value, t_key, "key", "items")
    assert [r.value["transaction"]["total_order"] for r in (kd, kc)] == [1, 2]

    # Deletes with tombstones: DEFAULT gives the key only, FULL the whole old row.
    d, dt = items[6], items[7]
    assert (d.key, d.value["before"], d.value["after"]) == (
        {"id": 1},
        {"id": 1, "name": "", "qty": None},
        None,
    )
    assert (dt.key, dt.value) == ({"id": 1}, None)
    check_source(p, d.value, t_del, "del", "items")
    df, dft = full[2], full[3]
    assert (df.key, df.value["before"], df.value["after"]) == (
        {"id": 1},
        {"id": 1, "name": "x", "qty": 2},
        None,
    )
    assert (dft.key, dft.value) == ({"id": 1}, None)
    check_source(p, df.value, t_delf, "delf", "items_full")

    # A transactional message and a row in one transaction; a non-transactional one.
    c4 = items[8]
    assert c4.value["after"] == {"id": 4, "name": "d", "qty": None}
    check_source(p, c4.value, t_msg, "ins4", "items")
    messages = by_topic["message"]
    assert [(m.key, m.value["op"], m.value["message"]) for m in messages] == [
        ({"prefix": "app"}, "m", {"prefix": "app", "content": b"hello"}),
        ({"prefix": "nt"}, "m", {"prefix": "nt", "content": b"world"}),
    ]
    check_source(p, messages[0].value, t_msg, "msg", "")
    assert messages[1].value["transaction"] is None
    nt = messages[1].value["source"]
    assert nt["txId"] is None and nt_from <= nt["lsn"] < t_trunc.commit_from

    # Truncate: one op t per table, no key, no rows.
    tr, trf = items[9], full[4]
    for r, table in ((tr, "items"), (trf, "items_full")):
        assert (r.key, r.value["before"], r.value["after"]) == (None, None, None)
        check_source(p, r.value, t_trunc, "trunc", table)
    assert tr.value["transaction"]["id"] == trf.value["transaction"]["id"]
    check_source(p, items[10].value, t_last, "last", "items")

    # Transaction metadata: BEGIN/END per transaction with events, in commit order, with
    # event counts per table; the rolled-back transaction is nowhere.
    meta = [r.value for r in by_topic["transaction"]]
    expected = [
        (t_ins, 3, {"public.items": 2, "public.items_full": 1}),
        (t_upd, 1, {"public.items": 1}),
        (t_updf, 1, {"public.items_full": 1}),
        (t_key, 2, {"public.items": 2}),
        (t_del, 1, {"public.items": 1}),
        (t_delf, 1, {"public.items_full": 1}),
        (t_msg, 2, {"public.items": 1, MESSAGE_COLLECTION: 1}),
        (t_trunc, 2, {"public.items": 1, "public.items_full": 1}),
        (t_last, 1, {"public.items": 1}),
    ]
    assert len(meta) == 2 * len(expected)
    for (begin, end), (txn, count, per_table) in zip(
        zip(meta[::2], meta[1::2], strict=True), expected, strict=True
    ):
        assert (begin["status"], end["status"]) == ("BEGIN", "END")
        # BEGIN: the first event's "<xid>:<lsn>"; END: the commit's end.
        first = next(
            r.value
            for r in reads
            if r.value
            and (r.value.get("transaction") or {}).get("total_order") == 1
            and r.value["source"]["txId"] == txn.xid
        )
        assert begin["id"] == first["transaction"]["id"] != end["id"]
        commit_lsn_of(txn, end["id"])
        assert end["event_count"] == count
        assert {
            c["data_collection"]: c["event_count"] for c in end["data_collections"]
        } == per_table
        assert txn.now_ms <= begin["ts_ms"] == end["ts_ms"] <= txn.wall_after_ms
    seen = {r.value["source"]["txId"] for r in reads if r.value and "source" in r.value}
    assert seen == {t.xid for t, _, _ in expected} | {None}


class Background:
    """Runs `fn` in a thread; `join` re-raises what it raised."""

    def __init__(self, fn: Callable[[], object]) -> None:
        self.error: BaseException | None = None

        def target() -> None:
            try:
                fn()
            except BaseException as exc:  # handed to the test thread in join()
                self.error = exc

        self.thread = threading.Thread(target=target, daemon=True)
        self.thread.start()

    def running(self) -> bool:
        return self.thread.is_alive()

    def join(self, timeout: float = 300.0) -> None:
        self.thread.join(timeout)
        assert not self.thread.is_alive(), "the workload did not finish"
        if self.error is not None:
            raise self.error


def restart(p: Pipeline, old: WorkerProcess, kills: list[str], why: str) -> WorkerProcess:
    """SIGKILL `old`, start a new worker, wait until it has resumed."""
    old.kill()
    assert old.proc.returncode == -signal.SIGKILL
    kills.append(why)
    new = p.start_worker()
    new.wait_ready(120)
    return new


def until(cond: Callable[[], bool], timeout: float, what: str, step: float = 0.05) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(step)


def describe(data: list[Rec], o: TxnOutcome) -> str:
    """What was published for `o`, to make a failure readable."""
    mine = [r for r in data if r.value["source"]["txId"] == o.xid]
    ops = Counter((r.value["source"]["table"], r.value["op"]) for r in mine)
    lsns = Counter(r.value["source"]["lsn"] for r in mine)
    return (
        f"transaction {o.xid}: {len(mine)} events, {o.total} expected ({o.events}); "
        f"published {dict(ops)}; {len(lsns)} distinct LSNs, "
        f"{sum(1 for n in lsns.values() if n > 1)} repeated; "
        f"offsets {mine[0].offset}..{mine[-1].offset} in {mine[0].topic}; "
        f"SQL: {o.statements}"
    )


def check_exactly_once(p: Pipeline, wl: Workload, reads: list[Rec]) -> None:
    """Every committed source transaction exactly once, whole, in commit order; no
    aborted one; and the topics materialized equal the source tables row for row."""
    committed = wl.committed()
    aborted = {o.xid for o in wl.outcomes if not o.committed}
    data = [
        r
        for r in reads
        # Stream events only: rows the chunked snapshot read (op r, no transaction
        # block) may repeat a row's state, as DBLog allows; the tables start empty, so
        # the stream alone materializes them.
        if r.value is not None
        and r.value.get("transaction") is not None
        and r.topic != f"{p.prefix}.transaction"
    ]
    # Per transaction: total_order 1..n exactly once, n = the rows the SQL touched.
    orders: dict[int, list[int]] = defaultdict(list)
    per_table: dict[int, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    # END's id is "<xid>:<commit end lsn>" (an event's carries the event's own lsn).
    meta = [r.value for r in reads if r.topic == f"{p.prefix}.transaction"]
    commit_lsn = {
        int(m["id"].split(":")[0]): int(m["id"].split(":")[1]) for m in meta if m["status"] == "END"
    }
    for r in data:
        xid = r.value["source"]["txId"]
        assert xid not in aborted, f"aborted transaction {xid} was published"
        orders[xid].append(r.value["transaction"]["total_order"])
        per_table[xid][r.value["source"]["table"]] += 1
        assert r.value["transaction"]["id"] == f"{xid}:{r.value['source']['lsn']}"
    assert set(orders) == {o.xid for o in committed}
    for o in committed:
        assert sorted(orders[o.xid]) == list(range(1, o.total + 1)), describe(data, o)
        assert dict(per_table[o.xid]) == {t: n for t, n in o.events.items() if n}
        assert o.commit_from <= commit_lsn[o.xid]
    # Each transaction's events are one contiguous run in each topic partition, and the
    # runs follow commit order; so every key's events are in commit order too.
    runs: dict[tuple[str, int], list[int]] = defaultdict(list)
    for r in data:
        run = runs[(r.topic, r.partition)]
        xid = r.value["source"]["txId"]
        if not run or run[-1] != xid:
            assert xid not in run, f"transaction {xid} is not contiguous in {r.topic}"
            run.append(xid)
    for run in runs.values():
        assert [commit_lsn[x] for x in run] == sorted(commit_lsn[x] for x in run)
    # Transaction metadata: one BEGIN and one END per transaction, in commit order.
    ends = [(int(m["id"].split(":")[0]), m["event_count"]) for m in meta if m["status"] == "END"]
    assert ends == [(o.xid, o.total) for o in committed]
    assert [m["status"] for m in meta] == ["BEGIN", "END"] * len(committed)
    # Materialized topics == source tables.
    for table, key, cols in (
        ("acct", "id", ("id", "grp", "val", "note")),
        ("ledger", "id", ("id", "acct", "amount", "memo")),
        ("kv", "k", ("k", "v")),
    ):
        topic = [r for r in reads if r.topic == p.topic(table)]
        got = materialize(topic, operator.itemgetter(key))
        want = {
            row[0]: dict(zip(cols, row, strict=True))
            for row in p.query(f"SELECT {', '.join(cols)} FROM {table}")
        }
        assert len(got) == len(want), table
        assert got == want, table


def test_exactly_once_under_sigkill(
    pg15: dict[str, Any], kafka: dict[str, Any], registry: dict[str, Any]
) -> None:
    """A seeded mixed workload (random sizes, savepoints rolled back or released,
    rolled-back transactions, upserts, one 200,000-row transaction interleaved with
    small ones) is published by `pgcdc run` (work_mem 4MB, so the big one spills) while
    the worker is SIGKILLed at a random moment, between transactions, mid spill and
    mid Kafka transaction, and restarted each time. A read_committed consumer then sees
    every committed source transaction exactly once and whole, in commit order, none of
    the aborted ones, and the topics materialized equal the source tables."""
    big_rows = 200_000
    started = time.monotonic()
    with pipeline(pg15, kafka, registry, "eo", EO_TABLES, work_mem="4MB") as p:
        kills: list[str] = []
        worker = p.start_worker()
        worker.wait_ready(90)
        until(lambda: p.last_offset() is not None, 60, "the first offset")
        wl = Workload(p, seed=20261130)
        try:
            # 1. A random moment while small transactions stream.
            bg = Background(lambda: wl.run(60, pause_s=0.05))
            time.sleep(wl.rng.uniform(0.5, 2.5))
            worker = restart(p, worker, kills, "random")
            bg.join()
            # 2. Between transactions: everything so far is committed to Kafka.
            p.wait_confirmed(wl.outcomes[-1].commit_from, 120, worker)
            worker = restart(p, worker, kills, "between")
            # 3. Mid spill: the big transaction is being decoded, spill files exist.
            bg = Background(lambda: wl.big_interleaved(big_rows, small_between=15))
            pid = worker.pid
            until(lambda: bool(p.spill_files(pid)), 120, "spill files")
            worker = restart(p, worker, kills, "mid spill")
            bg.join()
            big = next(o for o in wl.outcomes if o.total == big_rows)
            # 4. Mid Kafka transaction: part of the big transaction is in Kafka, uncommitted.
            # Counted with the worker stopped, which the kill then finds still stopped:
            # counted while it ran, the rest of the transaction was at times published
            # and committed between the count and the kill.
            base = uncommitted_count(p.kafka["bootstrap"], p.topic("ledger"))
            worker.stop_when(
                lambda: (
                    uncommitted_count(p.kafka["bootstrap"], p.topic("ledger"))
                    > base + big_rows // 4
                ),
                180,
                "the big transaction in Kafka",
            )
            worker = restart(p, worker, kills, "mid kafka txn")
            last = p.last_offset()
            assert last is not None and last.confirmed_lsn <= big.commit_from
            # 5. Another random moment, with more transactions.
            bg = Background(lambda: wl.run(60, pause_s=0.05))
            time.sleep(wl.rng.uniform(0.5, 2.0))
            worker = restart(p, worker, kills, "random")
            bg.join()
        finally:
            wl.close()
        final = wl.committed()[-1]
        p.wait_confirmed(final.commit_from, 300, worker)
        assert worker.terminate() == 0
        published = time.monotonic() - started
        reads = read_all(
            p.settings(),
            [p.topic("acct"), p.topic("ledger"), p.topic("kv"), f"{p.prefix}.transaction"],
            timeout_s=240,
        )
        assert kills == ["random", "between", "mid spill", "mid kafka txn", "random"]
        assert all(w.has_event("worker_resumed") for w in p.workers[1:])
        # The killed attempts really reached the log: besides every committed record
        # (tombstones included), the big table's topic holds a large aborted remainder
        # (the mid-Kafka-transaction kill left over a quarter of the big transaction,
        # less the few small transactions that committed meanwhile).
        ledger = sum(1 for r in reads if r.topic == p.topic("ledger"))
        aborted = uncommitted_count(p.kafka["bootstrap"], p.topic("ledger")) - ledger
        assert aborted > big_rows // 8
        assert len(wl.committed()) < len(wl.outcomes)  # some really were rolled back
        check_exactly_once(p, wl, reads)
    print(
        f"exactly-once e2e: {len(wl.outcomes)} source transactions "
        f"({len(wl.committed())} committed), {len(kills)} SIGKILLs, published in "
        f"{published:.1f}s, verified in {time.monotonic() - started:.1f}s"
    )


def test_second_worker_is_fenced_or_fences(
    pg18: dict[str, Any], kafka: dict[str, Any], registry: dict[str, Any]
) -> None:
    """Fencing, the safety net under standby mode: with `source.standby` off, a second
    `pgcdc run` with the same configuration, started while the first is publishing,
    makes one of them stop with exit code 1 and a FencedError saying another worker took
    over; the other keeps publishing, and a read_committed reader sees every committed
    transaction exactly once. (With standby on, the default, the second waits:
    tests/faults/test_standby.py.)"""
    no_standby = {"PGCDC_SOURCE__STANDBY": "false"}
    with pipeline(pg18, kafka, registry, "fence", EO_TABLES, extra_env=no_standby) as p:
        first = p.start_worker()
        first.wait_ready(90)
        until(lambda: p.last_offset() is not None, 60, "the first offset")
        wl = Workload(p, seed=7)
        try:
            bg = Background(lambda: wl.run(80, pause_s=0.05))
            time.sleep(1.0)
            second = p.start_worker()
            until(
                lambda: first.proc.poll() is not None or second.proc.poll() is not None,
                120,
                "one worker to stop",
                step=0.2,
            )
            loser, survivor = (first, second) if first.proc.poll() is not None else (second, first)
            assert loser.proc.returncode == 1, loser.tail()
            assert "FencedError" in loser.log_text() and "took over slot" in loser.log_text()
            bg.join()
        finally:
            wl.close()
        p.wait_confirmed(wl.committed()[-1].commit_from, 180, survivor)
        assert survivor.proc.poll() is None
        assert survivor.terminate() == 0
        reads = read_all(
            p.settings(),
            [p.topic("acct"), p.topic("ledger"), p.topic("kv"), f"{p.prefix}.transaction"],
        )
        check_exactly_once(p, wl, reads)
    assert loser is first  # the newcomer fences the running worker


def test_sigterm_stops_cleanly_and_resumes(
    pg15: dict[str, Any], kafka: dict[str, Any], registry: dict[str, Any]
) -> None:
    """SIGTERM mid workload: the worker exits 0 having committed what was complete; its
    offset covers exactly a prefix of the committed transactions (all of them published,
    none after it), the slot was moved to the offset's restart LSN, and a restarted
    worker publishes the rest with nothing lost or repeated."""
    with pipeline(pg15, kafka, registry, "term", EO_TABLES) as p:
        worker = p.start_worker()
        worker.wait_ready(90)
        until(lambda: p.last_offset() is not None, 60, "the first offset")
        wl = Workload(p, seed=99)
        try:
            bg = Background(lambda: wl.run(80, pause_s=0.05))
            time.sleep(1.5)
            assert worker.terminate(60) == 0, worker.tail()
            assert worker.has_event("worker_stopped")
            offset = p.last_offset()
            assert offset is not None
            slot_restart = parse_lsn(
                p.query(
                    "SELECT restart_lsn FROM pg_replication_slots WHERE slot_name = %s", (p.slot,)
                )[0][0]
            )
            assert slot_restart == offset.restart_lsn  # the final slot feedback
            reads = read_all(
                p.settings(),
                [p.topic("acct"), p.topic("ledger"), p.topic("kv"), f"{p.prefix}.transaction"],
                missing_ok=True,  # stopped 1.5 s in: a table may have had no record yet
            )
            published = {
                r.value["source"]["txId"]
                for r in reads
                if r.value is not None and "source" in r.value
            }
            done = [o for o in wl.committed() if o.xid in published]
            assert done, "nothing was published before SIGTERM"
            assert done == wl.committed()[: len(done)]  # a prefix, in commit order
            rest = wl.committed()[len(done) :]
            assert not rest or rest[0].commit_from >= offset.confirmed_lsn
            bg.join()
        finally:
            wl.close()
        worker = p.start_worker()
        assert worker.wait_ready(90)["event"] == "worker_resumed"
        p.wait_confirmed(wl.committed()[-1].commit_from, 180, worker)
        assert worker.terminate() == 0
        reads = read_all(
            p.settings(),
            [p.topic("acct"), p.topic("ledger"), p.topic("kv"), f"{p.prefix}.transaction"],
        )
        check_exactly_once(p, wl, reads)
    print(
        f"SIGTERM: slot restart_lsn {slot_restart:X}, offset restart_lsn "
        f"{offset.restart_lsn:X}, confirmed {offset.confirmed_lsn:X}; "
        f"{len(done)} of {len(wl.committed())} committed transactions published before it"
    )
