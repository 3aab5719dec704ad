"""How every Kafka client of pgcdc connects, and which connection failures are final.

Receives the `kafka.*` settings, validated together by `service.config` (a SASL
protocol has its credentials, TLS files exist and go with a TLS protocol). Hands on:

- `security_conf(settings)`: the librdkafka options for `kafka.protocol` (PLAINTEXT,
  SSL, SASL_PLAINTEXT, SASL_SSL), the SASL mechanism and credentials, and the CA,
  client certificate and key files. Every client merges it into its configuration: the
  sink's producer and admin client, the offset, history and progress readers, the
  signal consumer and the demo's consumer. Nothing else sets security options.
- `ClientErrors`: an `error_cb` that keeps the first failure no retry can cure
  (`final_error`), for `raise_first()` to raise where the caller may.
- `check_broker(settings)`: connects once the way the clients will, before the first of
  them does anything (`KafkaSink.start`), and raises such a failure within seconds.
  librdkafka reports a failed connection only through `error_cb` and retries it
  forever; left to the callers' retry budgets (`kafka.retry_budget_s`, 5 min by
  default) a wrong CA would end as `BrokerUnavailableError` (exit 3), which a
  supervisor retries forever too. A broker that is merely unreachable gets no verdict
  here: after at most `PROBE_S` the callers' retries take over as before.

Final failures, by what librdkafka reports (error code and text):
- `_SSL` "certificate verify failed": `TlsError` naming `kafka.ssl_ca_location`;
- a TLS alert about our certificate (bad certificate, unknown ca, certificate
  required): `TlsError` naming `kafka.ssl_certificate_location`;
- "connecting to a PLAINTEXT broker listener?" (TLS to a plaintext listener):
  `TlsError` naming `kafka.security_protocol`;
- `_AUTHENTICATION`: `KafkaAuthError` naming `kafka.sasl_mechanism` for a mechanism the
  broker does not offer, else `kafka.sasl_password`;
- a PLAINTEXT or SASL_PLAINTEXT client that cannot connect to a bootstrap address that
  answers TLS (`connectors.tls.speaks_tls`; the broker only closes the connection, which
  says nothing): `TlsError` naming `kafka.security_protocol`.

Secrets: the SASL password goes into the client configuration only. librdkafka's
messages never repeat it, and neither do the errors made from them.
"""

from __future__ import annotations

import threading
import time
from typing import Any

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient

from connectors.kafka.client_log import client_conf
from connectors.tls import host_port, speaks_tls
from service.config import Settings
from service.errors import KafkaAuthError, PgcdcError, TlsError

# How long `check_broker` waits for a verdict: a first connection (TLS handshake and
# SASL exchange included) is decided well within it.
PROBE_S = 5.0
_DEFAULT_PORT = 9092
# TLS alerts a broker sends when it does not accept our certificate (or got none).
_CERT_ALERTS = ("alert bad certificate", "alert unknown ca", "alert certificate required")


def security_conf(settings: Settings) -> dict[str, Any]:
    """The librdkafka options of `kafka.*`'s protocol, SASL and TLS settings."""
    k = settings.kafka
    conf: dict[str, Any] = {"security.protocol": k.protocol}
    if k.protocol.startswith("SASL_"):
        assert k.sasl_password is not None  # service.config: a SASL protocol has one
        conf["sasl.mechanisms"] = k.sasl_mechanism
        conf["sasl.username"] = k.sasl_username
        conf["sasl.password"] = k.sasl_password.get_secret_value()
    for option, path in (
        ("ssl.ca.location", k.ssl_ca_location),
        ("ssl.certificate.location", k.ssl_certificate_location),
        ("ssl.key.location", k.ssl_key_location),
    ):
        if path is not None:
            conf[option] = str(path)
    return conf


def final_error(err: KafkaError) -> PgcdcError | None:
    """The fatal pgcdc error for a client error no retry cures, else None."""
    text = err.str()
    lowered = text.lower()
    code = err.code()
    if code == KafkaError._AUTHENTICATION:
        if "unsupported sasl mechanism" in lowered:
            return KafkaAuthError(
                f"the broker does not offer SASL mechanism of kafka.sasl_mechanism: {text}",
                field="kafka.sasl_mechanism",
            )
        return KafkaAuthError(
            f"the broker refused the SASL credentials (kafka.sasl_username, "
            f"kafka.sasl_password): {text}",
            field="kafka.sasl_password",
        )
    if "certificate verify failed" in lowered:
        return TlsError(
            f"the broker's certificate is not signed by the CA of kafka.ssl_ca_location "
            f"(or does not name the broker's host): {text}",
            field="kafka.ssl_ca_location",
        )
    if any(alert in lowered for alert in _CERT_ALERTS):
        return TlsError(
            "the broker refused the client certificate (it needs one signed by a CA it "
            f"trusts: kafka.ssl_certificate_location, kafka.ssl_key_location): {text}",
            field="kafka.ssl_certificate_location",
        )
    if "connecting to a plaintext broker listener" in lowered:
        return TlsError(
            "the broker listener does not speak TLS, which kafka.security_protocol asks "
            f"for: {text}",
            field="kafka.security_protocol",
        )
    return None


class ClientErrors:
    """An `error_cb` keeping the first final error (`final_error`) a client reported.

    librdkafka calls it from whichever thread serves the client's callbacks (`poll`),
    hence the lock."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.first: PgcdcError | None = None  # set once, by the first final error

    def __call__(self, err: KafkaError) -> None:
        final = final_error(err)
        with self._lock:
            if final is not None and self.first is None:
                self.first = final

    def raise_first(self) -> None:
        with self._lock:
            first = self.first
        if first is not None:
            raise first


def _plaintext_to_tls(settings: Settings) -> TlsError | None:
    """A TlsError when the client is plaintext and a bootstrap address answers TLS."""
    k = settings.kafka
    if k.protocol.endswith("SSL"):
        return None
    for address in k.bootstrap_servers.split(","):
        host, port = host_port(address, _DEFAULT_PORT)
        if speaks_tls(host, port):
            return TlsError(
                f"the broker at {host}:{port} speaks TLS but kafka.security_protocol is "
                f"{k.protocol}: set it to SSL or SASL_SSL (with kafka.ssl_ca_location)",
                field="kafka.security_protocol",
            )
    return None


def check_broker(settings: Settings, probe_s: float = PROBE_S) -> None:
    """Connect as the clients will; raise a final failure (module docstring) at once.

    Returns when the broker answered a metadata request, or after `probe_s` (at most
    `kafka.retry_budget_s`) without a verdict: an unreachable broker is the callers'
    retries' business."""
    errors = ClientErrors()
    conf: dict[str, Any] = {
        "bootstrap.servers": settings.kafka.bootstrap_servers,
        **security_conf(settings),
        "error_cb": errors,
    }
    admin = AdminClient(client_conf(conf))
    deadline = time.monotonic() + min(probe_s, settings.kafka.retry_budget_s)
    asked_tls = False
    while True:
        try:
            admin.list_topics(timeout=1.0)
            return
        except KafkaException:
            admin.poll(0)  # serves error_cb
        errors.raise_first()
        if not asked_tls:
            asked_tls = True
            mismatch = _plaintext_to_tls(settings)
            if mismatch is not None:
                raise mismatch
        if time.monotonic() >= deadline:
            return
