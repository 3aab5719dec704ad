"""The worker's privileges (connectors.postgres.privileges) against real PostgreSQL 15-18.

Each test works in a fresh database with a fresh LOGIN REPLICATION role (roles are
server-wide, so the names are unique), both dropped at the end. Function ACLs live in
each database's pg_proc, so a REVOKE in the scratch database leaves the shared server's
other databases alone.
"""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import psycopg2
import pytest

from connectors.postgres.preflight import preflight
from connectors.postgres.privileges import missing_grants, running_xacts
from connectors.postgres.server import force_running_xacts
from service.config import FilterSettings
from service.errors import SourcePrivilegeError
from tests.integration.pipeline_kafka_support import REPO

pytestmark = pytest.mark.integration

GRANT_BY_VERSION = {
    15: "GRANT pg_checkpoint TO {role}",
    16: "GRANT EXECUTE ON FUNCTION pg_catalog.pg_log_standby_snapshot() TO {role}",
    17: "GRANT EXECUTE ON FUNCTION pg_catalog.pg_log_standby_snapshot() TO {role}",
    18: "GRANT EXECUTE ON FUNCTION pg_catalog.pg_log_standby_snapshot() TO {role}",
}


@dataclass
class Scratch:
    """A database with tables, a REPLICATION role without other grants, and the DSNs."""

    pg: dict[str, Any]
    version: int
    name: str  # the database's and the role's name
    admin_dsn: str  # superuser, in the scratch database
    role_dsn: str  # the role, in the scratch database

    def sql(self, *statements: str) -> None:
        conn = psycopg2.connect(self.admin_dsn)
        conn.autocommit = True
        with conn.cursor() as cur:
            for statement in statements:
                cur.execute(statement)
        conn.close()

    def missing(self, tables: FilterSettings | None = None) -> list[str]:
        conn = psycopg2.connect(self.role_dsn)
        try:
            with conn.cursor() as cur:
                return missing_grants(cur, self.version, tables=tables)
        finally:
            conn.close()


@pytest.fixture
def scratch(pg: dict[str, Any]) -> Iterator[Scratch]:
    name = f"pgcdc_priv_{uuid.uuid4().hex[:10]}"
    base = f"host={pg['host']} port={pg['port']}"
    admin = psycopg2.connect(pg["dsn"])
    admin.autocommit = True
    with admin.cursor() as cur:
        cur.execute(f"CREATE DATABASE {name}")
        cur.execute(f"CREATE ROLE {name} LOGIN REPLICATION")
    s = Scratch(
        pg,
        int(pg["version"]),
        name,
        f"{base} user={pg['user']} dbname={name}",
        f"{base} user={name} dbname={name}",
    )
    s.sql(
        "CREATE TABLE public.a (id int PRIMARY KEY)",
        "CREATE TABLE public.b (id int PRIMARY KEY)",
        "CREATE SCHEMA other",
        "CREATE TABLE other.c (id int)",
    )
    try:
        yield s
    finally:
        with admin.cursor() as cur:
            cur.execute(f"DROP DATABASE {name} WITH (FORCE)")
            cur.execute(f"DROP ROLE {name}")
        admin.close()


def test_a_bare_replication_role_is_told_every_grant_of_its_version(scratch: Scratch) -> None:
    """A LOGIN REPLICATION role lacks exactly the version's RUNNING_XACTS grant and read
    access: pg_checkpoint on 15, EXECUTE on pg_log_standby_snapshot() on 16+; after
    running exactly the grants listed nothing is missing and the RUNNING_XACTS statement
    the worker runs succeeds as that role (so the grant is the right one, not merely
    the one the check looks for)."""
    role = scratch.name
    expected = [
        GRANT_BY_VERSION[scratch.version].format(role=role),
        f"GRANT USAGE ON SCHEMA other TO {role}",
        f"GRANT SELECT ON ALL TABLES IN SCHEMA other TO {role}",
        f"GRANT SELECT ON ALL TABLES IN SCHEMA public TO {role}",
    ]
    assert scratch.missing(FilterSettings()) == expected
    assert running_xacts(scratch.version).grant.format(role=role) == expected[0]
    scratch.sql(*expected)
    assert scratch.missing(FilterSettings()) == []
    force_running_xacts(scratch.role_dsn, scratch.version)
    assert preflight(scratch.role_dsn, FilterSettings()) == scratch.version


def test_running_xacts_without_its_grant_is_a_typed_error(scratch: Scratch) -> None:
    """Forcing RUNNING_XACTS as a role without the grant raises SourcePrivilegeError
    naming that grant (what `pgcdc run` died of with a psycopg2 traceback before)."""
    with pytest.raises(SourcePrivilegeError) as info:
        force_running_xacts(scratch.role_dsn, scratch.version)
    grant = GRANT_BY_VERSION[scratch.version].format(role=scratch.name)
    assert info.value.grants == (grant,)
    assert str(info.value).endswith(f"as a superuser run: {grant};")


def test_reads_are_checked_per_captured_table(scratch: Scratch) -> None:
    """Read access is judged per captured table: a table already readable is not listed,
    one not readable in a partly readable schema gets its own GRANT, tables the filters
    exclude are not asked for, and without a snapshot no read access is asked for."""
    role = scratch.name
    scratch.sql(
        GRANT_BY_VERSION[scratch.version].format(role=role),
        f"GRANT SELECT ON public.a TO {role}",
    )
    assert scratch.missing(FilterSettings()) == [
        f"GRANT USAGE ON SCHEMA other TO {role}",
        f"GRANT SELECT ON ALL TABLES IN SCHEMA other TO {role}",
        f"GRANT SELECT ON public.b TO {role}",
    ]
    only_public = FilterSettings(exclude_schemas=["other"])
    assert scratch.missing(only_public) == [f"GRANT SELECT ON public.b TO {role}"]
    assert scratch.missing(None) == []
    scratch.sql(f"GRANT pg_read_all_data TO {role}")
    assert scratch.missing(FilterSettings()) == []


def test_a_revoked_public_function_is_named(scratch: Scratch) -> None:
    """A function the worker calls whose EXECUTE a hardened server revoked from PUBLIC
    (here pg_export_snapshot, in the scratch database only) is named with its GRANT,
    along with the others, in one SourcePrivilegeError from preflight."""
    role = scratch.name
    scratch.sql("REVOKE EXECUTE ON FUNCTION pg_catalog.pg_export_snapshot() FROM PUBLIC")
    with pytest.raises(SourcePrivilegeError) as info:
        preflight(scratch.role_dsn, None)
    assert info.value.grants == (
        GRANT_BY_VERSION[scratch.version].format(role=role),
        f"GRANT EXECUTE ON FUNCTION pg_catalog.pg_export_snapshot() TO {role}",
    )
    assert f"role '{role}' lacks privileges `pgcdc run` needs" in str(info.value)


def test_a_superuser_needs_no_grant(scratch: Scratch) -> None:
    """A superuser is never told to grant anything, whatever PUBLIC was revoked."""
    scratch.sql("REVOKE EXECUTE ON FUNCTION pg_catalog.pg_export_snapshot() FROM PUBLIC")
    conn = psycopg2.connect(scratch.admin_dsn)
    try:
        with conn.cursor() as cur:
            assert missing_grants(cur, scratch.version, tables=FilterSettings()) == []
    finally:
        conn.close()


def test_pgcdc_run_without_a_grant_exits_1_naming_it(
    scratch: Scratch, kafka: dict[str, Any], registry: dict[str, Any]
) -> None:
    """`pgcdc run` as a role that can read every table but lacks the RUNNING_XACTS grant
    (the shipped role before issue 28) exits 1 at start with SourcePrivilegeError naming
    that GRANT, with no traceback, before it creates the slot."""
    role = scratch.name
    scratch.sql(f"GRANT pg_read_all_data TO {role}")
    env = {k: v for k, v in os.environ.items() if not k.startswith("PGCDC_")}
    env.update(
        PGCDC_SOURCE__HOST=str(scratch.pg["host"]),
        PGCDC_SOURCE__PORT=str(scratch.pg["port"]),
        PGCDC_SOURCE__USER=role,
        PGCDC_SOURCE__DBNAME=role,
        PGCDC_SOURCE__SLOT=role,
        PGCDC_KAFKA__BOOTSTRAP_SERVERS=str(kafka["bootstrap"]),
        PGCDC_KAFKA__TOPIC_PREFIX=role,
        PGCDC_REGISTRY__URL=str(registry["url"]),
        PGCDC_METRICS__PORT="0",
    )
    proc = subprocess.run(
        [sys.executable, "-m", "service.app.cli", "run"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    grant = GRANT_BY_VERSION[scratch.version].format(role=role)
    assert proc.returncode == 1, proc.stderr[-3000:]
    assert "pgcdc: SourcePrivilegeError: " in proc.stderr
    assert f"as a superuser run: {grant};" in proc.stderr
    assert "Traceback" not in proc.stderr
    conn = psycopg2.connect(scratch.admin_dsn)
    with conn.cursor() as cur:
        cur.execute("SELECT 1 FROM pg_replication_slots WHERE slot_name = %s", (role,))
        assert cur.fetchall() == []
    conn.close()
