"""Helpers for the TLS tests: pgcdc's settings for the TLS instances, a foreign CA, and a
pipeline wired over TLS on all three connections.

The TLS instances (tls-pg15/tls-pg18, tls-kafka, tls-registry: deploy/local/svc_tls.py)
trust one test CA and name in their `info()` the CA, the client certificate and key,
and the files holding their passwords. `Wiring` says how one pipeline authenticates on
each connection; `sections(...)` turns that into pgcdc's settings, one dict per section,
which `env(...)` writes as `PGCDC_<SECTION>__<FIELD>` variables for a `pgcdc run`
subprocess and `load_settings(**sections)` reads in the test process, so both sides
connect alike.

`foreign_ca(dir)` makes, with the `cryptography` package, a CA the servers do not trust
and a client certificate (CN pgcdc_cert) signed by it: the wrong CA of the failure tests.
"""

from __future__ import annotations

import datetime
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.x509.oid import NameOID

from service.config import Settings, load_settings
from tests.integration.pipeline_kafka_support import Pipeline, unique

PgAuth = Literal["scram", "cert"]
KafkaAuth = Literal["SCRAM-SHA-512", "PLAIN", "mTLS"]


@dataclass(frozen=True)
class Wiring:
    """How one pipeline authenticates: on PostgreSQL by SCRAM password or client
    certificate, on Kafka by SASL (SCRAM-SHA-512 or PLAIN over TLS) or client certificate
    (mTLS), on the registry by basic auth over HTTPS; each secret from a `*_file`
    setting or from the environment (`PGCDC_*`)."""

    pg: PgAuth
    kafka: KafkaAuth
    secrets_from: Literal["files", "env"]

    @property
    def id(self) -> str:
        return f"pg-{self.pg}-kafka-{self.kafka}-secrets-{self.secrets_from}"


def secret(info: dict[str, Any]) -> str:
    """The password of a TLS instance (its `password_file`, as svc_tls wrote it)."""
    return Path(info["password_file"]).read_text().strip()


def source_section(wiring: Wiring, pg: dict[str, Any]) -> dict[str, Any]:
    """pgcdc's `source` settings for `wiring` (no database or slot)."""
    source: dict[str, Any] = {
        "host": pg["host"],
        "port": pg["port"],
        "sslmode": "verify-full",
        "sslrootcert": pg["ca"],
    }
    if wiring.pg == "cert":
        return source | {
            "user": pg["cert_user"],
            "sslcert": pg["client_cert"],
            "sslkey": pg["client_key"],
        }
    source["user"] = "postgres"
    if wiring.secrets_from == "files":
        return source | {"password_file": pg["password_file"]}
    return source | {"password": secret(pg)}


def kafka_section(wiring: Wiring, kafka: dict[str, Any]) -> dict[str, Any]:
    """pgcdc's `kafka` settings for `wiring` (no topic prefix)."""
    broker: dict[str, Any] = {"ssl_ca_location": kafka["ca"]}
    if wiring.kafka == "mTLS":
        return broker | {
            "bootstrap_servers": kafka["bootstrap"],
            "security_protocol": "SSL",
            "ssl_certificate_location": kafka["client_cert"],
            "ssl_key_location": kafka["client_key"],
        }
    broker |= {
        "bootstrap_servers": kafka["sasl_bootstrap"],
        "security_protocol": "SASL_SSL",
        "sasl_mechanism": wiring.kafka,
        "sasl_username": kafka["sasl_user"],
    }
    if wiring.secrets_from == "files":
        return broker | {"sasl_password_file": kafka["password_file"]}
    return broker | {"sasl_password": secret(kafka)}


def registry_section(wiring: Wiring, registry: dict[str, Any], workdir: Path) -> dict[str, Any]:
    """pgcdc's `registry` settings for `wiring`; with secrets from files, the
    `user:password` file is written into `workdir`, as a Kubernetes secret would be."""
    out: dict[str, Any] = {"url": registry["url"], "ca_location": registry["ca"]}
    basic_auth = f"{registry['user']}:{secret(registry)}"
    if wiring.secrets_from == "files":
        auth = workdir / "registry-basic-auth"
        auth.write_text(basic_auth + "\n")
        auth.chmod(0o600)
        return out | {"basic_auth_file": str(auth)}
    return out | {"basic_auth": basic_auth}


def sections(
    wiring: Wiring,
    pg: dict[str, Any],
    kafka: dict[str, Any],
    registry: dict[str, Any],
    workdir: Path,
) -> dict[str, dict[str, Any]]:
    """pgcdc's `source`, `kafka` and `registry` settings for `wiring`."""
    return {
        "source": source_section(wiring, pg),
        "kafka": kafka_section(wiring, kafka),
        "registry": registry_section(wiring, registry, workdir),
    }


def changed(section: dict[str, Any], change: dict[str, Any]) -> dict[str, Any]:
    """`section` with `change` applied; a None value removes the setting."""
    merged = {**section, **change}
    return {k: v for k, v in merged.items() if v is not None}


def env(settings_sections: dict[str, dict[str, Any]]) -> dict[str, str]:
    """The sections as `PGCDC_<SECTION>__<FIELD>` environment variables."""
    return {
        f"PGCDC_{section.upper()}__{name.upper()}": str(value)
        for section, values in settings_sections.items()
        for name, value in values.items()
    }


@dataclass
class TlsPipeline(Pipeline):
    """A `Pipeline` whose worker and readers connect as `wiring` says (module docstring).
    The test's own SQL (database, setup, workload) uses the instance's `dsn`: postgres
    by SCRAM with sslmode=verify-full."""

    wiring: Wiring = Wiring("scram", "SCRAM-SHA-512", "files")
    overrides: dict[str, dict[str, Any]] = field(default_factory=dict)

    def sections(self) -> dict[str, dict[str, Any]]:
        out = sections(self.wiring, self.pg, self.kafka, self.registry, self.state_dir)
        out["source"] |= {"dbname": self.db, "slot": self.slot}
        out["kafka"] |= {"topic_prefix": self.prefix}
        for section, values in self.overrides.items():
            out[section] = changed(out[section], values)
        return out

    def env(self) -> dict[str, str]:
        return {**super().env(), **env(self.sections())}

    def settings(self) -> Settings:
        return load_settings(**self.sections())


@contextmanager
def tls_pipeline(
    pg: dict[str, Any],
    kafka: dict[str, Any],
    registry: dict[str, Any],
    name: str,
    ddl: Sequence[str],
    **options: Any,
) -> Iterator[TlsPipeline]:
    """A created `TlsPipeline`, dropped (workers killed, slot and database gone) at exit."""
    p = TlsPipeline(pg, kafka, registry, unique(name), **options)
    try:
        p.create(ddl)
        yield p
    finally:
        p.drop()


@dataclass(frozen=True)
class ForeignCa:
    """A CA no TLS instance trusts, and a client certificate it signed."""

    ca: Path
    client_cert: Path
    client_key: Path


def _name(cn: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])


def foreign_ca(directory: Path) -> ForeignCa:
    """Write a foreign CA and a client certificate (CN pgcdc_cert) into `directory`."""
    now = datetime.datetime.now(datetime.UTC)
    ca_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    ca = (
        x509.CertificateBuilder()
        .subject_name(_name("foreign test CA"))
        .issuer_name(_name("foreign test CA"))
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(ca_key, hashes.SHA256())
    )
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    cert = (
        x509.CertificateBuilder()
        .subject_name(_name("pgcdc_cert"))
        .issuer_name(ca.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .sign(ca_key, hashes.SHA256())
    )
    out = ForeignCa(
        directory / "foreign-ca.pem", directory / "foreign-client.pem", directory / "foreign.key"
    )
    out.ca.write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    out.client_cert.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    out.client_key.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    out.client_key.chmod(0o600)  # libpq refuses a key others can read
    return out
