"""How pgcdc reaches the schema registry, and which registry failures are final.

Receives the `registry.*` settings, validated by `service.config` (an https:// URL for a
CA file, `user:password` basic auth read from the setting or its file). Hands on:

- `client_conf(settings)`: the options of confluent_kafka's `SchemaRegistryClient` for
  the URL, the CA file (`ssl.ca.location`; unset: certifi's bundle, or SSL_CERT_FILE /
  SSL_CERT_DIR) and HTTP basic auth (`basic.auth.user.info`). Every registry client of
  pgcdc is built from it: the avro plugin's `Registrar` and the demo's reader.
- `final_error(exc, settings)`: the fatal error for a failed request no retry cures,
  else None (the caller retries within `registry.retry_budget_s`):
  - a certificate the CA of `registry.ca_location` did not sign: `TlsError` naming it;
    one that does not name the URL's host, a TLS alert (the registry refused the
    handshake) or a plaintext server behind an https:// URL: `TlsError` naming
    `registry.url`. Other TLS errors (an EOF mid-handshake) may pass and are retried;
  - HTTP 401 or 403: `RegistryAuthError` naming `registry.basic_auth`;
  - an http:// URL whose server does not answer HTTP and does answer TLS
    (`connectors.tls.speaks_tls`): `TlsError` naming `registry.url`.

Secrets: the basic-auth password goes into the client's options only; no message made
here repeats it (the URL is the configured one, which service.config does not let hold
credentials apart from what the operator wrote there).
"""

from __future__ import annotations

import ssl
from typing import Any
from urllib.parse import urlsplit

from connectors.tls import speaks_tls
from service.config import Settings
from service.errors import PgcdcError, RegistryAuthError, TlsError


def client_conf(settings: Settings) -> dict[str, Any]:
    """SchemaRegistryClient options for `registry.*` (URL, CA file, basic auth)."""
    r = settings.registry
    conf: dict[str, Any] = {"url": r.url}
    if r.ca_location is not None:
        conf["ssl.ca.location"] = str(r.ca_location)
    if r.basic_auth is not None:
        conf["basic.auth.user.info"] = r.basic_auth.get_secret_value()
    return conf


def _causes(exc: BaseException) -> list[BaseException]:
    """`exc` and the exceptions it was raised from (httpx wraps ssl's errors twice)."""
    chain: list[BaseException] = []
    current: BaseException | None = exc
    while current is not None and current not in chain:
        chain.append(current)
        current = current.__cause__ or current.__context__
    return chain


def final_error(exc: BaseException, settings: Settings) -> PgcdcError | None:
    """The fatal error for a registry request that failed for good (module docstring)."""
    url = settings.registry.url
    status = getattr(exc, "http_status_code", None)
    if status in (401, 403):
        return RegistryAuthError(
            f"the schema registry at {url} refused the credentials of registry.basic_auth "
            f"(HTTP {status})",
            field="registry.basic_auth",
        )
    for cause in _causes(exc):
        if isinstance(cause, ssl.SSLCertVerificationError):
            message = cause.verify_message or str(cause)
            if "mismatch" in message.lower():
                return TlsError(
                    f"the schema registry's certificate does not name the host of "
                    f"registry.url {url}: {message}",
                    field="registry.url",
                )
            return TlsError(
                f"the schema registry's certificate at {url} is not signed by the CA of "
                f"registry.ca_location: {message}",
                field="registry.ca_location",
            )
        reason = (cause.reason or "").upper() if isinstance(cause, ssl.SSLError) else ""
        if "ALERT" in reason:  # the registry refused the handshake
            return TlsError(
                f"the schema registry at {url} refused the TLS handshake: {cause}",
                field="registry.url",
            )
        if reason == "WRONG_VERSION_NUMBER":  # https:// to a plaintext server
            return TlsError(
                f"the schema registry at {url} does not speak TLS: {cause}; check the "
                "scheme and port of registry.url",
                field="registry.url",
            )
    parts = urlsplit(url)
    if parts.scheme == "http" and parts.hostname is not None and status is None:
        port = parts.port or 80
        if speaks_tls(parts.hostname, port):
            return TlsError(
                f"the schema registry at {parts.hostname}:{port} speaks TLS but "
                f"registry.url {url} is http://: use https:// (with registry.ca_location)",
                field="registry.url",
            )
    return None
