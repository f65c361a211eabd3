"""A connection cut in the middle of a transfer, on demand: a loopback TCP proxy in front of a
real server that passes everything through until a connection has carried ``limit`` bytes (both
ways together), then resets it. Small requests and answers pass; a large upload or download is
cut, every time it is tried — a store that goes away mid-transfer, without a race against a
process being killed.
"""

from __future__ import annotations

import select
import socket
import socketserver
import struct
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from urllib.parse import urlsplit

#: How long a connection may stay silent before the proxy drops it (an idle kept-alive one).
IDLE_S = 30.0
CHUNK = 64 * 1024


@dataclass
class Cutter:
    """The running proxy: where to connect, and how many connections it has cut so far."""

    endpoint: str  # http://127.0.0.1:PORT
    cuts: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def cut(self) -> None:
        with self._lock:
            self.cuts += 1


def _reset(sock: socket.socket) -> None:
    """Close ``sock`` with a reset (RST), as a peer that went away does, not a clean FIN."""
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    sock.close()


@contextmanager
def cutting_proxy(upstream: str, limit: int) -> Iterator[Cutter]:
    """A proxy on a free loopback port for ``upstream`` (http://HOST:PORT) that resets every
    connection once it has carried ``limit`` bytes."""
    target = urlsplit(upstream)
    assert target.hostname and target.port, upstream
    address = (target.hostname, target.port)

    class Handler(socketserver.BaseRequestHandler):
        def handle(self) -> None:
            client: socket.socket = self.request
            with socket.create_connection(address) as server:
                peers = {client: server, server: client}
                carried = 0
                while True:
                    readable, _, _ = select.select(list(peers), [], [], IDLE_S)
                    if not readable:
                        return
                    for source in readable:
                        data = source.recv(CHUNK)
                        if not data:
                            return
                        if carried + len(data) > limit:
                            peers[source].sendall(data[: limit - carried])
                            cutter.cut()
                            _reset(client)
                            return
                        peers[source].sendall(data)
                        carried += len(data)

    class Server(socketserver.ThreadingTCPServer):
        daemon_threads = True
        allow_reuse_address = True

        def shutdown_request(self, request: socket.socket | tuple[bytes, socket.socket]) -> None:
            # A reset socket is closed already; another one is closed as usual.
            if isinstance(request, socket.socket) and request.fileno() == -1:
                return
            super().shutdown_request(request)

    with Server(("127.0.0.1", 0), Handler) as proxy:
        cutter = Cutter(endpoint=f"http://127.0.0.1:{proxy.server_address[1]}")
        serving = threading.Thread(target=proxy.serve_forever, daemon=True)
        serving.start()
        try:
            yield cutter
        finally:
            proxy.shutdown()
            serving.join()
