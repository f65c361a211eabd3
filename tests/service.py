"""A Service on loopback: a TCP proxy whose backend can be moved, as a Kubernetes Service moves
to the pod a new label selects. Moving it resets the connections it carries (as they break when
the old pod goes), so a client or a standby reconnects, and reaches the new backend.
"""

from __future__ import annotations

import select
import socket
import socketserver
import threading
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field

CHUNK = 64 * 1024


@dataclass
class Service:
    """Where clients connect (``port``), and the backend port it sends them to (None: none,
    as a Service without endpoints: connections are refused... by being closed at once)."""

    port: int = 0
    backend: int | None = None
    _open: set[socket.socket] = field(default_factory=set, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def route(self, backend: int | None) -> None:
        """Send new connections to ``backend``; break the ones open now."""
        with self._lock:
            self.backend = backend
            for sock in list(self._open):
                with suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)


@contextmanager
def service(backend: int | None = None) -> Iterator[Service]:
    """A running Service on a free loopback port, routed to ``backend``."""
    state = Service(backend=backend)

    class Handler(socketserver.BaseRequestHandler):
        def handle(self) -> None:
            client: socket.socket = self.request
            with state._lock:
                backend = state.backend
            if backend is None:
                return
            try:
                upstream = socket.create_connection(("127.0.0.1", backend), timeout=3)
            except OSError:
                return
            with state._lock:
                state._open.update((client, upstream))
            try:
                _pipe(client, upstream)
            finally:
                with state._lock:
                    state._open.difference_update((client, upstream))
                upstream.close()

    class Server(socketserver.ThreadingTCPServer):
        daemon_threads = True
        allow_reuse_address = True

    with Server(("127.0.0.1", 0), Handler) as server:
        state.port = server.server_address[1]
        thread = threading.Thread(target=server.serve_forever, daemon=True)
        thread.start()
        try:
            yield state
        finally:
            server.shutdown()


def _pipe(one: socket.socket, other: socket.socket) -> None:
    peers = {one: other, other: one}
    while True:
        try:
            readable, _, _ = select.select(list(peers), [], [], 60)
        except (OSError, ValueError):
            return
        if not readable:
            return
        for sock in readable:
            try:
                data = sock.recv(CHUNK)
            except OSError:
                return
            if not data:
                return
            try:
                peers[sock].sendall(data)
            except OSError:
                return
