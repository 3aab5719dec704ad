"""Unchanged TOAST values filled end to end (issue 32): real PostgreSQL -> `pgcdc run`
-> real Kafka + registry, read back as a consumer does.

Rows with 5-100 KB text and jsonb values (uncompressed and pglz-compressed out of line)
are written before the worker starts, so their chunks are not in the WAL pgcdc reads;
UPDATEs of another column then log only the TOAST pointers. Checked:
- the after-image carries the full values, equal to a SELECT at that moment (and in a
  transaction that also replaces one of the values: the new one from the WAL, the other
  filled);
- the same when, before pgcdc reads that UPDATE (the worker is paused), later
  transactions replace a value and delete a row, and VACUUM runs: the earlier event
  still carries the earlier values, read from chunks the slot's xmin kept (the TOAST
  table no longer shows them to a query);
- with `toast.max_hold_s` exceeded on purpose: the hold is released, VACUUM removes the
  deleted row's chunks, and that row's UPDATE event carries the placeholder, counted in
  pgcdc_toast_placeholders_total and logged as toast_placeholder with table and LSN;
  every other event and value is there;
- a VACUUM right after a restart (the hold starts before any WAL is read) keeps what
  the backlog's events need;
- under the shipped least-privilege role (deploy/postgres/init/01-pgcdc.sh, then
  `pgcdc setup --worker-role`), a value replaced and a row deleted before the worker
  reads the UPDATE are filled through pgcdc.toast_chunks.
On PG15 and PG18 (`pg_ends`): the fill is the worker's SQL, the same on every major, and
the decoding under it is proven on all four by the differential tests.
"""

from __future__ import annotations

import json
import os
import signal
import time
import urllib.request
from collections.abc import Iterator
from typing import Any

import psycopg2
import pytest

from connectors.postgres.setup import setup
from tests.fixtures.worker_role import drop_role, init_script_role
from tests.integration.pipeline_kafka_support import Pipeline, insert_lsn, pipeline, read_all

pytestmark = pytest.mark.integration

PLACEHOLDER = "__debezium_unavailable_value"
SIZES_KB = {1: 5, 2: 12, 3: 30, 4: 60, 5: 100}

DDL = [
    "CREATE EXTENSION IF NOT EXISTS pageinspect",
    "CREATE TABLE docs (id int PRIMARY KEY, n int NOT NULL, t text, j jsonb)",
    # Random hex: stored out of line uncompressed; for even ids, half of it repeated:
    # pglz-compressed out of line.
    *(
        f"""INSERT INTO docs SELECT {i}, 0, v, jsonb_build_object('id', {i}, 'doc', v,
              'parts', (SELECT jsonb_agg(md5(g::text || 'p{i}')) FROM generate_series(1, 40) g))
            FROM (SELECT string_agg({unit}, '') AS v
                  FROM generate_series(1, {kb * 1024 // (64 if i % 2 == 0 else 32)}) g) s"""
        for i, kb in SIZES_KB.items()
        for unit in [
            "md5(g::text || 'x') || repeat('y', 32)"
            if i % 2 == 0
            else "md5(g::text || random()::text)"
        ]
    ),
]


@pytest.fixture
def docs(
    pg_ends: dict[str, Any], kafka: dict[str, Any], registry: dict[str, Any]
) -> Iterator[Pipeline]:
    """A pipeline whose `docs` rows (and their TOAST chunks) predate the worker."""
    with pipeline(pg_ends, kafka, registry, "toastfill", DDL) as p:
        for row_id in SIZES_KB:  # every t and j is stored out of line (a TOAST pointer)
            assert len(value_ids(p, row_id)) == 2
        yield p


def snapshot_values(p: Pipeline) -> dict[int, tuple[str, str]]:
    """id -> (t, j as jsonb prints it), as a SELECT sees them now."""
    return {int(r[0]): (r[1], r[2]) for r in p.query("SELECT id, t, j::text FROM docs")}


def updates(p: Pipeline, since_offset: int = 0) -> list[dict[str, Any]]:
    """The committed 'u' events of docs (values deserialized), in topic order."""
    recs = read_all(p.settings(), [p.topic("docs")])
    return [r.value for r in recs if r.value is not None and r.value["op"] == "u"][since_offset:]


def slot_xmin(p: Pipeline) -> int | None:
    rows = p.query("SELECT xmin::text FROM pg_replication_slots WHERE slot_name = %s", (p.slot,))
    return int(rows[0][0]) if rows and rows[0][0] is not None else None


def xmin_after_stop(p: Pipeline) -> int | None:
    """The slot's xmin once its walsender has let it go: the worker's last feedback
    (xmin 0) is read by the walsender before the connection's end, but the worker's
    exit does not wait for that, so the slot is read only once it is inactive."""
    wait_for(
        "the slot released",
        lambda: p.query(
            "SELECT NOT active FROM pg_replication_slots WHERE slot_name = %s", (p.slot,)
        )[0][0],
        30,
    )
    return slot_xmin(p)


def wait_for(what: str, check: Any, timeout: float = 60.0) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = check()
        if got:
            return got
        time.sleep(0.25)
    raise AssertionError(f"{what}: not within {timeout}s")


def stored_chunks(p: Pipeline, valueid: int) -> int:
    """Chunks of `valueid` physically in docs' TOAST table (pageinspect), visible or not."""
    (toast,) = p.query("SELECT reltoastrelid FROM pg_class WHERE oid = 'docs'::regclass")[0]
    rows = p.query(
        """SELECT count(*) FROM generate_series(0, (pg_relation_size(%s::oid::regclass)
                 / current_setting('block_size')::int)::int - 1) b,
             LATERAL heap_page_items(get_raw_page(%s::oid::regclass::text, b)) i
           WHERE i.lp_flags = 1 AND substring(i.t_data FROM 1 FOR 4) = %s""",
        (int(toast), int(toast), psycopg2.Binary(valueid.to_bytes(4, "little"))),
    )
    return int(rows[0][0])


def visible_chunks(p: Pipeline, valueid: int) -> int:
    (toast,) = p.query(
        "SELECT reltoastrelid::regclass::text FROM pg_class WHERE oid = 'docs'::regclass"
    )[0]
    return int(p.query(f"SELECT count(*) FROM {toast} WHERE chunk_id = %s", (valueid,))[0][0])


def value_ids(p: Pipeline, row_id: int) -> list[int]:
    """The TOAST value ids (va_valueid) of row `row_id`'s t and j, read off the stored
    pointers (pageinspect: t_attrs of the row's live tuple)."""
    (attrs,) = p.query(
        """SELECT i.t_attrs FROM docs d,
             LATERAL heap_page_item_attrs(
                 get_raw_page('docs', (d.ctid::text::point)[0]::int), 'docs'::regclass) i
           WHERE d.id = %s AND i.lp = (d.ctid::text::point)[1]::int""",
        (row_id,),
    )[0]
    out = []
    for raw in attrs[2:4]:  # t, j
        blob = bytes(raw)
        assert blob[:2] == b"\x01\x12", f"row {row_id}: not a TOAST pointer: {blob[:2]!r}"
        out.append(int.from_bytes(blob[10:14], "little"))
    return out


def metrics_value(port: int, name: str, table: str) -> float:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as resp:
        text = resp.read().decode()
    total = 0.0
    for line in text.splitlines():
        if line.startswith(name + "{") and f'table="{table}"' in line:
            total += float(line.rsplit(" ", 1)[1])
    return total


@pytest.mark.parametrize("impl", ["python", "native"])
def test_unchanged_values_are_filled_equal_to_select(docs: Pipeline, impl: str) -> None:
    """UPDATE of another column: every after-image carries t and j whole, equal to a
    SELECT right after; in a transaction that also replaces j of one row, that row's
    new j (from the WAL) and unchanged t (filled) are both right. No placeholder. With
    either implementation (PGCDC_IMPL) in the worker. A clean stop clears the hold."""
    p = docs
    p.extra_env["PGCDC_IMPL"] = impl
    worker = p.start_worker()
    worker.wait_ready()
    # Row 3's old j is replaced by the same transaction: only the hold keeps its chunks
    # from being pruned before the worker reads them.
    wait_for("the slot's xmin hold", lambda: slot_xmin(p))
    conn = p.connect()
    conn.autocommit = False
    with conn.cursor() as cur:
        cur.execute("UPDATE docs SET n = n + 1")
        cur.execute(
            "UPDATE docs SET n = n + 1, j = jsonb_build_object('new', (SELECT string_agg("
            "md5(g::text || 'new'), '') FROM generate_series(1, 300) g)) WHERE id = 3"
        )
    conn.commit()
    expected = snapshot_values(p)
    with conn.cursor() as cur:
        end = insert_lsn(cur)
    conn.close()
    p.wait_confirmed(end - 1, 120, worker)
    got = updates(p)
    assert len(got) == 6
    last = {ev["after"]["id"]: ev["after"] for ev in got}
    for row_id, (t, j) in expected.items():
        assert len(t) >= SIZES_KB[row_id] * 1024
        assert last[row_id]["t"] == t, row_id
        assert json.loads(last[row_id]["j"]) == json.loads(j), row_id
    holes = [
        (ev["after"]["id"], k) for ev in got for k, v in ev["after"].items() if v == PLACEHOLDER
    ]
    assert not holes, holes
    assert not worker.has_event("toast_placeholder")
    assert worker.terminate() == 0
    assert xmin_after_stop(p) is None  # a clean stop leaves no hold on the slot


def test_earlier_event_keeps_earlier_values_across_vacuum_change_and_delete(
    docs: Pipeline,
) -> None:
    """While the worker is paused behind it: an UPDATE of n, then later transactions
    replace row 1's t and delete row 2, and VACUUM runs (again while the worker
    resumes). The UPDATE's events carry the values as of the UPDATE, read from chunks
    the slot's xmin kept stored though no query sees them any more."""
    p = docs
    worker = p.start_worker()
    worker.wait_ready()
    wait_for("the slot's xmin hold", lambda: slot_xmin(p))
    before = snapshot_values(p)
    ids1, ids2 = value_ids(p, 1), value_ids(p, 2)
    os.kill(worker.pid, signal.SIGSTOP)
    try:
        p.execute("UPDATE docs SET n = n + 1")
        p.execute("UPDATE docs SET t = 'short now' WHERE id = 1")
        p.execute("DELETE FROM docs WHERE id = 2")
        p.execute("VACUUM docs")
        # The old values are invisible to queries, yet still stored (held back).
        for vid in (ids1[0], *ids2):
            assert visible_chunks(p, vid) == 0, vid
            assert stored_chunks(p, vid) > 0, vid
        conn = p.connect()
        with conn.cursor() as cur:
            end = insert_lsn(cur)
        conn.close()
    finally:
        os.kill(worker.pid, signal.SIGCONT)
    vacuum = psycopg2.connect(p.dsn)
    vacuum.autocommit = True
    with vacuum.cursor() as cur:
        cur.execute("VACUUM docs")  # concurrent with the worker's reads
    vacuum.close()
    p.wait_confirmed(end - 1, 120, worker)
    got = updates(p)
    assert len(got) == 6  # five of n, one of row 1's t
    first = {ev["after"]["id"]: ev["after"] for ev in got[:5]}
    for row_id, (t, j) in before.items():
        assert first[row_id]["t"] == t, row_id
        assert json.loads(first[row_id]["j"]) == json.loads(j), row_id
    assert got[5]["after"]["t"] == "short now"
    assert json.loads(got[5]["after"]["j"]) == json.loads(before[1][1])
    assert not worker.has_event("toast_placeholder")


def test_hold_past_its_cap_gives_a_counted_logged_placeholder(
    docs: Pipeline,
) -> None:
    """toast.max_hold_s = 1: the hold is released (logged), VACUUM removes the chunks of
    the row deleted after the UPDATE, and that row's UPDATE event carries the
    placeholder for t and j: counted per table and logged with the table and LSN.
    Every other row's event is there, filled."""
    p = docs
    p.extra_env["PGCDC_TOAST__MAX_HOLD_S"] = "1"
    worker = p.start_worker()
    worker.wait_ready()
    port = int(worker.wait_event({"metrics_serving"}, 30)["port"])
    worker.wait_event({"toast_hold_released"}, 60)
    before = snapshot_values(p)
    gone = value_ids(p, 4)
    for _ in range(20):  # pause the worker at a moment it holds nothing
        wait_for("the hold released", lambda: slot_xmin(p) is None)
        os.kill(worker.pid, signal.SIGSTOP)
        if slot_xmin(p) is None:
            break
        os.kill(worker.pid, signal.SIGCONT)
    else:
        raise AssertionError("the worker kept holding an xmin")
    try:
        p.execute("UPDATE docs SET n = n + 1")
        p.execute("DELETE FROM docs WHERE id = 4")

        def vacuumed() -> bool:
            p.execute("VACUUM docs")
            return all(stored_chunks(p, vid) == 0 for vid in gone)

        wait_for("VACUUM removing row 4's chunks", vacuumed, 30)
        conn = p.connect()
        with conn.cursor() as cur:
            end = insert_lsn(cur)
        conn.close()
    finally:
        os.kill(worker.pid, signal.SIGCONT)
    p.wait_confirmed(end - 1, 120, worker)
    got = updates(p)
    assert len(got) == 5
    after = {ev["after"]["id"]: ev["after"] for ev in got}
    assert (after[4]["t"], after[4]["j"]) == (PLACEHOLDER, PLACEHOLDER)
    for row_id in (1, 2, 3, 5):
        assert after[row_id]["t"] == before[row_id][0], row_id
        assert json.loads(after[row_id]["j"]) == json.loads(before[row_id][1]), row_id
    logged = [e for e in worker.events() if e.get("event") == "toast_placeholder"]
    assert len(logged) == 2 and {e["table"] for e in logged} == {"public.docs"}
    assert all(e["lsn"] == logged[0]["lsn"] and e["lsn"].count("/") == 1 for e in logged)
    wait_for(
        "pgcdc_toast_placeholders_total at 2",
        lambda: metrics_value(port, "pgcdc_toast_placeholders_total", "public.docs") == 2,
        30,
    )


def test_a_vacuum_right_after_start_keeps_what_the_backlog_needs(docs: Pipeline) -> None:
    """The hold starts before the worker reads any WAL, not at the first RUNNING_XACTS:
    after a clean stop (which clears the hold), an UPDATE of n and then a transaction
    replacing row 1's t are committed; the worker starts, and the moment the slot holds
    an xmin it is paused and VACUUM runs. Row 1's old chunks stay stored, and the
    UPDATE's events carry the values as of the UPDATE, no placeholder."""
    p = docs
    worker = p.start_worker()
    worker.wait_ready()
    worker.wait_event({"snapshot_committed"}, 60)  # the restart below resumes, no snapshot
    wait_for("the slot's xmin hold", lambda: slot_xmin(p))
    assert worker.terminate() == 0
    assert xmin_after_stop(p) is None
    before = snapshot_values(p)
    replaced = value_ids(p, 1)[0]
    p.execute("UPDATE docs SET n = n + 1")
    p.execute("UPDATE docs SET t = 'short now' WHERE id = 1")
    conn = p.connect()
    with conn.cursor() as cur:
        end = insert_lsn(cur)
    conn.close()
    assert stored_chunks(p, replaced) > 0
    worker = p.start_worker()
    wait_for("the slot's xmin hold at start", lambda: slot_xmin(p), 60)
    os.kill(worker.pid, signal.SIGSTOP)
    try:
        p.execute("VACUUM docs")
        assert visible_chunks(p, replaced) == 0
        assert stored_chunks(p, replaced) > 0
    finally:
        os.kill(worker.pid, signal.SIGCONT)
    p.wait_confirmed(end - 1, 120, worker)
    got = updates(p)
    assert len(got) == 6  # five of n, one of row 1's t
    first = {ev["after"]["id"]: ev["after"] for ev in got[:5]}
    for row_id, (t, j) in before.items():
        assert first[row_id]["t"] == t, row_id
        assert json.loads(first[row_id]["j"]) == json.loads(j), row_id
    assert got[5]["after"]["t"] == "short now"
    assert not worker.has_event("toast_placeholder")


@pytest.fixture
def role_docs(docs: Pipeline) -> Iterator[Pipeline]:
    """`docs`, with the worker run as the shipped least-privilege role (made by the
    init script in the pipeline's database; `pgcdc setup --worker-role` run for it)."""
    role = f"{docs.name}_w"
    init_script_role(docs.pg, docs.db, role, "pw")
    try:
        setup(docs.dsn, docs.slot, worker_role=role)
        docs.extra_env.update(PGCDC_SOURCE__USER=role, PGCDC_SOURCE__PASSWORD="pw")
        yield docs
    finally:
        for w in docs.workers:
            w.kill()
        docs.execute(f"DROP OWNED BY {role}")  # its grants in the pipeline's database
        drop_role(docs.pg, role)


def test_least_privilege_role_fills_values_replaced_before_it_reads_them(
    role_docs: Pipeline,
) -> None:
    """Under the init script's role (no superuser, no pageinspect of its own), while
    the worker is paused behind an UPDATE of n, later transactions replace row 1's t
    and delete row 2, and VACUUM runs: the UPDATE's events carry the earlier values,
    read through pgcdc.toast_chunks; no placeholder, no toast_fill_denied."""
    p = role_docs
    worker = p.start_worker()
    worker.wait_ready()
    wait_for("the slot's xmin hold", lambda: slot_xmin(p))
    before = snapshot_values(p)
    os.kill(worker.pid, signal.SIGSTOP)
    try:
        p.execute("UPDATE docs SET n = n + 1")
        p.execute("UPDATE docs SET t = 'short now' WHERE id = 1")
        p.execute("DELETE FROM docs WHERE id = 2")
        p.execute("VACUUM docs")
        conn = p.connect()
        with conn.cursor() as cur:
            end = insert_lsn(cur)
        conn.close()
    finally:
        os.kill(worker.pid, signal.SIGCONT)
    p.wait_confirmed(end - 1, 120, worker)
    got = updates(p)
    assert len(got) == 6  # five of n, one of row 1's t
    first = {ev["after"]["id"]: ev["after"] for ev in got[:5]}
    for row_id, (t, j) in before.items():
        assert first[row_id]["t"] == t, row_id
        assert json.loads(first[row_id]["j"]) == json.loads(j), row_id
    assert not worker.has_event("toast_placeholder")
    assert not worker.has_event("toast_fill_denied")
