"""Columns added with ADD COLUMN ... DEFAULT, read from tuples written before them.

Such a tuple has fewer attributes than the table; PostgreSQL fills the rest from
`pg_attribute.attmissingval` (getmissingattr). The row decoder must give, for those
columns, the very value and text a stored copy of the default decodes to.

Rows are inserted, then one column per type and edge value of
tests/integration/test_types_vs_server.py (plus domains, arrays of text-like types,
quotes and spaces) is added with that value as its default, so the old rows hold none
of them (checked: `atthasmissing`). A session then decodes, from the WAL, an UPDATE of
an old row and a DELETE of another (REPLICA IDENTITY FULL: their old tuples are the
short stored tuples) and an INSERT of a copy of the updated row (all values stored).
For every column: the old tuples' `.value` equals the stored copy's in type and
content, their `.text` equals it too and equals what the server prints; a type pgcdc
does not decode raises the same error on both. A second test adds the columns while the
session runs, with pgcdc's DDL capture installed, so the definitions come from the DDL
messages (and a column is added, and its default changed, twice).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator, Sequence
from decimal import Decimal
from pathlib import Path
from typing import Any

import psycopg2
import psycopg2.extensions
import pytest

from connectors.postgres.archive import detect_segment_size, iter_wal_chunks
from connectors.postgres.server import force_running_xacts
from connectors.postgres.setup import setup, teardown
from connectors.tablesnap.reader import SnapshotReader
from service.app.session import Session, SessionConfig
from service.config import FilterSettings
from service.lsn import parse_lsn
from service.output.api import (
    ChangeOp,
    ColumnValue,
    PluginContext,
    RelationInfo,
    RowChange,
    TxnInfo,
)
from service.schema.tabledef import CatalogSnapshot
from service.types.unknown import UnknownTypePolicy
from tests.fixtures.services import require_features
from tests.integration.test_snapshot_vs_wal import _same
from tests.integration.test_types_vs_server import CASES, SESSION, TYPES_DDL

pytestmark = pytest.mark.integration

EXTRA_DDL = """
CREATE DOMAIN plainint AS int;
CREATE DOMAIN intarr AS int[];
CREATE DOMAIN jdom AS jsonb;
CREATE DOMAIN numdom AS numeric(8,2);
"""

EXTRA: list[tuple[str, list[str]]] = [
    (
        "text",
        [
            "'a b'",
            "'with \"double\" and ''single'' quotes'",
            "'back\\slash \\\" end'",
            "' lead and trail '",
            "'{x,y}'",
            "'NULL'",
            "'\"'",
        ],
    ),
    ("varchar", ["'{}'", "'a,b'"]),
    ("plainint", ["7", "-1"]),
    ("intarr", ["'{1,NULL,3}'", "'[2:3]={4,5}'"]),
    ("jdom", ['\'{"k": [1, "a b"]}\'']),
    ("numdom", ["1.5", "-999999.99"]),
    ("mytext[]", ["'{a,\"b c\",NULL}'"]),
    ("json[]", ['ARRAY[\'{"a b": "c\\"d"}\'::json, NULL]']),
    ("shorttext[]", ["'{\"x y\",z}'"]),
    ("tid", ["'(1,2)'"]),
    ("int2vector", ["'1 2 3'"]),
    ("oidvector", ["'23 25'"]),
    ("pg_lsn", ["'16/B374D848'"]),
    ("xid8", ["'18446744073709551615'"]),
    # not decoded by pgcdc: read under decoding.unknown_types = bytes (its stored form
    # is its text, so the old tuple's default, read as text, equals the stored copy)
    ("opaque_t", ["'x'"]),
    # reg* defaults whose text does not read back as the OID: OID 0 (`-`) and an
    # overloaded operator (regoper prints `pg_catalog.+`, which regoperin finds ambiguous)
    ("regclass", ["'-'", "0"]),
    ("regproc", ["'-'"]),
    ("regoper", ["'+(int4,int4)'::regoperator::oid", "0"]),
    ("regnamespace", ["0"]),
]

Values = dict[str, tuple[object, str | None] | str]  # column -> (value, text) or error


def _read(values: Sequence[ColumnValue]) -> Values:
    out: Values = {}
    for col in values:
        try:
            out[col.name] = (col.value, col.text)
        except Exception as exc:  # compared between the two reads
            out[col.name] = type(exc).__name__
    return out


class _Collect:
    """Output plugin: every change's old and new rows, read eagerly."""

    def __init__(self) -> None:
        self.changes: list[tuple[ChangeOp, Values | None, Values | None]] = []

    def begin(self, ctx: PluginContext, txn: TxnInfo) -> None:
        pass

    def change(self, ctx: PluginContext, txn: TxnInfo, change: RowChange) -> None:
        self.changes.append(
            (
                change.op,
                None if change.old is None else _read(change.old),
                None if change.new is None else _read(change.new),
            )
        )

    def commit(self, ctx: PluginContext, txn: TxnInfo, lsn: int) -> None:
        pass


def _one(cur: Any) -> Any:
    row = cur.fetchone()
    assert row is not None
    return row[0]


@pytest.fixture
def db(pg: dict[str, Any]) -> Iterator[tuple[str, Any]]:
    name = f"missing_{uuid.uuid4().hex[:10]}"
    admin = psycopg2.connect(pg["dsn"])
    admin.autocommit = True
    admin.cursor().execute(f"CREATE DATABASE {name} TEMPLATE template0 ENCODING 'UTF8' LOCALE 'C'")
    dsn = pg["dsn"].replace("dbname=postgres", f"dbname={name}")
    conn = psycopg2.connect(dsn)
    conn.autocommit = True
    conn.cursor().execute(TYPES_DDL + EXTRA_DDL)
    yield dsn, conn
    conn.close()
    admin.cursor().execute(f"DROP DATABASE {name} WITH (FORCE)")
    admin.close()


@pytest.fixture(params=["core", "xml"])
def family(request: pytest.FixtureRequest, pg: dict[str, Any]) -> str:
    """Which cases a test runs: xml (needs libxml, which this pg18 build lacks) or all
    the others (core)."""
    if request.param == "xml":
        require_features(pg, "libxml")
    return str(request.param)


def _cases(family: str) -> list[tuple[str, str]]:
    """(type, default) pairs: every case a column default can be (no subquery, not
    volatile), of the family's types."""
    cases = [(t, v) for t, v in CASES + EXTRA if t.startswith("xml") == (family == "xml")]
    if family == "xml":
        cases.append(("xml[]", ["ARRAY['<a>b</a>'::xml, NULL]"]))
    # regrole constants cannot be column defaults (they depend on a shared catalog).
    return [
        (t, v)
        for t, vs in cases
        for v in vs
        if "SELECT" not in v and "random" not in v and not t.startswith("regrole")
    ]


class _Run:
    """A session decoding one database's pg_wal from a physical slot's restart LSN;
    with `snapshot_reader`, aligned (the initial snapshot is read at consistency)."""

    def __init__(
        self,
        pg: dict[str, Any],
        dsn: str,
        cur: Any,
        tmp_path: Path,
        snapshot_reader: SnapshotReader | None = None,
    ) -> None:
        self.cur = cur
        self.slot = f"missing_{uuid.uuid4().hex[:8]}"
        cur.execute("SELECT pg_create_physical_replication_slot(%s, true)", (self.slot,))
        cur.execute(
            "SELECT restart_lsn FROM pg_replication_slots WHERE slot_name = %s", (self.slot,)
        )
        self.fed = parse_lsn(_one(cur))
        self.out = _Collect()
        self.session = Session(
            SessionConfig(
                dsn=dsn,
                slot=self.slot,
                spill_dir=tmp_path / "spill",
                unknown_types=UnknownTypePolicy("bytes"),
            ),
            self.out,
            "collect",
            lambda lsn, xid, data: None,
            version=int(pg["version"]),
            start_lsn=self.fed,
            align=snapshot_reader is not None,
            snapshot_reader=snapshot_reader,
        )
        self.dsn, self.version = dsn, int(pg["version"])
        self.align = snapshot_reader is not None
        force_running_xacts(dsn, self.version)
        self.wal = Path(pg["pgdata"]) / "pg_wal"
        self.segment_size = detect_segment_size(self.wal)
        self.until_consistent()

    def until_consistent(self) -> None:
        """Catch up until the snapshot builder is consistent (and, aligning, the snapshot
        taken). The servers are shared: a transaction of another test running at the
        forced RUNNING_XACTS keeps the builder from consistency, so another is forced."""
        for _ in range(30):
            self.catch_up()
            if self.session.snap.is_consistent and (self.session.aligned or not self.align):
                return
            time.sleep(0.5)
            force_running_xacts(self.dsn, self.version)
        raise AssertionError("the session never became consistent in 30 tries")

    def catch_up(self) -> None:
        """Decode every WAL segment completed so far (after switching the current one)."""
        self.cur.execute("SELECT pg_switch_wal()")
        size = self.segment_size
        done = -(-parse_lsn(_one(self.cur)) // size) * size
        for lsn, data in iter_wal_chunks(self.wal, self.fed, segment_size=size):
            if lsn >= done:
                break
            self.session.feed(lsn, data)
        self.fed = max(self.fed, done)

    def finish(self) -> list[tuple[ChangeOp, Values | None, Values | None]]:
        try:
            self.catch_up()
        finally:
            self.session.close()
            self.cur.execute("SELECT pg_drop_replication_slot(%s)", (self.slot,))
        return self.out.changes


class _Sink:
    """The initial snapshot's rows, by id, read eagerly."""

    def __init__(self) -> None:
        self.rows: dict[int, Values] = {}

    def begin(self, snapshot: CatalogSnapshot, first_table: int | None) -> None:
        pass

    def row(self, relation: RelationInfo, values: Sequence[ColumnValue]) -> None:
        read = _read(values)
        key = read["id"]
        assert not isinstance(key, str)
        self.rows[int(str(key[0]))] = read

    def end(self) -> None:
        pass


def _server_text(cur: Any, table: str, cols: list[str], row_id: int) -> tuple[Any, ...]:
    """The server's output text of one row's columns, under the decoders' settings."""
    cur.execute(SESSION)
    query = f"SELECT {', '.join(cols)} FROM {table} WHERE id = {row_id}"
    cur.execute(query + " LIMIT 0")
    raw = psycopg2.extensions.new_type(
        tuple({d.type_code for d in cur.description}), "RAW", lambda v, _c: v
    )
    psycopg2.extensions.register_type(raw, cur)
    cur.execute(query)
    row = cur.fetchone()
    assert row is not None
    return tuple(row)


def _compare(
    label: str,
    short: Values,
    stored: Values,
    server: tuple[Any, ...],
    cols: list[str],
    types: list[str],
) -> list[str]:
    bad = []
    for i, col in enumerate(cols):
        a, b = short[col], stored[col]
        where = f"{label} {col} ({types[i]})"
        if isinstance(a, str) or isinstance(b, str):
            if a != b:
                bad.append(f"{where}: {a!r} != stored {b!r}")
            continue
        if not _same(a[0], b[0]):
            bad.append(f"{where}: value {a[0]!r} != stored {b[0]!r}")
        if a[1] != b[1]:
            bad.append(f"{where}: text {a[1]!r} != stored {b[1]!r}")
        if types[i] == "opaque_t":  # bytes: the stored form, here the server's text
            if a[0] != server[i].encode():
                bad.append(f"{where}: bytes {a[0]!r} != server text {server[i]!r}")
            continue
        if a[1] != server[i] and not types[i].startswith("xml"):
            bad.append(f"{where}: text {a[1]!r} != server {server[i]!r}")
    return bad


def _old_rows_then_defaults(cur: Any, family: str) -> tuple[list[str], list[str]]:
    """Table `m` (REPLICA IDENTITY FULL) with rows 0 and 1, then one column per case
    of `family` added with the case's value as default: (column names, their types)."""
    cases = _cases(family)
    cols = [f"c{i}" for i in range(len(cases))]
    types = [t for t, _ in cases]
    cur.execute("CREATE TABLE m (id int PRIMARY KEY)")
    cur.execute("ALTER TABLE m REPLICA IDENTITY FULL")
    cur.execute("INSERT INTO m VALUES (0), (1)")
    # A domain with a CHECK constraint forces a rewrite on PG15 (no missing value): add
    # those first, so the rewrite does not give the old rows the other columns too.
    checked = [i for i, t in enumerate(types) if t.startswith("posint")]
    for group in (checked, [i for i in range(len(cases)) if i not in checked]):
        if not group:
            continue
        cur.execute(
            "ALTER TABLE m "
            + ", ".join(f"ADD COLUMN {cols[i]} {types[i]} DEFAULT {cases[i][1]}" for i in group)
        )
    cur.execute(
        "SELECT attname FROM pg_attribute WHERE attrelid = 'm'::regclass "
        "AND attnum > 1 AND NOT atthasmissing"
    )
    not_missing = {r[0] for r in cur.fetchall()}
    assert not_missing <= {cols[i] for i in checked}
    assert len(cases) - len(not_missing) > (280 if family == "core" else 2)
    return cols, types


def test_old_tuples_read_defaults_as_stored_values(
    pg: dict[str, Any], db: tuple[str, Any], tmp_path: Path, family: str
) -> None:
    """An UPDATE and a DELETE of rows older than ADD COLUMN ... DEFAULT (every type and
    edge value): the old tuples' values and texts equal a stored copy's and the server's
    output."""
    dsn, conn = db
    cur = conn.cursor()
    cols, types = _old_rows_then_defaults(cur, family)
    run = _Run(pg, dsn, cur, tmp_path)
    cur.execute("UPDATE m SET id = 2 WHERE id = 0")
    cur.execute("DELETE FROM m WHERE id = 1")
    listed = ", ".join(cols)
    cur.execute(f"INSERT INTO m (id, {listed}) SELECT 3, {listed} FROM m WHERE id = 2")
    changes = run.finish()

    assert [c[0] for c in changes] == [ChangeOp.UPDATE, ChangeOp.DELETE, ChangeOp.INSERT]
    (_, upd_old, upd_new), (_, del_old, _), (_, _, ins_new) = changes
    assert upd_old is not None and upd_new is not None
    assert del_old is not None and ins_new is not None
    assert upd_old["id"] == (0, "0") and del_old["id"] == (1, "1")
    server = _server_text(cur, "m", cols, 3)
    bad = (
        _compare("UPDATE old", upd_old, ins_new, server, cols, types)
        + _compare("DELETE old", del_old, ins_new, server, cols, types)
        + _compare("UPDATE new", upd_new, ins_new, server, cols, types)
    )
    assert not bad, "\n".join(bad[:40])
    print(f"\nPostgreSQL {pg['version']} {family}: {3 * len(cols)} old/new values compared")
    # The values really were decoded: none raises (opaque_t is read as bytes).
    assert not {c for c in cols if isinstance(upd_old[c], str)}
    if family == "xml":
        return
    assert upd_old[cols[types.index("opaque_t")]] == (b"x", "\\x78")
    reg = {(t, v): c for c, t, (_t, v) in zip(cols, types, _cases(family), strict=True)}
    assert upd_old[reg[("regclass", "'-'")]] == ("-", "-")
    assert upd_old[reg[("regoper", "'+(int4,int4)'::regoperator::oid")]] == (
        "pg_catalog.+",
        "pg_catalog.+",
    )
    assert upd_old[cols[types.index("int4")]] == (-2147483648, "-2147483648")


def test_defaults_added_while_decoding_through_ddl_capture(
    pg: dict[str, Any], db: tuple[str, Any], tmp_path: Path
) -> None:
    """Columns added (and a default changed, and a column re-added) while the session
    runs, the definitions coming from the DDL capture: each old tuple reads the default
    in force when its column was added, typed like a stored value."""
    dsn, conn = db
    cur = conn.cursor()
    phys = f"phys_{uuid.uuid4().hex[:8]}"
    setup(dsn, phys)
    try:
        cur.execute("CREATE TABLE d (id int PRIMARY KEY)")
        cur.execute("ALTER TABLE d REPLICA IDENTITY FULL")
        cur.execute("INSERT INTO d VALUES (0), (1)")
        run = _Run(pg, dsn, cur, tmp_path)
        added = [
            ("a", "int", "7"),
            ("b", "numeric", "'12.50'"),
            ("c", "text", "'say \"hi\", it''s {here}'"),
            ("e", "timestamptz", "'2024-06-01 12:00:00.25+05:30'"),
            ("f", "plainint", "42"),
            ("g", "int4[]", "'[0:2]={1,NULL,3}'"),
            ("h", "mood", "'happy'"),
            ("j", "jsonb", "'{\"x\": [1, 2.50]}'"),
        ]
        for name, typ, default in added:
            cur.execute(f"ALTER TABLE d ADD COLUMN {name} {typ} DEFAULT {default}")
        cur.execute("UPDATE d SET id = 10 WHERE id = 0")  # old tuple: natts 1
        cols = [n for n, _, _ in added]
        types = [t for _, t, _ in added]
        server = _server_text(cur, "d", cols, 10)
        cur.execute("ALTER TABLE d ALTER COLUMN a SET DEFAULT 8")  # attmissingval stays
        cur.execute("ALTER TABLE d DROP COLUMN b")
        cur.execute("ALTER TABLE d ADD COLUMN b numeric DEFAULT 3.25")
        cur.execute("DELETE FROM d WHERE id = 1")  # old tuple: natts 1, b re-added
        cur.execute("INSERT INTO d (id) VALUES (20)")
        changes = run.finish()
    finally:
        teardown(dsn, phys)
    assert [c[0] for c in changes] == [ChangeOp.UPDATE, ChangeOp.DELETE, ChangeOp.INSERT]
    (_, upd_old, upd_new), (_, del_old, _), (_, _, ins_new) = changes
    assert upd_old is not None and upd_new is not None
    assert del_old is not None and ins_new is not None
    assert not _compare("UPDATE old", upd_old, upd_new, server, cols, types)
    assert upd_old["a"] == (7, "7")
    assert upd_old["b"] == (Decimal("12.50"), "12.50")
    assert upd_old["h"] == ("happy", "happy")
    # The DELETE's old tuple reads the re-added `b`'s default, and `a`'s attmissingval
    # (SET DEFAULT changes only rows written later, as the INSERT shows).
    expect = {**upd_new, "b": ins_new["b"]}
    server2 = tuple("3.25" if c == "b" else server[i] for i, c in enumerate(cols))
    assert not _compare("DELETE old", del_old, expect, server2, cols, types)
    assert del_old["b"] == (Decimal("3.25"), "3.25")
    assert ins_new["a"] == (8, "8")


def test_snapshot_of_old_rows_equals_their_wal_old_tuples(
    pg: dict[str, Any], db: tuple[str, Any], tmp_path: Path, family: str
) -> None:
    """The initial snapshot reads a row older than the ADD COLUMNs (COPY: the server
    fills the defaults); the WAL path then reads the same row's old tuple when it is
    updated: same values, texts and errors, column for column."""
    dsn, conn = db
    cur = conn.cursor()
    cols, types = _old_rows_then_defaults(cur, family)
    sink = _Sink()
    run = _Run(
        pg,
        dsn,
        cur,
        tmp_path,
        SnapshotReader(FilterSettings(), sink=sink, unknown_types=UnknownTypePolicy("bytes")),
    )
    assert run.session.aligned
    assert sorted(sink.rows) == [0, 1]
    cur.execute("UPDATE m SET id = 2 WHERE id = 0")
    changes = run.finish()
    assert [c[0] for c in changes] == [ChangeOp.UPDATE]
    old = changes[0][1]
    assert old is not None
    bad = []
    for col, typ in zip(cols, types, strict=True):
        a, b = old[col], sink.rows[0][col]
        if isinstance(a, str) or isinstance(b, str):
            if a != b:
                bad.append(f"{col} ({typ}): WAL {a!r} != snapshot {b!r}")
        elif not _same(a[0], b[0]) or a[1] != b[1]:
            bad.append(f"{col} ({typ}): WAL {a!r} != snapshot {b!r}")
    assert not bad, "\n".join(bad[:40])
    assert not {c for c in cols if isinstance(old[c], str)}
