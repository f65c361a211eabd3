"""A Database through the real Deployment controller, scheduler and garbage collector.

Pods become Running and Ready through kwok, which plays the kubelet of one fake node: nothing
here writes a Deployment's or a Pod's status by hand.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.cluster import Cluster, condition, wait_for
from tests.controlplane import FAKE_NODE
from tests.e2e.waiting import db_state, gone, wait_phase
from tests.integration.conftest import OperatorProcess


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


def pods_of(cluster: Cluster, namespace: str, name: str, role: str) -> list[Any]:
    return [
        pod
        for pod in ready_pods(cluster, namespace, name)
        if pod.metadata.labels.get("databases.example.com/role") == role
    ]


@pytest.mark.parametrize("engine", ["redis", "postgres"])
def test_kubectl_scale_adds_read_replicas_that_become_ready(
    full_cluster: Cluster, e2e_namespace: str, e2e_operator: OperatorProcess, engine: str
) -> None:
    name = f"scaled-{engine}"
    full_cluster.create_db(e2e_namespace, name, {"engine": engine, "storage": {"size": "1Gi"}})
    wait_phase(full_cluster, e2e_namespace, name, "Active")

    full_cluster.kubectl("scale", f"db/{name}", "-n", e2e_namespace, "--replicas=3")

    def scaled() -> dict[str, Any] | None:
        db = db_state(full_cluster, e2e_namespace, name)
        ready = (condition(db, "Ready") or {}).get("status") == "True"
        return db if ready and db["status"].get("readyReadReplicas") == 2 else None

    db = wait_for(scaled, timeout=60, what="two ready read replicas")
    assert db["status"]["phase"] == "Active"
    assert db["status"]["readyReplicas"] == 3
    assert len(pods_of(full_cluster, e2e_namespace, name, "primary")) == 1
    replicas = pods_of(full_cluster, e2e_namespace, name, "replica")
    assert len(replicas) == 2
    # Only the primary holds the volume; replicas clone it into ephemeral storage.
    assert all(pod.spec.volumes[0].empty_dir is not None for pod in replicas)
    scale = full_cluster.custom.get_namespaced_custom_object_scale(
        "databases.example.com", "v1", e2e_namespace, "databases", name
    )
    assert scale["status"]["replicas"] == 3
    # The read-only Service selects the read replicas' pods.
    endpoints = full_cluster.core.read_namespaced_endpoints(f"{name}-replicas", e2e_namespace)
    addresses = [a for subset in endpoints.subsets or [] for a in subset.addresses or []]
    assert len(addresses) == 2


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


def simulate(cluster: Cluster, namespace: str, pod: str, state: str | None) -> None:
    """The simulated kubelet marks a pod not ready, and ready again (kwok stages of ours)."""
    cluster.core.patch_namespaced_pod(
        pod, namespace, {"metadata": {"annotations": {SIMULATE: state}}}
    )


def test_a_lost_read_replica_degrades_and_a_lost_primary_is_not_ready(
    full_cluster: Cluster, e2e_namespace: str, e2e_operator: OperatorProcess
) -> None:
    full_cluster.create_db(e2e_namespace, "db", {"engine": "redis", "replicas": 3})
    wait_phase(full_cluster, e2e_namespace, "db", "Active")
    replica = pods_of(full_cluster, e2e_namespace, "db", "replica")[0].metadata.name
    primary = pods_of(full_cluster, e2e_namespace, "db", "primary")[0].metadata.name

    simulate(full_cluster, e2e_namespace, replica, "not-ready")
    degraded = wait_phase(full_cluster, e2e_namespace, "db", "Degraded")
    reported = condition(degraded, "Degraded") or {}
    assert (reported.get("status"), reported.get("reason")) == ("True", "ReplicasUnavailable")
    assert reported.get("message") == "1/2 read replicas ready"
    assert (condition(degraded, "Ready") or {}).get("status") == "True", "the primary serves"
    simulate(full_cluster, e2e_namespace, replica, None)
    wait_phase(full_cluster, e2e_namespace, "db", "Active")

    simulate(full_cluster, e2e_namespace, primary, "not-ready")

    def primary_lost() -> dict[str, Any] | None:
        db = db_state(full_cluster, e2e_namespace, "db")
        return (
            db if (condition(db, "Degraded") or {}).get("reason") == "PrimaryUnavailable" else None
        )

    lost = wait_for(primary_lost, timeout=60, what="the primary to be reported lost")
    assert lost["status"]["phase"] == "Degraded"
    assert (condition(lost, "Ready") or {}).get("status") == "False"
    simulate(full_cluster, e2e_namespace, primary, None)
    recovered = wait_phase(full_cluster, e2e_namespace, "db", "Active")
    assert recovered["status"]["readyReplicas"] == 3
    assert (condition(recovered, "Degraded") or {}).get("status") == "False"
