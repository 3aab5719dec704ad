"""Catalog type facts from a real server: dependencies loaded, cache kept until invalidated."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import psycopg2
import pytest

from connectors.postgres.catalog_types import _VERSION_NOTES, CatalogTypes, render_builtin_table
from service.types import registry

pytestmark = pytest.mark.integration


def test_loads_dependencies_and_invalidates(pg: dict[str, Any]) -> None:
    """A composite pulls in its field types; an enum's new label appears only after invalidate."""
    name = f"pgcdc_cattypes_{os.getpid()}_{pg['version']}"
    admin = psycopg2.connect(pg["dsn"])
    admin.autocommit = True
    with admin.cursor() as cur:
        cur.execute(f"DROP DATABASE IF EXISTS {name}")
        cur.execute(f"CREATE DATABASE {name}")
    conn = psycopg2.connect(pg["dsn"].replace("dbname=postgres", f"dbname={name}"))
    conn.autocommit = True
    try:
        with conn.cursor() as cur:
            cur.execute(
                "CREATE TYPE color AS ENUM ('red');"
                "CREATE DOMAIN colors AS color[];"
                "CREATE TYPE thing AS (c color, cs colors, n numeric);"
                "SELECT 'thing'::regtype::oid, 'color'::regtype::oid, 'colors'::regtype::oid"
            )
            thing, color, colors = cur.fetchone()
        catalog = CatalogTypes(conn)
        reg = catalog.ensure([thing])
        info = reg.get(thing)
        assert [f.name for f in info.fields] == ["c", "cs", "n"]
        assert list(reg.get(color).enum_labels.values()) == ["red"]
        assert (
            reg.get(colors).typtype == "d" and reg.get(reg.get(colors).typbasetype).typelem == color
        )
        with conn.cursor() as cur:
            cur.execute("ALTER TYPE color ADD VALUE 'blue'")
        assert list(catalog.get(color).enum_labels.values()) == ["red"]  # cached
        catalog.invalidate(color)
        assert sorted(catalog.get(color).enum_labels.values()) == ["blue", "red"]
        assert thing in catalog.registry  # other types survive one invalidation
    finally:
        conn.close()
        with admin.cursor() as cur:
            cur.execute(f"DROP DATABASE IF EXISTS {name}")
        admin.close()


def test_builtin_table_is_generated_from_all_four_servers(
    pg15: dict[str, Any], pg16: dict[str, Any], pg17: dict[str, Any], pg18: dict[str, Any]
) -> None:
    """registry.py's generated region is what the generator makes from 15, 16, 17 and 18
    now, with a note at each type whose facts differ between them (aclitem's AclMode)."""
    table = render_builtin_table([info["dsn"] for info in (pg15, pg16, pg17, pg18)])
    source = Path(registry.__file__).read_text()
    region = source.split("(do not edit)\n", 1)[1].split("\n# END GENERATED", 1)[0]
    assert region == table
    assert "# aclitem is {Oid grantee; Oid grantor; AclMode ai_privs}" in region
    assert 'TypeInfo(1033, "aclitem", 16, False, "d", "b", "aclitemout")' in region


def test_builtin_entries_match_each_server(pg: dict[str, Any]) -> None:
    """Every built-in entry's facts equal this server's pg_type, but for the types whose
    difference between the versions is noted at their entry (aclitem on 15)."""
    registry_types = {t.oid: t for t in registry.BUILTIN_TYPES}
    conn = psycopg2.connect(pg["dsn"])
    try:
        with conn.cursor() as cur:
            cur.execute("SELECT oid, typlen, typbyval, typalign FROM pg_type WHERE oid < 16384")
            server = {r[0]: r[1:] for r in cur.fetchall()}
    finally:
        conn.close()
    differ = {
        oid
        for oid, t in registry_types.items()
        if server.get(oid) != (t.typlen, t.typbyval, t.typalign)
    }
    assert differ <= set(_VERSION_NOTES)
    assert differ == ({1033, 1034} if pg["version"] == 15 else set())
