"""The native row encoder against the Python path, on real WAL, byte for byte.

A workload on a real server (run for PG15 and PG18: `-k "pg15 or pg18"`) over every
type the native encoder covers (connectors.avro.native_plan.NATIVE_TYPES and numeric),
with edge values: NULLs, empty strings and bytea, NaN/±Infinity floats and numerics,
-0.0, ±infinity and extreme dates and timestamps (the MicroTimestamp clamp past
294247, BC years, year 5's unpadded ZonedTimestamp, years past 9999, 24:00:00),
negative and huge numerics at the two's-complement size boundaries, multi-byte UTF-8,
a padded char(n), an inline pglz- (and lz4-, where the server has it) compressed text,
dropped columns, columns added later (without a default: NULL; with defaults the
decoder reads as stored datums, text, numeric, int4[], an enum, timestamptz, a composite,
inet, bool: natively, attmissingval deformed in Rust; with a jsonb one: the Python
fallback), external TOAST (new values, uncompressed, pglz and lz4, natively; an UPDATE
leaving one unchanged, natively too: Debezium's placeholder), a key
change, deletes with tombstones, REPLICA IDENTITY FULL deletes of tuples older than an
ADD COLUMN; a table of the types added later (interval, timetz, money, "char", inet,
cidr, macaddr, macaddr8, bit, varbit, jsonb, domains over int4, numeric and text, an
enum with a label added mid-stream, and xml where the server has libxml), a table of
arrays of them (NULL elements, 2-D, lower bounds, empty), a table of domains over
int4[], text[] and numeric(5,2)[], over numeric(5,2) and over that domain, over int4range,
numrange and tstzrange, and arrays of domains (over numeric(5,2), that domain's domain,
int4 and an enum), a table of the
geometric types (point as Debezium's Point record), tsvector, tsquery, the built-in
ranges and multiranges, arrays of some of them and a composite, a table of composites
nested in composites, with enum, array and domain fields, arrays of composites and a
domain over an enum, a table of jsonpath values (every item kind: lax/strict, each
operator and its parentheses, filters, like_regex flags, .datetime, escapes, subscripts
with `last`, .** bounds, and from PG17 the new methods) and jsonpath[], and a table
with a tid column, tid[] and a composite with a tid field, and a table with a range
over an enum (no plan: Python) in the same transactions. User ranges and multiranges
are over int8, numeric, timestamptz, date, float8, text, varchar, int2, oid, float4,
time, timetz, interval, inet, cidr, bytea, macaddr, macaddr8, bool, "char", name,
bpchar, money, bit, varbit, tid, pg_lsn and uuid, with bounds range_bound_escape quotes.
A table of the extension types (`n_ext`) and one of their arrays (`n_ext_arr`: hstore[],
ltree[], lquery[], isn arrays, cube[] (2-D too), seg[], and where the build has them
geometry[], geography[], vector[], halfvec[], sparsevec[]), row for row native.

The WAL is decoded three times by a pgcdc `Session`: into the reference plugin
(AvroSerializer, generic datums: tests/connectors/avro/avro_reference.py), into
`AvroPlugin` on the Python path (its native encoder switched off), and into `AvroPlugin`
as `PGCDC_IMPL` selects it, with the plugins' clock frozen. All three must write the
same records: topic, key bytes, value bytes, headers. Under the native core the test
also requires that rows went native and that each kind of fallback happened.
"""

from __future__ import annotations

import tempfile
import uuid
from collections import Counter
from typing import Any

import psycopg2
import pytest

from connectors.avro import plugin as avro_plugin
from connectors.avro.native_rows import NativeRows
from connectors.avro.plugin import AvroPlugin
from connectors.postgres.server import force_running_xacts
from connectors.postgres.setup import setup, teardown
from service.config import Settings
from service.decode.events import ChangeKind, InsertRows
from service.impl import native_row_core, selected
from service.lsn import parse_lsn
from service.output.api import ChangeOp, OutputRecord
from service.reorder.buffer import ReorderBuffer
from tests.connectors.avro import avro_reference
from tests.connectors.avro.avro_reference import ReferencePlugin
from tests.connectors.avro.test_codec import drop_subjects
from tests.connectors.avro.test_codec_pipeline import (
    FrozenTime,
    _dsn,
    _logical_slot,
    _pump,
    _session,
)
from tests.integration.extension_cases import EXTENSION_CASES, extension_ddl, has
from tests.integration.jsonpath_cases import JSONPATHS, JSONPATHS_17

pytestmark = pytest.mark.integration

SCHEMA = """
CREATE TABLE n_all (
    id int8 PRIMARY KEY, b bool, s int2, i int4, o oid, f4 float4, f8 float8,
    t text, vc varchar(20), bc char(5), nm name, by bytea, u uuid, d date, tm time,
    ts timestamp, tz timestamptz, n12 numeric(12, 2), n38 numeric(38, 10),
    n0 numeric(30, 0), nv numeric, j json, gone int4, big text, ext text,
    req text NOT NULL DEFAULT '');
ALTER TABLE n_all ALTER COLUMN big SET STORAGE MAIN;
ALTER TABLE n_all ALTER COLUMN ext SET STORAGE EXTERNAL;
CREATE TABLE n_keyed (code text, n int2, note text, PRIMARY KEY (n, code));
CREATE TABLE n_full (id int4, v text);
ALTER TABLE n_full REPLICA IDENTITY FULL;
CREATE TABLE n_full_default (id int4, v text);
ALTER TABLE n_full_default REPLICA IDENTITY FULL;
CREATE TABLE n_full_jdefault (id int4, v text);
ALTER TABLE n_full_jdefault REPLICA IDENTITY FULL;
CREATE TABLE n_full_key (id int4 PRIMARY KEY, v text, big text);
ALTER TABLE n_full_key REPLICA IDENTITY FULL;
ALTER TABLE n_full_key ALTER COLUMN big SET STORAGE MAIN;
CREATE TABLE n_full_float (id float8 PRIMARY KEY, v text);
ALTER TABLE n_full_float REPLICA IDENTITY FULL;
CREATE TABLE n_full_run (id int4 PRIMARY KEY, v text, n numeric(10, 2));
ALTER TABLE n_full_run REPLICA IDENTITY FULL;
CREATE TYPE n_inner AS (a int4);
CREATE TYPE n_pair AS (a int4, b text, c n_inner);
CREATE TYPE n_simple AS (a int4, b text, d date);
CREATE TABLE n_jpath (id int4 PRIMARY KEY, j jsonpath);
CREATE TABLE n_jpath_arr (id int4 PRIMARY KEY, js jsonpath[]);
CREATE DOMAIN n_posint AS int4 CHECK (VALUE > 0);
CREATE DOMAIN n_price AS numeric(10, 2);
CREATE DOMAIN n_label AS text;
CREATE EXTENSION IF NOT EXISTS citext;
CREATE TYPE n_mood AS ENUM ('sad', 'ok', 'it''s');
CREATE TYPE n_moodrange AS RANGE (subtype = n_mood);
CREATE TABLE n_python (id int4 PRIMARY KEY, doc n_pair, loc n_moodrange[]);
CREATE DOMAIN n_moodrange_d AS n_moodrange;
CREATE TABLE n_erange (
    id int4 PRIMARY KEY, r n_moodrange, m n_moodmultirange, d n_moodrange_d);
CREATE TYPE n_tidc AS (t tid, n int4);
CREATE TABLE n_tid (id int4 PRIMARY KEY, t tid, ts tid[], c n_tidc);
CREATE TABLE n_arr (
    id int4 PRIMARY KEY, i4 int4[], i8 int8[][], tx text[], nu numeric(10, 2)[],
    nv numeric[], tz timestamptz[], d date[], jb jsonb[], bo bool[], by bytea[],
    ip inet[], iv interval[], bt bit(3)[], b1 bit(1)[], u uuid[] NOT NULL DEFAULT '{}',
    f8 float8[], mo money[]);
CREATE TABLE n_geo (
    id int4 PRIMARY KEY, p point, p_nn point NOT NULL DEFAULT '(0,0)', l line, s lseg,
    b box, pa path, po polygon, c circle, tv tsvector, tq tsquery, r4 int4range,
    r8 int8range, rn numrange, rd daterange, rs tsrange, rz tstzrange, m4 int4multirange,
    mz tstzmultirange, ap point[], ab box[], ar int4range[], ls pg_lsn, xd xid, ci citext,
    cp n_simple);
CREATE TABLE n_more (
    id int8 PRIMARY KEY, iv interval, tt timetz, mo money, mo_nn money NOT NULL DEFAULT 0,
    ch "char", ip inet, cd cidr, mc macaddr, m8 macaddr8, bt bit(10), b1 bit(1),
    vb varbit, jb jsonb, jb_nn jsonb NOT NULL DEFAULT '{}', dp n_posint, dn n_price,
    dl n_label);
CREATE DOMAIN n_intarr AS int4[];
CREATE DOMAIN n_textarr AS text[];
CREATE DOMAIN n_n52 AS numeric(5, 2);
CREATE DOMAIN n_n52_again AS n_n52;
CREATE DOMAIN n_n52arr AS numeric(5, 2)[];
CREATE DOMAIN n_mood_d AS n_mood;
CREATE DOMAIN n_dr4 AS int4range CHECK (NOT isempty(VALUE));
CREATE DOMAIN n_dnumr AS numrange;
CREATE DOMAIN n_dtzr AS tstzrange;
CREATE DOMAIN n_cidom AS citext;
CREATE TABLE n_dom (
    id int4 PRIMARY KEY, ia n_intarr, ta n_textarr, n n_n52, nn n_n52_again, na n_n52[],
    nna n_n52_again[], da n_n52arr, pa n_posint[], ma n_mood_d[], dr n_dr4, dnr n_dnumr,
    dtz n_dtzr, ca citext[], cda n_cidom[]);
CREATE TYPE n_rich AS (
    m n_mood, ia int4[], inn n_inner, ma n_mood[], p n_pair, dm n_mood_d, dp n_posint,
    tx text[]);
CREATE DOMAIN n_pair_d AS n_pair CHECK ((VALUE).a IS DISTINCT FROM -1);
CREATE TYPE n_boxed AS (b box[], n int4);
CREATE TABLE n_nested (
    id int4 PRIMARY KEY, r n_rich, ps n_pair[], rs n_rich[], dm n_mood_d, dp n_pair_d,
    bx n_boxed);
CREATE TABLE n_sys (
    id int4 PRIMARY KEY, ts txid_snapshot, ps pg_snapshot, iv int2vector, ov oidvector,
    pss pg_snapshot[]);
CREATE TYPE n_i8range AS RANGE (subtype = int8);
CREATE TYPE n_numrng AS RANGE (subtype = numeric, multirange_type_name = n_nummulti);
CREATE TYPE n_tzrng AS RANGE (subtype = timestamptz);
CREATE TYPE n_dayrng AS RANGE (subtype = date);
CREATE TYPE n_floatrange AS RANGE (subtype = float8, subtype_diff = float8mi);
CREATE TYPE n_textrange AS RANGE (subtype = text, collation = "C");
CREATE TYPE n_vcrange AS RANGE (subtype = varchar, collation = "C");
CREATE TYPE n_int2range AS RANGE (subtype = int2);
CREATE TYPE n_oidrange AS RANGE (subtype = oid);
CREATE TYPE n_f4range AS RANGE (subtype = float4);
CREATE TYPE n_timerange AS RANGE (subtype = time);
CREATE TYPE n_ttzrange AS RANGE (subtype = timetz);
CREATE TYPE n_ivrange AS RANGE (subtype = interval);
CREATE TYPE n_inetrange AS RANGE (subtype = inet);
CREATE TYPE n_cidrrange AS RANGE (subtype = cidr);
CREATE TYPE n_bytearange AS RANGE (subtype = bytea);
CREATE TYPE n_macrange AS RANGE (subtype = macaddr);
CREATE TYPE n_mac8range AS RANGE (subtype = macaddr8);
CREATE TYPE n_boolrange AS RANGE (subtype = bool);
CREATE TYPE n_charrange AS RANGE (subtype = "char");
CREATE TYPE n_namerange AS RANGE (subtype = name);
CREATE TYPE n_bpcharrange AS RANGE (subtype = bpchar, collation = "C");
CREATE TYPE n_moneyrange AS RANGE (subtype = money);
CREATE TYPE n_bitrange AS RANGE (subtype = bit);
CREATE TYPE n_varbitrange AS RANGE (subtype = varbit);
CREATE TYPE n_tidrange AS RANGE (subtype = tid);
CREATE TYPE n_lsnrange AS RANGE (subtype = pg_lsn);
CREATE TYPE n_uuidrange AS RANGE (subtype = uuid);
CREATE TYPE n_xid8range AS RANGE (subtype = xid8);
CREATE DOMAIN n_di8range AS n_i8range;
CREATE DOMAIN n_dtextmulti AS n_textmultirange;
CREATE DOMAIN n_dlsnrange AS n_lsnrange CHECK (NOT isempty(VALUE));
CREATE TABLE n_urange (
    id int4 PRIMARY KEY, r n_i8range, m n_i8multirange, rn n_numrng, mn n_nummulti,
    rz n_tzrng, rd n_dayrng, rf n_floatrange, mf n_floatmultirange,
    rt n_textrange, mt n_textmultirange, rv n_vcrange, r2 n_int2range, ro n_oidrange,
    r4 n_f4range, rti n_timerange, rtz n_ttzrange, riv n_ivrange, miv n_ivmultirange,
    rin n_inetrange, rci n_cidrrange, rby n_bytearange, mby n_byteamultirange,
    rma n_macrange, rm8 n_mac8range, rbo n_boolrange, rch n_charrange, rnm n_namerange,
    rbp n_bpcharrange, rmo n_moneyrange, rbi n_bitrange, mbi n_bitmultirange,
    rvb n_varbitrange, rtd n_tidrange, mtd n_tidmultirange, rls n_lsnrange, ruu n_uuidrange,
    muu n_uuidmultirange, rx8 n_xid8range, mx8 n_xid8multirange, dri n_di8range,
    dmt n_dtextmulti, dls n_dlsnrange);
"""


def jsonpath_rows(version: int) -> list[str]:
    """INSERTs of n_jpath (each path of JSONPATHS, those of JSONPATHS_17 from PG17, and
    a NULL) and n_jpath_arr (arrays of them, NULL elements, empty)."""
    paths = JSONPATHS + (JSONPATHS_17 if version >= 17 else [])
    values = ", ".join(f"({i}, $jp${p}$jp$)" for i, p in enumerate(paths, 1))
    return [
        f"INSERT INTO n_jpath VALUES {values}, (0, NULL)",
        "INSERT INTO n_jpath_arr VALUES (1, ARRAY[$jp$$.a$jp$::jsonpath, NULL,"
        r""" $jp$$ ? (@ like_regex "a,b" flag "i")$jp$, $jp$strict $."x y"[last]$jp$]),"""
        " (2, '{}'), (3, NULL)",
        "INSERT INTO n_jpath_arr SELECT 100 + g, ARRAY[j, j] FROM n_jpath, generate_series(1, 3) g"
        " WHERE n_jpath.id = g",
        "UPDATE n_jpath SET j = '$.updated' WHERE id = 1",
        "DELETE FROM n_jpath WHERE id = 2",
    ]


# Edge values of the types the native encoder gained second, then a bulk of them.
_MORE_ROWS = [
    r"""INSERT INTO n_more VALUES
 (1, '1 year 2 mons 3 days 04:05:06.789', '12:34:56.5+01', -92233720368547758.08,
  92233720368547758.07, 'a', '192.168.0.1', '10.0.0.0/8', '08:00:2b:01:02:03',
  '08:00:2b:01:02:03:04:05', B'1011000001', B'1', B'', '{"a": 1, "bb": [true, null,
  "x\n"], "c": {"d": -12345678901.5e-3}, "": "\u0001é😀"}', '[]', 1, -128.00, 'l'),
 (2, '-3 days +00:00:01.5', '23:59:59.999999+14', 0, -1.28, '', '::ffff:1.2.3.4',
  '2001:db8::/32', 'ff:ff:ff:ff:ff:ff', '00:00:00:00:00:00:00:00', B'0000000000', B'0',
  B'101', '"s"', 'null', 2147483647, 99999999.99, ''),
 (3, NULL, NULL, NULL, 0, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, '{}',
  NULL, NULL, NULL),
 (4, '-80000000 years 5 days', '00:00:00-15:59', 1.28, 128, '"', '::', '::/0', '01:02:03:04:05:06',
  '01:02:03:04:05:06:07:08', B'1111111111', B'1', repeat('10', 40)::varbit, '12.50',
  '[1e30, -0.000001, false, {}]', 7, 0.01, 'x''y')""",
    """INSERT INTO n_more (id, iv, tt, mo, mo_nn, ch, ip, cd, mc, m8, bt, b1, vb, jb, jb_nn,
                          dp, dn, dl)
       SELECT 100 + g, g * interval '1 day 3 min' - interval '9 mons', time with time zone
              '00:00+03' + g * interval '7 min', g * 1234.56 - 99999, -g, chr(32 + g % 90),
              ('10.' || g % 256 || '.0.' || g % 7 || '/' || (g % 33))::inet,
              ('2001:db8:' || to_hex(g) || '::/48')::cidr,
              ('08:00:2b:01:02:' || lpad(to_hex(g % 256), 2, '0'))::macaddr,
              ('08:00:2b:01:02:03:04:' || lpad(to_hex(g % 256), 2, '0'))::macaddr8,
              (g % 1024)::bit(10), (g % 2)::bit(1), (g::bit(32))::varbit,
              jsonb_build_object('g', g, 'a', jsonb_build_array(g, g::text, g / 7.0)),
              jsonb_build_array(g), g, g / 3.0, 'label ' || g
       FROM generate_series(1, 300) g""",
    "UPDATE n_more SET iv = iv * 2, jb = jb || '[1]' WHERE id % 4 = 0",
    "DELETE FROM n_more WHERE id % 7 = 0",
    # an enum column, and a label added to its type later
    "ALTER TABLE n_more ADD COLUMN mood n_mood",
    "INSERT INTO n_more (id, mood) SELECT 400 + g, (ARRAY['sad', 'ok', 'it''s'])[g % 3 + 1]::n_mood"
    " FROM generate_series(1, 30) g",
    "ALTER TYPE n_mood ADD VALUE 'new' BEFORE 'ok'",
    "INSERT INTO n_more (id, mood) VALUES (500, 'new'), (501, 'sad'), (502, NULL)",
    # arrays: NULL elements, 2-D, lower bounds, empty, every element kind
    r"""INSERT INTO n_arr VALUES
 (1, '{1,NULL,-2147483648}', '{{1,2},{3,4}}', '{a,"b c",NULL,"","NULL",é}',
  '{1.5,-2.25,NULL,99999999.99}', '{0,-0.000001,1e30,NaN}',
  '{2024-02-29 12:34:56.5+00,infinity,NULL}', '{2000-01-01,-infinity}',
  ARRAY['{"a": [1, "x y"]}', '[]', 'null']::jsonb[], '{t,f,NULL}', '{"\\x00ff",""}',
  '{192.168.0.1/24,::1,NULL}', '{1 day,-00:00:01.5}', '{101,000}', '{1,0,NULL}',
  '{a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11}', '{1.5,-0,Infinity,NaN}', '{1.23,-0.01}'),
 (2, '[0:2]={7,8,9}', '{}', '{}', '{}', '{1}', '{}', '{}', '{}', '{}', '{}', '{}', '{}',
  '{}', '{}', '{}', '{}', '{}'),
 (3, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
  '{}', NULL, NULL)""",
    """INSERT INTO n_arr (id, i4, tx, nu, tz, jb, bo, iv, bt, f8)
       SELECT 10 + g, ARRAY[g, -g, NULL], ARRAY['t' || g, NULL], ARRAY[g / 7.0]::numeric(10,2)[],
              ARRAY[timestamptz '2024-01-01 00:00+00' + g * interval '1 hour'],
              ARRAY[jsonb_build_object('g', g)], ARRAY[g % 2 = 0], ARRAY[g * interval '1 min'],
              ARRAY[(g % 8)::bit(3)], ARRAY[g / 3.0]
       FROM generate_series(1, 200) g""",
    "UPDATE n_arr SET i4 = i4 || 5 WHERE id % 3 = 0 AND array_ndims(i4) = 1",
    "DELETE FROM n_arr WHERE id % 4 = 0",
    # the geometric types, text search, ranges and multiranges (and arrays of them)
    r"""INSERT INTO n_geo VALUES
 (1, '(1.5,-0)', '(NaN,Infinity)', '{1,-1,0}', '[(0,0),(1e300,-1e-300)]', '(1,1),(0,0)',
  '[(0,0),(1,1),(2,0)]', '((0,0),(0,1),(1,0))', '<(1,2),3.5>',
  'a:1A b:2B,3 ''it''''s'':4 c', 'a & !(b | c:*) <-> d:AB', '[1,5)', '(,)', '[1.5,NaN]',
  '[0044-03-15 BC,infinity)', '[2024-01-01 00:00,2024-01-02 12:00:00.5)',
  '(,2024-01-01 00:00+00]', '{[1,3),[5,9)}', '{}', '{"(1,2)",NULL}',
  '{(1,1),(0,0);(2,2),(1,1)}', '{"[1,3)",empty,NULL}', 'FFFFFFFF/1', '4294967295',
  'MixedCase ÉtÉ', '(1,"a ""b"" (c)",2024-02-29)'),
 (2, NULL, '(0,0)', NULL, NULL, NULL, NULL, NULL, NULL, '', '', 'empty', NULL, NULL, NULL,
  NULL, NULL, NULL, NULL, '{}', '{}', '{}', NULL, NULL, '', '(,,)')""",
    """INSERT INTO n_geo (id, p, b, pa, tv, r4, rz, m4, ap)
       SELECT 10 + g, point(g / 3.0, -g), box(point(g, g), point(0, 1)),
              ('[(0,0),(' || g || ',1)]')::path, to_tsvector('english', 'row ' || g || ' jumped'),
              int4range(g, g + 10), tstzrange('2024-01-01 00:00+00', NULL),
              int4multirange(int4range(1, g + 2), int4range(g + 5, g + 9)),
              ARRAY[point(g, 0)]
       FROM generate_series(1, 200) g""",
    "DELETE FROM n_geo WHERE id % 6 = 0",
    # domains over arrays (as the arrays), over numeric(5,2) and over that domain, and
    # arrays of domains (headers naming the domain, items the base's with its typmod)
    r"""INSERT INTO n_dom VALUES
 (1, '{1,NULL,-2147483648}', '{a,"b c",NULL,"",é}', 999.99, -999.99, '{1.5,NULL,-0.01}',
  '{2.25}', '{{1,2},{3,NULL}}', '{1,2147483647}', '{sad,it''s,NULL}'),
 (2, '[0:1]={7,8}', '{}', 0, 0.01, '{}', '{}', '{}', '{}', '{}'),
 (3, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL)""",
    """INSERT INTO n_dom SELECT 10 + g, ARRAY[g, -g, NULL], ARRAY['t' || g, NULL], g / 7.0,
              -g / 3.0, ARRAY[g / 7.0, NULL]::n_n52[], ARRAY[g / 9.0]::n_n52_again[],
              ARRAY[g / 11.0, -g]::n_n52arr, ARRAY[g]::n_posint[],
              ARRAY[(ARRAY['sad', 'ok'])[g % 2 + 1]]::n_mood_d[]
       FROM generate_series(1, 200) g""",
    # domains over built-in ranges (as the ranges: their datums store the range's OID)
    """INSERT INTO n_dom (id, dr, dnr, dtz) VALUES
 (4, '[1,5)', '(,1.5]', '[2024-02-29 12:00:00.5+00,infinity)'),
 (5, '(,)', 'empty', 'empty'), (6, NULL, '[NaN,NaN]', '(,)')""",
    """INSERT INTO n_dom (id, dr, dnr, dtz) SELECT 300 + g, int4range(-g, g * 9, '[]'),
              numrange(g / 7.0, NULL), tstzrange(NULL, timestamptz '2024-01-01 00:00+00'
              + g * interval '1 day 1 us')
       FROM generate_series(1, 100) g""",
    # citext[] (items stored as text's, each the string of its text) and an array of a
    # domain over citext (its header names the domain)
    r"""INSERT INTO n_dom (id, ca, cda) VALUES
 (7, ARRAY['MixedCase', NULL, 'a,b', 'q "x" \ y', '', 'É', '{}']::citext[],
  ARRAY['Ab', NULL, ' ']::n_cidom[]), (8, '{}', '{}')""",
    """INSERT INTO n_dom (id, ca, cda) SELECT 500 + g, ARRAY['Row ' || g, NULL]::citext[],
              ARRAY[('D' || g)::n_cidom] FROM generate_series(1, 50) g""",
    "UPDATE n_dom SET ia = ia || 5, n = -n WHERE id % 3 = 0",
    # ranges and multiranges over an enum, and a domain over one: bounds printed as
    # their labels (range_out quotes none of these: a quote mark is no special)
    """INSERT INTO n_erange VALUES
 (1, '[sad,"it''s"]', '{[sad,ok),(ok,"it''s"]}', '(,ok]'), (2, 'empty', '{}', '[sad,)'),
 (3, NULL, NULL, NULL)""",
    """INSERT INTO n_erange SELECT g, CASE g % 3 WHEN 0 THEN '[sad,ok]' WHEN 1 THEN
              '(ok,)' ELSE '[sad,sad]' END::n_moodrange, '{[sad,ok)}', '[ok,ok]'
       FROM generate_series(10, 60) g""",
    "UPDATE n_erange SET r = '(,sad]' WHERE id % 4 = 0",
    "DELETE FROM n_dom WHERE id % 4 = 0",
    # composites with enum, array, domain and composite fields (record_out nested),
    # arrays of composites (array_out of record_out), a domain over an enum
    r"""INSERT INTO n_nested VALUES
 (1, ROW('it''s', '{1,NULL,-3}', ROW(NULL), '{sad,NULL,"it''s"}',
         ROW(5, 'a "q" \ (x, y)', ROW(-1)), 'ok', 7, '{"a b",NULL,"",é,"{}"}')::n_rich,
  ARRAY[ROW(1, '', NULL), NULL, ROW(NULL, NULL, ROW(2))]::n_pair[],
  ARRAY[ROW(NULL, '{}', NULL, '{}', NULL, NULL, NULL, '{}')]::n_rich[], 'it''s'),
 (2, ROW(NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL)::n_rich, '{}', '{}', NULL),
 (3, NULL, NULL, NULL, 'sad')""",
    """INSERT INTO n_nested SELECT 10 + g,
              ROW((ARRAY['sad', 'ok']::n_mood[])[g % 2 + 1], ARRAY[g, -g], ROW(g),
                  ARRAY['ok', NULL]::n_mood[], ROW(g, 't ' || g, ROW(-g)), 'sad'::n_mood_d,
                  g, ARRAY['x' || g, NULL])::n_rich,
              ARRAY[ROW(g, 'p' || g, ROW(g)), NULL]::n_pair[], NULL,
              (ARRAY['sad', 'ok'])[g % 2 + 1]::n_mood_d
       FROM generate_series(1, 200) g""",
    # a domain over a composite: as the composite (record_out's text)
    """INSERT INTO n_nested (id, dp) SELECT 300 + g, ROW(g, 'd "q" ' || g, ROW(-g))::n_pair_d
       FROM generate_series(1, 50) g""",
    "INSERT INTO n_nested (id, dp) VALUES (360, ROW(NULL, NULL, NULL)), (361, NULL)",
    # a box[] field: array_out with box's delimiter ';' inside record_out's text
    """INSERT INTO n_nested (id, bx) SELECT 400 + g, ROW(ARRAY[box(point(g, g), point(0, 0)),
              NULL, box(point(-g, 1.5), point(2, 2))], g)::n_boxed
       FROM generate_series(1, 50) g""",
    """INSERT INTO n_nested (id, bx) VALUES (460, ROW('{}', NULL)), (461, ROW(NULL, 1)),
 (462, ROW(ARRAY[ARRAY['(1,1),(0,0)'::box], ARRAY[NULL::box]], 2))""",
    "UPDATE n_nested SET dm = 'ok' WHERE id % 3 = 0",
    "DELETE FROM n_nested WHERE id % 4 = 0",
    # pg_snapshot_out (txid_snapshot, pg_snapshot and an array of it), int2vectorout,
    # oidvectorout
    """INSERT INTO n_sys VALUES
 (1, '10:20:10,14,15', '9223372036854775000:9223372036854775807:', '1 -32768 32767',
  '0 4294967295 23', ARRAY['10:20:'::pg_snapshot, NULL]),
 (2, '1:1:', '100:200:150', '', '', '{}'),
 (3, NULL, NULL, NULL, NULL, NULL)""",
    """INSERT INTO n_sys SELECT g, (g || ':' || g + 5 || ':' || g + 1)::txid_snapshot,
              (g || ':' || g || ':')::pg_snapshot, (g || ' ' || -g)::int2vector,
              (g::text)::oidvector, ARRAY[(g || ':' || g || ':')::pg_snapshot]
       FROM generate_series(10, 209) g""",
    "DELETE FROM n_sys WHERE id % 4 = 0",
    # user-defined ranges and multiranges over the subtypes of built-in ranges: their
    # datums store their own type OIDs (`int8range@<oid>`)
    """INSERT INTO n_urange VALUES
 (1, '[1,5)', '{[1,3),[7,9]}', '[1.5,NaN]', '{[-1e20,0.5),[2,)}',
  '[2020-01-01 00:00:00.5+00,infinity)', '[2000-02-29,2000-03-01]',
  '[-0.1,1e300]', '{[-Infinity,-0),[0.3,0.30000000000000004]}'),
 (2, 'empty', '{}', '(,)', '{(,)}', 'empty', '(,2000-01-01)', '(,NaN]', '{}'),
 (3, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL)""",
    """INSERT INTO n_urange SELECT g, int8range(g, g * 1000)::text::n_i8range,
              ('{[' || g || ',' || g + 1 || '),[' || g * 3 || ',' || g * 4 || ']}')::n_i8multirange,
              ('(' || g / 7.0 || ',' || g || ']')::n_numrng,
              ('{[' || -g || ',0],[' || g || '.25,' || g || '.5)}')::n_nummulti,
              ('[' || timestamptz '2024-02-29 12:00+00' + g * interval '1 day 1 us'
                   || ',)')::n_tzrng,
              ('[' || date '1999-12-31' + g || ',' || date '2000-12-31' + g * 3 || ')')::n_dayrng,
              ('[' || g / 7.0::float8 || ',' || g * 1e10::float8 || ')')::n_floatrange,
              ('{[' || -g / 3.0::float8 || ',' || g / 3.0::float8 || ']}')::n_floatmultirange
       FROM generate_series(10, 209) g""",
    # ... and over the other subtypes of user ranges (`textrange@<oid>`, ...): bounds
    # range_bound_escape quotes (empty, quotes, backslashes, spaces, commas, brackets)
    r"""INSERT INTO n_urange (id, rt, mt, rv, r2, ro, r4, rti, rtz, riv, miv, rin, rci) VALUES
 (300, '["","a b")', '{["",""],("(x)","[y]"]}', '[A,"z,z"]', '[-32768,32767)',
  '[0,4294967295]', '[-2,1.5)', '[00:00,24:00]', '[00:00:01+00,12:00-05:30)',
  '["-00:00:01.5","1 day 02:00:00")', '{["1 mon",),(,"-1 years")}',
  '[10.0.0.1/8,192.168.0.1]', '[10.0.0.0/8,::1/128)'),
 (301, '["it''s","it''s \"q\" \\ b"]', '{}', '(,"x y")', 'empty', '(,7)', '(0.25,)',
  '(,12:00:00.5)', 'empty', 'empty', '{}', '(::1,)', '(,192.168.0.0/16]'),
 (302, '(é,ü]', '{[a,b),[c,d)}', NULL, '(1,2)', NULL, NULL, NULL, NULL, NULL, NULL,
  NULL, NULL)""",
    """INSERT INTO n_urange (id, rt, r2, riv, rin)
       SELECT g, ('[' || g || ',' || g || ' ' || g || ')')::n_textrange,
              ('[' || g || ',' || g * 2 || ')')::n_int2range,
              ('[' || g || ' days,' || g || ' mons)')::n_ivrange,
              ('[10.0.' || g % 256 || '.1,)')::n_inetrange
       FROM generate_series(310, 400) g""",
    # ... over bytea, macaddr, macaddr8, bool, "char", name, bpchar, money, bit, varbit,
    # tid and pg_lsn (`bytearange@<oid>`, ...): bytea's and tid's text always quoted
    # (a backslash; parentheses and a comma), money's with a comma, bpchar's padding
    r"""INSERT INTO n_urange (id, rby, mby, rma, rm8, rbo, rch, rnm, rbp, rmo, rbi, mbi, rvb,
                      rtd, mtd, rls) VALUES
 (500, '["\\x","\\x00ff")', '{["\\x01","\\x02"],("\\xfe",)}',
  '[08:00:2b:01:02:03,08:00:2b:01:02:04]', '(,08:00:2b:01:02:03:04:05]', '[f,t]',
  '[" ",z)', '["a b",zz)', '["ab  ",c]', '["$1.50","$1,000.00")', '[0101,1111)',
  '{[00,01),[10,11]}', '(,10101]', '["(0,1)","(4294967295,65535)"]',
  '{["(0,1)","(0,2)"),["(1,1)",)}', '[0/0,FFFFFFFF/FFFFFFFF]'),
 (501, 'empty', '{}', 'empty', '[00:00:00:00:00:00:00:00,)', '[t,t]', '(,"")', '("",)',
  '("",)', '["-$92,233,720,368,547,758.08",)', '["",)', '{}', '["",1]', 'empty', '{}',
  '(,0/1)'),
 (502, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
  NULL, NULL)""",
    """INSERT INTO n_urange (id, rby, rbo, rnm, rmo, rbi, rtd, mtd, rls)
       SELECT g, ('["\\\\x' || lpad(to_hex(g), 4, '0') || '",)')::n_bytearange,
              (CASE WHEN g % 2 = 0 THEN '[f,t)' ELSE '(f,t]' END)::n_boolrange,
              ('["n ' || g || '",n' || g || ']')::n_namerange,
              ('["$' || g || '.25","$' || g * 1000 || '.00")')::n_moneyrange,
              ('[' || (g % 8)::bit(3)::text || ',)')::n_bitrange,
              ('["(' || g || ',1)","(' || g * 2 || ',' || g % 65536 || ')")')::n_tidrange,
              ('{["(0,' || g || ')",)}')::n_tidmultirange,
              ('[' || g || '/' || to_hex(g * 4096) || ',)')::n_lsnrange
       FROM generate_series(510, 600) g""",
    """INSERT INTO n_urange (id, ruu, muu) VALUES
 (700, '[00000000-0000-0000-0000-000000000000,ffffffff-ffff-ffff-ffff-ffffffffffff]',
  '{[a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11,),(,00000000-0000-0000-0000-000000000001)}'),
 (701, 'empty', '{}'), (702, NULL, NULL)""",
    """INSERT INTO n_urange (id, ruu) SELECT g, ('[' || md5(g::text)::uuid || ',)')::n_uuidrange
       FROM generate_series(710, 760) g""",
    # xid8: xid8out's unsigned decimal, past the int8 range too
    """INSERT INTO n_urange (id, rx8, mx8) VALUES
 (800, '[0,18446744073709551615]', '{[3,5),[9223372036854775808,)}'),
 (801, 'empty', '{}'), (802, '(,7)', NULL), (803, NULL, NULL)""",
    """INSERT INTO n_urange (id, rx8, mx8)
       SELECT g, ('[' || g || ',' || g::numeric * 4294967296 || ')')::n_xid8range,
              ('{(,' || g || '],[' || g * 3 || ',)}')::n_xid8multirange
       FROM generate_series(810, 860) g""",
    # domains over user ranges and multiranges: the range's datums (its OID) and text
    """INSERT INTO n_urange (id, dri, dmt, dls) VALUES
 (900, '[-9223372036854775808,0)', '{["a b",c],("(x)",)}', '[0/0,FFFFFFFF/FFFFFFFF]'),
 (901, 'empty', '{}', '(,1/0)'), (902, NULL, NULL, NULL)""",
    """INSERT INTO n_urange (id, dri, dmt, dls)
       SELECT g, ('[' || g || ',' || g * 1000 || ')')::n_di8range,
              ('{[t' || g || ',u' || g || ')}')::n_dtextmulti,
              ('[' || g || '/0,)')::n_dlsnrange
       FROM generate_series(910, 960) g""",
    "UPDATE n_urange SET r = '[0,1]' WHERE id % 3 = 0",
    "DELETE FROM n_urange WHERE id % 4 = 0",
    # tid: tidout's text (a string), in a tid[] and as a composite's field too
    """INSERT INTO n_tid VALUES
 (1, '(0,0)', '{"(4294967295,65535)",NULL,"(1,2)"}', ROW('(7,7)', 1)),
 (2, '(4294967295,65535)', '{}', ROW(NULL, NULL)), (3, NULL, NULL, NULL)""",
    """INSERT INTO n_tid SELECT g, ('(' || g * 65537 || ',' || g % 65536 || ')')::tid,
              ARRAY[('(' || g || ',1)')::tid, ('(1,' || g || ')')::tid],
              ROW(('(' || g || ',' || g || ')')::tid, g)::n_tidc
       FROM generate_series(10, 209) g""",
    "UPDATE n_tid SET t = '(9,9)' WHERE id % 3 = 0",
    "DELETE FROM n_tid WHERE id % 4 = 0",
]

_EDGE_ROWS = """
INSERT INTO n_all (id, b, s, i, o, f4, f8, t, vc, bc, nm, by, u, d, tm, ts, tz,
                   n12, n38, n0, nv, j, gone, big) VALUES
 (1, true, -32768, -2147483648, 4294967295, 1.5, -0.0, '', '', '', '', '',
  '00000000-0000-0000-0000-000000000000', 'infinity', '00:00:00', 'infinity', 'infinity',
  -128, -1.28, 127, 0, '{}', 1, ''),
 (2, false, 32767, 2147483647, 0, '-Infinity', 'NaN', 'héllo wörld ✓ 😀', 'ü', 'ä',
  'some_name', '\\x00ff10', 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', '-infinity',
  '24:00:00', '-infinity', '-infinity', -327.68, 9999999999999999999999999999.9999999999,
  -999999999999999999999999999999, -0.000001, '{"a": [1, 2, {"b": null}]}', 2,
  repeat('abc', 3000)),
 (3, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
  NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL),
 (4, true, 0, 0, 1, 1e-45, 'Infinity', repeat('é', 200), 'x', 'abcde', 'n',
  '\\x', '123e4567-e89b-12d3-a456-426614174000', '5874897-12-31', '23:59:59.999999',
  '294247-01-10 04:00:54.775806', '0005-01-01 00:00:00+00', 0.01, -0.0000000001,
  1, 1e30, '[1,   2]', 3, repeat(md5('x'), 400)),
 (5, true, 1, 1, 2, 3.4028235e38, 1.7976931348623157e308, 'tab	and
newline', 'v', 'b', 'name2', '\\xdeadbeef', 'ffffffff-ffff-ffff-ffff-ffffffffffff',
  '4713-01-01 BC', '12:34:56.789', '294276-12-31 23:59:59.999999',
  '0001-01-01 00:00:00+00', -0.01, 1234567890.0123456789, 128, -128, 'null', 4, 'short'),
 (6, false, -1, -1, 3, -1.17549435e-38, 5e-324, 'z', 'w', ' ', 'n3', '\\x01',
  '01234567-89ab-cdef-0123-456789abcdef', '0001-01-01', '01:02:03', '4713-01-01 00:00:00 BC',
  '0044-03-15 12:00:00+00 BC', 9999999999.99, 0, 0, 'NaN', '"s"', 5, NULL),
 (7, true, 2, 2, 4, 'NaN', 2.5, 'nan float4', 'q', 'c', 'n4', '\\x02',
  '11111111-2222-3333-4444-555555555555', '2000-01-01', '00:00:00.000001',
  '1999-12-31 23:59:59.999999', '12345-06-07 08:09:10+00', 'NaN', 1, 2, 'Infinity',
  '1', 6, NULL),
 (8, true, 3, 3, 5, 0, 0, 'y', 'r', 'd', 'n5', '\\x03',
  '22222222-3333-4444-5555-666666666666', '1970-01-01', '00:00:01',
  '0999-12-31 23:59:59', '0999-12-31 23:59:59.5+00', 12.5, 0.5, 3, '-Infinity', '2', 7,
  NULL)
"""

WORKLOAD = [
    _EDGE_ROWS,
    # a bulk of ordinary rows, numerics of every sign and stored form
    """INSERT INTO n_all (id, b, s, i, o, f4, f8, t, vc, bc, nm, by, u, d, tm, ts, tz,
                          n12, n38, n0, nv, j, gone, big)
       SELECT 100 + g, g % 2 = 0, g - 150, g * 99991 - 7, g, g / 7.0, g / 3.0,
              'row ' || g, 'v' || g, chr(65 + g % 26), 'name' || g,
              decode(lpad(to_hex(g), 8, '0'), 'hex'), md5(g::text)::uuid,
              date '2000-01-01' + g * 311 - 80000, time '00:00' + g * interval '17 min',
              timestamp '1999-12-31 23:59:59.999999' - g * interval '400 days 3 us',
              timestamptz '2024-02-29 12:34:56.789+00' + g * interval '37 days 1 us',
              (g * 7919 % 100000000 - 50000000)::numeric / 100,
              (g::numeric * 123456789.0123456789 - 1e20) / (g + 1),
              (10::numeric ^ (g % 30)) - 1,
              CASE g % 4 WHEN 0 THEN g::numeric / 7 WHEN 1 THEN -g * 1000
                   WHEN 2 THEN 1.500 ELSE -(2::numeric ^ (g % 70)) END,
              json_build_object('g', g)::json, g, repeat(chr(97 + g % 26), 2000 + g)
       FROM generate_series(1, 300) g""",
    "ALTER TABLE n_all DROP COLUMN gone",
    "ALTER TABLE n_all ADD COLUMN later int4",
    """INSERT INTO n_all (id, t, later, req) VALUES (1000, 'after the drop', 42, 'r'),
        (1001, NULL, NULL, 'also')""",
    # external TOAST: a new value, then an UPDATE that leaves it unchanged
    "INSERT INTO n_all (id, ext) VALUES (2000, repeat('toasted ', 5000))",
    "UPDATE n_all SET t = 'touched' WHERE id = 2000",
    # external and compressed (pglz): stored out of line as its compressed stream
    "INSERT INTO n_all (id, t) VALUES (2001, (SELECT string_agg(md5(g::text), '')"
    " FROM generate_series(1, 2000) g))",
    # two TOAST values in one row, and a row of a multi-row statement
    "INSERT INTO n_all (id, t, ext) SELECT 2001 + g, (SELECT string_agg(md5((g * k)::text),"
    " '') FROM generate_series(1, 1500) k), repeat('e' || g, 3000) FROM generate_series(1, 3) g",
    # plain updates (no old tuple) and a key change (Python: headers, key comparison)
    "UPDATE n_all SET f8 = f8 * 2, t = t || '!' WHERE id BETWEEN 100 AND 150",
    "UPDATE n_all SET id = 3000 WHERE id = 1",
    "DELETE FROM n_all WHERE id BETWEEN 151 AND 180 OR id = 3",
    # a text key in key order unlike attnum order
    "INSERT INTO n_keyed SELECT 'k' || g, g, 'note ' || g FROM generate_series(1, 20) g",
    "DELETE FROM n_keyed WHERE n % 3 = 0",
    # REPLICA IDENTITY FULL deletes of tuples older than ADD COLUMN
    "INSERT INTO n_full SELECT g, 'v' || g FROM generate_series(1, 10) g",
    "INSERT INTO n_full_default SELECT g, 'v' || g FROM generate_series(1, 10) g",
    "INSERT INTO n_full_jdefault SELECT g, 'v' || g FROM generate_series(1, 4) g",
    "ALTER TABLE n_full ADD COLUMN added int4",
    # defaults the decoder reads as stored datums (attmissingval: native), and a jsonb
    # one it reads otherwise (its send form is text: the Python fallback)
    "ALTER TABLE n_full_default ADD COLUMN added int4 DEFAULT 7",
    """ALTER TABLE n_full_default ADD COLUMN t2 text DEFAULT 'it''s a "default" ',
       ADD COLUMN n2 numeric(10, 2) DEFAULT -3.50, ADD COLUMN a2 int4[] DEFAULT '{1,NULL}',
       ADD COLUMN e2 n_mood DEFAULT 'ok',
       ADD COLUMN tz2 timestamptz DEFAULT '2020-01-01 00:00+00',
       ADD COLUMN c2 n_simple DEFAULT ROW(1, 'x y', '2020-01-02'),
       ADD COLUMN ip2 inet DEFAULT '10.1.2.3/8', ADD COLUMN b2 bool DEFAULT true""",
    "ALTER TABLE n_full_jdefault ADD COLUMN j jsonb DEFAULT '{\"a\": [1, null]}'",
    "DELETE FROM n_full WHERE id <= 5",
    "DELETE FROM n_full_default WHERE id <= 5",
    "DELETE FROM n_full_jdefault WHERE id <= 2",
    # REPLICA IDENTITY FULL updates: of tuples older than ADD COLUMN (without a default,
    # and with defaults read as stored datums: native; a jsonb default: the Python
    # fallback), then of tuples with every attribute
    "UPDATE n_full SET v = v || '!' WHERE id > 5",
    "UPDATE n_full_default SET v = v || '!' WHERE id > 5",
    "UPDATE n_full_jdefault SET v = v || '!' WHERE id > 2",
    "UPDATE n_full SET added = id WHERE id > 7",
    # ... with a key: unchanged (native; a compressed inline value on both sides), a
    # key change (Python: DELETE, tombstone, CREATE), and a float key (Python compares)
    "INSERT INTO n_full_key SELECT g, 'v' || g, repeat('z', 3000 + g) FROM generate_series(1, 6) g",
    "UPDATE n_full_key SET v = v || '?' WHERE id <= 4",
    "UPDATE n_full_key SET id = 100 WHERE id = 5",
    "BEGIN; UPDATE n_full_key SET v = NULL WHERE id = 6;"
    " UPDATE n_full_key SET id = 101 WHERE id = 1;"
    " UPDATE n_full_key SET big = 'small' WHERE id = 2; COMMIT",
    "INSERT INTO n_full_float VALUES (1.5, 'a'), ('NaN', 'nan')",
    "UPDATE n_full_float SET v = v || '!'",
    # 400 REPLICA IDENTITY FULL updates in one statement: runs of updates with their
    # old tuples, encoded as pairs (RowPlan.encode_update_rows) where a piece of one
    # reaches the replay whole; then 400 more of which one changes its key: the run
    # stops there (Python: DELETE, tombstone, CREATE)
    "INSERT INTO n_full_run SELECT g, 'r' || g, g / 4.0 FROM generate_series(1, 400) g",
    "UPDATE n_full_run SET v = v || '!', n = n + 1",
    "UPDATE n_full_run SET v = v || '?', id = CASE WHEN id = 300 THEN 9300 ELSE id END",
    *_MORE_ROWS,
    # a table without a native plan (an array of a user range) interleaved with native
    # rows in one transaction
    """BEGIN; INSERT INTO n_python VALUES (1, '(1,x,"(1)")', '{"[sad,\\"it''s\\")"}');
       INSERT INTO n_all (id, t) VALUES (5000, 'mixed');
       INSERT INTO n_python VALUES (2, '(2,,)'); COMMIT""",
    "INSERT INTO n_all (id, t) SELECT 6000 + g, 'tail' FROM generate_series(1, 5) g",
    # many rows without a plan: one run of them (RowRun), and one inside a mixed run
    "INSERT INTO n_python SELECT g, ROW(g, 'y', ROW(g))::n_pair FROM generate_series(10, 209) g",
    """BEGIN; INSERT INTO n_python SELECT g, '(1,z,)' FROM generate_series(300, 499) g;
       INSERT INTO n_keyed VALUES ('last', 999, 'after the composite rows'); COMMIT""",
    # new values out of line for rows that had some: per row the chunk inserts of the
    # new value, the chunk deletes of the old one (no old tuple), then the UPDATE, all
    # in the update run under the native reader (t stays an unchanged pointer)
    "UPDATE n_all SET ext = repeat('r' || id, 3000) WHERE id BETWEEN 2000 AND 2004",
    # deletes of rows with values out of line: each row's DELETE, then toast_delete's
    # DELETEs of its chunks (no old tuple), which join the rows' delete run (bare
    # deletes) under the native reader and are dropped at replay
    "DELETE FROM n_all WHERE id BETWEEN 2000 AND 2004",
]


def _has_xml(cur: Any) -> bool:
    """Whether the server takes xml input (it is built with libxml)."""
    try:
        cur.execute("SELECT '<a/>'::xml")
        return True
    except psycopg2.Error:
        return False


_LZ4 = """SELECT 'lz4' = ANY(enumvals) FROM pg_settings
          WHERE name = 'default_toast_compression'"""


# The extension types the native encoder writes (tests/integration/extension_cases): the
# contrib ones on every build, PostGIS on pg15, pgvector on pg18.
_EXT_FEATURES = (
    "hstore",
    "ltree",
    "citext",
    "isn",
    "cube",
    "earthdistance",
    "seg",
    "postgis",
    "vector",
    "halfvec",
    "sparsevec",
)


def _extension_table(pg: dict[str, Any]) -> tuple[str, str]:
    """The DDL of a table with a column per extension type the build has (not arrays),
    and an INSERT of 8 rows cycling through each type's literals."""
    found = [
        (typ, literals)
        for feature, typs in EXTENSION_CASES.items()
        if feature in _EXT_FEATURES and has(pg, feature)
        for typ, literals in typs
        if not typ.endswith("[]")
    ]
    ddl = (
        extension_ddl(pg)
        + "\nCREATE TABLE n_ext (id int4 PRIMARY KEY"
        + "".join(f", c{k} {typ}" for k, (typ, _) in enumerate(found))
        + ");"
    )
    rows = [
        "(" + ", ".join([str(i), *(lits[i % len(lits)] for _, lits in found)]) + ")"
        for i in range(8)
    ]
    return ddl, "INSERT INTO n_ext VALUES " + ", ".join(rows)


# Arrays of the extension types the native encoder writes (connectors.avro.native_plan's
# EXT_LAYOUTS), as far as the build has them: several elements (cube's, PostGIS' and the
# isn types' double-aligned, seg's fixed 12 bytes), NULLs, empty and 2-D arrays.
_EXT_ARRAYS: list[tuple[str, str, list[str]]] = [
    (
        "hstore",
        "hstore[]",
        ["ARRAY['a=>1'::hstore, NULL, '', 'b=>NULL, \"c d\"=>x']", "'{}'", "NULL"],
    ),
    ("ltree", "ext.ltree[]", ["ARRAY['a.b', NULL, '', 'Top.Science']::ext.ltree[]", "'{}'"]),
    ("ltree", "ext.lquery[]", ["ARRAY['a.*', NULL, '*{2,}.x|y@']::ext.lquery[]"]),
    ("isn", "isbn13[]", ["ARRAY['978-0-393-04002-9', NULL, '979123456789?']::isbn13[]"]),
    (
        "isn",
        "ean13[]",
        ["ARRAY[['4006381333931', '0036000291452'], ['220000000001?', NULL]]::ean13[]"],
    ),
    ("isn", "upc[]", ["ARRAY['036000291452', NULL, '012345678905']::upc[]"]),
    ("isn", "issn[]", ["ARRAY[NULL, '1436-4522']::issn[]"]),
    (
        "cube",
        "cube[]",
        [
            "ARRAY['(1)'::cube, NULL, '(1,2),(3,4)', '(0.1)']",
            '\'{{"(1)","(2)"},{"(3)","(4, 5)"}}\'::cube[]',
        ],
    ),
    ("seg", "seg[]", ["ARRAY['1 .. 2'::seg, NULL, '<5', '~3.0e2', '6.50']"]),
    # an array of a domain over an extension type: earthdistance's earth over cube
    (
        "earthdistance",
        "earth[]",
        ["ARRAY[ll_to_earth(40.7, -74.0), NULL, ll_to_earth(0, 0)]", "'{}'"],
    ),
    (
        "postgis",
        "geometry[]",
        ["ARRAY['POINT(1 2)'::geometry, NULL, 'SRID=4326;POINT(3 4)', 'LINESTRING(0 0,1 1)']"],
    ),
    ("postgis", "geography[]", ["ARRAY['POINT(1 2)'::geography, NULL, 'POINT(3 4.5)']"]),
    ("vector", "vector[]", ["ARRAY['[1,2]'::vector, NULL, '[0.5,-3,7]']"]),
    ("halfvec", "halfvec[]", ["ARRAY['[1,2]'::halfvec, NULL, '[0.25]']"]),
    ("sparsevec", "sparsevec[]", ["ARRAY['{1:1}/2'::sparsevec, NULL, '{}/3', '{2:0.5,5:-1}/6']"]),
]


def _extension_array_table(pg: dict[str, Any]) -> tuple[str, str]:
    """The DDL of `n_ext_arr`, a column per `_EXT_ARRAYS` type the build has, and an
    INSERT of 6 rows cycling through each type's literals."""
    found = [(typ, lits) for feature, typ, lits in _EXT_ARRAYS if has(pg, feature)]
    ddl = (
        "CREATE TABLE n_ext_arr (id int4 PRIMARY KEY"
        + "".join(f", c{k} {typ}" for k, (typ, _) in enumerate(found))
        + ")"
    )
    rows = [
        "(" + ", ".join([str(i), *(lits[i % len(lits)] for _, lits in found)]) + ")"
        for i in range(6)
    ]
    return ddl, "INSERT INTO n_ext_arr VALUES " + ", ".join(rows)


@pytest.mark.parametrize("hstore_mode", ["json", "map"])
def test_native_rows_equal_python_and_reference(
    pg: dict[str, Any],
    registry: dict[str, Any],
    monkeypatch: pytest.MonkeyPatch,
    hstore_mode: str,
) -> None:
    """Every covered type and edge value gives the same records on all three paths
    (hstore.handling.mode=map: on the Python and native paths; the generic reference
    knows only json)."""
    monkeypatch.setattr(avro_plugin, "time", FrozenTime)
    monkeypatch.setattr(avro_reference, "time", FrozenTime)
    native = native_row_core() is not None
    groups: list[tuple[str, int, int]] = []  # NativeRows._group: (table, rows, result)
    group = NativeRows._group
    updates: list[tuple[str, bool]] = []  # NativeRows._encode_update: (table, native)
    encode_update = NativeRows._encode_update

    def counted_update(self: NativeRows, *args: Any) -> Any:
        out = encode_update(self, *args)
        updates.append((args[2].plan.topic.rsplit(".", 1)[-1], out is not None))
        return out

    monkeypatch.setattr(NativeRows, "_encode_update", counted_update)

    deletes: list[tuple[str, int, int]] = []  # the same, of DELETE groups
    update_groups: list[tuple[str, int, int]] = []  # and of UPDATE groups

    def counted(self: NativeRows, *args: Any, **kwargs: Any) -> int:
        done = group(self, *args, **kwargs)
        seen = (args[2].plan.topic.rsplit(".", 1)[-1], len(args[6]), done)
        groups.append(seen)
        if args[5] is ChangeOp.DELETE:
            deletes.append(seen)
        if args[5] is ChangeOp.UPDATE:
            update_groups.append(seen)
        return done

    monkeypatch.setattr(NativeRows, "_group", counted)
    bare_runs: list[int] = []  # InsertRows.mains: a delete run's rows without its bare ones
    mains = InsertRows.mains

    def counted_mains(self: InsertRows) -> InsertRows | None:
        bare_runs.append(self.chunks)
        return mains(self)

    monkeypatch.setattr(InsertRows, "mains", counted_mains)
    queued: list[tuple[ChangeKind, int, int]] = []  # queue_run: (kind, chunks, bares)
    queue_run = ReorderBuffer.queue_run

    def counted_queue_run(self: ReorderBuffer, xid: int, lsn: int, rows: InsertRows) -> None:
        queued.append((rows.kind, rows.chunks, rows.bares))
        queue_run(self, xid, lsn, rows)

    monkeypatch.setattr(ReorderBuffer, "queue_run", counted_queue_run)
    db = f"avronative_{uuid.uuid4().hex[:10]}"
    admin = psycopg2.connect(_dsn(pg, "postgres"))
    admin.autocommit = True
    admin.cursor().execute(f"CREATE DATABASE {db}")
    dsn, phys, slot = _dsn(pg, db), f"{db}_phys", f"{db}_slot"
    seen: list[OutputRecord] = []
    try:
        setup(dsn, phys)
        conn = psycopg2.connect(dsn)
        conn.autocommit = True
        with conn.cursor() as cur:
            cur.execute(SCHEMA)
            ext_ddl, ext_rows = _extension_table(pg)
            cur.execute(ext_ddl)
            arr_ddl, arr_rows = _extension_array_table(pg)
            cur.execute(arr_ddl)
            cur.execute(_LZ4)
            found = cur.fetchone()
            workload = [*WORKLOAD, ext_rows, "DELETE FROM n_ext WHERE id = 3", arr_rows]
            workload += jsonpath_rows(int(pg["version"]))
            xml = _has_xml(cur)
            if xml:  # where the server has libxml (not the PG18 build here)
                cur.execute("ALTER TABLE n_more ADD COLUMN x xml")
                workload.append(
                    "INSERT INTO n_more (id, x) VALUES (5000, '<a>é</a>'), (5001, E'\\n<b/>'),"
                    " (5002, '<?xml version=\"1.0\"?><c/>'), (5003, '')"
                )
            if found is not None and found[0]:
                cur.execute("ALTER TABLE n_all ADD COLUMN big4 text COMPRESSION lz4")
                cur.execute("ALTER TABLE n_all ALTER COLUMN big4 SET STORAGE MAIN")
                workload.append(
                    "INSERT INTO n_all (id, big4) VALUES (7000, repeat('lz4 text ', 900))"
                )
                # external and lz4-compressed
                cur.execute("ALTER TABLE n_all ADD COLUMN ext4 text COMPRESSION lz4")
                workload.append(
                    "INSERT INTO n_all (id, ext4) VALUES (7001, (SELECT string_agg("
                    "md5(g::text), '') FROM generate_series(1, 2000) g))"
                )
            start, consistent = _logical_slot(dsn, cur, slot)
            force_running_xacts(dsn, int(pg["version"]))
            settings = Settings(
                source={"slot": slot, "dbname": db},
                kafka={
                    "bootstrap_servers": "127.0.0.1:1",
                    "topic_prefix": f"nativewal{uuid.uuid4().hex[:8]}",
                },
                registry={"url": registry["url"]},
            )
            expected: list[OutputRecord] = []
            python: list[OutputRecord] = []
            got: list[OutputRecord] = []
            runs: list[int] = []  # the native path's record runs (ctx.write_run)
            options = {"hstore.handling.mode": hstore_mode}
            reference = ReferencePlugin(settings)
            on_python = AvroPlugin(settings)
            ours = AvroPlugin(settings)
            on_python.run_id = ours.run_id = reference.run_id
            with tempfile.TemporaryDirectory(prefix="pgcdc-avro-native-") as spill:
                sessions = [
                    _session(
                        pg, dsn, slot, start, consistent, spill, on_python, python, None, options
                    ),
                    _session(pg, dsn, slot, start, consistent, spill, ours, got, runs, options),
                ]
                if hstore_mode == "json":
                    sessions.append(
                        _session(pg, dsn, slot, start, consistent, spill, reference, expected)
                    )
                seen = expected if hstore_mode == "json" else python
                on_python.native_rows = None  # the Python path, whatever PGCDC_IMPL says
                assert (ours.native_rows is not None) == native
                try:
                    for sql in workload:
                        cur.execute(sql)
                    cur.execute("SELECT pg_current_wal_lsn()::text")
                    row = cur.fetchone()
                    assert row is not None
                    end = parse_lsn(row[0])
                    for session in sessions:
                        _pump(pg, session, start, end)
                finally:
                    for session in sessions:
                        session.close()
        conn.close()
        if hstore_mode == "map":
            expected = python  # the reference knows only json; python and native below
        topics = {r.topic.rsplit(".", 1)[-1] for r in expected}
        assert topics >= {
            "n_all",
            "n_keyed",
            "n_full",
            "n_full_default",
            "n_full_jdefault",
            "n_full_key",
            "n_full_float",
            "n_python",
            "n_more",
            "n_arr",
            "n_geo",
            "n_ext",
            "n_ext_arr",
            "n_dom",
            "n_nested",
            "n_sys",
            "n_urange",
            "n_erange",
            "n_jpath",
            "n_jpath_arr",
            "n_tid",
        }
        assert len(expected) > 500
        for name, records in (("python", python), ("native", got)):
            assert len(records) == len(expected), name
            for i, (g, e) in enumerate(zip(records, expected, strict=True)):
                assert (g.topic, g.key, g.value, g.headers) == (
                    e.topic,
                    e.key,
                    e.value,
                    e.headers,
                ), (name, i, e.topic)
        if native:
            counts = ours.native_rows
            assert counts is not None
            assert counts.native > 400, counts.native
            # Runs between single records (BEGIN/END, fallbacks, tombstones), and long
            # ones: the 300-row INSERT is one run, cut where a fallback row falls.
            assert sum(runs) < counts.native and max(runs) > 100 and len(runs) > 5, runs
            # DELETEs go native in groups too, each event followed by its tombstone
            # (kafka.tombstones_on_delete, on by default), as the Python path writes it.
            assert settings.kafka.tombstones_on_delete
            gone = [(n, done) for table, n, done in deletes if table == "n_more"]
            assert sum(n for n, _ in gone) >= 300 // 7 and all(n == d for n, d in gone), gone
            # the five toasted rows deleted last: one group, native, without their chunks
            assert ("n_all", 5, 5) in deletes, deletes
            if selected() == "native":  # their chunk deletes came in the rows' run
                assert sum(bare_runs) >= 5, bare_runs
                # and the updates' chunk inserts and deletes in theirs
                assert any(k is ChangeKind.UPDATE and c > b > 0 for k, c, b in queued), queued
            else:
                assert bare_runs == [] and queued == [], (bare_runs, queued)
            stones = sum(1 for r in got if r.value is None)
            assert stones == sum(1 for r in python if r.value is None) >= 300 // 7
            # A table without a plan goes to Python a whole group at a time (one
            # _group call per run of its rows, not one per row). The 400-row INSERT's
            # groups are the reader's InsertRuns, which end at its 256-record slices
            # (128 inserts with their index inserts).
            pairs = [(n, done) for table, n, done in groups if table == "n_python"]
            assert sum(n for n, _ in pairs) == 400 + 2 and len(pairs) <= 8, pairs
            assert all(done == -1 for _, done in pairs), pairs
            # The second step's types (and domains over native types) have a plan.
            more = [(n, done) for table, n, done in groups if table == "n_more"]
            assert sum(n for n, _ in more) >= 300 and all(done != -1 for _, done in more), more
            for name, least in (("n_arr", 200), ("n_geo", 200), ("n_ext", 5)):
                mine = [(n, done) for table, n, done in groups if table == name]
                assert sum(n for n, _ in mine) >= least, (name, mine)
                assert all(done != -1 for _, done in mine), (name, mine)
            # Arrays of the extension types: native, row for row
            ext_arr = [(n, done) for table, n, done in groups if table == "n_ext_arr"]
            assert sum(n for n, _ in ext_arr) >= 6, ext_arr
            assert all(n == done for n, done in ext_arr), ext_arr
            # Domains over arrays and arrays of domains are native, row for row.
            doms = [(n, done) for table, n, done in groups if table == "n_dom"]
            assert sum(n for n, _ in doms) >= 200 and all(n == done for n, done in doms), doms
            # Nested composites, composites with enum/array/domain fields, arrays of
            # composites and domains over enums are native, row for row.
            nested = [(n, done) for table, n, done in groups if table == "n_nested"]
            assert sum(n for n, _ in nested) >= 200, nested
            assert all(n == done for n, done in nested), nested
            # txid_snapshot, pg_snapshot, pg_snapshot[], int2vector, oidvector: native
            sys_rows = [(n, done) for table, n, done in groups if table == "n_sys"]
            assert sum(n for n, _ in sys_rows) >= 200, sys_rows
            assert all(n == done for n, done in sys_rows), sys_rows
            # user-defined ranges and multiranges over a built-in range's subtype
            urange = [(n, done) for table, n, done in groups if table == "n_urange"]
            assert sum(n for n, _ in urange) >= 200, urange
            assert all(n == done for n, done in urange), urange
            # ranges and multiranges over an enum (and a domain over one)
            erange = [(n, done) for table, n, done in groups if table == "n_erange"]
            assert sum(n for n, _ in erange) >= 50, erange
            assert all(n == done for n, done in erange), erange
            # tid, tid[] and a composite with a tid field: native, row for row
            tids = [(n, done) for table, n, done in groups if table == "n_tid"]
            assert sum(n for n, _ in tids) >= 200, tids
            assert all(n == done for n, done in tids), tids
            # jsonpath (jsonpath_out, every item kind) and jsonpath[]: native, row for row
            for name in ("n_jpath", "n_jpath_arr"):
                jp = [(n, done) for table, n, done in groups if table == name]
                assert sum(n for n, _ in jp) >= 6, (name, jp)
                assert all(n == done for n, done in jp), (name, jp)
            assert not [r for r in counts.fallbacks if "jsonpath" in r], counts.fallbacks
            if xml:
                assert "xml declaration Python decides" in counts.fallbacks, counts.fallbacks
            # TOAST values are native, the UPDATE that leaves one unchanged (its chunks
            # are not in the change: the placeholder) too. Inserts with their chunks
            # (the multi-row one's three) reach the encoder together
            # (PluginSink._flush_toasted), each with its own chunks.
            assert "external TOAST pointer" not in counts.fallbacks, counts.fallbacks
            assert counts.toasted >= 3, counts.toasted
            reasons = set(counts.fallbacks)
            assert {
                "attribute missing with a default",
                "float4 NaN",
                "numeric Python decides",
                "update changes the key",
                "update key compared in Python",
            } <= reasons, counts.fallbacks
            # floats whose shortest digits are a rounding bound or a tie (n_ext's cube,
            # vector, halfvec and sparsevec cases) are native
            assert "float Python decides" not in reasons, counts.fallbacks
            # UPDATEs with their old tuple (REPLICA IDENTITY FULL): native unless the key
            # changed, a float key, or an old tuple missing an attribute whose default
            # the decoder does not read as a stored datum (jsonb).
            native_updates = Counter(table for table, done in updates if done)
            python_updates = Counter(table for table, done in updates if not done)
            # n_full_run: the INSERT's and each UPDATE's 400 rows reach the replay as one
            # run unless this session's small memory limit spilled inside it or another
            # session's WAL record (on the shared servers) cut the reader's run: then in
            # pieces, those too short to go alone row by row. The second UPDATE's run (or
            # the piece of it holding row 300) is encoded as pairs up to the key change,
            # the rows after it one by one (_encode_update): when all three came whole,
            # one group stopped there. (The records equal the Python path's above,
            # however they came.)
            full_run = [(n, done) for table, n, done in groups if table == "n_full_run"]
            whole = [(n, done) for n, done in full_run if n == 400]
            stopped = [(n, done) for n, done in full_run if 0 <= done < n]
            assert len(whole) < 3 or stopped, full_run
            assert all(done >= 100 for _, done in stopped), full_run
            # Every one of its 800 updated rows is encoded once, in a group or alone
            # (how many of each depends on how the shared servers' WAL cut the runs),
            # natively but the key change (id 300, written by the Python path: counted
            # here only when it came alone).
            grouped = sum(max(done, 0) for table, _, done in update_groups if table == "n_full_run")
            alone = native_updates.pop("n_full_run", 0) + python_updates.get("n_full_run", 0)
            assert grouped + alone in (799, 800), (grouped, alone, full_run)
            # Of n_full_run's rows that went one by one, only the key change (id 300) is
            # the Python path's, and only when it reached the replay outside a run (in a
            # piece another session's record cut too short to go alone): CI run 12.
            assert python_updates.pop("n_full_run", 0) <= 1, python_updates
            assert native_updates == {
                "n_full": 5 + 3,
                "n_full_default": 5,
                "n_full_key": 4 + 2,
            }, native_updates
            assert python_updates == {
                "n_all": 1,  # the key change of the first workload
                "n_full_jdefault": 2,
                "n_full_key": 2,
                "n_full_float": 2,
            }, python_updates
    finally:
        drop_subjects(registry, seen)
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
        admin.close()
