"""The HTTPS server of the webhooks: Kopf's admission requests and the CRD's ConversionReviews on
one port.

It is Kopf's admission server (it implements ``kopf.WebhookServerProtocol``: Kopf hands it the
function that runs the ``on.validate``/``on.mutate`` handlers) and serves ``/convert`` beside
it. It starts before Kopf does, so conversion is answered as soon as the process listens; it is
ready (``/readyz``) once it listens and Kopf has handed over its admission function. Every
replica serves, the standbys of an HA pair too: webhooks are not reconciles. ``on_answer``
hears how long each review took to answer (for the metrics), refusals and errors included.

It runs on a thread and an event loop of its own: TLS handshakes, HTTP and JSON, and every
conversion, never take the operator's loop, which renews the Lease and runs the reconciles. An
admission review runs Kopf's handlers on the operator's loop (they are Kopf's), at most
`MAX_ADMITTING` at a time; up to `MAX_WAITING` more wait, and any further one is answered 429
at once, which the API server takes as the webhook failing (its failurePolicy): a flood of
Database writes is refused instead of stalling the operator.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import json
import os
import ssl
import tempfile
import threading
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
#: Admission reviews whose handlers run on the operator's loop at once, and those that may
#: wait for a turn (the API server waits at most the configurations' timeoutSeconds).
MAX_ADMITTING = 8
MAX_WAITING = 64
#: How long a stop waits for the requests in flight (aiohttp's default is 60 s): then they are
#: cancelled. A review the API server sent as the operator stops is answered by the next
#: leader, or its failurePolicy applies; a stop must not outlast its pod's grace period.
SHUTDOWN_TIMEOUT_S = 2.0
#: Hears a webhook's name and the seconds its answer took.
OnAnswer = Callable[[str, float], None]


class WebhookServer:
    """Admission (``/<handler id>``, Kopf's) and conversion (``/convert``) over TLS."""

    def __init__(self, address: str, port: int, on_answer: OnAnswer | None = None) -> None:
        self.address = address
        self.port = port
        self.on_answer = on_answer
        #: Set by the server's thread, read by the health endpoints.
        self.listening = threading.Event()
        self._admission_fn: kopf.WebhookFn | None = None
        self._admission_ready = asyncio.Event()
        self._context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        self._context.minimum_version = ssl.TLSVersion.TLSv1_2
        #: The operator's loop (Kopf's handlers run there), the server's own, and its thread.
        self._operator_loop: asyncio.AbstractEventLoop | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._runner: web.AppRunner | None = None
        #: The server's loop's own: the admissions running, and those waiting for a turn.
        self._turns: asyncio.Semaphore | None = None
        self._waiting = 0

    @property
    def ready(self) -> bool:
        return self.listening.is_set() and self._admission_ready.is_set()

    def use(self, serving: KeyPair) -> None:
        """Serve ``serving`` from now on (new connections; open ones keep theirs). On the
        server's thread while it runs: a TLS context is not to be changed while another thread
        makes connections from it."""
        loop = self._loop
        if loop is not None and loop.is_running():
            loop.call_soon_threadsafe(self._load, serving)
        else:
            self._load(serving)

    def _load(self, serving: KeyPair) -> None:
        # ssl loads a chain only from files: write it where only we can read, then remove it.
        with tempfile.TemporaryDirectory(prefix="webhook-tls-") as folder:
            cert, key = os.path.join(folder, "tls.crt"), os.path.join(folder, "tls.key")
            for path, data in ((cert, serving.cert), (key, serving.key)):
                with open(os.open(path, os.O_WRONLY | os.O_CREAT, 0o600), "wb") as file:
                    file.write(data)
            self._context.load_cert_chain(cert, key)

    async def start(self, serving: KeyPair) -> None:
        """Listen, on the server's own thread; raises what binding the port raised."""
        self._load(serving)
        self._operator_loop = asyncio.get_running_loop()
        listening: concurrent.futures.Future[None] = concurrent.futures.Future()
        self._thread = threading.Thread(
            target=self._serve, args=(listening,), name="webhooks", daemon=True
        )
        self._thread.start()
        await asyncio.wrap_future(listening)
        self.listening.set()
        get_logger().info("serving webhooks", address=self.address, port=self.port)

    def _serve(self, listening: concurrent.futures.Future[None]) -> None:
        """The server's thread: its loop, until `stop` stops it."""
        loop = asyncio.new_event_loop()
        asyncio.set_event_loop(loop)
        try:
            loop.run_until_complete(self._listen())
        except BaseException as error:  # handed to `start`, which raises it
            listening.set_exception(error)
            loop.close()
            return
        self._loop = loop
        listening.set_result(None)
        try:
            loop.run_forever()
        finally:
            loop.run_until_complete(loop.shutdown_asyncgens())
            loop.close()

    async def _listen(self) -> None:
        self._turns = asyncio.Semaphore(MAX_ADMITTING)
        app = web.Application()
        app.router.add_post(CONVERT_PATH, self._convert)
        app.router.add_post("/{handler_id}", self._admit)
        runner = web.AppRunner(
            app, access_log=None, handle_signals=False, shutdown_timeout=SHUTDOWN_TIMEOUT_S
        )
        await runner.setup()
        try:
            await web.TCPSite(runner, self.address, self.port, ssl_context=self._context).start()
        except BaseException:
            await runner.cleanup()
            raise
        self._runner = runner

    async def stop(self) -> None:
        """Stop serving (once; idempotent), closing the API server's keep-alive connections,
        and end the server's thread."""
        loop, thread, self._loop, self._thread = self._loop, self._thread, None, None
        self.listening.clear()
        if loop is None or thread is None:
            return
        runner, self._runner = self._runner, None
        if runner is not None:
            await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(runner.cleanup(), loop))
        loop.call_soon_threadsafe(loop.stop)
        await asyncio.to_thread(thread.join)

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
        fn, operator_loop, turns = self._admission_fn, self._operator_loop, self._turns
        if fn is None or operator_loop is None or turns is None:
            # Kopf has not started (yet): the API server applies the failurePolicy.
            return web.json_response({"message": "the operator is starting"}, status=503)
        if self._waiting >= MAX_WAITING:
            get_logger().warning("admission request refused: too many at once")
            return web.json_response(
                {"message": "too many admission requests at once: try again"}, status=429
            )
        try:
            review = await request.json()
        except json.JSONDecodeError as error:
            return web.json_response({"message": f"not JSON: {error}"}, status=400)
        self._waiting += 1
        try:
            await turns.acquire()
        finally:
            self._waiting -= 1
        try:
            return await self._admit_on(operator_loop, fn, request, review)
        finally:
            turns.release()

    async def _admit_on(
        self,
        operator_loop: asyncio.AbstractEventLoop,
        fn: kopf.WebhookFn,
        request: web.Request,
        review: Any,
    ) -> web.Response:
        """Kopf's handlers on the operator's loop, awaited here."""
        handler_id = request.match_info["handler_id"]
        asked = review.get("request") or {}
        attributes = {
            "admission.operation": str(asked.get("operation", "")),
            "k8s.namespace.name": str(asked.get("namespace", "")),
            "k8s.object.name": str(asked.get("name", "")),
        }
        with tracing.span(f"admission {handler_id}", attributes) as span:
            headers = dict(request.headers)

            async def handled() -> Any:
                return await fn(review, webhook=handler_id, headers=headers, sslpeer=None)

            try:
                answer = await asyncio.wrap_future(
                    asyncio.run_coroutine_threadsafe(handled(), operator_loop)
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
