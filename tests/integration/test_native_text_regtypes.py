"""The reg* types and aclitem through the text plugin's native writer, against test_decoding.

A table with a column of each reg* type (regclass, regtype, regproc, regprocedure,
regoper, regoperator, regrole, regnamespace, regconfig, regdictionary, regcollation),
aclitem (PUBLIC, a role whose name needs quoting, a role with a non-ASCII name, an OID
that is no role; grant options; 15's 12-byte form, 16's 16-byte one), regclass[] (a
table whose name holds a quote and a comma, so array_out quotes and escapes it and
print_literal doubles its quote), regtype[] and aclitem[] (its elements in 15's or
16's layout, told by the array's alignment, with a NULL among them), on a real server
(run for PG15 and PG16: `-k "pg15 or pg16"`), through INSERT, UPDATE and DELETE. pgcdc's
lines must equal a real test_decoding slot's, line for line, under PGCDC_IMPL=native
and =python. Under native the test also requires that the table has a plan and that
exactly the rows naming an OID no resolver had resolved yet fell back, each with its
typed reason (the Python path resolving it into the cache, `CatalogNames.native`),
every other row being written by Rust. A second table has composites with reg* and
aclitem fields: a composite column, a nested one and an array of composites; a third
domains over regclass, regtype, aclitem and the built-in ranges.
"""

from __future__ import annotations

import uuid
from typing import Any

import psycopg2
import pytest

from service.output.text import TestDecodingPlugin
from tests.connectors.avro.test_codec_pipeline import _dsn
from tests.integration.decoding_support import compare
from tests.integration.test_text_plugin_vs_test_decoding import assert_same

pytestmark = pytest.mark.integration

COLUMNS = (
    "id int4 PRIMARY KEY, cl regclass, ty regtype, pr regproc, prd regprocedure,"
    " op regoper, opr regoperator, ro regrole, ns regnamespace, cfg regconfig,"
    " dict regdictionary, coll regcollation, acl aclitem, acl2 aclitem NOT NULL,"
    " cls regclass[], tys regtype[], acls aclitem[]"
)

# One row's values; {q} is the role whose name needs quoting, {u} the non-ASCII one,
# as literals; {qn} and {un} their quoted identifiers.
ROW = """
  'nt_target'::regclass, 'int4'::regtype, 'now'::regproc, 'sum(int4)'::regprocedure,
  '||/'::regoper, '+(int4,int4)'::regoperator, {q}::regrole, 'pg_catalog'::regnamespace,
  'english'::regconfig, 'simple'::regdictionary, '"C"'::regcollation,
  '{qn}=a*r*D/{un}'::aclitem, '=w/{qn}'::aclitem,
  ARRAY['nt_target'::regclass, NULL, '"it''s, odd"'::regclass],
  ARRAY['int4'::regtype, 'timestamp with time zone'::regtype, 'nt_reg'::regtype],
  ARRAY['{qn}=a*r*D/{un}'::aclitem, NULL, '=w/{qn}'::aclitem, '{un}=Tt*/{qn}'::aclitem]
"""


class _Counting(TestDecodingPlugin):
    """The text plugin, kept so the test can read its native counters."""


@pytest.mark.parametrize("impl", ["native", "python"])
def test_reg_types_and_aclitem_native_text_equals_test_decoding(
    pg: dict[str, Any], impl: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every reg* type, aclitem and arrays of them print as test_decoding prints them;
    natively, but for one fallback per row naming an OID not resolved yet."""
    monkeypatch.setenv("PGCDC_IMPL", impl)
    tag = uuid.uuid4().hex[:8]
    quoted, unicode = f'"Text Role {tag}"', f'"rôle_t{tag}"'
    q, u = (f"'{name.replace(chr(39), chr(39) * 2)}'" for name in (quoted, unicode))
    values = ROW.format(q=q, u=u, qn=quoted, un=unicode)
    plugins: list[_Counting] = []

    def make() -> _Counting:
        plugins.append(_Counting())
        return plugins[-1]

    admin = psycopg2.connect(_dsn(pg, "postgres"))
    admin.autocommit = True
    admin.cursor().execute(f"CREATE ROLE {quoted}")
    admin.cursor().execute(f"CREATE ROLE {unicode}")
    try:
        out = compare(
            pg,
            [
                "CREATE TABLE nt_target (x int4)",
                """CREATE TABLE "it's, odd" (x int4)""",
                f"CREATE TABLE nt_reg ({COLUMNS})",
            ],
            [
                # the first row misses every name; the Python path resolves them
                f"INSERT INTO nt_reg SELECT g, {values} FROM generate_series(1, 50) g",
                # a grantee that is no role (printed as its OID): a new name, once
                "INSERT INTO nt_reg (id, acl2) VALUES (100, makeaclitem(424242, 10,"
                " 'TRUNCATE', true))",
                # 'text' is a new regtype name: the first updated row falls back
                "UPDATE nt_reg SET ty = 'text'::regtype WHERE id <= 10",
                "DELETE FROM nt_reg WHERE id BETWEEN 11 AND 15",
            ],
            plugin=make,
        )
    finally:
        admin.cursor().execute(f"DROP ROLE {quoted}")
        admin.cursor().execute(f"DROP ROLE {unicode}")
        admin.close()
    assert_same(
        out,
        "table public.nt_reg: INSERT: id[integer]:1 cl[regclass]:'nt_target'"
        " ty[regtype]:'integer'…",
        "table public.nt_reg: INSERT: id[integer]:100 cl[regclass]:null …",
        "table public.nt_reg: DELETE: id[integer]:11",
        min_lines=50 + 1 + 10 + 5,
    )
    inserts = [line for line in out.expected if "INSERT: id[integer]:2 " in line]
    assert len(inserts) == 1 and f"{quoted.strip(chr(34))}" in inserts[0], inserts
    # the quoted table name inside regclass[]: array_out's escapes, print_literal's ''
    assert """\\"it''s, odd\\\"""" in inserts[0], inserts
    assert " acl2[aclitem]:'424242=D*/" in "".join(out.expected)
    (plugin,) = plugins
    native = plugin.native_text
    if impl == "python":
        assert native is None
        return
    assert native is not None
    assert all(plan is not None for _table, plan in native._plans.values())
    assert any(t.name == "nt_reg" for t, _ in native._plans.values())
    # the first row and the first updated one (a regtype not cached), and the row whose
    # grantee is 424242 (a role OID not cached); all the others are Rust's
    assert native.fallbacks == {
        "reg* name not cached": 2,
        "aclitem role name not cached": 1,
    }, native.fallbacks
    assert native.native == 50 + 1 + 10 + 5 - 3, native.native


@pytest.mark.parametrize("impl", ["native", "python"])
def test_composites_with_reg_and_aclitem_fields_native_text_equals_test_decoding(
    pg: dict[str, Any], impl: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A composite column with regclass, regtype and aclitem fields, one nesting it
    beside a regrole field, and an array of the first (array_out of record_out's texts,
    a NULL and an empty array among them): record_out of the names the resolver
    resolved, each field
    quoted as record_out quotes it, then print_literal's quotes; natively but for the
    rows naming an OID not resolved yet."""
    monkeypatch.setenv("PGCDC_IMPL", impl)
    tag = uuid.uuid4().hex[:8]
    quoted = f'"Comp Role {tag}"'
    q = f"'{quoted.replace(chr(39), chr(39) * 2)}'"
    plugins: list[_Counting] = []

    def make() -> _Counting:
        plugins.append(_Counting())
        return plugins[-1]

    admin = psycopg2.connect(_dsn(pg, "postgres"))
    admin.autocommit = True
    admin.cursor().execute(f"CREATE ROLE {quoted}")
    try:
        out = compare(
            pg,
            [
                "CREATE TABLE nt_ctarget (x int4)",
                """CREATE TABLE "it's, (odd)" (x int4)""",
                "CREATE TYPE nt_named AS (c regclass, t regtype, a aclitem, n int4)",
                "CREATE TYPE nt_outer AS (i nt_named, r regrole)",
                "CREATE TABLE nt_regc (id int4 PRIMARY KEY, c nt_named, o nt_outer, cs nt_named[])",
            ],
            [
                # the first row misses every name; the Python path resolves them
                "INSERT INTO nt_regc SELECT g, ROW('\"it''s, (odd)\"'::regclass,"
                f" 'int4'::regtype, '{quoted}=r*/postgres'::aclitem, g)::nt_named,"
                " ROW(ROW('nt_ctarget'::regclass, 'text'::regtype, '=w/postgres'::aclitem,"
                f" NULL)::nt_named, {q}::regrole)::nt_outer,"
                " ARRAY[ROW('nt_ctarget'::regclass, 'int4[]'::regtype, NULL, -g)::nt_named,"
                " NULL, ROW(NULL, NULL, '=r/postgres'::aclitem, NULL)::nt_named]"
                " FROM generate_series(1, 30) g",
                "INSERT INTO nt_regc VALUES (100, ROW(NULL, NULL, NULL, NULL), NULL, '{}')",
                "UPDATE nt_regc SET c.n = -id WHERE id <= 10",
                "DELETE FROM nt_regc WHERE id BETWEEN 11 AND 15",
            ],
            plugin=make,
        )
    finally:
        admin.cursor().execute(f"DROP ROLE {quoted}")
        admin.close()
    assert_same(
        out,
        'table public.nt_regc: INSERT: id[integer]:1 c[nt_named]:\'("""it\'\'s, (odd)""",…',
        "table public.nt_regc: DELETE: id[integer]:11",
        min_lines=30 + 1 + 10 + 5,
    )
    (plugin,) = plugins
    native = plugin.native_text
    if impl == "python":
        assert native is None
        return
    assert native is not None
    assert all(plan is not None for t, plan in native._plans.values() if t.name == "nt_regc")
    assert any(t.name == "nt_regc" for t, _ in native._plans.values())
    # the first row names what no resolver has resolved yet; every later row is Rust's
    assert set(native.fallbacks) <= {
        "reg* name not cached",
        "aclitem role name not cached",
    }, native.fallbacks
    assert 1 <= sum(native.fallbacks.values()) <= 2, native.fallbacks
    assert native.native == 30 + 1 + 10 + 5 - sum(native.fallbacks.values()), native.native


@pytest.mark.parametrize("impl", ["native", "python"])
def test_domains_over_reg_aclitem_and_ranges_native_text_equals_test_decoding(
    pg: dict[str, Any], impl: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Domains over regclass, regtype and aclitem (printed from the resolver's names),
    over the built-in ranges int4range, numrange and tstzrange, and a domain over such a
    domain: the base type's output text, always quoted (print_literal of a type no
    built-in one); natively but for the rows naming an OID not resolved yet."""
    monkeypatch.setenv("PGCDC_IMPL", impl)
    plugins: list[_Counting] = []

    def make() -> _Counting:
        plugins.append(_Counting())
        return plugins[-1]

    out = compare(
        pg,
        [
            """CREATE TABLE "nt it's" (x int4)""",
            "CREATE DOMAIN nt_dcl AS regclass",
            "CREATE DOMAIN nt_dty AS regtype NOT NULL",
            "CREATE DOMAIN nt_dacl AS aclitem",
            "CREATE DOMAIN nt_dr4 AS int4range CHECK (NOT isempty(VALUE))",
            "CREATE DOMAIN nt_dnum AS numrange",
            "CREATE DOMAIN nt_dtz AS tstzrange",
            "CREATE DOMAIN nt_dr4b AS nt_dr4",
            "CREATE TABLE nt_dreg (id int4 PRIMARY KEY, cl nt_dcl, ty nt_dty, acl nt_dacl,"
            " r4 nt_dr4, rn nt_dnum, tz nt_dtz, r4b nt_dr4b)",
        ],
        [
            "INSERT INTO nt_dreg SELECT g, '\"nt it''s\"'::regclass, 'int4'::regtype,"
            " '=r*/postgres'::aclitem, int4range(g, g + 10), numrange(g / 3.0, NULL, '(]'),"
            " tstzrange('2024-01-01 00:00+00', NULL), int4range(NULL, g)"
            " FROM generate_series(1, 30) g",
            "INSERT INTO nt_dreg VALUES (100, NULL, 'text', NULL, NULL, 'empty', NULL, NULL)",
            "UPDATE nt_dreg SET ty = 'int8' WHERE id <= 10",
            "DELETE FROM nt_dreg WHERE id BETWEEN 11 AND 15",
        ],
        plugin=make,
    )
    assert_same(
        out,
        "table public.nt_dreg: INSERT: id[integer]:1 cl[nt_dcl]:'\"nt it''s\"' ty[nt_dty]:'…",
        "table public.nt_dreg: DELETE: id[integer]:11",
        min_lines=30 + 1 + 10 + 5,
    )
    (plugin,) = plugins
    native = plugin.native_text
    if impl == "python":
        assert native is None
        return
    assert native is not None
    assert all(plan is not None for t, plan in native._plans.values() if t.name == "nt_dreg")
    assert any(t.name == "nt_dreg" for t, _ in native._plans.values())
    # rows naming what no resolver has resolved yet: the first ('integer' and the
    # rest), 'text', 'bigint'; every other row is Rust's
    assert set(native.fallbacks) <= {
        "reg* name not cached",
        "aclitem role name not cached",
    }, native.fallbacks
    missed = sum(native.fallbacks.values())
    assert 1 <= missed <= 3, native.fallbacks
    assert native.native == 30 + 1 + 10 + 5 - missed, native.native
