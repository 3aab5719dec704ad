"""The text plugin's native line writer against test_decoding, same WAL, in both modes.

A table with a column of every type the native writer prints
(service.output.native_text.TEXT_KINDS), a dropped column and a column added with a
default after rows were written, filled with random values (quotes, non-ASCII text,
NULLs, BC dates, ±infinity, 24:00:00, long and tiny numerics, NaN), then updated and
deleted in runs; beside it a REPLICA IDENTITY FULL table, a table of floats, a table
with an interval column (which has no native plan) and values the writer leaves to
Python (an unchanged TOAST value, NaN, a missing attribute, a float whose shortest
decimal is a rounding bound or a tie). pgcdc's lines must equal a real test_decoding slot's
line for line under PGCDC_IMPL=native and =python; under native, most rows must have
been written by Rust and each fallback must have been for the reason the row carries.
"""

from __future__ import annotations

import random
from typing import Any

import pytest

from service.output.text import TestDecodingPlugin
from tests.integration.decoding_support import compare
from tests.integration.test_text_plugin_vs_test_decoding import assert_same

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
    big = "".join(rng.choice("abcdefghijklmnopqrstuvwxyz0123456789") for _ in range(9000))
    out = compare(
        pg,
        [
            f"CREATE TABLE nt ({COLUMNS})",
            "CREATE TABLE nf (id int, v text, w numeric)",
            "ALTER TABLE nf REPLICA IDENTITY FULL",
            "CREATE TABLE nfl (id int PRIMARY KEY, f float8, r real)",
            "CREATE TABLE niv (id int PRIMARY KEY, i interval)",
            "CREATE TABLE ntoast (id int PRIMARY KEY, k int, big text)",
            "ALTER TABLE ntoast ALTER COLUMN big SET STORAGE EXTERNAL",
        ],
        [
            f"INSERT INTO nt VALUES {rows}",
            "ALTER TABLE nt DROP COLUMN gone",
            "UPDATE nt SET tx = tx || '''', i2 = 7 WHERE id % 3 = 0",
            "INSERT INTO nf SELECT g, 'v''' || g, g / 7.0 FROM generate_series(1, 200) g",
            "INSERT INTO nf VALUES (201, NULL, 'NaN')",
            "DELETE FROM nf WHERE id % 2 = 0",
            "INSERT INTO nfl SELECT g, g / 3.0, g / 7.0 FROM generate_series(1, 50) g",
            "INSERT INTO nfl VALUES (51, 'NaN', '-Infinity'), (52, -0.0, 1e-37),"
            " (53, 1e23, 3.4e38), (54, 2^47 + 0.125, 0.1), (55, 5e-324, NULL)",
            "INSERT INTO niv SELECT g, g * interval '1 day' FROM generate_series(1, 20) g",
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
            "ALTER TABLE nf ADD COLUMN x int DEFAULT 9",
            "DELETE FROM nf WHERE id < 10",
        ],
        plugin=make,
    )
    assert_same(
        out,
        "table public.nt: UPDATE: id[integer]:3 …",
        "table public.nf: DELETE: id[integer]:2 v[text]:'v''2' w[numeric]:0.28571428571428571429",
        "table public.nf: DELETE: id[integer]:1 v[text]:'v''1' w[numeric]:0.14285714285714285714"
        " x[integer]:9",
        "table public.nt: INSERT: id[integer]:1000 b[boolean]:null by[bytea]:null nm[name]:null"
        " i8[bigint]:null i2[smallint]:null tx[text]:null o[oid]:null js[json]:null"
        " bp[character]:null vc[character varying]:null d[date]:null"
        " t[time without time zone]:null ts[timestamp without time zone]:null"
        " tz[timestamp with time zone]:null n[numeric]:1.500 nu[numeric]:null u[uuid]:null"
        " extra[integer]:42",
        min_lines=900,
    )
    (plugin,) = plugins
    native = plugin.native_text
    if impl == "python":
        assert native is None
        return
    assert native is not None
    # Rows in runs are Rust's but for the fallbacks below; niv's are Python's.
    assert native.native >= 900, (native.native, native.fallbacks)
    assert native.fallbacks["numeric Python decides"] >= 1, native.fallbacks  # NaN
    assert native.fallbacks["external TOAST pointer"] >= 1, native.fallbacks
    assert native.fallbacks["attribute missing with a default"] >= 1, native.fallbacks
    assert native.fallbacks["float Python decides"] >= 2, native.fallbacks  # 1e23, 2^47 + 1/8
    plans = {key: plan for key, (_table, plan) in native._plans.items()}
    assert sum(plan is None for plan in plans.values()) == 1  # niv: an interval column
    assert sum(plan is not None for plan in plans.values()) >= 4
