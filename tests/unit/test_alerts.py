"""The operator's alerts (alerts.py) are what the project ships: the PrometheusRule of
config/prometheus, the chart's files/prometheus-rules.yaml and docs/operations.md's block, each
pointing its runbook at a section that exists. What the rules do on data: the promtool tests
(tests/integration/test_alert_rules.py)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from database_operator import alerts
from database_operator.webhooks import configuration as webhooks
from tests.hack import load

ROOT = Path(__file__).resolve().parents[2]
OPERATIONS = ROOT / "docs" / "operations.md"
MANIFESTS = load("manifests")
DOCS = MANIFESTS.docs_url()


def rules() -> list[dict[str, Any]]:
    return [rule for group in alerts.groups(DOCS) for rule in group["rules"]]


def rule(name: str) -> dict[str, Any]:
    (found,) = (rule for rule in rules() if rule["alert"] == name)
    return found


def test_the_charts_rule_file_is_the_groups_of_alerts_py() -> None:
    shipped = yaml.safe_load(
        (ROOT / "helm/database-operator/files/prometheus-rules.yaml").read_text()
    )
    assert shipped == {"groups": alerts.groups(DOCS)}


def test_the_kustomize_prometheus_rule_is_alerts_py_in_the_operators_namespace() -> None:
    shipped = yaml.safe_load((ROOT / "config/prometheus/prometheus_rule.yaml").read_text())
    assert shipped == alerts.prometheus_rule(
        "database-operator",
        webhooks.DEFAULT_NAMESPACE,
        {
            "app.kubernetes.io/name": "database-operator",
            "app.kubernetes.io/managed-by": "kustomize",
        },
        DOCS,
    )
    kustomization = yaml.safe_load((ROOT / "config/prometheus/kustomization.yaml").read_text())
    assert "prometheus_rule.yaml" in kustomization["resources"]


def test_the_suggested_alerts_of_the_docs_are_the_groups_of_alerts_py() -> None:
    text = OPERATIONS.read_text()
    block = text.split(MANIFESTS.ALERTS_BEGIN, 1)[1].split(MANIFESTS.GENERATED_END, 1)[0]
    assert block.startswith("```yaml\n") and block.endswith("```\n"), block[:200]
    assert yaml.safe_load(block.removeprefix("```yaml\n").removesuffix("```\n")) == {
        "groups": alerts.groups(DOCS)
    }


def test_prometheus_rule_carries_the_name_namespace_and_labels_given() -> None:
    rule = alerts.prometheus_rule("r", "ns", {"release": "kps"}, "https://docs/ops.md")
    assert rule["apiVersion"] == "monitoring.coreos.com/v1"
    assert rule["kind"] == "PrometheusRule"
    assert rule["metadata"] == {"name": "r", "namespace": "ns", "labels": {"release": "kps"}}
    assert rule["spec"] == {"groups": alerts.groups("https://docs/ops.md")}


def github_anchor(heading: str) -> str:
    """The anchor GitHub gives a Markdown heading."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def test_every_runbook_url_points_to_a_section_of_docs_operations_md() -> None:
    anchors = {
        github_anchor(line.lstrip("#"))
        for line in OPERATIONS.read_text().splitlines()
        if line.startswith("#")
    }
    for alert in rules():
        page, anchor = alert["annotations"]["runbook_url"].split("#")
        assert page == DOCS, alert["alert"]
        assert anchor in anchors, f"{alert['alert']}: no section #{anchor} in docs/operations.md"


def test_the_runbooks_are_in_the_docs_the_chart_links_to() -> None:
    chart = yaml.safe_load((ROOT / "helm/database-operator/Chart.yaml").read_text())
    links = yaml.safe_load(chart["annotations"]["artifacthub.io/links"])
    assert {"name": "docs", "url": DOCS} in links
    assert DOCS.endswith("/docs/operations.md")


def test_every_alert_has_a_unique_name_a_severity_and_a_summary() -> None:
    names = [alert["alert"] for alert in rules()]
    assert len(names) == len(set(names))
    for alert in rules():
        assert alert["labels"]["severity"] in {"warning", "critical"}, alert["alert"]
        assert alert["annotations"]["summary"], alert["alert"]


@pytest.mark.parametrize(
    ("name", "severity"),
    [("DatabaseBackupTooOld", "critical"), ("DatabaseBackupFailed", "warning")],
)
def test_backup_alerts_name_the_database_and_page_only_when_no_recent_backup_is_left(
    name: str, severity: str
) -> None:
    alert = rule(name)
    assert alert["labels"]["severity"] == severity
    assert "{{ $labels.namespace }}/{{ $labels.database }}" in alert["annotations"]["summary"]
    assert alert["annotations"]["runbook_url"].endswith("#the-backup-alerts")
    assert "section Backups" in alert["annotations"]["description"]


def test_the_operators_alerts_moved_from_the_docs_keep_their_names() -> None:
    (operator,) = (group for group in alerts.groups(DOCS) if group["name"] == "database-operator")
    assert [alert["alert"] for alert in operator["rules"]] == [
        "DatabaseOperatorDown",
        "DatabaseFailed",
        "DatabaseDegraded",
        "DatabaseOperatorReconcileErrors",
        "DatabaseOperatorApiErrors",
        "DatabaseOperatorSlowReconciles",
        "DatabaseDriftKeepsComingBack",
        "DatabaseOperatorNoActiveReplica",
        "DatabaseOperatorTracesDropped",
        "DatabaseNotReady",
        "DatabaseOperatorWorkqueueBacklog",
        "DatabaseWithoutPrimary",
        "DatabaseTwoPrimaries",
    ]


def database_rules() -> list[dict[str, Any]]:
    (databases,) = (group for group in alerts.groups(DOCS) if group["name"] == "databases")
    return databases["rules"]  # type: ignore[no-any-return]


def test_the_database_alerts_page_only_for_a_primary_that_is_down() -> None:
    severities = {alert["alert"]: alert["labels"]["severity"] for alert in database_rules()}
    assert severities.pop("DatabaseDown") == "critical"
    assert set(severities.values()) == {"warning"}


def test_every_selector_of_the_database_alerts_reads_the_podmonitors_job_only() -> None:
    """Other exporters of the cluster serve pg_up too: they must page no one here."""
    for alert in database_rules():
        selectors = re.findall(r"\{([^{}]*)\}", alert["expr"])
        assert selectors, alert["alert"]
        for selector in selectors:
            assert f'job="{alerts.DATABASES_JOB}"' in selector, (alert["alert"], selector)


def test_each_database_alert_has_a_runbook_of_its_own_and_says_where() -> None:
    for alert in database_rules():
        anchor = alert["alert"].lower()
        assert alert["annotations"]["runbook_url"] == f"{DOCS}#{anchor}"
        assert f"section {alert['alert']}." in alert["annotations"]["description"]


def test_the_operator_down_alert_ignores_the_databases_exporters() -> None:
    """Their job's name contains "database-operator": their targets up are not the operator."""
    assert f'job!="{alerts.DATABASES_JOB}"' in rule("DatabaseOperatorDown")["expr"]


def test_the_thresholds_the_descriptions_quote_are_the_rules() -> None:
    assert "> 268435456" in rule("DatabasePostgresReplicationLag")["expr"]
    assert "256 MiB" in rule("DatabasePostgresReplicationLag")["annotations"]["description"]
    assert "16 MiB" in rule("DatabaseRedisReplicationLag")["annotations"]["description"]
    assert "80%" in rule("DatabaseConnectionsNearLimit")["annotations"]["description"]
    assert f"> {alerts.WORKQUEUE_BACKLOG}" in rule("DatabaseOperatorWorkqueueBacklog")["expr"]
