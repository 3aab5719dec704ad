"""The text plugin's native line writer against test_decoding, same WAL, in both modes.

A table with a column of every type the native writer prints
(service.output.native_text.TEXT_KINDS), a dropped column and a column added with a
default after rows were written, filled with random values (quotes, non-ASCII text,
NULLs, BC dates, ±infinity, 24:00:00, long and tiny numerics, NaN), then updated and
deleted in runs; a second table of the types the writer gained later (interval, timetz,
money, "char", inet, cidr, macaddr, macaddr8, bit, varbit, jsonb, an enum with a label
added later, and xml where the server has libxml); beside them a REPLICA IDENTITY FULL
table, a table of arrays of those types (NULL elements, quoting, lower bounds, 2-D), a table of
the geometric types, tsvector, tsquery and the built-in ranges and multiranges, a
table of user-defined ranges and multiranges (over int8, numeric, timestamptz and
float8, and over text, varchar, int2, oid, float4, time, timetz, interval, inet and
cidr, with bounds range_bound_escape quotes), a table of a composite (with a dropped
field, quoting), a table of floats, a table of domains over int[] and text[] (printed
as those arrays), a table of domains over scalars (quoted as print_literal quotes a type
that is no built-in one), arrays of domains and box[] (its `;` delimiter), a table of
composites nested in composites (with enum, array, domain-over-enum and composite-array
fields), arrays of them and a domain over an enum, a table of txid_snapshot,
pg_snapshot, pg_snapshot[], int2vector and oidvector, a table of jsonpath values (every
item kind, and jsonpath[]), a table of tid, tid[] and a composite with a tid field,
user ranges over bytea, macaddr, macaddr8, bool, "char", name, bpchar, money, bit,
varbit, tid, pg_lsn and uuid too, a table with a range over an enum (no native plan) and
values the writer leaves to Python (an unchanged TOAST value, NaN, a missing attribute
whose default is jsonb, an xml declaration); missing attributes whose defaults are
stored datums, and floats whose shortest decimal is a rounding bound or a tie, are
native.
pgcdc's lines must equal a real test_decoding slot's line for line under
PGCDC_IMPL=native and =python; under native, most rows must have been written by Rust
and each fallback must have been for the reason the row carries.
"""

from __future__ import annotations

import random
from typing import Any

import psycopg2
import pytest

from service.output.text import TestDecodingPlugin
from tests.connectors.avro.test_native_rows_pipeline import _extension_array_table
from tests.integration.decoding_support import compare
from tests.integration.extension_cases import extension_ddl
from tests.integration.jsonpath_cases import JSONPATHS, JSONPATHS_17
from tests.integration.test_text_plugin_vs_test_decoding import assert_same

# User ranges over the other subtypes the native writer prints (nu<name>range): name,
# subtype.
MORE_SUBS = [
    ("bytea", "bytea"),
    ("mac", "macaddr"),
    ("mac8", "macaddr8"),
    ("bool", "bool"),
    ("char", '"char"'),
    ("name", "name"),
    ("bpchar", 'bpchar, collation = "C"'),
    ("money", "money"),
    ("bit", "bit"),
    ("varbit", "varbit"),
    ("tid", "tid"),
    ("lsn", "pg_lsn"),
    ("uuid", "uuid"),
    ("xid8", "xid8"),
]
MORE_RANGE_ROWS = r"""INSERT INTO nurange (id, rby, mby, rma, rm8, rbo, rch, rnm, rbp, rmo, rbi,
 mbi, rvb, rtd, mtd, rls) VALUES
 (200, '["\\x","\\x00ff")', '{["\\x01","\\x02"],("\\xfe",)}',
  '[08:00:2b:01:02:03,08:00:2b:01:02:04]', '(,08:00:2b:01:02:03:04:05]', '[f,t]',
  '[" ",z)', '["a b",zz)', '["ab  ",c]', '["$1.50","$1,000.00")', '[0101,1111)',
  '{[00,01),[10,11]}', '(,10101]', '["(0,1)","(4294967295,65535)"]',
  '{["(0,1)","(0,2)"),["(1,1)",)}', '[0/0,FFFFFFFF/FFFFFFFF]'),
 (201, 'empty', '{}', 'empty', '[00:00:00:00:00:00:00:00,)', '[t,t]', '(,"")', '("",)',
  '("",)', '["-$92,233,720,368,547,758.08",)', '["",)', '{}', '["",1]', 'empty', '{}',
  '(,0/1)'),
 (202, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
  NULL, NULL)"""

pytestmark = pytest.mark.integration

COLUMNS = (
    "id int PRIMARY KEY, b bool, by bytea, nm name, i8 bigint, i2 smallint, tx text,"
    " o oid, js json, bp char(5), vc varchar(12), d date, t time, ts timestamp,"
    " tz timestamptz, n numeric(12,3), nu numeric, u uuid, gone int"
)


def _text(rng: random.Random) -> str:
    pieces = ["a", "b", "'", "''", "é", "日本", " ", "\\", '"', "x" * rng.randint(0, 30)]
    return "".join(rng.choice(pieces) for _ in range(rng.randint(0, 8)))


def _lit(s: str) -> str:
    return "'" + s.replace("'", "''") + "'"


def _maybe(rng: random.Random, value: str) -> str:
    return "NULL" if rng.random() < 0.1 else value


def _row(rng: random.Random, i: int) -> str:
    dates = ["'2000-01-01'", "'0044-03-15 BC'", "'infinity'", "'-infinity'", "'12345-06-07'"]
    stamps = [
        "'2024-02-29 23:59:59.999999'",
        "'1999-12-31 00:00:00.5'",
        "'0100-01-01 12:00:00 BC'",
        "'infinity'",
        "'294276-12-31 23:59:59'",
    ]
    n = f"{rng.randint(-(10**8), 10**8)}.{rng.randint(0, 999):03d}"
    day = f"'{rng.randint(1, 9999):04d}-{rng.randint(1, 12):02d}-28'"
    nu = rng.choice(
        ["0", "-0.000", "123456789012345678901234567890.000000001", "1e-20", f"{rng.random()}"]
    )
    values = [
        str(i),
        _maybe(rng, rng.choice(["true", "false"])),
        _maybe(rng, f"'\\x{rng.randbytes(rng.randint(0, 20)).hex()}'"),
        _maybe(rng, _lit(_text(rng)[:60])),
        _maybe(rng, str(rng.randint(-(2**63), 2**63 - 1))),
        _maybe(rng, str(rng.randint(-(2**15), 2**15 - 1))),
        _maybe(rng, _lit(_text(rng))),
        _maybe(rng, str(rng.randint(0, 2**32 - 1))),
        _maybe(rng, _lit('{"k": ' + str(rng.randint(0, 9)) + ', "s": "it\'s"}')),
        _maybe(rng, _lit(_text(rng)[:5])),
        _maybe(rng, _lit(_text(rng)[:12])),
        _maybe(rng, rng.choice(dates) if rng.random() < 0.5 else day),
        _maybe(rng, rng.choice(["'24:00:00'", "'00:00:00'", "'13:14:15.000001'"])),
        _maybe(rng, rng.choice(stamps)),
        _maybe(rng, rng.choice(stamps)),
        _maybe(rng, n),
        _maybe(rng, nu),
        _maybe(rng, f"'{rng.randbytes(16).hex()}'"),
        str(i),
    ]
    return "(" + ", ".join(values) + ")"


# The types the native writer gained second, in their own table (with xml where the
# server has libxml: not the PG18 build here).
MORE_COLUMNS = (
    'id int PRIMARY KEY, iv interval, tt timetz, mo money, ch "char", ip inet, cd cidr,'
    " mc macaddr, m8 macaddr8, bt bit(10), b1 bit(1), vb varbit, jb jsonb, mood nmood,"
    " ci citext"
)
_JSONS = [
    r'{"a": 1, "bb": [true, null, "x\n"], "c": {"d": -12345678901.5e-3}}',
    "[]",
    "{}",
    '"it\'s"',
    "12.50",
    "null",
    r'{"é😀": "\u0001\t\"q\"", "z": [1e30, -0.000001, false], "": 0}',
]
_INTERVALS = [
    "'1 year 2 mons 3 days 04:05:06.789'",
    "'-3 days +00:00:01.5'",
    "'00:00:00'",
    "'-1 years -1 mons'",
]
_INETS = ["'192.168.0.1'", "'10.1.2.3/8'", "'::1'", "'2001:db8::1:0:0:1/64'", "'::ffff:1.2.3.4'"]
_CIDRS = ["'10.0.0.0/8'", "'192.168.1.0/24'", "'2001:db8::/32'", "'::/0'"]
_XMLS = ["'<a>é</a>'", "E'\\n<b/>'", "''", "'<?xml version=\"1.0\"?><c/>'"]


def _has_xml(pg: dict[str, Any]) -> bool:
    conn = psycopg2.connect(pg["dsn"])
    try:
        conn.cursor().execute("SELECT '<a/>'::xml")
        return True
    except psycopg2.Error:
        return False
    finally:
        conn.close()


def _bits(rng: random.Random, n: int) -> str:
    return "B'" + "".join(rng.choice("01") for _ in range(n)) + "'"


def _more_row(rng: random.Random, i: int, xml: bool) -> str:
    r = rng.randint
    array = ", ".join(str(r(-999, 999)) for _ in range(r(0, 40)))
    zone = f"{rng.choice('+-')}{r(0, 12):02d}:{rng.choice(['00', '30', '45'])}"
    values = [
        str(i),
        rng.choice([*_INTERVALS, f"'{r(-(10**6), 10**6)} seconds'", f"'{r(0, 99)} mons'"]),
        rng.choice(["'12:34:56.5+01'", "'23:59:59.999999+14'", f"'{r(0, 23):02d}:07:00{zone}'"]),
        rng.choice(["0", "-1", f"{r(-(10**9), 10**9)}.{r(0, 99):02d}", "'-92233720368547758.08'"]),
        rng.choice(["'a'", "''", "'\"'", "''''"]),
        rng.choice([*_INETS, f"'{r(0, 255)}.{r(0, 255)}.{r(0, 255)}.{r(0, 255)}/{r(0, 32)}'"]),
        rng.choice(_CIDRS),
        f"'{rng.randbytes(6).hex(':')}'",
        f"'{rng.randbytes(8).hex(':')}'",
        _bits(rng, 10),
        _bits(rng, 1),
        _bits(rng, r(0, 70)),
        _lit(rng.choice([*_JSONS, f'{{"k{r(0, 99)}": [{array}]}}'])),
        rng.choice(["'sad'", "'ok'", "'it''s'"]),
        rng.choice(["'MixedCase'", "''", "'ÉtÉ ''q'''"]),
    ]
    if xml:
        values.append(rng.choice(_XMLS))
    return "(" + ", ".join(v if k == 0 else _maybe(rng, v) for k, v in enumerate(values)) + ")"


_ARRAY_TEXTS = [
    "'{}'",
    "ARRAY['a', 'b c', NULL, '', 'NULL', 'null', 'q\"x', 'back\\slash', '{br}', 'c,d', 'é']",
    "'{{x,y},{z,NULL}}'",
    "'[0:1]={p,q}'",
]


def _array_row(rng: random.Random, i: int) -> str:
    r = rng.randint
    ints = ", ".join(str(r(-(2**31), 2**31 - 1)) if r(0, 9) else "NULL" for _ in range(r(0, 30)))
    values = [
        str(i),
        rng.choice([f"ARRAY[{ints}]::int[]", "'{}'", "'[-2:0]={1,2,3}'", "'{{1,2},{3,4}}'"]),
        rng.choice(_ARRAY_TEXTS),
        rng.choice(["'{1.5, -2.25, NULL, 99999999.99}'", "'{}'", f"'{{{r(-999, 999)}.5}}'"]),
        rng.choice(
            ["'{2024-02-29 12:34:56.5+00, infinity, NULL}'", "'{0044-03-15 12:00:00+00 BC}'"]
        ),
        rng.choice(["ARRAY['{\"a\": [1, \"x y\"]}', '[]', 'null']::jsonb[]", "'{}'"]),
        rng.choice(["'{t,f,NULL}'", "'{}'"]),
        rng.choice(["ARRAY['\\x00ff'::bytea, ''::bytea, NULL]", "'{}'"]),
        rng.choice(["'{sad,ok,NULL}'", "ARRAY['it''s']::nmood[]"]),
        rng.choice(["'{192.168.0.1/24, ::1, NULL}'", "'{}'"]),
        rng.choice(["'{{1,2,3},{4,5,6}}'", "'{{-9223372036854775808}}'", "'{}'"]),
        rng.choice(['\'{a,"\\\\"," "}\'', "'{}'"]),
        rng.choice(["'{101, 0, NULL, \"\"}'", "'{}'"]),
        rng.choice(["'{1 day, -00:00:01.5, 1 year 2 mons}'", "'{}'"]),
    ]
    return "(" + ", ".join(v if k == 0 else _maybe(rng, v) for k, v in enumerate(values)) + ")"


GEO_COLUMNS = (
    "id int PRIMARY KEY, p point, l line, s lseg, b box, pa path, po polygon, c circle,"
    " tv tsvector, tq tsquery, r4 int4range, r8 int8range, rn numrange, rd daterange,"
    " rs tsrange, rz tstzrange, m4 int4multirange, mn nummultirange, mz tstzmultirange,"
    " ap point[], ar int4range[], ls pg_lsn, xd xid, x8 xid8, cd cid"
)


def _geo_row(rng: random.Random, i: int) -> str:
    r, f = rng.randint, rng.uniform

    def pt() -> str:
        return f"({f(-1e6, 1e6)},{rng.choice([0, -0.0, 1.5, f(-1, 1)])})"

    values = [
        str(i),
        f"'{pt()}'",
        rng.choice(["'{1,-1,0}'", "'{0.5,2,-3.25}'", f"'{{{r(1, 9)},{r(-9, 9)},{f(-9, 9)}}}'"]),
        f"'[{pt()},{pt()}]'",
        f"'{pt()},{pt()}'",
        rng.choice([f"'[{pt()},{pt()},{pt()}]'", f"'({pt()},{pt()})'", f"'({pt()})'"]),
        rng.choice([f"'({pt()},{pt()},{pt()})'", f"'({pt()})'"]),
        f"'<{pt()},{abs(f(0, 99))}>'",
        rng.choice(
            [
                "to_tsvector('english', 'The quick brown foxes jumped')",
                "'a:1A b:2B,3 ''it''''s'':4 c'::tsvector",
                "''::tsvector",
                "setweight('x:1 y'::tsvector, 'C')",
            ]
        ),
        rng.choice(["'a & !(b | c:*) <-> d:AB'", "to_tsquery('english', 'cats & dogs')", "''"]),
        rng.choice(["'[1,5)'", "'empty'", "'(,7]'", f"'[{r(-99, 0)},{r(1, 99)}]'"]),
        rng.choice(["'[-9223372036854775808,9223372036854775807)'", "'(,)'"]),
        rng.choice(["'[1.5,2.25)'", "'(-1e-10,)'", "'[NaN,NaN]'", "'empty'"]),
        rng.choice(["'[2000-01-01,infinity)'", "'[0044-03-15 BC,2024-02-29]'"]),
        rng.choice(["'[2024-01-01 00:00,2024-01-02 12:00:00.5)'", "'(,infinity]'"]),
        rng.choice(["'[2024-01-01 00:00+00,2024-01-02 12:00+00)'", "'empty'"]),
        rng.choice(["'{}'", "'{[1,3),[5,9)}'", "'{(,0],[4,4]}'"]),
        rng.choice(["'{[1.5,2)}'", "'{}'"]),
        rng.choice(["'{[2024-01-01 00:00+00,)}'", "'{}'"]),
        rng.choice([f"ARRAY['{pt()}'::point, NULL]", "'{}'"]),
        rng.choice(["'{\"[1,3)\",empty,NULL}'", "'{}'"]),
        rng.choice(["'16/B374D848'", "'0/0'", "'FFFFFFFF/FFFFFFFF'"]),
        rng.choice(["'4294967295'", "'3'"]),
        rng.choice(["'18446744073709551615'", "'0'"]),
        rng.choice(["'4294967295'", "'0'"]),
    ]
    return "(" + ", ".join(v if k == 0 else _maybe(rng, v) for k, v in enumerate(values)) + ")"


def _jsonpath_rows(version: int) -> list[str]:
    """njp's rows: each path of the Avro differential test's JSONPATHS (and JSONPATHS_17
    from PG17), with an array of the path and a NULL, then an UPDATE and a DELETE."""
    paths = JSONPATHS + (JSONPATHS_17 if version >= 17 else [])
    values = ", ".join(
        f"({i}, $jp${p}$jp$, ARRAY[$jp${p}$jp$::jsonpath, NULL])" for i, p in enumerate(paths, 1)
    )
    return [
        f"INSERT INTO njp VALUES {values}, (0, NULL, '{{}}')",
        "UPDATE njp SET j = '$.\"new\"' WHERE id = 1",
        "DELETE FROM njp WHERE id = 2",
    ]


class _Counting(TestDecodingPlugin):
    """The text plugin, kept so the test can read its native counters."""


@pytest.mark.parametrize("impl", ["native", "python"])
def test_native_text_equals_test_decoding(
    pg: dict[str, Any], impl: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PGCDC_IMPL", impl)
    plugins: list[_Counting] = []

    def make() -> _Counting:
        plugins.append(_Counting())
        return plugins[-1]

    rng = random.Random(20261203)
    rows = ", ".join(_row(rng, i) for i in range(1, 401))
    xml = _has_xml(pg)
    more_rows = ", ".join(_more_row(rng, i, xml) for i in range(1, 301))
    more_columns = MORE_COLUMNS + (", x xml" if xml else "")
    array_rows = ", ".join(_array_row(rng, i) for i in range(1, 201))
    geo_rows = ", ".join(_geo_row(rng, i) for i in range(1, 201))
    big = "".join(rng.choice("abcdefghijklmnopqrstuvwxyz0123456789") for _ in range(9000))
    out = compare(
        pg,
        [
            f"CREATE TABLE nt ({COLUMNS})",
            "CREATE TABLE nf (id int, v text, w numeric)",
            "ALTER TABLE nf REPLICA IDENTITY FULL",
            "CREATE TABLE nfj (id int, v text)",
            "ALTER TABLE nfj REPLICA IDENTITY FULL",
            "CREATE TABLE nfl (id int PRIMARY KEY, f float8, r real)",
            "CREATE TYPE nmood AS ENUM ('sad', 'ok', 'it''s')",
            "CREATE EXTENSION IF NOT EXISTS citext",
            f"CREATE TABLE nx ({more_columns})",
            f"CREATE TABLE ngeo ({GEO_COLUMNS})",
            "CREATE TYPE ncomp AS (a int, b text, gone int, d timestamptz, n numeric)",
            "ALTER TYPE ncomp DROP ATTRIBUTE gone",
            "CREATE DOMAIN nmood_d AS nmood",
            "CREATE TYPE nnest AS (x ncomp, y int, m nmood, a int[], ms nmood[], dm nmood_d,"
            " xs ncomp[])",
            "CREATE DOMAIN ncomp_d AS ncomp CHECK ((VALUE).a IS DISTINCT FROM -1)",
            "CREATE TYPE nboxc AS (b box[], n int)",
            "CREATE TABLE ncmp (id int PRIMARY KEY, c ncomp, dc ncomp_d, bc nboxc)",
            "CREATE TABLE nnst (id int PRIMARY KEY, c nnest, cs nnest[], dm nmood_d)",
            "CREATE TYPE nmoodrange AS RANGE (subtype = nmood)",
            "CREATE TABLE npy (id int PRIMARY KEY, a nmoodrange[])",
            "CREATE DOMAIN nmoodrange_d AS nmoodrange",
            "CREATE TABLE nerange (id int PRIMARY KEY, r nmoodrange, m nmoodmultirange,"
            " d nmoodrange_d)",
            "CREATE TYPE ntidc AS (t tid, n int)",
            "CREATE TABLE ntid (id int PRIMARY KEY, t tid, ts tid[], c ntidc)",
            "CREATE TABLE njp (id int PRIMARY KEY, j jsonpath, js jsonpath[])",
            "CREATE TABLE nsys (id int PRIMARY KEY, ts txid_snapshot, ps pg_snapshot,"
            " iv int2vector, ov oidvector, pss pg_snapshot[])",
            "CREATE TABLE narr (id int PRIMARY KEY, i4 int[], tx text[], nu numeric(10,2)[],"
            " tz timestamptz[], jb jsonb[], bo bool[], by bytea[], mo nmood[], ip inet[],"
            ' m2 int8[][], ch "char"[], vb varbit[], iv interval[])',
            "CREATE DOMAIN nintarr AS int[]",
            "CREATE DOMAIN ntextarr AS text[]",
            "CREATE TABLE ndom (id int PRIMARY KEY, ia nintarr, ta ntextarr)",
            # domains over scalars (print_literal quotes them all, even int4, bool and
            # bit), arrays of domains (headers naming the domain) and box[] (delimiter ;)
            "CREATE DOMAIN nposint AS int CHECK (VALUE > 0)",
            "CREATE DOMAIN nflag AS bool",
            "CREATE DOMAIN nbits AS bit(3)",
            "CREATE DOMAIN nvbits AS varbit",
            "CREATE DOMAIN nlabel AS text",
            "CREATE DOMAIN nlabel2 AS nlabel",
            "CREATE DOMAIN nprice AS numeric(10, 2)",
            "CREATE DOMAIN nspot AS point",
            "CREATE DOMAIN nfrac AS float8",
            "CREATE DOMAIN nuid AS uuid",
            "CREATE DOMAIN ncash AS money",
            "CREATE DOMAIN nwhen AS timestamptz",
            "CREATE DOMAIN nci AS citext",  # citext[] and an array of a domain over it
            "CREATE TABLE ndomx (id nposint PRIMARY KEY, f nflag, b nbits, vb nvbits, l nlabel,"
            " l2 nlabel2, p nprice, s nspot, fr nfrac, u nuid, c ncash, w nwhen, ia nposint[],"
            " la nlabel2[], ma nmood_d[], pa nprice[], bx box[], bxd box[][], ca citext[],"
            " cda nci[])",
            "CREATE TABLE ntoast (id int PRIMARY KEY, k int, big text)",
            "CREATE TYPE nu8range AS RANGE (subtype = int8)",
            "CREATE TYPE nunum AS RANGE (subtype = numeric, multirange_type_name = nunummulti)",
            "CREATE TYPE nutz AS RANGE (subtype = timestamptz)",
            "CREATE TYPE nufloatrange AS RANGE (subtype = float8)",
            'CREATE TYPE nutextrange AS RANGE (subtype = text, collation = "C")',
            'CREATE TYPE nuvcrange AS RANGE (subtype = varchar, collation = "C")',
            "CREATE TYPE nuint2range AS RANGE (subtype = int2)",
            "CREATE TYPE nuoidrange AS RANGE (subtype = oid)",
            "CREATE TYPE nuf4range AS RANGE (subtype = float4)",
            "CREATE TYPE nutimerange AS RANGE (subtype = time)",
            "CREATE TYPE nuttzrange AS RANGE (subtype = timetz)",
            "CREATE TYPE nuivrange AS RANGE (subtype = interval)",
            "CREATE TYPE nuinetrange AS RANGE (subtype = inet)",
            "CREATE TYPE nucidrrange AS RANGE (subtype = cidr)",
            *(f"CREATE TYPE nu{name}range AS RANGE (subtype = {sub})" for name, sub in MORE_SUBS),
            "CREATE DOMAIN nudi8range AS nu8range",
            "CREATE DOMAIN nudtextmulti AS nutextmultirange",
            "CREATE DOMAIN nudlsnrange AS nulsnrange CHECK (NOT isempty(VALUE))",
            "CREATE TABLE nurange (id int PRIMARY KEY, r nu8range, m nu8multirange,"
            " rn nunum, mn nunummulti, rz nutz, rf nufloatrange, mf nufloatmultirange,"
            " rt nutextrange, mt nutextmultirange, rv nuvcrange, r2 nuint2range,"
            " ro nuoidrange, r4 nuf4range, rti nutimerange, rtz nuttzrange, riv nuivrange,"
            " miv nuivmultirange, rin nuinetrange, rci nucidrrange, rby nubytearange,"
            " mby nubyteamultirange, rma numacrange, rm8 numac8range, rbo nuboolrange,"
            " rch nucharrange, rnm nunamerange, rbp nubpcharrange, rmo numoneyrange,"
            " rbi nubitrange, mbi nubitmultirange, rvb nuvarbitrange, rtd nutidrange,"
            " mtd nutidmultirange, rls nulsnrange, ruu nuuuidrange, muu nuuuidmultirange,"
            " rx8 nuxid8range, mx8 nuxid8multirange, dri nudi8range, dmt nudtextmulti,"
            " dls nudlsnrange)",
            "ALTER TABLE ntoast ALTER COLUMN big SET STORAGE EXTERNAL",
        ],
        [
            f"INSERT INTO nt VALUES {rows}",
            "ALTER TABLE nt DROP COLUMN gone",
            "UPDATE nt SET tx = tx || '''', i2 = 7 WHERE id % 3 = 0",
            "INSERT INTO nf SELECT g, 'v''' || g, g / 7.0 FROM generate_series(1, 200) g",
            "INSERT INTO nf VALUES (201, NULL, 'NaN')",
            # REPLICA IDENTITY FULL updates in one run of update pairs: the lines name
            # the old tuple too, so the native writer leaves such a run to Python
            "INSERT INTO nf SELECT g, 'u' || g, g FROM generate_series(300, 700) g",
            "UPDATE nf SET v = v || '!' WHERE id >= 300",
            "DELETE FROM nf WHERE id % 2 = 0",
            "INSERT INTO nfl SELECT g, g / 3.0, g / 7.0 FROM generate_series(1, 50) g",
            "INSERT INTO nfl VALUES (51, 'NaN', '-Infinity'), (52, -0.0, 1e-37),"
            " (53, 1e23, 3.4e38), (54, 2^47 + 0.125, 0.1), (55, 5e-324, NULL)",
            "INSERT INTO ncmp SELECT g, ROW(g, CASE g % 4 WHEN 0 THEN 'x' WHEN 1 THEN 'a \"b\" (c)'"
            " WHEN 2 THEN '' END, timestamptz '2024-01-01 00:00+00' + g * interval '1 h',"
            " g / 7.0)::ncomp FROM generate_series(1, 20) g",
            "INSERT INTO ncmp VALUES (100, NULL), (101, ROW(NULL, NULL, NULL, NULL))",
            # a domain over a composite: record_out's text, quoted as the composite's
            "INSERT INTO ncmp SELECT g, NULL, ROW(g, 'd \"q\" ' || g, timestamptz"
            " '2024-01-01 00:00+00' + g * interval '1 min', -g / 3.0)::ncomp_d"
            " FROM generate_series(200, 220) g",
            "INSERT INTO ncmp VALUES (221, NULL, ROW(NULL, NULL, NULL, NULL)), (222, NULL, NULL)",
            # a box[] field: array_out with box's delimiter ';', inside record_out's quotes
            "INSERT INTO ncmp (id, bc) SELECT g, ROW(ARRAY[box(point(g, g), point(0, 0)),"
            " NULL, box(point(-g, 1.5), point(2, 2))], g)::nboxc FROM generate_series(300, 320) g",
            "INSERT INTO ncmp (id, bc) VALUES (321, ROW('{}', NULL)), (322, ROW(NULL, 1)),"
            " (323, ROW(ARRAY[ARRAY['(1,1),(0,0)'::box], ARRAY[NULL::box]], 2))",
            "INSERT INTO nnst SELECT g, ROW(ROW(g, 'x', NULL, NULL), g, 'it''s', ARRAY[g, -g],"
            " ARRAY['ok', NULL]::nmood[], 'sad', ARRAY[ROW(g, 'a,b', NULL, 1.5)::ncomp, NULL])"
            "::nnest, ARRAY[ROW(NULL, g, NULL, '{}', '{}', NULL, '{}')::nnest, NULL],"
            " (ARRAY['sad', 'ok'])[g % 2 + 1]::nmood_d FROM generate_series(1, 20) g",
            "INSERT INTO nnst VALUES (21, NULL, '{}', NULL)",
            "INSERT INTO npy SELECT g, ARRAY['[sad,\"it''s\"]'::nmoodrange]"
            " FROM generate_series(1, 5) g",
            # ranges and multiranges over an enum, and a domain over one: bounds printed
            # as their labels
            "INSERT INTO nerange VALUES (1, '[sad,\"it''s\"]', '{[sad,ok),(ok,\"it''s\"]}',"
            " '(,ok]'), (2, 'empty', '{}', '[sad,)'), (3, NULL, NULL, NULL)",
            "INSERT INTO nerange SELECT g, CASE g % 3 WHEN 0 THEN '[sad,ok]' WHEN 1 THEN"
            " '(ok,)' ELSE '[sad,sad]' END::nmoodrange, '{[sad,ok)}', '[ok,ok]'"
            " FROM generate_series(10, 60) g",
            "UPDATE nerange SET r = '(,sad]' WHERE id % 4 = 0",
            # tid: tidout's text, quoted; in a tid[] and a composite's field too
            "INSERT INTO ntid VALUES (1, '(0,0)', '{\"(4294967295,65535)\",NULL,\"(1,2)\"}',"
            " ROW('(7,7)', 1)), (2, '(4294967295,65535)', '{}', ROW(NULL, NULL)),"
            " (3, NULL, NULL, NULL)",
            "INSERT INTO ntid SELECT g, ('(' || g * 65537 || ',' || g % 65536 || ')')::tid,"
            " ARRAY[('(' || g || ',1)')::tid, ('(1,' || g || ')')::tid],"
            " ROW(('(' || g || ',' || g || ')')::tid, g)::ntidc FROM generate_series(10, 60) g",
            "UPDATE ntid SET t = '(9,9)' WHERE id % 3 = 0",
            "DELETE FROM ntid WHERE id % 4 = 0",
            *_jsonpath_rows(int(pg["version"])),
            "INSERT INTO nsys VALUES (1, '10:20:10,14,15', '9223372036854775000:"
            "9223372036854775807:', '1 -32768 32767', '0 4294967295 23',"
            " ARRAY['10:20:'::pg_snapshot, NULL]), (2, '1:1:', '100:200:150', '', '', '{}'),"
            " (3, NULL, NULL, NULL, NULL, NULL)",
            "INSERT INTO nsys SELECT g, (g || ':' || g + 5 || ':' || g + 1)::txid_snapshot,"
            " (g || ':' || g || ':')::pg_snapshot, (g || ' ' || -g)::int2vector,"
            " (g::text)::oidvector, NULL FROM generate_series(10, 40) g",
            "INSERT INTO nurange VALUES (1, '[1,5)', '{[1,3),[7,9]}', '[1.5,NaN]',"
            " '{[-1e20,0.5),[2,)}', '[2020-01-01 00:00:00.5+00,infinity)', '[-0.1,1e300]',"
            " '{[-Infinity,-0),[0.3,0.30000000000000004]}'),"
            " (2, 'empty', '{}', '(,)', '{(,)}', 'empty', '(,NaN]', '{}'),"
            " (3, NULL, NULL, NULL, NULL, NULL, NULL, NULL)",
            "INSERT INTO nurange SELECT g, ('[' || g || ',' || g * 9 || ')')::nu8range,"
            " ('{[' || g || ',' || g + 1 || ']}')::nu8multirange, ('(' || g / 7.0 || ',)')::nunum,"
            " '{}', ('[' || timestamptz '2024-02-29 12:00+00' + g * interval '1 day 1 us'"
            " || ',)')::nutz, ('[' || g / 7.0::float8 || ',)')::nufloatrange, NULL"
            " FROM generate_series(10, 40) g",
            # the subtypes of user ranges only: bounds range_bound_escape quotes
            "INSERT INTO nurange (id, rt, mt, rv, r2, ro, r4, rti, rtz, riv, miv, rin, rci)"
            """ VALUES (100, '["","a b")', '{["",""],("(x)","[y]"]}', '[A,"z,z"]',"""
            " '[-32768,32767)', '[0,4294967295]', '[-2,1.5)', '[00:00,24:00]',"
            """ '[00:00:01+00,12:00-05:30)', '["-00:00:01.5","1 day 02:00:00")',"""
            """ '{["1 mon",),(,"-1 years")}', '[10.0.0.1/8,192.168.0.1]',"""
            " '[10.0.0.0/8,::1/128)'),"
            """ (101, '["it''s","it''s \\"q\\" \\\\ b"]', '{}', '(,"x y")', 'empty',"""
            " '(,7)', '(0.25,)', '(,12:00:00.5)', 'empty', 'empty', '{}', '(::1,)',"
            " '(,192.168.0.0/16]'), (102, '(é,ü]', '{[a,b),[c,d)}', NULL, '(1,2)', NULL,"
            " NULL, NULL, NULL, NULL, NULL, NULL, NULL)",
            "INSERT INTO nurange (id, rt, r2, riv, rin) SELECT g, ('[' || g || ',' || g"
            " || ' ' || g || ')')::nutextrange, ('[' || g || ',' || g * 2 || ')')::nuint2range,"
            " ('[' || g || ' days,' || g || ' mons)')::nuivrange,"
            " ('[10.0.' || g % 256 || '.1,)')::nuinetrange FROM generate_series(110, 140) g",
            # ... over bytea, macaddr, macaddr8, bool, "char", name, bpchar, money, bit,
            # varbit, tid and pg_lsn: bytea's and tid's text always quoted (a backslash;
            # parentheses and a comma), money's with a comma, bpchar's padding
            MORE_RANGE_ROWS,
            "INSERT INTO nurange (id, rby, rbo, rnm, rmo, rbi, rtd, mtd, rls) SELECT g,"
            """ ('["\\\\x' || lpad(to_hex(g), 4, '0') || '",)')::nubytearange,"""
            " (CASE WHEN g % 2 = 0 THEN '[f,t)' ELSE '(f,t]' END)::nuboolrange,"
            """ ('["n ' || g || '",n' || g || ']')::nunamerange,"""
            """ ('["$' || g || '.25","$' || g * 1000 || '.00")')::numoneyrange,"""
            " ('[' || (g % 8)::bit(3)::text || ',)')::nubitrange,"
            """ ('["(' || g || ',1)","(' || g * 2 || ',' || g % 65536 || ')")')::nutidrange,"""
            """ ('{["(0,' || g || ')",)}')::nutidmultirange,"""
            " ('[' || g || '/' || to_hex(g * 4096) || ',)')::nulsnrange"
            " FROM generate_series(210, 260) g",
            "INSERT INTO nurange (id, ruu, muu) VALUES (300, '[00000000-0000-0000-0000"
            "-000000000000,ffffffff-ffff-ffff-ffff-ffffffffffff]', '{[a0eebc99-9c0b-4ef8-bb6d"
            "-6bb9bd380a11,),(,00000000-0000-0000-0000-000000000001)}'), (301, 'empty', '{}')",
            "INSERT INTO nurange (id, ruu) SELECT g, ('[' || md5(g::text)::uuid || ',)')"
            "::nuuuidrange FROM generate_series(310, 340) g",
            # xid8: xid8out's unsigned decimal, past the int8 range too
            "INSERT INTO nurange (id, rx8, mx8) VALUES (400, '[0,18446744073709551615]',"
            " '{[3,5),[9223372036854775808,)}'), (401, 'empty', '{}'), (402, '(,7)', NULL)",
            "INSERT INTO nurange (id, rx8, mx8) SELECT g, ('[' || g || ',' || g::numeric"
            " * 4294967296 || ')')::nuxid8range, ('{(,' || g || '],[' || g * 3 || ',)}')"
            "::nuxid8multirange FROM generate_series(410, 440) g",
            # domains over user ranges and multiranges: quoted, as the types they are over
            "INSERT INTO nurange (id, dri, dmt, dls) VALUES (500, '[-9223372036854775808,0)',"
            """ '{["a b",c],("(x)",)}', '[0/0,FFFFFFFF/FFFFFFFF]'), (501, 'empty', '{}',"""
            " '(,1/0)'), (502, NULL, NULL, NULL)",
            "INSERT INTO nurange (id, dri, dmt, dls) SELECT g, ('[' || g || ',' || g * 1000"
            " || ')')::nudi8range, ('{[t' || g || ',u' || g || ')}')::nudtextmulti,"
            " ('[' || g || '/0,)')::nudlsnrange FROM generate_series(510, 540) g",
            "INSERT INTO ndomx VALUES (1, true, B'101', B'', 'it''s \"q\"', '', 'NaN', '(1,2)',"
            " '-0', '00000000-0000-0000-0000-000000000000', '-$1,000.00', 'infinity',"
            " '{1,NULL,3}', '{\"a b\",NULL,\"\",NULL}', '{sad,NULL,\"it''s\"}',"
            " '{1.5,NULL}', '{(1,1),(0,0);NULL;\"(2,2),(-1,-1)\"}',"
            " ARRAY[['(1,1),(0,0)'::box, '(3,3),(2,2)'::box], ['(5,5),(4,4)'::box, NULL]]),"
            " (2, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, '{}', '{}',"
            " '{}', '{}', '{}', '{}')",
            "INSERT INTO ndomx SELECT g, g % 2 = 0, (g % 8)::bit(3), (g % 5)::bit(4)::varbit,"
            " 'l ' || g, 'x' || g, g / 7.0, point(g, -g), g / 3.0, md5(g::text)::uuid,"
            " (g * 100.25)::money, timestamptz '2024-01-01 00:00+00' + g * interval '1 h',"
            " ARRAY[g, g + 1], ARRAY['l' || g, NULL], ARRAY['ok']::nmood_d[], ARRAY[g / 4.0],"
            " ARRAY[box(point(g, g), point(0, 0))], NULL FROM generate_series(10, 60) g",
            # citext[] (textout items, quoted as text's) and an array of a domain over
            # citext (its header names the domain)
            "INSERT INTO ndomx (id, ca, cda) VALUES (70, ARRAY['MixedCase', NULL, 'a,b',"
            " 'q \"x\" \\ y', '', 'É', '{}', 'NULL']::citext[], ARRAY['Ab', NULL, ' ']::nci[]),"
            " (71, '{}', '{}')",
            "INSERT INTO ndomx (id, ca, cda) SELECT g, ARRAY['Row ' || g, NULL, 'x'],"
            " ARRAY[('D' || g)::nci] FROM generate_series(72, 90) g",
            "UPDATE ndomx SET f = NOT f WHERE id % 3 = 0",
            "DELETE FROM ndomx WHERE id % 4 = 0",
            "UPDATE nurange SET r = 'empty' WHERE id % 3 = 0",
            "DELETE FROM nurange WHERE id % 5 = 0",
            f"INSERT INTO narr VALUES {array_rows}",
            "INSERT INTO ndom SELECT id, i4, tx FROM narr",
            f"INSERT INTO ngeo VALUES {geo_rows}",
            "UPDATE ngeo SET p = point(p[0] + 1, p[1]), r4 = '[0,1)' WHERE id % 3 = 0",
            "DELETE FROM ngeo WHERE id % 5 = 0",
            "UPDATE narr SET i4 = CASE WHEN array_ndims(i4) = 1 THEN i4 || 7 END,"
            " tx = CASE WHEN array_ndims(tx) = 1 THEN array_prepend('it''s', tx) END"
            " WHERE id % 3 = 0",
            "DELETE FROM narr WHERE id % 5 = 0",
            "ALTER TYPE nmood ADD VALUE 'new' BEFORE 'ok'",
            "INSERT INTO nx (id, mood) VALUES (1000, 'new'), (1001, 'sad')",
            f"INSERT INTO nx VALUES {more_rows}",
            "UPDATE nx SET iv = iv * 2, jb = jb || '[1]' WHERE id % 4 = 0",
            "DELETE FROM nx WHERE id % 7 = 0",
            # Inline-compressed values (compressible, under the TOAST threshold).
            "UPDATE nt SET tx = repeat('ab''c', 500) WHERE id <= 20",
            # A toasted value left alone by an UPDATE: its pointer is logged unchanged.
            f"INSERT INTO ntoast VALUES (1, 0, {_lit(big)}), (2, 0, 'small')",
            "UPDATE ntoast SET k = k + 1",
            # Rows written before ADD COLUMN ... DEFAULT lack the attribute.
            "ALTER TABLE nt ADD COLUMN extra int DEFAULT 42",
            "UPDATE nt SET b = NOT b WHERE id > 390",
            "INSERT INTO nt (id, n) VALUES (1000, 1.5)",
            "DELETE FROM nt WHERE id % 5 = 0",
            # REPLICA IDENTITY FULL logs a deleted tuple as stored: without the attribute.
            "ALTER TABLE nf ADD COLUMN x int DEFAULT 9, ADD COLUMN y text DEFAULT 'a''b',"
            " ADD COLUMN z int[] DEFAULT '{1,NULL}'",
            "DELETE FROM nf WHERE id < 10",
            # ... with a jsonb default: its attmissingval is not a stored datum (Python)
            "INSERT INTO nfj VALUES (1, 'a'), (2, 'b'), (3, NULL)",
            "ALTER TABLE nfj ADD COLUMN j jsonb DEFAULT '{\"k\": 1}'",
            "DELETE FROM nfj",
        ],
        plugin=make,
    )
    assert_same(
        out,
        "table public.nt: UPDATE: id[integer]:3 …",
        "table public.nf: DELETE: id[integer]:2 v[text]:'v''2' w[numeric]:0.28571428571428571429",
        "table public.nf: DELETE: id[integer]:1 v[text]:'v''1' w[numeric]:0.14285714285714285714"
        " x[integer]:9 y[text]:'a''b' z[integer[]]:'{1,NULL}'",
        "table public.nt: INSERT: id[integer]:1000 b[boolean]:null by[bytea]:null nm[name]:null"
        " i8[bigint]:null i2[smallint]:null tx[text]:null o[oid]:null js[json]:null"
        " bp[character]:null vc[character varying]:null d[date]:null"
        " t[time without time zone]:null ts[timestamp without time zone]:null"
        " tz[timestamp with time zone]:null n[numeric]:1.500 nu[numeric]:null u[uuid]:null"
        " extra[integer]:42",
        "table public.nx: UPDATE: id[integer]:4 iv[interval]:…",
        "table public.nx: DELETE: id[integer]:7",
        min_lines=1200,
    )
    nx = [line for line in out.expected if line.startswith("table public.nx: INSERT:")]
    assert len(nx) == 302 and any("jb[jsonb]:'{" in line for line in nx), nx[:3]
    assert any("mood[nmood]:'new'" in line for line in nx), nx[-2:]
    # a domain's value quoted (int4, bool, bit too); box[]'s elements split by ';'
    doms = [line for line in out.expected if line.startswith("table public.ndomx: INSERT:")]
    assert any(
        "id[nposint]:'1' f[nflag]:'t' b[nbits]:'101' vb[nvbits]:''" in line
        and "bxd[box[]]:'{{(1,1),(0,0);(3,3),(2,2)};{(5,5),(4,4);NULL}}'" in line
        for line in doms
    ), doms[:1]
    # tidout's text, quoted; in array_out and record_out quoted again
    tids = [line for line in out.expected if line.startswith("table public.ntid: INSERT:")]
    assert any(
        """t[tid]:'(0,0)' ts[tid[]]:'{"(4294967295,65535)",NULL,"(1,2)"}'"""
        """ c[ntidc]:'("(7,7)",1)'""" in line
        for line in tids
    ), tids[:2]
    # range_bound_escape over the new subtypes: bytea's backslash doubled, tid quoted
    ranges = " ".join(line for line in out.expected if "nurange: INSERT: id[integer]:200 " in line)
    assert """rby[nubytearange]:'["\\\\x","\\\\x00ff")'""" in ranges, ranges
    assert """rtd[nutidrange]:'["(0,1)","(4294967295,65535)"]'""" in ranges, ranges
    (plugin,) = plugins
    native = plugin.native_text
    if impl == "python":
        assert native is None
        return
    assert native is not None
    # Rows in runs are Rust's but for the fallbacks below; npy's are Python's.
    assert native.native >= 1200, (native.native, native.fallbacks)
    assert native.fallbacks["numeric Python decides"] >= 1, native.fallbacks  # NaN
    assert native.fallbacks["external TOAST pointer"] >= 1, native.fallbacks
    # old tuples read their defaults' stored datums natively (nf's five); only nfj's
    # jsonb default is the Python path's
    assert native.fallbacks["attribute missing with a default"] == 3, native.fallbacks
    # 1e23's neighbour (a rounding bound) and 2^47 + 1/8 (a tie) print natively too
    assert "float Python decides" not in native.fallbacks, native.fallbacks
    plans = {key: plan for key, (_table, plan) in native._plans.items()}
    assert sum(plan is None for plan in plans.values()) == 1  # npy: an array of a user range
    # ranges and multiranges over an enum, and a domain over one: printed natively
    assert all(plan is not None for t, plan in native._plans.values() if t.name == "nerange")
    assert any(t.name == "nerange" for t, _ in native._plans.values())
    # tid, tid[] and a composite with a tid field: printed natively
    assert all(plan is not None for t, plan in native._plans.values() if t.name == "ntid")
    assert any(t.name == "ntid" for t, _ in native._plans.values())
    assert not [r for r in native.fallbacks if "tid" in r], native.fallbacks
    # jsonpath and jsonpath[] are printed natively (jsonpath_out in Rust)
    assert all(plan is not None for t, plan in native._plans.values() if t.name == "njp")
    assert any(t.name == "njp" for t, _ in native._plans.values())
    assert not [r for r in native.fallbacks if "jsonpath" in r], native.fallbacks
    # nested composites with enum, array and domain fields, arrays of composites and a
    # domain over an enum are printed natively
    assert all(plan is not None for t, plan in native._plans.values() if t.name == "nnst")
    assert any(t.name == "nnst" for t, _ in native._plans.values())
    # txid_snapshot, pg_snapshot (and arrays of it), int2vector and oidvector too
    assert all(plan is not None for t, plan in native._plans.values() if t.name == "nsys")
    assert any(t.name == "nsys" for t, _ in native._plans.values())
    assert sum(plan is not None for plan in plans.values()) >= 9  # nx .. ndom among them
    # user-defined ranges and multiranges over a built-in range's subtype too, and over
    # the other subtypes of user ranges (text, int2, interval, inet, ...): no fallback
    assert not [r for r in native.fallbacks if "range" in r], native.fallbacks
    assert all(plan is not None for t, plan in native._plans.values() if t.name == "nurange")
    assert any(t.name == "nurange" for t, _ in native._plans.values())
    # domains over scalars (quoted), arrays of domains and box[]: printed natively, but
    # for the row whose numeric is NaN
    assert all(plan is not None for t, plan in native._plans.values() if t.name == "ndomx")
    assert any(t.name == "ndomx" for t, _ in native._plans.values())
    assert not [r for r in native.fallbacks if r.startswith("array")], native.fallbacks
    # a domain over an array is printed as the array, natively
    assert all(plan is not None for t, plan in native._plans.values() if t.name == "ndom")
    assert any(t.name == "ndom" for t, _ in native._plans.values())
    if xml:
        assert native.fallbacks["xml declaration Python decides"] >= 1, native.fallbacks


@pytest.mark.parametrize("impl", ["native", "python"])
def test_native_text_extension_arrays_equal_test_decoding(
    pg: dict[str, Any], impl: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Arrays of the extension types (the Avro differential test's `_EXT_ARRAYS`, as far
    as the build has them: hstore[], ltree[], lquery[], isn arrays, cube[] (2-D too),
    seg[], geometry[] and geography[] (array_out with their delimiter `:`), vector[],
    halfvec[], sparsevec[]): array_out of each element's output text, line for line as
    test_decoding prints them; natively, every row."""
    monkeypatch.setenv("PGCDC_IMPL", impl)
    plugins: list[_Counting] = []

    def make() -> _Counting:
        plugins.append(_Counting())
        return plugins[-1]

    ddl, rows = _extension_array_table(pg)
    out = compare(
        pg,
        [extension_ddl(pg), ddl],
        [
            rows,
            "UPDATE n_ext_arr SET c0 = NULL WHERE id = 1",
            "DELETE FROM n_ext_arr WHERE id = 2",
        ],
        plugin=make,
    )
    assert_same(out, "table public.n_ext_arr: INSERT: id[integer]:0 c0[hstore[]]:…", min_lines=8)
    if pg["features"].get("postgis"):
        # geometry's typdelim is ':'
        assert any(
            "[geometry[]]:'{0101000000" in line and ":NULL:" in line for line in out.expected
        )
    (plugin,) = plugins
    native = plugin.native_text
    if impl == "python":
        assert native is None
        return
    assert native is not None
    assert any(t.name == "n_ext_arr" and plan is not None for t, plan in native._plans.values())
    assert not native.fallbacks, native.fallbacks
    assert native.native == 6 + 1 + 1, native.native
