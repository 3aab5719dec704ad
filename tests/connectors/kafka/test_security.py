"""`security_conf`: the librdkafka options every Kafka client of pgcdc gets from the
`kafka.*` settings (tests/integration/test_tls_*.py connect with them to real TLS
listeners)."""

from __future__ import annotations

from pathlib import Path

from connectors.kafka.security import security_conf
from service.config import load_settings


def test_plaintext_sets_only_the_protocol() -> None:
    """With nothing configured the clients connect in plaintext and get no SASL option."""
    assert security_conf(load_settings()) == {"security.protocol": "PLAINTEXT"}


def test_sasl_ssl_carries_mechanism_credentials_and_ca(tmp_path: Path) -> None:
    """SASL_SSL passes the mechanism, the user, the password read from its file and the
    CA file; no client certificate option is set."""
    ca, secret = tmp_path / "ca.pem", tmp_path / "password"
    ca.write_text("ca")
    secret.write_text("k4fka\n")
    settings = load_settings(
        kafka={
            "security_protocol": "SASL_SSL",
            "sasl_mechanism": "SCRAM-SHA-512",
            "sasl_username": "pgcdc",
            "sasl_password_file": str(secret),
            "ssl_ca_location": str(ca),
        }
    )
    assert security_conf(settings) == {
        "security.protocol": "SASL_SSL",
        "sasl.mechanisms": "SCRAM-SHA-512",
        "sasl.username": "pgcdc",
        "sasl.password": "k4fka",
        "ssl.ca.location": str(ca),
    }


def test_ssl_with_a_client_certificate(tmp_path: Path) -> None:
    """SSL with a client certificate (mutual TLS) passes the three files and no SASL."""
    files = {name: tmp_path / name for name in ("ca.pem", "client.pem", "client.key")}
    for path in files.values():
        path.write_text(path.name)
    settings = load_settings(
        kafka={
            "security_protocol": "SSL",
            "ssl_ca_location": str(files["ca.pem"]),
            "ssl_certificate_location": str(files["client.pem"]),
            "ssl_key_location": str(files["client.key"]),
        }
    )
    assert security_conf(settings) == {
        "security.protocol": "SSL",
        "ssl.ca.location": str(files["ca.pem"]),
        "ssl.certificate.location": str(files["client.pem"]),
        "ssl.key.location": str(files["client.key"]),
    }


def test_sasl_user_alone_keeps_the_old_meaning() -> None:
    """A SASL user without security_protocol is SASL_SSL with PLAIN, as before the
    setting existed."""
    settings = load_settings(kafka={"sasl_username": "u", "sasl_password": "p"})
    assert security_conf(settings) == {
        "security.protocol": "SASL_SSL",
        "sasl.mechanisms": "PLAIN",
        "sasl.username": "u",
        "sasl.password": "p",
    }
