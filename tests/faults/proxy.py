"""A loopback TCP proxy with fault controls, for the fault suite.

`Proxy(target_port)` listens on 127.0.0.1 (`port`, 0 picks a free one) and forwards
every accepted connection to 127.0.0.1:`target_port`, byte for byte, in both
directions, until one side closes. Controls, callable from any thread:

- `cut()`: closes every forwarded connection at once (both peers see a reset or EOF)
  and from then on closes new connections as soon as they are accepted, as a network
  that refuses the service would;
- `stall()`: keeps every connection open but forwards nothing, in either direction,
  new connections included: bytes already read are held, not dropped, as a network
  that silently stops delivering would (peers see no error, only silence);
- `resume()`: ends a cut or a stall; held bytes are delivered in order.

Guarantees: bytes are never reordered, duplicated or dropped except by `cut`, which
drops the connections themselves. `close()` stops the proxy and closes everything.
One thread accepts; each connection has two pump threads; all are daemons. Loopback
only: the proxy neither listens on nor connects to any other address.
"""

from __future__ import annotations

import contextlib
import socket
import struct
import threading

_RECV = 65536
_TICK_S = 0.05


class Proxy:
    """A loopback TCP proxy with cut / stall / resume (see the module docstring)."""

    def __init__(self, target_port: int, port: int = 0) -> None:
        self.target_port = target_port
        self._listener = socket.create_server(("127.0.0.1", port), reuse_port=False)
        self._listener.settimeout(_TICK_S * 4)
        self.port = int(self._listener.getsockname()[1])
        self._lock = threading.Lock()
        self._conns: set[socket.socket] = set()
        self._half_done: dict[socket.socket, bool] = {}  # this direction has ended
        self._running = threading.Event()  # set: bytes flow (no stall)
        self._running.set()
        self._cut = False
        self._closed = False
        self.accepted = 0  # connections accepted so far (tests)
        self._thread = threading.Thread(
            target=self._accept_loop, daemon=True, name=f"proxy-{self.port}"
        )
        self._thread.start()

    # --- controls ------------------------------------------------------------------

    def cut(self) -> None:
        with self._lock:
            self._cut = True
            conns, self._conns = self._conns, set()
        for s in conns:
            _close(s, reset=True)

    def stall(self) -> None:
        self._running.clear()

    def resume(self) -> None:
        with self._lock:
            self._cut = False
        self._running.set()

    def close(self) -> None:
        self._closed = True
        self.cut()
        self._running.set()
        self._listener.close()
        self._thread.join(5)

    def __enter__(self) -> Proxy:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def connections(self) -> int:
        with self._lock:
            return len(self._conns) // 2

    # --- forwarding ----------------------------------------------------------------

    def _accept_loop(self) -> None:
        while not self._closed:
            try:
                client, _ = self._listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return  # the listener was closed
            self.accepted += 1
            with self._lock:
                refused = self._cut
            if refused:
                _close(client, reset=True)
                continue
            try:
                upstream = socket.create_connection(("127.0.0.1", self.target_port), 5)
            except OSError:
                _close(client, reset=True)
                continue
            with self._lock:
                self._conns.update((client, upstream))
            for src, dst in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(src, dst), daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket) -> None:
        """Forward src → dst; EOF is passed on as a half-close, so a peer that shuts
        down its writing side still gets the answer. The last pump of a connection
        closes both sockets."""
        try:
            # inside the try: the connection may be cut before this thread starts
            src.settimeout(_TICK_S)
            while not self._closed:
                self._running.wait()
                try:
                    data = src.recv(_RECV)
                except TimeoutError:
                    continue
                if not data:
                    with contextlib.suppress(OSError):
                        dst.shutdown(socket.SHUT_WR)
                    break
                while not self._running.wait(_TICK_S):
                    if self._closed or not self._alive(src):
                        return
                dst.sendall(data)
        except OSError:
            with self._lock:  # one side went away (or was cut): the other goes too
                self._conns.discard(src)
                self._conns.discard(dst)
        finally:
            with self._lock:
                self._half_done[src] = True
                both = self._half_done.get(dst, False) or dst not in self._conns
                if both:
                    self._conns.discard(src)
                    self._conns.discard(dst)
                    self._half_done.pop(src, None)
                    self._half_done.pop(dst, None)
            if both:
                _close(src)
                _close(dst)

    def _alive(self, s: socket.socket) -> bool:
        with self._lock:
            return s in self._conns


def _close(s: socket.socket, *, reset: bool = False) -> None:
    with contextlib.suppress(OSError):
        if reset:  # RST instead of FIN: the peer's next call fails at once
            s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        else:
            s.shutdown(socket.SHUT_RDWR)
    with contextlib.suppress(OSError):
        s.close()
