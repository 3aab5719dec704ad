"""Kafka Connect 4.1.x (distributed mode, one worker) with Debezium's connectors and
Apicurio's Avro converter, for the consumer tests and the Debezium golden capture.

Contract:
- `install()` resolves, from Maven Central:
  - the worker: `org.apache.kafka:connect-runtime`, `connect-json`, `connect-transforms`
    at `VERSION` with their runtime dependencies and a log4j2 binding for slf4j, by
    `mvn dependency:build-classpath` (classpath cached in `CACHE/connect-<v>/classpath.txt`);
  - the Debezium plugins, each a `plugin` tar.gz unpacked into its own directory under
    `CACHE/connect-<v>/plugins/`: `io.debezium:debezium-connector-postgres`
    (`DEBEZIUM_POSTGRES`, the source used for the golden capture) and
    `io.debezium:debezium-connector-jdbc` (`DEBEZIUM_JDBC`; 3.6.1.Final is not served);
  - Apicurio's Avro converter into `plugins/apicurio-converter/`, jar by jar: the 3.0.9
    parent POM (and java-sdk 3.0.9) are not on Maven Central, so Maven cannot resolve the
    3.0.9 modules transitively. The 3.0.9 modules are fetched without their dependencies
    (`APICURIO_MODULES`; without `apicurio-registry-common` a task fails with
    `NoClassDefFoundError: io/apicurio/registry/utils/IoUtil`), and the dependencies come
    from `apicurio-registry-java-sdk` 3.0.7 and `avro` 1.12.0, resolved transitively.
  Every directory is built in a temporary sibling and renamed into place, so a half-built
  plugin is never loaded. Later installs cost a few stats and no network.
- `start()` runs `org.apache.kafka.connect.cli.ConnectDistributed` on Java 17 with at most
  768 MiB of heap, REST on 127.0.0.1:18083, against the local broker (svc_kafka), group
  `pgcdc-connect` and internal topics `_pgcdc-connect-{configs,offsets,status}`
  (replication factor 1). Worker converters are JSON without schemas; each connector
  names its own (the Apicurio converter for the tests).
- `healthy()` is true when `GET /connector-plugins` answers 200 and lists Debezium's
  PostgreSQL connector: the REST server answers before the plugins have been scanned.
- The machine is shared: start at most one worker, and stop it when done.

Standard library only: this runs before the project's venv exists.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
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
    run,
    sigkill_pid_file,
    spawn,
)

VERSION = os.environ.get("PGCDC_CONNECT_VERSION", "4.1.1")
DEBEZIUM_POSTGRES = os.environ.get("PGCDC_DEBEZIUM_POSTGRES_VERSION", "3.6.1.Final")
DEBEZIUM_JDBC = os.environ.get("PGCDC_DEBEZIUM_JDBC_VERSION", "3.6.0.Final")
APICURIO = "3.0.9"
APICURIO_SDK = "3.0.7"
AVRO = "1.12.0"
APICURIO_MODULES = (
    "apicurio-registry-utils-converter",
    "apicurio-registry-avro-serde-kafka",
    "apicurio-registry-serde-common",
    "apicurio-registry-serde-common-avro",
    "apicurio-registry-serde-kafka-common",
    "apicurio-registry-schema-resolver",
    "apicurio-registry-common",
)
LOG4J_VERSION = "2.24.3"
HOST = "127.0.0.1"
PORT = 18083
BASE = f"http://{HOST}:{PORT}"
BOOTSTRAP = "127.0.0.1:19092"
MAIN_CLASS = "org.apache.kafka.connect.cli.ConnectDistributed"

_POM = """<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>local.pgcdc</groupId>
  <artifactId>{artifact}</artifactId>
  <version>1</version>
  <packaging>pom</packaging>
  <dependencies>
{dependencies}
  </dependencies>
</project>
"""

_DEP = """    <dependency>
      <groupId>{group}</groupId>
      <artifactId>{artifact}</artifactId>
      <version>{version}</version>
    </dependency>"""

_LOG4J2 = """status = warn
shutdownHook = disable
appender.out.type = Console
appender.out.name = out
appender.out.layout.type = PatternLayout
appender.out.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = info
rootLogger.appenderRef.out.ref = out
logger.reflections.name = org.reflections
logger.reflections.level = error
logger.kafka.name = org.apache.kafka.clients
logger.kafka.level = warn
"""

_JVM_OPTS = [
    "-Xms256m",
    "-Xmx768m",
    "-XX:+UseG1GC",
    "-XX:MaxGCPauseMillis=20",
    "-Djava.awt.headless=true",
]


def _m2_repository() -> Path:
    for opt in os.environ.get("MAVEN_OPTS", "").split():
        if opt.startswith("-Dmaven.repo.local="):
            return Path(opt.split("=", 1)[1])
    return Path.home() / ".m2" / "repository"


def _m2_path(group: str, artifact: str, version: str, suffix: str) -> Path:
    return (
        _m2_repository().joinpath(*group.split("."))
        / artifact
        / version
        / f"{artifact}-{version}{suffix}"
    )


def _mvn_get(coordinates: str, cwd: Path) -> None:
    run(
        ["mvn", "-q", "-B", "dependency:get", f"-Dartifact={coordinates}", "-Dtransitive=false"],
        cwd=cwd,
    )


def _classpath(workdir: Path, artifact: str, deps: list[tuple[str, str, str]]) -> list[Path]:
    """The runtime classpath of `deps`, resolved transitively by Maven."""
    workdir.mkdir(parents=True, exist_ok=True)
    pom = workdir / f"{artifact}.pom.xml"
    body = "\n".join(_DEP.format(group=g, artifact=a, version=v) for g, a, v in deps)
    pom.write_text(_POM.format(artifact=artifact, dependencies=body))
    out = workdir / f"{artifact}.classpath.txt"
    run(
        [
            "mvn",
            "-q",
            "-B",
            "-f",
            str(pom),
            "dependency:build-classpath",
            f"-Dmdep.outputFile={out}",
        ],
        cwd=workdir,
    )
    return [Path(p) for p in out.read_text().strip().split(os.pathsep) if p]


class Connect(Service):
    """Kafka Connect `VERSION` with Debezium's PostgreSQL and JDBC plugins, loopback only."""

    name = "connect"
    start_timeout = 240.0

    def runtime_dir(self) -> Path:
        return CACHE / f"connect-{VERSION}"

    def plugin_dir(self) -> Path:
        return self.runtime_dir() / "plugins"

    def classpath_file(self) -> Path:
        return self.runtime_dir() / "classpath.txt"

    def pid_file(self) -> Path:
        return self.home() / "connect.pid"

    def _cached_classpath(self) -> str | None:
        try:
            classpath = self.classpath_file().read_text().strip()
        except OSError:
            return None
        if not classpath or not all(Path(j).is_file() for j in classpath.split(os.pathsep)):
            return None
        return classpath

    def _plugins(self) -> dict[str, Path]:
        plugins = self.plugin_dir()
        return {
            "debezium-connector-postgres": plugins
            / f"debezium-connector-postgres-{DEBEZIUM_POSTGRES}",
            "debezium-connector-jdbc": plugins / f"debezium-connector-jdbc-{DEBEZIUM_JDBC}",
            "apicurio-converter": plugins / f"apicurio-converter-{APICURIO}",
        }

    def installed(self) -> bool:
        return self._cached_classpath() is not None and all(
            p.is_dir() for p in self._plugins().values()
        )

    def install(self) -> None:
        java_bin()
        root = self.runtime_dir()
        root.mkdir(parents=True, exist_ok=True)
        with file_lock(root / ".lock"):
            if self._cached_classpath() is None:
                jars = _classpath(
                    root / "mvn",
                    "connect-runtime",
                    [
                        ("org.apache.kafka", "connect-runtime", VERSION),
                        ("org.apache.kafka", "connect-json", VERSION),
                        ("org.apache.kafka", "connect-transforms", VERSION),
                        ("org.apache.logging.log4j", "log4j-slf4j-impl", LOG4J_VERSION),
                        ("org.apache.logging.log4j", "log4j-core", LOG4J_VERSION),
                    ],
                )
                partial = root / "classpath.txt.partial"
                partial.write_text(os.pathsep.join(map(str, jars)))
                partial.replace(self.classpath_file())
            self.plugin_dir().mkdir(exist_ok=True)
            for name, target in self._plugins().items():
                if target.is_dir():
                    continue
                if name == "apicurio-converter":
                    self._install_converter(target)
                else:
                    version = DEBEZIUM_POSTGRES if name.endswith("postgres") else DEBEZIUM_JDBC
                    self._install_tarball(name, version, target)
        if not self.installed():
            raise RuntimeError(f"connect: install left {self.runtime_dir()} incomplete")

    def _install_tarball(self, name: str, version: str, target: Path) -> None:
        tarball = _m2_path("io.debezium", name, version, "-plugin.tar.gz")
        if not tarball.is_file():
            _mvn_get(f"io.debezium:{name}:{version}:tar.gz:plugin", self.runtime_dir())
        partial = Path(tempfile.mkdtemp(prefix=f".{name}-", dir=self.plugin_dir()))
        try:
            with tarfile.open(tarball) as archive:
                archive.extractall(partial, filter="data")
            (partial / name).replace(target)  # the tarball holds one top directory, `name`
        finally:
            shutil.rmtree(partial, ignore_errors=True)

    def _install_converter(self, target: Path) -> None:
        jars: list[Path] = []
        for module in APICURIO_MODULES:
            jar = _m2_path("io.apicurio", module, APICURIO, ".jar")
            if not jar.is_file():
                _mvn_get(f"io.apicurio:{module}:{APICURIO}", self.runtime_dir())
            jars.append(jar)
        jars += _classpath(
            self.runtime_dir() / "mvn",
            "apicurio-converter",
            [
                ("io.apicurio", "apicurio-registry-java-sdk", APICURIO_SDK),
                ("org.apache.avro", "avro", AVRO),
            ],
        )
        partial = Path(tempfile.mkdtemp(prefix=".apicurio-", dir=self.plugin_dir()))
        try:
            for jar in jars:
                # Connect's own API and clients come from the worker (plugin isolation
                # delegates org.apache.kafka.* to it), and slf4j is bound there.
                if jar.name.startswith(("kafka-clients-", "connect-api-", "slf4j-api-")):
                    continue
                shutil.copy2(jar, partial / jar.name)
            partial.replace(target)
        finally:
            shutil.rmtree(partial, ignore_errors=True)

    def _write_config(self) -> Path:
        home = self.home()
        props = {
            "bootstrap.servers": BOOTSTRAP,
            "group.id": "pgcdc-connect",
            "config.storage.topic": "_pgcdc-connect-configs",
            "offset.storage.topic": "_pgcdc-connect-offsets",
            "status.storage.topic": "_pgcdc-connect-status",
            "config.storage.replication.factor": "1",
            "offset.storage.replication.factor": "1",
            "offset.storage.partitions": "1",
            "status.storage.replication.factor": "1",
            "status.storage.partitions": "1",
            "offset.flush.interval.ms": "1000",
            "key.converter": "org.apache.kafka.connect.json.JsonConverter",
            "value.converter": "org.apache.kafka.connect.json.JsonConverter",
            "key.converter.schemas.enable": "false",
            "value.converter.schemas.enable": "false",
            "listeners": f"http://{HOST}:{PORT}",
            "rest.advertised.host.name": HOST,
            "rest.advertised.port": str(PORT),
            "plugin.path": str(self.plugin_dir()),
            # Every plugin here (Debezium's connectors, Apicurio's converter) ships
            # ServiceLoader manifests, as hybrid_warn reported: the reflective scan it
            # also ran took 38 s of a 2-core machine's CPU at each start.
            "plugin.discovery": "service_load",
        }
        config = home / "connect-distributed.properties"
        config.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
        (home / "log4j2.properties").write_text(_LOG4J2)
        return config

    def start(self) -> None:
        classpath = self._cached_classpath()
        if classpath is None or not self.installed():
            raise RuntimeError("connect: not installed; run install() first")
        self.home().mkdir(parents=True, exist_ok=True)
        with file_lock(self.home() / ".lock"):
            if pid_running(self.pid_file(), MAIN_CLASS):
                return
            config = self._write_config()
            cmd = [
                java_bin(),
                *_JVM_OPTS,
                f"-Dlog4j2.configurationFile={self.home() / 'log4j2.properties'}",
                f"-Djava.io.tmpdir={self.home()}",
                "-cp",
                classpath,
                MAIN_CLASS,
                str(config),
            ]
            spawn(cmd, self.log_path(), self.pid_file(), cwd=self.home())

    def healthy(self) -> bool:
        try:
            with urllib.request.urlopen(f"{BASE}/connector-plugins", timeout=2.0) as resp:
                plugins = json.loads(resp.read())
        except (OSError, ValueError):
            return False
        return any(p.get("class", "").endswith("PostgresConnector") for p in plugins)

    def stop(self) -> None:
        kill_pid_file(self.pid_file(), timeout=60.0)

    def kill(self) -> int | None:
        return sigkill_pid_file(self.pid_file())

    def info(self) -> dict[str, object]:
        return {
            "url": BASE,
            "version": VERSION,
            "debezium_postgres": DEBEZIUM_POSTGRES,
            "debezium_jdbc": DEBEZIUM_JDBC,
            "apicurio_converter": APICURIO,
            "plugin_path": str(self.plugin_dir()),
            "log": str(self.log_path()),
        }


def main(argv: list[str]) -> int:
    """`python deploy/local/svc_connect.py up|down|env` until services.py lists it."""
    svc = Connect()
    verb = argv[0] if argv else ""
    if verb == "up":
        svc.install()
        if not svc.healthy():
            svc.start()
            svc.wait_healthy()
    elif verb == "down":
        svc.stop()
    elif verb == "env":
        pass
    else:
        print(main.__doc__, file=sys.stderr)
        return 2
    print(json.dumps(svc.info(), indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
