"""A fault-injecting proxy between the operator and kube-apiserver, on loopback.

The operator talks plain HTTP to the proxy; the proxy talks TLS to kube-apiserver as the admin
(client certificate) and passes every request through, except that it can, by chance or by rule:

- answer a write with an error status (409, 429, 500, 503) without passing it on, or after
  passing it on (the write happened, the client is told it failed: the hardest case for a
  client that must not do things twice);
- reset the connection instead of answering;
- cut a watch stream after a while;
- add latency.

It runs its own event loop in a thread, so synchronous tests can start and stop it.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import random
import ssl
import threading
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
from aiohttp import web

from tests.controlplane import ControlPlane, free_port

WRITES = {"POST", "PUT", "PATCH", "DELETE"}


@dataclass(frozen=True)
class Request:
    """What a rule sees of a request."""

    method: str
    path: str
    query: str
    body: bytes

    @property
    def is_watch(self) -> bool:
        return "watch=true" in self.query or "watch=1" in self.query

    def json(self) -> Any:
        try:
            return json.loads(self.body or b"null")
        except ValueError:
            return None


@dataclass(frozen=True)
class Fault:
    """What to do instead of (or after) passing a request on."""

    #: An HTTP status to answer with (0: reset the connection instead).
    status: int
    #: Pass the request on first, then answer with the fault (the write happens).
    after_forwarding: bool = False


#: A rule: given a request, a fault to inject, or None to let it through.
Rule = Callable[[Request], Fault | None]


@dataclass
class Chaos:
    """Random faults: a share of writes fail, some connections reset, watches get cut."""

    write_error_rate: float = 0.0
    statuses: tuple[int, ...] = (409, 429, 500, 503)
    reset_rate: float = 0.0
    #: A watch stream is cut after this many seconds (uniform between the two); None: never.
    watch_cut_s: tuple[float, float] | None = None
    latency_s: tuple[float, float] = (0.0, 0.0)
    seed: int = 0
    rng: random.Random = field(init=False)

    def __post_init__(self) -> None:
        self.rng = random.Random(self.seed)  # noqa: S311 - a test's dice, not a secret

    def __call__(self, request: Request) -> Fault | None:
        if request.is_watch:
            return None
        if self.rng.random() < self.reset_rate:
            return Fault(0)
        if request.method in WRITES and self.rng.random() < self.write_error_rate:
            return Fault(self.rng.choice(self.statuses), after_forwarding=self.rng.random() < 0.3)
        return None


def status_body(code: int) -> bytes:
    reason = {
        409: "Conflict",
        429: "TooManyRequests",
        500: "InternalError",
        503: "ServiceUnavailable",
    }
    return json.dumps(
        {
            "kind": "Status",
            "apiVersion": "v1",
            "status": "Failure",
            "message": f"injected by the fault proxy ({code})",
            "reason": reason.get(code, "InternalError"),
            "code": code,
            "details": {"retryAfterSeconds": 1} if code == 429 else {},
        }
    ).encode()


class FaultProxy:
    """The proxy; `kubeconfig` points a client at it. Use as a context manager."""

    def __init__(self, plane: ControlPlane, workdir: Path, rules: list[Rule] | None = None) -> None:
        self.plane = plane
        self.rules: list[Rule] = list(rules or [])
        self.chaos: Chaos | None = None
        self.port = free_port()
        self.kubeconfig = workdir / "kubeconfig-proxy"
        self.injected: Counter[str] = Counter()
        self.requests: Counter[str] = Counter()
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._runner: web.AppRunner | None = None
        self._session: aiohttp.ClientSession | None = None

    # --- life cycle ---------------------------------------------------------------------------

    def __enter__(self) -> FaultProxy:
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self._start(), self._loop).result(timeout=30)
        self.kubeconfig.write_text(
            json.dumps(
                {
                    "apiVersion": "v1",
                    "kind": "Config",
                    "clusters": [
                        {"name": "proxy", "cluster": {"server": f"http://127.0.0.1:{self.port}"}}
                    ],
                    "users": [{"name": "proxy", "user": {}}],
                    "contexts": [
                        {"name": "proxy", "context": {"cluster": "proxy", "user": "proxy"}}
                    ],
                    "current-context": "proxy",
                }
            )
        )
        return self

    def __exit__(self, *exc: object) -> None:
        asyncio.run_coroutine_threadsafe(self._stop(), self._loop).result(timeout=30)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=10)

    async def _start(self) -> None:
        context = ssl.create_default_context(cafile=str(self.plane.pki.ca))
        context.load_cert_chain(str(self.plane.pki.admin_cert), str(self.plane.pki.admin_key))
        self._session = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(ssl=context, limit=256),
            timeout=aiohttp.ClientTimeout(total=None, sock_connect=10),
            auto_decompress=False,
        )
        app = web.Application(client_max_size=64 * 1024**2)
        app.router.add_route("*", "/{tail:.*}", self._handle)
        self._runner = web.AppRunner(app, access_log=None, handler_cancellation=True)
        await self._runner.setup()
        await web.TCPSite(self._runner, "127.0.0.1", self.port).start()

    async def _stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
        if self._session is not None:
            await self._session.close()

    @contextlib.contextmanager
    def chaos_on(self, chaos: Chaos) -> Iterator[Chaos]:
        """Random faults for the duration of the block."""
        self.chaos = chaos
        try:
            yield chaos
        finally:
            self.chaos = None

    # --- the proxy ------------------------------------------------------------------------------

    def _fault_for(self, request: Request) -> Fault | None:
        for rule in self.rules:
            fault = rule(request)
            if fault is not None:
                return fault
        return self.chaos(request) if self.chaos is not None else None

    async def _handle(self, incoming: web.Request) -> web.StreamResponse:
        body = await incoming.read()
        request = Request(incoming.method, incoming.path, incoming.query_string, body)
        self.requests[f"{request.method} {'watch' if request.is_watch else 'call'}"] += 1
        fault = self._fault_for(request)
        chaos = self.chaos
        if chaos is not None and chaos.latency_s[1] > 0:
            await asyncio.sleep(chaos.rng.uniform(*chaos.latency_s))
        if fault is not None and not fault.after_forwarding:
            return self._inject(incoming, fault, request)

        assert self._session is not None
        headers = {
            k: v
            for k, v in incoming.headers.items()
            if k.lower() not in {"host", "content-length", "transfer-encoding", "authorization"}
        }
        async with self._session.request(
            incoming.method,
            f"{self.plane.url}{incoming.path_qs}",
            data=body or None,
            headers=headers,
        ) as upstream:
            if fault is not None:
                await upstream.read()
                return self._inject(incoming, fault, request)
            response = web.StreamResponse(status=upstream.status)
            for key in ("Content-Type", "Audit-Id", "Retry-After"):
                if key in upstream.headers:
                    response.headers[key] = upstream.headers[key]
            await response.prepare(incoming)
            loop = asyncio.get_running_loop()
            cut_at: float | None = None
            while True:
                # Chaos may start after the stream did: look again at every pause.
                current = self.chaos
                if request.is_watch and cut_at is None and current and current.watch_cut_s:
                    cut_at = loop.time() + current.rng.uniform(*current.watch_cut_s)
                if cut_at is not None and loop.time() >= cut_at:
                    self.injected["watch cut"] += 1
                    if incoming.transport is not None:
                        incoming.transport.abort()
                    return response
                try:
                    chunk = await asyncio.wait_for(upstream.content.readany(), 0.5)
                except TimeoutError:
                    continue
                if not chunk:
                    break
                await response.write(chunk)
            await response.write_eof()
            return response

    def _inject(self, incoming: web.Request, fault: Fault, request: Request) -> web.Response:
        when = "after" if fault.after_forwarding else "instead of"
        self.injected[f"{fault.status or 'reset'} {when} {request.method}"] += 1
        if fault.status == 0:
            if incoming.transport is not None:
                incoming.transport.abort()
            return web.Response(status=500)  # never sent: the connection is gone
        return web.Response(
            status=fault.status,
            body=status_body(fault.status),
            content_type="application/json",
            headers={"Retry-After": "1"} if fault.status == 429 else None,
        )


class Times:
    """A rule's budget: fire ``n`` times, then never again."""

    def __init__(self, n: int) -> None:
        self.left = n

    def take(self) -> bool:
        if self.left <= 0:
            return False
        self.left -= 1
        return True


def fail_finalizer_removal(status: int, times: int) -> Rule:
    """Fail the first ``times`` PATCHes that remove a finalizer from a Database with ``status``."""
    budget = Times(times)

    def rule(request: Request) -> Fault | None:
        if request.method != "PATCH" or "/databases/" not in request.path:
            return None
        operations = request.json()
        removes = isinstance(operations, list) and any(
            op.get("op") == "remove" and "/metadata/finalizers" in op.get("path", "")
            for op in operations
        )
        return Fault(status) if removes and budget.take() else None

    return rule


def fail_deletes(resource: str, status: int, times: int) -> Rule:
    """Fail the first ``times`` DELETEs of ``resource`` (e.g. "secrets") with ``status``."""
    budget = Times(times)

    def rule(request: Request) -> Fault | None:
        if request.method != "DELETE" or f"/{resource}/" not in request.path:
            return None
        return Fault(status) if budget.take() else None

    return rule
