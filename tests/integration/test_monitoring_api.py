"""spec.monitoring against a real kube-apiserver: what the CRD accepts, defaults and refuses, and
what the operator's reconcile makes of it (the exporter in the pods, its port on no
Service), and that turning it on or off touches that Database's children only.

No kubelet runs here: the tests play it through the Deployments' status (``play_kubelet``).
"""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest
from kubernetes.client.exceptions import ApiException

from tests.cluster import Cluster, play_kubelet, wait_for
from tests.integration.conftest import OperatorProcess

EXPORTER = "metrics-exporter"
#: postgres_exporter's port (engines.py), the `metrics` port of the pods.
METRICS_PORT = 9187


def rejection(call: Any) -> tuple[int, str]:
    """Status code and message of an API call that must fail."""
    with pytest.raises(ApiException) as caught:
        call()
    return caught.value.status, json.loads(caught.value.body or "{}")["message"]


def observed(cluster: Cluster, namespace: str, name: str, generation: int) -> dict[str, Any]:
    """The Database once the operator has reconciled ``generation`` of it."""

    def probe() -> dict[str, Any] | None:
        db = cluster.get_db(namespace, name)
        done = db.get("status", {}).get("observedGeneration", 0) >= generation
        return db if done else None

    return wait_for(probe, timeout=20, what=f"{name}: generation {generation} observed")


def wire(cluster: Cluster, obj: Any) -> dict[str, Any]:
    """A client object as the API server wrote it (camelCase)."""
    found: dict[str, Any] = cluster.api.sanitize_for_serialization(obj)
    return found


def template(cluster: Cluster, namespace: str, name: str) -> dict[str, Any]:
    deployment = cluster.apps.read_namespaced_deployment(name, namespace)
    found: dict[str, Any] = wire(cluster, deployment.spec.template)
    return found


def service_ports(cluster: Cluster, namespace: str, name: str) -> list[tuple[str, int, Any]]:
    service = cluster.core.read_namespaced_service(name, namespace)
    return [(p.name, p.port, p.target_port) for p in service.spec.ports]


# --- the API --------------------------------------------------------------------------------


def test_monitoring_is_accepted_and_defaults_to_off(cluster: Cluster, namespace: str) -> None:
    empty = cluster.create_db(namespace, "empty", {"monitoring": {}})
    assert empty["spec"]["monitoring"] == {"enabled": False}
    on = cluster.create_db(namespace, "on", {"engine": "mysql", "monitoring": {"enabled": True}})
    # No image is written: empty means the pinned release of the operator that runs it.
    assert on["spec"]["monitoring"] == {"enabled": True}
    full = {
        "enabled": True,
        "image": "registry.example.com/redis_exporter:v1.45.0",
        "resources": {"requests": {"cpu": "10m"}, "limits": {"memory": "64Mi"}},
    }
    assert (
        cluster.create_db(namespace, "full", {"engine": "redis", "monitoring": full})["spec"][
            "monitoring"
        ]
        == full
    )
    absent = cluster.create_db(namespace, "absent", {})
    assert "monitoring" not in absent["spec"]


@pytest.mark.parametrize(
    ("spec", "field", "words"),
    [
        ({"monitoring": {"enabled": True, "image": ""}}, "spec.monitoring.image", "at least 1"),
        (
            {"monitoring": {"enabled": True, "resources": {"limits": {"memory": "lots"}}}},
            "spec.monitoring.resources.limits",
            "should match",
        ),
        ({"monitoring": {"enabled": "yes"}}, "spec.monitoring.enabled", "boolean"),
    ],
    ids=["empty image", "bad quantity", "not bool"],
)
def test_a_bad_monitoring_value_is_refused_naming_the_field(
    cluster: Cluster, namespace: str, spec: dict[str, Any], field: str, words: str
) -> None:
    status, message = rejection(lambda: cluster.create_db(namespace, "bad", spec))
    assert status == 422
    assert field in message, message
    assert words in message, message


def test_the_exporters_port_may_be_the_services_port(cluster: Cluster, namespace: str) -> None:
    """The exporter's port is on the pods only: a Service may use its number."""
    cluster.create_db(namespace, "same", {"port": METRICS_PORT, "monitoring": {"enabled": True}})
    cluster.create_db(namespace, "off", {"port": METRICS_PORT})
    cluster.patch_db(namespace, "off", {"spec": {"monitoring": {"enabled": True}}})


def test_kubectl_explain_documents_monitoring(cluster: Cluster) -> None:
    explained = cluster.kubectl("explain", "database.spec.monitoring")
    for field in ("enabled", "image", "resources"):
        assert f"  {field}\t" in explained
    assert "never takes a pod out of its Service" in " ".join(explained.split())
    image = " ".join(cluster.kubectl("explain", "database.spec.monitoring.image").split())
    assert "quay.io/prometheuscommunity/postgres-exporter:v0.11.1" in image


# --- the operator's children ------------------------------------------------------------------


def test_the_reconcile_puts_the_exporter_in_every_pod_and_its_port_on_no_service(
    cluster: Cluster, namespace: str, operator: OperatorProcess
) -> None:
    cluster.create_db(
        namespace,
        "watched",
        {"replicas": 2, "monitoring": {"enabled": True, "resources": {"limits": {"cpu": "50m"}}}},
    )
    observed(cluster, namespace, "watched", 1)
    for name in ("watched", "watched-replicas"):
        pod = template(cluster, namespace, name)["spec"]
        engine, exporter = pod["containers"]
        assert engine["name"] == "postgres"
        assert exporter["name"] == EXPORTER
        assert exporter["image"] == "quay.io/prometheuscommunity/postgres-exporter:v0.11.1"
        assert exporter["ports"] == [
            {"name": "metrics", "containerPort": METRICS_PORT, "protocol": "TCP"}
        ]
        assert exporter["resources"] == {"limits": {"cpu": "50m"}}
        assert exporter["securityContext"]["runAsNonRoot"] is True
        assert exporter["securityContext"]["allowPrivilegeEscalation"] is False
        assert not {"readinessProbe", "livenessProbe", "startupProbe"} & set(exporter)
        # No Secret: its own role, trusted from the pod's loopback only; the engine makes it.
        assert not [e for e in exporter["env"] if "valueFrom" in e], exporter["env"]
        plain = {e["name"]: e.get("value") for e in exporter["env"]}
        assert plain["DATA_SOURCE_USER"] == "database_monitor"
        assert {"name": "MONITORING_ROLE", "value": "database_monitor"} in engine["env"]
        # The PodMonitor scrapes the pods: no Service offers the exporter to its clients.
        assert service_ports(cluster, namespace, name) == [("postgres", 5432, "postgres")]
    # The generated password appears nowhere in what the operator wrote but its Secret.
    secret = cluster.core.read_namespaced_secret("watched-credentials", namespace)
    password = secret.data["password"]
    deployments = cluster.kubectl("get", "deploy,svc", "-n", namespace, "-o", "json")
    assert password not in deployments
    assert base64.b64decode(password).decode() not in deployments


def test_turning_monitoring_on_and_off_changes_only_that_databases_pod_template(
    cluster: Cluster, namespace: str, operator: OperatorProcess
) -> None:
    for name in ("toggled", "bystander"):
        cluster.create_db(namespace, name, {"replicas": 2})
        observed(cluster, namespace, name, 1)
        play_kubelet(cluster, namespace, name)
    before = {name: template(cluster, namespace, name) for name in ("toggled", "toggled-replicas")}
    untouched = {
        name: (
            cluster.apps.read_namespaced_deployment(name, namespace).metadata.resource_version,
            cluster.core.read_namespaced_service(name, namespace).metadata.resource_version,
        )
        for name in ("bystander", "bystander-replicas")
    }

    cluster.patch_db(namespace, "toggled", {"spec": {"monitoring": {"enabled": True}}})
    observed(cluster, namespace, "toggled", 2)
    for name, old in before.items():
        new = template(cluster, namespace, name)
        assert [c["name"] for c in new["spec"]["containers"]] == ["postgres", EXPORTER]
        # Only the exporter is added, and the role the engine makes for it: the rest of the
        # engine's container and of the pod stay.
        engine = new["spec"]["containers"][0]
        role = {"name": "MONITORING_ROLE", "value": "database_monitor"}
        assert engine["env"][-1] == role
        assert {**engine, "env": engine["env"][:-1]} == old["spec"]["containers"][0]
        assert {**new["spec"], "containers": None} == {**old["spec"], "containers": None}
        assert new["metadata"] == old["metadata"]
        assert service_ports(cluster, namespace, name) == [("postgres", 5432, "postgres")]

    cluster.patch_db(namespace, "toggled", {"spec": {"monitoring": {"enabled": False}}})
    observed(cluster, namespace, "toggled", 3)
    for name, old in before.items():
        # Server-side apply takes the container and the port back: the pods are as before.
        assert template(cluster, namespace, name) == old
        assert [p[0] for p in service_ports(cluster, namespace, name)] == ["postgres"]

    for name, versions in untouched.items():
        assert (
            cluster.apps.read_namespaced_deployment(name, namespace).metadata.resource_version,
            cluster.core.read_namespaced_service(name, namespace).metadata.resource_version,
        ) == versions, f"{name} was written"
