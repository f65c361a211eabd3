"""Traces of reconciles in a real Jaeger: the operator exports them over OTLP (the standard
OTEL_* variables), the tests read them back through Jaeger's query API and check the tree a
user would look at: one root span per reconcile, a child per Kubernetes API call, the status
write, an error span where the API server refused a change, and log lines that name the trace.
"""

from __future__ import annotations

import os
import subprocess
import sys
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.cluster import Cluster, wait_for
from tests.controlplane import free_port
from tests.integration.conftest import OperatorProcess, start_operator
from tests.integration.waiting import observed, phase_is, wait_for_status
from tests.jaeger import Jaeger, parent_of, tags

ROOT_SPAN = "reconcile Database"


@pytest.fixture(scope="module")
def jaeger(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Jaeger]:
    running = Jaeger(tmp_path_factory.mktemp("jaeger")).start()
    try:
        yield running
    finally:
        running.stop()


@pytest.fixture
def service() -> str:
    """A service name of the test's own: its traces and no other test's."""
    return f"database-operator-{uuid.uuid4().hex[:6]}"


def start_traced(
    cluster: Cluster, namespace: str, jaeger: Jaeger, service: str, log: Path, *extra: str
) -> OperatorProcess:
    return start_operator(
        cluster,
        log,
        f"--namespace={namespace}",
        "--tracing",
        "--metrics-port=0",
        "--health-port=0",
        *extra,
        env={
            "OTEL_EXPORTER_OTLP_ENDPOINT": jaeger.otlp_http,
            "OTEL_SERVICE_NAME": service,
            "OTEL_RESOURCE_ATTRIBUTES": "deployment.environment=test",
            "OTEL_BSP_SCHEDULE_DELAY": "200",
        },
    )


@pytest.fixture
def traced(
    cluster: Cluster, namespace: str, jaeger: Jaeger, service: str, tmp_path: Path
) -> Iterator[OperatorProcess]:
    running = start_traced(cluster, namespace, jaeger, service, tmp_path / "operator.log")
    yield running
    assert running.stop() == 0, running.log_text()[-3000:]


def reconcile_traces(jaeger: Jaeger, service: str, name: str) -> list[dict[str, Any]]:
    """The traces whose root is a reconcile of the Database ``name``, oldest first."""
    found = []
    for trace in jaeger.traces(service, ROOT_SPAN):
        roots = [s for s in trace["spans"] if s["operationName"] == ROOT_SPAN]
        if roots and tags(roots[0]).get("database.name") == name:
            found.append(trace)
    return sorted(found, key=lambda t: min(s["startTime"] for s in t["spans"]))


def root_of(trace: dict[str, Any]) -> dict[str, Any]:
    roots: list[dict[str, Any]] = [s for s in trace["spans"] if parent_of(s) is None]
    assert len(roots) == 1, [s["operationName"] for s in roots]
    return roots[0]


def children_of(trace: dict[str, Any], span: dict[str, Any]) -> list[dict[str, Any]]:
    return [s for s in trace["spans"] if parent_of(s) == span["spanID"]]


def test_a_reconcile_is_one_trace_of_its_api_calls_and_status_write(
    cluster: Cluster, namespace: str, jaeger: Jaeger, service: str, traced: OperatorProcess
) -> None:
    cluster.create_db(namespace, "orders", {"engine": "redis"})
    wait_for_status(cluster, namespace, "orders", "phase Pending", phase_is("Pending"))

    def first_trace() -> dict[str, Any] | None:
        traces = reconcile_traces(jaeger, service, "orders")
        return traces[0] if traces else None

    trace = wait_for(first_trace, timeout=30, what="the first reconcile's trace in Jaeger")
    process = trace["processes"][root_of(trace)["processID"]]
    assert process["serviceName"] == service
    assert {"key": "deployment.environment", "type": "string", "value": "test"} in process["tags"]

    root = root_of(trace)
    assert root["operationName"] == ROOT_SPAN
    assert tags(root) | {
        "k8s.namespace.name": namespace,
        "database.name": "orders",
        "database.generation": 1,
        "reconcile.result": "success",
    } == tags(root)
    # What woke it: the watch's first sight of the object (create, or resume on a re-list).
    assert tags(root)["reconcile.trigger"] in ("create", "resume")
    # The phase change is an event on the root span (Jaeger shows events as its logs).
    events = [{field["key"]: field["value"] for field in log["fields"]} for log in root["logs"]]
    assert {"event": "phase None -> Pending", "from": "", "to": "Pending"} in events
    assert any(e["event"] == "condition Ready False" for e in events), events

    children = children_of(trace, root)
    calls = [tags(s) for s in children if "http.request.method" in tags(s)]
    # The children it created or server-side applied: one call each, with its answer.
    by_call = {(call["http.request.method"], call["k8s.resource"]): call for call in calls}
    assert by_call[("PATCH", "deployments")]["k8s.object.name"] == "orders"
    assert by_call[("PATCH", "services")]["k8s.object.name"] == "orders"
    assert ("POST", "secrets") in by_call or ("PATCH", "secrets") in by_call, sorted(by_call)
    for span in children:
        attributes = tags(span)
        if "http.request.method" not in attributes:
            continue
        method, resource = attributes["http.request.method"], attributes["k8s.resource"]
        assert span["operationName"] == f"{method} {resource}"
        assert attributes["k8s.namespace.name"] == namespace
        # 404: a read that found nothing is an answer, not an error.
        assert attributes["http.response.status_code"] in (200, 201, 404), attributes
        assert "error" not in attributes

    # The status write: its own span, and in it the PATCH of the status subresource.
    writes = [s for s in children if s["operationName"] == "write status"]
    assert len(writes) == 1
    assert tags(writes[0])["database.phase"] == "Pending"
    (patch,) = children_of(trace, writes[0])
    assert patch["operationName"] == "PATCH databases/status"
    assert tags(patch)["http.response.status_code"] == 200
    # Children start after their parent and end before it; but the Kubernetes Events it posts
    # (children too) go out in the background and may outlive it.
    for span in trace["spans"]:
        assert span["startTime"] >= root["startTime"]
        if span["operationName"] != "POST events":
            assert span["startTime"] + span["duration"] <= root["startTime"] + root["duration"]


def test_a_refused_change_is_an_error_span_and_the_log_line_finds_its_trace(
    cluster: Cluster, namespace: str, jaeger: Jaeger, service: str, traced: OperatorProcess
) -> None:
    """Injected failure: no StorageClass here allows expansion, so the API server refuses the
    PVC's growth; the reconcile reports Failed, and its trace shows which call failed."""
    cluster.create_db(namespace, "grows", {"engine": "redis", "storage": {"size": "1Gi"}})
    wait_for_status(cluster, namespace, "grows", "first reconcile", observed)
    cluster.patch_db(namespace, "grows", {"spec": {"storage": {"size": "5Gi"}}})
    wait_for_status(cluster, namespace, "grows", "Failed", phase_is("Failed"))

    def failed_trace() -> dict[str, Any] | None:
        for trace in reconcile_traces(jaeger, service, "grows"):
            if tags(root_of(trace)).get("database.generation") == 2:
                return trace
        return None

    trace = wait_for(failed_trace, timeout=30, what="the trace of generation 2")
    root = root_of(trace)
    assert tags(root)["reconcile.result"] == "failed"
    assert tags(root)["reconcile.trigger"] == "update"
    refused = [s for s in trace["spans"] if tags(s).get("error") is True]
    assert [s["operationName"] for s in refused] == ["PATCH persistentvolumeclaims"]
    attributes = tags(refused[0])
    assert attributes["k8s.object.name"] == "grows-data"
    assert attributes["http.response.status_code"] in (403, 422)
    assert attributes["otel.status_code"] == "ERROR"
    # The exception is recorded on the span (an "exception" event).
    exception = [
        {field["key"]: field["value"] for field in log["fields"]} for log in refused[0]["logs"]
    ]
    assert any(
        e.get("event") == "exception" and "grows-data" in e.get("exception.message", "")
        for e in exception
    ), exception

    # The operator's log line about this reconcile names the trace: Jaeger finds it by that id.
    lines = [
        line
        for line in traced.log_lines()
        if line.get("event") == "reconciled"
        and line.get("name") == "grows"
        and line.get("result") == "failed"
    ]
    assert lines, traced.log_text()[-3000:]
    assert lines[-1]["trace_id"] == trace["traceID"]
    assert len(lines[-1]["span_id"]) == 16
    found = jaeger.trace(lines[-1]["trace_id"])
    assert found is not None
    assert root_of(found)["spanID"] == root["spanID"]


def test_without_a_collector_reconciles_go_on_and_the_dropped_spans_are_counted(
    cluster: Cluster, namespace: str, tmp_path: Path
) -> None:
    """Tracing on, the collector absent: Databases are reconciled as before; spans that cannot
    be exported are dropped and counted, never waited for."""
    metrics_port = free_port()
    operator = start_operator(
        cluster,
        tmp_path / "operator.log",
        f"--namespace={namespace}",
        "--tracing",
        f"--metrics-port={metrics_port}",
        "--health-port=0",
        env={
            # Nothing listens there: every export fails (connection refused).
            "OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{free_port()}",
            "OTEL_EXPORTER_OTLP_TIMEOUT": "1",
            "OTEL_BSP_SCHEDULE_DELAY": "100",
            "OTEL_BSP_MAX_QUEUE_SIZE": "64",
        },
    )
    try:
        for index in range(5):
            cluster.create_db(namespace, f"db-{index}", {"engine": "redis"})
        for index in range(5):
            wait_for_status(cluster, namespace, f"db-{index}", "phase Pending", phase_is("Pending"))

        def dropped() -> float:
            url = f"http://127.0.0.1:{metrics_port}/metrics"
            with urllib.request.urlopen(url, timeout=5) as answer:
                text = answer.read().decode()
            return sum(
                float(line.split()[-1])
                for line in text.splitlines()
                if line.startswith("database_operator_trace_spans_dropped_total{")
            )

        wait_for(lambda: dropped() > 0, timeout=60, what="dropped spans to be counted")
    finally:
        assert operator.stop() == 0, operator.log_text()[-3000:]
    assert "Traceback" not in operator.log_text()


def test_tracing_off_sends_nothing_and_logs_carry_no_trace_ids(
    cluster: Cluster, namespace: str, operator: OperatorProcess
) -> None:
    cluster.create_db(namespace, "plain", {"engine": "redis"})
    wait_for_status(cluster, namespace, "plain", "phase Pending", phase_is("Pending"))
    lines = operator.log_lines()
    assert lines
    assert not [line for line in lines if "trace_id" in line]


def test_a_bad_tracing_variable_is_refused_naming_it(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "database_operator.cli", "run", "--tracing"],
        env={**os.environ, "OTEL_EXPORTER_OTLP_PROTOCOL": "http/json"},
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert done.returncode == 2
    assert "OTEL_EXPORTER_OTLP_PROTOCOL='http/json' is not supported" in done.stderr
