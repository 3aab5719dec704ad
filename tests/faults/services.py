"""The fault suite's own services: PostgreSQL 15, a Kafka broker and a registry that the
tests may stop, kill, cut off or stall without touching the shared ones.

Contract:
- `FaultPostgres(name, port, wal_level=...)` is a PostgreSQL 15 cluster (Debian's
  package, as deploy/local/svc_pg.py uses) under `ROOT/<name>`, run as the `postgres` OS
  user with trust authentication on loopback, except for the role `pwuser` (password
  `right`, scram) that the wrong-password test uses. `start`, `stop(mode)`,
  `restart(mode)` and `kill9` drive it; `info()` has the shape of services.py's.
- `FaultKafka` is one KRaft node from the jars the shared broker uses (its cached
  classpath, see deploy/local/svc_kafka.py), listening on `KAFKA_PORT` (clients) and
  `KAFKA_PORT + 1` (controller), with the client listener advertised as `advertise`
  (a proxy's port), so every client connection, bootstrap or not, goes through it.
  A second listener on `KAFKA_PORT + 2` is what the broker uses to reach itself.
- `FaultRegistry` is Apicurio from the same unpacked install as the shared one
  (deploy/local/svc_registry.py), on `REGISTRY_PORT`.
- Everything lives under `ROOT` (/var/tmp/pgcdc-faults) and listens on 127.0.0.1 only.
  At most one extra broker and one extra registry run at a time; the session fixtures
  in tests/faults/conftest.py stop them when the tests end.

These stand in for the fault instances deploy/local/services.py is gaining; swapping
them means changing only this module.
"""

from __future__ import annotations

import base64
import os
import shutil
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
ROOT = Path(os.environ.get("PGCDC_FAULTS_ROOT", "/var/tmp/pgcdc-faults"))
PG_BIN = Path("/usr/lib/postgresql/15/bin")
PG_PORT = 56515
KAFKA_PORT = 29192
REGISTRY_PORT = 28181

sys.path.insert(0, str(REPO / "deploy" / "local"))
import svc_common  # noqa: E402
import svc_kafka  # noqa: E402
import svc_registry  # noqa: E402


def _as_postgres(cmd: list[str]) -> list[str]:
    return ["runuser", "-u", "postgres", "--", *cmd] if os.geteuid() == 0 else cmd


def wait_port(port: int, timeout: float, *, open_: bool = True) -> None:
    deadline = time.monotonic() + timeout
    while svc_common.port_open(port) != open_:
        if time.monotonic() > deadline:
            raise RuntimeError(f"port {port} not {'open' if open_ else 'closed'} in {timeout}s")
        time.sleep(0.1)


class FaultPostgres:
    """A throw-away PostgreSQL 15 cluster (see the module docstring)."""

    def __init__(
        self,
        name: str,
        port: int = PG_PORT,
        *,
        wal_level: str = "logical",
        max_wal_size: str = "1GB",
        wal_keep_size: str = "256MB",
    ) -> None:
        self.name, self.port, self.wal_level = name, port, wal_level
        self.home = ROOT / name
        self.pgdata = self.home / "data"
        self.log = self.home / "postgres.log"
        self.max_wal_size, self.wal_keep_size = max_wal_size, wal_keep_size

    def _ctl(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        cmd = _as_postgres([str(PG_BIN / "pg_ctl"), "-D", str(self.pgdata), *args])
        proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
        if check and proc.returncode != 0:
            raise RuntimeError(f"pg_ctl {' '.join(args)}: {proc.stdout}{proc.stderr}")
        return proc

    def _initdb(self) -> None:
        self.home.mkdir(parents=True, exist_ok=True)
        if os.geteuid() == 0:
            for path in (ROOT, self.home):
                shutil.chown(path, "postgres")
        if (self.pgdata / "PG_VERSION").exists():
            return
        subprocess.run(
            _as_postgres(
                [
                    str(PG_BIN / "initdb"),
                    "-D",
                    str(self.pgdata),
                    "-U",
                    "postgres",
                    "--auth=trust",
                    "--encoding=UTF8",
                    "--locale=C.UTF-8",
                ]
            ),
            capture_output=True,
            check=True,
        )
        (self.pgdata / "pg_hba.conf").write_text(
            "local all all trust\n"
            "host all pwuser 127.0.0.1/32 scram-sha-256\n"
            "host replication pwuser 127.0.0.1/32 scram-sha-256\n"
            "host all all 127.0.0.1/32 trust\n"
            "host replication all 127.0.0.1/32 trust\n"
        )

    def _write_conf(self) -> None:
        # postgresql.auto.conf is read last: the settings of this run win there.
        (self.pgdata / "postgresql.auto.conf").write_text(f"""
listen_addresses = '127.0.0.1'
port = {self.port}
unix_socket_directories = '{self.home}'
wal_level = {self.wal_level}
max_wal_senders = 10
max_replication_slots = 10
max_wal_size = '{self.max_wal_size}'
wal_keep_size = '{self.wal_keep_size}'
fsync = off
shared_buffers = '64MB'
max_connections = 60
log_min_messages = warning
""")
        if os.geteuid() == 0:
            shutil.chown(self.pgdata / "postgresql.auto.conf", "postgres")

    def start(self) -> None:
        self._initdb()
        self._write_conf()
        if not (self.pgdata / "postmaster.pid").exists():
            self._ctl("-l", str(self.log), "-w", "-t", "60", "start")
        subprocess.run(
            _as_postgres(
                [
                    str(PG_BIN / "psql"),
                    "-h",
                    str(self.home),
                    "-p",
                    str(self.port),
                    "-U",
                    "postgres",
                    "-qc",
                    "DO $$ BEGIN CREATE ROLE pwuser LOGIN SUPERUSER "
                    "REPLICATION PASSWORD 'right'; EXCEPTION WHEN "
                    "duplicate_object THEN NULL; END $$",
                ]
            ),
            capture_output=True,
            check=True,
        )

    def stop(self, mode: str = "fast") -> None:
        if (self.pgdata / "postmaster.pid").exists():
            self._ctl("-m", mode, "-w", "-t", "60", "stop", check=False)

    def restart(self, mode: str = "fast") -> None:
        self.stop(mode)
        self.start()

    def kill9(self) -> None:
        """SIGKILL the postmaster (a crash; the next start runs recovery)."""
        pid_file = self.pgdata / "postmaster.pid"
        if pid_file.exists():
            pid = int(pid_file.read_text().splitlines()[0])
            os.kill(pid, signal.SIGKILL)
            wait_port(self.port, 30, open_=False)
            time.sleep(0.5)  # the backends notice the postmaster is gone and exit

    def remove(self) -> None:
        self.stop("immediate")
        shutil.rmtree(self.home, ignore_errors=True)

    def info(self, port: int | None = None) -> dict[str, Any]:
        """services.py's shape; `port` points clients at a proxy instead."""
        p = port or self.port
        return {
            "host": "127.0.0.1",
            "port": p,
            "user": "postgres",
            "dbname": "postgres",
            "dsn": f"host=127.0.0.1 port={p} user=postgres dbname=postgres",
            "version": 15,
            "bin": str(PG_BIN),
            "pgdata": str(self.pgdata),
        }


class FaultKafka:
    """One extra KRaft broker (see the module docstring)."""

    def __init__(self, advertise: int, port: int = KAFKA_PORT) -> None:
        self.port, self.advertise = port, advertise
        self.home = ROOT / "kafka"
        self.log = self.home / "kafka.log"
        self.proc: subprocess.Popen[bytes] | None = None

    def _classpath(self) -> str:
        svc = svc_kafka.Kafka()
        classpath = svc._cached_classpath()
        if classpath is None:
            svc.install()
            classpath = svc._cached_classpath()
        assert classpath is not None
        return classpath

    def _config(self) -> Path:
        h = "127.0.0.1"
        props = {
            "process.roles": "broker,controller",
            "node.id": "1",
            "controller.quorum.voters": f"1@{h}:{self.port + 1}",
            "listeners": (
                f"CLIENT://{h}:{self.port},CONTROLLER://{h}:{self.port + 1},"
                f"INTERNAL://{h}:{self.port + 2}"
            ),
            "advertised.listeners": f"CLIENT://{h}:{self.advertise},INTERNAL://{h}:{self.port + 2}",
            "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": "INTERNAL",
            "listener.security.protocol.map": (
                "CLIENT:PLAINTEXT,CONTROLLER:PLAINTEXT,INTERNAL:PLAINTEXT"
            ),
            "log.dirs": str(self.home / "data"),
            "num.partitions": "1",
            "auto.create.topics.enable": "true",
            "offsets.topic.replication.factor": "1",
            "offsets.topic.num.partitions": "1",
            "transaction.state.log.replication.factor": "1",
            "transaction.state.log.min.isr": "1",
            "transaction.state.log.num.partitions": "1",
            "share.coordinator.state.topic.replication.factor": "1",
            "share.coordinator.state.topic.min.isr": "1",
            "group.initial.rebalance.delay.ms": "0",
        }
        self.home.mkdir(parents=True, exist_ok=True)
        config = self.home / "server.properties"
        config.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
        (self.home / "log4j2.properties").write_text(svc_kafka._LOG4J2)
        return config

    def _java(self, *args: str) -> list[str]:
        return [
            svc_common.java_bin(),
            "-Xms128m",
            "-Xmx512m",
            "-XX:+UseSerialGC",
            "-XX:TieredStopAtLevel=1",
            "-Djava.awt.headless=true",
            f"-Dlog4j2.configurationFile={self.home / 'log4j2.properties'}",
            f"-Dkafka.logs.dir={self.home / 'logs'}",
            "-cp",
            self._classpath(),
            *args,
        ]

    def start(self, timeout: float = 120.0) -> None:
        config = self._config()
        if not (self.home / "data" / "meta.properties").exists():
            cluster = base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()
            subprocess.run(
                self._java(svc_kafka.STORAGE_TOOL, "format", "-t", cluster, "-c", str(config)),
                capture_output=True,
                check=True,
            )
        with self.log.open("ab") as out:
            self.proc = subprocess.Popen(
                self._java(svc_kafka.MAIN_CLASS, str(config)),
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
        deadline = time.monotonic() + timeout
        while True:
            try:
                if svc_kafka.metadata_broker_count("127.0.0.1", self.port + 2) >= 1:
                    return
            except (OSError, ValueError):
                pass  # not up yet
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"fault broker did not start:\n{self.log.read_text()[-3000:]}")
            time.sleep(0.5)

    def stop(self) -> None:
        """Graceful (SIGTERM: controlled shutdown)."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(90)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(30)
        self.proc = None

    def kill9(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(30)
        self.proc = None

    def remove(self) -> None:
        self.kill9()
        shutil.rmtree(self.home, ignore_errors=True)


class FaultRegistry:
    """One extra Apicurio registry, in memory (see the module docstring)."""

    def __init__(self, port: int = REGISTRY_PORT) -> None:
        self.port = port
        self.home = ROOT / "registry"
        self.proc: subprocess.Popen[bytes] | None = None

    def url(self, port: int | None = None) -> str:
        return f"http://127.0.0.1:{port or self.port}/apis/ccompat/v7"

    def start(self, timeout: float = 180.0) -> None:
        import urllib.request  # noqa: PLC0415

        svc = svc_registry.Registry()
        runner = svc.runner()
        if runner is None:
            svc.install()
            runner = svc.runner()
        assert runner is not None
        self.home.mkdir(parents=True, exist_ok=True)
        env = dict(os.environ, **svc_registry._ENV, QUARKUS_HTTP_PORT=str(self.port))
        with (self.home / "registry.log").open("ab") as out:
            self.proc = subprocess.Popen(
                [
                    svc_common.java_bin(),
                    "-Xmx384m",
                    "-XX:+UseSerialGC",
                    "-XX:TieredStopAtLevel=1",
                    "-jar",
                    str(runner),
                ],
                env=env,
                cwd=self.home,
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
        deadline = time.monotonic() + timeout
        while True:
            try:
                with urllib.request.urlopen(f"{self.url()}/subjects", timeout=2) as r:
                    if r.status == 200:
                        return
            except OSError:
                pass  # not up yet
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("fault registry did not start")
            time.sleep(0.5)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(30)
        self.proc = None
