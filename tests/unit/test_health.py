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
