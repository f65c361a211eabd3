"""Liveness (/healthz) and readiness (/readyz) for the kubelet, on their own port.

Ready once Kopf reports it is up and watching (its ready flag) and, with webhooks, once the
webhook server listens and Kopf serves admission through it; not ready while the operator
cannot watch (lifecycle.py: the API server does not answer, the CRDs are not served, a watch
request keeps failing), with the reason in the answer. Alive while the operator task runs,
through all of these: a restart would not cure them.
"""

from __future__ import annotations

import asyncio
from typing import Any, Protocol

from aiohttp import web


class Serving(Protocol):
    @property
    def ready(self) -> bool: ...


class Watches(Protocol):
    @property
    def problem(self) -> str | None: ...


class Health:
    """What the probes look at: Kopf's ready flag, the task running Kopf, and whether the
    operator can watch."""

    def __init__(self, webhooks: Serving | None = None, watching: Watches | None = None) -> None:
        self.ready = asyncio.Event()
        self.operator_task: asyncio.Task[Any] | None = None
        self.webhooks = webhooks
        self.watching = watching

    @property
    def alive(self) -> bool:
        return self.operator_task is not None and not self.operator_task.done()

    async def healthz(self, _: web.Request) -> web.Response:
        if self.alive:
            return web.json_response({"status": "ok"})
        return web.json_response({"status": "operator stopped"}, status=500)

    async def readyz(self, _: web.Request) -> web.Response:
        if self.alive and self.watching is not None and (problem := self.watching.problem):
            return web.json_response({"status": "not watching", "reason": problem}, status=503)
        if not (self.alive and self.ready.is_set()):
            return web.json_response({"status": "starting"}, status=503)
        if self.webhooks is not None and not self.webhooks.ready:
            return web.json_response({"status": "webhooks starting"}, status=503)
        return web.json_response({"status": "ready"})

    async def serve(self, port: int, address: str = "0.0.0.0") -> web.AppRunner:  # noqa: S104
        app = web.Application()
        app.router.add_get("/healthz", self.healthz)
        app.router.add_get("/readyz", self.readyz)
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        await web.TCPSite(runner, address, port).start()
        return runner
