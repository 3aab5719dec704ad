"""Helpers of the chunked-snapshot tests: a writer, the DBLog replay, the read count.

`replay` applies a table topic's events per key in topic order, as a materializing
consumer does (r/c/u set the row, d removes it) and reports every key read (op r)
more than once. `reads_after_commit` walks the logs of successive workers in order and
reports every chunk read that starts where an already committed chunk starts: a
committed chunk read again.
"""

from __future__ import annotations

import random
import threading
import time
from typing import Any

from tests.integration.avro_kafka_support import Read
from tests.integration.pipeline_kafka_support import Pipeline, WorkerProcess


class Writer(threading.Thread):
    """Small random insert/update/delete transactions on keyed tables until `stop`."""

    def __init__(
        self, p: Pipeline, tables: dict[str, int], seed: int = 11, pause_s: float = 0.003
    ) -> None:
        super().__init__(daemon=True)
        self.pause_s = pause_s  # between transactions
        self.p = p
        self.tables = tables  # name -> highest existing id
        self.stop = threading.Event()
        self.commits = 0
        self.error: BaseException | None = None
        self.seed = seed

    def run(self) -> None:
        rnd = random.Random(self.seed)
        conn = self.p.connect()
        conn.autocommit = False
        cur = conn.cursor()
        next_id = 10_000_000
        names = sorted(self.tables)
        try:
            while not self.stop.is_set():
                for _ in range(rnd.randint(1, 4)):
                    table = rnd.choice(names)
                    top = self.tables[table]
                    op = rnd.random()
                    if op < 0.3:
                        next_id += 1
                        cur.execute(f"INSERT INTO {table} VALUES (%s, 0, 'new')", (next_id,))
                    elif op < 0.8:
                        key = rnd.choice([rnd.randint(1, top), rnd.randint(1, top), next_id])
                        cur.execute(
                            f"UPDATE {table} SET v = v + 1, note = 'upd' WHERE id = %s", (key,)
                        )
                    else:
                        cur.execute(f"DELETE FROM {table} WHERE id = %s", (rnd.randint(1, top),))
                conn.commit()
                self.commits += 1
                time.sleep(self.pause_s)
        except BaseException as exc:  # reported by the test
            self.error = exc
        finally:
            conn.close()


def replay(reads: list[Read]) -> tuple[dict[Any, dict[str, Any]], list[Any], int]:
    """(state per key, keys read twice, number of r events)."""
    state: dict[Any, dict[str, Any]] = {}
    read: set[Any] = set()
    twice: list[Any] = []
    nr = 0
    for rec in reads:
        if rec.value is None:
            continue
        op = rec.value["op"]
        row = rec.value["after"] if op != "d" else rec.value["before"]
        key = row["id"]
        if op == "d":
            state.pop(key, None)
            continue
        if op == "r":
            nr += 1
            if key in read:
                twice.append(key)
            read.add(key)
        state[key] = row
    return state, twice, nr


def reads_after_commit(workers: list[WorkerProcess]) -> tuple[list[str], int, int]:
    """(chunks read again after their commit, reads, commits) over the workers' logs."""
    committed: set[tuple[str, str]] = set()
    again: list[str] = []
    reads = commits = 0
    for w in workers:
        for e in w.events():
            name = e.get("event")
            if name == "snapshot_chunk_committed":
                commits += 1
                committed.add((e["table"], repr(e["bounds"][0])))
            elif name == "snapshot_chunk_read":
                reads += 1
                key = (e["table"], repr(e["bounds"][0]))
                if key in committed:
                    again.append(f"{key} read again by worker {workers.index(w)}")
    return again, reads, commits
