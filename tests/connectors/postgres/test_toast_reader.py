"""The unchanged-TOAST fill's reader of replaced values under the shipped
least-privilege role (issue 32): `pgcdc setup --worker-role` installs
`pgcdc.toast_chunks` (connectors/postgres/sql/toast_reader.sql), the worker's start-up
check names it, and `SqlToastSource` reads through it. Real PostgreSQL; the role is made
by deploy/postgres/init/01-pgcdc.sh (tests/fixtures/worker_role.py). Run for PG15 and
PG18 (`-k "pg15 or pg18"`).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import closing
from dataclasses import dataclass
from typing import Any

import psycopg2
import psycopg2.errors
import pytest

from connectors.postgres.privileges import TOAST_READER, check_worker_privileges, missing_grants
from connectors.postgres.setup import setup, teardown
from connectors.postgres.toast import SqlToastSource
from service.config import FilterSettings
from service.errors import SourcePrivilegeError
from tests.fixtures.worker_role import drop_role, init_script_role

pytestmark = pytest.mark.integration


@dataclass
class Source:
    """A database, the init script's role in it, and `pgcdc setup` run for that role."""

    pg: dict[str, Any]
    name: str  # database, role and slot
    admin_dsn: str
    role_dsn: str

    def admin(self) -> Any:
        conn = psycopg2.connect(self.admin_dsn)
        conn.autocommit = True
        return conn

    def as_role(self) -> Any:
        conn = psycopg2.connect(self.role_dsn)
        conn.autocommit = True
        return conn


@pytest.fixture
def source(pg: dict[str, Any]) -> Iterator[Source]:
    name = f"pgcdc_toastrd_{uuid.uuid4().hex[:10]}"
    base = f"host={pg['host']} port={pg['port']}"
    s = Source(
        pg,
        name,
        f"{base} user={pg['user']} dbname={name}",
        f"{base} user={name} password=pw dbname={name}",
    )
    root = psycopg2.connect(pg["dsn"])
    root.autocommit = True
    with root.cursor() as cur:
        cur.execute(f"CREATE DATABASE {name}")
    try:
        init_script_role(pg, name, name, "pw")
        with closing(s.admin()) as conn, conn.cursor() as cur:
            cur.execute("CREATE TABLE docs (id int PRIMARY KEY, t text)")
            cur.execute(
                "INSERT INTO docs SELECT 1, string_agg(md5(g::text || random()::text), '')"
                " FROM generate_series(1, 600) g"
            )
        yield s
    finally:
        teardown(s.admin_dsn, name)
        with root.cursor() as cur:
            cur.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
        root.close()
        drop_role(pg, name)


def toast_of(cur: Any, table: str) -> tuple[int, str]:
    cur.execute(
        "SELECT reltoastrelid::int8, reltoastrelid::regclass::text FROM pg_class"
        " WHERE oid = %s::regclass",
        (table,),
    )
    oid, name = cur.fetchone()
    return int(oid), str(name)


def test_setup_grants_the_reader_to_the_worker_role_alone(source: Source) -> None:
    """`setup(worker_role=...)` installs pageinspect in schema pgcdc (absent before) and
    pgcdc.toast_chunks (SECURITY DEFINER, search_path pinned), EXECUTE for that role
    and not for PUBLIC; the role's start-up check with the fill on then finds nothing
    missing."""
    report = setup(source.admin_dsn, source.name, worker_role=source.name)
    assert report.toast_reader_usable and report.toast_reader_grantee == source.name
    with closing(source.admin()) as conn, conn.cursor() as cur:
        cur.execute(
            "SELECT n.nspname FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace"
            " WHERE e.extname = 'pageinspect'"
        )
        assert cur.fetchall() == [("pgcdc",)]
        cur.execute(
            "SELECT has_function_privilege(%s, %s, 'EXECUTE'),"
            " has_function_privilege('pg_read_all_data', %s, 'EXECUTE'),"
            " (SELECT p.proacl::text[] FROM pg_proc p"
            "  WHERE p.oid = to_regprocedure('pgcdc.toast_chunks(regclass,oid[])')),"
            " (SELECT p.prosecdef AND p.proconfig = '{\"search_path=pg_catalog, pg_temp\"}'"
            "  FROM pg_proc p WHERE p.oid = to_regprocedure('pgcdc.toast_chunks(regclass,oid[])'))",
            (source.name, TOAST_READER, TOAST_READER),
        )
        mine, group, acl, definer_pinned = cur.fetchone()
    assert mine and not group and definer_pinned
    assert not any(entry.startswith("=") for entry in acl), acl  # nothing for PUBLIC
    with closing(source.as_role()) as conn, conn.cursor() as cur:
        cur.execute("SELECT current_setting('server_version_num')::int / 10000")
        major = int(cur.fetchone()[0])
        assert missing_grants(cur, major, tables=FilterSettings(), toast_fill=True) == []


def test_the_role_reads_a_replaced_value_only_through_the_reader(source: Source) -> None:
    """A value replaced by a later transaction (held from pruning by an open snapshot,
    as the slot's xmin holds it for the worker): pg_read_all_data lets the role SELECT
    the TOAST table, but that shows no chunk of the old value, and get_raw_page is a
    superuser's; through pgcdc.toast_chunks `SqlToastSource` returns it whole."""
    setup(source.admin_dsn, source.name, worker_role=source.name)
    admin = source.admin()
    with admin.cursor() as cur:
        toast_oid, toast_name = toast_of(cur, "docs")
        cur.execute(f"SELECT DISTINCT chunk_id::int8 FROM {toast_name}")
        ((valueid,),) = cur.fetchall()
        cur.execute("SELECT t FROM docs WHERE id = 1")
        (old,) = cur.fetchone()
    holder = psycopg2.connect(source.admin_dsn)  # keeps the old chunks from pruning
    holder.set_session(isolation_level="REPEATABLE READ")
    with holder.cursor() as cur:
        cur.execute("SELECT 1")
    try:
        with admin.cursor() as cur:
            cur.execute("UPDATE docs SET t = 'short now' WHERE id = 1")
        with closing(source.as_role()) as conn, conn.cursor() as cur:
            cur.execute(f"SELECT count(*) FROM {toast_name}")  # allowed: pg_read_all_data
            assert cur.fetchone() == (0,)
            with pytest.raises(psycopg2.errors.InsufficientPrivilege):
                cur.execute(f"SELECT * FROM pgcdc.get_raw_page('{toast_name}', 0)")
        reader = SqlToastSource(source.role_dsn)
        try:
            got = reader.fetch({toast_oid: [valueid]}, 0)
        finally:
            reader.close()
        assert reader.raw_reads == 1
        assert got[(toast_oid, valueid)].decode() == old
    finally:
        holder.close()
        admin.close()


def test_the_reader_refuses_other_relations_and_unreadable_tables(source: Source) -> None:
    """pgcdc.toast_chunks takes only the TOAST table of a user table the caller may
    SELECT: a plain table and a system catalog's TOAST table are wrong_object_type,
    and a role with EXECUTE but without SELECT on the table is refused."""
    setup(source.admin_dsn, source.name, worker_role=source.name)
    other = f"{source.name}_x"
    with closing(source.admin()) as conn, conn.cursor() as cur:
        toast_oid, _ = toast_of(cur, "docs")
        cur.execute(f"CREATE ROLE {other} LOGIN")
        cur.execute(f"GRANT EXECUTE ON FUNCTION {TOAST_READER} TO {other}")
        cur.execute(f"GRANT USAGE ON SCHEMA pgcdc TO {other}")
    try:
        with closing(source.as_role()) as conn, conn.cursor() as cur:
            for rel in ("'docs'::regclass", "'pg_toast.pg_toast_1255'::regclass"):
                with pytest.raises(psycopg2.errors.WrongObjectType):
                    cur.execute(f"SELECT pgcdc.toast_chunks({rel}, '{{1}}')")
        dsn = source.role_dsn.replace(f"user={source.name}", f"user={other}")
        conn = psycopg2.connect(dsn)
        try:
            with (
                conn.cursor() as cur,
                pytest.raises(psycopg2.errors.InsufficientPrivilege, match="may not read"),
            ):
                cur.execute("SELECT pgcdc.toast_chunks(%s::oid::regclass, '{1}')", (toast_oid,))
        finally:
            conn.close()
    finally:
        with closing(source.admin()) as conn, conn.cursor() as cur:
            cur.execute(f"DROP OWNED BY {other}")
            cur.execute(f"DROP ROLE {other}")


def test_start_check_names_the_reader_when_the_fill_is_on(source: Source) -> None:
    """With toast.unchanged = fill, the role's start-up check is a SourcePrivilegeError
    naming the GRANT on pgcdc.toast_chunks (and `pgcdc setup --worker-role` while the
    function does not exist); with the fill off nothing is missing."""
    with closing(source.as_role()) as conn, conn.cursor() as cur:
        cur.execute("SELECT current_setting('server_version_num')::int / 10000")
        major = int(cur.fetchone()[0])
        check_worker_privileges(cur, major, tables=FilterSettings(), toast_fill=False)
        with pytest.raises(SourcePrivilegeError) as absent:
            check_worker_privileges(cur, major, tables=FilterSettings(), toast_fill=True)
    grant = f"GRANT EXECUTE ON FUNCTION {TOAST_READER} TO {source.name}"
    assert grant in absent.value.grants
    assert f"`pgcdc setup --worker-role {source.name}`" in str(absent.value)
    setup(source.admin_dsn, source.name)  # no --worker-role: installed, not granted
    with (
        closing(source.as_role()) as conn,
        conn.cursor() as cur,
        pytest.raises(SourcePrivilegeError) as ungranted,
    ):
        check_worker_privileges(cur, major, tables=FilterSettings(), toast_fill=True)
    assert ungranted.value.grants == (grant,)  # USAGE on pgcdc: pg_read_all_data has it
    assert "toast.unchanged: placeholder" in str(ungranted.value)
