"""The HTTPS server of the webhooks: Kopf's admission requests and the CRD's ConversionReviews on
one port.

It is Kopf's admission server (it implements ``kopf.WebhookServerProtocol``: Kopf hands it the
function that runs the ``on.validate``/``on.mutate`` handlers) and serves ``/convert`` beside
it. It starts before Kopf does, so conversion is answered as soon as the process listens; it is
ready (``/readyz``) once it listens and Kopf has handed over its admission function. Every
replica serves, the standbys of an HA pair too: webhooks are not reconciles. ``on_answer``
hears how long each review took to answer (for the metrics), refusals and errors included.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import ssl
import tempfile
import time
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Iterator
from typing import Any

import kopf
from aiohttp import web

from database_operator import tracing
from database_operator.logs import get_logger
from database_operator.webhooks import conversion
from database_operator.webhooks.certificates import KeyPair
from database_operator.webhooks.configuration import CONVERT_PATH

#: The webhook a ConversionReview is answered as (admission reviews: Kopf's handler id).
CONVERT = "convert"
#: Hears a webhook's name and the seconds its answer took.
OnAnswer = Callable[[str, float], None]


class WebhookServer:
    """Admission (``/<handler id>``, Kopf's) and conversion (``/convert``) over TLS."""

    def __init__(self, address: str, port: int, on_answer: OnAnswer | None = None) -> None:
        self.address = address
        self.port = port
        self.on_answer = on_answer
        self.listening = asyncio.Event()
        self._admission_fn: kopf.WebhookFn | None = None
        self._admission_ready = asyncio.Event()
        self._context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        self._context.minimum_version = ssl.TLSVersion.TLSv1_2
        self._runner: web.AppRunner | None = None

    @property
    def ready(self) -> bool:
        return self.listening.is_set() and self._admission_ready.is_set()

    def use(self, serving: KeyPair) -> None:
        """Serve ``serving`` from now on (new connections; open ones keep theirs)."""
        # ssl loads a chain only from files: write it where only we can read, then remove it.
        with tempfile.TemporaryDirectory(prefix="webhook-tls-") as folder:
            cert, key = os.path.join(folder, "tls.crt"), os.path.join(folder, "tls.key")
            for path, data in ((cert, serving.cert), (key, serving.key)):
                with open(os.open(path, os.O_WRONLY | os.O_CREAT, 0o600), "wb") as file:
                    file.write(data)
            self._context.load_cert_chain(cert, key)

    async def start(self, serving: KeyPair) -> None:
        self.use(serving)
        app = web.Application()
        app.router.add_post(CONVERT_PATH, self._convert)
        app.router.add_post("/{handler_id}", self._admit)
        self._runner = web.AppRunner(app, access_log=None, handle_signals=False)
        await self._runner.setup()
        await web.TCPSite(self._runner, self.address, self.port, ssl_context=self._context).start()
        self.listening.set()
        get_logger().info("serving webhooks", address=self.address, port=self.port)

    async def stop(self) -> None:
        """Stop serving (once; idempotent), closing the API server's keep-alive connections."""
        runner, self._runner = self._runner, None
        self.listening.clear()
        if runner is not None:
            await runner.cleanup()

    # --- Kopf's admission server protocol -------------------------------------------------------

    async def __call__(self, fn: kopf.WebhookFn) -> AsyncGenerator[kopf.WebhookClientConfig, None]:
        """Kopf calls this once its resources are known. The configurations are ours (not
        Kopf-managed), so the client config yielded is only Kopf's to log."""
        self._admission_fn = fn
        self._admission_ready.set()
        try:
            yield kopf.WebhookClientConfig(url=f"https://{self.address}:{self.port}")
            await asyncio.Event().wait()
        finally:
            self._admission_ready.clear()
            self._admission_fn = None

    # --- requests -------------------------------------------------------------------------------

    @contextlib.contextmanager
    def _timed(self, webhook: str) -> Iterator[None]:
        started = time.perf_counter()
        try:
            yield
        finally:
            if self.on_answer is not None:
                self.on_answer(webhook, time.perf_counter() - started)

    async def _admit(self, request: web.Request) -> web.Response:
        with self._timed(request.match_info["handler_id"]):
            return await self._admission(request)

    async def _convert(self, request: web.Request) -> web.Response:
        with self._timed(CONVERT):
            return await self._conversion(request)

    async def _admission(self, request: web.Request) -> web.Response:
        fn = self._admission_fn
        if fn is None:
            # Kopf has not started (yet): the API server applies the failurePolicy.
            return web.json_response({"message": "the operator is starting"}, status=503)
        try:
            review = await request.json()
        except json.JSONDecodeError as error:
            return web.json_response({"message": f"not JSON: {error}"}, status=400)
        handler_id = request.match_info["handler_id"]
        asked = review.get("request") or {}
        attributes = {
            "admission.operation": str(asked.get("operation", "")),
            "k8s.namespace.name": str(asked.get("namespace", "")),
            "k8s.object.name": str(asked.get("name", "")),
        }
        with tracing.span(f"admission {handler_id}", attributes) as span:
            try:
                answer = await fn(
                    review, webhook=handler_id, headers=dict(request.headers), sslpeer=None
                )
            except Exception as error:  # Kopf's own "unknown resource/handler" errors among them
                tracing.fail(span, error)
                get_logger().warning(
                    "admission request failed", webhook=handler_id, error=str(error)
                )
                return web.json_response({"message": str(error)}, status=400)
            response = answer.get("response") or {}
            # A refusal is the webhook doing its job, not an error of the operator's.
            span.set_attribute("admission.allowed", bool(response.get("allowed")))
            if refusal := (response.get("status") or {}).get("message"):
                span.set_attribute("admission.message", str(refusal))
        return web.json_response(answer)

    async def _conversion(self, request: web.Request) -> web.Response:
        try:
            review: dict[str, Any] = await request.json()
        except json.JSONDecodeError as error:
            return web.json_response({"message": f"not JSON: {error}"}, status=400)
        asked = review.get("request") or {}
        attributes: dict[str, str | int] = {
            "conversion.desired_api_version": str(asked.get("desiredAPIVersion", "")),
            "conversion.objects": len(asked.get("objects") or []),
        }
        with tracing.span("convert Database", attributes) as span:
            answer = conversion.review(review)
            result = answer["response"]["result"]
            if result["status"] != "Success":
                tracing.fail(span, str(result.get("message")))
                get_logger().warning("conversion refused", why=result.get("message"))
        return web.json_response(answer)


@contextlib.asynccontextmanager
async def serving(server: WebhookServer, first: KeyPair) -> AsyncIterator[WebhookServer]:
    await server.start(first)
    try:
        yield server
    finally:
        await server.stop()
