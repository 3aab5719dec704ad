"""TLS and secret settings: checked together at load, errors naming the setting to fix,
secrets read from `*_file` settings, and the libpq connection string they make."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from psycopg2.extensions import parse_dsn

from service.config import load_settings
from service.errors import ConfigError


@pytest.fixture
def pem(tmp_path: Path) -> dict[str, str]:
    """Files standing in for a CA, a certificate and a key (their contents are the
    client libraries' business; the settings check only that they can be read)."""
    files = {}
    for name in ("ca.pem", "client.pem", "client.key"):
        path = tmp_path / name
        path.write_text(f"-----BEGIN {name}-----\n")
        path.chmod(0o600)
        files[name] = str(path)
    return files


def _field(**sections: Any) -> str | None:
    with pytest.raises(ConfigError) as info:
        load_settings(**sections)
    return info.value.field


# --- source -----------------------------------------------------------------------------


def test_verifying_sslmode_needs_its_ca(pem: dict[str, str]) -> None:
    """verify-ca and verify-full without sslrootcert name source.sslrootcert; with it (or
    with libpq's `system`) they load and reach the connection string."""
    for mode in ("verify-ca", "verify-full"):
        assert _field(source={"sslmode": mode}) == "source.sslrootcert"
    s = load_settings(source={"sslmode": "verify-full", "sslrootcert": pem["ca.pem"]})
    dsn = parse_dsn(s.source.dsn())
    assert (dsn["sslmode"], dsn["sslrootcert"]) == ("verify-full", pem["ca.pem"])
    system = load_settings(source={"sslmode": "verify-full", "sslrootcert": "system"})
    assert parse_dsn(system.source.dsn())["sslrootcert"] == "system"


def test_default_sslmode_is_libpqs(pem: dict[str, str]) -> None:
    """Unset, sslmode is libpq's own default (prefer), written into the DSN explicitly."""
    assert parse_dsn(load_settings().source.dsn())["sslmode"] == "prefer"


@pytest.mark.parametrize(
    ("source", "field"),
    [
        ({"sslcert": "client.pem"}, "source.sslkey"),
        ({"sslkey": "client.key"}, "source.sslcert"),
        ({"sslmode": "disable", "sslrootcert": "ca.pem"}, "source.sslmode"),
        ({"sslmode": "disable", "sslcert": "client.pem", "sslkey": "client.key"}, "source.sslmode"),
        ({"sslmode": "verify-full", "sslrootcert": "missing.pem"}, "source.sslrootcert"),
        ({"sslcert": "client.pem", "sslkey": "missing.key"}, "source.sslkey"),
        ({"password": "x", "password_file": "ca.pem"}, "source.password_file"),
        ({"password_file": "missing"}, "source.password_file"),
    ],
)
def test_source_tls_errors_name_the_setting(
    tmp_path: Path, pem: dict[str, str], source: dict[str, str], field: str
) -> None:
    """A certificate without its key (or the reverse), TLS files with sslmode disable, a
    file that is not there, and a password given twice each name the setting to fix."""
    resolved = {
        k: (str(tmp_path / v) if k.startswith(("ssl", "password_f")) and k != "sslmode" else v)
        for k, v in source.items()
    }
    assert _field(source=resolved) == field


def test_client_key_readable_by_others_is_refused(pem: dict[str, str]) -> None:
    """A client key others can read is refused at load, as libpq would refuse it at every
    connect; 0600 loads and both files reach the connection string."""
    key = Path(pem["client.key"])
    key.chmod(0o644)
    assert _field(source={"sslcert": pem["client.pem"], "sslkey": str(key)}) == "source.sslkey"
    key.chmod(0o600)
    s = load_settings(source={"sslcert": pem["client.pem"], "sslkey": str(key)})
    dsn = parse_dsn(s.source.dsn())
    assert (dsn["sslcert"], dsn["sslkey"]) == (pem["client.pem"], str(key))


def test_password_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """source.password_file (here from the environment, as a Kubernetes pod sets it) is
    read once with its trailing newline dropped; it never shows in redacted output; an
    empty file is an error naming it."""
    secret = tmp_path / "pg-password"
    secret.write_text("s3cret with space\n")
    monkeypatch.setenv("PGCDC_SOURCE__PASSWORD_FILE", str(secret))
    s = load_settings()
    assert s.source.password is not None
    assert s.source.password.get_secret_value() == "s3cret with space"
    assert parse_dsn(s.source.dsn())["password"] == "s3cret with space"
    assert "s3cret" not in str(s.redacted())
    secret.write_text("")
    assert _field() == "source.password_file"


@pytest.mark.parametrize("value", ["plain", "a b", "it's", "back\\slash", "x=y 'q'", " "])
def test_dsn_values_survive_libpq_quoting(value: str) -> None:
    """Passwords and names with spaces, quotes and backslashes read back unchanged."""
    s = load_settings(source={"password": value, "dbname": f"db {value}", "user": value})
    dsn = parse_dsn(s.source.dsn())
    assert (dsn["password"], dsn["dbname"], dsn["user"]) == (value, f"db {value}", value)


def test_empty_secrets_are_unset() -> None:
    """An empty secret (an optional Kubernetes secret key left empty) is no secret: no
    password in the DSN, and no SASL or basic-auth credentials that would need a
    protocol or a user."""
    s = load_settings(
        source={"password": ""}, kafka={"sasl_password": ""}, registry={"basic_auth": ""}
    )
    assert "password" not in parse_dsn(s.source.dsn())
    assert (s.source.password, s.kafka.sasl_password, s.registry.basic_auth) == (None,) * 3


# --- kafka ------------------------------------------------------------------------------


def test_kafka_protocol_defaults_keep_their_meaning() -> None:
    """Unset, the protocol is PLAINTEXT, or SASL_SSL once a SASL user is set (as before
    security_protocol existed)."""
    assert load_settings().kafka.protocol == "PLAINTEXT"
    sasl = load_settings(kafka={"sasl_username": "u", "sasl_password": "p"})
    assert sasl.kafka.protocol == "SASL_SSL"


SSL = {"security_protocol": "SSL"}
KAFKA_CASES = [
    ({"security_protocol": "SASL_SSL"}, "kafka.sasl_username"),
    ({"security_protocol": "SASL_SSL", "sasl_username": "u"}, "kafka.sasl_password"),
    ({"sasl_username": "u"}, "kafka.sasl_password"),
    (SSL | {"sasl_username": "u"}, "kafka.security_protocol"),
    ({"security_protocol": "PLAINTEXT", "ssl_ca_location": "ca.pem"}, "kafka.security_protocol"),
    (SSL | {"ssl_certificate_location": "client.pem"}, "kafka.ssl_key_location"),
    (SSL | {"ssl_key_location": "client.key"}, "kafka.ssl_certificate_location"),
    (SSL | {"ssl_ca_location": "missing.pem"}, "kafka.ssl_ca_location"),
    (
        {"sasl_username": "u", "sasl_password": "p", "sasl_password_file": "ca.pem"},
        "kafka.sasl_password_file",
    ),
]


@pytest.mark.parametrize(("kafka", "field"), KAFKA_CASES)
def test_kafka_security_errors_name_the_setting(
    tmp_path: Path, pem: dict[str, str], kafka: dict[str, str], field: str
) -> None:
    """SASL without credentials, credentials or TLS files for a protocol that has no use
    for them, half a client certificate, a missing file and a password given twice."""
    resolved = {
        k: (str(tmp_path / v) if k.endswith(("_location", "_file")) else v)
        for k, v in kafka.items()
    }
    assert _field(kafka=resolved) == field


def test_kafka_password_file(tmp_path: Path) -> None:
    """kafka.sasl_password_file is read (trailing newline dropped) and masked."""
    secret = tmp_path / "kafka-password"
    secret.write_text("k4fka\r\n")
    s = load_settings(
        kafka={"security_protocol": "SASL_SSL", "sasl_username": "u", "sasl_password_file": secret}
    )
    assert s.kafka.sasl_password is not None
    assert s.kafka.sasl_password.get_secret_value() == "k4fka"
    assert "k4fka" not in str(s.redacted())


# --- registry ---------------------------------------------------------------------------


def test_registry_settings(tmp_path: Path, pem: dict[str, str]) -> None:
    """A CA file needs an https:// URL; basic auth must be user:password, and the error
    does not repeat the value; basic_auth_file is read and masked."""
    assert _field(registry={"ca_location": pem["ca.pem"]}) == "registry.ca_location"
    with pytest.raises(ConfigError) as info:
        load_settings(registry={"basic_auth": "no-colon-secret"})
    assert info.value.field == "registry.basic_auth"
    assert "no-colon-secret" not in str(info.value)
    auth = tmp_path / "basic-auth"
    auth.write_text("pgcdc:r3gistry\n")
    s = load_settings(
        registry={
            "url": "https://registry:8443/apis/ccompat/v7",
            "ca_location": pem["ca.pem"],
            "basic_auth_file": str(auth),
        }
    )
    assert s.registry.basic_auth is not None
    assert s.registry.basic_auth.get_secret_value() == "pgcdc:r3gistry"
    assert "r3gistry" not in str(s.redacted())
    auth.write_text("no colon\n")
    assert _field(registry={"basic_auth_file": str(auth)}) == "registry.basic_auth_file"
