"""What an on-call engineer relies on: JSON logs that name the object, errors logged once with
their cause and reported in the Degraded condition."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.cluster import Cluster, condition, wait_for
from tests.integration.conftest import OperatorProcess, start_operator

# Everything the operator needs but reading Secrets.
NO_SECRETS_ROLE = """
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: operator-without-secrets}
rules:
- apiGroups: [databases.example.com]
  resources: [databases, databases/status]
  verbs: [get, list, watch, patch, update]
- apiGroups: [apps]
  resources: [deployments]
  verbs: [get, list, watch, create, patch]
- apiGroups: [""]
  resources: [services, persistentvolumeclaims]
  verbs: [get, list, watch, create, patch]
- apiGroups: ["", events.k8s.io]
  resources: [events]
  verbs: [create, patch]
- apiGroups: [apiextensions.k8s.io]
  resources: [customresourcedefinitions]
  verbs: [get, list, watch]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: operator-without-secrets}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: operator-without-secrets}
subjects:
- {apiGroup: rbac.authorization.k8s.io, kind: User, name: operator-without-secrets}
"""


def observed(db: dict[str, Any]) -> bool:
    return bool(db.get("status", {}).get("observedGeneration") == db["metadata"]["generation"])


def test_every_log_line_is_json_and_reconcile_lines_name_the_object(
    cluster: Cluster, namespace: str, operator: OperatorProcess
) -> None:
    cluster.create_db(namespace, "db", {"engine": "redis"})
    wait_for(lambda: observed(cluster.get_db(namespace, "db")), what="the first reconcile")
    wait_for(lambda: operator.reconciles("db", "resync"), what="a resync")

    lines = operator.log_lines()  # raises on any line that is not one JSON object
    assert lines
    for line in lines:
        assert {"timestamp", "level", "event"} <= line.keys(), line
    for line in operator.reconciles("db"):
        assert line["namespace"] == namespace
        assert line["name"] == "db"
        assert line["generation"] == 1
        assert line["result"] == "success"
    created = [line for line in operator.reconciles("db") if line["children_created"]]
    assert created[0]["children_created"] == ["Secret", "Deployment", "Service"]
    assert created[0]["level"] == "info"


def test_a_failing_reconcile_is_logged_once_per_attempt_with_its_cause_and_degrades(
    cluster: Cluster, namespace: str, tmp_path: Path
) -> None:
    cluster.kubectl("apply", "-f", "-", input=NO_SECRETS_ROLE)
    operator = start_operator(
        cluster,
        tmp_path / "operator.log",
        f"--namespace={namespace}",
        "--resync-interval=60",
        "--health-port=0",
        "--metrics-port=0",
        kubeconfig=cluster.plane.kubeconfig_for("operator-without-secrets"),
    )
    try:
        cluster.create_db(namespace, "db", {})

        def degraded() -> dict[str, Any] | None:
            found = condition(cluster.get_db(namespace, "db"), "Degraded")
            return found if found and found["reason"] == "ReconcileError" else None

        reported = wait_for(degraded, timeout=45, what="Degraded=True ReconcileError")
        assert reported["status"] == "True"
        assert "secrets" in reported["message"]
        assert "403" in reported["message"]
    finally:
        assert operator.stop() == 0

    cause = 'cannot get resource "secrets"'
    mentions = [line for line in operator.log_lines() if cause in str(line.get("event"))]
    attempts = [line for line in mentions if "failed temporarily" in line["event"]]
    assert len(attempts) >= 3  # the Degraded report comes after the third failure
    assert mentions == attempts, "each failure is logged once, by one line"
    for line in attempts:
        assert line["level"] == "error"
        assert (line["namespace"], line["name"]) == (namespace, "db")
