"""The operator's Prometheus alerts: the one source of the PrometheusRule the project ships
(config/prometheus, the chart's files/prometheus-rules.yaml) and of the suggested alerts in
docs/operations.md, all written by `make manifests`.

Severities are labels a team routes by: ``critical`` pages (nothing reconciles; a Database has
no recent backup to restore), ``warning`` waits for working hours.

The backup alerts read the per-Database gauges of metrics.py, each taken once per Database
(``max by (namespace, database)``): the newest of what the scraped replicas say (a standby that
was active keeps its last values), without the scrape's labels (instance, pod), so a failover
neither splits an alert in two nor restarts its ``for``.

- ``DatabaseBackupTooOld``: a Database with a schedule (its period gauge is present: not
  suspended) whose newest successful backup is older than two periods, the Database's
  ``NoRecentBackup``. A schedule whose backups have never succeeded has no success to age: it
  fires once they have failed and none completed (its second branch). The gauges cannot say
  since when such a schedule runs (the condition counts from its first scheduled backup), and
  a Database with no restorable backup whose backups fail is worth a page before two periods
  are up. A new Database whose first backup has not finished (neither timestamp) does not
  fire: nothing has gone wrong yet; a backup that never finishes shows as ``NoRecentBackup``
  on the Database, not here.
- ``DatabaseBackupFailed``: the newest backup of a Database failed (its failure is newer than
  its newest success, or it has failures and no success), the Database's ``LastBackupFailed``;
  a later success resolves it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from database_operator.manifest import Manifest

Rule = dict[str, Any]
Group = dict[str, Any]

#: How long a backup alert's condition must hold before it fires: a blip (a scrape as a backup
#: completes) is no page, and both are short beside the period of any sensible schedule. The
#: per-Database gauges are absent from an operator's start until it has reconciled the
#: Database, so a restart resolves a firing alert, which fires again after its ``for``.
BACKUP_TOO_OLD_FOR = "10m"
BACKUP_FAILED_FOR = "5m"

_SUCCESS = "database_operator_backup_last_success_timestamp_seconds"
_FAILURE = "database_operator_backup_last_failure_timestamp_seconds"
_PERIOD = "database_operator_backup_schedule_period_seconds"


def _per_database(metric: str) -> str:
    return f"max by (namespace, database) ({metric})"


SUCCESS, FAILURE, PERIOD = (_per_database(metric) for metric in (_SUCCESS, _FAILURE, _PERIOD))

BACKUP_TOO_OLD = f"""\
(
  time() - {SUCCESS}
  > 2 * {PERIOD}
)
or
(
  {PERIOD}
  and {FAILURE}
  unless {SUCCESS}
)"""

BACKUP_FAILED = f"""\
(
  {FAILURE}
  > {SUCCESS}
)
or
(
  {FAILURE}
  unless {SUCCESS}
)"""

#: What an alert about one Database names in its summary.
DATABASE = "{{ $labels.namespace }}/{{ $labels.database }}"
#: Its DatabaseBackups, for the first command to run.
BACKUPS = (
    "kubectl get dbbackup -n {{ $labels.namespace }}"
    " -l databases.example.com/database={{ $labels.database }}"
)


def _alert(
    name: str,
    expr: str,
    severity: str,
    summary: str,
    *,
    runbook: str,
    duration: str | None = None,
    description: str | None = None,
) -> Rule:
    rule: Rule = {"alert": name, "expr": expr}
    if duration:
        rule["for"] = duration
    annotations = {"summary": summary}
    if description:
        annotations["description"] = description
    annotations["runbook_url"] = runbook
    return {**rule, "labels": {"severity": severity}, "annotations": annotations}


def groups(docs: str) -> list[Group]:
    """The rule groups; ``runbook_url`` points into ``docs``, the address of
    docs/operations.md (where it is published is the caller's to know)."""
    operator = [
        _alert(
            "DatabaseOperatorDown",
            'absent(up{job=~".*database-operator.*"} == 1)',
            "critical",
            "no database-operator replica is up: Databases are not reconciled and, with the "
            "webhooks on, Database writes are refused",
            duration="5m",
            runbook=f"{docs}#admission-and-conversion-webhooks",
        ),
        _alert(
            "DatabaseFailed",
            'database_operator_databases{phase="Failed"} > 0',
            "warning",
            "{{ $value }} Database(s) cannot be acted on: kubectl get db -A; see the Ready "
            "condition's reason",
            duration="10m",
            runbook=f"{docs}#troubleshooting-by-condition-reason",
        ),
        _alert(
            "DatabaseDegraded",
            'database_operator_databases{phase="Degraded"} > 0',
            "warning",
            "{{ $value }} Database(s) lost pods or cannot be reconciled: kubectl get db -A; see "
            "the Degraded condition's reason",
            duration="15m",
            runbook=f"{docs}#replicas-and-failover",
        ),
        _alert(
            "DatabaseOperatorReconcileErrors",
            'rate(database_operator_reconciles_total{result="error"}[10m]) > 0.1',
            "warning",
            "reconciles keep failing on API errors: the ReconcileError condition and the "
            "operator's `reconcile failed` log lines name the call",
            duration="15m",
            runbook=f"{docs}#troubleshooting-by-condition-reason",
        ),
        _alert(
            "DatabaseOperatorApiErrors",
            "sum by (code) (rate(database_operator_api_errors_total[10m])) > 0.1",
            "warning",
            "the API server keeps answering the operator with {{ $labels.code }}",
            duration="15m",
            runbook=f"{docs}#troubleshooting-by-condition-reason",
        ),
        _alert(
            "DatabaseOperatorSlowReconciles",
            "histogram_quantile(0.99, rate(database_operator_reconcile_duration_seconds_bucket"
            "[10m])) > 5",
            "warning",
            "one reconcile in a hundred takes more than 5 s: a slow API server, or too few "
            "workers or shards for the Databases watched",
            duration="30m",
            runbook=f"{docs}#scale-and-sharding",
        ),
        _alert(
            "DatabaseDriftKeepsComingBack",
            "sum by (kind) (increase(database_operator_drift_corrections_total[1h])) > 10",
            "warning",
            "something else keeps changing the Databases' {{ $labels.kind }} children, and the "
            "operator keeps changing them back",
            runbook=f"{docs}#what-the-operator-touches-and-what-it-never-does",
        ),
        _alert(
            "DatabaseOperatorNoActiveReplica",
            "max(database_operator_active) == 0",
            "critical",
            "no operator replica leads: kubectl get lease -n <operator namespace> "
            "database-operator -o jsonpath='{.spec.holderIdentity}'",
            duration="5m",
            description="Every replica stands by: none can take or renew the Lease (the API "
            "server out of reach, or the Lease's Role missing), or something else holds it "
            "(another release with the same Lease name). Nothing reconciles. With shards, each "
            "shard's Deployment has its own Lease and leader.",
            runbook=f"{docs}#high-availability",
        ),
        _alert(
            "DatabaseOperatorTracesDropped",
            "sum by (reason) (rate(database_operator_trace_spans_dropped_total[15m])) > 0",
            "warning",
            "traces are lost ({{ $labels.reason }}): is the OTLP collector up and reachable?",
            duration="30m",
            runbook=f"{docs}#traces",
        ),
    ]
    backups = [
        _alert(
            "DatabaseBackupTooOld",
            BACKUP_TOO_OLD,
            "critical",
            f"{DATABASE} has no backup completed within two periods of its schedule",
            duration=BACKUP_TOO_OLD_FOR,
            description="Its newest successful backup is older than two periods of "
            "spec.backup.schedule, or its scheduled backups fail and none ever completed: "
            f"there may be no recent backup to restore. {BACKUPS}; docs/operations.md, "
            "section Backups (The backup alerts).",
            runbook=f"{docs}#the-backup-alerts",
        ),
        _alert(
            "DatabaseBackupFailed",
            BACKUP_FAILED,
            "warning",
            f"the newest backup of {DATABASE} failed",
            duration=BACKUP_FAILED_FOR,
            description="A backup failed after its newest successful one, or none has ever "
            "succeeded. The next one may succeed; with a schedule, DatabaseBackupTooOld pages "
            f"when none does within two periods. {BACKUPS}; docs/operations.md, section "
            "Backups (The backup alerts).",
            runbook=f"{docs}#the-backup-alerts",
        ),
    ]
    return [
        {"name": "database-operator", "rules": operator},
        {"name": "database-backups", "rules": backups},
    ]


def prometheus_rule(name: str, namespace: str, labels: Mapping[str, str], docs: str) -> Manifest:
    """The Prometheus Operator's PrometheusRule (monitoring.coreos.com/v1) of `groups`."""
    return {
        "apiVersion": "monitoring.coreos.com/v1",
        "kind": "PrometheusRule",
        "metadata": {"name": name, "namespace": namespace, "labels": dict(labels)},
        "spec": {"groups": groups(docs)},
    }
