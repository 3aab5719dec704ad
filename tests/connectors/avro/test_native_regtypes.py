"""The reg* types and aclitem through the native row encoder, against the Python path.

A table with a column of each reg* type (regclass, regtype, regproc, regprocedure,
regoper, regoperator, regrole, regnamespace, regconfig, regdictionary, regcollation),
aclitem (PUBLIC, a role whose name needs quoting, a role with a non-ASCII name, an OID
that is no role; grant options; 15's 12-byte form, 16's 16-byte one), regclass[],
regtype[] and aclitem[] (its elements in 15's or 16's layout, told by the array's
alignment, with a NULL among them), on a real server (run for PG15 and PG16:
`-k "pg15 or pg16"`). Its WAL is decoded twice by a pgcdc `Session`: into `AvroPlugin`
on the Python path, and into one as `PGCDC_IMPL` selects it. Both must write the same
records, byte for byte; under the native core the test also requires:
- the first row (whose names no resolver has resolved yet) falls back with the typed
  reason, the Python path resolving its names into the cache (`CatalogNames.native`),
  and every later row with those OIDs is native;
- once the catalog stage clears its names (`CatalogNames.clear`, the catalog stage's
  invalidate_all) after the table a regclass value names was renamed, both paths print
  the new name, the native one after one more fallback.

A second table (`n_regc`, every version) has a composite with regclass (a quote, a comma
and parentheses in the name), regtype, aclitem and int4 fields, one nesting it beside a
regrole field, and an array of the first: the string of record_out's text, from the same
names (glue::avro::named_composite); only the rows naming an OID not resolved yet fall
back, with the typed reasons.
"""

from __future__ import annotations

import tempfile
import uuid
from pathlib import Path
from typing import Any

import psycopg2
import pytest

from connectors.avro import plugin as avro_plugin
from connectors.avro.plugin import AvroPlugin
from connectors.postgres.archive import detect_segment_size, iter_wal_chunks
from connectors.postgres.server import force_running_xacts
from connectors.postgres.setup import setup, teardown
from service.app.session import Session
from service.config import Settings
from service.impl import native_row_core
from service.lsn import parse_lsn
from service.output.api import OutputRecord
from tests.connectors.avro.test_codec import drop_subjects
from tests.connectors.avro.test_codec_pipeline import FrozenTime, _dsn, _logical_slot, _session

pytestmark = pytest.mark.integration

SCHEMA = """
CREATE TABLE n_target (x int4);
CREATE TABLE n_reg (
    id int4 PRIMARY KEY, cl regclass, ty regtype, pr regproc, prd regprocedure,
    op regoper, opr regoperator, ro regrole, ns regnamespace, cfg regconfig,
    dict regdictionary, coll regcollation, acl aclitem, acl2 aclitem NOT NULL,
    cls regclass[], tys regtype[], acls aclitem[]);
"""

# One row's values; {q} is the role whose name needs quoting, {u} the non-ASCII one,
# as literals; {qn} and {un} their quoted identifiers.
ROW = """
  'n_target'::regclass, 'int4'::regtype, 'now'::regproc, 'sum(int4)'::regprocedure,
  '||/'::regoper, '+(int4,int4)'::regoperator, {q}::regrole, 'pg_catalog'::regnamespace,
  'english'::regconfig, 'simple'::regdictionary, '"C"'::regcollation,
  '{qn}=a*r*D/{un}'::aclitem, '=w/{qn}'::aclitem,
  ARRAY['n_target'::regclass, NULL, 'pg_class'::regclass],
  ARRAY['int4'::regtype, 'timestamp with time zone'::regtype, 'n_reg'::regtype],
  ARRAY['{qn}=a*r*D/{un}'::aclitem, NULL, '=w/{qn}'::aclitem, '{un}=Tt*/{qn}'::aclitem]
"""


def _rows(first: int, count: int, q: str, u: str) -> str:
    values = ROW.format(q=q, u=u, qn=q.strip("'"), un=u.strip("'"))
    return (
        f"INSERT INTO n_reg SELECT g, {values} FROM generate_series({first}, {first + count - 1}) g"
    )


class _Feed:
    """A session's WAL from pg_wal, decoded in steps (as `_pump`, resumed): `to(end)`
    processes the records before `end`, feeding chunks from where the last step stopped.
    A step ends at a WAL switch (`pg_switch_wal`), so that the bytes it fed past `end`
    (the rest of the switched segment) are final."""

    def __init__(self, pg: dict[str, Any], session: Session, start: int) -> None:
        self.wal = Path(pg["pgdata"]) / "pg_wal"
        self.session = session
        self.start = self.fed = start

    def to(self, end: int) -> None:
        reader, process = self.session.reader, self.session.decoding.process
        chunks = iter_wal_chunks(self.wal, self.fed, segment_size=detect_segment_size(self.wal))
        for lsn, data in chunks:
            reader.feed(data, lsn)
            self.fed = lsn + len(data)
            for record in self.session.records():
                if record.lsn >= end:
                    raise AssertionError(f"no WAL switch before {end:X}")
                if record.lsn >= self.start:
                    process(record)
                if record.end_lsn >= end:
                    return
        raise AssertionError(f"WAL ended before {end:X}")


def _switch(cur: Any) -> int:
    """Switch to a new WAL segment: the end of the switch record."""
    cur.execute("SELECT pg_switch_wal()::text")
    row = cur.fetchone()
    assert row is not None
    return parse_lsn(row[0])


def _names(session: Session) -> Any:
    """The session's catalog name resolver (connectors.postgres.catalog_types)."""
    return session._types._types.names


def test_reg_types_and_aclitem_native_equal_python(
    pg: dict[str, Any], registry: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every reg* type, aclitem, reg* arrays and aclitem[] give the same records natively
    as on the Python path; a name not cached yet falls back once, then the rows are
    native, and after the names are cleared a renamed table prints its new name on both
    paths."""
    monkeypatch.setattr(avro_plugin, "time", FrozenTime)
    native = native_row_core() is not None
    tag = uuid.uuid4().hex[:8]
    quoted, unicode = f'"Reg Role {tag}"', f'"rôle_{tag}"'
    q, u = (f"'{name.replace(chr(39), chr(39) * 2)}'" for name in (quoted, unicode))
    db = f"avroreg_{tag}"
    admin = psycopg2.connect(_dsn(pg, "postgres"))
    admin.autocommit = True
    admin.cursor().execute(f"CREATE DATABASE {db}")
    admin.cursor().execute(f"CREATE ROLE {quoted}")
    admin.cursor().execute(f"CREATE ROLE {unicode}")
    dsn, phys, slot = _dsn(pg, db), f"{db}_phys", f"{db}_slot"
    python: list[OutputRecord] = []
    got: list[OutputRecord] = []
    try:
        setup(dsn, phys)
        conn = psycopg2.connect(dsn)
        conn.autocommit = True
        with conn.cursor() as cur:
            cur.execute(SCHEMA)
            start, consistent = _logical_slot(dsn, cur, slot)
            force_running_xacts(dsn, int(pg["version"]))
            settings = Settings(
                source={"slot": slot, "dbname": db},
                kafka={"bootstrap_servers": "127.0.0.1:1", "topic_prefix": f"reg{tag}"},
                registry={"url": registry["url"]},
            )
            on_python, ours = AvroPlugin(settings), AvroPlugin(settings)
            on_python.run_id = ours.run_id
            with tempfile.TemporaryDirectory(prefix="pgcdc-avro-reg-") as spill:
                sessions = [
                    _session(pg, dsn, slot, start, consistent, spill, on_python, python),
                    _session(pg, dsn, slot, start, consistent, spill, ours, got, []),
                ]
                on_python.native_rows = None  # the Python path, whatever PGCDC_IMPL says
                assert (ours.native_rows is not None) == native
                try:
                    # 1: the first row misses every name; the Python path resolves them
                    cur.execute(_rows(1, 50, q, u))
                    cur.execute(
                        "INSERT INTO n_reg (id, acl2) VALUES (100, makeaclitem(424242, 10,"
                        " 'TRUNCATE', true))"
                    )
                    cur.execute("UPDATE n_reg SET ty = 'text'::regtype WHERE id <= 10")
                    cur.execute("DELETE FROM n_reg WHERE id BETWEEN 11 AND 15")
                    end = _switch(cur)
                    feeds = [_Feed(pg, session, start) for session in sessions]
                    for feed in feeds:
                        feed.to(end)
                    counts = ours.native_rows
                    if native:
                        assert counts is not None
                        # the first row only: by then the Python path resolved its names;
                        # the role 424242 (no such role, its number) and 'text' are new
                        assert counts.fallbacks == {
                            "reg* name not cached": 2,
                            "aclitem role name not cached": 1,
                        }, counts.fallbacks
                        assert counts.native == 50 + 1 + 10 + 5 - 3, counts.native
                        cache = _names(sessions[1]).native
                        assert cache.get("regclassout", _oid(cur, "'n_target'::regclass")) == (
                            "n_target"
                        )
                        assert cache.get("role", 424242) == "424242"
                        assert cache.get("role", _oid(cur, f"{q}::regrole")) == quoted
                    # 2: renamed after its name was cached; the names cleared: the new one
                    cur.execute("ALTER TABLE n_target RENAME TO n_target_renamed")
                    cur.execute(_rows(200, 20, q, u).replace("'n_target'", "'n_target_renamed'"))
                    for session in sessions:
                        _names(session).clear()
                    if native:
                        assert len(_names(sessions[1]).native) == 0
                    end = _switch(cur)
                    for feed in feeds:
                        feed.to(end)
                finally:
                    for session in sessions:
                        session.close()
        conn.close()
        mine = [r for r in python if r.topic.endswith(".n_reg")]
        assert len(mine) == 50 + 1 + 10 + 5 * 2 + 20, len(mine)  # deletes: tombstones
        renamed = [r for r in mine[-20:] if r.value is not None]
        assert renamed and all(b"n_target_renamed" in r.value for r in renamed)
        assert all(b"n_target_renamed" not in (r.value or b"") for r in mine[:-20])
        assert all(f"Reg Role {tag}".encode() in (r.value or b"") for r in mine[:50])
        assert len(got) == len(python)
        for i, (g, e) in enumerate(zip(got, python, strict=True)):
            assert (g.topic, g.key, g.value, g.headers) == (e.topic, e.key, e.value, e.headers), (
                i,
                e.topic,
            )
        if native:
            counts = ours.native_rows
            assert counts is not None
            # stage 2: one more miss (every name was cleared), then native again
            assert counts.fallbacks["reg* name not cached"] == 3, counts.fallbacks
            assert counts.native == 50 + 1 + 10 + 5 - 3 + 19, counts.native
    finally:
        drop_subjects(registry, python)
        conn = psycopg2.connect(dsn)
        conn.autocommit = True
        conn.cursor().execute(
            "SELECT pg_drop_replication_slot(slot_name) "
            "FROM pg_replication_slots WHERE slot_name = %s",
            (slot,),
        )
        conn.close()
        teardown(dsn, phys)
        admin.cursor().execute(f"DROP DATABASE {db} WITH (FORCE)")
        admin.cursor().execute(f"DROP ROLE {quoted}")
        admin.cursor().execute(f"DROP ROLE {unicode}")
        admin.close()


def _oid(cur: Any, expr: str) -> int:
    cur.execute(f"SELECT {expr}::oid")
    row = cur.fetchone()
    assert row is not None
    return int(row[0])


COMPOSITE_SCHEMA = """
CREATE TABLE n_ctarget (x int4);
CREATE TABLE "it's, (odd)" (x int4);
CREATE TYPE n_named AS (c regclass, t regtype, a aclitem, n int4);
CREATE TYPE n_outer AS (i n_named, r regrole);
CREATE TABLE n_regc (id int4 PRIMARY KEY, c n_named, o n_outer, cs n_named[]);
"""


def test_composites_with_reg_and_aclitem_fields_native_equal_python(
    pg: dict[str, Any], registry: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A composite with regclass (a quote, a comma and parentheses in the name), regtype,
    aclitem and int4 fields, one nesting it beside a regrole field, and an array of the
    first: each the string of record_out's text from the resolver's names, the same
    records natively as on the Python path; natively but for the rows naming an OID no
    resolver has resolved yet."""
    monkeypatch.setattr(avro_plugin, "time", FrozenTime)
    native = native_row_core() is not None
    tag = uuid.uuid4().hex[:8]
    quoted = f'"Comp Role {tag}"'
    q = f"'{quoted.replace(chr(39), chr(39) * 2)}'"
    db = f"avroregc_{tag}"
    admin = psycopg2.connect(_dsn(pg, "postgres"))
    admin.autocommit = True
    admin.cursor().execute(f"CREATE DATABASE {db}")
    admin.cursor().execute(f"CREATE ROLE {quoted}")
    dsn, phys, slot = _dsn(pg, db), f"{db}_phys", f"{db}_slot"
    python: list[OutputRecord] = []
    got: list[OutputRecord] = []
    named = (
        "ROW('\"it''s, (odd)\"'::regclass, 'int4'::regtype,"
        f" '{quoted}=r*/postgres'::aclitem, g)::n_named"
    )
    inner = "ROW('n_ctarget'::regclass, 'text'::regtype, '=w/postgres'::aclitem, NULL)::n_named"
    try:
        setup(dsn, phys)
        conn = psycopg2.connect(dsn)
        conn.autocommit = True
        with conn.cursor() as cur:
            cur.execute(COMPOSITE_SCHEMA)
            start, consistent = _logical_slot(dsn, cur, slot)
            force_running_xacts(dsn, int(pg["version"]))
            settings = Settings(
                source={"slot": slot, "dbname": db},
                kafka={"bootstrap_servers": "127.0.0.1:1", "topic_prefix": f"regc{tag}"},
                registry={"url": registry["url"]},
            )
            on_python, ours = AvroPlugin(settings), AvroPlugin(settings)
            on_python.run_id = ours.run_id
            with tempfile.TemporaryDirectory(prefix="pgcdc-avro-regc-") as spill:
                sessions = [
                    _session(pg, dsn, slot, start, consistent, spill, on_python, python),
                    _session(pg, dsn, slot, start, consistent, spill, ours, got, []),
                ]
                on_python.native_rows = None  # the Python path, whatever PGCDC_IMPL says
                assert (ours.native_rows is not None) == native
                try:
                    # the first row misses every name; the Python path resolves them
                    cur.execute(
                        f"INSERT INTO n_regc SELECT g, {named}, ROW({inner}, {q}::regrole)"
                        f"::n_outer, ARRAY[{named}, NULL, {inner}]"
                        " FROM generate_series(1, 30) g"
                    )
                    cur.execute(
                        "INSERT INTO n_regc VALUES (100, ROW(NULL, NULL, NULL, NULL), NULL, '{}')"
                    )
                    cur.execute("UPDATE n_regc SET c.n = -id WHERE id <= 10")
                    cur.execute("DELETE FROM n_regc WHERE id BETWEEN 11 AND 15")
                    end = _switch(cur)
                    for feed in [_Feed(pg, session, start) for session in sessions]:
                        feed.to(end)
                finally:
                    for session in sessions:
                        session.close()
        conn.close()
        mine = [r for r in python if r.topic.endswith(".n_regc")]
        assert len(mine) == 30 + 1 + 10 + 5 * 2, len(mine)  # deletes: tombstones
        assert all(b'("""it\'s, (odd)""",integer,' in (r.value or b"") for r in mine[:30])
        assert all(f"Comp Role {tag}".encode() in (r.value or b"") for r in mine[:30])
        assert len(got) == len(python)
        for i, (g, e) in enumerate(zip(got, python, strict=True)):
            assert (g.topic, g.key, g.value, g.headers) == (e.topic, e.key, e.value, e.headers), (
                i,
                e.topic,
            )
        if native:
            counts = ours.native_rows
            assert counts is not None
            # the first row names what no resolver has resolved yet; every later row is
            # Rust's (a plan, so no "no plan" reason)
            assert set(counts.fallbacks) <= {
                "reg* name not cached",
                "aclitem role name not cached",
            }, counts.fallbacks
            missed = sum(counts.fallbacks.values())
            assert 1 <= missed <= 2, counts.fallbacks
            assert counts.native == 30 + 1 + 10 + 5 - missed, counts.native
    finally:
        drop_subjects(registry, python)
        conn = psycopg2.connect(dsn)
        conn.autocommit = True
        conn.cursor().execute(
            "SELECT pg_drop_replication_slot(slot_name) "
            "FROM pg_replication_slots WHERE slot_name = %s",
            (slot,),
        )
        conn.close()
        teardown(dsn, phys)
        admin.cursor().execute(f"DROP DATABASE {db} WITH (FORCE)")
        admin.cursor().execute(f"DROP ROLE {quoted}")
        admin.close()
