"""Line-for-line against test_decoding for the built-in types of issue 13, part 1.

Geometric types, tsvector/tsquery, jsonpath (the 17+ item methods on PG18), the
built-in and a user-defined multirange, txid_snapshot/pg_snapshot, aclitem (12 bytes on
PG15, 16 on PG18), the reg* family and xml declarations (PG15: the PG18 build has no
libxml): scalars, arrays, NULLs and edge values, through INSERT, UPDATE (REPLICA
IDENTITY FULL, so old tuples print too) and DELETE. Same method as
test_text_plugin_vs_test_decoding.py: one WAL, a real test_decoding slot, identical
output. Under the native core (PGCDC_IMPL=native) the jsonpath table is printed by the
native writer (a plan, no jsonpath fallback), and so is the aclitem / reg* table (a plan;
its rows naming a catalog OID not resolved yet are Python's, with the typed reasons).
"""

from __future__ import annotations

from typing import Any

import pytest

from service.impl import native_text_core
from service.output.text import TestDecodingPlugin
from tests.integration.decoding_support import compare
from tests.integration.jsonpath_cases import JSONPATHS, JSONPATHS_17
from tests.integration.test_text_plugin_vs_test_decoding import assert_same

pytestmark = pytest.mark.integration

SETUP = [
    "CREATE TYPE floatrange AS RANGE (subtype = float8)",
    "DO $$ BEGIN IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'acl_role') THEN"
    " CREATE ROLE acl_role; END IF;"
    " EXCEPTION WHEN unique_violation OR duplicate_object THEN NULL; END $$",
    "CREATE TABLE geo (id int PRIMARY KEY, p point, l line, s lseg, b box, pa path,"
    " po polygon, c circle, pts point[], bxs box[])",
    "CREATE TABLE ts (id int PRIMARY KEY, v tsvector, q tsquery, vs tsvector[], qs tsquery[])",
    "CREATE TABLE jp (id int PRIMARY KEY, j jsonpath, js jsonpath[])",
    "CREATE TABLE mr (id int PRIMARY KEY, i int4multirange, n nummultirange,"
    " d datemultirange, t tstzmultirange, f floatmultirange, a int8multirange[])",
    "CREATE TABLE misc (id int PRIMARY KEY, ts txid_snapshot, ps pg_snapshot,"
    " acl aclitem, acls aclitem[], rc regclass, rt regtype, rp regproc, rpd regprocedure,"
    " ro regoper, ror regoperator, rr regrole, rn regnamespace, rcf regconfig,"
    " rd regdictionary, rcl regcollation, rts regtype[])",
    "ALTER TABLE geo REPLICA IDENTITY FULL",
    "ALTER TABLE ts REPLICA IDENTITY FULL",
    "ALTER TABLE jp REPLICA IDENTITY FULL",
    "ALTER TABLE mr REPLICA IDENTITY FULL",
    "ALTER TABLE misc REPLICA IDENTITY FULL",
]

WORKLOAD = [
    "INSERT INTO geo VALUES (1, '(1.5,-0)', '{1,-1,0.1}', '[(0,0),(1e-300,1e300)]',"
    " '(1,1),(0,0)', '[(0,0),(1,1),(2,0)]', '((0,0),(1,1),(2,0))', '<(1,2),0.5>',"
    " '{\"(1,2)\",NULL}', ARRAY['(1,1),(0,0)'::box, '(3,3),(2,2)'])",
    "INSERT INTO geo VALUES (2, '(NaN,Infinity)', '{0.30000000000000004,2,-3}', NULL,"
    " '(-1,-1),(-2,-2)', '((0,0),(5e-324,1))', '((1,1))', '<(0,0),1e15>', '{}', NULL)",
    "INSERT INTO geo (id) VALUES (3)",
    "UPDATE geo SET p = '(2,3)' WHERE id = 1",
    "DELETE FROM geo WHERE id = 2",
    "INSERT INTO ts VALUES (1, 'a:1 b:2,3A c:4B,5C,6D', 'a & (b | !c) <-> d:*AB',"
    " ARRAY['x:1'::tsvector, NULL], ARRAY['a <2> b'::tsquery])",
    "INSERT INTO ts VALUES (2, $$'it''s' 'back\\slash' ünï$$, '', '{}', NULL)",
    "INSERT INTO ts VALUES (3, to_tsvector('english', 'The quick brown foxes jumped'),"
    " to_tsquery('english', 'fox & !dogs'), NULL, NULL)",
    "UPDATE ts SET q = 'z' WHERE id = 1",
    "DELETE FROM ts WHERE id = 2",
    'INSERT INTO jp VALUES (1, \'strict $.a[*] ? (@.b > 1 && @.c like_regex "^x" flag "i")\','
    " ARRAY['$.**{1 to last}'::jsonpath, NULL, '$var.datetime(\"HH24\")'])",
    "INSERT INTO jp VALUES (2, '(1 + 2) * -$.x.size()', '{}')",
    "INSERT INTO jp VALUES (3, '$.\"key with space\"[last - 1, 0 to 2].keyvalue()', NULL)",
    "UPDATE jp SET j = '$' WHERE id = 2",
    "DELETE FROM jp WHERE id = 3",
    "INSERT INTO mr VALUES (1, '{[1,3), [5,7), [9,11), [13,15), [17,19)}', '{[1.5,2.5], (3,)}',"
    " '{[2000-01-01,2000-02-01)}', '{[\"2000-01-01 00:00+00\",\"2000-01-02 00:00+00\")}',"
    " '{[-Infinity,0), [1.5,NaN]}', ARRAY['{[1,2)}'::int8multirange, '{}'])",
    "INSERT INTO mr VALUES (2, '{}', '{(,)}', '{}', '{}', '{}', NULL)",
    "UPDATE mr SET i = '{[0,1)}' WHERE id = 1",
    "DELETE FROM mr WHERE id = 2",
    "INSERT INTO misc VALUES (1, '10:20:10,14,15', '100:100:', 'postgres=arwdDxt/postgres',"
    " ARRAY['=r*/postgres'::aclitem, 'acl_role=U*C/postgres'], 'pg_class', 'varchar',"
    " 'now', 'sum(int8)', '||/', '+(int4,int4)', 'postgres', 'public', 'english', 'simple',"
    " '\"C\"', '{int4,text,numeric}')",
    "INSERT INTO misc VALUES (2, '1:1:', '5:9:6,7', NULL, '{}', 'information_schema.tables',"
    " '\"char\"', 'int4pl', 'now()', '!~~(text,text)'::regoperator::oid, '-(NONE,int4)',"
    " 'acl_role', 'pg_catalog', 'simple', 'english_stem', '\"POSIX\"', NULL)",
    "UPDATE misc SET rc = 'pg_type' WHERE id = 1",
    "DELETE FROM misc WHERE id = 2",
]


def test_new_builtin_types(pg: dict[str, Any]) -> None:
    """Every new built-in type family prints exactly as test_decoding prints it."""
    workload = list(WORKLOAD)
    setup = list(SETUP)
    if int(pg["version"]) >= 17:
        workload.append(
            "INSERT INTO jp VALUES (4, '$.a.decimal(5, 2).time_tz(3).bigint()',"
            " ARRAY['$.b.timestamp_tz()'::jsonpath])"
        )
    if int(pg["version"]) == 15:  # the PG18 build here has no libxml
        setup.append("CREATE TABLE x (id int PRIMARY KEY, v xml, vs xml[])")
        workload += [
            'INSERT INTO x VALUES (1, \'<?xml version="1.0"?><r x="1"/>\','
            ' ARRAY[\'<?xml version="1.0" encoding="UTF-8"?><a/>\'::xml, NULL])',
            'INSERT INTO x VALUES (2, \'<?xml version="1.0" standalone="yes"?><r/>\','
            " ARRAY[E'\\n<b/>'::xml])",
        ]
    paths = JSONPATHS + (JSONPATHS_17 if int(pg["version"]) >= 17 else [])
    workload.append(
        "INSERT INTO jp VALUES "
        + ", ".join(
            f"({i}, $jp${p}$jp$, ARRAY[$jp${p}$jp$::jsonpath])" for i, p in enumerate(paths, 10)
        )
    )
    workload.append("UPDATE jp SET js = NULL WHERE id = 10")
    plugins: list[TestDecodingPlugin] = []

    def make() -> TestDecodingPlugin:
        plugins.append(TestDecodingPlugin())
        return plugins[-1]

    out = compare(pg, setup, workload, plugin=make)
    assert_same(
        out,
        "table public.geo: DELETE: id[integer]:2 p[point]:'(NaN,Infinity)'…",
        "table public.mr: DELETE: id[integer]:2 i[int4multirange]:'{}'…",
        "table public.misc: UPDATE: old-key: id[integer]:1 ts[txid_snapshot]:'10:20:10,14,15'…",
        min_lines=40,
    )
    if int(pg["version"]) == 15:
        assert any("v[xml]:'<r x=\"1\"/>'" in line for line in out.expected)
    (plugin,) = plugins
    native = plugin.native_text
    assert (native is not None) == (native_text_core() is not None)
    if native is not None:
        # jsonpath and jsonpath[] (jp) have a native plan and never fall back; so has
        # misc, its aclitem and reg* columns printed from the resolver's names (a row
        # naming one it had not resolved yet falls back)
        plans = {t.name: plan for t, plan in native._plans.values()}
        assert plans["jp"] is not None and plans["misc"] is not None, plans
        assert native.fallbacks["reg* name not cached"] >= 1, native.fallbacks
        named = {"reg* name not cached", "aclitem role name not cached"}
        xml = {"xml declaration Python decides"}  # x's declarations (PG15)
        assert set(native.fallbacks) <= named | xml, native.fallbacks
        assert not [r for r in native.fallbacks if "jsonpath" in r], native.fallbacks
