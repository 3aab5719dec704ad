"""jsonpath values for the differential tests (the Avro plugin's native rows and
snapshot, the text plugin against test_decoding): each prints through a different
branch of printJsonPathItem (jsonpath.c), so native jsonpath_out and the Python
reference (service.types.jsonpath) are compared on every item kind."""

from __future__ import annotations

# jsonpath values printJsonPathItem prints in every way (the item kinds of PG15/16):
# lax/strict, each operator and its priority, filters with @ and $ variables,
# like_regex with flags and escapes, .datetime("fmt"), numeric literals followed by an
# accessor, escaped keys and strings, subscripts with `last` and ranges, .** bounds.
JSONPATHS = [
    "$",
    "strict $.a.b[*]",
    'lax $.a ? (@.b > 1 && @.c < 2 || !(@.d == "x"))',
    "$.a + 2 * $.b - -$.c",
    "($.a + 2) * 3",
    "$.a % 2 / 3 + +$.b",
    "$ ? ((@.a == 1 || @.b == 2) && @.c == 3)",
    "$.a != 1 && $.b <= 2 && $.c >= 3",
    '$.g ? (@ starts with "ab")',
    r'$ ? (@ like_regex "^a.*\\d" flag "ismxq")',
    r'$ ? (@ like_regex "a\"b,c")',
    '$.datetime("HH24:MI")',
    "$.datetime()",
    "1.5.type()",
    "-1.2e3.abs()",
    "1e3",
    r'$."key \"q\" \n\t\u0001 é"',
    r'"str\\x"',
    "$[1, 2 to last, last - 1]",
    "$.**{2 to 5}",
    "$.**{last}",
    "$.**{1 to last}",
    "$.**",
    "$.**{last to 2}",
    "$.a.**.b.*[*]",
    "$var.a",
    '$"x y"',
    "exists($.a ? (@ == $x))",
    "($.a == 1) is unknown",
    "$.a.size().abs().floor().ceiling().double().keyvalue().type()",
    "null",
    "true",
    "$ ? (-@ < 2 * (3 + @.x))",
]
# The item methods PostgreSQL 17 added (.bigint() ... .timestamp_tz(), item types 43..53).
JSONPATHS_17 = [
    "$.bigint()",
    "$.boolean()",
    "$.date()",
    "$.decimal(10,2)",
    "$.decimal()",
    "$.decimal(5)",
    "$.integer()",
    "$.number()",
    "$.string()",
    "$.time(3)",
    "$.time()",
    "$.time_tz(3)",
    "$.timestamp(2)",
    "$.timestamp_tz()",
    "$.a.decimal(4,1).bigint() ? (@ > 1)",
]
