"""Catalog type facts from a real server: dependencies loaded, cache kept until invalidated."""

from __future__ import annotations

import os
from typing import Any

import psycopg2
import pytest

from connectors.postgres.catalog_types import CatalogTypes

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
