"""pgcdc's text plugin against a real test_decoding slot, line for line, same WAL.

Each workload runs once on the server; test_decoding decodes it through a logical slot
and pgcdc decodes the same WAL from pg_wal with its own reader, decoder, reorder
buffer, snapshot builder and schema history. The two outputs must be identical.

Workloads follow the spirit of contrib/test_decoding's regression suite (ddl, rewrite,
toast, truncate, prepared/twophase, spill, messages). Every test asserts equality of
the full outputs and that the expected output holds the lines the workload must
produce, so a workload that silently decodes nothing cannot pass.
"""

from __future__ import annotations

import difflib
import io
from typing import Any

import pytest

from tests.fixtures.services import require_features
from tests.integration.decoding_support import DRAIN, Outcome, compare

pytestmark = pytest.mark.integration


def assert_same(out: Outcome, *must: str, min_lines: int = 1) -> None:
    """Full equality of both outputs (with a readable diff), and non-trivial output:
    every string in `must` is one of test_decoding's lines, or a prefix of one when it
    ends with '…'."""
    if out.actual != out.expected:
        diff = "\n".join(
            difflib.unified_diff(
                [line[:400] for line in out.expected],
                [line[:400] for line in out.actual],
                "test_decoding",
                "pgcdc",
                lineterm="",
                n=1,
            )
        )
        raise AssertionError(f"outputs differ:\n{diff}")
    print(f"line-for-line: {len(out.expected)} lines identical")  # shown with pytest -s
    assert len(out.expected) >= min_lines, out.expected
    for line in must:
        if line.endswith("…"):
            assert any(e.startswith(line[:-1]) for e in out.expected), (line, out.expected)
        else:
            assert line in out.expected, (line, out.expected)


def test_basic_dml_ddl_truncate_savepoint(pg: dict[str, Any]) -> None:
    """Inserts, updates, deletes, a rolled-back savepoint, ADD COLUMN DEFAULT, TRUNCATE."""
    out = compare(
        pg,
        ["CREATE TABLE t (id int PRIMARY KEY, data text, n numeric)"],
        [
            "INSERT INTO t VALUES (1, 'a', 1.5), (2, NULL, -3)",
            "BEGIN; UPDATE t SET data = 'it''s' WHERE id = 1; SAVEPOINT s;"
            " DELETE FROM t WHERE id = 2; ROLLBACK TO s;"
            " INSERT INTO t VALUES (3, repeat('x', 10), 0); COMMIT",
            "DELETE FROM t WHERE id = 3",
            "ALTER TABLE t ADD COLUMN extra int DEFAULT 7",
            "INSERT INTO t (id, data) VALUES (4, 'z')",
            "TRUNCATE t",
            "INSERT INTO t VALUES (5, 'after', 1)",
        ],
    )
    assert_same(out, "table public.t: TRUNCATE: (no-flags)", min_lines=15)


def test_ddl_in_the_middle_of_a_transaction(pg: dict[str, Any]) -> None:
    """ADD/DROP/RENAME COLUMN and ALTER TYPE between DML of one transaction: each change
    decodes with the definition its own transaction had at its LSN."""
    out = compare(
        pg,
        ["CREATE TABLE mid (id serial PRIMARY KEY, a text, b int)"],
        [
            "INSERT INTO mid (a, b) VALUES ('before', 1)",
            "BEGIN;"
            " INSERT INTO mid (a, b) VALUES ('one', 1);"
            " ALTER TABLE mid ADD COLUMN c text;"
            " INSERT INTO mid (a, b, c) VALUES ('two', 2, 'c2');"
            " ALTER TABLE mid DROP COLUMN a;"
            " INSERT INTO mid (b, c) VALUES (3, 'c3');"
            " UPDATE mid SET c = 'upd' WHERE id = 1;"
            " ALTER TABLE mid RENAME COLUMN b TO bee;"
            " INSERT INTO mid (bee, c) VALUES (4, 'c4');"
            " ALTER TABLE mid ADD COLUMN d int DEFAULT 42;"
            " INSERT INTO mid (bee) VALUES (5);"
            " DELETE FROM mid WHERE id = 2;"
            " COMMIT",
            "INSERT INTO mid (bee, c) VALUES (6, 'after')",
            "UPDATE mid SET d = d + 1 WHERE id = 1",
            "BEGIN;"
            " INSERT INTO mid (bee) VALUES (7);"
            " ALTER TABLE mid ALTER COLUMN bee TYPE bigint;"
            " INSERT INTO mid (bee) VALUES (8000000000);"
            " ALTER TABLE mid ALTER COLUMN c TYPE varchar(20);"
            " INSERT INTO mid (bee, c) VALUES (9, 'vc');"
            " COMMIT",
            "CREATE TABLE born (id int PRIMARY KEY, x text)",
            "BEGIN; CREATE TABLE born2 (k int, v text); INSERT INTO born2 VALUES (1, 'new');"
            " ALTER TABLE born2 ADD COLUMN w int; INSERT INTO born2 VALUES (2, 'w', 3); COMMIT",
            "INSERT INTO born VALUES (1, 'x')",
        ],
    )
    assert_same(
        out,
        "table public.mid: INSERT: id[integer]:2 a[text]:'one' b[integer]:1",
        "table public.mid: INSERT: id[integer]:3 a[text]:'two' b[integer]:2 c[text]:'c2'",
        "table public.mid: INSERT: id[integer]:4 b[integer]:3 c[text]:'c3'",
        "table public.mid: INSERT: id[integer]:5 bee[integer]:4 c[text]:'c4'",
        "table public.mid: INSERT: id[integer]:6 bee[integer]:5 c[text]:null d[integer]:42",
        "table public.mid: INSERT: id[integer]:9 bee[bigint]:8000000000 c[text]:null d[integer]:42",
        "table public.mid: INSERT: id[integer]:10 bee[bigint]:9 c[character varying]:'vc'"
        " d[integer]:42",
        "table public.born2: INSERT: k[integer]:2 v[text]:'w' w[integer]:3",
        min_lines=20,
    )


def test_alter_type_rewrites_are_not_emitted(pg: dict[str, Any]) -> None:
    """ALTER COLUMN TYPE (rewriting and not), ADD COLUMN with a volatile default,
    VACUUM FULL and CLUSTER: none of their rewrite output appears, and later changes
    of the table (in its new relfilenode) decode with the new definition.

    VACUUM FULL and CLUSTER fire no event trigger: pgcdc maps their relfilenodes through
    the live catalog at commit, so both decoders catch up (DRAIN) after them, as a
    worker that keeps up does."""
    out = compare(
        pg,
        [
            "CREATE TABLE rw (id int PRIMARY KEY, n int, s text)",
            "INSERT INTO rw SELECT g, g * 10, 's' || g FROM generate_series(1, 50) g",
        ],
        [
            "INSERT INTO rw VALUES (51, 510, 'pre')",
            "ALTER TABLE rw ALTER COLUMN n TYPE bigint",
            "INSERT INTO rw VALUES (52, 5200000000, 'big')",
            "ALTER TABLE rw ALTER COLUMN s TYPE varchar(30)",  # binary-coercible, no rewrite
            "UPDATE rw SET s = 'vc' WHERE id = 1",
            "ALTER TABLE rw ALTER COLUMN n TYPE text USING n::text || '!'",
            "DELETE FROM rw WHERE id = 2",
            "INSERT INTO rw VALUES (53, 'txt', 'x')",
            "ALTER TABLE rw ADD COLUMN r float8 DEFAULT random()",
            "UPDATE rw SET n = 'after-random' WHERE id = 3",
            "VACUUM FULL rw",
            DRAIN,
            "INSERT INTO rw (id, n, s, r) VALUES (54, 'vf', 'y', 0.5)",
            "CLUSTER rw USING rw_pkey",
            DRAIN,
            "UPDATE rw SET r = 1.25 WHERE id = 54",
            "BEGIN; ALTER TABLE rw ALTER COLUMN id TYPE bigint;"
            " INSERT INTO rw (id, n, s, r) VALUES (55, 'in-txn', 'z', 2); COMMIT",
            "BEGIN; ALTER TABLE rw ALTER COLUMN r TYPE numeric USING 1; ROLLBACK",
            "INSERT INTO rw (id, n, s, r) VALUES (56, 'after-abort', 'w', 3)",
        ],
    )
    assert_same(
        out,
        "table public.rw: INSERT: id[integer]:52 n[bigint]:5200000000 s[text]:'big'",
        "table public.rw: DELETE: id[integer]:2",
        "table public.rw: INSERT: id[integer]:54 n[text]:'vf' s[character varying]:'y'"
        " r[double precision]:0.5",
        "table public.rw: INSERT: id[bigint]:55 n[text]:'in-txn' s[character varying]:'z'"
        " r[double precision]:2",
        "table public.rw: INSERT: id[bigint]:56 n[text]:'after-abort'"
        " s[character varying]:'w' r[double precision]:3",
    )
    assert len([e for e in out.expected if e.startswith("table public.rw:")]) == 10


def test_truncate_variants(pg: dict[str, Any]) -> None:
    """TRUNCATE alone, RESTART IDENTITY, CASCADE through a foreign key, several tables
    in one statement, followed by inserts in the same transaction, and rolled back.

    TRUNCATE fires no event trigger: pgcdc maps the new relfilenodes through the live
    catalog at commit, so both decoders catch up (DRAIN) after each TRUNCATE, as a
    worker that keeps up does (see test_truncate_twice_while_lagging for the rest)."""
    out = compare(
        pg,
        [
            "CREATE TABLE tr1 (id serial PRIMARY KEY, v text)",
            "CREATE TABLE tr2 (id int PRIMARY KEY, v text)",
            "CREATE TABLE tr_ref (id int PRIMARY KEY, r int REFERENCES tr1(id))",
            "CREATE SCHEMA other",
            "CREATE TABLE other.tr3 (id int)",
        ],
        [
            "INSERT INTO tr1 (v) VALUES ('a'), ('b')",
            "INSERT INTO tr_ref VALUES (1, 1)",
            "TRUNCATE tr2",
            DRAIN,
            "TRUNCATE tr1 RESTART IDENTITY CASCADE",
            DRAIN,
            "INSERT INTO tr1 (v) VALUES ('restarted')",
            "TRUNCATE tr1, tr2, other.tr3, tr_ref",
            DRAIN,
            "BEGIN; INSERT INTO tr2 VALUES (1, 'pre'); TRUNCATE tr2;"
            " INSERT INTO tr2 VALUES (2, 'post'); UPDATE tr2 SET v = 'post2' WHERE id = 2;"
            " COMMIT",
            DRAIN,
            "INSERT INTO tr2 VALUES (3, 'later')",
            "BEGIN; TRUNCATE tr2; INSERT INTO tr2 VALUES (4, 'gone'); ROLLBACK",
            "DELETE FROM tr2 WHERE id = 3",
            "BEGIN; TRUNCATE tr1 RESTART IDENTITY CASCADE; INSERT INTO tr1 (v) VALUES ('x');"
            " SAVEPOINT s; TRUNCATE tr2; ROLLBACK TO s; INSERT INTO tr2 VALUES (5, 'kept');"
            " COMMIT",
            DRAIN,
            "TRUNCATE ONLY other.tr3 CONTINUE IDENTITY RESTRICT",
        ],
    )
    assert_same(
        out,
        "table public.tr2: TRUNCATE: (no-flags)",
        "table public.tr1, public.tr_ref: TRUNCATE: restart_seqs cascade",
        "table public.tr1: INSERT: id[integer]:1 v[text]:'restarted'",
        "table public.tr1, public.tr2, other.tr3, public.tr_ref: TRUNCATE: (no-flags)",
        "table public.tr2: INSERT: id[integer]:2 v[text]:'post'",
        "table public.tr2: DELETE: id[integer]:3",
        "table public.tr2: INSERT: id[integer]:5 v[text]:'kept'",
        "table other.tr3: TRUNCATE: (no-flags)",
    )


def test_toast(pg: dict[str, Any]) -> None:
    """TOAST: large incompressible values stored out of line (inserted, updated with the
    toasted column unchanged → unchanged-toast-datum, updated with it changed, deleted),
    compressible large values stored inline-compressed, EXTERNAL storage (out of line,
    not compressed) and REPLICA IDENTITY FULL with toasted old tuples (lz4: below)."""
    big = "(SELECT string_agg(md5(g::text || '{0}'), '') FROM generate_series(1, {1}) g)"
    setup = [
        "CREATE TABLE tt (id int PRIMARY KEY, other text, big text, small text)",
        "CREATE TABLE tt_ext (id int PRIMARY KEY, big text)",
        "ALTER TABLE tt_ext ALTER COLUMN big SET STORAGE EXTERNAL",
        "CREATE TABLE tt_full (id int, big text, n int)",
        "ALTER TABLE tt_full REPLICA IDENTITY FULL",
        "CREATE TABLE tt_arr (id int PRIMARY KEY, arr text[], j jsonb, b bytea)",
    ]
    work = [
        f"INSERT INTO tt VALUES (1, 'o1', {big.format('a', 400)}, 's')",
        "INSERT INTO tt VALUES (2, 'o2', repeat('compressible ', 2000), 's2')",
        "UPDATE tt SET other = 'o1-changed' WHERE id = 1",
        "UPDATE tt SET other = 'o2-changed' WHERE id = 2",
        f"UPDATE tt SET big = {big.format('b', 300)} WHERE id = 1",
        "UPDATE tt SET id = 10 WHERE id = 1",
        "DELETE FROM tt WHERE id = 10",
        f"BEGIN; INSERT INTO tt VALUES (3, 'o3', {big.format('c', 500)}, NULL);"
        " UPDATE tt SET small = 'in-txn' WHERE id = 3; COMMIT",
        "INSERT INTO tt_ext VALUES (1, repeat('e', 5000))",
        "UPDATE tt_ext SET big = big || 'f' WHERE id = 1",
        f"INSERT INTO tt_full VALUES (1, {big.format('d', 300)}, 1)",
        "UPDATE tt_full SET n = 2",
        "DELETE FROM tt_full",
        "INSERT INTO tt_arr SELECT 1, array_agg(md5(g::text)), jsonb_agg(md5(g::text)),"
        " string_agg(md5(g::text), '')::bytea FROM generate_series(1, 400) g",
        "UPDATE tt_arr SET id = 2",
    ]
    out = compare(pg, setup, work)
    assert_same(
        out,
        "table public.tt: UPDATE: id[integer]:1 other[text]:'o1-changed'"
        " big[text]:unchanged-toast-datum small[text]:'s'",
        "table public.tt: UPDATE: id[integer]:2 other[text]:'o2-changed' big[text]:'compressible …",
        "table public.tt: DELETE: id[integer]:10",
        "table public.tt_full: DELETE: id[integer]:1 big[text]:…",
        "table public.tt_arr: UPDATE: old-key: id[integer]:1 new-tuple: id[integer]:2"
        " arr[text[]]:unchanged-toast-datum j[jsonb]:unchanged-toast-datum"
        " b[bytea]:unchanged-toast-datum",
    )
    assert sum(line.count("unchanged-toast-datum") for line in out.expected) >= 5


def test_toast_lz4(pg: dict[str, Any]) -> None:
    """lz4-compressed values, out of line and inline, and an unchanged lz4 datum on a key
    update, on the builds with lz4 (not this pg18 build)."""
    require_features(pg, "lz4")
    big = "(SELECT string_agg(md5(g::text || '{0}'), '') FROM generate_series(1, {1}) g)"
    out = compare(
        pg,
        ["CREATE TABLE tt_lz4 (id int PRIMARY KEY, big text COMPRESSION lz4)"],
        [
            f"INSERT INTO tt_lz4 VALUES (1, {big.format('l', 300)} || repeat('z', 9000))",
            "INSERT INTO tt_lz4 VALUES (2, repeat('lz4 ', 1000))",
            "UPDATE tt_lz4 SET id = 3 WHERE id = 2",
            "SELECT pg_column_compression(big) FROM tt_lz4",
        ],
    )
    assert_same(
        out,
        "table public.tt_lz4: INSERT: id[integer]:1 big[text]:…",
        "table public.tt_lz4: INSERT: id[integer]:2 big[text]:'lz4 lz4 …",
        "table public.tt_lz4: UPDATE: old-key: id[integer]:2 new-tuple: id[integer]:3"
        " big[text]:'lz4 lz4 …",
    )


def test_savepoints(pg: dict[str, Any]) -> None:
    """Nested savepoints, ROLLBACK TO, RELEASE, and subtransactions with DDL that
    rolls back: only surviving subtransactions' changes appear, in LSN order."""
    out = compare(
        pg,
        ["CREATE TABLE sp (id int PRIMARY KEY, v text)"],
        [
            "BEGIN; INSERT INTO sp VALUES (1, 'top'); SAVEPOINT a;"
            " INSERT INTO sp VALUES (2, 'a'); SAVEPOINT b; INSERT INTO sp VALUES (3, 'b');"
            " RELEASE b; SAVEPOINT c; INSERT INTO sp VALUES (4, 'c'); ROLLBACK TO c;"
            " INSERT INTO sp VALUES (5, 'after-c'); RELEASE a; COMMIT",
            "BEGIN; SAVEPOINT x; ALTER TABLE sp ADD COLUMN gone int;"
            " INSERT INTO sp VALUES (6, 'with-gone', 6); ROLLBACK TO x;"
            " INSERT INTO sp VALUES (7, 'without'); COMMIT",
            "BEGIN; SAVEPOINT y; ALTER TABLE sp ADD COLUMN kept int DEFAULT 1;"
            " INSERT INTO sp VALUES (8, 'kept', 8); RELEASE y;"
            " SAVEPOINT z; ALTER TABLE sp DROP COLUMN kept; ROLLBACK TO z;"
            " INSERT INTO sp VALUES (9, 'kept-still', 9); COMMIT",
            "BEGIN; SAVEPOINT p; INSERT INTO sp VALUES (10, 'aborted-top'); RELEASE p; ROLLBACK",
            "BEGIN; SAVEPOINT q1; SAVEPOINT q2; SAVEPOINT q3; UPDATE sp SET v = 'deep'"
            " WHERE id = 1; RELEASE q3; ROLLBACK TO q2; DELETE FROM sp WHERE id = 2;"
            " RELEASE q1; COMMIT",
            "BEGIN; SAVEPOINT e; SELECT 1; RELEASE e; COMMIT",
            "INSERT INTO sp VALUES (11, 'last', 11)",
        ],
    )
    assert_same(
        out,
        "table public.sp: INSERT: id[integer]:3 v[text]:'b'",
        "table public.sp: INSERT: id[integer]:5 v[text]:'after-c'",
        "table public.sp: INSERT: id[integer]:7 v[text]:'without'",
        "table public.sp: INSERT: id[integer]:8 v[text]:'kept' kept[integer]:8",
        "table public.sp: INSERT: id[integer]:9 v[text]:'kept-still' kept[integer]:9",
        "table public.sp: DELETE: id[integer]:2",
        "table public.sp: INSERT: id[integer]:11 v[text]:'last' kept[integer]:11",
    )
    assert not any("'a'" in e and "id[integer]:4" in e for e in out.expected)
    assert not any("aborted-top" in e or "'deep'" in e for e in out.expected)


def test_two_phase_default_slot(pg: dict[str, Any]) -> None:
    """PREPARE TRANSACTION then COMMIT/ROLLBACK PREPARED with a slot created without
    two_phase: test_decoding prints the transaction at COMMIT PREPARED as a plain
    BEGIN ... COMMIT, and nothing for one rolled back."""
    out = compare(
        pg,
        ["CREATE TABLE tp (id int PRIMARY KEY, v text)"],
        [
            "BEGIN; INSERT INTO tp VALUES (1, 'p1'); PREPARE TRANSACTION 'g1'",
            "INSERT INTO tp VALUES (2, 'between')",
            "COMMIT PREPARED 'g1'",
            "BEGIN; INSERT INTO tp VALUES (3, 'p3'); PREPARE TRANSACTION 'g''2'",
            "ROLLBACK PREPARED 'g''2'",
            "BEGIN; ALTER TABLE tp ADD COLUMN w int; INSERT INTO tp VALUES (4, 'ddl', 4);"
            " SAVEPOINT s; INSERT INTO tp VALUES (5, 'sub', 5); ROLLBACK TO s;"
            " PREPARE TRANSACTION 'g3'",
            "COMMIT PREPARED 'g3'",
            "INSERT INTO tp VALUES (6, 'after', 6)",
        ],
    )
    assert_same(
        out,
        "table public.tp: INSERT: id[integer]:1 v[text]:'p1'",
        "table public.tp: INSERT: id[integer]:4 v[text]:'ddl' w[integer]:4",
        "table public.tp: INSERT: id[integer]:6 v[text]:'after' w[integer]:6",
    )
    assert not any("PREPARE" in e or "'p3'" in e for e in out.expected)
    assert out.expected.index(
        "table public.tp: INSERT: id[integer]:2 v[text]:'between'"
    ) < out.expected.index("table public.tp: INSERT: id[integer]:1 v[text]:'p1'")


def test_two_phase_slot(pg: dict[str, Any]) -> None:
    """With a two_phase slot, test_decoding prints a prepared transaction at PREPARE
    (PREPARE TRANSACTION 'gid') and then COMMIT PREPARED / ROLLBACK PREPARED.

    The slot is drained after each PREPARE (DRAIN): PostgreSQL decodes a prepared
    transaction with the catalog of decoding time, and drops the changes of one already
    rolled back when a catalog lookup notices it ("concurrent abort"), so reading the
    slot only at the end would make its output depend on timing, not on the WAL."""
    out = compare(
        pg,
        ["CREATE TABLE tp2 (id int PRIMARY KEY, v text)"],
        [
            "BEGIN; INSERT INTO tp2 VALUES (1, 'p1'); PREPARE TRANSACTION 'g1'",
            "INSERT INTO tp2 VALUES (2, 'between')",
            DRAIN,
            "COMMIT PREPARED 'g1'",
            "BEGIN; INSERT INTO tp2 VALUES (3, 'p3'); PREPARE TRANSACTION 'g''2'",
            DRAIN,
            "ROLLBACK PREPARED 'g''2'",
            "BEGIN; INSERT INTO tp2 VALUES (4, 'p4'); PREPARE TRANSACTION 'g3'",
            "BEGIN; INSERT INTO tp2 VALUES (5, 'p5'); PREPARE TRANSACTION 'g4'",
            DRAIN,
            "ROLLBACK PREPARED 'g3'",
            "COMMIT PREPARED 'g4'",
            "BEGIN; PREPARE TRANSACTION 'empty'",
            "COMMIT PREPARED 'empty'",
        ],
        {"include-xids": "0"},
        two_phase=True,
    )
    assert_same(
        out,
        "PREPARE TRANSACTION 'g1'",
        "COMMIT PREPARED 'g1'",
        "PREPARE TRANSACTION 'g''2'",
        "ROLLBACK PREPARED 'g''2'",
        "table public.tp2: INSERT: id[integer]:4 v[text]:'p4'",
        "ROLLBACK PREPARED 'g3'",
        "COMMIT PREPARED 'g4'",
    )


def test_on_conflict(pg: dict[str, Any]) -> None:
    """INSERT ... ON CONFLICT DO UPDATE / DO NOTHING: speculative inserts confirmed,
    conflicts turned into updates, super-deleted speculative tuples never shown."""
    out = compare(
        pg,
        ["CREATE TABLE oc (id int PRIMARY KEY, v text, n int DEFAULT 0)"],
        [
            "INSERT INTO oc VALUES (1, 'one') ON CONFLICT DO NOTHING",
            "INSERT INTO oc VALUES (1, 'dup') ON CONFLICT DO NOTHING",
            "INSERT INTO oc VALUES (1, 'upsert') ON CONFLICT (id)"
            " DO UPDATE SET v = excluded.v, n = oc.n + 1",
            "INSERT INTO oc VALUES (2, 'two'), (1, 'again') ON CONFLICT (id)"
            " DO UPDATE SET n = oc.n + 10",
            "BEGIN; INSERT INTO oc VALUES (3, 'three') ON CONFLICT DO NOTHING;"
            " SAVEPOINT s; INSERT INTO oc VALUES (4, 'four') ON CONFLICT DO NOTHING;"
            " ROLLBACK TO s; INSERT INTO oc VALUES (3, 'x') ON CONFLICT (id)"
            " DO UPDATE SET v = 'three-upd'; COMMIT",
        ],
    )
    assert_same(
        out,
        "table public.oc: INSERT: id[integer]:1 v[text]:'one' n[integer]:0",
        "table public.oc: UPDATE: id[integer]:1 v[text]:'upsert' n[integer]:1",
        "table public.oc: UPDATE: id[integer]:1 v[text]:'upsert' n[integer]:11",
        "table public.oc: UPDATE: id[integer]:3 v[text]:'three-upd' n[integer]:0",
    )
    assert not any("'four'" in e or "'dup'" in e for e in out.expected)


def test_replica_identity_variants(pg: dict[str, Any]) -> None:
    """UPDATE and DELETE under REPLICA IDENTITY DEFAULT with and without a primary key,
    FULL, USING INDEX and NOTHING, with key changes and NULLs in old tuples."""
    out = compare(
        pg,
        [
            "CREATE TABLE ri_pk (a int, b int, c text, PRIMARY KEY (a, b))",
            "CREATE TABLE ri_nopk (a int, c text)",
            "CREATE TABLE ri_full (a int, b text, c int)",
            "ALTER TABLE ri_full REPLICA IDENTITY FULL",
            "CREATE TABLE ri_idx (a int NOT NULL, b int NOT NULL, c text)",
            "CREATE UNIQUE INDEX ri_idx_b ON ri_idx (b)",
            "ALTER TABLE ri_idx REPLICA IDENTITY USING INDEX ri_idx_b",
            "CREATE TABLE ri_nothing (a int PRIMARY KEY, c text)",
            "ALTER TABLE ri_nothing REPLICA IDENTITY NOTHING",
        ],
        [
            "INSERT INTO ri_pk VALUES (1, 1, 'x'), (2, 2, NULL)",
            "UPDATE ri_pk SET c = 'y' WHERE a = 1",
            "UPDATE ri_pk SET b = 10 WHERE a = 1",
            "DELETE FROM ri_pk WHERE a = 2",
            "INSERT INTO ri_nopk VALUES (1, 'x')",
            "UPDATE ri_nopk SET c = 'y'",
            "DELETE FROM ri_nopk",
            "INSERT INTO ri_full VALUES (1, 'x', NULL), (2, NULL, 2)",
            "UPDATE ri_full SET b = 'y' WHERE a = 1",
            "UPDATE ri_full SET c = 3 WHERE a = 2",
            "DELETE FROM ri_full",
            "INSERT INTO ri_idx VALUES (1, 1, 'x')",
            "UPDATE ri_idx SET c = 'y'",
            "UPDATE ri_idx SET b = 2",
            "UPDATE ri_idx SET a = 5",
            "DELETE FROM ri_idx",
            "INSERT INTO ri_nothing VALUES (1, 'x')",
            "UPDATE ri_nothing SET a = 2",
            "DELETE FROM ri_nothing",
            "ALTER TABLE ri_nopk REPLICA IDENTITY FULL",
            "INSERT INTO ri_nopk VALUES (3, 'z')",
            "DELETE FROM ri_nopk",
            "ALTER TABLE ri_full REPLICA IDENTITY DEFAULT",
            "INSERT INTO ri_full VALUES (4, 'w', 4)",
            "DELETE FROM ri_full",
        ],
    )
    assert_same(
        out,
        "table public.ri_pk: UPDATE: old-key: a[integer]:1 b[integer]:1 new-tuple:"
        " a[integer]:1 b[integer]:10 c[text]:'y'",
        "table public.ri_pk: DELETE: a[integer]:2 b[integer]:2",
        "table public.ri_nopk: DELETE: (no-tuple-data)",
        "table public.ri_full: UPDATE: old-key: a[integer]:1 b[text]:'x' new-tuple:"
        " a[integer]:1 b[text]:'y' c[integer]:null",
        "table public.ri_full: DELETE: a[integer]:2 c[integer]:3",
        "table public.ri_idx: UPDATE: old-key: b[integer]:1 new-tuple: a[integer]:1"
        " b[integer]:2 c[text]:'y'",
        "table public.ri_idx: DELETE: b[integer]:2",
        "table public.ri_nothing: DELETE: (no-tuple-data)",
        "table public.ri_nopk: DELETE: a[integer]:3 c[text]:'z'",
    )


def _copy(table: str, data: str) -> Any:
    def step(conns: list[Any]) -> None:
        conns[0].cursor().copy_expert(f"COPY {table} FROM STDIN", io.StringIO(data))

    return step


def test_multi_insert(pg: dict[str, Any]) -> None:
    """COPY ... FROM STDIN (HEAP2 MULTI_INSERT, several tuples per record, across
    pages) and INSERT ... SELECT, in and out of explicit transactions."""
    null = "\\N"
    rows = "".join(f"{i}\tcopied {i}\t{null if i % 7 == 0 else i * 1.5}\n" for i in range(1, 1201))
    out = compare(
        pg,
        [
            "CREATE TABLE mi (id int PRIMARY KEY, v text, f float8)",
            "CREATE TABLE mi2 (id int, v text)",
        ],
        [
            _copy("mi", rows),
            "INSERT INTO mi2 SELECT id, v FROM mi WHERE id <= 30",
            "BEGIN",
            _copy("mi2", "9001\tin txn\n9002\t\\N\n"),
            "DELETE FROM mi WHERE id > 5",
            "COMMIT",
        ],
    )
    assert_same(
        out,
        "table public.mi: INSERT: id[integer]:1 v[text]:'copied 1' f[double precision]:1.5",
        "table public.mi: INSERT: id[integer]:7 v[text]:'copied 7' f[double precision]:null",
        "table public.mi: INSERT: id[integer]:1200 v[text]:'copied 1200' f[double precision]:1800",
        "table public.mi2: INSERT: id[integer]:9002 v[text]:null",
        min_lines=1200 + 30 + 2 + 1195,
    )


def test_logical_messages(pg: dict[str, Any]) -> None:
    """Transactional messages (inside transactions, also aborted ones and rolled-back
    subtransactions) and non-transactional ones (printed at once, even from aborted
    transactions), with empty and non-ASCII payloads."""
    out = compare(
        pg,
        ["CREATE TABLE msg (id int)"],
        [
            "SELECT pg_logical_emit_message(true, 'pfx', 'tx message')",
            "SELECT pg_logical_emit_message(false, 'pfx', 'non-tx message')",
            "BEGIN; INSERT INTO msg VALUES (1);"
            " SELECT pg_logical_emit_message(true, 'pfx', 'in txn');"
            " SELECT pg_logical_emit_message(false, 'nt', 'nt in txn');"
            " COMMIT",
            "BEGIN; SELECT pg_logical_emit_message(true, 'pfx', 'aborted');"
            " SELECT pg_logical_emit_message(false, 'nt', 'survives abort'); ROLLBACK",
            "BEGIN; INSERT INTO msg VALUES (2); SAVEPOINT s;"
            " SELECT pg_logical_emit_message(true, 'pfx', 'rolled back sub'); ROLLBACK TO s;"
            " SELECT pg_logical_emit_message(true, 'pfx', ''); COMMIT",
            "SELECT pg_logical_emit_message(true, 'ünï', 'ĉontent ✓')",
            "SELECT pg_logical_emit_message(false, 'bytes', '\\x00ff'::bytea)",
            # A commit after it, so the workload's end lies past the non-transactional
            # message whichever decoder reads first (it is the tail of the WAL otherwise).
            "INSERT INTO msg VALUES (3)",
        ],
    )
    assert_same(
        out,
        "message: transactional: 1 prefix: pfx, sz: 10 content:tx message",
        "message: transactional: 0 prefix: pfx, sz: 14 content:non-tx message",
        "message: transactional: 0 prefix: nt, sz: 14 content:survives abort",
        "message: transactional: 1 prefix: pfx, sz: 0 content:",
    )
    assert not any("content:aborted" in e or "rolled back sub" in e for e in out.expected)


def test_interleaved_transactions(pg: dict[str, Any]) -> None:
    """Two sessions interleave their transactions (and DDL): output is in commit order,
    each transaction whole, with the definitions each one saw."""
    out = compare(
        pg,
        ["CREATE TABLE il (id int PRIMARY KEY, who text)"],
        [
            (0, "BEGIN"),
            (1, "BEGIN"),
            (0, "INSERT INTO il VALUES (1, 'A')"),
            (1, "INSERT INTO il VALUES (2, 'B')"),
            (0, "INSERT INTO il VALUES (3, 'A')"),
            (1, "SAVEPOINT s"),
            (1, "INSERT INTO il VALUES (4, 'B-sub')"),
            (1, "COMMIT"),
            (0, "INSERT INTO il VALUES (5, 'A')"),
            (0, "COMMIT"),
            (0, "BEGIN"),
            (1, "BEGIN"),
            (0, "CREATE TABLE il2 (k int)"),
            (1, "INSERT INTO il VALUES (6, 'B2')"),
            (0, "INSERT INTO il2 VALUES (1)"),
            (1, "UPDATE il SET who = 'B2u' WHERE id = 6"),
            (0, "ROLLBACK"),
            (1, "COMMIT"),
            (0, "BEGIN"),
            (1, "BEGIN"),
            (0, "ALTER TABLE il ADD COLUMN extra text DEFAULT 'e'"),
            (0, "INSERT INTO il VALUES (7, 'A3', 'x')"),
            (0, "COMMIT"),
            (1, "INSERT INTO il VALUES (8, 'B3')"),
            (1, "COMMIT"),
        ],
    )
    assert_same(
        out,
        "table public.il: INSERT: id[integer]:4 v[text]:'B-sub'".replace("v[", "who["),
        "table public.il: UPDATE: id[integer]:6 who[text]:'B2u'",
        "table public.il: INSERT: id[integer]:8 who[text]:'B3' extra[text]:'e'",
    )
    b = out.expected.index("table public.il: INSERT: id[integer]:2 who[text]:'B'")
    a = out.expected.index("table public.il: INSERT: id[integer]:1 who[text]:'A'")
    assert b < a


def test_quoted_identifiers_and_schemas(pg: dict[str, Any]) -> None:
    """Mixed-case, keyword, spaced and quote-containing names of schemas, tables and
    columns are quoted exactly as quote_identifier() does."""
    out = compare(
        pg,
        [
            'CREATE SCHEMA "My Schema"',
            "CREATE SCHEMA app",
            'CREATE TABLE "My Schema"."Order" ("select" int PRIMARY KEY, "User Name" text,'
            ' "quo""te" int, "from" text, "Ünï" text, normal_col int, "offset" int,'
            ' "$x" int, "_ok1" int, "1st" int)',
            'CREATE TABLE app.user_ (id int PRIMARY KEY, "desc" text, value text,'
            ' "name" text, "type" text, "year" int)',
        ],
        [
            "INSERT INTO \"My Schema\".\"Order\" VALUES (1, 'a b', 2, 'f', 'ü', 3, 4, 5, 6, 7)",
            'UPDATE "My Schema"."Order" SET "select" = 2',
            'DELETE FROM "My Schema"."Order"',
            "INSERT INTO app.user_ VALUES (1, 'd', 'v', 'n', 't', 2000)",
            'TRUNCATE "My Schema"."Order", app.user_',
        ],
    )
    assert_same(
        out,
        'table "My Schema"."Order": DELETE: "select"[integer]:2',
        'table "My Schema"."Order", app.user_: TRUNCATE: (no-flags)',
    )


def test_spill_small_work_mem(pg: dict[str, Any]) -> None:
    """A 10,000-row transaction (plus updates and a subtransaction) decoded with
    work_mem 64 kB spills to disk and replays identically."""
    out = compare(
        pg,
        ["CREATE TABLE sp_big (id int PRIMARY KEY, v text, n int)"],
        [
            "BEGIN; INSERT INTO sp_big SELECT g, 'row ' || g, g % 13 FROM"
            " generate_series(1, 10000) g; SAVEPOINT s;"
            " UPDATE sp_big SET n = -1 WHERE id % 1000 = 0; RELEASE s;"
            " SAVEPOINT t; DELETE FROM sp_big WHERE id < 100; ROLLBACK TO t;"
            " DELETE FROM sp_big WHERE id > 9990; COMMIT",
            "INSERT INTO sp_big VALUES (0, 'small', 0)",
        ],
        work_mem=64 * 1024,
    )
    assert_same(
        out,
        "table public.sp_big: INSERT: id[integer]:10000 v[text]:'row 10000' n[integer]:3",
        "table public.sp_big: UPDATE: id[integer]:1000 v[text]:'row 1000' n[integer]:-1",
        "table public.sp_big: DELETE: id[integer]:9991",
        min_lines=10000 + 10 + 10 + 5,
    )
    assert out.session.rb.stats.spill_txns >= 1
