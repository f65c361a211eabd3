"""The metrics registry: names, the phase gauge's bookkeeping, bounded labels."""

from __future__ import annotations

from prometheus_client import generate_latest

from database_operator.metrics import Metrics


def sample(metrics: Metrics, name: str, **labels: str) -> float | None:
    return metrics.registry.get_sample_value(name, labels)


def test_phase_gauge_counts_each_database_once_and_forgets_deleted_ones() -> None:
    metrics = Metrics()
    metrics.phases.set("a", "db1", "Pending")
    metrics.phases.set("a", "db2", "Pending")
    metrics.phases.set("a", "db1", "Active")
    assert sample(metrics, "database_operator_databases", phase="Active") == 1
    assert sample(metrics, "database_operator_databases", phase="Pending") == 1
    metrics.phases.forget("a", "db2")
    assert sample(metrics, "database_operator_databases", phase="Pending") == 0
    assert sample(metrics, "database_operator_databases", phase="Failed") == 0


def test_known_label_values_start_at_zero() -> None:
    metrics = Metrics()
    for result in ("success", "failed", "paused", "error"):
        assert sample(metrics, "database_operator_reconciles_total", result=result) == 0
    assert sample(metrics, "database_operator_drift_corrections_total", kind="Service") == 0
    for reason in ("queue_full", "export_failed"):
        assert sample(metrics, "database_operator_trace_spans_dropped_total", reason=reason) == 0


def test_exposition_follows_the_naming_conventions() -> None:
    text = generate_latest(Metrics().registry).decode()
    names = {line.split()[2] for line in text.splitlines() if line.startswith("# TYPE")}
    assert names == {
        "database_operator_reconciles_total",
        "database_operator_reconcile_duration_seconds",
        "database_operator_status_updates_total",
        "database_operator_drift_corrections_total",
        "database_operator_api_errors_total",
        "database_operator_trace_spans_dropped_total",
        "database_operator_databases",
        "database_operator_active",
        "database_operator_build_info",
        "database_operator_backup_duration_seconds",
        "database_operator_backup_size_bytes",
        "database_operator_backup_failures_total",
        "database_operator_backup_last_success_timestamp_seconds",
        "database_operator_backup_last_failure_timestamp_seconds",
        "database_operator_backup_schedule_period_seconds",
    }
    assert "_created" not in text
