"""The table shapes the benchmarks load, named once (a module of data, not a benchmark).

Each `Shape` is a `CREATE TABLE bench ...` and an `INSERT INTO bench SELECT ... FROM
generate_series({a}, {b}) g` template whose rows depend only on `g`, so every system of a
benchmark reads the same values:

- `narrow`: bench_vs_debezium's 5 columns (bigint key, int, text, numeric(12,2),
  timestamptz), about 60 bytes of data a row;
- `toast`: an int key, a title and a 5-8 KB jsonb document that compresses poorly, so
  it is stored out of line (its TOAST chunks inserted before each row);
- `wide`: an order line of 13 columns of mixed types (bigint key, ints, text, a 3-char
  currency, numerics, timestamptzs, a bool, a date, a uuid and a ~600-character note),
  about 0.8 KB a row: under TOAST_TUPLE_THRESHOLD, so stored inline and uncompressed.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Shape:
    name: str
    table: str
    insert: str  # formatted with a (first g) and b (last g)


NARROW = Shape(
    "narrow",
    "CREATE TABLE bench (id bigint PRIMARY KEY, n int, label text, "
    "amount numeric(12,2), at timestamptz)",
    "INSERT INTO bench SELECT g, g % 1000, 'label ' || g, (g % 100000) / 100.0, "
    "'2024-01-01'::timestamptz + g * interval '1 second' "
    "FROM generate_series({a}, {b}) g",
)

WIDE = Shape(
    "wide",
    "CREATE TABLE bench (id bigint PRIMARY KEY, customer_id int, status text, "
    "currency char(3), quantity int, unit_price numeric(12,2), tax numeric(12,4), "
    "ordered_at timestamptz, shipped_at timestamptz, paid bool, due date, "
    "ref uuid, note text)",
    "INSERT INTO bench SELECT g, g % 50000, "
    "(ARRAY['new','paid','shipped','returned'])[1 + g % 4], "
    "(ARRAY['EUR','USD','KRW'])[1 + g % 3], 1 + g % 20, (g % 100000) / 100.0, "
    "(g % 7777) / 10000.0, '2024-01-01'::timestamptz + g * interval '1 second', "
    "CASE WHEN g % 3 = 0 THEN NULL "
    "ELSE '2024-01-02'::timestamptz + g * interval '1 second' END, g % 2 = 0, "
    "'2024-02-01'::date + g % 365, md5(g::text)::uuid, "
    "repeat(md5(g::text), 19) "
    "FROM generate_series({a}, {b}) g",
)

TOAST = Shape(
    "toast",
    "CREATE TABLE bench (id bigint PRIMARY KEY, title text, doc jsonb)",
    "INSERT INTO bench SELECT g, 'doc ' || g, jsonb_build_object('id', g, 'body', "
    "(SELECT string_agg(md5((g * 1000 + k)::text), ' ') FROM generate_series(1, 150 + g % 90) k))"
    " FROM generate_series({a}, {b}) g",
)

SHAPES = {s.name: s for s in (NARROW, WIDE, TOAST)}
