"""Never touch what is not ours: name clashes are reported, never adopted; drift by another field
manager is healed without wedging; changed credentials roll the pods; names that cannot become
child names are refused at admission. Regression tests of issue #10's cases 1-7, against the
real kube-apiserver.
"""

from __future__ import annotations

import asyncio
import base64
import json
from typing import Any

import pytest
from kubernetes import client

from database_operator.kube.api import Kube
from database_operator.kube.errors import ApiError
from tests.cluster import Cluster, condition, play_kubelet, wait_for, write_requests
from tests.integration.conftest import RESYNC_S, OperatorProcess
from tests.integration.waiting import events_for, observed, phase_is, wait_for_status

CHECKSUM = "databases.example.com/credentials-checksum"


def conflict_reported(cluster: Cluster, namespace: str, name: str) -> dict[str, Any]:
    def clash(db: dict[str, Any]) -> bool:
        ready = condition(db, "Ready") or {}
        return ready.get("reason") == "ChildNameConflict"

    failed = wait_for_status(cluster, namespace, name, "ChildNameConflict", clash)
    assert failed["status"]["phase"] == "Failed"
    assert failed["status"]["observedGeneration"] == failed["metadata"]["generation"]
    wait_for(
        lambda: [
            e
            for e in events_for(cluster, namespace, name)
            if e.type == "Warning" and e.reason == "ChildNameConflict"
        ],
        what="a Warning Event ChildNameConflict",
    )
    return failed


def deleted_and_gone(cluster: Cluster, namespace: str, name: str) -> None:
    cluster.delete_db(namespace, name)
    wait_for(lambda: cluster.db_gone(namespace, name), what=f"{name} to be gone")


def ready_message(db: dict[str, Any]) -> str:
    return str((condition(db, "Ready") or {}).get("message", ""))


def no_children(cluster: Cluster, namespace: str, name: str) -> None:
    for read in (cluster.apps.read_namespaced_deployment, cluster.core.read_namespaced_service):
        with pytest.raises(client.ApiException) as missing:
            read(name, namespace)
        assert missing.value.status == 404


def test_a_users_secret_with_the_generated_name_is_never_adopted_or_deleted(
    cluster: Cluster, namespace: str, operator: OperatorProcess
) -> None:
    # Case 1: the user's own Secret named <db>-credentials, deletionPolicy Delete, no ref.
    mine = cluster.create_secret(
        namespace, "db-credentials", {"password": "the-users-own"}, labels={"team": "a"}
    )
    cluster.create_db(namespace, "db", {"deletionPolicy": "Delete"})
    failed = conflict_reported(cluster, namespace, "db")
    assert "Secret 'db-credentials' exists" in ready_message(failed)
    assert "credentialsSecretRef" in ready_message(failed)
    no_children(cluster, namespace, "db")

    deleted_and_gone(cluster, namespace, "db")
    after = cluster.core.read_namespaced_secret("db-credentials", namespace)
    assert after.metadata.resource_version == mine.metadata.resource_version
    assert after.metadata.owner_references is None
    assert after.metadata.deletion_timestamp is None


def test_a_clash_that_is_resolved_lets_the_database_proceed(
    cluster: Cluster, namespace: str, operator: OperatorProcess
) -> None:
    cluster.create_secret(namespace, "db-credentials", {})
    cluster.create_db(namespace, "db", {})
    conflict_reported(cluster, namespace, "db")
    cluster.core.delete_namespaced_secret("db-credentials", namespace)
    wait_for_status(cluster, namespace, "db", "Pending", phase_is("Pending"))
    generated = cluster.core.read_namespaced_secret("db-credentials", namespace)
    assert generated.metadata.annotations == {"databases.example.com/created-for": "db"}


def test_a_pvc_the_operator_did_not_create_is_never_adopted_or_deleted(
    cluster: Cluster, namespace: str, operator: OperatorProcess
) -> None:
    # Case 2: a pre-existing <db>-data, credentials from a user Secret, storage, Delete.
    cluster.create_secret(namespace, "app-creds", {"username": "u", "password": "p"})
    claim = cluster.create_claim(namespace, "db-data")
    cluster.create_db(
        namespace,
        "db",
        {
            "credentialsSecretRef": {"name": "app-creds"},
            "storage": {"size": "1Gi"},
            "deletionPolicy": "Delete",
        },
    )
    failed = conflict_reported(cluster, namespace, "db")
    assert "PersistentVolumeClaim 'db-data' exists" in ready_message(failed)
    no_children(cluster, namespace, "db")

    deleted_and_gone(cluster, namespace, "db")
    after = cluster.core.read_namespaced_persistent_volume_claim("db-data", namespace)
    assert after.metadata.resource_version == claim.metadata.resource_version
    assert after.metadata.deletion_timestamp is None


def test_an_unrelated_service_with_the_databases_name_is_left_alone(
    cluster: Cluster, namespace: str, operator: OperatorProcess
) -> None:
    # Case 3: Service web (selector app=web, port 80) before a Database named web.
    web = cluster.core.create_namespaced_service(
        namespace,
        client.V1Service(
            metadata=client.V1ObjectMeta(name="web"),
            spec=client.V1ServiceSpec(
                selector={"app": "web"}, ports=[client.V1ServicePort(port=80)]
            ),
        ),
    )
    cluster.create_db(namespace, "web", {})
    failed = conflict_reported(cluster, namespace, "web")
    assert "Service 'web' exists" in ready_message(failed)
    # Checked again after resyncs: nothing is ever written to it.
    wait_for(lambda: len(operator.resyncs("web")) >= 2, what="two resyncs")
    after = cluster.core.read_namespaced_service("web", namespace)
    assert after.metadata.resource_version == web.metadata.resource_version
    assert after.spec.selector == {"app": "web"}
    assert [port.port for port in after.spec.ports] == [80]
    assert after.metadata.owner_references is None
    with pytest.raises(client.ApiException):
        cluster.apps.read_namespaced_deployment("web", namespace)


def test_a_port_edited_by_another_manager_is_put_back_and_the_database_stays_healthy(
    cluster: Cluster, namespace: str, operator: OperatorProcess
) -> None:
    # Case 4: `kubectl edit svc/db` changing 5432 to 9999 (a field manager of its own).
    cluster.create_db(namespace, "db", {})
    wait_for_status(cluster, namespace, "db", "first reconcile", observed)
    play_kubelet(cluster, namespace, "db")
    wait_for_status(cluster, namespace, "db", "Active", phase_is("Active"))
    edit = [{"op": "replace", "path": "/spec/ports/0/port", "value": 9999}]
    cluster.kubectl("patch", "svc/db", "-n", namespace, "--type=json", "-p", json.dumps(edit))

    def put_back() -> bool:
        ports = cluster.core.read_namespaced_service("db", namespace).spec.ports
        return [(p.name, p.port) for p in ports] == [("postgres", 5432)]

    wait_for(put_back, timeout=RESYNC_S * 3 + 10, what="port 5432 back, alone")
    db = cluster.get_db(namespace, "db")
    assert db["status"]["phase"] == "Active"
    took_back = [line for line in operator.reconciles("db") if line.get("lists_taken_back")]
    assert took_back
    assert took_back[0]["lists_taken_back"] == ["Service"]


def test_env_and_containers_edited_by_another_manager_are_taken_back(
    cluster: Cluster, namespace: str, operator: OperatorProcess
) -> None:
    cluster.create_db(namespace, "db", {"engine": "redis"})
    wait_for_status(cluster, namespace, "db", "first reconcile", observed)
    original = cluster.apps.read_namespaced_deployment("db", namespace).spec.template.spec
    patch = {
        "spec": {
            "template": {
                "spec": {
                    "containers": [
                        {"name": "redis", "env": [{"name": "EXTRA", "value": "1"}]},
                        {"name": "sidecar", "image": "busybox"},
                    ]
                }
            }
        }
    }
    cluster.apps.patch_namespaced_deployment("db", namespace, patch)  # strategic merge

    def restored() -> bool:
        spec = cluster.apps.read_namespaced_deployment("db", namespace).spec.template.spec
        return [c.name for c in spec.containers] == ["redis"] and [
            e.name for e in spec.containers[0].env
        ] == [e.name for e in original.containers[0].env]

    wait_for(restored, timeout=RESYNC_S * 3 + 10, what="the containers and env put back")
    assert cluster.get_db(namespace, "db")["status"]["phase"] != "Failed"


def checksum_of(cluster: Cluster, namespace: str, name: str) -> str:
    template = cluster.apps.read_namespaced_deployment(name, namespace).spec.template
    return str(template.metadata.annotations[CHECKSUM])


def test_a_regenerated_secret_rolls_the_pods(
    cluster: Cluster, namespace: str, operator: OperatorProcess
) -> None:
    # Case 5: no storage, so a lost Secret may be made anew; the pods must follow it.
    cluster.create_db(namespace, "db", {"engine": "redis"})
    wait_for_status(cluster, namespace, "db", "first reconcile", observed)
    before = checksum_of(cluster, namespace, "db")
    old = cluster.core.read_namespaced_secret("db-credentials", namespace)
    cluster.core.delete_namespaced_secret("db-credentials", namespace)

    def regenerated() -> client.V1Secret | None:
        try:
            new = cluster.core.read_namespaced_secret("db-credentials", namespace)
        except client.ApiException:
            return None
        return new if new.metadata.uid != old.metadata.uid else None

    new = wait_for(regenerated, timeout=RESYNC_S * 3 + 10, what="a new Secret")
    assert new.data["password"] != old.data["password"]
    wait_for(
        lambda: checksum_of(cluster, namespace, "db") != before,
        what="the pod template to change with the credentials",
    )
    password = base64.b64decode(new.data["password"]).decode()
    assert password not in checksum_of(cluster, namespace, "db")


def test_an_edited_user_secret_rolls_the_pods(
    cluster: Cluster, namespace: str, operator: OperatorProcess
) -> None:
    cluster.create_secret(namespace, "app-creds", {"username": "u", "password": "first"})
    cluster.create_db(namespace, "db", {"credentialsSecretRef": {"name": "app-creds"}})
    wait_for_status(cluster, namespace, "db", "first reconcile", observed)
    before = checksum_of(cluster, namespace, "db")
    # Labels a tool adds change nothing the pods read: no roll.
    cluster.core.patch_namespaced_secret(
        "app-creds", namespace, {"metadata": {"labels": {"backup": "daily"}}}
    )
    wait_for(lambda: len(operator.resyncs("db")) >= 2, what="two resyncs")
    assert checksum_of(cluster, namespace, "db") == before
    cluster.core.patch_namespaced_secret("app-creds", namespace, {"stringData": {"password": "2"}})
    wait_for(
        lambda: checksum_of(cluster, namespace, "db") != before,
        timeout=RESYNC_S * 3 + 10,
        what="the pod template to change with the user's Secret",
    )


@pytest.mark.parametrize(
    ("name", "why"),
    [
        ("a" * 64, "at most 63 characters"),
        ("1db", "start with a lowercase letter"),
        ("db.example", "no dots"),
        ("db-", "DNS label"),
    ],
)
def test_names_that_cannot_name_the_children_are_refused_at_admission(
    cluster: Cluster, namespace: str, name: str, why: str
) -> None:
    # Case 6: valid for a custom resource, not for the Database's Service.
    with pytest.raises(client.ApiException) as refused:
        cluster.create_db(namespace, name, {})
    assert refused.value.status == 422
    message = json.loads(refused.value.body)["message"]
    assert "metadata.name" in message
    assert why in message


def test_the_longest_name_allowed_works(
    cluster: Cluster, namespace: str, operator: OperatorProcess
) -> None:
    name = "d" * 63
    cluster.create_db(namespace, name, {"storage": {"size": "1Gi"}})
    created = wait_for_status(cluster, namespace, name, "first reconcile", observed)
    assert created["status"]["phase"] == "Pending"
    cluster.core.read_namespaced_service(name, namespace)
    cluster.core.read_namespaced_persistent_volume_claim(f"{name}-data", namespace)


def test_an_empty_resources_map_does_not_make_every_resync_write(
    cluster: Cluster, namespace: str, operator: OperatorProcess
) -> None:
    # Case 7: the API server drops the empty map; the comparison must not see a difference.
    cluster.create_db(
        namespace, "db", {"resources": {"limits": {}, "requests": {}}, "engine": "redis"}
    )
    wait_for_status(cluster, namespace, "db", "first reconcile", observed)
    play_kubelet(cluster, namespace, "db")
    wait_for_status(cluster, namespace, "db", "Active", phase_is("Active"))
    settled = len(operator.resyncs("db"))
    wait_for(lambda: len(operator.resyncs("db")) >= settled + 2, what="resyncs")
    before = write_requests(cluster)
    count = len(operator.resyncs("db"))
    wait_for(
        lambda: len(operator.resyncs("db")) >= count + 5,
        timeout=RESYNC_S * 5 + 10,
        what="five more resyncs",
    )
    after = write_requests(cluster)
    writes = {k: after[k] - before.get(k, 0) for k in after if after[k] != before.get(k)}
    assert writes == {}, f"resyncs wrote: {writes}"


# --- why a child the cache lacks is read before it is applied ---------------------------------
# A server-side apply creates what is missing and merges into whatever has the name, so only a
# read tells a user's namesake apart. These are the two ways around the read that the API server
# does not offer (issue 26); they fail here the day it does.


def secret(name: str, namespace: str, *keys: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": name, "namespace": namespace},
        "data": {key: base64.b64encode(b"x").decode() for key in keys},
    }


def test_an_apply_has_no_create_only_form(cluster: Cluster, namespace: str) -> None:
    # A uid precondition would refuse a namesake, but it is refused when nothing exists too.
    body = secret("fresh", namespace, "k")
    body["metadata"]["uid"] = "00000000-0000-0000-0000-000000000000"
    with pytest.raises(ApiError) as refused:
        asyncio.run(Kube(cluster.api).apply(body))
    assert refused.value.status == 409
    assert "no existing object was found" in refused.value.message


def test_a_create_leaves_fields_a_later_apply_cannot_drop(cluster: Cluster, namespace: str) -> None:
    # A POST refuses a namesake (409), but it records its fields under an Update entry, even
    # when the request names an Apply one; the manager's later apply then cannot drop them.
    kube = Kube(cluster.api)
    created = secret("posted", namespace, "kept", "dropped")
    created["metadata"]["managedFields"] = [
        {
            "manager": kube.field_manager,
            "operation": "Apply",
            "apiVersion": "v1",
            "fieldsType": "FieldsV1",
            "fieldsV1": {"f:data": {"f:kept": {}, "f:dropped": {}}},
        }
    ]
    stored = asyncio.run(kube.create(created))
    assert stored is not None
    assert [entry["operation"] for entry in stored["metadata"]["managedFields"]] == ["Update"]
    applied = asyncio.run(kube.apply(secret("posted", namespace, "kept")))
    assert sorted(applied["data"]) == ["dropped", "kept"]
