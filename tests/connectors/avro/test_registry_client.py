"""`client_conf`: the SchemaRegistryClient options every registry client of pgcdc gets
from the `registry.*` settings (tests/integration/test_tls_*.py use them against an
HTTPS-only registry with basic auth)."""

from __future__ import annotations

from pathlib import Path

from connectors.avro.registry_client import client_conf
from service.config import load_settings


def test_plain_http_has_only_the_url() -> None:
    """The default registry gets its URL and nothing else."""
    assert client_conf(load_settings()) == {"url": "http://127.0.0.1:18081/apis/ccompat/v7"}


def test_https_with_ca_and_basic_auth_file(tmp_path: Path) -> None:
    """An https:// registry gets the CA file and the user:password read from its file."""
    ca, auth = tmp_path / "ca.pem", tmp_path / "auth"
    ca.write_text("ca")
    auth.write_text("pgcdc:r3gistry\n")
    url = "https://registry:8443/apis/ccompat/v7"
    settings = load_settings(
        registry={"url": url, "ca_location": str(ca), "basic_auth_file": str(auth)}
    )
    assert client_conf(settings) == {
        "url": url,
        "ssl.ca.location": str(ca),
        "basic.auth.user.info": "pgcdc:r3gistry",
    }
