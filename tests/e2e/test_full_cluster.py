"""A Database through the real Deployment controller, scheduler and garbage collector.

Pods become Running and Ready through kwok, which plays the kubelet of one fake node: nothing
here writes a Deployment's or a Pod's status by hand.
"""

from __future__ import annotations

from typing import Any

from kubernetes import client

from tests.cluster import Cluster, condition, wait_for
from tests.controlplane import FAKE_NODE
from tests.integration.conftest import OperatorProcess


def db_state(cluster: Cluster, namespace: str, name: str) -> dict[str, Any]:
    return cluster.get_db(namespace, name)


def wait_phase(
    cluster: Cluster, namespace: str, name: str, phase: str, timeout: float = 60
) -> dict[str, Any]:
    def probe() -> dict[str, Any] | None:
        db = db_state(cluster, namespace, name)
        return db if db.get("status", {}).get("phase") == phase else None

    return wait_for(probe, timeout=timeout, what=f"{name} to be {phase}")


def ready_pods(cluster: Cluster, namespace: str, name: str) -> list[Any]:
    pods = cluster.core.list_namespaced_pod(
        namespace, label_selector=f"app.kubernetes.io/instance={name}"
    ).items
    return [
        pod
        for pod in pods
        if pod.metadata.deletion_timestamp is None
        and any(c.type == "Ready" and c.status == "True" for c in pod.status.conditions or [])
    ]


def gone(read: Any, name: str, namespace: str) -> bool:
    try:
        read(name, namespace)
    except client.ApiException as error:
        return bool(error.status == 404)
    return False


def test_a_database_becomes_ready_through_real_pods(
    full_cluster: Cluster, e2e_namespace: str, e2e_operator: OperatorProcess
) -> None:
    full_cluster.create_db(e2e_namespace, "db", {"engine": "postgres", "storage": {"size": "1Gi"}})
    active = wait_phase(full_cluster, e2e_namespace, "db", "Active")
    ready = condition(active, "Ready")
    assert ready is not None
    assert ready["status"] == "True"
    pods = ready_pods(full_cluster, e2e_namespace, "db")
    assert len(pods) == 1
    assert pods[0].spec.node_name == FAKE_NODE
    assert pods[0].spec.volumes[0].persistent_volume_claim.claim_name == "db-data"
    replica_sets = full_cluster.apps.list_namespaced_replica_set(e2e_namespace).items
    assert [rs.metadata.owner_references[0].name for rs in replica_sets] == ["db"]
    full_cluster.kubectl(
        "wait", "--for=condition=Ready", "db/db", "-n", e2e_namespace, "--timeout=10s"
    )


def test_kubectl_scale_leads_to_ready_pods(
    full_cluster: Cluster, e2e_namespace: str, e2e_operator: OperatorProcess
) -> None:
    full_cluster.create_db(e2e_namespace, "cache", {"engine": "redis"})
    wait_phase(full_cluster, e2e_namespace, "cache", "Active")

    full_cluster.kubectl("scale", "db/cache", "-n", e2e_namespace, "--replicas=3")

    def scaled() -> dict[str, Any] | None:
        db = db_state(full_cluster, e2e_namespace, "cache")
        ready = (condition(db, "Ready") or {}).get("status") == "True"
        return db if ready and db["status"].get("readyReplicas") == 3 else None

    db = wait_for(scaled, timeout=60, what="3 ready replicas")
    assert db["status"]["phase"] == "Active"
    assert len(ready_pods(full_cluster, e2e_namespace, "cache")) == 3
    scale = full_cluster.custom.get_namespaced_custom_object_scale(
        "databases.example.com", "v1", e2e_namespace, "databases", "cache"
    )
    assert scale["status"]["replicas"] == 3


def test_deletion_garbage_collects_children_and_retain_keeps_the_data(
    full_cluster: Cluster, e2e_namespace: str, e2e_operator: OperatorProcess
) -> None:
    full_cluster.create_db(e2e_namespace, "kept", {"storage": {"size": "1Gi"}})
    full_cluster.create_db(
        e2e_namespace, "dropped", {"storage": {"size": "1Gi"}, "deletionPolicy": "Delete"}
    )
    for name in ("kept", "dropped"):
        wait_phase(full_cluster, e2e_namespace, name, "Active")
        full_cluster.custom.delete_namespaced_custom_object(
            "databases.example.com", "v1", e2e_namespace, "databases", name
        )

    def collected() -> bool:
        return all(
            gone(full_cluster.apps.read_namespaced_deployment, name, e2e_namespace)
            and gone(full_cluster.core.read_namespaced_service, name, e2e_namespace)
            for name in ("kept", "dropped")
        )

    # The garbage collector notices a new CRD's objects on its discovery resync (every 30 s).
    wait_for(collected, timeout=120, what="Deployments and Services to be garbage-collected")
    # Then their ReplicaSets and pods, in the background.
    wait_for(
        lambda: not ready_pods(full_cluster, e2e_namespace, "kept"),
        timeout=60,
        what="the pods to be garbage-collected",
    )
    # Retain: the data outlives the Database.
    full_cluster.core.read_namespaced_persistent_volume_claim("kept-data", e2e_namespace)
    full_cluster.core.read_namespaced_secret("kept-credentials", e2e_namespace)
    # Delete: the operator deleted them, and the PVC's protection finalizer was released.
    wait_for(
        lambda: (
            gone(
                full_cluster.core.read_namespaced_persistent_volume_claim,
                "dropped-data",
                e2e_namespace,
            )
            and gone(full_cluster.core.read_namespaced_secret, "dropped-credentials", e2e_namespace)
        ),
        timeout=60,
        what="the PVC and Secret of the Delete policy to go",
    )


SIMULATE = "database-operator.example.com/simulate"


def test_pods_losing_readiness_degrade_the_database_until_they_are_ready_again(
    full_cluster: Cluster, e2e_namespace: str, e2e_operator: OperatorProcess
) -> None:
    full_cluster.create_db(e2e_namespace, "db", {"engine": "redis", "replicas": 2})
    wait_phase(full_cluster, e2e_namespace, "db", "Active")
    pods = ready_pods(full_cluster, e2e_namespace, "db")
    assert len(pods) == 2

    # The simulated kubelet marks one pod not ready (a kwok stage of ours, by annotation).
    lost = pods[0].metadata.name
    full_cluster.core.patch_namespaced_pod(
        lost, e2e_namespace, {"metadata": {"annotations": {SIMULATE: "not-ready"}}}
    )
    degraded = wait_phase(full_cluster, e2e_namespace, "db", "Degraded")
    reported = condition(degraded, "Degraded")
    assert reported is not None
    assert (reported["status"], reported["reason"]) == ("True", "ReplicasUnavailable")
    assert "1/2" in reported["message"]
    assert (condition(degraded, "Ready") or {}).get("status") == "False"

    full_cluster.core.patch_namespaced_pod(
        lost, e2e_namespace, {"metadata": {"annotations": {SIMULATE: None}}}
    )
    recovered = wait_phase(full_cluster, e2e_namespace, "db", "Active")
    assert recovered["status"]["readyReplicas"] == 2
    assert (condition(recovered, "Degraded") or {}).get("status") == "False"
