"""The webhook server on its own thread and loop (webhooks/server.py): conversions never need
the operator's loop, and admission reviews, whose handlers do, are bounded: beyond what may run
and wait, they are refused at once instead of queueing on the operator's loop."""

from __future__ import annotations

import asyncio
import json
import ssl
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from database_operator.webhooks import server as webhook_server
from database_operator.webhooks.certificates import KeyPair, new_ca, new_serving
from database_operator.webhooks.server import WebhookServer
from tests.controlplane import free_port

REVIEW = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "ConversionReview",
    "request": {"uid": "u1", "desiredAPIVersion": "databases.example.com/v1", "objects": []},
}
ADMISSION = {
    "apiVersion": "admission.k8s.io/v1",
    "kind": "AdmissionReview",
    "request": {"uid": "a1", "operation": "CREATE", "namespace": "n", "name": "x"},
}


def post(port: int, path: str, body: dict[str, Any], ca: Path) -> tuple[int, float]:
    """POST ``body`` over TLS, trusting ``ca``: the status, and when the answer came."""
    context = ssl.create_default_context(cafile=str(ca))
    request = urllib.request.Request(
        f"https://127.0.0.1:{port}{path}",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
    )
    try:
        with urllib.request.urlopen(request, context=context, timeout=60) as answer:  # noqa: S310
            status = int(answer.status)
    except urllib.error.HTTPError as error:
        status = error.code
    return status, time.monotonic()


def serving(tmp_path: Path) -> tuple[KeyPair, Path]:
    now = datetime.now(UTC)
    ca = new_ca(now)
    (tmp_path / "ca.crt").write_bytes(ca.cert)
    return new_serving(ca, ["127.0.0.1"], now), tmp_path / "ca.crt"


def run(scenario: Callable[[], Any]) -> Any:
    return asyncio.run(scenario())


def test_a_conversion_is_answered_while_the_operators_loop_cannot_run(tmp_path: Path) -> None:
    """The operator's loop stuck (a long reconcile step, a flood of events): the API server's
    conversions, without which no Database can be read, are answered all the same."""
    pair, ca = serving(tmp_path)
    port = free_port()

    async def scenario() -> tuple[float, tuple[int, float]]:
        server = WebhookServer("127.0.0.1", port)
        await server.start(pair)
        asked: dict[str, tuple[int, float]] = {}
        client = threading.Thread(
            target=lambda: asked.update(answer=post(port, "/convert", REVIEW, ca))
        )
        client.start()
        time.sleep(5)  # the operator's loop runs nothing meanwhile
        unblocked = time.monotonic()
        await asyncio.to_thread(client.join)
        await server.stop()
        return unblocked, asked["answer"]

    unblocked, (status, answered) = run(scenario)
    assert status == 200
    assert answered < unblocked, "answered before the operator's loop ran again"


def test_admissions_beyond_those_running_and_waiting_are_refused_at_once(tmp_path: Path) -> None:
    """Handlers that do not finish: MAX_ADMITTING run, MAX_WAITING wait, and every further
    review is answered 429 (the API server applies the failurePolicy), not queued."""
    pair, ca = serving(tmp_path)
    port = free_port()
    extra = 5
    total = webhook_server.MAX_ADMITTING + webhook_server.MAX_WAITING + extra

    async def scenario() -> list[int]:
        server = WebhookServer("127.0.0.1", port)
        await server.start(pair)
        release = asyncio.Event()
        running = 0

        async def admit(review: dict[str, Any], **_: Any) -> dict[str, Any]:
            nonlocal running
            running += 1
            await release.wait()
            return {"response": {"uid": review["request"]["uid"], "allowed": True}}

        handed = server(admit)  # type: ignore[arg-type]
        await anext(handed)
        loop = asyncio.get_running_loop()
        with ThreadPoolExecutor(max_workers=total) as pool:
            answers = [
                loop.run_in_executor(pool, post, port, "/validate", ADMISSION, ca)
                for _ in range(total)
            ]
            # The refused are answered while the others still wait for their handlers.
            refused = 0
            deadline = time.monotonic() + 60
            while refused < extra and time.monotonic() < deadline:
                done = [a for a in answers if a.done()]
                refused = sum(1 for a in done if a.result()[0] == 429)
                await asyncio.sleep(0.1)
            assert running == webhook_server.MAX_ADMITTING, "no more handlers at once"
            release.set()
            statuses = [status for status, _ in await asyncio.gather(*answers)]
        await handed.aclose()
        await server.stop()
        return statuses

    statuses = run(scenario)
    assert statuses.count(429) == extra
    assert statuses.count(200) == total - extra
