"""The operator's /metrics as Prometheus sees it: a real Prometheus server scrapes a running
operator, and `promtool check metrics` accepts what it serves.

`prometheus` and `promtool` must be on PATH: `hack/install-prometheus.sh` (called by `make test`)
installs them. Their absence fails these tests rather than skipping them, so CI cannot go green
without having checked the metrics.
"""

from __future__ import annotations

import re
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from database_operator import alerts
from database_operator.metrics import Metrics
from tests.cluster import Cluster, play_kubelet, wait_for
from tests.controlplane import free_port
from tests.integration.conftest import RESYNC_S, OperatorProcess, start_operator
from tests.integration.webhooks import (
    BETA,
    apply,
    conversion_kept,
    database,
    start_webhook_operator,
)
from tests.prometheus import (
    http_get,
    prometheus_server,
    required_tool,
    sample,
    scrape,
    value,
)

SCRAPE_INTERVAL_S = 1
#: Time for a change to reach a query: a scrape, and the operator's own reconcile before it.
SCRAPE_TIMEOUT_S = SCRAPE_INTERVAL_S * 5 + 15


def observed(cluster: Cluster, namespace: str, name: str) -> bool:
    db = cluster.get_db(namespace, name)
    return bool(db.get("status", {}).get("observedGeneration") == db["metadata"]["generation"])


@pytest.fixture
def metrics_port() -> int:
    return free_port()


@pytest.fixture
def operator_with_metrics(
    cluster: Cluster, namespace: str, tmp_path: Path, metrics_port: int
) -> Iterator[OperatorProcess]:
    """An operator watching the test's namespace, serving /metrics on ``metrics_port``."""
    running = start_operator(
        cluster,
        tmp_path / "operator.log",
        f"--namespace={namespace}",
        f"--resync-interval={RESYNC_S}",
        f"--metrics-port={metrics_port}",
        "--health-port=0",
    )
    yield running
    assert running.stop() == 0, running.log_text()[-3000:]


@pytest.fixture
def prometheus(tmp_path: Path, metrics_port: int) -> Iterator[str]:
    """A Prometheus server on loopback scraping the operator every second; its base URL."""
    operator = {
        "job_name": "database-operator",
        "static_configs": [{"targets": [f"127.0.0.1:{metrics_port}"]}],
    }
    with prometheus_server(tmp_path, [operator], SCRAPE_INTERVAL_S) as url:
        yield url


def test_prometheus_sees_reconciles_grow_and_databases_by_phase(
    cluster: Cluster, namespace: str, operator_with_metrics: OperatorProcess, prometheus: str
) -> None:
    names = ("a", "b", "c")
    for name in names:
        cluster.create_db(namespace, name, {"engine": "redis"})
    wait_for(
        lambda: all(observed(cluster, namespace, name) for name in names),
        what="the three Databases reconciled",
    )
    play_kubelet(cluster, namespace, "a")

    wait_for(
        lambda: (
            value(prometheus, 'database_operator_databases{phase="Pending"}') == 2
            and value(prometheus, 'database_operator_databases{phase="Active"}') == 1
        ),
        timeout=SCRAPE_TIMEOUT_S,
        what="Prometheus to see 2 Pending and 1 Active Databases",
    )

    reconciles = (
        "sum(database_operator_reconciles_total) + sum(database_operator_resyncs_skipped_total)"
    )
    first = wait_for(
        lambda: value(prometheus, reconciles), timeout=SCRAPE_TIMEOUT_S, what="reconciles > 0"
    )
    # Resyncs every second keep coming for the three Databases (reconciled, or skipped while
    # nothing they read changed): the counters grow.
    wait_for(
        lambda: (value(prometheus, reconciles) or 0) > first,
        timeout=SCRAPE_TIMEOUT_S,
        what=f"{reconciles} to grow past {first}",
    )
    assert value(prometheus, 'database_operator_reconciles_total{result="error"}') == 0
    up = value(prometheus, 'up{job="database-operator"}')
    assert up == 1, "the scrape target must be healthy"


def test_promtool_accepts_the_operators_metrics(
    cluster: Cluster, namespace: str, metrics_port: int, operator_with_metrics: OperatorProcess
) -> None:
    promtool = required_tool("promtool")
    # A reconciled Database gives every metric family samples, the histogram included.
    cluster.create_db(namespace, "db", {"engine": "redis"})
    wait_for(lambda: observed(cluster, namespace, "db"), what="the first reconcile")
    metrics = wait_for(
        lambda: http_get(f"http://127.0.0.1:{metrics_port}/metrics"), what="/metrics to answer"
    )
    assert b"database_operator_reconcile_duration_seconds_bucket" in metrics

    checked = subprocess.run(
        [promtool, "check", "metrics"],
        input=metrics,
        capture_output=True,
        check=False,
        timeout=60,
    )

    report = (checked.stdout + checked.stderr).decode(errors="replace")
    assert checked.returncode == 0, f"promtool check metrics failed:\n{report}"


def test_the_suggested_alerts_are_valid_rules_on_metrics_the_operator_serves(
    tmp_path: Path,
) -> None:
    """The alert rules of alerts.py (docs/operations.md's, the PrometheusRule's): `promtool
    check rules` accepts them, and every database_operator_ metric they read is one the
    operator defines."""
    promtool = required_tool("promtool")
    rules = tmp_path / "rules.yaml"
    rules.write_text(yaml.safe_dump({"groups": alerts.groups("https://docs/operations.md")}))
    checked = subprocess.run(
        [promtool, "check", "rules", str(rules)],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr
    names = {metric.name for metric in Metrics().registry.collect()}
    served = names | {f"{name}_total" for name in names}
    served |= {f"{name}_bucket" for name in served}
    read = set(re.findall(r"database_operator_[a-z_]+", rules.read_text()))
    assert read <= served, read - served


@pytest.fixture(autouse=True, scope="module")
def _conversion_restored(cluster: Cluster) -> Iterator[None]:
    """The webhook test's operator leaves the CRD's conversion on its URL."""
    with conversion_kept(cluster):
        yield


def test_the_operator_serves_failures_by_reason_its_queue_and_its_webhooks_answer_times(
    cluster: Cluster, namespace: str, tmp_path: Path, metrics_port: int
) -> None:
    """Through the real API server: kubectl's writes pass the mutating and validating webhooks,
    a read through v1beta1 the conversion; a Database whose Secret does not exist is Failed."""
    hooks = start_webhook_operator(
        cluster, namespace, tmp_path / "operator.log", f"--metrics-port={metrics_port}"
    )
    try:
        for name, spec in (
            ("fine", {"engine": "redis"}),
            ("orphan", {"engine": "redis", "credentialsSecretRef": {"name": "absent"}}),
        ):
            created = apply(cluster, namespace, database(name, spec))
            assert created.returncode == 0, created.stderr
        wait_for(
            lambda: all(observed(cluster, namespace, name) for name in ("fine", "orphan")),
            what="both Databases reconciled",
        )
        cluster.kubectl("get", BETA, "-n", namespace, "-o", "name")  # converted to v1beta1

        def served() -> dict[tuple[str, frozenset[tuple[str, str]]], float] | None:
            samples = scrape(metrics_port)
            failed = "database_operator_reconcile_failures_total"
            done = (sample(samples, failed, reason="CredentialsSecretNotFound") or 0) >= 1 and all(
                (
                    sample(
                        samples, "database_operator_webhook_duration_seconds_count", webhook=hook
                    )
                    or 0
                )
                >= 1
                for hook in ("mutate", "validate", "convert")
            )
            return samples if done else None

        samples = wait_for(served, timeout=30, what="the failure and the webhooks counted")
    finally:
        assert hooks.process.stop() == 0, hooks.process.log_text()[-3000:]
    assert sample(samples, "database_operator_reconcile_failures_total", reason="ApiError") == 0
    phases = "database_operator_databases"
    assert sample(samples, phases, namespace=namespace, phase="Failed") == 1
    assert sample(samples, phases, namespace=namespace, phase="Degraded") == 0
    # Every create, event and resync waited for a worker: counted, and not for long.
    waits = sample(samples, "database_operator_workqueue_wait_seconds_count") or 0
    assert waits >= 2
    assert sample(samples, "database_operator_workqueue_wait_seconds_bucket", le="5.0") == waits
    assert sample(samples, "database_operator_workqueue_depth") is not None
    restarts = "database_operator_watch_restarts_total"
    assert sample(samples, restarts, resource="databasebackups") == 0
    # This operator wrote its new CA into the Databases CRD's conversion stanza as it started:
    # the API server makes that resource's storage anew, and a watch request it meets on the way
    # is told 429 "storage is (re)initializing" and made again (one restart, and only one).
    assert sample(samples, restarts, resource="databases") in (0, 1)
    reviews = "database_operator_webhook_duration_seconds"
    answered = sample(samples, f"{reviews}_count", webhook="validate") or 0
    took = sample(samples, f"{reviews}_sum", webhook="validate") or 0
    print(
        f"{waits:.0f} reconciles waited for a worker; the validate webhook answered "
        f"{answered:.0f} reviews in {took:.3f} s in all"
    )
