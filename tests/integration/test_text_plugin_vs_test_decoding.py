"""pgcdc's text plugin against a real test_decoding slot, line for line, same WAL.

Each workload runs once on the server; test_decoding decodes it through a logical slot
and pgcdc decodes the same WAL from pg_wal with its own reader, decoder, reorder
buffer, snapshot builder and schema history. The two outputs must be identical.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.integration.decoding_support import compare

pytestmark = pytest.mark.integration


def test_basic_dml_ddl_truncate_savepoint(pg: dict[str, Any]) -> None:
    """Inserts, updates, deletes, a rolled-back savepoint, ADD COLUMN DEFAULT, TRUNCATE."""
    out = compare(
        pg,
        ["CREATE TABLE t (id int PRIMARY KEY, data text, n numeric)"],
        [
            "INSERT INTO t VALUES (1, 'a', 1.5), (2, NULL, -3)",
            "BEGIN; UPDATE t SET data = 'it''s' WHERE id = 1; SAVEPOINT s;"
            " DELETE FROM t WHERE id = 2; ROLLBACK TO s;"
            " INSERT INTO t VALUES (3, repeat('x', 10), 0); COMMIT",
            "DELETE FROM t WHERE id = 3",
            "ALTER TABLE t ADD COLUMN extra int DEFAULT 7",
            "INSERT INTO t (id, data) VALUES (4, 'z')",
            "TRUNCATE t",
            "INSERT INTO t VALUES (5, 'after', 1)",
        ],
    )
    assert out.actual == out.expected
    assert len(out.expected) > 15
