"""The services script's port hygiene (deploy/local/svc_common.py), on this machine's
real sockets and kernel settings.

Most service ports lie in Linux's ephemeral range (32768-60999): a client socket given
one as its local port, or a stopped instance's socket, once made a restart fail with
"Address already in use" (tls-kafka on 39092, fault-pg18 on 56418). `up` reserves every
known fixed port (ip_local_reserved_ports) and a start waits until its ports bind.
"""

from __future__ import annotations

import os
import socket
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "deploy" / "local"))
import services
import svc_common
import svc_kafka
import svc_tls


def test_fixed_ports_are_a_class_s_port_attributes() -> None:
    """TLS Kafka's three listeners; Prometheus chooses its port at start (none fixed)."""
    assert svc_common.fixed_ports(svc_tls.TlsKafka) == {39092, 39093, 39094}
    assert svc_common.fixed_ports(services._service_class("svc_prometheus", "Prometheus")) == set()


def test_a_start_waits_only_for_the_ports_the_service_binds() -> None:
    """FaultKafka's proxied port is reserved but bound by a test's proxy, which may run
    while the broker restarts (the fault scenarios kill -9 it under the proxy)."""
    fault = svc_kafka.FaultKafka()
    assert 29095 in svc_common.fixed_ports(svc_kafka.FaultKafka)
    assert fault.listen_ports() == {29092, 29093, 29094}
    assert svc_tls.TlsKafka().listen_ports() == {39092, 39093, 39094}


def test_port_ranges_reads_the_kernel_s_format() -> None:
    assert svc_common._port_ranges("") == set()
    assert svc_common._port_ranges("18081,19092-19094,55415\n") == {
        18081,
        19092,
        19093,
        19094,
        55415,
    }


def test_up_reserves_every_known_fixed_port() -> None:
    """After `up` (which the session's fixtures have run), the kernel holds every fixed
    port of every known service out of the ephemeral range; reserving them again is a
    no-op. Where /proc/sys is not writable (no root) `reserve_ports` only reports why,
    and this test is skipped, with that reason."""
    if not os.access(svc_common.RESERVED_PORTS, os.W_OK):
        pytest.skip(f"{svc_common.RESERVED_PORTS} is not writable here")
    every = {
        p
        for module, cls in services.SERVICES.values()
        for p in svc_common.fixed_ports(services._service_class(module, cls))
    }
    assert {55415, 56418, 39092, 58419} <= every
    assert svc_common.reserve_ports(every) is None
    held = svc_common._port_ranges(svc_common.RESERVED_PORTS.read_text())
    assert every <= held


def test_a_start_waits_for_its_ports_then_names_the_one_still_held() -> None:
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    port = listener.getsockname()[1]
    began = time.monotonic()
    with pytest.raises(RuntimeError, match=rf"svc: 127\.0\.0\.1:{port} still in use after 1s"):
        svc_common.wait_ports_free("svc", {port}, timeout=1.0)
    assert time.monotonic() - began >= 1.0
    listener.close()
    svc_common.wait_ports_free("svc", {port}, timeout=1.0)  # free now: returns at once
