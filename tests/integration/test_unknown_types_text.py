"""decoding.unknown_types through the text plugin, line for line against test_decoding.

The types of test_unknown_types_kafka (intarray's query_int, ltree's ltxtquery, a
user-defined base type `opaque_t`, and an array, a domain and a composite over them),
inserted, updated (REPLICA IDENTITY FULL: old tuples print too) and deleted, on
PostgreSQL 15 to 18:

- `omit`: pgcdc's lines are test_decoding's with each such column's `name[type]:value`
  token removed;
- `bytes`: the token is `name[type]:'\\x<hex of the stored bytes>'`; for `opaque_t`,
  whose stored form is its text, that hex is test_decoding's text's, exactly; NULLs
  stay `null`;
A table created, and a column added, while decoding get the same treatment when
their definitions are first used.
- `fail`: the session stops with UnknownTypeError naming the columns and the setting.
"""

from __future__ import annotations

import re
from typing import Any

import pytest

from service.errors import UnknownTypeError
from service.types.unknown import UnknownTypePolicy
from tests.integration.decoding_support import compare
from tests.integration.test_unknown_types_kafka import TYPES_DDL, UNKNOWN, VALUES

pytestmark = pytest.mark.integration

SETUP = [
    *[s for s in TYPES_DDL if "pageinspect" not in s],
    "CREATE TABLE ut (id int PRIMARY KEY, q query_int, l ltxtquery, qa query_int[],"
    " d ltxt_dom, c qcomp, o opaque_t, note text)",
    "ALTER TABLE ut REPLICA IDENTITY FULL",
]
WORKLOAD = [
    f"INSERT INTO ut VALUES (1, {VALUES}, 'n1')",
    "INSERT INTO ut (id, note) VALUES (2, 'nulls')",
    "UPDATE ut SET note = 'changed' WHERE id = 1",
    "DELETE FROM ut WHERE id = 2",
    # definitions first seen while decoding (the DDL capture's messages)
    "CREATE TABLE late (id int PRIMARY KEY, q query_int, note text)",
    "INSERT INTO late VALUES (1, '5|6', 'a')",
    "ALTER TABLE late ADD COLUMN o opaque_t",
    "INSERT INTO late VALUES (2, '7', 'b', 'late opaque')",
]
# A column token of test_decoding's tuple output: name[type]:value, the value quoted
# (with '' inside), null or bare.
_TOKEN = re.compile(r" (\w+)\[(.+?)\]:('(?:[^']|'')*'|\S+)")


@pytest.fixture
def pgv(pg_all: dict[str, Any]) -> dict[str, Any]:
    """Every major (15 to 18): intarray and ltree are in each build."""
    return pg_all


def _tokens(line: str) -> list[tuple[str, str, str]]:
    return _TOKEN.findall(line)


def test_omit_drops_the_tokens(pgv: dict[str, Any]) -> None:
    out = compare(pgv, SETUP, WORKLOAD, unknown_types=UnknownTypePolicy("omit"))
    assert len(out.expected) == len(out.actual)
    assert sum(line.startswith("table public.") for line in out.actual) == 6
    for want, got in zip(out.expected, out.actual, strict=True):
        stripped = want
        for name, type_name, value in _tokens(want):
            if name in UNKNOWN:
                stripped = stripped.replace(f" {name}[{type_name}]:{value}", "", 1)
        assert got == stripped


def test_bytes_prints_the_stored_bytes(pgv: dict[str, Any]) -> None:
    out = compare(pgv, SETUP, WORKLOAD, unknown_types=UnknownTypePolicy("bytes"))
    assert len(out.expected) == len(out.actual)
    checked = 0
    for want, got in zip(out.expected, out.actual, strict=True):
        w, g = _tokens(want), _tokens(got)
        assert [t[:2] for t in w] == [t[:2] for t in g], (want, got)
        assert re.sub(_TOKEN, "", want) == re.sub(_TOKEN, "", got)
        for (name, _t, wv), (_n, _t2, gv) in zip(w, g, strict=True):
            if name not in UNKNOWN:
                assert gv == wv, (want, got)
            elif wv == "null":
                assert gv == "null"
            else:
                assert re.fullmatch(r"'\\x([0-9a-f]*)'", gv), gv
                if name == "o":
                    assert gv == "'\\x" + wv[1:-1].replace("''", "'").encode().hex() + "'"
                checked += 1
    # ut: the INSERT, the UPDATE's old and new tuples; late: q twice, o once
    assert checked == 6 * 3 + 3


def test_fail_names_the_columns(pgv: dict[str, Any]) -> None:
    with pytest.raises(UnknownTypeError) as info:
        compare(pgv, SETUP, WORKLOAD)
    for column, type_name in UNKNOWN.items():
        assert f"public.ut.{column} {type_name}" in str(info.value)
    assert info.value.field == "decoding.unknown_types"
