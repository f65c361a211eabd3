"""Liveness (/healthz) and readiness (/readyz) for the kubelet, on their own port.

Ready once Kopf reports it is up and watching (its ready flag) and, with webhooks, once the
webhook server listens and Kopf serves admission through it; alive while the Kopf operator
task runs. When Kopf's watching dies the task ends, /healthz fails and the kubelet restarts us.
"""

from __future__ import annotations

import asyncio
from typing import Any, Protocol

from aiohttp import web


class Serving(Protocol):
    @property
    def ready(self) -> bool: ...


class Health:
    """What the probes look at: Kopf's ready flag and the task running Kopf."""

    def __init__(self, webhooks: Serving | None = None) -> None:
        self.ready = asyncio.Event()
        self.operator_task: asyncio.Task[Any] | None = None
        self.webhooks = webhooks

    @property
    def alive(self) -> bool:
        return self.operator_task is not None and not self.operator_task.done()

    async def healthz(self, _: web.Request) -> web.Response:
        if self.alive:
            return web.json_response({"status": "ok"})
        return web.json_response({"status": "operator stopped"}, status=500)

    async def readyz(self, _: web.Request) -> web.Response:
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
