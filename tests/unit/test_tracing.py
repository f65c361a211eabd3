"""Tracing's own logic: the bounded export queue (drops counted, never blocking), the span
events of a status change, API paths as span names, and the settings' errors. The trace tree
itself is checked against a real Jaeger (tests/integration/test_tracing.py)."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator, Sequence

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from database_operator import tracing
from database_operator.kube.api import describe


class Blocking(SpanExporter):
    """A collector that hangs until released."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.exported: list[ReadableSpan] = []

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        self.release.wait(10)
        self.exported.extend(spans)
        return SpanExportResult.SUCCESS


class Failing(SpanExporter):
    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        return SpanExportResult.FAILURE


def provider_with(processor: tracing.BoundedBatchProcessor) -> TracerProvider:
    provider = TracerProvider()
    provider.add_span_processor(processor)
    return provider


def test_spans_are_exported_in_batches_by_the_background_thread() -> None:
    exporter = InMemorySpanExporter()
    drops: list[tuple[str, int]] = []
    processor = tracing.BoundedBatchProcessor(
        exporter, lambda r, n: drops.append((r, n)), max_queue=100, max_batch=10, delay_s=0.05
    )
    tracer = provider_with(processor).get_tracer("t")
    for index in range(25):
        with tracer.start_as_current_span(f"s{index}"):
            pass
    deadline = time.monotonic() + 5
    while len(exporter.get_finished_spans()) < 25 and time.monotonic() < deadline:
        time.sleep(0.02)
    assert len(exporter.get_finished_spans()) == 25
    assert drops == []
    processor.shutdown()


def test_a_hung_collector_never_blocks_and_what_does_not_fit_is_counted() -> None:
    exporter = Blocking()
    drops: list[tuple[str, int]] = []
    processor = tracing.BoundedBatchProcessor(
        exporter, lambda r, n: drops.append((r, n)), max_queue=5, max_batch=5, delay_s=0.01
    )
    tracer = provider_with(processor).get_tracer("t")
    with tracer.start_as_current_span("first"):
        pass
    time.sleep(0.1)  # the thread took "first" and hangs exporting it
    started = time.monotonic()
    for index in range(20):
        with tracer.start_as_current_span(f"s{index}"):
            pass
    assert time.monotonic() - started < 0.5, "ending spans must not wait for the collector"
    assert sum(n for reason, n in drops if reason == "queue_full") == 15
    exporter.release.set()
    processor.shutdown()
    assert len(exporter.exported) == 6  # "first", then the five that fitted


def test_failed_exports_are_counted_as_dropped() -> None:
    drops: list[tuple[str, int]] = []
    processor = tracing.BoundedBatchProcessor(
        Failing(), lambda r, n: drops.append((r, n)), max_queue=10, max_batch=10, delay_s=10
    )
    tracer = provider_with(processor).get_tracer("t")
    for index in range(3):
        with tracer.start_as_current_span(f"s{index}"):
            pass
    processor.force_flush()
    assert drops == [("export_failed", 3)]
    processor.shutdown()


def test_shutdown_exports_what_is_queued() -> None:
    exporter = InMemorySpanExporter()
    processor = tracing.BoundedBatchProcessor(exporter, lambda r, n: None, delay_s=60)
    tracer = provider_with(processor).get_tracer("t")
    with tracer.start_as_current_span("last"):
        pass
    processor.shutdown()
    assert [s.name for s in exporter.get_finished_spans()] == ["last"]


@pytest.fixture
def traced(monkeypatch: pytest.MonkeyPatch) -> Iterator[InMemorySpanExporter]:
    """Tracing on, its spans kept in memory."""
    exporter = InMemorySpanExporter()
    monkeypatch.setattr(tracing, "exporter", lambda: exporter)
    monkeypatch.setenv("OTEL_BSP_SCHEDULE_DELAY", "10")
    provider = tracing.start(lambda r, n: None)
    yield exporter
    tracing.stop(provider)


def test_off_spans_are_one_shared_no_op() -> None:
    assert not tracing.enabled()
    with tracing.span("reconcile Database", {"database.name": "x"}) as span:
        assert span is trace.INVALID_SPAN
        span.set_attribute("ignored", 1)
        assert tracing.log_ids() == {}
    assert tracing.span("a") is tracing.span("b")
    tracing.stop(None)  # stopping what never started: nothing to do


def test_on_spans_nest_and_log_ids_name_the_current_one(traced: InMemorySpanExporter) -> None:
    with tracing.span("reconcile Database") as root:
        ids = tracing.log_ids()
        with tracing.span("GET secrets", record_errors=False):
            pass
    assert ids == {
        "trace_id": f"{root.get_span_context().trace_id:032x}",
        "span_id": f"{root.get_span_context().span_id:016x}",
    }
    deadline = time.monotonic() + 5
    while len(traced.get_finished_spans()) < 2 and time.monotonic() < deadline:
        time.sleep(0.02)
    child = next(s for s in traced.get_finished_spans() if s.name == "GET secrets")
    assert child.parent is not None
    assert child.parent.span_id == root.get_span_context().span_id
    assert len(ids["trace_id"]) == 32
    assert len(ids["span_id"]) == 16


def test_an_escaping_exception_marks_the_span_unless_the_caller_decides(
    traced: InMemorySpanExporter,
) -> None:
    with pytest.raises(KeyError), tracing.span("write status"):
        raise KeyError("x")
    with pytest.raises(KeyError), tracing.span("GET secrets", record_errors=False):
        raise KeyError("404 is an answer")
    deadline = time.monotonic() + 5
    while len(traced.get_finished_spans()) < 2 and time.monotonic() < deadline:
        time.sleep(0.02)
    by_name = {s.name: s for s in traced.get_finished_spans()}
    assert by_name["write status"].status.status_code is trace.StatusCode.ERROR
    assert by_name["GET secrets"].status.status_code is trace.StatusCode.UNSET


def test_status_events_name_the_phase_and_the_conditions_that_moved() -> None:
    old = {
        "phase": "Pending",
        "conditions": [
            {"type": "Ready", "status": "False", "reason": "PodsNotReady"},
            {"type": "Degraded", "status": "False", "reason": "AsExpected"},
        ],
    }
    new = {
        "phase": "Active",
        "conditions": [
            {"type": "Ready", "status": "True", "reason": "AllReplicasReady", "message": "ok"},
            {"type": "Degraded", "status": "False", "reason": "AsExpected"},
        ],
    }
    assert tracing.status_events(old, new) == [
        ("phase Pending -> Active", {"from": "Pending", "to": "Active"}),
        (
            "condition Ready True",
            {"type": "Ready", "status": "True", "reason": "AllReplicasReady", "message": "ok"},
        ),
    ]
    assert tracing.status_events(new, new) == []
    assert tracing.status_events({}, {"phase": "Pending"})[0][0] == "phase None -> Pending"


@pytest.mark.parametrize(
    ("verb", "path", "name", "attributes"),
    [
        (
            "PATCH",
            "/apis/apps/v1/namespaces/shop/deployments/orders",
            "PATCH deployments",
            {
                "k8s.resource": "deployments",
                "k8s.namespace.name": "shop",
                "k8s.object.name": "orders",
            },
        ),
        (
            "PATCH",
            "/apis/databases.example.com/v1/namespaces/shop/databases/orders/status",
            "PATCH databases/status",
            {"k8s.resource": "databases/status", "k8s.object.name": "orders"},
        ),
        ("POST", "/api/v1/namespaces/shop/secrets", "POST secrets", {"k8s.resource": "secrets"}),
        ("GET", "/api/v1/namespaces/shop", "GET namespaces", {"k8s.object.name": "shop"}),
        ("GET", "/apis/databases.example.com/v1", "GET /apis/databases.example.com/v1", {}),
    ],
)
def test_api_calls_are_named_by_verb_and_resource_never_by_object(
    verb: str, path: str, name: str, attributes: dict[str, str]
) -> None:
    described_name, described = describe(verb, path)
    assert described_name == name
    assert (
        described.items() >= {**attributes, "http.request.method": verb, "url.path": path}.items()
    )


@pytest.mark.parametrize(
    ("variable", "value", "message"),
    [
        ("OTEL_EXPORTER_OTLP_PROTOCOL", "http/json", "is not supported: use http/protobuf or grpc"),
        ("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "thrift", "is not supported"),
        ("OTEL_BSP_MAX_QUEUE_SIZE", "lots", "is not a whole number"),
        ("OTEL_BSP_SCHEDULE_DELAY", "0", "must be above zero"),
    ],
)
def test_a_variable_tracing_cannot_use_is_named(
    monkeypatch: pytest.MonkeyPatch, variable: str, value: str, message: str
) -> None:
    monkeypatch.setenv(variable, value)
    with pytest.raises(tracing.TracingConfigError, match=variable) as refused:
        tracing.check()
    assert message in str(refused.value)


def test_protocols_default_to_http_and_the_traces_variable_wins(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("OTEL_EXPORTER_OTLP_PROTOCOL", raising=False)
    monkeypatch.delenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", raising=False)
    assert tracing.protocol() == "http/protobuf"
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "grpc")
    assert tracing.protocol() == "grpc"
    assert type(tracing.exporter()).__module__.endswith("grpc.trace_exporter")


def test_the_service_is_named_unless_the_standard_variables_name_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("OTEL_SERVICE_NAME", raising=False)
    monkeypatch.setenv("OTEL_RESOURCE_ATTRIBUTES", "deployment.environment=prod")
    monkeypatch.setenv("POD_NAME", "database-operator-0")
    attributes = tracing.resource().attributes
    assert attributes["service.name"] == "database-operator"
    assert attributes["deployment.environment"] == "prod"
    assert attributes["k8s.pod.name"] == "database-operator-0"
    monkeypatch.setenv("OTEL_SERVICE_NAME", "dbop-staging")
    assert tracing.resource().attributes["service.name"] == "dbop-staging"
