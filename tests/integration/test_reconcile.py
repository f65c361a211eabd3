"""The operator against a real kube-apiserver: children, status, drift, pause, credentials and
deletion.

With no kubelet or controller-manager here, tests play the kubelet by writing the Deployment's
status subresource (`play_kubelet`); the garbage collector does not run either, so deletions are
checked through owner references and through what the operator deletes itself.
"""

from __future__ import annotations

import base64
import contextlib
import json
import time
from typing import Any

import pytest
from kubernetes import client

from tests.cluster import Cluster, condition, play_kubelet, wait_for, write_requests
from tests.integration.conftest import RESYNC_S, OperatorProcess
from tests.integration.waiting import events_for, observed, phase_is, ready_is, wait_for_status

ROLE = "databases.example.com/role"
LABELS = {
    "app.kubernetes.io/name": "postgres",
    "app.kubernetes.io/instance": "db",
    "app.kubernetes.io/component": "database",
    "app.kubernetes.io/managed-by": "database-operator",
}


def owner_uids(obj: Any) -> list[str]:
    return [ref.uid for ref in obj.metadata.owner_references or []]


def test_create_makes_children_and_status_goes_pending_then_active(
    cluster: Cluster, namespace: str, operator: OperatorProcess
) -> None:
    db = cluster.create_db(namespace, "db", {"storage": {"size": "1Gi"}})
    uid = db["metadata"]["uid"]

    pending = wait_for_status(cluster, namespace, "db", "phase Pending", phase_is("Pending"))
    assert pending["status"]["observedGeneration"] == pending["metadata"]["generation"]
    progressing = condition(pending, "Progressing")
    assert progressing is not None
    assert progressing["status"] == "True"

    deployment = cluster.apps.read_namespaced_deployment("db", namespace)
    service = cluster.core.read_namespaced_service("db", namespace)
    secret = cluster.core.read_namespaced_secret("db-credentials", namespace)
    pvc = cluster.core.read_namespaced_persistent_volume_claim("db-data", namespace)
    for child in (deployment, service, secret, pvc):
        assert child.metadata.labels == LABELS
    controller = deployment.metadata.owner_references[0]
    assert (controller.kind, controller.uid, controller.controller) == ("Database", uid, True)
    assert controller.block_owner_deletion is True
    assert owner_uids(service) == [uid]
    # deletionPolicy Retain (the default): the data outlives the Database.
    assert owner_uids(secret) == []
    assert owner_uids(pvc) == []
    container = deployment.spec.template.spec.containers[0]
    assert container.image == "docker.io/library/postgres:16"
    assert container.readiness_probe is not None
    assert container.liveness_probe is not None
    assert deployment.spec.template.metadata.labels == {**LABELS, ROLE: "primary"}
    assert pvc.spec.resources.requests["storage"] == "1Gi"

    play_kubelet(cluster, namespace, "db")
    active = wait_for_status(cluster, namespace, "db", "phase Active", phase_is("Active"))
    ready = condition(active, "Ready")
    assert ready is not None
    assert ready["status"] == "True"
    status = active["status"]
    assert status["readyReplicas"] == 1
    assert status["endpoint"] == f"db.{namespace}.svc:5432"
    assert status["selector"] == "app.kubernetes.io/instance=db,app.kubernetes.io/name=postgres"
    assert status["credentialsSecret"] == "db-credentials"
    assert status["version"] == "16"
    cluster.kubectl("wait", "--for=condition=Ready", "db/db", "-n", namespace, "--timeout=10s")


def expandable_storage_class(cluster: Cluster) -> str:
    """A StorageClass that allows volume expansion (the API server checks it on growth)."""
    name = "expandable"
    with contextlib.suppress(client.ApiException):
        client.StorageV1Api(cluster.api).create_storage_class(
            client.V1StorageClass(
                metadata=client.V1ObjectMeta(name=name),
                provisioner="example.com/none",
                allow_volume_expansion=True,
            )
        )
    return name


def play_volume_binder(cluster: Cluster, namespace: str, name: str) -> None:
    """No PV controller runs here: mark the claim Bound, as growing needs a bound claim."""
    cluster.core.patch_namespaced_persistent_volume_claim_status(
        name, namespace, {"status": {"phase": "Bound", "capacity": {"storage": "1Gi"}}}
    )


def test_spec_changes_reach_the_children_and_generations_follow(
    cluster: Cluster, namespace: str, operator: OperatorProcess
) -> None:
    storage_class = expandable_storage_class(cluster)
    cluster.create_db(
        namespace, "db", {"storage": {"size": "1Gi", "storageClassName": storage_class}}
    )
    wait_for_status(cluster, namespace, "db", "first reconcile", observed)
    play_volume_binder(cluster, namespace, "db-data")
    play_kubelet(cluster, namespace, "db")
    wait_for_status(cluster, namespace, "db", "phase Active", phase_is("Active"))

    changed = cluster.patch_db(
        namespace,
        "db",
        {
            "spec": {
                "replicas": 0,
                "version": "17",
                "storage": {"size": "2Gi", "storageClassName": storage_class},
                "resources": {"requests": {"cpu": "250m", "memory": "512Mi"}},
            }
        },
    )
    generation = changed["metadata"]["generation"]
    assert generation == 2
    updated = wait_for_status(cluster, namespace, "db", "generation 2 observed", observed)
    for found in updated["status"]["conditions"]:
        assert found["observedGeneration"] == generation, found

    deployment = cluster.apps.read_namespaced_deployment("db", namespace)
    assert deployment.spec.replicas == 0
    container = deployment.spec.template.spec.containers[0]
    assert container.image == "docker.io/library/postgres:17"
    assert container.resources.requests == {"cpu": "250m", "memory": "512Mi"}
    pvc = cluster.core.read_namespaced_persistent_volume_claim("db-data", namespace)
    assert pvc.spec.resources.requests["storage"] == "2Gi"
    assert updated["status"]["version"] == "17"

    play_kubelet(cluster, namespace, "db")
    scaled = wait_for_status(cluster, namespace, "db", "Ready at zero", ready_is("True"))
    assert (condition(scaled, "Ready") or {})["reason"] == "ScaledToZero"
    assert scaled["status"]["phase"] == "Active"


def test_fields_removed_from_the_spec_are_removed_from_the_children(
    cluster: Cluster, namespace: str, operator: OperatorProcess
) -> None:
    # Comparing desired with observed sees only what we set: without the applied digest, a pod
    # annotation, a limit or a Service annotation taken out of the spec stayed on the children.
    cluster.create_db(
        namespace,
        "db",
        {
            "podAnnotations": {"example.com/keep": "1", "example.com/drop": "1"},
            "serviceAnnotations": {"example.com/lb": "internal"},
            "resources": {"limits": {"memory": "512Mi", "cpu": "1"}},
        },
    )
    wait_for_status(cluster, namespace, "db", "first reconcile", observed)
    cluster.patch_db(
        namespace,
        "db",
        {
            "spec": {
                "podAnnotations": {"example.com/drop": None},
                "serviceAnnotations": None,
                "resources": {"limits": {"cpu": None}},
            }
        },
    )
    wait_for_status(cluster, namespace, "db", "generation 2 observed", observed)

    def removed() -> bool:
        deployment = cluster.apps.read_namespaced_deployment("db", namespace)
        annotations = deployment.spec.template.metadata.annotations or {}
        limits = deployment.spec.template.spec.containers[0].resources.limits or {}
        service = cluster.core.read_namespaced_service("db", namespace)
        return (
            "example.com/drop" not in annotations
            and annotations.get("example.com/keep") == "1"
            and limits == {"memory": "512Mi"}
            and "example.com/lb" not in (service.metadata.annotations or {})
        )

    wait_for(removed, timeout=30, what="the removed fields to leave the Deployment and Service")


def test_drift_is_put_back_within_one_resync(
    cluster: Cluster, namespace: str, operator: OperatorProcess
) -> None:
    cluster.create_db(namespace, "db", {"replicas": 3})
    wait_for_status(cluster, namespace, "db", "first reconcile", observed)

    cluster.core.delete_namespaced_service("db", namespace)
    cluster.apps.patch_namespaced_deployment_scale("db", namespace, {"spec": {"replicas": 5}})
    cluster.apps.delete_namespaced_deployment("db-replicas", namespace)

    def repaired() -> bool:
        try:
            service = cluster.core.read_namespaced_service("db", namespace)
            replicas = cluster.apps.read_namespaced_deployment("db-replicas", namespace)
        except client.ApiException:
            return False
        deployment = cluster.apps.read_namespaced_deployment("db", namespace)
        return bool(
            service.metadata.labels == {**LABELS}
            and deployment.spec.replicas == 1
            and replicas.spec.replicas == 2
        )

    wait_for(repaired, timeout=RESYNC_S * 2 + 5, what="the Service and replicas to be put back")


def test_storage_growth_the_cluster_refuses_is_reported_not_retried_in_a_loop(
    cluster: Cluster, namespace: str, operator: OperatorProcess
) -> None:
    # No StorageClass allows expansion and the claim is not bound: the API server says no.
    cluster.create_db(namespace, "db", {"storage": {"size": "1Gi"}})
    wait_for_status(cluster, namespace, "db", "first reconcile", observed)
    cluster.patch_db(namespace, "db", {"spec": {"storage": {"size": "5Gi"}}})
    failed = wait_for_status(cluster, namespace, "db", "Failed", phase_is("Failed"))
    ready = condition(failed, "Ready")
    assert ready is not None
    assert ready["reason"] == "PersistentVolumeClaimRejected"
    assert "db-data" in ready["message"]
    assert failed["status"]["observedGeneration"] == 2
    pvc = cluster.core.read_namespaced_persistent_volume_claim("db-data", namespace)
    assert pvc.spec.resources.requests["storage"] == "1Gi"


def test_fields_owned_by_others_survive(
    cluster: Cluster, namespace: str, operator: OperatorProcess
) -> None:
    cluster.create_db(namespace, "db", {})
    wait_for_status(cluster, namespace, "db", "first reconcile", observed)
    cluster.apps.patch_namespaced_deployment(
        "db", namespace, {"metadata": {"annotations": {"example.com/owner": "team-a"}}}
    )
    cluster.patch_db(namespace, "db", {"spec": {"version": "17"}})
    wait_for(
        lambda: (
            cluster.apps.read_namespaced_deployment("db", namespace)
            .spec.template.spec.containers[0]
            .image.endswith(":17")
        ),
        what="version 17",
    )
    deployment = cluster.apps.read_namespaced_deployment("db", namespace)
    assert deployment.metadata.annotations["example.com/owner"] == "team-a"


def test_lost_readiness_degrades_and_recovers_with_exact_transition_times(
    cluster: Cluster, namespace: str, operator: OperatorProcess
) -> None:
    cluster.create_db(namespace, "db", {"engine": "redis"})
    wait_for_status(cluster, namespace, "db", "first reconcile", observed)
    play_kubelet(cluster, namespace, "db")
    active = wait_for_status(cluster, namespace, "db", "Active", phase_is("Active"))

    play_kubelet(cluster, namespace, "db", ready=0)
    degraded = wait_for_status(cluster, namespace, "db", "Degraded", phase_is("Degraded"))
    lost = condition(degraded, "Degraded")
    assert lost is not None
    assert (lost["status"], lost["reason"]) == ("True", "PrimaryUnavailable")
    assert (condition(degraded, "Ready") or {}).get("status") == "False"

    play_kubelet(cluster, namespace, "db")
    recovered = wait_for_status(cluster, namespace, "db", "Active again", phase_is("Active"))

    def times(db: dict[str, Any]) -> dict[str, str]:
        return {c["type"]: c["lastTransitionTime"] for c in db["status"]["conditions"]}

    before, during, after = times(active), times(degraded), times(recovered)
    # Ready flipped True -> False -> True, Degraded False -> True -> False: each flip moved the
    # time; Progressing stayed False throughout and kept its time.
    assert during["Ready"] >= before["Ready"]
    assert after["Ready"] >= during["Ready"]
    assert during["Degraded"] >= before["Degraded"]
    assert after["Degraded"] >= during["Degraded"]
    assert before["Progressing"] == during["Progressing"] == after["Progressing"]
    # A resync with nothing changed moves nothing.
    wait_for(lambda: len(operator.resyncs("db")) >= 2, what="two resyncs")
    assert times(cluster.get_db(namespace, "db")) == after


def test_a_lost_read_replica_degrades_while_the_database_stays_ready(
    cluster: Cluster, namespace: str, operator: OperatorProcess
) -> None:
    cluster.create_db(namespace, "db", {"engine": "redis", "replicas": 3})
    wait_for_status(cluster, namespace, "db", "first reconcile", observed)
    play_kubelet(cluster, namespace, "db")
    active = wait_for_status(cluster, namespace, "db", "Active", phase_is("Active"))
    assert (active["status"]["readyReplicas"], active["status"]["readyReadReplicas"]) == (3, 2)
    assert active["status"]["readEndpoint"] == f"db-replicas.{namespace}.svc:6379"

    play_kubelet(cluster, namespace, "db", replicas_ready=1)
    degraded = wait_for_status(cluster, namespace, "db", "Degraded", phase_is("Degraded"))
    assert (condition(degraded, "Ready") or {}).get("status") == "True"
    lost = condition(degraded, "Degraded") or {}
    assert (lost.get("reason"), lost.get("message")) == (
        "ReplicasUnavailable",
        "1/2 read replicas ready",
    )
    play_kubelet(cluster, namespace, "db")
    wait_for_status(cluster, namespace, "db", "Active again", phase_is("Active"))


def test_paused_database_changes_no_child_and_says_so(
    cluster: Cluster, namespace: str, operator: OperatorProcess
) -> None:
    cluster.create_db(namespace, "db", {})
    wait_for_status(cluster, namespace, "db", "first reconcile", observed)
    before = cluster.apps.read_namespaced_deployment("db", namespace)

    cluster.patch_db(namespace, "db", {"spec": {"paused": True, "replicas": 4, "version": "15"}})
    paused = wait_for_status(cluster, namespace, "db", "generation 2 observed", observed)
    progressing = condition(paused, "Progressing")
    assert progressing is not None
    assert (progressing["status"], progressing["reason"]) == ("False", "Paused")
    assert "paused" in progressing["message"]
    wait_for(lambda: len(operator.resyncs("db")) >= 2, what="two resyncs")
    after = cluster.apps.read_namespaced_deployment("db", namespace)
    assert after.metadata.resource_version == before.metadata.resource_version
    assert after.spec.replicas == 1

    cluster.patch_db(namespace, "db", {"spec": {"paused": False}})
    wait_for(
        lambda: replicas_of(cluster, namespace, "db-replicas") == 3,
        what="the unpaused spec to reach the read replicas",
    )


def replicas_of(cluster: Cluster, namespace: str, name: str) -> int | None:
    try:
        return int(cluster.apps.read_namespaced_deployment(name, namespace).spec.replicas)
    except client.ApiException:
        return None


def test_missing_credentials_secret_fails_clearly_and_recovers_when_created(
    cluster: Cluster, namespace: str, operator: OperatorProcess
) -> None:
    cluster.create_db(namespace, "db", {"credentialsSecretRef": {"name": "app-creds"}})
    failed = wait_for_status(cluster, namespace, "db", "Failed", phase_is("Failed"))
    ready = condition(failed, "Ready")
    assert ready is not None
    assert (ready["status"], ready["reason"]) == ("False", "CredentialsSecretNotFound")
    assert "app-creds" in ready["message"]
    wait_for(
        lambda: [e for e in events_for(cluster, namespace, "db") if e.type == "Warning"],
        what="a Warning event",
    )
    # No hot loop: resyncs come and go, but nothing is written.
    version = failed["metadata"]["resourceVersion"]
    wait_for(lambda: len(operator.resyncs("db")) >= 2, what="two resyncs")
    assert cluster.get_db(namespace, "db")["metadata"]["resourceVersion"] == version

    cluster.create_secret(namespace, "app-creds", {"username": "u"})
    invalid = wait_for_status(
        cluster,
        namespace,
        "db",
        "CredentialsSecretInvalid",
        lambda db: (condition(db, "Ready") or {}).get("reason") == "CredentialsSecretInvalid",
    )
    ready = condition(invalid, "Ready")
    assert ready is not None
    assert "password" in ready["message"]

    # A user the operator keeps for the engine's own use (the hook would set the replication
    # password on it) is refused by name.
    taken = {"stringData": {"username": "replicator", "password": "p"}}
    cluster.core.patch_namespaced_secret("app-creds", namespace, taken)
    wait_for_status(
        cluster,
        namespace,
        "db",
        "the reserved user refused",
        lambda db: "'replicator'" in (condition(db, "Ready") or {}).get("message", ""),
    )
    assert replicas_of(cluster, namespace, "db") is None  # no pod takes the user over

    cluster.core.patch_namespaced_secret("app-creds", namespace, {"stringData": {"username": "u"}})
    wait_for_status(cluster, namespace, "db", "Pending", phase_is("Pending"))
    container = cluster.apps.read_namespaced_deployment(
        "db", namespace
    ).spec.template.spec.containers[0]
    refs = {e.name: e.value_from.secret_key_ref.name for e in container.env if e.value_from}
    assert set(refs.values()) == {"app-creds"}
    # A user's Secret is never adopted or changed.
    secret = cluster.core.read_namespaced_secret("app-creds", namespace)
    assert secret.metadata.owner_references is None
    assert secret.metadata.labels is None


def test_generated_password_is_made_once_and_never_logged(
    cluster: Cluster, namespace: str, operator: OperatorProcess
) -> None:
    cluster.create_db(namespace, "db", {"engine": "mysql"})
    wait_for_status(cluster, namespace, "db", "first reconcile", observed)
    secret = cluster.core.read_namespaced_secret("db-credentials", namespace)
    password = base64.b64decode(secret.data["password"]).decode()
    assert len(password) >= 24

    cluster.patch_db(namespace, "db", {"spec": {"port": 13306}})
    wait_for_status(cluster, namespace, "db", "generation 2", observed)
    wait_for(lambda: len(operator.resyncs("db")) >= 2, what="two resyncs")
    again = cluster.core.read_namespaced_secret("db-credentials", namespace)
    assert again.data == secret.data
    assert again.metadata.resource_version == secret.metadata.resource_version
    assert password not in operator.log_text()
    assert secret.data["password"] not in operator.log_text()


def hold(cluster: Cluster, namespace: str, name: str) -> None:
    """A finalizer of the test's own, so the deleted Database stays visible until released."""
    wait_for_status(
        cluster,
        namespace,
        name,
        "the operator's finalizer",
        lambda db: "databases.example.com/finalizer" in db["metadata"].get("finalizers", []),
    )
    add = '[{"op": "add", "path": "/metadata/finalizers/-", "value": "test.example.com/hold"}]'
    cluster.kubectl("patch", f"db/{name}", "-n", namespace, "--type=json", "-p", add)


def release(cluster: Cluster, namespace: str, name: str) -> None:
    db = cluster.get_db(namespace, name)
    kept = [f for f in db["metadata"].get("finalizers", []) if f != "test.example.com/hold"]
    replace = [{"op": "replace", "path": "/metadata/finalizers", "value": kept}]
    cluster.kubectl(
        "patch", f"db/{name}", "-n", namespace, "--type=json", "-p", json.dumps(replace)
    )


def deleting(cluster: Cluster, namespace: str, name: str) -> dict[str, Any]:
    """Delete the Database and wait until the operator has finished with it."""
    cluster.custom.delete_namespaced_custom_object(
        "databases.example.com", "v1", namespace, "databases", name
    )

    def finalized(db: dict[str, Any]) -> bool:
        return bool(db["metadata"].get("finalizers") == ["test.example.com/hold"])

    db = wait_for_status(cluster, namespace, name, "the operator's finalizer to go", finalized)
    assert db["status"]["phase"] == "Deleting"
    return db


def test_deletion_with_retain_keeps_the_pvc_and_the_secret(
    cluster: Cluster, namespace: str, operator: OperatorProcess
) -> None:
    created = cluster.create_db(namespace, "db", {"storage": {"size": "1Gi"}})
    wait_for_status(cluster, namespace, "db", "first reconcile", observed)
    hold(cluster, namespace, "db")
    deleting(cluster, namespace, "db")

    pvc = cluster.core.read_namespaced_persistent_volume_claim("db-data", namespace)
    secret = cluster.core.read_namespaced_secret("db-credentials", namespace)
    assert pvc.metadata.deletion_timestamp is None
    assert owner_uids(pvc) == []
    assert owner_uids(secret) == []
    # Deployment and Service go with their owner (the garbage collector, absent here).
    assert owner_uids(cluster.apps.read_namespaced_deployment("db", namespace)) == [
        created["metadata"]["uid"]
    ]
    release(cluster, namespace, "db")


def test_deletion_with_delete_removes_the_pvc_and_the_secret(
    cluster: Cluster, namespace: str, operator: OperatorProcess
) -> None:
    created = cluster.create_db(
        namespace, "db", {"storage": {"size": "1Gi"}, "deletionPolicy": "Delete"}
    )
    uid = created["metadata"]["uid"]
    wait_for_status(cluster, namespace, "db", "first reconcile", observed)
    assert owner_uids(
        cluster.core.read_namespaced_persistent_volume_claim("db-data", namespace)
    ) == [uid]
    assert owner_uids(cluster.core.read_namespaced_secret("db-credentials", namespace)) == [uid]
    hold(cluster, namespace, "db")
    deleting(cluster, namespace, "db")

    def gone_or_going(read: Any, name: str) -> bool:
        try:
            return read(name, namespace).metadata.deletion_timestamp is not None
        except client.ApiException as error:
            return bool(error.status == 404)

    # The PVC keeps kubernetes.io/pvc-protection until a controller-manager releases it.
    assert gone_or_going(cluster.core.read_namespaced_persistent_volume_claim, "db-data")
    assert gone_or_going(cluster.core.read_namespaced_secret, "db-credentials")
    release(cluster, namespace, "db")


def test_switching_to_retain_drops_the_owner_references_on_the_data(
    cluster: Cluster, namespace: str, operator: OperatorProcess
) -> None:
    cluster.create_db(namespace, "db", {"storage": {"size": "1Gi"}, "deletionPolicy": "Delete"})
    wait_for_status(cluster, namespace, "db", "first reconcile", observed)
    cluster.patch_db(namespace, "db", {"spec": {"deletionPolicy": "Retain"}})
    wait_for_status(cluster, namespace, "db", "generation 2", observed)

    def released() -> bool:
        pvc = cluster.core.read_namespaced_persistent_volume_claim("db-data", namespace)
        secret = cluster.core.read_namespaced_secret("db-credentials", namespace)
        return owner_uids(pvc) == [] and owner_uids(secret) == []

    wait_for(released, what="owner references to be dropped from the PVC and the Secret")


def test_data_the_operator_did_not_create_is_never_deleted(
    cluster: Cluster, namespace: str, operator: OperatorProcess
) -> None:
    # A PVC that happens to have the name the Database would use, made by someone else.
    cluster.create_claim(namespace, "db-data")
    cluster.create_db(namespace, "db", {"deletionPolicy": "Delete"})
    wait_for_status(cluster, namespace, "db", "first reconcile", observed)
    hold(cluster, namespace, "db")
    deleting(cluster, namespace, "db")
    pvc = cluster.core.read_namespaced_persistent_volume_claim("db-data", namespace)
    assert pvc.metadata.deletion_timestamp is None
    release(cluster, namespace, "db")


def test_steady_state_resyncs_make_no_write_requests(
    cluster: Cluster, namespace: str, operator: OperatorProcess
) -> None:
    cluster.create_db(namespace, "db", {"storage": {"size": "1Gi"}})
    cluster.create_db(namespace, "cache", {"engine": "redis", "replicas": 2})
    for name in ("db", "cache"):
        wait_for_status(cluster, namespace, name, "first reconcile", observed)
        play_kubelet(cluster, namespace, name)
        wait_for_status(cluster, namespace, name, "Active", phase_is("Active"))
    # Let the last status write and Kopf's own bookkeeping settle before counting.
    settled = len(operator.resyncs("db"))
    wait_for(lambda: len(operator.resyncs("db")) >= settled + 2, what="resyncs")

    before = write_requests(cluster)
    assert before.get("PATCH databases/status", 0) > 0, "the counter must see the status writes"
    resyncs = len(operator.resyncs("db")) + len(operator.resyncs("cache"))
    wait_for(
        lambda: len(operator.resyncs("db")) + len(operator.resyncs("cache")) >= resyncs + 10,
        timeout=RESYNC_S * 5 + 10,
        what="ten more resyncs",
    )
    after = write_requests(cluster)
    writes = {
        key: after[key] - before.get(key, 0) for key in after if after[key] != before.get(key)
    }
    assert writes == {}, f"steady-state resyncs wrote: {writes}"


def test_a_sub_millicore_request_converges_on_what_the_api_server_stores(
    cluster: Cluster, namespace: str, operator: OperatorProcess
) -> None:
    # The CRD takes 0.1m; the API server stores the Deployment's request rounded up, as 1m.
    cluster.create_db(namespace, "db", {"resources": {"requests": {"cpu": "0.1m"}}})
    wait_for_status(cluster, namespace, "db", "first reconcile", observed)
    deployment = cluster.apps.read_namespaced_deployment("db", namespace)
    assert deployment.spec.template.spec.containers[0].resources.requests["cpu"] == "1m"
    settled = len(operator.resyncs("db"))
    wait_for(lambda: len(operator.resyncs("db")) >= settled + 1, what="a resync")
    before = write_requests(cluster)
    resyncs = len(operator.resyncs("db"))
    wait_for(
        lambda: len(operator.resyncs("db")) >= resyncs + 5,
        timeout=RESYNC_S * 5 + 10,
        what="five more resyncs",
    )
    after = write_requests(cluster)
    writes = {
        key: after[key] - before.get(key, 0) for key in after if after[key] != before.get(key)
    }
    failures = [line for line in operator.log_lines() if line["event"] == "reconcile failed"]
    print(f"cpu 0.1m: {len(failures)} failed reconciles, writes in five resyncs: {writes}")
    assert writes == {}
    assert failures == []
    db = cluster.get_db(namespace, "db")
    assert (condition(db, "Degraded") or {}).get("reason") != "ReconcileError"
    assert db["status"]["phase"] != "Failed"


def test_failed_databases_write_nothing_until_their_spec_changes(
    cluster: Cluster, namespace: str, operator: OperatorProcess
) -> None:
    cluster.create_db(namespace, "grown", {"storage": {"size": "1Gi"}})
    cluster.create_db(namespace, "nocreds", {"credentialsSecretRef": {"name": "absent"}})
    wait_for_status(cluster, namespace, "grown", "first reconcile", observed)
    # No StorageClass allows expansion: every apply of the claim is refused.
    cluster.patch_db(namespace, "grown", {"spec": {"storage": {"size": "5Gi"}}})
    for name in ("grown", "nocreds"):
        wait_for_status(cluster, namespace, name, "Failed", phase_is("Failed"))
    wait_for(lambda: len(events_for(cluster, namespace, "grown")) >= 2, what="its Events")
    time.sleep(2 * RESYNC_S)  # the last writes settle
    before, events = (
        write_requests(cluster),
        len(cluster.core.list_namespaced_event(namespace).items),
    )
    quiet = 10 * RESYNC_S
    time.sleep(quiet)
    after = write_requests(cluster)
    writes = {
        key: after[key] - before.get(key, 0) for key in after if after[key] != before.get(key)
    }
    posted = len(cluster.core.list_namespaced_event(namespace).items) - events
    print(
        f"2 Failed Databases, {quiet:.0f} s quiet at resync {RESYNC_S} s: writes {writes}, "
        f"{posted} Events"
    )
    assert writes == {}
    assert posted == 0
    # A spec the user changed is tried again at once (and refused again: the claim still grows).
    cluster.patch_db(namespace, "grown", {"spec": {"replicas": 0}})
    wait_for_status(cluster, namespace, "grown", "the change reconciled", observed)
    assert cluster.apps.read_namespaced_deployment("grown", namespace).spec.replicas == 0


def test_a_lost_secret_is_not_regenerated_over_existing_data(
    cluster: Cluster, namespace: str, operator: OperatorProcess
) -> None:
    cluster.create_db(namespace, "db", {"storage": {"size": "1Gi"}})
    wait_for_status(cluster, namespace, "db", "first reconcile", observed)
    secret = cluster.core.read_namespaced_secret("db-credentials", namespace)
    cluster.core.delete_namespaced_secret("db-credentials", namespace)

    failed = wait_for_status(cluster, namespace, "db", "Failed", phase_is("Failed"))
    ready = condition(failed, "Ready")
    assert ready is not None
    assert ready["reason"] == "CredentialsSecretLost"
    assert "db-data" in ready["message"]
    wait_for(lambda: len(operator.resyncs("db")) >= 2, what="two resyncs")
    with pytest.raises(client.ApiException) as missing:
        cluster.core.read_namespaced_secret("db-credentials", namespace)
    assert missing.value.status == 404, "the Secret was regenerated"

    # Restoring it from a backup (metadata included) recovers the Database.
    cluster.core.create_namespaced_secret(
        namespace,
        client.V1Secret(
            metadata=client.V1ObjectMeta(
                name="db-credentials", annotations=secret.metadata.annotations
            ),
            data=secret.data,
        ),
    )
    wait_for_status(cluster, namespace, "db", "Pending again", phase_is("Pending"))
