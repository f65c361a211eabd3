"""The metrics registry: names, the phase gauge's bookkeeping, bounded labels."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from pathlib import Path

from prometheus_client import generate_latest

from database_operator.api.common import Condition
from database_operator.api.models import DatabaseStatus, Phase
from database_operator.controller import failure_reason
from database_operator.metrics import (
    API_ERROR,
    FAILURE_REASONS,
    WATCHED_RESOURCES,
    WEBHOOKS,
    Metrics,
)
from database_operator.reasons import EXPLAINED, Reason
from database_operator.webhooks.configuration import HOOKS
from database_operator.webhooks.server import CONVERT


def sample(metrics: Metrics, name: str, **labels: str) -> float | None:
    return metrics.registry.get_sample_value(name, labels)


def test_phase_gauge_counts_each_database_once_and_forgets_deleted_ones() -> None:
    metrics = Metrics()
    metrics.phases.set("a", "db1", "Pending")
    metrics.phases.set("a", "db2", "Pending")
    metrics.phases.set("a", "db1", "Active")
    assert sample(metrics, "database_operator_databases", namespace="a", phase="Active") == 1
    assert sample(metrics, "database_operator_databases", namespace="a", phase="Pending") == 1
    metrics.phases.forget("a", "db2")
    assert sample(metrics, "database_operator_databases", namespace="a", phase="Pending") == 0
    assert sample(metrics, "database_operator_databases", namespace="a", phase="Failed") == 0


def test_phase_gauge_serves_every_phase_of_each_namespace_with_databases() -> None:
    metrics = Metrics()
    assert sample(metrics, "database_operator_databases", namespace="a", phase="Failed") is None
    metrics.phases.set("a", "db", "Failed")
    metrics.phases.set("b", "db", "Active")
    metrics.phases.set("b", "other", "Active")
    served = {
        (s.labels["namespace"], s.labels["phase"]): s.value
        for family in metrics.phases.collect()
        for s in family.samples
    }
    assert served == {
        **{(ns, phase.value): 0.0 for ns in ("a", "b") for phase in Phase},
        ("a", "Failed"): 1.0,
        ("b", "Active"): 2.0,
    }
    # The alert's `database_operator_databases{phase="Failed"} > 0` selects namespace a alone.
    assert [ns for (ns, phase), count in served.items() if phase == "Failed" and count > 0] == ["a"]
    metrics.phases.forget("a", "db")  # its last Database: the namespace is no longer served
    assert sample(metrics, "database_operator_databases", namespace="a", phase="Failed") is None


def test_known_label_values_start_at_zero() -> None:
    metrics = Metrics()
    for result in ("success", "failed", "paused", "error"):
        assert sample(metrics, "database_operator_reconciles_total", result=result) == 0
    assert sample(metrics, "database_operator_drift_corrections_total", kind="Service") == 0
    for reason in ("queue_full", "export_failed"):
        assert sample(metrics, "database_operator_trace_spans_dropped_total", reason=reason) == 0
    for reason in ("CredentialsSecretNotFound", "PrimaryUnavailable", "ApiError"):
        assert sample(metrics, "database_operator_reconcile_failures_total", reason=reason) == 0
    for webhook in ("mutate", "validate", "convert"):
        assert (
            sample(metrics, "database_operator_webhook_duration_seconds_count", webhook=webhook)
            == 0
        )
    for resource in ("databases", "databasebackups"):
        assert sample(metrics, "database_operator_watch_restarts_total", resource=resource) == 0
    assert sample(metrics, "database_operator_workqueue_depth") == 0
    assert sample(metrics, "database_operator_workqueue_wait_seconds_count") == 0


def test_the_failure_reasons_are_those_a_database_can_be_failed_or_degraded_for() -> None:
    documented = {
        reason
        for reason, explained in EXPLAINED.items()
        if "phase Failed" in explained.where or "Degraded True" in explained.where
    }
    assert set(FAILURE_REASONS) == documented | {API_ERROR}
    assert Reason.RECONCILE_ERROR in documented  # what an unexpected error is counted as


def test_a_reconcile_fails_for_the_degraded_conditions_reason_when_failed_or_degraded() -> None:
    at = datetime(2026, 1, 1, tzinfo=UTC)

    def status(phase: Phase, reason: str) -> DatabaseStatus:
        degraded = Condition(
            type="Degraded", status="True", reason=reason, message="", last_transition_time=at
        )
        return DatabaseStatus(phase=phase, conditions=[degraded])

    assert failure_reason(status(Phase.FAILED, "ChildNameConflict")) == "ChildNameConflict"
    assert failure_reason(status(Phase.DEGRADED, "PrimaryUnavailable")) == "PrimaryUnavailable"
    # Pending with replicas lost is not Degraded (it never was Active): no failure counted.
    assert failure_reason(status(Phase.PENDING, "ReplicasUnavailable")) is None
    assert failure_reason(DatabaseStatus(phase=Phase.ACTIVE)) is None


def test_the_webhooks_timed_are_the_ones_served_and_no_other_path_is_a_label() -> None:
    assert set(WEBHOOKS) == {hook.handler_id for hook in HOOKS} | {CONVERT}
    assert set(WATCHED_RESOURCES) == {"databases", "databasebackups"}
    metrics = Metrics()
    metrics.webhook_took("validate", 0.003)
    metrics.webhook_took("wp-login.php", 0.001)
    name = "database_operator_webhook_duration_seconds"
    assert sample(metrics, f"{name}_count", webhook="validate") == 1
    assert sample(metrics, f"{name}_bucket", webhook="validate", le="0.005") == 1
    assert "wp-login.php" not in generate_latest(metrics.registry).decode()


def test_counting_a_reconcile_costs_a_lookup_not_a_labels_call() -> None:
    metrics = Metrics()
    assert metrics.reconciled("success") is metrics.reconciles.labels("success")
    assert metrics.failed("ApiError") is metrics.reconcile_failures.labels("ApiError")
    assert metrics.failed("ApiError") is metrics.failed("ApiError")


def test_exposition_follows_the_naming_conventions() -> None:
    text = generate_latest(Metrics().registry).decode()
    names = {line.split()[2] for line in text.splitlines() if line.startswith("# TYPE")}
    assert names == {
        "database_operator_reconciles_total",
        "database_operator_reconcile_duration_seconds",
        "database_operator_status_updates_total",
        "database_operator_drift_corrections_total",
        "database_operator_resyncs_skipped_total",
        "database_operator_api_errors_total",
        "database_operator_trace_spans_dropped_total",
        "database_operator_databases",
        "database_operator_active",
        "database_operator_build_info",
        "database_operator_backup_duration_seconds",
        "database_operator_backup_size_bytes",
        "database_operator_backup_failures_total",
        "database_operator_failovers_total",
        "database_operator_database_primaries",
        "database_operator_failover_duration_seconds",
        "database_operator_backup_last_success_timestamp_seconds",
        "database_operator_backup_last_failure_timestamp_seconds",
        "database_operator_backup_schedule_period_seconds",
        "database_operator_reconcile_failures_total",
        "database_operator_workqueue_depth",
        "database_operator_workqueue_wait_seconds",
        "database_operator_webhook_duration_seconds",
        "database_operator_watch_restarts_total",
        "database_operator_gc_pause_seconds",
    }
    assert "_created" not in text


def test_the_readmes_metrics_table_lists_every_metric() -> None:
    readme = (Path(__file__).parents[2] / "README.md").read_text()
    listed = set(re.findall(r"^\| `(database_operator_[a-z_]+)` \|", readme, re.MULTILINE))
    text = generate_latest(Metrics().registry).decode()
    served = {line.split()[2] for line in text.splitlines() if line.startswith("# TYPE")}
    assert listed == served
