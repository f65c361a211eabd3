"""OpenTelemetry traces: one root span per reconcile, a child per Kubernetes API call.

Off unless ``--tracing`` (DATABASE_OPERATOR_TRACING) is set; then configured by the standard
variables: OTEL_EXPORTER_OTLP_ENDPOINT (and _TRACES_ENDPOINT, _HEADERS, _TIMEOUT),
OTEL_EXPORTER_OTLP_PROTOCOL (``http/protobuf``, the default, or ``grpc``), OTEL_SERVICE_NAME,
OTEL_RESOURCE_ATTRIBUTES, OTEL_TRACES_SAMPLER (+ _ARG) and OTEL_BSP_MAX_QUEUE_SIZE /
_MAX_EXPORT_BATCH_SIZE / _SCHEDULE_DELAY.

Off, ``span()`` hands out one shared no-op context: no tracer, no span objects, no context
switch on the event loop. On, spans go to a bounded queue that one background thread exports:
a slow or absent collector never blocks a reconcile; what does not fit, or fails to export, is
dropped and counted (``database_operator_trace_spans_dropped_total``).
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult
from opentelemetry.trace import Span, Status, StatusCode

from database_operator import __version__

TRACER_NAME = "database_operator"
SERVICE_NAME = "database-operator"
PROTOCOLS = ("http/protobuf", "grpc")
#: The OTel spec's defaults for the batch span processor.
DEFAULT_QUEUE = 2048
DEFAULT_BATCH = 512
DEFAULT_DELAY_MS = 5000
#: How long a stopping operator waits for the last spans to go out.
SHUTDOWN_S = 5.0

Attributes = Mapping[str, str | int | bool | float]
OnDrop = Callable[[str, int], None]


class _Current:
    """The process's tracer while tracing is on."""

    tracer: trace.Tracer | None = None


_current = _Current()


class TracingConfigError(ValueError):
    """A tracing variable that cannot be used; the message names it."""


class BoundedBatchProcessor(SpanProcessor):
    """Batches finished spans into a queue of at most ``max_queue`` that one daemon thread
    exports every ``delay_s`` (or sooner, once a batch is full). ``on_drop(reason, n)`` hears
    of every span that never reaches the collector: ``queue_full`` or ``export_failed``.

    The SDK's BatchSpanProcessor drops just the same, but tells only its own logs and OTel
    metrics; the operator's users read Prometheus.
    """

    def __init__(
        self,
        exporter: SpanExporter,
        on_drop: OnDrop,
        max_queue: int = DEFAULT_QUEUE,
        max_batch: int = DEFAULT_BATCH,
        delay_s: float = DEFAULT_DELAY_MS / 1000,
    ) -> None:
        self.exporter = exporter
        self.on_drop = on_drop
        self.max_queue = max_queue
        self.max_batch = min(max_batch, max_queue)
        self.delay_s = delay_s
        self._queue: deque[ReadableSpan] = deque()
        self._lock = threading.Lock()
        self._export_lock = threading.Lock()
        self._wake = threading.Event()
        self._stopping = False
        self._thread = threading.Thread(target=self._run, name="span-export", daemon=True)
        self._thread.start()

    def on_start(self, span: Span, parent_context: otel_context.Context | None = None) -> None:
        return None

    def on_end(self, span: ReadableSpan) -> None:
        if not span.context or not span.context.trace_flags.sampled:
            return
        with self._lock:
            if self._stopping or len(self._queue) >= self.max_queue:
                full = True
            else:
                self._queue.append(span)
                full = False
                ready = len(self._queue) >= self.max_batch
        if full:
            self.on_drop("queue_full", 1)
        elif ready:
            self._wake.set()

    def _run(self) -> None:
        while not self._stopping:
            self._wake.wait(self.delay_s)
            self._wake.clear()
            self._export_all()

    def _take(self) -> list[ReadableSpan]:
        with self._lock:
            return [self._queue.popleft() for _ in range(min(self.max_batch, len(self._queue)))]

    def _export_all(self) -> None:
        with self._export_lock:
            while batch := self._take():
                try:
                    result = self.exporter.export(batch)
                except Exception:  # an exporter bug must not kill the thread
                    result = SpanExportResult.FAILURE
                if result is not SpanExportResult.SUCCESS:
                    self.on_drop("export_failed", len(batch))

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        self._export_all()
        return True

    def shutdown(self) -> None:
        with self._lock:
            self._stopping = True
        self._wake.set()
        self._thread.join(SHUTDOWN_S)
        if not self._thread.is_alive():
            self._export_all()  # what arrived while the thread was finishing
        self.exporter.shutdown()


def _env_int(name: str, default: int) -> int:
    text = os.environ.get(name, "").strip()
    if not text:
        return default
    try:
        value = int(text)
    except ValueError:
        raise TracingConfigError(f"{name}={text!r} is not a whole number") from None
    if value <= 0:
        raise TracingConfigError(f"{name}={text!r} must be above zero")
    return value


def protocol() -> str:
    """The OTLP protocol the standard variables ask for."""
    for name in ("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL"):
        value = os.environ.get(name, "").strip()
        if value:
            if value not in PROTOCOLS:
                raise TracingConfigError(
                    f"{name}={value!r} is not supported: use {' or '.join(PROTOCOLS)}"
                )
            return value
    return PROTOCOLS[0]


def exporter() -> SpanExporter:
    """The OTLP exporter; it reads the endpoint, headers and timeout variables itself."""
    if protocol() == "grpc":
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter

        return OTLPSpanExporter()
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import (
        OTLPSpanExporter as HttpExporter,
    )

    return HttpExporter()


def resource() -> Resource:
    """service.name database-operator unless OTEL_SERVICE_NAME/OTEL_RESOURCE_ATTRIBUTES say
    otherwise (Resource.create reads them; what is passed here would win over them)."""
    attributes: dict[str, str] = {"service.version": __version__}
    named = os.environ.get("OTEL_SERVICE_NAME") or "service.name=" in os.environ.get(
        "OTEL_RESOURCE_ATTRIBUTES", ""
    )
    if not named:
        attributes["service.name"] = SERVICE_NAME
    if pod := os.environ.get("POD_NAME"):
        attributes["k8s.pod.name"] = pod
    return Resource.create(attributes)


def check() -> None:
    """Raise TracingConfigError, naming the variable, for what start() could not use."""
    protocol()
    for name, default in (
        ("OTEL_BSP_MAX_QUEUE_SIZE", DEFAULT_QUEUE),
        ("OTEL_BSP_MAX_EXPORT_BATCH_SIZE", DEFAULT_BATCH),
        ("OTEL_BSP_SCHEDULE_DELAY", DEFAULT_DELAY_MS),
    ):
        _env_int(name, default)


def start(on_drop: OnDrop) -> TracerProvider:
    """Turn tracing on for this process (the sampler comes from OTEL_TRACES_SAMPLER)."""
    provider = TracerProvider(resource=resource())
    provider.add_span_processor(
        BoundedBatchProcessor(
            exporter(),
            on_drop,
            max_queue=_env_int("OTEL_BSP_MAX_QUEUE_SIZE", DEFAULT_QUEUE),
            max_batch=_env_int("OTEL_BSP_MAX_EXPORT_BATCH_SIZE", DEFAULT_BATCH),
            delay_s=_env_int("OTEL_BSP_SCHEDULE_DELAY", DEFAULT_DELAY_MS) / 1000,
        )
    )
    _current.tracer = provider.get_tracer(TRACER_NAME, __version__)
    return provider


def stop(provider: TracerProvider | None) -> None:
    """Export what is queued (within SHUTDOWN_S) and turn tracing off (None: it was off)."""
    _current.tracer = None
    if provider is not None:
        provider.shutdown()


def enabled() -> bool:
    return _current.tracer is not None


class _Off(contextlib.AbstractContextManager[Span]):
    """What ``span()`` returns with tracing off: enters to the invalid (no-op) span."""

    def __enter__(self) -> Span:
        return trace.INVALID_SPAN

    def __exit__(self, *_: object) -> None:
        return None


_OFF = _Off()


def span(
    name: str, attributes: Attributes | None = None, *, record_errors: bool = True
) -> contextlib.AbstractContextManager[Span]:
    """A span, current inside the ``with`` (children and log lines see it). An exception
    leaving it is recorded on it and marks it an error, unless ``record_errors`` is False (the
    caller decides which exceptions are errors, e.g. a 404 that is an answer)."""
    tracer = _current.tracer
    if tracer is None:
        return _OFF
    return tracer.start_as_current_span(
        name,
        attributes=attributes,
        record_exception=record_errors,
        set_status_on_exception=record_errors,
    )


def fail(current: Span, error: BaseException | str) -> None:
    """Mark ``current`` an error, recording the exception (or the reason)."""
    if isinstance(error, BaseException):
        current.record_exception(error)
        current.set_status(Status(StatusCode.ERROR, str(error) or type(error).__name__))
    else:
        current.set_status(Status(StatusCode.ERROR, error))


def log_ids() -> dict[str, str]:
    """trace_id and span_id of the current span, as a log line carries them (W3C hex)."""
    context = trace.get_current_span().get_span_context()
    if not context.is_valid:
        return {}
    return {"trace_id": f"{context.trace_id:032x}", "span_id": f"{context.span_id:016x}"}


Event = tuple[str, dict[str, str]]


def status_events(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[Event]:
    """What changed between two statuses, as span events: the phase, and each condition whose
    status or reason moved."""
    events: list[Event] = []
    if (before := old.get("phase")) != (after := new.get("phase")):
        events.append(
            (f"phase {before or 'None'} -> {after}", {"from": str(before or ""), "to": str(after)})
        )
    previous = {c.get("type"): c for c in old.get("conditions") or []}
    for condition in new.get("conditions") or []:
        kind = condition.get("type")
        was = previous.get(kind) or {}
        if (was.get("status"), was.get("reason")) != (
            condition.get("status"),
            condition.get("reason"),
        ):
            events.append(
                (
                    f"condition {kind} {condition.get('status')}",
                    {
                        "type": str(kind),
                        "status": str(condition.get("status")),
                        "reason": str(condition.get("reason") or ""),
                        "message": str(condition.get("message") or ""),
                    },
                )
            )
    return events


def add_events(current: Span, events: Sequence[Event]) -> None:
    for name, attributes in events:
        current.add_event(name, attributes)
