"""`make bench`'s tracing cost: N Databases created with tracing off, on (every reconcile sampled,
exported to a real Jaeger) and on with no collector at all; and what a span costs when off."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from bench_plane import Watcher, control_plane, create_databases
from bench_process import Operator
from tests.controlplane import free_port
from tests.jaeger import Jaeger

#: The runs, in order: the first is the baseline the others are compared with.
MODES = ("off", "jaeger", "absent")


def run_traced(n: int, logs: Path, tracing: str) -> dict[str, Any]:
    """N Databases created with tracing off, on (to a real Jaeger) or on with no collector."""
    jaeger = Jaeger(logs / "jaeger").start() if tracing == "jaeger" else None
    env = {}
    if tracing != "off":
        endpoint = jaeger.otlp_http if jaeger else f"http://127.0.0.1:{free_port()}"
        env = {"OTEL_EXPORTER_OTLP_ENDPOINT": endpoint, "OTEL_TRACES_SAMPLER": "always_on"}
    try:
        with control_plane() as (plane, api):
            watcher = Watcher(api)
            operator = Operator(
                plane.kubeconfig, logs / f"tracing-{tracing}-{n}.log", resync=60.0, env=env
            ).start()
            cpu0 = operator.cpu()
            started = create_databases(api, n)
            finished = watcher.wait_reconciled(n, 900)
            figures = {
                "tracing": tracing,
                "seconds": finished - started,
                "cpu_s": operator.cpu() - cpu0,
                "peak_rss_mib": operator.rss(),
                "spans_dropped": operator.metric("database_operator_trace_spans_dropped_total"),
            }
            operator.stop()  # exports what is queued
            watcher.close()
        if jaeger:
            traces = jaeger.traces("database-operator", "reconcile Database", limit=100_000)
            figures["traces_in_jaeger"] = len(traces)
            spans = sum(len(trace["spans"]) for trace in traces)
            figures["spans_per_trace"] = spans / max(1, len(traces))
    finally:
        if jaeger:
            jaeger.stop()
    return figures


def off_span_ns(calls: int = 1_000_000) -> float:
    """What one span costs with tracing off (the code path every API call takes), in ns."""
    from database_operator import tracing

    assert not tracing.enabled()
    attributes = {"http.request.method": "GET", "url.path": "/api/v1/namespaces/a/secrets/b"}
    started = time.perf_counter()
    for _ in range(calls):
        with tracing.span("GET secrets", attributes, record_errors=False) as span:
            span.set_attribute("http.response.status_code", 200)
    return (time.perf_counter() - started) / calls * 1e9
