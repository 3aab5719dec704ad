"""The shared-snapshot reader's values against the proven snapshot path's, in one snapshot.

The default initial snapshot reads chunks through `SharedSnapshotReader`
(connectors.tablesnap.chunks) in a transaction that imported the aligned snapshot.
Rows with every type and edge value of test_snapshot_vs_wal (whose `SnapshotReader`
values are proven equal to the WAL path's and to the server's output text) are read
both ways in the same snapshot: `SnapshotReader` inside the exporting transaction,
the shared reader after that transaction ended, as one chunk and as chunks of three
rows planned in the shared snapshot. Every column's value (type and content) and text,
and every decoding error, must be the same; a row inserted after the export is not seen.
"""

from __future__ import annotations

import uuid
from typing import Any

import psycopg2
import pytest

from connectors.postgres.catalog import Catalog
from connectors.tablesnap.chunks import ChunkSpec, SharedSnapshotReader
from connectors.tablesnap.reader import SnapshotReader
from service.config import FilterSettings
from service.schema.tabledef import CatalogSnapshot
from service.types.unknown import UnknownTypePolicy
from tests.integration.test_snapshot_vs_wal import EXTRA, Row, _Collect, _same, _Sink
from tests.integration.test_types_vs_server import CASES, CASES_17, TYPES_DDL

pytestmark = pytest.mark.integration


@pytest.fixture
def exportdb(pg: dict[str, Any]) -> Any:
    name = f"snapexp_{uuid.uuid4().hex[:10]}"
    admin = psycopg2.connect(pg["dsn"])
    admin.autocommit = True
    admin.cursor().execute(f"CREATE DATABASE {name} TEMPLATE template0 ENCODING 'UTF8' LOCALE 'C'")
    dsn = pg["dsn"].replace("dbname=postgres", f"dbname={name}")
    conn = psycopg2.connect(dsn)
    conn.autocommit = True
    yield dsn, conn
    conn.close()
    admin.cursor().execute(f"DROP DATABASE {name} WITH (FORCE)")
    admin.close()


def test_shared_snapshot_values_equal_snapshot_reader(
    pg: dict[str, Any], exportdb: tuple[str, Any]
) -> None:
    dsn, conn = exportdb
    version = int(pg["version"])
    cur = conn.cursor()
    cur.execute(TYPES_DDL)
    cases = [(t, v) for t, v in CASES + EXTRA if not t.startswith("xml")]
    if version >= 17:
        cases.append(("interval", ["'infinity'", "'-infinity'"]))
        cases += CASES_17
    cols = [f"c{i}" for i in range(len(cases))]
    cur.execute(
        "CREATE TABLE everything (id int PRIMARY KEY, "
        + ", ".join(f"{c} {t}" for c, (t, _) in zip(cols, cases, strict=True))
        + ")"
    )
    cur.execute(
        f"ALTER TABLE everything ALTER COLUMN c{cases.index(EXTRA[0])} SET STORAGE EXTERNAL"
    )
    nrows = max(len(v) for _, v in cases) + 1  # the last row is all NULLs
    for r in range(nrows):
        exprs = [v[r] if r < len(v) else "NULL" for _, v in cases]
        cur.execute(f"INSERT INTO everything VALUES ({r}, {', '.join(exprs)})")

    out = _Collect()
    shared: list[SharedSnapshotReader] = []

    def inside(cursor: Any, snapshot: CatalogSnapshot) -> None:
        cursor.execute("SELECT pg_catalog.pg_export_snapshot()")
        # opaque_t (a type pgcdc cannot decode) is read as test_snapshot_vs_wal reads it
        reader = SharedSnapshotReader(
            dsn,
            FilterSettings(),
            snapshot,
            str(cursor.fetchone()[0]),
            unknown_types=UnknownTypePolicy("bytes"),
        )
        reader.import_snapshot()
        shared.append(reader)
        SnapshotReader(FilterSettings(), sink=_Sink(out), unknown_types=UnknownTypePolicy("bytes"))(
            cursor, snapshot
        )

    catalog = Catalog(dsn)
    try:
        snapshot = catalog.snapshot(inside=inside)
    finally:
        catalog.close()
    (reader,) = shared
    try:
        # After the export (and after its exporter ended): in no reader's snapshot.
        cur.execute("INSERT INTO everything (id) VALUES (100000)")
        (oid,) = [t.oid for t in snapshot.tables if t.name == "everything"]
        whole = reader.read_shared(
            ChunkSpec(oid, "public.everything", True, None, None), rows=10**6, max_bytes=1 << 30
        )
        plan = reader.describe(oid)
        assert plan is not None
        chunked: list[list[bytes | None]] = []
        lo: tuple[str, ...] | None = None
        reads = 0
        while True:
            hi = reader.plan_key_bound(plan, lo, 3, None)
            part = reader.read_shared(
                ChunkSpec(oid, "public.everything", True, lo, hi), rows=3, max_bytes=1 << 30
            )
            chunked.extend(part.rows)
            reads += 1
            if hi is None:
                break
            lo = hi
        assert reads == -(-nrows // 3)  # ceil: no empty chunk after an exact limit
        errors: dict[tuple[int, str], str] = {}
        got: dict[int, Row] = {}
        for fields in whole.rows:
            key, row = out._row(whole.values(fields), errors)
            got[key] = row
        chunk_errors: dict[tuple[int, str], str] = {}
        got_chunked = dict(out._row(whole.values(f), chunk_errors) for f in chunked)
    finally:
        reader.close()

    assert sorted(out.snap) == list(range(nrows))
    assert sorted(got) == sorted(got_chunked) == list(range(nrows))  # not the later row
    assert errors == chunk_errors == out.snap_errors
    bad: list[str] = []
    compared = 0
    for r in range(nrows):
        for i, col in enumerate(cols):
            if (r, col) in errors:
                continue
            (sv, st), (gv, gt), (cv, ct) = out.snap[r][col], got[r][col], got_chunked[r][col]
            compared += 1
            if not (_same(sv, gv) and _same(sv, cv)):
                bad.append(f"{cases[i][0]} row {r}: value {sv!r} != shared {gv!r} / {cv!r}")
            if not st == gt == ct:
                bad.append(f"{cases[i][0]} row {r}: text {st!r} != shared {gt!r} / {ct!r}")
    assert not bad, "\n".join(bad[:40])
    assert compared >= sum(len(v) for _, v in cases) - 1
    print(f"\nPostgreSQL {version}: {compared} values compared, shared snapshot vs SnapshotReader")
