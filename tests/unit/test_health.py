"""/healthz and /readyz, served for real on loopback by the Health server."""

from __future__ import annotations

import asyncio
import socket

import aiohttp

from database_operator.health import Health


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def probe(port: int, path: str) -> int:
    async with (
        aiohttp.ClientSession() as session,
        session.get(f"http://127.0.0.1:{port}{path}") as r,
    ):
        return r.status


def test_probes_follow_the_operator_task() -> None:
    async def scenario() -> list[tuple[int, int]]:
        health, port = Health(), free_port()
        runner = await health.serve(port, "127.0.0.1")
        seen = [(await probe(port, "/healthz"), await probe(port, "/readyz"))]  # not started
        stop = asyncio.Event()
        health.operator_task = asyncio.create_task(stop.wait())
        seen.append((await probe(port, "/healthz"), await probe(port, "/readyz")))  # watching soon
        health.ready.set()
        seen.append((await probe(port, "/healthz"), await probe(port, "/readyz")))  # watching
        stop.set()
        await health.operator_task
        seen.append((await probe(port, "/healthz"), await probe(port, "/readyz")))  # died
        await runner.cleanup()
        return seen

    assert asyncio.run(scenario()) == [(500, 503), (200, 503), (200, 200), (500, 503)]


def test_readyz_waits_for_the_webhook_server() -> None:
    """With webhooks, ready only once the real server listens and Kopf handed it the admission
    function: until then the webhook Service must not route to this replica."""

    async def scenario() -> list[int]:
        from datetime import UTC, datetime

        from database_operator.webhooks.certificates import new_ca, new_serving
        from database_operator.webhooks.server import WebhookServer

        server = WebhookServer("127.0.0.1", free_port())
        health, port = Health(server), free_port()
        runner = await health.serve(port, "127.0.0.1")
        stop = asyncio.Event()
        health.operator_task = asyncio.create_task(stop.wait())
        health.ready.set()  # Kopf watches
        seen = [await probe(port, "/readyz")]  # the webhooks not served yet
        now = datetime.now(UTC)
        await server.start(new_serving(new_ca(now), ["127.0.0.1"], now))
        seen.append(await probe(port, "/readyz"))  # listening, but Kopf has not handed over

        async def admit(request: object, **_: object) -> dict[str, object]:
            return {}

        handed = server(admit)  # type: ignore[arg-type]
        await anext(handed)  # what Kopf does once its resources are known
        seen.append(await probe(port, "/readyz"))
        await handed.aclose()
        await server.stop()
        stop.set()
        await health.operator_task
        await runner.cleanup()
        return seen

    assert asyncio.run(scenario()) == [503, 503, 200]


class Deaf:
    problem: str | None = "the API server does not answer: connection refused"


def test_readyz_says_why_the_operator_cannot_watch() -> None:
    """Kopf watches (its ready flag), yet the API server is gone: not ready, and why."""

    async def scenario() -> list[tuple[int, int, str]]:
        watching = Deaf()
        health, port = Health(watching=watching), free_port()
        runner = await health.serve(port, "127.0.0.1")
        stop = asyncio.Event()
        health.operator_task = asyncio.create_task(stop.wait())
        health.ready.set()
        seen = []
        async with aiohttp.ClientSession() as session:
            for _ in range(2):
                async with session.get(f"http://127.0.0.1:{port}/readyz") as ready:
                    body = await ready.json()
                    seen.append((await probe(port, "/healthz"), ready.status, body.get("reason")))
                watching.problem = None
        stop.set()
        await health.operator_task
        await runner.cleanup()
        return seen

    assert asyncio.run(scenario()) == [
        (200, 503, "the API server does not answer: connection refused"),
        (200, 200, None),
    ]
