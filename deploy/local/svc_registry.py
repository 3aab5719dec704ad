"""Apicurio Registry 3.x, in memory, with its Confluent-compatible API.

Contract:
- `install()` fetches the Quarkus assembly `io.apicurio:apicurio-registry-app:<version>`
  (type tar.gz, classifier `all`) from Maven Central with `mvn dependency:get` into ~/.m2,
  and unpacks it once into `CACHE/apicurio-registry-<version>`. The unpacking goes to a
  temporary directory renamed into place, so a half-unpacked tree is never used.
- The default version is 3.0.9: it is the newest 3.x on Maven Central that runs on this
  machine's Java 17. 3.3.2 and 3.3.3 are built for Java 21 and fail at startup with
  `UnsupportedClassVersionError: ... class file version 65.0 ... only recognizes class
  file versions up to 61.0`. Set `PGCDC_REGISTRY_VERSION` to try another.
- `start()` runs the assembly's runner jar (`*-runner.jar` in the legacy layout of 3.0.x,
  `quarkus-run.jar` in the fast-jar layout of later releases) on 127.0.0.1:`port` with the
  SQL storage on an in-memory H2 database: every start begins with an empty registry.
  Deletion through the API is enabled, so tests may clean up after themselves.
- The port is the class attribute `port` (Quarkus takes it from `QUARKUS_HTTP_PORT`):
  18081 for the shared `registry`, 28081 for `fault-registry`, a second instance with its
  own state directory for tests that kill -9 and restart it. `Registry(port=N)` gives
  another. Apicurio 3.0.x opens no other port (no separate management interface).
- `healthy()` is true when `GET /apis/ccompat/v7/subjects` answers 200.
- Concurrent `up` calls are serialised by a file lock; a second caller finds the first
  one's process alive and does not spawn another.

Standard library only: this runs before the project's venv exists.
"""

from __future__ import annotations

import http.client
import os
import shutil
import tarfile
import tempfile
import urllib.request
from pathlib import Path

from svc_common import (
    CACHE,
    Service,
    file_lock,
    java_bin,
    kill_pid_file,
    pid_running,
    read_pid,
    run,
    sigkill_pid_file,
    spawn,
)

VERSION = os.environ.get("PGCDC_REGISTRY_VERSION", "3.0.9")
ARTIFACT = f"io.apicurio:apicurio-registry-app:{VERSION}:tar.gz:all"
HOST = "127.0.0.1"
PORT = 18081  # the shared registry's; FaultRegistry has its own
MARKER = "apicurio-registry"  # in the runner's path, so in the process command line

_ENV = {
    "QUARKUS_HTTP_HOST": HOST,
    "QUARKUS_HTTP_ACCESS_LOG_ENABLED": "false",
    "APICURIO_STORAGE_KIND": "sql",
    "APICURIO_STORAGE_SQL_KIND": "h2",
    "APICURIO_REST_DELETION_GROUP_ENABLED": "true",
    "APICURIO_REST_DELETION_ARTIFACT_ENABLED": "true",
    "APICURIO_REST_DELETION_ARTIFACT_VERSION_ENABLED": "true",
}


def _m2_repository() -> Path:
    """The local Maven repository `mvn` uses (honours -Dmaven.repo.local in MAVEN_OPTS)."""
    for opt in os.environ.get("MAVEN_OPTS", "").split():
        if opt.startswith("-Dmaven.repo.local="):
            return Path(opt.split("=", 1)[1])
    return Path.home() / ".m2" / "repository"


class Registry(Service):
    """Apicurio Registry `VERSION` from Maven Central, in-memory H2 storage, loopback only."""

    name = "registry"
    port = PORT
    jvm_extra: tuple[str, ...] = ()
    start_timeout = 180.0

    def __init__(self, port: int | None = None) -> None:
        if port is not None:
            self.port = port

    def base(self) -> str:
        return f"http://{HOST}:{self.port}"

    def ccompat(self) -> str:
        return f"{self.base()}/apis/ccompat/v7"

    def app_dir(self) -> Path:
        return CACHE / f"apicurio-registry-{VERSION}"

    def pid_file(self) -> Path:
        return self.home() / "registry.pid"

    def _env(self) -> dict[str, str]:
        """This instance's environment on top of `_ENV` (svc_tls's TlsRegistry: HTTPS)."""
        return {"QUARKUS_HTTP_PORT": str(self.port)}

    def runner(self) -> Path | None:
        """The jar to run, or None when the assembly is not unpacked."""
        app = self.app_dir()
        fast_jar = app / "quarkus-run.jar"
        if fast_jar.is_file():
            return fast_jar
        legacy = sorted(app.glob("*-runner.jar"))
        return legacy[0] if legacy else None

    def install(self) -> None:
        java_bin()
        with file_lock(CACHE / f".apicurio-registry-{VERSION}.lock"):
            if self.runner() is not None:
                return
            tarball = (
                _m2_repository()
                / "io"
                / "apicurio"
                / "apicurio-registry-app"
                / VERSION
                / f"apicurio-registry-app-{VERSION}-all.tar.gz"
            )
            if not tarball.is_file():
                run(
                    [
                        "mvn",
                        "-q",
                        "-B",
                        "dependency:get",
                        f"-Dartifact={ARTIFACT}",
                        "-Dtransitive=false",
                    ],
                    cwd=CACHE,
                )
            if not tarball.is_file():
                raise RuntimeError(f"registry: mvn fetched {ARTIFACT} but {tarball} is missing")
            partial = Path(tempfile.mkdtemp(prefix=".apicurio-", dir=CACHE))
            try:
                with tarfile.open(tarball) as archive:
                    archive.extractall(partial, filter="data")
                partial.replace(self.app_dir())
            finally:
                shutil.rmtree(partial, ignore_errors=True)
        if self.runner() is None:
            raise RuntimeError(f"registry: no quarkus-run.jar or *-runner.jar in {self.app_dir()}")

    def start(self) -> None:
        runner = self.runner()
        if runner is None:
            raise RuntimeError("registry: not installed; run install() first")
        self.home().mkdir(parents=True, exist_ok=True)
        with file_lock(self.home() / ".lock"):
            if pid_running(self.pid_file(), MARKER):
                return  # another `up` started it; wait_healthy() will wait for it
            env = dict(os.environ, **_ENV, **self._env())
            cmd = [
                java_bin(),
                "-Xms128m",
                "-Xmx512m",
                "-Djava.awt.headless=true",
                *self.jvm_extra,
                f"-Djava.io.tmpdir={self.home()}",
                "-jar",
                str(runner),
            ]
            spawn(cmd, self.log_path(), self.pid_file(), env=env, cwd=self.home())

    def healthy(self) -> bool:
        try:
            with urllib.request.urlopen(f"{self.ccompat()}/subjects", timeout=2.0) as resp:
                return int(resp.status) == 200
        except (OSError, http.client.HTTPException):  # URLError is an OSError
            return False

    def stop(self) -> None:
        kill_pid_file(self.pid_file(), timeout=30.0)

    def kill(self) -> int | None:
        return sigkill_pid_file(self.pid_file())

    def info(self) -> dict[str, object]:
        return {
            "service": self.name,
            "url": self.ccompat(),
            "api": f"{self.base()}/apis/registry/v3",
            "version": VERSION,
            "log": str(self.log_path()),
            "pid": read_pid(self.pid_file()),
        }


class FaultRegistry(Registry):
    """A second Apicurio for fault-injection tests, never the shared one."""

    name = "fault-registry"
    port = 28081
    # Fault tests restart it often and never load it: C1 only and the serial collector
    # start it with less CPU (on this shared 2-core machine) than tiered C2 and G1.
    jvm_extra = ("-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC")
