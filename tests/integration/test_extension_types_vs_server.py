"""Extension types against the server: stored tuples decoded by pgcdc vs the output text.

The same pageinspect comparison as test_types_vs_server, for hstore, ltree/lquery,
citext, isn, cube, earth, seg, PostGIS geometry/geography and pgvector's types, with
edge values, arrays and TOASTed values, on every build that has the extension (pg16v has
no pageinspect, so its vector is covered through pg18's identical format).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import psycopg2
import psycopg2.extensions
import pytest

from tests.fixtures.services import ensure_service, require_features
from tests.integration.extension_cases import cases, extension_ddl
from tests.integration.test_types_vs_server import SESSION, _compare

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module", params=["pg15", "pg16", "pg17", "pg18"])
def ext_db(
    request: pytest.FixtureRequest,
) -> Iterator[tuple[psycopg2.extensions.connection, dict[str, Any]]]:
    """A fresh database with every extension the build has, and the build's info."""
    info = ensure_service(str(request.param))
    require_features(info, "pageinspect")
    name = f"pgcdc_ext_{os.getpid()}_{info['version']}"
    admin = psycopg2.connect(info["dsn"])
    admin.autocommit = True
    with admin.cursor() as cur:
        cur.execute(f"DROP DATABASE IF EXISTS {name}")
        cur.execute(f"CREATE DATABASE {name} TEMPLATE template0 ENCODING 'UTF8' LOCALE 'C'")
    conn = psycopg2.connect(info["dsn"].replace("dbname=postgres", f"dbname={name}"))
    conn.autocommit = True
    with conn.cursor() as cur:
        cur.execute("CREATE EXTENSION IF NOT EXISTS pageinspect;" + extension_ddl(info))
        cur.execute(SESSION + "SET search_path = public, ext;")
    yield conn, info
    conn.close()
    with admin.cursor() as cur:
        cur.execute(f"DROP DATABASE IF EXISTS {name}")
    admin.close()


def test_extension_types_match_server_text(
    ext_db: tuple[psycopg2.extensions.connection, dict[str, Any]],
) -> None:
    """Every extension type's values, decoded from the stored tuple, print as the server."""
    conn, info = ext_db
    found = cases(info)
    assert found, f"{info['service']} has none of the extensions"
    with conn.cursor() as cur:
        for i, (typ, values) in enumerate(found):
            table = f"t_ext_{i}"
            cur.execute(f"CREATE TABLE {table} (id int, flag bool, v {typ}, tail int8)")
            for j, value in enumerate(values):
                cur.execute(f"INSERT INTO {table} VALUES ({j}, true, {value}, {j * 1000})")
            cur.execute(f"INSERT INTO {table} VALUES (-1, NULL, NULL, NULL)")
        if info["features"].get("isn"):
            # weak mode keeps a wrong check digit and flags it: printed with a '!'
            cur.execute("SELECT isn_weak(true)")
            cur.execute("CREATE TABLE t_ext_weak (id int, v isbn13, w isbn)")
            cur.execute("INSERT INTO t_ext_weak VALUES (1, '978-0-393-04002-0', '0-393-04002-1')")
    bad: list[str] = []
    for i in range(len(found)):
        bad += _compare(conn, int(info["version"]), f"t_ext_{i}", ["id", "flag", "v", "tail"])
    if info["features"].get("isn"):
        bad += _compare(conn, int(info["version"]), "t_ext_weak", ["v", "w"])
    assert not bad, "\n".join(bad)
