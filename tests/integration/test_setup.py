"""`pgcdc setup`/`teardown` and the DDL capture against real PostgreSQL 15 and 18.

The DDL messages are observed through a real `test_decoding` logical slot on the same
server, which shows that they lie inside the DDL's own transaction; their JSON is then
compared with what the catalog stage reads from the live catalog.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from typing import Any

import psycopg2
import pytest

from connectors.postgres.catalog import Catalog
from connectors.postgres.setup import EVENT_TRIGGERS, setup, teardown
from service.config import FilterSettings
from service.errors import SourceSetupError
from service.schema.history import DDL_PREFIX
from service.schema.tabledef import TableDef

pytestmark = pytest.mark.integration


def _dsn(info: dict[str, Any], dbname: str, user: str | None = None) -> str:
    return f"host={info['host']} port={info['port']} user={user or info['user']} dbname={dbname}"


@pytest.fixture(scope="module")
def db(pg: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """A fresh database with the DDL capture installed and a physical slot."""
    name = f"pgcdc_setup_{uuid.uuid4().hex[:10]}"
    admin = psycopg2.connect(_dsn(pg, "postgres"))
    admin.autocommit = True
    with admin.cursor() as cur:
        cur.execute(f"CREATE DATABASE {name}")
    slot = f"{name}_phys"
    dsn = _dsn(pg, name)
    try:
        yield {"pg": pg, "dsn": dsn, "name": name, "slot": slot}
    finally:
        teardown(dsn, slot)
        with admin.cursor() as cur:
            cur.execute(
                "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots"
                " WHERE database = %s",
                (name,),
            )
            cur.execute(f"DROP DATABASE {name} WITH (FORCE)")
        admin.close()


def _sql(dsn: str, *statements: str) -> list[tuple[Any, ...]]:
    conn = psycopg2.connect(dsn)
    conn.autocommit = True
    rows: list[tuple[Any, ...]] = []
    try:
        with conn.cursor() as cur:
            for statement in statements:
                cur.execute(statement)
                if cur.description is not None:
                    rows = list(cur.fetchall())
    finally:
        conn.close()
    return rows


def _installed(dsn: str) -> tuple[int, int, int]:
    """(pgcdc's event triggers, pgcdc's own functions in schema pgcdc, the schema): the
    functions of an extension setup installed there (pageinspect, for the TOAST
    reader) are the extension's, not counted."""
    (row,) = _sql(
        dsn,
        "SELECT (SELECT count(*) FROM pg_event_trigger WHERE evtname LIKE 'pgcdc%'),"
        " (SELECT count(*) FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace"
        "   WHERE n.nspname = 'pgcdc' AND NOT EXISTS (SELECT 1 FROM pg_depend d"
        "     WHERE d.classid = 'pg_proc'::regclass AND d.objid = p.oid AND d.deptype = 'e')),"
        " (SELECT count(*) FROM pg_namespace WHERE nspname = 'pgcdc')",
    )
    return int(row[0]), int(row[1]), int(row[2])


def _extensions_in_pgcdc(dsn: str) -> list[str]:
    rows = _sql(
        dsn,
        "SELECT e.extname FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace"
        " WHERE n.nspname = 'pgcdc' ORDER BY 1",
    )
    return [str(r[0]) for r in rows]


def test_setup_is_idempotent_and_teardown_removes_everything(db: dict[str, Any]) -> None:
    """Setup twice creates the slot once and the capture once (the DDL capture's three
    functions and the TOAST reader, `pgcdc.toast_chunks`, with pageinspect where the
    server has it); teardown removes it all."""
    first = setup(db["dsn"], db["slot"])
    second = setup(db["dsn"], db["slot"])
    assert first.server_version == db["pg"]["version"]
    assert first.slot_created and not second.slot_created
    assert first.restart_lsn is not None and first.restart_lsn > 0
    assert _installed(db["dsn"]) == (len(EVENT_TRIGGERS), 4, 1)
    assert _extensions_in_pgcdc(db["dsn"]) in ([], ["pageinspect"])
    rows = _sql(
        db["dsn"],
        f"SELECT slot_type FROM pg_replication_slots WHERE slot_name = '{db['slot']}'",
    )
    assert rows == [("physical",)]
    (secdef,) = _sql(
        db["dsn"],
        "SELECT bool_and(prosecdef), bool_and(proconfig::text LIKE '%search_path=pg_catalog, "
        "pg_temp%') FROM pg_proc WHERE proname IN ('on_ddl_command_end', 'on_sql_drop')",
    )
    assert secdef == (True, True)

    teardown(db["dsn"], db["slot"])
    assert _installed(db["dsn"]) == (0, 0, 0)
    assert _extensions_in_pgcdc(db["dsn"]) == []
    assert (
        _sql(db["dsn"], f"SELECT 1 FROM pg_replication_slots WHERE slot_name = '{db['slot']}'")
        == []
    )
    teardown(db["dsn"], db["slot"])  # idempotent
    setup(db["dsn"], db["slot"])  # the rest of the module runs with the capture


def _ddl_messages(dsn: str, slot: str) -> list[list[dict[str, Any]]]:
    """The DDL capture's messages a test_decoding slot saw, grouped by transaction."""
    rows = _sql(
        dsn,
        f"SELECT data FROM pg_logical_slot_get_changes('{slot}', NULL, NULL, 'include-xids', '0')",
    )
    txns: list[list[dict[str, Any]]] = []
    current: list[dict[str, Any]] | None = None
    for (data,) in rows:
        if data == "BEGIN":
            current = []
        elif data == "COMMIT":
            assert current is not None
            if current:
                txns.append(current)
            current = None
        elif data.startswith(f"message: transactional: 1 prefix: {DDL_PREFIX}"):
            assert current is not None, "a DDL message outside a transaction"
            current.append(json.loads(data.split("content:", 1)[1]))
    return txns


def test_trigger_messages_match_the_catalog(db: dict[str, Any]) -> None:
    """CREATE/ALTER ADD, DROP, TYPE/DROP TABLE each write one transactional message inside
    their own transaction, whose definition equals the live catalog's."""
    setup(db["dsn"], db["slot"])
    td = f"{db['name']}_td"
    _sql(db["dsn"], f"SELECT pg_create_logical_replication_slot('{td}', 'test_decoding')")
    catalog = Catalog(db["dsn"])
    try:
        _sql(db["dsn"], "CREATE TABLE items (id int PRIMARY KEY, name text, qty int2)")
        (created,) = _ddl_messages(db["dsn"], td)
        assert [m["tag"] for m in created] == ["CREATE TABLE"]
        oid = created[0]["def"]["oid"]
        live = catalog.table(oid)
        assert live is not None
        assert TableDef.from_json(created[0]["def"]) == live
        assert [c.name for c in live.columns] == ["id", "name", "qty"]
        assert live.key_attnums == (1,)
        assert live.toast_relid != 0 and live.toast_relfilenode != 0

        _sql(db["dsn"], "ALTER TABLE items ADD COLUMN price numeric(10, 2) DEFAULT 1.5")
        _sql(db["dsn"], "ALTER TABLE items DROP COLUMN name")
        added, dropped = _ddl_messages(db["dsn"], td)
        catalog.invalidate(oid)
        after_add = TableDef.from_json(added[0]["def"])
        assert after_add.columns[3].name == "price"
        assert after_add.columns[3].typmod == (10 << 16 | 2) + 4
        assert after_add.columns[3].has_missing and after_add.columns[3].missing_text == "{1.50}"
        after_drop = TableDef.from_json(dropped[0]["def"])
        assert after_drop.columns[1].dropped and after_drop.columns[1].type_oid == 0
        assert after_drop.columns[1].attlen == -1  # layout kept for old tuples
        assert after_drop == catalog.table(oid)
        assert after_drop.relfilenode == live.relfilenode  # no rewrite so far

        _sql(db["dsn"], "ALTER TABLE items ALTER COLUMN qty TYPE int8")
        (retyped,) = _ddl_messages(db["dsn"], td)
        catalog.invalidate(oid)
        rewritten = TableDef.from_json(retyped[0]["def"])
        assert rewritten.relfilenode != live.relfilenode  # the NEW relfilenode
        (current,) = _sql(db["dsn"], f"SELECT pg_relation_filenode({oid})")
        assert rewritten.relfilenode == current[0]
        assert rewritten == catalog.table(oid)
        assert rewritten.columns[2].type_oid == 20

        _sql(db["dsn"], "ALTER TABLE items REPLICA IDENTITY FULL")
        (ri,) = _ddl_messages(db["dsn"], td)
        assert TableDef.from_json(ri[0]["def"]).replica_identity == "f"

        _sql(db["dsn"], "BEGIN", "CREATE TABLE a (x int)", "CREATE TABLE b (y int)", "COMMIT")
        (both,) = _ddl_messages(db["dsn"], td)
        assert [m["def"]["name"] for m in both] == ["a", "b"]

        _sql(db["dsn"], "DROP TABLE items")
        (gone,) = _ddl_messages(db["dsn"], td)
        assert gone == [{"v": 1, "op": "drop", "oid": oid, "schema": "public", "name": "items"}]
        catalog.invalidate(oid)
        assert catalog.table(oid) is None

        _sql(db["dsn"], "BEGIN", "CREATE TABLE never (x int)", "ROLLBACK")
        _sql(db["dsn"], "CREATE TEMP TABLE scratch (x int)")
        assert _ddl_messages(db["dsn"], td) == []
    finally:
        catalog.close()
        _sql(db["dsn"], f"SELECT pg_drop_replication_slot('{td}')")


def test_replica_identity_index_is_the_key(db: dict[str, Any]) -> None:
    """With REPLICA IDENTITY USING INDEX the key is that index's columns, in index order."""
    setup(db["dsn"], db["slot"])
    catalog = Catalog(db["dsn"])
    try:
        (row,) = _sql(
            db["dsn"],
            "CREATE TABLE ri (a int NOT NULL, b int NOT NULL, c int PRIMARY KEY)",
            "CREATE UNIQUE INDEX ri_ba ON ri (b, a)",
            "ALTER TABLE ri REPLICA IDENTITY USING INDEX ri_ba",
            "SELECT 'ri'::regclass::oid",
        )
        table = catalog.table(int(row[0]))
        assert table is not None
        assert table.replica_identity == "i"
        assert table.key_attnums == (2, 1)
    finally:
        catalog.close()


def test_pg_class_locator_is_where_pg_class_lives(db: dict[str, Any]) -> None:
    """`pg_class_locator()` (where the historic pg_class starts following pg_class's
    pages) is pg_class's file: the database's default tablespace, the database, and
    the relfilenode the relation map gives it (pg_class stores 0 for a mapped catalog)."""
    catalog = Catalog(db["dsn"])
    try:
        loc = catalog.pg_class_locator()
        ((path, relfilenode, dboid, spc),) = _sql(
            db["dsn"],
            "SELECT pg_relation_filepath('pg_class'), c.relfilenode, d.oid, d.dattablespace"
            " FROM pg_class c, pg_database d"
            " WHERE c.oid = 'pg_class'::regclass AND d.datname = current_database()",
        )
        assert relfilenode == 0  # mapped: pg_class itself does not say
        assert path == f"base/{dboid}/{loc.rel_number}"
        assert (loc.spc_oid, loc.db_oid) == (spc, dboid)
    finally:
        catalog.close()


def test_snapshot_reads_tables_with_the_transaction_snapshot(db: dict[str, Any]) -> None:
    """The initial snapshot lists user tables (not pgcdc's own or system ones) and the
    MVCC snapshot and LSN they were read under."""
    _sql(db["dsn"], "CREATE TABLE snap_t (id bigint PRIMARY KEY)")
    (row,) = _sql(db["dsn"], "SELECT pg_current_xact_id()::text, pg_current_wal_lsn()::text")
    snap = Catalog(db["dsn"]).snapshot()
    names = {t.qualified_name for t in snap.tables}
    assert "public.snap_t" in names
    assert not any(t.schema in ("pg_catalog", "pgcdc", "information_schema") for t in snap.tables)
    my_xid = int(row[0]) & 0xFFFFFFFF
    assert snap.xid_visible(my_xid)  # a transaction that had committed is visible
    assert not snap.xid_visible(snap.xmax)
    assert snap.lsn >= int(row[1].split("/")[0], 16) << 32


def test_setup_refuses_a_role_without_replication(db: dict[str, Any]) -> None:
    """A role lacking REPLICATION gets an error naming the privilege and the fix."""
    role = f"norepl_{uuid.uuid4().hex[:8]}"
    _sql(db["dsn"], f"CREATE ROLE {role} LOGIN NOREPLICATION NOSUPERUSER")
    try:
        with pytest.raises(SourceSetupError, match="REPLICATION") as info:
            setup(_dsn(db["pg"], db["name"], user=role), f"{role}_slot")
        assert info.value.field == "REPLICATION"
        assert f"ALTER ROLE {role} REPLICATION" in str(info.value)
        rows = _sql(
            db["dsn"], f"SELECT 1 FROM pg_replication_slots WHERE slot_name = '{role}_slot'"
        )
        assert rows == []
        _sql(db["dsn"], f"ALTER ROLE {role} REPLICATION")
        with pytest.raises(SourceSetupError, match="superuser"):
            setup(_dsn(db["pg"], db["name"], user=role), f"{role}_slot")
    finally:
        _sql(db["dsn"], f"DROP ROLE {role}")


def test_setup_lists_undecodable_columns(db: dict[str, Any]) -> None:
    """`setup` names every captured column pgcdc cannot decode, looking inside arrays,
    domains, composites and ranges; excluded tables and decodable types are not listed."""
    _sql(
        db["dsn"],
        "CREATE TYPE opaque_t",
        "CREATE FUNCTION opaque_t_in(cstring) RETURNS opaque_t AS 'textin'"
        " LANGUAGE internal IMMUTABLE STRICT",
        "CREATE FUNCTION opaque_t_out(opaque_t) RETURNS cstring AS 'pg_node_tree_out'"
        " LANGUAGE internal IMMUTABLE STRICT",
        "CREATE TYPE opaque_t (INPUT = opaque_t_in, OUTPUT = opaque_t_out, LIKE = text)",
        "CREATE DOMAIN opaque_d AS opaque_t",
        "CREATE TYPE opaque_c AS (a int, b opaque_d[])",
        "CREATE TABLE uc_ok (id int, t text, p point[], j jsonb)",
        "CREATE TABLE uc_bad (id int, a opaque_t, b opaque_t[], c opaque_d, d opaque_c)",
        "CREATE TABLE uc_skipped (id int, a opaque_t)",
    )
    report = setup(db["dsn"], db["slot"], FilterSettings(exclude_tables=[r"public\.uc_skipped"]))
    assert report.undecodable_columns == (
        "public.uc_bad.a: type opaque_t, output function pg_node_tree_out, cannot be decoded",
        "public.uc_bad.b: type opaque_t[] (inside: opaque_t), output function "
        "pg_node_tree_out, cannot be decoded",
        "public.uc_bad.c: type opaque_d (inside: opaque_t), output function "
        "pg_node_tree_out, cannot be decoded",
        "public.uc_bad.d: type opaque_c (inside: opaque_t), output function "
        "pg_node_tree_out, cannot be decoded",
    )
