"""The initial snapshot's rows through the native encoder, against the Python snapshot
path byte for byte, and against the stream path's rows of the same values.

The wide type workload of tests/connectors/avro/test_native_rows_pipeline.py (every type
the native row encoder covers, with its edge values, and tables it leaves to Python:
arrays, geometric types and ranges, domains over arrays, a composite) is loaded on a
real server (run for PG15 and PG18: `-k "pg15 or pg18"`), with `n_arr2`, n_arr without
its jsonb[] column (arrays of every other element kind), and `n_geo2`, n_geo (every
geometric type, text search types, ranges, citext, a composite) with a multirange of
every built-in subtype, arrays of path, polygon, tsvector, tsquery and multirange, and a
composite of
a dozen field types (jsonb, numeric, a range, box, a multirange...) with a dropped
attribute, and `n_ext2`, a column per extension type the snapshot reads natively that
the server has (hstore; PostGIS geometry and geography on PG15; pgvector's vector,
halfvec and sparsevec on PG18; in their send format), and ltree, lquery, the isn types,
cube, earth and seg (read as their text, their value), and `n_ext_arr`, arrays of
those types (tests/connectors/avro/test_native_rows_pipeline's `_EXT_ARRAYS`). Then:

- snapshot: every table is read in chunks of `CHUNK_ROWS` rows (so chunks are cut and
  markers span chunks) by two `ChunkReader`s, one parsing COPY in Python and one in Rust
  (`CopyChunk`), and each chunk is published through `Snapshotter._emit_rows` into an
  `AvroPlugin` on the Python path and one as `PGCDC_IMPL` selects it, with the plugins'
  clock frozen. Both must write the same records: topic, key bytes, value bytes, headers.
  Under the native core the test also requires that rows went native (n_all, n_more,
  n_arr, n_arr2, n_dom, n_geo, n_geo2, n_ext2, n_ext_arr, n_sys, n_jpath, n_jpath_arr,
  n_nested; n_arr, n_geo, n_geo2, n_ext2, n_ext_arr, n_sys, n_jpath, n_jpath_arr
  (jsonpath[], selected as `::text[]`) and n_nested (composites with enum, array and
  composite fields, arrays of composites) without the table ever falling back as a
  whole), that a table without a native plan (n_python's array of a user range) did not
  go native, that n_erange's ranges and multiranges over an enum did (COPY sends
  enum_send's labels, mapped back to pg_enum OIDs through the column's labels), and
  n_tid's tid, tid[] and composite with a tid field (tidrecv's input), that n_reg's
  reg* types, aclitem, reg* arrays and aclitem[] (read as their text) did, and that a
  row the Python path decides (a float4 NaN, a NaN in a numeric[]) fell back on its
  own.
- stream: the same rows are copied into twin tables (`CREATE TABLE ... (LIKE ...)`,
  `INSERT ... SELECT *`) and decoded from the WAL by a pgcdc `Session` into an
  AvroPlugin as `PGCDC_IMPL` selects it. Per table, the multiset of `after` records
  (decoded with the registered schema and compared by repr: NaN, -0.0 and Decimal
  exponents included) and of key records (their Avro bytes behind the wire header) of
  the snapshot must equal the stream's.
"""

from __future__ import annotations

import io
import tempfile
import uuid
from collections import Counter
from typing import Any

import fastavro
import psycopg2
import pytest

from connectors.avro import plugin as avro_plugin
from connectors.avro.native_rows import NativeRows
from connectors.avro.plugin import AvroPlugin
from connectors.postgres.server import force_running_xacts
from connectors.postgres.setup import setup, teardown
from connectors.tablesnap.chunks import ChunkReader, ChunkSpec
from connectors.tablesnap.snapshotter import Snapshotter, _Pending
from service.config import FilterSettings, Settings
from service.impl import native_row_core
from service.lsn import parse_lsn
from service.output.api import OutputRecord, PluginContext, PluginWrapper, RecordRun
from service.tablesnap.plan import END, Interval, TableJob
from tests.connectors.avro.test_codec_pipeline import (
    FrozenTime,
    _dsn,
    _logical_slot,
    _pump,
    _session,
)
from tests.connectors.avro.test_native_rows_pipeline import (
    _LZ4,
    SCHEMA,
    WORKLOAD,
    _extension_array_table,
    jsonpath_rows,
)
from tests.integration.extension_cases import EXTENSION_CASES, extension_ddl, has

pytestmark = pytest.mark.integration

CHUNK_ROWS = 37
TABLES = [
    "n_all",
    "n_keyed",
    "n_full",
    "n_more",
    "n_arr",
    "n_arr2",
    "n_geo",
    "n_geo2",
    "n_dom",
    "n_ext2",
    "n_sys",
    "n_urange",
    "n_python",
    "n_erange",
    "n_tid",
    "n_nested",
    "n_jpath",
    "n_jpath_arr",
    "n_reg",
    "n_ext_arr",
]
# The extension types the snapshot reads in their send format (tablesnap::extension), as
# far as the server has them: hstore (PG15, PG18), PostGIS (PG15), pgvector (PG18); and
# those it reads as their text, which is their value (ltree, lquery, the isn types, cube,
# earth, seg: tablesnap::copy's `text_read`).
EXT2_FEATURES = (
    "hstore",
    "postgis",
    "vector",
    "halfvec",
    "sparsevec",
    "ltree",
    "isn",
    "cube",
    "earthdistance",
    "seg",
)


def _ext2(pg: dict[str, Any]) -> str:
    """The DDL and rows of n_ext2: a column per extension type of EXT2_FEATURES the
    server has (not arrays: those are n_ext_arr), 60 rows
    cycling through each type's literals, some NULL."""
    found = [
        (typ, literals)
        for feature in EXT2_FEATURES
        if has(pg, feature)
        for typ, literals in EXTENSION_CASES[feature]
        if not typ.endswith("[]")
    ]
    assert found, "no extension type to snapshot"
    ddl = (
        extension_ddl(pg)
        + "\nCREATE TABLE n_ext2 (id int4 PRIMARY KEY"
        + "".join(f", c{k} {typ}" for k, (typ, _) in enumerate(found))
        + ");"
    )
    rows = [
        "("
        + ", ".join(
            [str(i), *("NULL" if i % 11 == 5 else lits[i % len(lits)] for _, lits in found)]
        )
        + ")"
        for i in range(60)
    ]
    return ddl + "\nINSERT INTO n_ext2 VALUES " + ", ".join(rows)


# n_arr without its jsonb[] column, so that arrays of every other element go native
# whatever jsonb[] does (n_arr: its elements go native as jsonb_send's text)
ARR2 = """CREATE TABLE n_arr2 AS SELECT id, i4, i8, tx, nu, nv, tz, d, bo, by, ip, iv, bt, b1,
    u, f8, mo FROM n_arr;
ALTER TABLE n_arr2 ADD PRIMARY KEY (id)"""
# n_geo, plus a multirange of each other built-in subtype, arrays of path, polygon,
# tsvector, tsquery and a multirange, and a composite of many field types with a dropped
# attribute: every geometric type, range, multirange, tsvector, tsquery, pg_lsn, xid,
# citext and composite column, and arrays of point, box and int4range, goes native
# (tablesnap::sendform, tablesnap::tsquery, tablesnap::record)
GEO2 = """CREATE TYPE n_wide AS (j jsonb, gone int4, n numeric, r tstzrange, b box,
    t timestamptz, x int8, nm name, ch "char", iv interval, p point, m int4multirange);
ALTER TYPE n_wide DROP ATTRIBUTE gone;
CREATE TABLE n_geo2 AS SELECT id, p, p_nn, l, s, b, pa, po, c, tv, r4, r8, rn, rd,
    rs, rz, m4, mz, ap, ab, ar, ls, xd, tq, ci, cp, int8multirange(r8) AS m8,
    nummultirange(rn) AS mn, datemultirange(rd) AS md, tsmultirange(rs) AS ms,
    CASE WHEN id % 2 = 0 THEN ARRAY[pa, NULL] END AS paa, ARRAY[po, po] AS poa,
    ARRAY[tv] AS tva, ARRAY[m4, NULL, m4] AS m4a, ARRAY[tq, NULL, 'x <2> !y'] AS tqa,
    CASE WHEN id % 3 = 1 THEN NULL
         WHEN id = 2 THEN ROW(NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
                              NULL)::n_wide
         ELSE ROW(jsonb_build_object('id', id, 'a', ARRAY['x y', '"q"']), id / 7.0, rz, b,
                  timestamptz '2024-01-01 00:00+00' + id * interval '1 hour', -id,
                  'n (' || id || ')', 'c', id * interval '1 min 1.5 s', p, m4)::n_wide
    END AS cw
    FROM n_geo;
ALTER TABLE n_geo2 ADD PRIMARY KEY (id)"""


# Every reg* type, aclitem (its 15 or 16+ form), arrays of reg* types and aclitem[], which the
# snapshot reads as their `::text` (`::text[]`): native (tablesnap::copy's
# `read_as_text`); a regclass naming a table whose name needs quoting, inside an array.
REG = """CREATE TABLE "n Odd,name" (x int4);
CREATE TABLE n_reg (id int4 PRIMARY KEY, cl regclass, ty regtype, pr regproc,
    prd regprocedure, op regoper, opr regoperator, ro regrole, ns regnamespace,
    cfg regconfig, dict regdictionary, coll regcollation, acl aclitem, cls regclass[],
    tys regtype[], acls aclitem[]);
INSERT INTO n_reg SELECT g, CASE WHEN g % 5 <> 0 THEN 'n_all'::regclass END,
    'int4'::regtype, 'now'::regproc, 'sum(int4)'::regprocedure, '||/'::regoper,
    '+(int4,int4)'::regoperator, 'postgres'::regrole, 'pg_catalog'::regnamespace,
    'english'::regconfig, 'simple'::regdictionary, '"C"'::regcollation,
    (ARRAY['=r/postgres', 'postgres=a*r*D/postgres', NULL])[g % 3 + 1]::aclitem,
    ARRAY['n_all'::regclass, NULL, '"n Odd,name"'::regclass],
    ARRAY['int4'::regtype, 'timestamp with time zone'::regtype],
    CASE WHEN g % 4 <> 0 THEN ARRAY['=r/postgres', NULL, 'postgres=a*r*D/postgres']::aclitem[]
    END FROM generate_series(1, 40) g"""


def _plugin_ctx(plugin: AvroPlugin, out: list[OutputRecord], slot: str) -> PluginWrapper:
    """A wrapper around `plugin` whose records (and record runs) land in `out`."""

    def write(_lsn: int, _xid: int, data: Any) -> None:
        out.append(data)

    def write_run(_lsn: int, _xid: int, run: RecordRun) -> None:
        out.extend(run.records())

    ctx = PluginContext(slot, "avro", {}, write, write_run)
    wrapper = PluginWrapper(plugin, ctx)
    wrapper.startup(True)
    return wrapper


def _snapshot(
    dsn: str,
    settings: Settings,
    plugin: AvroPlugin,
    out: list[OutputRecord],
    *,
    native_copy: bool,
    ahead: Counter[str] | None = None,
) -> dict[str, Any]:
    """Every table of TABLES, chunk by chunk, published by `Snapshotter._emit_rows`; with
    `native_copy` False, COPY parsed and rows encoded on the Python path. Returns the
    topics' schemas. `ahead` counts the chunks whose records were encoded ahead
    (`Snapshotter._prepare`), per table, and those where that stopped before the last
    row (a row the Python path decides)."""
    ahead = Counter() if ahead is None else ahead
    snap = Snapshotter(settings, None)
    wrapper = _plugin_ctx(plugin, out, settings.source.slot)
    if not native_copy:
        plugin.native_rows = None  # the Python path, whatever PGCDC_IMPL says
    snap.emitter = wrapper
    reader = ChunkReader(dsn, FilterSettings())
    if not native_copy:
        reader._native = None  # COPY parsed in Python, whatever PGCDC_IMPL says
    try:
        jobs = [TableJob(table=f"public.{t}", marker="initial", planned_to=END) for t in TABLES]
        snap.state.jobs = jobs
        for job in jobs:
            plan = None
            with reader._sql().cursor() as cur:
                cur.execute("SELECT %s::regclass::oid", (job.table,))
                row = cur.fetchone()
                assert row is not None
                job.oid = int(row[0])
            plan = reader.describe(job.oid)
            assert plan is not None
            keyed = bool(plan.key_names)
            lo: Any = None if keyed else 0
            while True:
                spec = ChunkSpec(job.oid, job.table, keyed, lo, None)
                iv = Interval(lo, None)
                job.open = [iv]
                read = reader.read(
                    spec,
                    rows=CHUNK_ROWS,
                    max_bytes=1 << 30 if keyed else 4000,
                    low={"kind": "low"},
                    high={"kind": "high"},
                    on_read=lambda _r: None,
                )
                assert (read.copy is not None) == (native_copy and reader._native is not None)
                assert read.plan is not None and read.snapshot is not None
                if read.cut:
                    iv.hi = read.real_hi
                    job.open.append(Interval(read.real_hi, None))
                p = _Pending(f"c{job.chunks}", job, iv, spec, read)
                rel = read.plan.relation
                # one LSN per chunk, the same on both paths (their reads' snapshots differ)
                lsn = 0x1_0000_0000 + 0x1000 * job.oid + job.chunks
                # as a reader does once its read is handed over: the records of every
                # chunk after a table's first published one are encoded ahead
                snap._prepare(p, read)
                if p.ahead is not None and p.ahead.value is not None:
                    ahead[job.table] += 1
                    if len(p.ahead.value.records) < len(read.rows):
                        ahead["stopped early"] += 1
                snap._emit_rows(wrapper.ctx, lsn, p, read, rel, range(len(read.rows)))
                job.chunks += 1
                if not read.cut:
                    break
                lo = read.real_hi
            job.done = True
        return _schemas(plugin)
    finally:
        reader.close()
        wrapper.shutdown()  # the plugin's registry client


def _schemas(plugin: AvroPlugin) -> dict[str, Any]:
    """The Envelope schema of each topic `plugin` registered (read before its shutdown)."""
    return {
        t.plan.topic: fastavro.parse_schema(t.plan.envelope_schema, named_schemas={})
        for t in plugin._tables.values()
        if t is not None
    }


def _decoded(schemas: dict[str, Any], records: list[OutputRecord]) -> dict[str, Counter[str]]:
    """Per table (the topic's last part, twin tables under their original's name): the
    multiset of `after` records (repr of the decoded datum) and of key records (hex of
    the Avro bytes behind the 5-byte wire header)."""
    out: dict[str, Counter[str]] = {}
    for r in records:
        if r.topic not in schemas or r.value is None:
            continue
        env = fastavro.schemaless_reader(io.BytesIO(r.value[5:]), schemas[r.topic], None)
        assert isinstance(env, dict)
        name = r.topic.rsplit(".", 1)[-1].removeprefix("twin_")
        seen = out.setdefault(name, Counter())
        seen["after " + repr(env["after"])] += 1
        seen["key " + ("" if r.key is None else r.key[5:].hex())] += 1
    return out


def test_native_snapshot_equals_python_snapshot_and_stream(
    pg: dict[str, Any], registry: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Snapshot records: native == Python byte for byte; their rows == the stream's."""
    monkeypatch.setattr(avro_plugin, "time", FrozenTime)
    native = native_row_core() is not None
    done_by_table: dict[str, list[int]] = {}  # NativeRows.snapshot_rows' results
    snapshot_rows = NativeRows.snapshot_rows

    def counted(self: NativeRows, *args: Any, **kwargs: Any) -> int:
        done = snapshot_rows(self, *args, **kwargs)
        done_by_table.setdefault(args[2].name, []).append(done)
        return done

    monkeypatch.setattr(NativeRows, "snapshot_rows", counted)
    db = f"snapnative_{uuid.uuid4().hex[:10]}"
    admin = psycopg2.connect(_dsn(pg, "postgres"))
    admin.autocommit = True
    admin.cursor().execute(f"CREATE DATABASE {db}")
    dsn, phys, slot = _dsn(pg, db), f"{db}_phys", f"{db}_slot"
    try:
        setup(dsn, phys)
        conn = psycopg2.connect(dsn)
        conn.autocommit = True
        with conn.cursor() as cur:
            cur.execute(SCHEMA)
            cur.execute(_LZ4)
            found = cur.fetchone()
            if found is not None and found[0]:
                cur.execute("ALTER TABLE n_all ADD COLUMN big4 text COMPRESSION lz4")
            for sql in [*WORKLOAD, *jsonpath_rows(int(pg["version"]))]:
                cur.execute(sql)
            # the float4 NaN row (the Python path's) again as n_all's last, so that a
            # chunk its reader encodes ahead (`snapshot_prepare`) stops at it
            cur.execute(
                "CREATE TEMP TABLE nan_again AS SELECT * FROM n_all WHERE f4 = 'NaN';"
                " UPDATE nan_again SET id = (SELECT max(id) + 1 FROM n_all);"
                " INSERT INTO n_all SELECT * FROM nan_again"
            )
            cur.execute(ARR2)
            cur.execute(GEO2)
            cur.execute(_ext2(pg))
            cur.execute("; ".join(_extension_array_table(pg)))
            cur.execute(REG)
            settings = Settings(
                source={"slot": slot, "dbname": db},
                kafka={
                    "bootstrap_servers": "127.0.0.1:1",
                    "topic_prefix": f"snapnative{uuid.uuid4().hex[:8]}",
                },
                registry={"url": registry["url"]},
            )
            # the snapshot, on both paths
            python: list[OutputRecord] = []
            got: list[OutputRecord] = []
            on_python = AvroPlugin(settings)
            ours = AvroPlugin(settings)
            on_python.run_id = ours.run_id
            _snapshot(dsn, settings, on_python, python, native_copy=False)
            ahead: Counter[str] = Counter()
            snap_schemas = _snapshot(dsn, settings, ours, got, native_copy=True, ahead=ahead)
            assert len(got) == len(python) > 0
            for i, (a, b) in enumerate(zip(python, got, strict=True)):
                assert a == b, f"snapshot record {i} ({a.topic}) differs"
            if native:
                assert ours.native_rows is not None
                assert ours.native_rows.native > 0
                # chunks after each table's first took their records from their reader
                # (`snapshot_prepare`), one stopping at a float4 NaN among them: the
                # bytes above are equal all the same
                assert ours.native_rows.ahead > 0, ahead
                assert ahead["public.n_all"] > 0 and ahead["stopped early"] > 0, ahead
                reasons = ours.native_rows.fallbacks
                # a NaN inside a numeric[] (a NaN in a nullable numeric column is
                # written as null natively, as Python writes it)
                assert reasons["numeric Python decides"] > 0, reasons
                assert reasons["float4 NaN"] > 0, reasons
                # arrays (n_arr2, jsonb[] in n_arr, and n_dom's domains over arrays and
                # arrays of domains and of an enum) go native, and so do the geometric
                # types, ranges, multiranges, text search types, citext and composites
                # (n_geo, n_geo2), hstore, PostGIS, pgvector and the extension types
                # read as their text (n_ext2, as far as the server has them),
                # txid_snapshot, pg_snapshot (and arrays of it), int2vector and oidvector
                # (n_sys), user-defined ranges and multiranges (n_urange), and
                # jsonpath, read as its `::text` (n_jpath), and jsonpath[],
                # read as `::text[]` (n_jpath_arr), and composites with enum, array and
                # composite fields and arrays of composites (n_nested, tablesnap::record),
                # and the reg* types, aclitem and reg* arrays read as their text (n_reg),
                # and ranges and multiranges over an enum (n_erange: COPY sends their
                # labels, mapped back through the column's), and tid, tid[] and a
                # composite with a tid field (n_tid); an array of a user range
                # (n_python) does not
                native_tables = (
                    "n_arr",
                    "n_geo",
                    "n_geo2",
                    "n_ext2",
                    "n_sys",
                    "n_urange",
                    "n_jpath",
                    "n_jpath_arr",
                    "n_nested",
                    "n_reg",
                    "n_ext_arr",
                    "n_erange",
                    "n_tid",
                )
                for t in ("n_all", "n_more", "n_arr2", "n_dom", *native_tables):
                    assert sum(d for d in done_by_table[t] if d > 0) > 0, (t, done_by_table)
                for t in native_tables:
                    assert -1 not in done_by_table[t], (t, done_by_table)
                # an array of a user range (n_python) has no native plan: its chunks
                # (parsed natively) go to the Python path whole
                assert set(done_by_table["n_python"]) == {-1}, done_by_table
            # the stream, of the same rows copied into twin tables
            for t in TABLES:
                cur.execute(f"CREATE TABLE twin_{t} (LIKE {t} INCLUDING ALL)")
            start, consistent = _logical_slot(dsn, cur, slot)
            force_running_xacts(dsn, int(pg["version"]))
            streamed: list[OutputRecord] = []
            stream_plugin = AvroPlugin(settings)
            with tempfile.TemporaryDirectory(prefix="pgcdc-snap-native-") as spill:
                session = _session(pg, dsn, slot, start, consistent, spill, stream_plugin, streamed)
                for t in TABLES:
                    cur.execute(f"INSERT INTO twin_{t} SELECT * FROM {t}")
                cur.execute("SELECT pg_current_wal_lsn()::text")
                row = cur.fetchone()
                assert row is not None
                try:
                    _pump(pg, session, start, parse_lsn(row[0]))
                    stream_schemas = _schemas(stream_plugin)
                finally:
                    session.close()
            snap_rows = _decoded(snap_schemas, got)
            stream_rows = _decoded(stream_schemas, streamed)
            for t in TABLES:
                assert snap_rows.get(t), f"no snapshot rows of {t}"
                assert snap_rows[t] == stream_rows.get(t), f"{t}: snapshot rows != stream rows"
            cur.execute("SELECT pg_drop_replication_slot(%s)", (slot,))
        conn.close()
    finally:
        try:
            teardown(dsn, phys)
        finally:
            admin.cursor().execute(f"DROP DATABASE IF EXISTS {db} WITH (FORCE)")
            admin.close()
