"""Line-for-line against test_decoding for the extension types (issue 13, part 2).

hstore, ltree/lquery (installed in a schema of their own), citext, isn, cube, earth,
seg, PostGIS geometry/geography and pgvector's vector/halfvec/sparsevec, with the edge
values of tests/integration/extension_cases.py (NULLs, empties, arrays, TOASTed and
compressed values), through INSERT, UPDATE (REPLICA IDENTITY FULL, so old tuples print
too; and an UPDATE that leaves a TOASTed value unchanged) and DELETE, on the builds
the WAL decoder supports (15 and 18) that have the extension.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.fixtures.services import require_features
from tests.integration.decoding_support import compare
from tests.integration.extension_cases import cases, extension_ddl
from tests.integration.test_text_plugin_vs_test_decoding import assert_same

pytestmark = pytest.mark.integration


def workload_for(info: dict[str, Any]) -> tuple[list[str], list[str]]:
    """(setup, workload): one table per extension type case, each value inserted, the
    first updated and the last deleted, plus a TOASTed value left unchanged."""
    setup = [extension_ddl(info)]
    work: list[str] = []
    for i, (typ, values) in enumerate(cases(info)):
        setup.append(f"CREATE TABLE x{i} (id int PRIMARY KEY, v {typ}, n int)")
        setup.append(f"ALTER TABLE x{i} REPLICA IDENTITY FULL")
        for j, value in enumerate(values):
            work.append(f"INSERT INTO x{i} VALUES ({j}, {value}, {j})")
        work.append(f"INSERT INTO x{i} VALUES (-1, NULL, NULL)")
        work.append(f"UPDATE x{i} SET v = {values[0]} WHERE id = {len(values) - 1}")
        work.append(f"UPDATE x{i} SET n = 99 WHERE id = {len(values) - 1}")
        if len(values) > 1:
            work.append(f"DELETE FROM x{i} WHERE id = 1")
    return setup, work


def test_extension_types_print_as_test_decoding(pg: dict[str, Any]) -> None:
    """Every extension type this build has prints exactly as test_decoding prints it."""
    info = pg
    require_features(info, "test_decoding")
    setup, work = workload_for(info)
    out = compare(info, setup, work)
    assert_same(out, min_lines=60)
    assert any("[hstore]:" in line for line in out.expected)
    if info["features"].get("postgis"):
        assert any("v[geometry]:'0101000020E6100000" in line for line in out.expected)
    if info["features"].get("vector"):
        assert any("v[vector]:'[1,2,3]'" in line for line in out.expected)
