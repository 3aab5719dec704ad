"""Apache Kafka 4.x, one node in KRaft mode (broker and controller in one JVM).

Contract:
- `install()` resolves `org.apache.kafka:kafka_2.13:<version>` and its runtime dependencies
  (plus a log4j2 binding for slf4j, which the Kafka POMs leave to the distribution) from
  Maven Central with `mvn dependency:build-classpath`. The jars stay in ~/.m2; the computed
  classpath is cached in `CACHE/kafka-<version>/classpath.txt`, so later installs cost one
  stat per jar and no network.
- `start()` writes `server.properties` under `state_dir()/<name>`, formats the log directory
  once (as `kafka-storage.sh format`, main class `kafka.tools.StorageTool`), then runs
  `kafka.Kafka server.properties` on the machine's Java 17 with at most 1 GiB of heap. The
  shared broker `kafka` listens on 127.0.0.1:19092 (PLAINTEXT), its controller on
  127.0.0.1:19093. Data survive `down`/`up`; delete `state_dir()/kafka` for a fresh cluster.
- `fault-kafka` is a second, independent single-node cluster (own cluster id, log dir
  `state_dir()/fault-kafka`, 127.0.0.1:29092 and controller 29093) for tests that kill -9
  and restart a broker; it starts only when named. `kill()` SIGKILLs the JVM; the next
  `start()` recovers the log from what was on disk, as after a crash. It has a third
  listener, PROXIED on 127.0.0.1:29094, advertised as 127.0.0.1:29095 (`info()`'s
  `proxied_bootstrap`): a test runs its TCP proxy on 29095 forwarding to 29094, and then
  every connection a client makes, bootstrap or not, goes through that proxy.
- `healthy()` is true only when a Kafka Metadata request on 19092 answers with at least one
  live broker: an open port alone is not enough, because the socket server binds before the
  broker has caught up with the metadata log and been unfenced.
- Transactions work on one node: the transaction-state and offsets topics use replication
  factor 1 and min.isr 1.
- Concurrent `up` calls (several pytest sessions) are serialised by a file lock; a second
  caller finds the first one's process alive and does not spawn another.

Standard library only: this runs before the project's venv exists.
"""

from __future__ import annotations

import base64
import os
import shutil
import socket
import ssl
import struct
import uuid
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
    wait_ports_free,
)

VERSION = os.environ.get("PGCDC_KAFKA_VERSION", "4.1.1")
# Kafka 4.1 depends on slf4j 1.7.x; its own distribution binds it to log4j2 this way.
LOG4J_VERSION = "2.24.3"
HOST = "127.0.0.1"
PORT = 19092  # the shared broker's; FaultKafka has its own
CONTROLLER_PORT = 19093
MAIN_CLASS = "kafka.Kafka"
STORAGE_TOOL = "kafka.tools.StorageTool"

_POM = """<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>local.pgcdc</groupId>
  <artifactId>kafka-runtime</artifactId>
  <version>1</version>
  <packaging>pom</packaging>
  <dependencies>
    <dependency>
      <groupId>org.apache.kafka</groupId>
      <artifactId>kafka_2.13</artifactId>
      <version>{kafka}</version>
    </dependency>
    <dependency>
      <groupId>org.apache.logging.log4j</groupId>
      <artifactId>log4j-slf4j-impl</artifactId>
      <version>{log4j}</version>
    </dependency>
    <dependency>
      <groupId>org.apache.logging.log4j</groupId>
      <artifactId>log4j-core</artifactId>
      <version>{log4j}</version>
    </dependency>
  </dependencies>
</project>
"""

# shutdownHook=disable: log4j's own hook would stop logging while Kafka's shutdown, started
# by SIGTERM, is still running, and the end of the shutdown would be missing from the log.
_LOG4J2 = """status = warn
shutdownHook = disable
appender.out.type = Console
appender.out.name = out
appender.out.layout.type = PatternLayout
appender.out.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = info
rootLogger.appenderRef.out.ref = out
logger.change.name = state.change.logger
logger.change.level = warn
logger.request.name = kafka.request.logger
logger.request.level = warn
logger.controller.name = org.apache.kafka.controller
logger.controller.level = warn
"""

# Kafka's own kafka-run-class.sh defaults, with a smaller heap: this machine is shared.
_JVM_OPTS = [
    "-Xms256m",
    "-Xmx1g",
    "-XX:+UseG1GC",
    "-XX:MaxGCPauseMillis=20",
    "-XX:InitiatingHeapOccupancyPercent=35",
    "-XX:+ExplicitGCInvokesConcurrent",
    "-Djava.awt.headless=true",
]


def _kafka_string(value: str) -> bytes:
    raw = value.encode()
    return struct.pack(">h", len(raw)) + raw


def metadata_broker_count(
    host: str, port: int, timeout: float = 2.0, *, context: ssl.SSLContext | None = None
) -> int:
    """Send a Kafka Metadata v4 request for no topics; return how many brokers it lists
    (over TLS with `context` when given, for an SSL listener).

    Request header v1 (api_key, api_version, correlation_id, client_id), body v4 (topics as
    an empty array, allow_auto_topic_creation false). Response header v0 (correlation_id),
    body v4: throttle_time_ms, then the broker array we count. Raises OSError or ValueError
    when the broker does not answer that way.
    """
    correlation = 0x5043
    body = struct.pack(">hhi", 3, 4, correlation) + _kafka_string("pgcdc-health")
    body += struct.pack(">ib", 0, 0)
    with socket.create_connection((host, port), timeout=timeout) as plain:
        sock = plain if context is None else context.wrap_socket(plain, server_hostname=host)
        sock.settimeout(timeout)
        sock.sendall(struct.pack(">i", len(body)) + body)
        size = struct.unpack(">i", _recv_exact(sock, 4))[0]
        reply = _recv_exact(sock, size)
    got_correlation, _throttle, brokers = struct.unpack_from(">iii", reply, 0)
    if got_correlation != correlation:
        raise ValueError(f"metadata reply for correlation id {got_correlation}, sent {correlation}")
    return int(brokers)


def _recv_exact(sock: socket.socket, n: int) -> bytes:
    chunks = bytearray()
    while len(chunks) < n:
        chunk = sock.recv(n - len(chunks))
        if not chunk:
            raise ValueError(f"connection closed after {len(chunks)} of {n} bytes")
        chunks += chunk
    return bytes(chunks)


class Kafka(Service):
    """Apache Kafka `VERSION` from Maven Central, KRaft combined mode, loopback only."""

    name = "kafka"
    port = PORT
    controller_port = CONTROLLER_PORT
    extra_props: dict[str, str] = {}  # noqa: RUF012 (read only; subclasses replace it)
    jvm_opts: tuple[str, ...] = tuple(_JVM_OPTS)
    start_timeout = 180.0
    fresh_data = False  # format a new log directory at every start (svc_tls's TlsKafka)

    def runtime_dir(self) -> Path:
        return CACHE / f"kafka-{VERSION}"

    def classpath_file(self) -> Path:
        return self.runtime_dir() / "classpath.txt"

    def pid_file(self) -> Path:
        return self.home() / "kafka.pid"

    def _cached_classpath(self) -> str | None:
        try:
            classpath = self.classpath_file().read_text().strip()
        except OSError:
            return None
        jars = classpath.split(os.pathsep)
        if not classpath or not all(Path(jar).is_file() for jar in jars):
            return None
        return classpath

    def install(self) -> None:
        java_bin()
        with file_lock(self.runtime_dir() / ".lock"):
            if self._cached_classpath() is not None:
                return
            pom = self.runtime_dir() / "pom.xml"
            pom.write_text(_POM.format(kafka=VERSION, log4j=LOG4J_VERSION))
            partial = self.runtime_dir() / "classpath.txt.partial"
            run(
                [
                    "mvn",
                    "-q",
                    "-B",
                    "-f",
                    str(pom),
                    "dependency:build-classpath",
                    f"-Dmdep.outputFile={partial}",
                ],
                cwd=self.runtime_dir(),
            )
            partial.replace(self.classpath_file())
        if self._cached_classpath() is None:
            raise RuntimeError(f"kafka: {self.classpath_file()} names missing jars after mvn")

    def _listeners(self) -> dict[str, str]:
        """The listener properties; FaultKafka adds its PROXIED one."""
        return {
            "listeners": (
                f"PLAINTEXT://{HOST}:{self.port},CONTROLLER://{HOST}:{self.controller_port}"
            ),
            "advertised.listeners": f"PLAINTEXT://{HOST}:{self.port}",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
        }

    def _format_args(self) -> list[str]:
        """More arguments of the storage format (svc_tls's TlsKafka adds SCRAM users)."""
        return []

    def _write_config(self) -> Path:
        home = self.home()
        props = {
            "process.roles": "broker,controller",
            "node.id": "1",
            "controller.quorum.voters": f"1@{HOST}:{self.controller_port}",
            **self._listeners(),
            "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": "PLAINTEXT",
            "log.dirs": str(home / "data"),
            "num.partitions": "1",
            "auto.create.topics.enable": "true",
            "offsets.topic.replication.factor": "1",
            # One partition each: a test broker has no use for 50, and creating them is slow.
            "offsets.topic.num.partitions": "1",
            "transaction.state.log.replication.factor": "1",
            "transaction.state.log.min.isr": "1",
            "transaction.state.log.num.partitions": "1",
            "share.coordinator.state.topic.replication.factor": "1",
            "share.coordinator.state.topic.min.isr": "1",
            "group.initial.rebalance.delay.ms": "0",
            **self.extra_props,
        }
        config = home / "server.properties"
        config.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
        (home / "log4j2.properties").write_text(_LOG4J2)
        return config

    def _java(self, classpath: str, *args: str) -> list[str]:
        log4j = self.home() / "log4j2.properties"
        return [
            java_bin(),
            *self.jvm_opts,
            f"-Dlog4j2.configurationFile={log4j}",
            f"-Dkafka.logs.dir={self.home() / 'logs'}",
            "-cp",
            classpath,
            *args,
        ]

    def start(self) -> None:
        classpath = self._cached_classpath()
        if classpath is None:
            raise RuntimeError("kafka: not installed (no cached classpath); run install() first")
        self.home().mkdir(parents=True, exist_ok=True)
        with file_lock(self.home() / ".lock"):
            if pid_running(self.pid_file(), MAIN_CLASS):
                return  # another `up` started it; wait_healthy() will wait for it
            wait_ports_free(self.name, self.listen_ports())
            config = self._write_config()
            if self.fresh_data:
                shutil.rmtree(self.home() / "data", ignore_errors=True)
            if not (self.home() / "data" / "meta.properties").exists():
                # Kafka's Uuid.toString: URL-safe base64 of 16 random bytes, unpadded.
                cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()
                run(
                    # `--cluster-id=ID` in one argument: an id that starts with "-" (one
                    # in 64) is otherwise taken for an option and the format fails.
                    self._java(
                        classpath,
                        STORAGE_TOOL,
                        "format",
                        f"--cluster-id={cluster_id}",
                        "-c",
                        str(config),
                        *self._format_args(),
                    )
                )
            spawn(
                self._java(classpath, MAIN_CLASS, str(config)),
                self.log_path(),
                self.pid_file(),
                cwd=self.home(),
            )

    def healthy(self) -> bool:
        try:
            return metadata_broker_count(HOST, self.port) >= 1
        except (OSError, ValueError, struct.error):
            return False

    def stop(self) -> None:
        # SIGTERM triggers Kafka's controlled shutdown; KILL only after 60 s.
        kill_pid_file(self.pid_file(), timeout=60.0)

    def kill(self) -> int | None:
        return sigkill_pid_file(self.pid_file())

    def info(self) -> dict[str, object]:
        return {
            "service": self.name,
            "bootstrap": f"{HOST}:{self.port}",
            "controller": f"{HOST}:{self.controller_port}",
            "version": VERSION,
            "log": str(self.log_path()),
            "pid": read_pid(self.pid_file()),
            "data": str(self.home() / "data"),
        }


class FaultKafka(Kafka):
    """A second single-node KRaft cluster for fault-injection tests, never the shared one."""

    name = "fault-kafka"
    port = 29092
    controller_port = 29093
    # After a kill -9 the controller keeps the dead broker's registration until its session
    # times out (9 s by default) and only then lets the new incarnation register: a restart
    # took ~15 s. A 2 s session makes it ~5 s; heartbeats must come well within it.
    extra_props = {  # noqa: RUF012 (read only)
        "broker.session.timeout.ms": "2000",
        "broker.heartbeat.interval.ms": "500",
    }
    # Restarted often and never loaded: C1 only and the serial collector start it with
    # less CPU (this machine has 2 shared cores) than tiered C2 and G1.
    jvm_opts = (
        "-Xms128m",
        "-Xmx512m",
        "-XX:TieredStopAtLevel=1",
        "-XX:+UseSerialGC",
        "-Djava.awt.headless=true",
    )
    # A client that bootstraps from the proxy on proxied_port learns proxied_port as the
    # broker's address (Kafka advertises per listener), so the proxy sees all its traffic.
    proxied_listen_port = 29094
    proxied_port = 29095

    def listen_ports(self) -> set[int]:
        # The proxy's port is the test's to bind (reserved all the same): a broker
        # restarted under a running proxy must not wait for it.
        return super().listen_ports() - {self.proxied_port}

    def _listeners(self) -> dict[str, str]:
        plain = super()._listeners()
        return {
            "listeners": f"{plain['listeners']},PROXIED://{HOST}:{self.proxied_listen_port}",
            "advertised.listeners": (
                f"{plain['advertised.listeners']},PROXIED://{HOST}:{self.proxied_port}"
            ),
            "listener.security.protocol.map": (
                f"{plain['listener.security.protocol.map']},PROXIED:PLAINTEXT"
            ),
        }

    def info(self) -> dict[str, object]:
        return {
            **super().info(),
            "proxied_listener": self.proxied_listen_port,
            "proxied_bootstrap": f"{HOST}:{self.proxied_port}",
        }
