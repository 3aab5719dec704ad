"""The fixed tables and workload behind the Debezium golden (capture_debezium_golden.py)
and the schema-equality test (test_debezium_schemas.py).

Both sides run the same SQL on a fresh database: `TABLES` before the connector starts
(with `SNAPSHOT_ROWS`, so Debezium takes a snapshot of them), then `STREAM` one
transaction per entry. The column types are those whose mapping pgcdc and Debezium agree
on by design; the per-type mappings have their own tests in tests/connectors/avro.
"""

from __future__ import annotations

TABLES = (
    """CREATE TABLE golden_types (
        id integer PRIMARY KEY,
        t text NOT NULL,
        v varchar(20),
        n numeric(10, 2),
        ts timestamptz,
        tsn timestamp,
        d date,
        tm time,
        b boolean,
        by bytea,
        j jsonb,
        u uuid,
        f float8,
        r real,
        bi bigint,
        si smallint
    )""",
    "CREATE TABLE golden_composite (a integer, b text, v integer, PRIMARY KEY (a, b))",
    "CREATE TABLE golden_full (id integer, v text)",
    "ALTER TABLE golden_full REPLICA IDENTITY FULL",
)

SNAPSHOT_ROWS = (
    "INSERT INTO golden_types (id, t, ts) VALUES (1, 'snap one', '2024-01-02 03:04:05.5+00'),"
    " (2, 'snap two', '2024-01-02 03:04:05+00')",
    "INSERT INTO golden_composite VALUES (1, 'a', 10), (2, 'b', 20)",
    "INSERT INTO golden_full VALUES (1, 'one')",
)

# One source transaction each, in this order.
STREAM: tuple[tuple[str, ...], ...] = (
    (
        "INSERT INTO golden_types VALUES (3, 'three', 'vc', 12.34, '2024-05-06 07:08:09.5+00',"
        " '2024-05-06 07:08:09.123456', '2024-05-06', '07:08:09.5', true, '\\x0102',"
        " '{\"a\": 1}', '6f1b2a8e-0a64-4f8e-9a55-3f4e6b1c2d3e', 1.5, 2.5, 9000000000, 7)",
    ),
    ("UPDATE golden_types SET t = 'three!', ts = '2024-05-06 07:08:09+00' WHERE id = 3",),
    ("UPDATE golden_types SET id = 4 WHERE id = 3",),
    ("DELETE FROM golden_types WHERE id = 4",),
    (
        "INSERT INTO golden_composite VALUES (3, 'c', 30)",
        "UPDATE golden_composite SET v = 31 WHERE a = 3",
        "DELETE FROM golden_composite WHERE a = 1",
    ),
    (
        "INSERT INTO golden_full VALUES (2, 'two')",
        "UPDATE golden_full SET v = 'deux' WHERE id = 2",
        "DELETE FROM golden_full WHERE id = 1",
    ),
    ("TRUNCATE golden_composite",),
    ("SELECT pg_logical_emit_message(true, 'golden', 'transactional only')",),
    ("SELECT pg_logical_emit_message(false, 'golden', 'not transactional')",),
    (
        "INSERT INTO golden_types (id, t) VALUES (5, 'with a message')",
        "SELECT pg_logical_emit_message(true, 'golden', 'beside a row')",
    ),
)

# Subjects (topic suffixes after the prefix) both sides register; `{prefix}` is the topic
# prefix, replaced by a placeholder in the golden file.
TABLE_TOPICS = ("public.golden_types", "public.golden_composite", "public.golden_full")
