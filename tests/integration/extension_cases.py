"""The extension-type cases the differential tests share: each type's SQL literals by
the feature (svc_pg's `features`) that provides it, edge values and TOASTed ones.

`extension_ddl(features)` creates every extension the build has (ltree in a schema of
its own: types are recognised by name and output function, in any schema); `cases`
lists (column type, literals) for those extensions, arrays included.
"""

from __future__ import annotations

from typing import Any

_BIG_HSTORE = (
    "(SELECT hstore(array_agg('key' || i), array_agg(repeat(md5(i::text), 3)))"
    " FROM generate_series(1, 400) i)"
)
_BIG_LINE = (
    "(SELECT ST_MakeLine(array_agg(ST_MakePoint(i, i * 0.5))) FROM generate_series(1, 6000) i)"
)
_BIG_VECTOR = "(SELECT array_agg(i / 7.0)::vector FROM generate_series(1, 3000) i)"

EXTENSION_CASES: dict[str, list[tuple[str, list[str]]]] = {
    "hstore": [
        (
            "hstore",
            [
                "''",
                "'a=>1, b=>NULL'",
                '\'"k\\"q"=>"v\\\\x", ""=>""\'',
                '\'é=>ü, "with space"=>"NULL"\'',
                "'z=>1, aa=>2, b=>3'",
                _BIG_HSTORE,
            ],
        ),
        ("hstore[]", ["ARRAY['a=>1'::hstore, NULL, '']", "'{}'"]),
    ],
    "ltree": [
        (
            "ext.ltree",
            [
                "''",
                "'Top'",
                "'Top.Science.Astronomy'",
                "'a_b.C9.x1'",
                "(SELECT string_agg('label' || i, '.') FROM generate_series(1, 800) i)::ext.ltree",
            ],
        ),
        ("ext.ltree[]", ["ARRAY['a.b', NULL, '']::ext.ltree[]"]),
        (
            "ext.lquery",
            [
                "'*'",
                "'Top.*{1,2}.Astro*'",
                "'!a|b@%*.c{3}'",
                "'*{2,}.x{,4}.y{,}.z{2,5}'",
                "'a*@%|bb.*{0}'",
                "'*{1}.*{,}.*{3,}'",
            ],
        ),
        ("ext.lquery[]", ["ARRAY['a.*', NULL]::ext.lquery[]"]),
    ],
    "citext": [
        ("citext", ["'MixedCase'", "''", "'ÉtÉ'", "repeat('CiText', 2000)"]),
        ("citext[]", ["ARRAY['A', NULL, 'b']::citext[]"]),
    ],
    "isn": [
        ("ean13", ["'4006381333931'", "'0036000291452'", "'220000000001?'", "'590123412345?'"]),
        ("isbn13", ["'978-0-393-04002-9'", "'979123456789?'", "'978055305340?'"]),
        ("isbn", ["'0-393-04002-X'", "'978-1-56619-909-4'", "'979-10-90636-07-1'"]),
        ("ismn13", ["'979-0-2600-0043-8'"]),
        ("ismn", ["'M-2600-0043-8'", "'979000000000?'"]),
        ("issn13", ["'977-1436-452-00-?'"]),
        ("issn", ["'1436-4522'", "'0317-8471'", "'0378-595?'"]),
        ("upc", ["'036000291452'", "'012345678905'"]),
        ("isbn13[]", ["ARRAY['978-0-393-04002-9', NULL]::isbn13[]"]),
    ],
    "cube": [
        (
            "cube",
            [
                "'(1,2,3)'",
                "'(1,2),(3,4)'",
                "'(0.1, -1e300)'",
                "'(1e-7)'",
                "cube(array[1.5,2.5], array[1.5,2.5])",
                "'(5,5),(5,5)'",
                "cube(array(SELECT i::float8 / 3 FROM generate_series(1, 100) i))",
                # 1e23's neighbour: its shortest digits lie on a rounding bound
                "'(9.999999999999999e+22, 1)'",
            ],
        ),
        ("cube[]", ["ARRAY['(1)'::cube, NULL]"]),
    ],
    "earthdistance": [("earth", ["ll_to_earth(40.7, -74.0)", "ll_to_earth(0, 0)"])],
    "seg": [
        (
            "seg",
            [
                "'1.5'",
                "'1.5 .. 2.75'",
                "'<1.0'",
                "'>2'",
                "'~3.5'",
                "'.. 5'",
                "'5 ..'",
                "'1.23456789'",
                "'12345.6'",
                "'0.00012'",
                "'6.25e-5'",
                "'1e10 .. 2e10'",
                "'-0.5 .. 0.5'",
                "'5(+-)0.3'",
                "'-12.000'",
                "'<-1 .. >1e3'",
                "'0'",
                "'100'",
                "'99999'",
                "'123456'",
            ],
        ),
        ("seg[]", ["ARRAY['1 .. 2'::seg, NULL]"]),
    ],
    "postgis": [
        (
            "geometry",
            [
                "'POINT(1 2)'",
                "'SRID=4326;POINT(1.5 -2.25)'",
                "'POINT EMPTY'",
                "'LINESTRING(0 0,1 1,2 2)'",
                "'LINESTRING EMPTY'",
                "'POLYGON((0 0,4 0,4 4,0 4,0 0),(1 1,2 1,2 2,1 2,1 1))'",
                "'POLYGON((0 0,1 0,1 1,0 0))'",
                "'POLYGON EMPTY'",
                "'SRID=3857;MULTIPOLYGON(((0 0,1 0,1 1,0 0)),((5 5,6 5,6 6,5 5)))'",
                "'POINT Z (1 2 3)'",
                "'POINT M (1 2 3)'",
                "'SRID=2056;POINT ZM (1 2 3 4)'",
                "'LINESTRING Z (0 0 0,1 1 1)'",
                "'GEOMETRYCOLLECTION(POINT(1 2),LINESTRING(0 0,1 1))'",
                "'GEOMETRYCOLLECTION EMPTY'",
                "'MULTIPOINT(1 2,3 4)'",
                "'CIRCULARSTRING(0 0,1 1,2 0)'",
                "'COMPOUNDCURVE(CIRCULARSTRING(0 0,1 1,2 0),(2 0,3 0))'",
                "'CURVEPOLYGON(CIRCULARSTRING(0 0,4 0,4 4,0 4,0 0))'",
                "'MULTICURVE((0 0,1 1),CIRCULARSTRING(0 0,1 1,2 0))'",
                "'MULTISURFACE(CURVEPOLYGON(CIRCULARSTRING(0 0,4 0,4 4,0 4,0 0)))'",
                "'TRIANGLE((0 0,0 1,1 1,0 0))'",
                "'TIN(((0 0 0,0 0 1,0 1 0,0 0 0)))'",
                "'POLYHEDRALSURFACE(((0 0 0,0 1 0,1 1 0,0 0 0)))'",
                "ST_Buffer('POINT(0 0)'::geometry, 10, 200)",
                _BIG_LINE,
            ],
        ),
        ("geometry[]", ["ARRAY['POINT(1 2)'::geometry, NULL, 'SRID=4326;POINT(3 4)']"]),
        (
            "geography",
            [
                "'POINT(1 2)'",
                "'SRID=4326;LINESTRING(0 0,1 1)'",
                "'POLYGON((0 0,1 0,1 1,0 0))'",
                "'SRID=4269;POINT(-71 42)'",
                "'POINT EMPTY'",
            ],
        ),
        ("geography[]", ["ARRAY['POINT(1 2)'::geography, NULL]"]),
    ],
    "vector": [
        (
            "vector",
            [
                "'[1,2,3]'",
                "'[0.1,-1.5e-7,3e38]'",
                "'[0]'",
                "'[-0.0,1e-45]'",
                _BIG_VECTOR,
                "'[0.00024414062,0.20117188]'",  # float4 ties of the shortest digits
            ],
        ),
        ("vector(2)[]", ["ARRAY['[1,2]'::vector, NULL]"]),
    ],
    "halfvec": [
        # 2^-12 and 0.0014648438: halves whose shortest float4 digits are ties
        (
            "halfvec",
            [
                "'[1,2.5,-0.1]'",
                "'[65504,6e-8,0.333]'",
                "'[0]'",
                "'[1,0.0014648438,2,0.00024414062]'",
            ],
        ),
        ("halfvec[]", ["ARRAY['[1,2]'::halfvec, NULL]"]),
    ],
    "sparsevec": [
        (
            "sparsevec",
            ["'{1:1.5,3:2}/5'", "'{}/3'", "'{2:0.1,1000:-7e-9}/100000'", "'{3:0.0053710938}/4'"],
        ),
        ("sparsevec[]", ["ARRAY['{1:1}/2'::sparsevec, NULL]"]),
    ],
}


def has(info: dict[str, Any], feature: str) -> bool:
    """Does this build ship `feature`? (halfvec and sparsevec come with pgvector 0.7+.)"""
    if feature in ("halfvec", "sparsevec"):
        return bool(info["features"].get("vector")) and info["service"] != "pg16v"
    return bool(info["features"].get(feature))


def extension_ddl(info: dict[str, Any]) -> str:
    """CREATE EXTENSION for every extension this build has."""
    out = ["CREATE SCHEMA IF NOT EXISTS ext;"]
    for feature, ext in (
        ("hstore", "hstore"),
        ("citext", "citext"),
        ("isn", "isn"),
        ("cube", "cube"),
        ("earthdistance", "earthdistance"),
        ("seg", "seg"),
        ("postgis", "postgis"),
        ("vector", "vector"),
    ):
        if has(info, feature):
            out.append(f"CREATE EXTENSION IF NOT EXISTS {ext};")
    if has(info, "ltree"):
        out.append("CREATE EXTENSION IF NOT EXISTS ltree SCHEMA ext;")
    return "\n".join(out)


def cases(info: dict[str, Any]) -> list[tuple[str, list[str]]]:
    """(column type, literals) of every extension type this build has."""
    out: list[tuple[str, list[str]]] = []
    for feature, found in EXTENSION_CASES.items():
        if has(info, feature):
            out += found
    return out
