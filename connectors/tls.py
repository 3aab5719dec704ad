"""Whether a server speaks TLS: the one question the edges ask a server on its own.

A plaintext client that reaches a TLS-only Kafka listener or HTTPS-only registry sees
nothing that says why: the server just closes the connection (librdkafka: "connection
closed by peer ... in state APIVERSION_QUERY"; httpx: "Server disconnected without
sending a response"), which is also what a server going down looks like. So when such a
client fails, the Kafka and registry edges ask `speaks_tls(host, port)` and, when it
does, stop with a fatal error naming the setting instead of retrying for the whole
retry budget.

`speaks_tls` opens one TCP connection and sends a TLS ClientHello without verifying
anything (nothing is sent after it). True when the server answered as TLS: a completed
handshake, or a TLS alert (a server that then wants a client certificate, or likes no
offered version). False when it did not: the connection refused, closed or reset, or
no answer within `timeout_s` (a plaintext Kafka listener reads the ClientHello as a
request of absurd size and closes; a plaintext HTTP server answers 400 in plain text).
Never raises.

Shared by `connectors.kafka` and `connectors.avro`, which may not import each other.
"""

from __future__ import annotations

import socket
import ssl


def speaks_tls(host: str, port: int, timeout_s: float = 2.0) -> bool:
    """True when the server at host:port answers a TLS ClientHello as TLS."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    try:
        with (
            socket.create_connection((host, port), timeout=timeout_s) as plain,
            context.wrap_socket(plain, server_hostname=host),
        ):
            return True
    except ssl.SSLError as exc:
        # An alert is a TLS record: the server speaks TLS, it only refused us. Anything
        # else (a plaintext reply, EOF) is not TLS.
        return "ALERT" in (exc.reason or "").upper()
    except OSError:
        return False


def host_port(address: str, default_port: int) -> tuple[str, int]:
    """`host:port` (or `[v6]:port`, or a bare host) as (host, port)."""
    address = address.strip()
    if address.startswith("["):
        host, _, rest = address[1:].partition("]")
        port = rest.lstrip(":")
        return host, int(port) if port else default_port
    host, sep, port = address.rpartition(":")
    if not sep:
        return address, default_port
    return host, int(port)
