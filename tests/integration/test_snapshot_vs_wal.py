"""The initial snapshot's values against the WAL path's values for the same rows.

Rows with every type and edge value of tests/integration/test_types_vs_server.py (plus
toasted and compressed values) are inserted before a session starts; the session
aligns (decodes WAL until consistent, then reads them through `SnapshotReader`, COPY
BINARY rewritten into stored form). Then the same rows are copied with
`INSERT ... SELECT` (so the stored values are identical) and decoded from the WAL.
For every column of every row, the snapshot's `.value` (type and content, lower bounds,
NaN, -0.0, Decimal exponents) and `.text` must equal the WAL path's, and the text must
equal what the server's output function prints.
"""

from __future__ import annotations

import math
import time
import uuid
from collections.abc import Sequence
from decimal import Decimal
from pathlib import Path
from typing import Any

import psycopg2
import psycopg2.extensions
import pytest

from connectors.postgres.server import force_running_xacts
from connectors.tablesnap.reader import SnapshotReader
from service.config import FilterSettings
from service.lsn import parse_lsn
from service.output.api import ColumnValue, PluginContext, RelationInfo, RowChange, TxnInfo
from service.schema.tabledef import CatalogSnapshot
from service.types.array import PgArray
from service.types.geometric import Point
from service.types.range import Range
from service.types.unknown import UnknownTypePolicy
from tests.fixtures.services import require_features
from tests.integration.decoding_support import SegmentFeeder, aligned_session
from tests.integration.extension_cases import cases as extension_cases
from tests.integration.extension_cases import extension_ddl
from tests.integration.test_types_vs_server import (
    CASES,
    CASES_17,
    CASES_XML,
    SESSION,
    TYPES_DDL,
)

pytestmark = pytest.mark.integration

Row = dict[str, tuple[object, str | None]]

EXTRA: list[tuple[str, list[str]]] = [
    (
        "text",
        [
            "repeat('toast me ', 40000)",
            "(SELECT string_agg(md5(i::text), '') FROM generate_series(1, 3000) i)",
        ],
    ),
    ("bytea", ["decode(repeat('ab', 100000), 'hex')"]),
    ("int4[]", ["(SELECT array_agg(i) FROM generate_series(1, 5000) i)"]),
    ("jsonb", ["(SELECT jsonb_agg(i) FROM generate_series(1, 3000) i)"]),
    ("tid", ["'(1,2)'", "'(4294967295,65535)'"]),
    ("int2vector", ["'1 2 3'"]),
    ("oidvector", ["'23 25'"]),
    ("pg_lsn", ["'16/B374D848'", "'0/0'"]),
    ("xid", ["'12345'"]),
    ("xid8", ["'18446744073709551615'"]),
    ("cid", ["'7'"]),
    ("varchar", ["repeat('é', 3000)"]),
    # not decoded by pgcdc: read under decoding.unknown_types = bytes; its stored form is
    # its text, so the snapshot (which reads such a type's text) and the WAL agree
    ("opaque_t", ["'x'"]),
]


class _Collect:
    """Plugin and snapshot sink: every row as {column: (value, text)}, read eagerly."""

    def __init__(self) -> None:
        self.wal: dict[int, Row] = {}
        self.snap: dict[int, Row] = {}
        self.snap_errors: dict[tuple[int, str], str] = {}
        self.wal_errors: dict[tuple[int, str], str] = {}
        self.tables: set[str] = set()

    @staticmethod
    def _row(values: Sequence[ColumnValue], errors: dict[tuple[int, str], str]) -> tuple[int, Row]:
        key = int(str(values[0].value))
        row: Row = {}
        for col in values:
            try:
                row[col.name] = (col.value, col.text)
            except Exception as exc:  # compared between both paths
                errors[(key, col.name)] = f"{type(exc).__name__}: {exc}"
        return key, row

    # output plugin
    def begin(self, ctx: PluginContext, txn: TxnInfo) -> None:
        pass

    def change(self, ctx: PluginContext, txn: TxnInfo, change: RowChange) -> None:
        self.tables.add(change.relation.name)
        if change.relation.name != "everything":
            return  # an extension's own tables (PostGIS: spatial_ref_sys)
        assert change.new is not None
        key, row = self._row(change.new, self.wal_errors)
        self.wal[key] = row

    def commit(self, ctx: PluginContext, txn: TxnInfo, lsn: int) -> None:
        pass


class _Sink:
    """The snapshot's RowSink, into the same collector."""

    def __init__(self, out: _Collect) -> None:
        self.out = out

    def begin(self, snapshot: CatalogSnapshot, first_table: int | None) -> None:
        self.snapshot = snapshot

    def row(self, relation: RelationInfo, values: Sequence[ColumnValue]) -> None:
        if relation.name != "everything":
            return
        key, row = self.out._row(values, self.out.snap_errors)
        self.out.snap[key] = row

    def end(self) -> None:
        self.ended = True


def _same(a: object, b: object) -> bool:
    """Equal in type and content, including what == hides (NaN, -0.0, Decimal exponent,
    lower bounds)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, PgArray):
        assert isinstance(b, PgArray)
        return (
            a.lower_bounds == b.lower_bounds
            and len(a) == len(b)
            and all(_same(x, y) for x, y in zip(a, b, strict=True))
        )
    if isinstance(a, list | tuple):
        assert isinstance(b, list | tuple)
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict):
        assert isinstance(b, dict)
        return list(a) == list(b) and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, float):
        assert isinstance(b, float)
        if math.isnan(a):
            return math.isnan(b)
        return a == b and math.copysign(1, a) == math.copysign(1, b)
    if isinstance(a, Decimal):
        assert isinstance(b, Decimal)
        return a.compare_total(b) == 0
    if isinstance(a, Point):
        assert isinstance(b, Point)
        return _same(a.x, b.x) and _same(a.y, b.y)
    if isinstance(a, Range):
        assert isinstance(b, Range)
        return (
            _same(a.lower, b.lower)
            and _same(a.upper, b.upper)
            and (a.lower_inc, a.upper_inc, a.empty) == (b.lower_inc, b.upper_inc, b.empty)
        )
    return a == b and repr(a) == repr(b)


def _one(cur: Any) -> Any:
    row = cur.fetchone()
    assert row is not None
    return row[0]


@pytest.fixture
def db(pg: dict[str, Any]) -> Any:
    name = f"snapwal_{uuid.uuid4().hex[:10]}"
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


def _everything(cur: Any, cases: Sequence[tuple[str, list[str]]]) -> tuple[list[str], int]:
    """Table `everything`: a column per case (c0, c1, ...), row r holding each case's
    r-th value, and a last row of NULLs. Returns the columns and the row count."""
    cols = [f"c{i}" for i in range(len(cases))]
    cur.execute(
        "CREATE TABLE everything (id int PRIMARY KEY, "
        + ", ".join(f"{c} {t}" for c, (t, _) in zip(cols, cases, strict=True))
        + ")"
    )
    nrows = max(len(v) for _, v in cases) + 1  # the last row is all NULLs
    for r in range(nrows):
        exprs = [v[r] if r < len(v) else "NULL" for _, v in cases]
        cur.execute(f"INSERT INTO everything VALUES ({r}, {', '.join(exprs)})")
    return cols, nrows


def snapshot_and_wal(
    pg: dict[str, Any], dsn: str, cur: Any, tmp_path: Path, nrows: int, cols: list[str]
) -> tuple[_Collect, dict[int, Sequence[Any]]]:
    """Read table `everything` (rows 0..nrows-1, columns `cols`) by the initial snapshot,
    copy it to ids + 1000 and decode those from the WAL; return the collected rows and
    the server's own output text of the originals."""
    version = int(pg["version"])
    slot = f"snapwal_{uuid.uuid4().hex[:8]}"
    cur.execute("SELECT pg_create_physical_replication_slot(%s, true)", (slot,))
    try:
        cur.execute("SELECT restart_lsn FROM pg_replication_slots WHERE slot_name = %s", (slot,))
        start = parse_lsn(_one(cur))
        out = _Collect()
        reader = SnapshotReader(
            FilterSettings(), sink=_Sink(out), unknown_types=UnknownTypePolicy("bytes")
        )
        session = aligned_session(
            dsn, slot, version, start, out, reader, tmp_path, unknown_types=reader.unknown_types
        )
        feeder = SegmentFeeder(pg, cur, start)

        def catch_up() -> None:
            feeder.catch_up(session)

        try:
            # The servers are shared: a transaction of another test running at the
            # forced RUNNING_XACTS keeps the builder from consistency; force another.
            for _ in range(30):
                force_running_xacts(dsn, version)
                catch_up()
                if session.aligned:
                    break
                time.sleep(0.5)
            assert session.aligned
            assert sorted(out.snap) == list(range(nrows))
            cur.execute(
                f"INSERT INTO everything SELECT id + 1000, {', '.join(cols)} FROM everything"
            )
            catch_up()
        finally:
            session.close()
    finally:
        cur.execute("SELECT pg_drop_replication_slot(%s)", (slot,))
    assert sorted(out.wal) == [r + 1000 for r in range(nrows)]

    # The server's own output text, under the decoders' session settings.
    cur.execute(SESSION)
    query = f"SELECT id, {', '.join(cols)} FROM everything WHERE id < 1000"
    cur.execute(query + " LIMIT 0")
    raw = psycopg2.extensions.new_type(
        tuple({d.type_code for d in cur.description}), "RAW", lambda v, _c: v
    )
    psycopg2.extensions.register_type(raw, cur)
    cur.execute(query)
    server = {int(row[0]): row[1:] for row in cur.fetchall()}

    return out, server


# xml needs a build with libxml (not this pg18 one: there xml values cannot be stored).
XML_CASES: list[tuple[str, list[str]]] = [
    *[(t, v) for t, v in CASES if t.startswith("xml")],
    ("xml[]", ["ARRAY['<a>b</a>'::xml, NULL]"]),
    ("xml", ['\'<?xml version="1.0" encoding="UTF-8"?><r/>\'']),
    *CASES_XML,
]


@pytest.mark.parametrize("family", ["core", "xml"])
def test_snapshot_values_equal_wal_values(
    pg: dict[str, Any], db: Any, tmp_path: Path, family: str
) -> None:
    """Every type and edge value: the snapshot path's value and text equal the WAL
    path's for the same stored rows, and the text equals the server's output (xml's
    text is compared between the two paths only). `family` xml holds the xml cases,
    which need libxml; core all the others."""
    dsn, conn = db
    version = int(pg["version"])
    cur = conn.cursor()
    cur.execute(TYPES_DDL)
    if family == "xml":
        require_features(pg, "libxml")
        cases = list(XML_CASES)
    else:
        cases = [(t, v) for t, v in CASES + EXTRA if not t.startswith("xml")]
        if version >= 17:  # interval infinities and the jsonpath methods are new in 17
            cases.append(("interval", ["'infinity'", "'-infinity'"]))
            cases += CASES_17
    cols = [f"c{i}" for i in range(len(cases))]
    cur.execute(
        "CREATE TABLE everything (id int PRIMARY KEY, "
        + ", ".join(f"{c} {t}" for c, (t, _) in zip(cols, cases, strict=True))
        + ")"
    )
    if family == "core":  # the first EXTRA case (large text) stored out of line
        cur.execute(
            f"ALTER TABLE everything ALTER COLUMN c{cases.index(EXTRA[0])} SET STORAGE EXTERNAL"
        )
    nrows = max(len(v) for _, v in cases) + 1  # the last row is all NULLs
    for r in range(nrows):
        exprs = [v[r] if r < len(v) else "NULL" for _, v in cases]
        cur.execute(f"INSERT INTO everything VALUES ({r}, {', '.join(exprs)})")
    cur.execute("ALTER TABLE everything REPLICA IDENTITY FULL")

    out, server = snapshot_and_wal(pg, dsn, cur, tmp_path, nrows, cols)

    bad: list[str] = []
    compared = 0
    for r in range(nrows):
        snap, wal_row = out.snap[r], out.wal[r + 1000]
        for i, col in enumerate(cols):
            typ = cases[i][0]
            s_err, w_err = out.snap_errors.get((r, col)), out.wal_errors.get((r + 1000, col))
            if s_err or w_err:
                if s_err != w_err and (s_err or "").split(":")[0] != (w_err or "").split(":")[0]:
                    bad.append(f"{typ} row {r}: snapshot {s_err}, WAL {w_err}")
                continue
            (sv, st), (wv, wt) = snap[col], wal_row[col]
            compared += 1
            if not _same(sv, wv):
                bad.append(f"{typ} row {r}: value snapshot {sv!r} != WAL {wv!r}")
            if st != wt:
                bad.append(f"{typ} row {r}: text snapshot {st!r} != WAL {wt!r}")
            if typ == "opaque_t":  # bytes: here the stored form is the server's text
                if server[r][i] is not None and sv != server[r][i].encode():
                    bad.append(f"{typ} row {r}: bytes {sv!r} != server {server[r][i]!r}")
                continue
            if not typ.startswith("xml") and st != server[r][i]:
                bad.append(f"{typ} row {r}: text snapshot {st!r} != server {server[r][i]!r}")
    assert not bad, "\n".join(bad[:40])
    # Every case value (NULLs included) was compared; none raises (opaque_t: bytes).
    assert compared >= sum(len(v) for _, v in cases)
    print(f"\nPostgreSQL {version} {family}: {compared} values compared snapshot vs WAL")
    assert not out.snap_errors and not out.wal_errors


def test_extension_snapshot_values_equal_wal_values(
    pg: dict[str, Any], db: Any, tmp_path: Path
) -> None:
    """Every extension type the build has (hstore, ltree/lquery, citext, isn, cube, earth,
    seg, PostGIS, pgvector), arrays and TOASTed values included: the snapshot's value and
    text equal the WAL's for the same stored rows, and the text equals the server's."""
    dsn, conn = db
    cur = conn.cursor()
    cur.execute(extension_ddl(pg))
    cases = extension_cases(pg)
    cols, nrows = _everything(cur, cases)
    out, server = snapshot_and_wal(pg, dsn, cur, tmp_path, nrows, cols)
    bad: list[str] = []
    compared = 0
    for r in range(nrows):
        snap, wal_row = out.snap[r], out.wal[r + 1000]
        for i, col in enumerate(cols):
            typ = cases[i][0]
            s_err, w_err = out.snap_errors.get((r, col)), out.wal_errors.get((r + 1000, col))
            if s_err or w_err:
                bad.append(f"{typ} row {r}: snapshot {s_err}, WAL {w_err}")
                continue
            (sv, st), (wv, wt) = snap[col], wal_row[col]
            compared += 1
            if not _same(sv, wv):
                bad.append(f"{typ} row {r}: value snapshot {sv!r:.200} != WAL {wv!r:.200}")
            if st != wt:
                bad.append(f"{typ} row {r}: text snapshot {st!r:.200} != WAL {wt!r:.200}")
            if st != server[r][i]:
                bad.append(f"{typ} row {r}: text {st!r:.200} != server {server[r][i]!r:.200}")
    assert not bad, "\n".join(bad[:40])
    assert compared == len(cols) * nrows


def test_composites_of_text_read_fields_snapshot_as_their_text(
    pg: dict[str, Any], db: Any, tmp_path: Path
) -> None:
    """A composite with a field the snapshot cannot rewrite from its send form (a reg*
    type, aclitem, which has no send function, jsonpath), nested too: read as `::text`,
    its snapshot text equals the WAL path's and the server's record_out, and its value is
    that text (both plugins publish a composite as its text). Before, the snapshot of
    such a table stopped with "has no send form the snapshot can read"."""
    dsn, conn = db
    cur = conn.cursor()
    cur.execute(
        "CREATE TYPE c_named AS (r regclass, t regtype, a aclitem, j jsonpath, n int);"
        "CREATE TYPE c_outer AS (inner_v c_named, label text)"
    )
    cases: list[tuple[str, list[str]]] = [
        (
            "c_named",
            [
                "ROW('pg_class'::regclass, 'int4'::regtype, 'postgres=arw/postgres', "
                "'$.a[*] ? (@ > 1)', 7)::c_named",
                "ROW(NULL, 'text[]'::regtype, NULL, '$', NULL)::c_named",
            ],
        ),
        (
            "c_outer",
            [
                "ROW(ROW('pg_type'::regclass, 'bool'::regtype, '=r/postgres', '$.x', 1),"
                " 'a \"quoted\" label')::c_outer"
            ],
        ),
    ]
    cols, nrows = _everything(cur, cases)
    out, server = snapshot_and_wal(pg, dsn, cur, tmp_path, nrows, cols)
    assert not out.snap_errors and not out.wal_errors, (out.snap_errors, out.wal_errors)
    compared = 0
    for r in range(nrows):
        snap, wal_row = out.snap[r], out.wal[r + 1000]
        for i, col in enumerate(cols):
            (sv, st), (_wv, wt) = snap[col], wal_row[col]
            assert st == wt == server[r][i], (cases[i][0], r, st, wt, server[r][i])
            assert sv == st, (cases[i][0], r, sv, st)
            compared += st is not None
    assert compared == 3
