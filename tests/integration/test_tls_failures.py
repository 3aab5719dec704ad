"""TLS and authentication failures against the real TLS instances (deploy/local/svc_tls.py):
each is fatal at once and names the setting to fix.

For every connection pgcdc opens, a configuration the server can never accept must not
be retried for the retry budget (five minutes here, as by default): the source's SQL
connection (`connectors.postgres.server.connect`) and its replication connection
(`connectors.postgres.stream.PhysicalStream`), the Kafka sink's start
(`connectors.kafka.sink.KafkaSink.start`, which every other Kafka client of the worker
follows) and the schema registry client (`connectors.avro.plugin.Registrar`). Each case
asserts the error type, its `field`, and that it came within seconds.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from connectors.avro.plugin import Registrar
from connectors.kafka.sink import KafkaSink
from connectors.postgres.server import connect
from connectors.postgres.stream import PhysicalStream
from service.config import load_settings
from service.errors import (
    KafkaAuthError,
    PgcdcError,
    RegistryAuthError,
    SourceAuthError,
    TlsError,
)
from tests.integration.tls_support import (
    ForeignCa,
    KafkaAuth,
    Wiring,
    changed,
    foreign_ca,
    kafka_section,
    registry_section,
    source_section,
)

pytestmark = pytest.mark.integration

BUDGET_S = 300.0  # what each retry budget allows: the failures must come long before
FAST_S = 15.0


@pytest.fixture
def foreign(tmp_path: Path) -> ForeignCa:
    return foreign_ca(tmp_path)


def _resolve(change: dict[str, Any], foreign: ForeignCa) -> dict[str, Any]:
    """`change` with the FOREIGN_* placeholders replaced by the foreign CA's files."""
    files = {
        "FOREIGN_CA": str(foreign.ca),
        "FOREIGN_CERT": str(foreign.client_cert),
        "FOREIGN_KEY": str(foreign.client_key),
    }
    return {k: files.get(v, v) if isinstance(v, str) else v for k, v in change.items()}


def _expect(fn: Any, error: type[PgcdcError], field: str) -> None:
    began = time.monotonic()
    with pytest.raises(error) as info:
        fn()
    took = time.monotonic() - began
    assert info.value.field == field, str(info.value)
    assert took < FAST_S, f"{error.__name__} after {took:.1f}s"


# --- PostgreSQL: the SQL and the replication connection ------------------------------

SCRAM = Wiring("scram", "mTLS", "files")
CERT = Wiring("cert", "mTLS", "files")
SOURCE_CASES = [
    # (wiring, changes to its source settings, error, field)
    (SCRAM, {"sslmode": "disable", "sslrootcert": None}, TlsError, "source.sslmode"),
    (SCRAM, {"sslrootcert": "FOREIGN_CA"}, TlsError, "source.sslrootcert"),
    (CERT, {"sslcert": None, "sslkey": None}, TlsError, "source.sslcert"),
    (CERT, {"sslcert": "FOREIGN_CERT", "sslkey": "FOREIGN_KEY"}, TlsError, "source.sslcert"),
    (SCRAM, {"password_file": None, "password": "not-it"}, SourceAuthError, "source.password"),
]
SOURCE_IDS = ["plaintext", "wrong-ca", "no-client-cert", "foreign-client-cert", "wrong-password"]


@pytest.mark.parametrize(("wiring", "change", "error", "field"), SOURCE_CASES, ids=SOURCE_IDS)
def test_source_failures_are_fatal_at_once(
    tls_pg: dict[str, Any],
    foreign: ForeignCa,
    wiring: Wiring,
    change: dict[str, Any],
    error: type[PgcdcError],
    field: str,
) -> None:
    """A TLS-only source refuses a plaintext connection, a wrong CA fails verification, a
    missing or foreign client certificate and a wrong password are refused: on the SQL
    connection and on the replication connection alike, each is its fatal error naming
    the setting, although source.retry_budget_s would allow five minutes."""
    source = changed(source_section(wiring, tls_pg), _resolve(change, foreign))
    dsn = load_settings(source=source | {"retry_budget_s": BUDGET_S}).source.dsn()
    _expect(lambda: connect(dsn, "pgcdc-tls-test", retry_budget_s=BUDGET_S), error, field)
    stream = PhysicalStream(dsn, "pgcdc_tls_never_created", retry_budget_s=BUDGET_S)
    _expect(lambda: next(stream.chunks(idle_timeout=1.0)), error, field)


@pytest.mark.parametrize("wiring", [SCRAM, CERT], ids=["scram", "cert"])
def test_source_connections_of_the_wirings_use_tls(tls_pg: dict[str, Any], wiring: Wiring) -> None:
    """Without the faults the same wirings connect, encrypted, as their role (so the cases
    above fail for their fault, not for the wiring)."""
    settings = load_settings(source=source_section(wiring, tls_pg))
    conn = connect(settings.source.dsn(), "pgcdc-tls-test")
    try:
        with conn.cursor() as cur:
            cur.execute("SELECT ssl, current_user FROM pg_stat_ssl WHERE pid = pg_backend_pid()")
            assert cur.fetchone() == (True, settings.source.user)
    finally:
        conn.close()


# --- Kafka: the sink's start, before any client does anything --------------------------

NO_TLS_FILES = {"ssl_ca_location": None, "ssl_certificate_location": None, "ssl_key_location": None}
FOREIGN_PAIR = {"ssl_certificate_location": "FOREIGN_CERT", "ssl_key_location": "FOREIGN_KEY"}
NO_PAIR = {"ssl_certificate_location": None, "ssl_key_location": None}
WRONG_PASSWORD = {"sasl_password_file": None, "sasl_password": "not-it"}
PLAINTEXT = {"security_protocol": "PLAINTEXT"} | NO_TLS_FILES
SASL_PLAINTEXT = {"security_protocol": "SASL_PLAINTEXT"} | NO_TLS_FILES
KAFKA_CASES = [
    # (wiring, changes to its kafka settings, error, field)
    ("mTLS", PLAINTEXT, TlsError, "kafka.security_protocol"),
    ("SCRAM-SHA-512", SASL_PLAINTEXT, TlsError, "kafka.security_protocol"),
    ("mTLS", {"ssl_ca_location": "FOREIGN_CA"}, TlsError, "kafka.ssl_ca_location"),
    ("mTLS", NO_PAIR, TlsError, "kafka.ssl_certificate_location"),
    ("mTLS", FOREIGN_PAIR, TlsError, "kafka.ssl_certificate_location"),
    ("SCRAM-SHA-512", WRONG_PASSWORD, KafkaAuthError, "kafka.sasl_password"),
    ("PLAIN", WRONG_PASSWORD, KafkaAuthError, "kafka.sasl_password"),
    ("SCRAM-SHA-512", {"sasl_mechanism": "SCRAM-SHA-256"}, KafkaAuthError, "kafka.sasl_mechanism"),
]  # fmt: skip
KAFKA_IDS = [
    "plaintext-to-ssl",
    "sasl-plaintext-to-sasl-ssl",
    "wrong-ca",
    "no-client-cert",
    "foreign-client-cert",
    "wrong-scram-password",
    "wrong-plain-password",
    "mechanism-not-offered",
]


@pytest.mark.parametrize(("wiring", "change", "error", "field"), KAFKA_CASES, ids=KAFKA_IDS)
def test_kafka_failures_are_fatal_at_once(
    tls_kafka: dict[str, Any],
    foreign: ForeignCa,
    wiring: KafkaAuth,
    change: dict[str, Any],
    error: type[PgcdcError],
    field: str,
) -> None:
    """Plaintext against TLS listeners, a wrong CA, a missing or foreign client
    certificate, a wrong SASL password (SCRAM and PLAIN) and a mechanism the broker does
    not offer stop the sink's start with the fatal error naming the setting, within
    seconds although kafka.retry_budget_s would allow five minutes."""
    kafka = changed(
        kafka_section(Wiring("scram", wiring, "files"), tls_kafka), _resolve(change, foreign)
    )
    kafka |= {"retry_budget_s": BUDGET_S, "topic_prefix": "pgcdc_tls_test"}
    settings = load_settings(kafka=kafka)
    sink = KafkaSink(settings, retry_budget_s=BUDGET_S)
    _expect(sink.start, error, field)


# --- the schema registry ---------------------------------------------------------------

SCHEMA = {"type": "record", "name": "Probe", "fields": [{"name": "a", "type": "int"}]}


@pytest.mark.parametrize(
    ("change", "error", "field"),
    [
        ({"ca_location": "FOREIGN_CA"}, TlsError, "registry.ca_location"),
        ({"url": "HTTP", "ca_location": None}, TlsError, "registry.url"),
        (
            {"basic_auth_file": None, "basic_auth": "pgcdc:not-the-password"},
            RegistryAuthError,
            "registry.basic_auth",
        ),
    ],
    ids=["wrong-ca", "http-to-https", "wrong-password"],
)
def test_registry_failures_are_fatal_at_once(
    tls_registry: dict[str, Any],
    foreign: ForeignCa,
    tmp_path: Path,
    change: dict[str, Any],
    error: type[PgcdcError],
    field: str,
) -> None:
    """A registry certificate the configured CA did not sign, an http:// URL to the
    HTTPS-only registry and a wrong basic-auth password stop the first registration
    with the fatal error naming the setting, not after registry.retry_budget_s."""
    registry = registry_section(SCRAM, tls_registry, tmp_path)
    if change.get("url") == "HTTP":
        change = change | {"url": registry["url"].replace("https:", "http:")}
    registry = changed(registry, _resolve(change, foreign))
    settings = load_settings(registry=registry)
    registrar = Registrar(settings, retry_budget_s=BUDGET_S)
    try:
        _expect(lambda: registrar.serializer("pgcdc_tls_test.t", False, SCHEMA), error, field)
    finally:
        registrar.close()


def test_registry_over_https_with_basic_auth_registers(
    tls_registry: dict[str, Any], tmp_path: Path
) -> None:
    """With the CA and the basic-auth file the same registry accepts a registration (the
    cases above fail for their fault only)."""
    registry = registry_section(SCRAM, tls_registry, tmp_path)
    registrar = Registrar(load_settings(registry=registry), retry_budget_s=BUDGET_S)
    try:
        encode = registrar.serializer("pgcdc_tls_test.ok", False, SCHEMA)
        assert encode({"a": 1})[:1] == b"\x00"  # the Confluent wire format's magic byte
    finally:
        registrar.close()


# --- TLS clients facing plaintext servers -----------------------------------------------


def test_tls_clients_facing_plaintext_servers_are_fatal_at_once(
    pg15: dict[str, Any], kafka: dict[str, Any], registry: dict[str, Any]
) -> None:
    """sslmode=require against the shared source (no TLS), SSL against the shared Kafka's
    plaintext listener and https:// against the shared plaintext registry each stop at
    once, naming the setting (only failed connection attempts reach those servers)."""
    source = {"host": pg15["host"], "port": pg15["port"], "sslmode": "require"}
    dsn = load_settings(source=source).source.dsn()
    _expect(lambda: connect(dsn, "pgcdc-tls-test", retry_budget_s=BUDGET_S), TlsError,
            "source.sslmode")  # fmt: skip
    broker = {
        "bootstrap_servers": kafka["bootstrap"],
        "security_protocol": "SSL",
        "retry_budget_s": BUDGET_S,
        "topic_prefix": "pgcdc_tls_test",
    }
    sink = KafkaSink(load_settings(kafka=broker), retry_budget_s=BUDGET_S)
    _expect(sink.start, TlsError, "kafka.security_protocol")
    url = str(registry["url"]).replace("http:", "https:")
    registrar = Registrar(load_settings(registry={"url": url}), retry_budget_s=BUDGET_S)
    try:
        _expect(
            lambda: registrar.serializer("pgcdc_tls_test.t", False, SCHEMA),
            TlsError,
            "registry.url",
        )
    finally:
        registrar.close()
