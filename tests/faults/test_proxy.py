"""The fault proxy itself, on real loopback sockets: forwarding, cut, stall, resume."""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Iterator

import pytest

from tests.faults.proxy import Proxy


@pytest.fixture
def echo() -> Iterator[int]:
    """An echo server on a free loopback port."""
    server = socket.create_server(("127.0.0.1", 0))
    server.settimeout(0.2)
    done = threading.Event()

    def serve(conn: socket.socket) -> None:
        with conn, contextlib.suppress(OSError):  # a cut resets it
            while data := conn.recv(65536):
                conn.sendall(data)

    def accept() -> None:
        while not done.is_set():
            try:
                conn, _ = server.accept()
            except TimeoutError:
                continue
            threading.Thread(target=serve, args=(conn,), daemon=True).start()

    t = threading.Thread(target=accept, daemon=True)
    t.start()
    yield int(server.getsockname()[1])
    done.set()
    t.join(2)
    server.close()


def _roundtrip(port: int, payload: bytes, timeout: float = 2.0) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout) as s:
        s.sendall(payload)
        s.shutdown(socket.SHUT_WR)
        got = b""
        while chunk := s.recv(65536):
            got += chunk
        return got


def test_forwards_bytes_in_order(echo: int) -> None:
    """Every byte reaches the target and comes back in order, for a payload much larger
    than one recv."""
    payload = bytes(range(256)) * 4096  # 1 MiB
    with Proxy(echo) as proxy:
        assert _roundtrip(proxy.port, payload, timeout=10) == payload


def test_cut_resets_open_connections_and_refuses_new_ones(echo: int) -> None:
    """After cut(), an open connection fails at once and a new one is closed without
    reaching the target; after resume() connections work again."""
    with Proxy(echo) as proxy:
        s = socket.create_connection(("127.0.0.1", proxy.port), 2)
        s.sendall(b"x")
        assert s.recv(1) == b"x"
        proxy.cut()
        with pytest.raises(OSError):
            for _ in range(20):  # the reset may need one send to surface
                s.sendall(b"y")
                if s.recv(1) == b"":
                    raise ConnectionResetError("closed")
                time.sleep(0.05)
        s.close()
        with pytest.raises(OSError):
            _roundtrip(proxy.port, b"z")
            raise ConnectionResetError("closed")  # an empty answer counts as refused
        proxy.resume()
        assert _roundtrip(proxy.port, b"again") == b"again"


def test_stall_holds_bytes_until_resume(echo: int) -> None:
    """During stall() the connection stays open but nothing is delivered; on resume()
    the held bytes arrive, in order, none lost."""
    with Proxy(echo) as proxy:
        s = socket.create_connection(("127.0.0.1", proxy.port), 2)
        s.sendall(b"a")
        assert s.recv(1) == b"a"
        proxy.stall()
        s.sendall(b"bcd")
        s.settimeout(0.5)
        with pytest.raises(TimeoutError):
            s.recv(1)
        proxy.resume()
        s.settimeout(2)
        got = b""
        while len(got) < 3:
            got += s.recv(3)
        assert got == b"bcd"
        s.close()
