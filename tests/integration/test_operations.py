"""What an on-call engineer relies on: JSON logs that name the object, errors logged once with
their cause and reported in the Degraded condition."""

from __future__ import annotations

import base64
import json
from functools import partial
from pathlib import Path
from typing import Any

from kubernetes import client

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
    wait_for(lambda: operator.resyncs("db"), what="a resync")

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
    # The credentials, the workload, its Service, the connection Secret.
    assert created[0]["children_created"] == ["Secret", "Deployment", "Service", "Secret"]
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
    mentions = [
        line for line in operator.log_lines() if any(cause in str(v) for v in line.values())
    ]
    attempts = [line for line in mentions if line["event"] == "reconcile failed"]
    assert len(attempts) >= 3  # the Degraded report comes after the third failure
    assert mentions == attempts, "each failure is logged once, by one line"
    for number, line in enumerate(attempts, start=1):
        assert line["level"] == "error"
        assert (line["namespace"], line["name"]) == (namespace, "db")
        assert cause in line["error"]
        assert line["failures"] == number
        assert 0 < line["retry_in_s"] <= 60


def test_no_secret_value_reaches_a_log_line_an_event_a_status_or_a_child(
    cluster: Cluster, namespace: str, operator: OperatorProcess
) -> None:
    """The security sweep: every password the operator generated or read, raw or base64, is
    looked for in everything it writes besides the Secret itself."""
    cluster.create_secret(
        namespace, "users", {"username": "owner", "password": "Us3r-Supplied-Passw0rd"}
    )
    cluster.create_db(namespace, "pg", {"storage": {"size": "1Gi"}})
    cluster.create_db(namespace, "my", {"engine": "mysql"})
    cluster.create_db(namespace, "rd", {"engine": "redis", "replicas": 2})
    cluster.create_db(namespace, "byref", {"credentialsSecretRef": {"name": "users"}})
    for name in ("pg", "my", "rd", "byref"):
        wait_for(partial(is_observed, cluster, namespace, name), what=f"{name} reconciled")
    secrets = {
        name: secret_values(cluster, namespace, f"{name}-credentials")
        for name in ("pg", "my", "rd")
    }
    secrets["byref"] = secret_values(cluster, namespace, "users")
    # A lost Secret over data (Failed), and one made anew without data (rolled pods).
    cluster.core.delete_namespaced_secret("pg-credentials", namespace)
    cluster.core.delete_namespaced_secret("rd-credentials", namespace)
    wait_for(
        lambda: cluster.get_db(namespace, "pg")["status"]["phase"] == "Failed", what="pg Failed"
    )
    wait_for(lambda: secret_exists(cluster, namespace, "rd-credentials"), what="rd's new Secret")
    secrets["rd-new"] = secret_values(cluster, namespace, "rd-credentials")
    wait_for(lambda: len(operator.resyncs("rd")) >= 2, what="resyncs")

    haystacks = {
        "operator log": operator.log_text(),
        "events": json.dumps(
            [e.to_dict() for e in cluster.core.list_namespaced_event(namespace).items],
            default=str,
        ),
        "databases": json.dumps(
            cluster.custom.list_namespaced_custom_object(
                "databases.example.com", "v1", namespace, "databases"
            )
        ),
        "deployments": json.dumps(
            [d.to_dict() for d in cluster.apps.list_namespaced_deployment(namespace).items],
            default=str,
        ),
        "services": json.dumps(
            [s.to_dict() for s in cluster.core.list_namespaced_service(namespace).items],
            default=str,
        ),
    }
    assert "reconciled" in haystacks["operator log"]
    assert "ChildNameConflict" not in haystacks["events"]
    for owner, values in secrets.items():
        for value in values:
            for where, text in haystacks.items():
                assert value not in text, f"a secret value of {owner} is in the {where}"


def is_observed(cluster: Cluster, namespace: str, name: str) -> bool:
    return observed(cluster.get_db(namespace, name))


def secret_values(cluster: Cluster, namespace: str, name: str) -> list[str]:
    """A Secret's values as the API stores them (base64) and decoded."""
    data = cluster.core.read_namespaced_secret(name, namespace).data or {}
    return [
        form
        for key, encoded in data.items()
        if key == "password"
        for form in (encoded, base64.b64decode(encoded).decode())
    ]


def secret_exists(cluster: Cluster, namespace: str, name: str) -> bool:
    try:
        cluster.core.read_namespaced_secret(name, namespace)
    except client.ApiException:
        return False
    return True
