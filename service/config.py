"""pgcdc's configuration: one validated settings object, read once at start.

Sources, highest priority first: keyword arguments (tests), `PGCDC_*` environment
variables (nested with `__`, e.g. `PGCDC_SOURCE__PORT=5432`), files under the secrets
directory (`PGCDC_SECRETS_DIR`, one file per field such as `source__password`), then the
YAML file given with `--config` / `PGCDC_CONFIG`. Every default works for `pgcdc demo`.

Guarantees: a malformed value fails at start with `ConfigError` naming the dotted field
path (`source.port`) and the problem. Secrets are `SecretStr`: they render as `**********`
in logs, `status` output and `redacted()`.

Secrets and TLS. Every secret can also come from a file named by a `*_file` setting
(`source.password_file`, `kafka.sasl_password_file`, `registry.basic_auth_file`: a
mounted Kubernetes secret), read once at load with one trailing newline dropped; setting
both a secret and its file is an error naming the file setting. The TLS settings of each
connection (`source.sslmode` and `ssl*`, `kafka.security_protocol` and `ssl_*`,
`registry.ca_location`) are checked together at load: a verifying mode without its CA,
a certificate without its key, a TLS file given to a plaintext connection, a file that
cannot be read, and a private key that libpq would refuse for its permissions are each a
`ConfigError` naming the setting to fix. They are checked once, here; the connectors
only translate them into their clients' options.
"""

from __future__ import annotations

import os
import re
import stat
import sys
from contextvars import ContextVar
from pathlib import Path
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ByteSize,
    ConfigDict,
    Field,
    SecretStr,
    ValidationError,
    model_validator,
)
from pydantic_settings import (
    BaseSettings,
    NestedSecretsSettingsSource,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    YamlConfigSettingsSource,
)

from service.errors import ConfigError
from service.wal.bridge import archive_kind, check_restore_command

# The YAML file of the load_settings call in progress (the CLI's --config).
_yaml_file: ContextVar[str | None] = ContextVar("pgcdc_yaml_file", default=None)


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid")


def _secret_from_file(
    value: SecretStr | None, path: Path | None, field: str, file_field: str
) -> SecretStr | None:
    """`value`, or the contents of `path` (one trailing newline dropped, as `kubectl
    create secret --from-file` and editors leave one), never both. An empty value is no
    value: an optional Kubernetes secret key left empty sets the variable to ""."""
    if value is not None and not value.get_secret_value():
        value = None
    if path is None:
        return value
    if value is not None:
        raise ConfigError(
            f"both {field} and {file_field} are set: keep one of them", field=file_field
        )
    try:
        text = path.read_text()
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read {file_field} {path}: {exc}", field=file_field) from exc
    if text.endswith("\n"):
        text = text[:-2] if text.endswith("\r\n") else text[:-1]
    if not text:
        raise ConfigError(f"{file_field} {path} is empty", field=file_field)
    return SecretStr(text)


def _readable_file(path: Path | None, field: str) -> None:
    """A certificate, key or CA file must exist and be readable now: a client library
    would otherwise skip it (libpq ignores a missing sslcert) or fail on every connect."""
    if path is None:
        return
    if not path.is_file():
        raise ConfigError(f"{field} {path} is not a file", field=field)
    if not os.access(path, os.R_OK):
        raise ConfigError(f"{field} {path} is not readable by this process", field=field)


def _pair(cert: Path | None, key: Path | None, cert_field: str, key_field: str) -> None:
    """A client certificate and its key come together."""
    if cert is not None and key is None:
        raise ConfigError(f"{cert_field} is set without {key_field}", field=key_field)
    if key is not None and cert is None:
        raise ConfigError(f"{key_field} is set without {cert_field}", field=cert_field)


def _archive_setting(value: str | None) -> str | None:
    """source.archive checked (service.wal.bridge): a restore command with %f and %p,
    or an existing directory; empty is unset."""
    if value is None or not value.strip():
        return None
    if archive_kind(value) == "command":
        check_restore_command(value)
        return value
    if not Path(value).is_dir():
        raise ConfigError(
            f"source.archive {value!r} is not a directory (a restore command needs %f and "
            "%p, e.g. 'cp /mnt/archive/%f %p')",
            field="source.archive",
        )
    return value


# Characters a libpq connection-string value may hold without quoting.
_CONNINFO_BARE = re.compile(r"^[^\s'\\]+$")


def conninfo_value(value: str) -> str:
    """`value` as libpq's conninfo parser reads it back: bare when it can be, else in
    single quotes with `\\` and `'` escaped (as conninfo_parse expects)."""
    if _CONNINFO_BARE.match(value):
        return value
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


class SourceSettings(_Section):
    """The PostgreSQL server whose WAL is decoded."""

    host: str = "127.0.0.1"
    port: int = Field(5432, ge=1, le=65535)
    user: str = "postgres"
    password: SecretStr | None = None
    # A file holding the password (a mounted secret), instead of `password`.
    password_file: Path | None = None
    dbname: str = "postgres"
    # TLS, for the SQL and the replication connections alike (libpq's settings of the
    # same names). sslmode: disable, allow, prefer (libpq's default: TLS when the
    # server offers it, unverified), require (TLS, unverified), verify-ca (the server's
    # certificate chains to sslrootcert), verify-full (and names `host`).
    sslmode: Literal["disable", "allow", "prefer", "require", "verify-ca", "verify-full"] = "prefer"
    # The CA file (PEM) of verify-ca and verify-full, which need one; "system": the
    # system's trusted roots (libpq 16+, as psycopg2-binary's).
    sslrootcert: Path | None = None
    # A client certificate (PEM) and its private key, for `cert` authentication in
    # pg_hba.conf. libpq refuses a key file that others can read (0600, or 0640 when
    # owned by root, as a Kubernetes secret volume with defaultMode 0440 gives).
    sslcert: Path | None = None
    sslkey: Path | None = None
    slot: str = Field("pgcdc", pattern=r"^[a-z0-9_]{1,63}$")
    # When `host`/`port` is a hot standby (README "Failover"): the primary's address,
    # with the same user, password, dbname and TLS settings. pgcdc then asks the
    # primary for a RUNNING_XACTS record at start (CHECKPOINT on 15,
    # pg_log_standby_snapshot() from 16), which the standby cannot write; without it a
    # first start on a standby waits for the primary's bgwriter, which logs one every
    # 15 s only while the primary writes WAL (indefinitely on an idle primary).
    primary_host: str | None = None
    primary_port: int | None = Field(None, ge=1, le=65535)
    # Where the WAL a lost or recreated slot no longer has can be read (README
    # "Failover"): a directory of archived WAL files, or a restore command in
    # PostgreSQL's restore_command syntax (%f file name, %p where to copy it, %% a
    # literal %). Text holding a % is a command, which needs %f and %p; anything else
    # must be an existing directory. Unset: a gap is a fatal SlotGapError.
    archive: str | None = None
    mode: Literal["stream", "archive"] = "stream"
    archive_dir: Path | None = None
    # Tail the archive directory for new segments instead of stopping at its end.
    archive_follow: bool = False
    # How long the slot may stay active under another walsender before `run` gives up
    # with a fatal error (the other process is a live worker, not a dying one).
    slot_busy_grace_s: float = Field(60.0, ge=0)
    # High availability: while the slot is active under another walsender at start,
    # wait as a standby (/readyz 503, pgcdc_standby 1) for as long as it takes, and
    # take over once it is released. False: exit 1 (SlotBusyError) after
    # slot_busy_grace_s instead. Fencing by transactional.id stays the safety net.
    standby: bool = True
    # Every connection: libpq connect_timeout and TCP keepalives, and statement_timeout
    # on SQL connections, so a stalled server raises instead of blocking forever.
    connect_timeout_s: int = Field(10, ge=1)
    statement_timeout_s: float = Field(60.0, gt=0)
    keepalives_idle_s: int = Field(10, ge=1)
    # Like wal_receiver_timeout: the replication stream reconnects after this long
    # without any message (the walsender sends keepalives well within it).
    receive_timeout_s: float = Field(60.0, gt=0)
    # How long an unreachable source is retried (exponential backoff up to 5 s; for the
    # replication stream up to 30 s) before pgcdc exits 3 (retryable): every connection
    # of every command, and the stream's reconnects; one budget per outage. A refused
    # role or password or a missing database is never retried (exit 1).
    retry_budget_s: float = Field(300.0, gt=0)

    @model_validator(mode="after")
    def _secrets_and_tls(self) -> SourceSettings:
        self.password = _secret_from_file(
            self.password, self.password_file, "source.password", "source.password_file"
        )
        if self.sslmode == "disable":
            for name in ("sslrootcert", "sslcert", "sslkey"):
                if getattr(self, name) is not None:
                    raise ConfigError(
                        f"source.{name} is set but source.sslmode is disable: set sslmode "
                        "to require, verify-ca or verify-full, or remove it",
                        field="source.sslmode",
                    )
        if self.sslmode in ("verify-ca", "verify-full") and self.sslrootcert is None:
            raise ConfigError(
                f"source.sslmode {self.sslmode} verifies the server's certificate and needs "
                "the CA that signed it: set source.sslrootcert to its PEM file (or to "
                "system for the system's trusted roots)",
                field="source.sslrootcert",
            )
        if self.sslrootcert is not None and str(self.sslrootcert) != "system":
            _readable_file(self.sslrootcert, "source.sslrootcert")
        self.archive = _archive_setting(self.archive)
        _pair(self.sslcert, self.sslkey, "source.sslcert", "source.sslkey")
        _readable_file(self.sslcert, "source.sslcert")
        _readable_file(self.sslkey, "source.sslkey")
        if self.sslkey is not None:
            # As libpq's initialize_SSL: a key others may read is refused at every connect.
            st = self.sslkey.stat()
            if (st.st_uid == os.geteuid() and st.st_mode & (stat.S_IRWXG | stat.S_IRWXO)) or (
                st.st_uid == 0 and st.st_mode & (stat.S_IWGRP | stat.S_IXGRP | stat.S_IRWXO)
            ):
                raise ConfigError(
                    f"source.sslkey {self.sslkey} has mode {stat.S_IMODE(st.st_mode):04o}, "
                    "which libpq refuses: make it 0600 (or 0640 owned by root; in "
                    "Kubernetes, defaultMode 0440 with fsGroup)",
                    field="source.sslkey",
                )
        return self

    def primary_dsn(self) -> str | None:
        """The primary's connection string when `primary_host` is set (the standby's
        port when `primary_port` is not), else None."""
        if self.primary_host is None:
            return None
        return self.dsn(host=self.primary_host, port=self.primary_port or self.port)

    def dsn(self, *, host: str | None = None, port: int | None = None) -> str:
        """A libpq connection string (the password included: never log it); `host`
        and `port` replace the configured ones (the primary's, for `primary_dsn`)."""
        parts = [
            f"host={conninfo_value(host or self.host)}",
            f"port={port or self.port}",
            f"user={conninfo_value(self.user)}",
            f"dbname={conninfo_value(self.dbname)}",
            # Every connection (SQL and replication): a stalled server fails the
            # connect or the socket instead of blocking forever (issue 11, defect 2).
            f"connect_timeout={self.connect_timeout_s}",
            "keepalives=1",
            f"keepalives_idle={self.keepalives_idle_s}",
            "keepalives_interval=5",
            "keepalives_count=3",
            f"tcp_user_timeout={self.keepalives_idle_s * 3000}",
            f"sslmode={self.sslmode}",
        ]
        for name in ("sslrootcert", "sslcert", "sslkey"):
            path = getattr(self, name)
            if path is not None:
                parts.append(f"{name}={conninfo_value(str(path))}")
        if self.password is not None:
            parts.append(f"password={conninfo_value(self.password.get_secret_value())}")
        return " ".join(parts)


class DecodingSettings(_Section):
    """The reorder buffer and decoder."""

    # Like logical_decoding_work_mem: memory for buffered changes before spilling/streaming.
    work_mem: ByteSize = Field(ByteSize(64 * 1024 * 1024), ge=64 * 1024)
    # What work_mem bounds. "process": the worker's memory for buffered changes, each
    # change counted with its Python objects as well (so it spills earlier than
    # PostgreSQL would at the same logical_decoding_work_mem); "postgres": exactly
    # ReorderBufferChangeSize's bytes, so the spill and stream counters equal
    # pg_stat_replication_slots' for the same setting.
    memory_accounting: Literal["process", "postgres"] = "process"
    state_dir: Path = Path(".state/worker")
    # Decode prepared transactions at PREPARE instead of at COMMIT PREPARED.
    two_phase: bool = False
    # A captured column of a type pgcdc cannot decode (service.types.unknown), decided
    # at start and whenever a table definition is first used: "fail" stops with an
    # error listing the columns, "omit" leaves them out of every event, "bytes"
    # publishes their stored bytes (Avro bytes, schema parameter __pgcdc.type).
    unknown_types: Literal["fail", "omit", "bytes"] = "fail"

    @model_validator(mode="before")
    @classmethod
    def _removed_option(cls, data: Any) -> Any:
        if isinstance(data, dict) and "unknown_types_as_text" in data:
            raise ValueError(
                "decoding.unknown_types_as_text was removed (it published raw bytes as "
                "text); use decoding.unknown_types: fail | omit | bytes"
            )
        return data


class KafkaSettings(_Section):
    bootstrap_servers: str = "127.0.0.1:19092"
    topic_prefix: str = Field("pgcdc", pattern=r"^[A-Za-z0-9._-]+$")
    # default: "pgcdc-<system identifier>-<database>-<slot>", unique per source
    transactional_id: str | None = None
    # A Kafka transaction commits as soon as the decoder has consumed all the WAL
    # received so far (the stream is idle), or when one of these caps is reached;
    # always at a source-transaction boundary. At most this many source transactions
    # share one Kafka transaction,
    max_batch_txns: int = Field(100, ge=1)
    # ... or this many bytes of records,
    max_batch_bytes: ByteSize = Field(ByteSize(16 * 1024 * 1024), ge=1)
    # ... or it is this old.
    max_batch_age_s: float = Field(0.5, gt=0)
    # The producer's transaction.timeout.ms: one source transaction (however large) is
    # one Kafka transaction and must be published within it, else the worker stops
    # with TransactionTimeoutError. The broker refuses a value above its
    # transaction.max.timeout.ms (default 900000, 15 min): raise both together.
    transaction_timeout_ms: int = Field(900_000, ge=1000)
    # The producer's compression.type: how each record batch is compressed before it
    # leaves the worker (the broker keeps it so with the topic's default
    # compression.type=producer). lz4 costs the producer's I/O thread CPU per byte;
    # none moves bytes to the network and disk instead.
    compression_type: Literal["none", "gzip", "snappy", "lz4", "zstd"] = "lz4"
    # The producer's message.max.bytes: the largest record (key, value and headers, before
    # compression) the worker sends, as the Java producer's max.request.size (1 MiB) bounds
    # Debezium's. A larger one stops the worker with RecordTooLargeError; raise this and
    # the topic's max.message.bytes (or the broker's message.max.bytes) together.
    message_max_bytes: int = Field(1_000_000, ge=1000, le=1_000_000_000)
    tombstones_on_delete: bool = True
    heartbeat_interval_s: float = Field(10.0, gt=0)
    message_prefixes: list[str] = Field(default_factory=list)  # empty: all messages
    # Heartbeats go to "<heartbeat_topic_prefix>.<topic_prefix>", as Debezium's
    # topic.heartbeat.prefix (default "__debezium-heartbeat").
    heartbeat_topic_prefix: str = Field("__debezium-heartbeat", pattern=r"^[A-Za-z0-9._-]+$")
    # Also publish pgcdc's own DDL messages (prefix service.schema.history.DDL_PREFIX) on
    # the message topic as op "m"; off: they only become schema-change events.
    publish_ddl_messages: bool = False
    # How every Kafka client of pgcdc (producer, admin, consumers) connects: PLAINTEXT,
    # SSL (TLS; with ssl_certificate_location, mutual TLS), SASL_PLAINTEXT or SASL_SSL.
    # Unset: SASL_SSL when sasl_username is set, else PLAINTEXT.
    security_protocol: Literal["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"] | None = None
    sasl_mechanism: Literal["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"] = "PLAIN"
    sasl_username: str | None = None
    sasl_password: SecretStr | None = None
    sasl_password_file: Path | None = None  # instead of sasl_password
    # The CA file (PEM) the brokers' certificates must chain to (unset: the system's).
    ssl_ca_location: Path | None = None
    # A client certificate (PEM) and its private key, for brokers that require one.
    ssl_certificate_location: Path | None = None
    ssl_key_location: Path | None = None
    # How long a broker outage is retried (with exponential backoff up to 5 s) before
    # the worker exits 3 (retryable); one budget per outage, not per call.
    retry_budget_s: float = Field(300.0, gt=0)
    # On SIGTERM, how long the source transaction being replayed may take to finish;
    # after that its open Kafka transaction is aborted and the worker exits (a restart
    # decodes it again from the committed restart LSN).
    shutdown_timeout_s: float = Field(5.0, ge=0)

    @property
    def protocol(self) -> str:
        """`security_protocol`, or what it means when unset."""
        if self.security_protocol is not None:
            return self.security_protocol
        return "SASL_SSL" if self.sasl_username is not None else "PLAINTEXT"

    @model_validator(mode="after")
    def _secrets_and_tls(self) -> KafkaSettings:
        self.sasl_password = _secret_from_file(
            self.sasl_password,
            self.sasl_password_file,
            "kafka.sasl_password",
            "kafka.sasl_password_file",
        )
        protocol = self.protocol
        if protocol.startswith("SASL_"):
            if self.sasl_username is None:
                raise ConfigError(
                    f"kafka.security_protocol {protocol} needs kafka.sasl_username",
                    field="kafka.sasl_username",
                )
            if self.sasl_password is None:
                raise ConfigError(
                    f"kafka.security_protocol {protocol} needs kafka.sasl_password "
                    "(or kafka.sasl_password_file)",
                    field="kafka.sasl_password",
                )
        elif self.sasl_username is not None or self.sasl_password is not None:
            raise ConfigError(
                f"SASL credentials are set but kafka.security_protocol is {protocol}: "
                "set it to SASL_SSL (or SASL_PLAINTEXT), or remove them",
                field="kafka.security_protocol",
            )
        files = ("ssl_ca_location", "ssl_certificate_location", "ssl_key_location")
        if not protocol.endswith("SSL"):
            for name in files:
                if getattr(self, name) is not None:
                    raise ConfigError(
                        f"kafka.{name} is set but kafka.security_protocol is {protocol}, "
                        "which does not use TLS: set it to SSL or SASL_SSL",
                        field="kafka.security_protocol",
                    )
        _pair(
            self.ssl_certificate_location,
            self.ssl_key_location,
            "kafka.ssl_certificate_location",
            "kafka.ssl_key_location",
        )
        for name in files:
            _readable_file(getattr(self, name), f"kafka.{name}")
        return self


class RegistrySettings(_Section):
    url: str = "http://127.0.0.1:18081/apis/ccompat/v7"
    basic_auth: SecretStr | None = None  # "user:password"
    basic_auth_file: Path | None = None  # a file holding "user:password", instead
    # The CA file (PEM) an https:// registry's certificate must chain to (unset: the
    # certifi bundle, or SSL_CERT_FILE / SSL_CERT_DIR when set).
    ca_location: Path | None = None
    # How long an unreachable registry is retried (exponential backoff up to 5 s) before
    # the worker exits 3 (retryable). A rejected schema is never retried.
    retry_budget_s: float = Field(300.0, gt=0)

    @model_validator(mode="after")
    def _secrets_and_tls(self) -> RegistrySettings:
        self.basic_auth = _secret_from_file(
            self.basic_auth, self.basic_auth_file, "registry.basic_auth", "registry.basic_auth_file"
        )
        if self.basic_auth is not None and ":" not in self.basic_auth.get_secret_value():
            # The value itself is never repeated: it is a secret.
            raise ConfigError(
                "registry.basic_auth must be user:password (no colon found)",
                field="registry.basic_auth_file"
                if self.basic_auth_file is not None
                else "registry.basic_auth",
            )
        if self.ca_location is not None and not self.url.startswith("https://"):
            raise ConfigError(
                f"registry.ca_location is set but registry.url {self.url} is not https://",
                field="registry.ca_location",
            )
        _readable_file(self.ca_location, "registry.ca_location")
        return self


class MetricsSettings(_Section):
    host: str = "0.0.0.0"
    port: int = Field(9187, ge=0, le=65535)  # 0: pick a free port
    # /healthz turns 503 after this long without progress of the main loop (0: never).
    watchdog_s: float = Field(300.0, ge=0)


class SnapshotSettings(_Section):
    """Snapshots of existing rows (the table snapshot: service.tablesnap, connectors.tablesnap)."""

    # initial: snapshot every captured table at the first start; initial_and_new_tables:
    # also, at a later start, every table the filters newly capture; never: stream only.
    mode: Literal["initial", "initial_and_new_tables", "never"] = "initial"
    # Allow a new start (a new snapshot with mode `initial`) where the stored state
    # cannot be resumed: offsets lost while the schema history remains, or a slot that
    # no longer covers the stored offsets. Valid offsets are resumed all the same.
    fresh_start: bool = False
    # How the initial snapshot is read (connectors.tablesnap.export, .snapshotter).
    # blocking: decoding paused at the consistent point; `parallelism` readers share the
    # aligned snapshot (pg_export_snapshot / SET TRANSACTION SNAPSHOT); one Kafka
    # transaction per chunk with its progress record, so no size limit. Every r of a
    # table comes before any change of it; after a restart mid-snapshot the unfinished
    # tables are finished by watermarks, where a row may get c/u/d before its r.
    # chunked: chunks between DBLog watermarks while streaming goes on, each committed
    # with a progress record (resumable; a row changed meanwhile may get c/u/d before
    # its r). On-demand snapshots (`pgcdc snapshot`, signals) are always chunked.
    method: Literal["chunked", "blocking"] = "blocking"
    chunk_rows: int = Field(20_000, ge=1)
    # A chunk's field bytes at most; with more than three readers, chunk_bytes * 3 /
    # parallelism each (connectors.tablesnap.snapshotter.chunk_budget).
    chunk_bytes: ByteSize = Field(ByteSize(8 * 1024 * 1024), ge=64 * 1024)
    rate_limit_rows_per_s: float = Field(0.0, ge=0)  # 0: no limit
    # Reader connections: sharing one exported snapshot (blocking initial snapshot) or
    # each reading its own chunks between watermarks (chunked, on demand).
    parallelism: int = Field(1, ge=1, le=16)
    # Consume the `<prefix>.signals` Kafka topic for snapshot signals.
    kafka_signals: bool = True


class FilterSettings(_Section):
    include_schemas: list[str] = Field(default_factory=list)
    exclude_schemas: list[str] = Field(default_factory=lambda: ["pgcdc"])
    include_tables: list[str] = Field(default_factory=list)  # "schema.table"
    exclude_tables: list[str] = Field(default_factory=list)
    exclude_columns: list[str] = Field(default_factory=list)  # "schema.table.column"


class ToastSettings(_Section):
    """How an UPDATE's unchanged out-of-line (TOAST) value is published (issue 32).

    `unchanged = fill`: the value is published whole, from the TOAST chunks pgcdc saw
    in the WAL (a cache of `cache_bytes`) or read from the TOAST table; the physical
    slot holds back VACUUM (hot-standby feedback xmin) for at most `max_hold_s` so
    those chunks are still there. `placeholder`: Debezium's
    `__debezium_unavailable_value`, no reads and no hold.
    """

    unchanged: Literal["fill", "placeholder"] = "fill"
    # Past this age the xmin hold is released (VACUUM may remove the chunks of values
    # pgcdc has not read yet; those fall back to the placeholder, counted).
    max_hold_s: float = Field(600.0, gt=0)
    # The bound of the cache of TOAST values seen in the WAL (least recently used
    # values are evicted, never spilled: a miss reads the TOAST table).
    cache_bytes: ByteSize = Field(ByteSize(32 * 1024 * 1024), ge=0)
    # The most changes waiting for one batched TOAST-table read.
    batch_changes: int = Field(256, ge=1, le=100_000)


class LogSettings(_Section):
    level: Literal["debug", "info", "warning", "error"] = "info"
    format: Literal["auto", "json", "console"] = "auto"  # auto: console on a TTY, else JSON


class Settings(BaseSettings):
    """The whole configuration. See deploy/config.example.yaml for every option."""

    model_config = SettingsConfigDict(
        env_prefix="PGCDC_", env_nested_delimiter="__", extra="forbid", yaml_file=None
    )

    source: SourceSettings = Field(default_factory=SourceSettings)
    decoding: DecodingSettings = Field(default_factory=DecodingSettings)
    kafka: KafkaSettings = Field(default_factory=KafkaSettings)
    registry: RegistrySettings = Field(default_factory=RegistrySettings)
    metrics: MetricsSettings = Field(default_factory=MetricsSettings)
    snapshot: SnapshotSettings = Field(default_factory=SnapshotSettings)
    filters: FilterSettings = Field(default_factory=FilterSettings)
    toast: ToastSettings = Field(default_factory=ToastSettings)
    log: LogSettings = Field(default_factory=LogSettings)

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        sources: list[PydanticBaseSettingsSource] = [init_settings, env_settings]
        secrets_dir = os.environ.get("PGCDC_SECRETS_DIR")
        if secrets_dir:
            # One file per field, named like the env var without its prefix:
            # `source__password`, `kafka__sasl_password` (Kubernetes secret volumes).
            sources.append(
                NestedSecretsSettingsSource(
                    file_secret_settings,
                    secrets_dir=secrets_dir,
                    secrets_nested_delimiter="__",
                    secrets_prefix="",
                )
            )
        yaml_path = _yaml_file.get() or os.environ.get("PGCDC_CONFIG")
        if yaml_path:
            sources.append(YamlConfigSettingsSource(settings_cls, yaml_file=yaml_path))
        return tuple(sources)

    @property
    def transactional_id(self) -> str:
        return self.kafka.transactional_id or f"pgcdc-{self.source.slot}"

    def redacted(self) -> dict[str, Any]:
        """The settings as plain data with every secret masked (for status and logs)."""
        return self.model_dump(mode="json")


def _yaml_errors() -> tuple[type[Exception], ...]:
    """yaml's error class once a settings file has made something import yaml (nothing of
    it can be raised before)."""
    module = sys.modules.get("yaml")
    return (module.YAMLError,) if module is not None else ()


def _check_yaml_shape(path: str | None) -> None:
    """A settings file is a mapping of sections: an empty file or a list is an error
    naming the file (pydantic-settings would take the first for "all defaults" and
    fail on the second with a message that names neither the file nor the problem)."""
    if not path:
        return
    import yaml  # noqa: PLC0415  (only with a settings file: a worker set by the environment starts ~60 ms sooner)

    try:
        data = yaml.safe_load(Path(path).read_text())
    except (OSError, yaml.YAMLError) as exc:
        raise ConfigError(
            f"cannot read configuration file {path}: {exc}", field="--config"
        ) from exc
    if not isinstance(data, dict):
        what = "empty" if data is None else f"a {type(data).__name__}, not a mapping"
        raise ConfigError(
            f"configuration file {path} is {what}: it must map section names "
            "(source, kafka, ...) to their settings",
            field="--config",
        )


def load_settings(config_file: Path | None = None, **overrides: Any) -> Settings:
    """Read and validate the configuration, or raise ConfigError naming the field."""
    if config_file is not None and not config_file.is_file():
        raise ConfigError(f"configuration file {config_file} does not exist", field="--config")
    token = _yaml_file.set(str(config_file) if config_file is not None else None)
    try:
        _check_yaml_shape(_yaml_file.get() or os.environ.get("PGCDC_CONFIG"))
        return Settings(**overrides)
    except ValidationError as exc:
        first = exc.errors()[0]
        field = ".".join(str(p) for p in first["loc"]) or "<root>"
        problems = "; ".join(
            f"{'.'.join(str(p) for p in err['loc']) or '<root>'}: {err['msg']}"
            for err in exc.errors()
        )
        raise ConfigError(f"invalid configuration: {problems}", field=field) from exc
    except Exception as exc:  # unreadable or unparsable YAML; anything else propagates
        if not isinstance(exc, (OSError, ValueError, *_yaml_errors())):
            raise
        raise ConfigError(f"cannot read configuration: {exc}", field="--config") from exc
    finally:
        _yaml_file.reset(token)
