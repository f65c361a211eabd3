"""A Database means what its user thinks: one primary and read replicas, a connection Secret an
application binds to, placement and engine settings — against the real kube-apiserver."""

from __future__ import annotations

import base64
from typing import Any

from kubernetes import client

from tests.cluster import Cluster, play_kubelet, wait_for
from tests.integration.conftest import RESYNC_S, OperatorProcess
from tests.integration.waiting import observed, phase_is, wait_for_status

ROLE = "databases.example.com/role"


def deployment_or_none(cluster: Cluster, namespace: str, name: str) -> Any:
    try:
        return cluster.apps.read_namespaced_deployment(name, namespace)
    except client.ApiException as error:
        if error.status != 404:
            raise
        return None


def service_or_none(cluster: Cluster, namespace: str, name: str) -> Any:
    try:
        return cluster.core.read_namespaced_service(name, namespace)
    except client.ApiException as error:
        if error.status != 404:
            raise
        return None


def read_replicas(cluster: Cluster, namespace: str) -> int | None:
    found = deployment_or_none(cluster, namespace, "db-replicas")
    return None if found is None else int(found.spec.replicas)


def connection(cluster: Cluster, namespace: str, name: str = "db") -> dict[str, str]:
    secret = cluster.core.read_namespaced_secret(f"{name}-connection", namespace)
    return {k: base64.b64decode(v).decode() for k, v in (secret.data or {}).items()}


def test_replicas_are_a_primary_and_read_replicas_behind_two_services(
    cluster: Cluster, namespace: str, operator: OperatorProcess
) -> None:
    cluster.create_db(namespace, "db", {"replicas": 3, "storage": {"size": "1Gi"}})
    wait_for_status(cluster, namespace, "db", "first reconcile", observed)
    primary = cluster.apps.read_namespaced_deployment("db", namespace)
    replicas = cluster.apps.read_namespaced_deployment("db-replicas", namespace)
    assert (primary.spec.replicas, replicas.spec.replicas) == (1, 2)
    assert primary.spec.selector.match_labels[ROLE] == "primary"
    assert replicas.spec.selector.match_labels[ROLE] == "replica"
    # The volume is the primary's; read replicas clone it into ephemeral storage.
    assert primary.spec.template.spec.volumes[0].persistent_volume_claim.claim_name == "db-data"
    assert replicas.spec.template.spec.volumes[0].empty_dir is not None
    rw = cluster.core.read_namespaced_service("db", namespace)
    ro = cluster.core.read_namespaced_service("db-replicas", namespace)
    assert (rw.spec.selector[ROLE], ro.spec.selector[ROLE]) == ("primary", "replica")

    play_kubelet(cluster, namespace, "db")
    active = wait_for_status(cluster, namespace, "db", "Active", phase_is("Active"))
    status = active["status"]
    assert (status["replicas"], status["readyReplicas"], status["primaryReady"]) == (3, 3, True)
    assert (status["readReplicas"], status["readyReadReplicas"]) == (2, 2)
    assert status["readEndpoint"] == f"db-replicas.{namespace}.svc:5432"
    # The scale subresource counts every pod of the Database.
    scale = cluster.custom.get_namespaced_custom_object_scale(
        "databases.example.com", "v1", namespace, "databases", "db"
    )
    assert scale["status"]["replicas"] == 3


def test_scaling_through_the_scale_subresource_changes_the_read_replicas(
    cluster: Cluster, namespace: str, operator: OperatorProcess
) -> None:
    cluster.create_db(namespace, "db", {"engine": "redis", "storage": {"size": "1Gi"}})
    wait_for_status(cluster, namespace, "db", "first reconcile", observed)
    claim = cluster.core.read_namespaced_persistent_volume_claim("db-data", namespace)

    cluster.kubectl("scale", "db/db", "-n", namespace, "--replicas=4")
    wait_for(lambda: read_replicas(cluster, namespace) == 3, what="three read replicas")
    assert cluster.apps.read_namespaced_deployment("db", namespace).spec.replicas == 1
    wait_for(
        lambda: "read-only-host" in connection(cluster, namespace),
        what="the read replicas' entries in the connection Secret",
    )

    # To 0 (hibernate) and back: the read replicas go, the primary's volume stays.
    cluster.kubectl("scale", "db/db", "-n", namespace, "--replicas=0")
    wait_for(
        lambda: (
            deployment_or_none(cluster, namespace, "db-replicas") is None
            and service_or_none(cluster, namespace, "db-replicas") is None
        ),
        what="the read replicas' Deployment and Service to go",
    )
    assert cluster.apps.read_namespaced_deployment("db", namespace).spec.replicas == 0
    # Nor does the connection Secret name them any more.
    wait_for(
        lambda: not {"read-only-host", "read-only-uri"} & set(connection(cluster, namespace)),
        what="the read replicas' entries to leave the connection Secret",
    )
    cluster.kubectl("scale", "db/db", "-n", namespace, "--replicas=2")
    wait_for(
        lambda: deployment_or_none(cluster, namespace, "db-replicas") is not None,
        what="a read replica again",
    )
    again = cluster.core.read_namespaced_persistent_volume_claim("db-data", namespace)
    assert again.metadata.uid == claim.metadata.uid


def test_a_namesake_of_the_read_replicas_is_never_deleted(
    cluster: Cluster, namespace: str, operator: OperatorProcess
) -> None:
    # A Service the operator did not create, named like the read replicas' Service.
    cluster.core.create_namespaced_service(
        namespace,
        client.V1Service(
            metadata=client.V1ObjectMeta(name="db-replicas"),
            spec=client.V1ServiceSpec(selector={"app": "x"}, ports=[client.V1ServicePort(port=80)]),
        ),
    )
    cluster.create_db(namespace, "db", {"engine": "redis"})
    wait_for_status(cluster, namespace, "db", "first reconcile", observed)
    wait_for(lambda: len(operator.resyncs("db")) >= 2, what="two resyncs")
    assert service_or_none(cluster, namespace, "db-replicas") is not None


def test_the_connection_secret_carries_what_an_application_needs(
    cluster: Cluster, namespace: str, operator: OperatorProcess
) -> None:
    cluster.create_db(namespace, "db", {"engine": "postgres", "replicas": 2})
    created = wait_for_status(cluster, namespace, "db", "first reconcile", observed)
    assert created["status"]["binding"] == {"name": "db-connection"}
    secret = cluster.core.read_namespaced_secret("db-connection", namespace)
    assert secret.type == "servicebinding.io/postgresql"
    assert [ref.kind for ref in secret.metadata.owner_references] == ["Database"]
    credentials = cluster.core.read_namespaced_secret("db-credentials", namespace)
    password = base64.b64decode(credentials.data["password"]).decode()
    entries = connection(cluster, namespace)
    assert entries == {
        "type": "postgresql",
        "provider": "database-operator",
        "host": f"db.{namespace}.svc",
        "port": "5432",
        "username": "app",
        "password": password,
        "database": "app",
        "uri": f"postgresql://app:{password}@db.{namespace}.svc:5432/app",
        "jdbc-uri": f"jdbc:postgresql://db.{namespace}.svc:5432/app",
        "read-only-host": f"db-replicas.{namespace}.svc",
        "read-only-uri": f"postgresql://app:{password}@db-replicas.{namespace}.svc:5432/app",
    }

    # A port change rewrites it; the password stays the one the credentials hold.
    cluster.patch_db(namespace, "db", {"spec": {"port": 15432}})
    wait_for(lambda: connection(cluster, namespace)["port"] == "15432", what="the new port")
    assert connection(cluster, namespace)["password"] == password
    assert cluster.core.read_namespaced_secret("db-credentials", namespace).data == credentials.data

    # Drift is put back.
    cluster.core.patch_namespaced_secret(
        "db-connection", namespace, {"stringData": {"host": "elsewhere"}}
    )
    wait_for(
        lambda: connection(cluster, namespace)["host"] == f"db.{namespace}.svc",
        timeout=RESYNC_S * 3 + 10,
        what="the host put back",
    )


def test_the_connection_secret_follows_a_users_credentials(
    cluster: Cluster, namespace: str, operator: OperatorProcess
) -> None:
    cluster.create_secret(namespace, "users", {"username": "shop", "password": "first"})
    cluster.create_db(
        namespace, "db", {"engine": "mysql", "credentialsSecretRef": {"name": "users"}}
    )
    wait_for_status(cluster, namespace, "db", "first reconcile", observed)
    entries = connection(cluster, namespace)
    assert (entries["username"], entries["password"], entries["database"]) == (
        "shop",
        "first",
        "shop",
    )
    assert entries["uri"] == f"mysql://shop:first@db.{namespace}.svc:3306/shop"
    cluster.core.patch_namespaced_secret("users", namespace, {"stringData": {"password": "2nd"}})
    wait_for(
        lambda: connection(cluster, namespace)["password"] == "2nd",
        timeout=RESYNC_S * 3 + 10,
        what="the connection Secret to follow the user's (within a resync)",
    )


def test_postgres_read_replicas_need_a_replication_password_in_a_users_secret(
    cluster: Cluster, namespace: str, operator: OperatorProcess
) -> None:
    cluster.create_secret(namespace, "users", {"username": "shop", "password": "pw"})
    cluster.create_db(namespace, "db", {"replicas": 2, "credentialsSecretRef": {"name": "users"}})
    failed = wait_for_status(cluster, namespace, "db", "Failed", phase_is("Failed"))
    ready = next(c for c in failed["status"]["conditions"] if c["type"] == "Ready")
    assert ready["reason"] == "CredentialsSecretInvalid"
    assert "replication-password" in ready["message"]
    assert "read replicas need it" in ready["message"]
    cluster.core.patch_namespaced_secret(
        "users", namespace, {"stringData": {"replication-password": "rpw"}}
    )
    wait_for_status(cluster, namespace, "db", "Pending", phase_is("Pending"), timeout=30)


def test_a_secret_generated_before_replicas_existed_gets_its_replication_key(
    cluster: Cluster, namespace: str, operator: OperatorProcess
) -> None:
    # What 0.1.0 generated: username and password only, marked as the operator's.
    cluster.create_secret(
        namespace,
        "db-credentials",
        {"username": "app", "password": "kept"},
        annotations={"databases.example.com/created-for": "db"},
    )
    cluster.create_db(namespace, "db", {"replicas": 2})
    wait_for_status(cluster, namespace, "db", "first reconcile", observed)
    data = cluster.core.read_namespaced_secret("db-credentials", namespace).data
    assert base64.b64decode(data["password"]).decode() == "kept", "never regenerated"
    assert len(base64.b64decode(data["replication-password"]).decode()) == 32


def test_a_deployment_with_the_old_selector_is_replaced(
    cluster: Cluster, namespace: str, operator: OperatorProcess
) -> None:
    created = cluster.create_db(namespace, "db", {"engine": "redis", "paused": True})
    # A Deployment as 0.1.0 made it: selected by name and instance only, controlled by the
    # Database. Its selector cannot change in place.
    labels = {"app.kubernetes.io/name": "redis", "app.kubernetes.io/instance": "db"}
    ref = client.V1OwnerReference(
        api_version="databases.example.com/v1",
        kind="Database",
        name="db",
        uid=created["metadata"]["uid"],
        controller=True,
    )
    cluster.apps.create_namespaced_deployment(
        namespace,
        client.V1Deployment(
            metadata=client.V1ObjectMeta(name="db", labels=labels, owner_references=[ref]),
            spec=client.V1DeploymentSpec(
                selector=client.V1LabelSelector(match_labels=labels),
                template=client.V1PodTemplateSpec(
                    metadata=client.V1ObjectMeta(labels=labels),
                    spec=client.V1PodSpec(
                        containers=[client.V1Container(name="redis", image="redis:7.4")]
                    ),
                ),
            ),
        ),
    )
    old = cluster.apps.read_namespaced_deployment("db", namespace)
    cluster.patch_db(namespace, "db", {"spec": {"paused": False}})

    def replaced() -> bool:
        found = deployment_or_none(cluster, namespace, "db")
        return bool(found and found.metadata.uid != old.metadata.uid)

    wait_for(replaced, what="the Deployment to be made anew")
    new = cluster.apps.read_namespaced_deployment("db", namespace)
    assert new.spec.selector.match_labels[ROLE] == "primary"
    # The reconcile logs what it did once it finished (its status written after the Deployment).
    recreated = wait_for(
        lambda: [line for line in operator.reconciles("db") if line.get("children_recreated")],
        what="the reconcile's log line",
    )
    assert recreated[0]["children_recreated"] == ["Deployment"]


def test_placement_and_settings_reach_the_pods(
    cluster: Cluster, namespace: str, operator: OperatorProcess
) -> None:
    cluster.create_db(
        namespace,
        "db",
        {
            "engine": "redis",
            "replicas": 2,
            "parameters": {"maxmemory": "64mb", "maxmemory-policy": "allkeys-lru"},
            "nodeSelector": {"disk": "ssd"},
            "tolerations": [{"key": "dedicated", "operator": "Exists", "effect": "NoSchedule"}],
            "priorityClassName": "databases",
            "serviceType": "LoadBalancer",
            "serviceAnnotations": {"lb.example.com/internal": "true"},
            "podAnnotations": {"backup.example.com/hourly": "yes"},
        },
    )
    wait_for_status(cluster, namespace, "db", "first reconcile", observed)
    for name in ("db", "db-replicas"):
        pod = cluster.apps.read_namespaced_deployment(name, namespace).spec.template
        assert pod.spec.node_selector == {"disk": "ssd"}
        assert pod.spec.tolerations[0].key == "dedicated"
        assert pod.spec.priority_class_name == "databases"
        assert pod.metadata.annotations["backup.example.com/hourly"] == "yes"
        args = pod.spec.containers[0].command  # Redis's: its script's arguments
        assert args[-4:] == ["--maxmemory", "64mb", "--maxmemory-policy", "allkeys-lru"]
    service = cluster.core.read_namespaced_service("db", namespace)
    annotations = dict(service.metadata.annotations)
    # Beside the user's: the digest of what the operator applied (design.md, Children).
    assert len(annotations.pop("databases.example.com/applied-digest")) == 16
    assert annotations == {"lb.example.com/internal": "true"}
    # A changed setting rolls the pods (a new pod template).
    before = cluster.apps.read_namespaced_deployment("db", namespace).metadata.generation
    cluster.patch_db(namespace, "db", {"spec": {"parameters": {"maxmemory": "128mb"}}})
    wait_for(
        lambda: (
            cluster.apps.read_namespaced_deployment("db", namespace).metadata.generation > before
        ),
        what="the pods to roll",
    )
