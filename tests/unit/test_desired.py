"""The desired children of a Database: pure builders, checked as plain data."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest

from database_operator import desired, replication
from database_operator.api.models import Database
from database_operator.compare import needs_write
from database_operator.engines import ENGINES, Engine

UID = "0b1c2d3e-0000-4000-8000-000000000001"
OWNER = {
    "apiVersion": "databases.example.com/v1",
    "kind": "Database",
    "name": "shop",
    "uid": UID,
    "blockOwnerDeletion": True,
}


def make_db(uid: str | None = UID, **spec: Any) -> Database:
    """A Database named shop in namespace prod, with the given (camelCase) spec."""
    metadata: dict[str, Any] = {"name": "shop", "namespace": "prod", "generation": 1}
    if uid is not None:
        metadata["uid"] = uid
    return Database.model_validate({"metadata": metadata, "spec": spec})


def pod_spec(db: Database) -> dict[str, Any]:
    spec: dict[str, Any] = desired.deployment(db)["spec"]["template"]["spec"]
    return spec


def container(db: Database) -> dict[str, Any]:
    containers: list[dict[str, Any]] = pod_spec(db)["containers"]
    assert len(containers) == 1
    return containers[0]


STANDARD_LABELS = {
    "app.kubernetes.io/name": "postgres",
    "app.kubernetes.io/instance": "shop",
    "app.kubernetes.io/component": "database",
    "app.kubernetes.io/managed-by": "database-operator",
}


# --- labels, names, resolved values ---------------------------------------------------------


def test_labels_name_engine_instance_component_and_manager() -> None:
    assert desired.labels(make_db()) == STANDARD_LABELS


def test_selector_labels_are_engine_and_instance_only() -> None:
    assert desired.selector_labels(make_db(engine="redis")) == {
        "app.kubernetes.io/name": "redis",
        "app.kubernetes.io/instance": "shop",
    }


def test_selector_string_is_sorted_key_value_pairs() -> None:
    assert desired.selector_string(make_db()) == (
        "app.kubernetes.io/instance=shop,app.kubernetes.io/name=postgres"
    )


def test_every_child_and_the_pod_template_carry_the_labels() -> None:
    db = make_db(storage={"size": "1Gi"})
    objects = [*desired.children(db), desired.secret(db, "pw", "rpw")]
    assert {obj["kind"] for obj in objects} == {
        "Deployment",
        "Service",
        "PersistentVolumeClaim",
        "Secret",
    }
    for obj in objects:
        assert obj["metadata"]["labels"] == STANDARD_LABELS, obj["kind"]
        assert obj["metadata"]["namespace"] == "prod"
    assert desired.deployment(db)["spec"]["template"]["metadata"]["labels"] == {
        **STANDARD_LABELS,
        "databases.example.com/role": "primary",
    }


@pytest.mark.parametrize(
    ("engine", "version", "port"),
    [("postgres", "16", 5432), ("mysql", "8.4", 3306), ("redis", "7.4", 6379)],
)
def test_engine_defaults_for_version_port_and_image(engine: str, version: str, port: int) -> None:
    db = make_db(engine=engine)
    assert desired.resolved_version(db) == version
    assert desired.resolved_port(db) == port
    assert desired.endpoint(db) == f"shop.prod.svc:{port}"
    assert container(db)["image"] == f"docker.io/library/{engine}:{version}"


def test_spec_version_picks_the_official_image_tag() -> None:
    db = make_db(engine="postgres", version="15.6")
    assert desired.resolved_version(db) == "15.6"
    assert container(db)["image"] == "docker.io/library/postgres:15.6"


def test_spec_image_overrides_the_official_image() -> None:
    db = make_db(image="registry.local/pg:custom", version="15")
    assert container(db)["image"] == "registry.local/pg:custom"
    assert desired.resolved_version(db) == "15"


def test_spec_port_changes_the_service_port_and_endpoint_but_not_the_container() -> None:
    db = make_db(engine="mysql", port=13306)
    assert desired.resolved_port(db) == 13306
    assert desired.endpoint(db) == "shop.prod.svc:13306"
    assert container(db)["ports"] == [{"name": "mysql", "containerPort": 3306, "protocol": "TCP"}]


def test_credentials_secret_name_defaults_to_name_credentials() -> None:
    assert desired.credentials_secret_name(make_db()) == "shop-credentials"


def test_credentials_secret_name_follows_the_ref() -> None:
    db = make_db(credentialsSecretRef={"name": "my-creds"})
    assert desired.credentials_secret_name(db) == "my-creds"


# --- owner references ------------------------------------------------------------------------


def test_deployment_and_service_have_a_controller_owner_reference() -> None:
    db = make_db()
    for obj in (desired.deployment(db), desired.service(db)):
        assert obj["metadata"]["ownerReferences"] == [{**OWNER, "controller": True}]


@pytest.mark.parametrize("policy", ["Retain", "Delete"])
def test_deployment_and_service_are_owned_whatever_the_deletion_policy(policy: str) -> None:
    db = make_db(deletionPolicy=policy, storage={"size": "1Gi"})
    assert desired.deployment(db)["metadata"]["ownerReferences"][0]["uid"] == UID
    assert desired.service(db)["metadata"]["ownerReferences"][0]["uid"] == UID


def test_pvc_and_secret_are_owned_with_deletion_policy_delete() -> None:
    db = make_db(deletionPolicy="Delete", storage={"size": "1Gi"})
    claim = desired.pvc(db)
    assert claim is not None
    for obj in (claim, desired.secret(db, "pw", "rpw")):
        assert obj["metadata"]["ownerReferences"] == [{**OWNER, "controller": False}]


def test_pvc_and_secret_are_not_owned_with_deletion_policy_retain() -> None:
    db = make_db(storage={"size": "1Gi"})
    claim = desired.pvc(db)
    assert claim is not None
    for obj in (claim, desired.secret(db, "pw", "rpw")):
        assert "ownerReferences" not in obj["metadata"]


def test_without_a_uid_there_are_no_owner_references() -> None:
    db = make_db(uid=None, deletionPolicy="Delete", storage={"size": "1Gi"})
    for obj in [*desired.children(db), desired.secret(db, "pw", "rpw")]:
        assert "ownerReferences" not in obj["metadata"], obj["kind"]


# --- deployment -----------------------------------------------------------------------------


def test_the_primary_deployment_is_named_after_the_database_and_runs_one_pod() -> None:
    deployment = desired.deployment(make_db(replicas=3))
    assert deployment["apiVersion"] == "apps/v1"
    assert deployment["kind"] == "Deployment"
    assert deployment["metadata"]["name"] == "shop"
    assert deployment["spec"]["replicas"] == 1
    assert deployment["spec"]["selector"] == {
        "matchLabels": {
            "app.kubernetes.io/name": "postgres",
            "app.kubernetes.io/instance": "shop",
            "databases.example.com/role": "primary",
        }
    }
    assert desired.deployment(make_db(replicas=0))["spec"]["replicas"] == 0


def test_deployment_selector_matches_the_pod_template() -> None:
    deployment = desired.deployment(make_db())
    selector = deployment["spec"]["selector"]["matchLabels"]
    template_labels = deployment["spec"]["template"]["metadata"]["labels"]
    assert selector.items() <= template_labels.items()


def test_deployment_rolls_updates_without_storage() -> None:
    strategy = desired.deployment(make_db())["spec"]["strategy"]
    assert strategy["type"] == "RollingUpdate"


def test_deployment_recreates_with_storage() -> None:
    strategy = desired.deployment(make_db(storage={"size": "1Gi"}))["spec"]["strategy"]
    assert strategy == {"type": "Recreate"}


def test_container_is_named_after_the_engine_with_a_named_port() -> None:
    spec = container(make_db(engine="redis"))
    assert spec["name"] == "redis"
    assert spec["ports"] == [{"name": "redis", "containerPort": 6379, "protocol": "TCP"}]


@pytest.mark.parametrize("engine", list(Engine))
def test_credentials_come_from_the_secret_by_reference(engine: Engine) -> None:
    env = container(make_db(engine=engine.value))["env"]
    from_secret = {
        item["name"]: item["valueFrom"]["secretKeyRef"] for item in env if "valueFrom" in item
    }
    required = {
        var: {"name": "shop-credentials", "key": key}
        for var, key in ENGINES[engine].secret_env.items()
    }
    # The replication password is optional: a single instance runs without it.
    optional = {
        var: {"name": "shop-credentials", "key": key, "optional": True}
        for var, key in ENGINES[engine].replication_env.items()
    }
    assert from_secret == required | optional


def test_env_reads_a_referenced_secret() -> None:
    env = container(make_db(credentialsSecretRef={"name": "my-creds"}))["env"]
    names = {item["valueFrom"]["secretKeyRef"]["name"] for item in env if "valueFrom" in item}
    assert names == {"my-creds"}


def test_env_has_the_engine_plain_values() -> None:
    env = container(make_db(engine="postgres"))["env"]
    assert {"name": "PGDATA", "value": "/var/lib/postgresql/data/pgdata"} in env


def test_no_password_appears_outside_the_secret() -> None:
    db = make_db(engine="mysql", deletionPolicy="Delete", storage={"size": "1Gi"})
    password = "Sup3rSecretPassw0rdValue"
    rendered = json.dumps(desired.children(db))
    assert password not in rendered
    secret_data = json.dumps(desired.secret(db, password))
    assert password not in secret_data  # even there, only base64
    assert base64.b64encode(password.encode()).decode() in secret_data


def test_redis_reads_its_passwords_on_its_standard_input_not_its_command_line() -> None:
    main = container(make_db(engine="redis"))
    assert main["command"] == [
        "sh",
        "-c",
        f"set -eu\n{replication.REDIS_SERVER}",
        "redis",
        "--port",
        "6379",
        "--dir",
        "/data",
    ]
    assert not main.get("args")
    assert "requirepass" not in " ".join(main["command"][3:])


def test_postgres_runs_the_images_entrypoint_and_sets_up_replication_after_start() -> None:
    main = container(make_db(engine="postgres"))
    assert "command" not in main
    # The image's sample config decides nothing: the pod listens on every address (its Service).
    assert main["args"] == ["postgres", "-c", "listen_addresses=*"]
    hook = main["lifecycle"]["postStart"]["exec"]["command"]
    assert hook[:2] == ["sh", "-c"]
    assert "replicator" in hook[2]
    assert "REPLICATION_PASSWORD" in hook[2]


def test_mysql_has_no_args_without_parameters() -> None:
    assert "args" not in container(make_db(engine="mysql"))


@pytest.mark.parametrize("engine", list(Engine))
def test_readiness_probe_runs_the_engine_command(engine: Engine) -> None:
    probe = container(make_db(engine=engine.value))["readinessProbe"]
    assert probe == {
        "exec": {"command": list(ENGINES[engine].ready_command)},
        "periodSeconds": 10,
        "timeoutSeconds": 5,
        "failureThreshold": 3,
    }


def test_liveness_probe_checks_the_container_port() -> None:
    probe = container(make_db(engine="mysql"))["livenessProbe"]
    assert probe == {
        "tcpSocket": {"port": "mysql"},
        "initialDelaySeconds": 30,
        "periodSeconds": 10,
    }


@pytest.mark.parametrize("engine", list(Engine))
def test_pod_runs_restricted_as_the_image_uid(engine: Engine) -> None:
    uid = ENGINES[engine].uid
    pod = pod_spec(make_db(engine=engine.value))
    assert pod["securityContext"] == {
        "runAsNonRoot": True,
        "runAsUser": uid,
        "runAsGroup": uid,
        "fsGroup": uid,
        # The volume is given to the group once, not at every mount (PostgreSQL refuses a
        # group-writable data directory).
        "fsGroupChangePolicy": "OnRootMismatch",
        "seccompProfile": {"type": "RuntimeDefault"},
    }
    assert pod["automountServiceAccountToken"] is False


def test_container_drops_all_capabilities_and_privilege_escalation() -> None:
    assert container(make_db())["securityContext"] == {
        "allowPrivilegeEscalation": False,
        "capabilities": {"drop": ["ALL"]},
        "runAsNonRoot": True,
    }


def test_kept_children_are_marked_as_created_for_the_database() -> None:
    db = make_db(storage={"size": "1Gi"})
    claim = desired.pvc(db)
    assert claim is not None
    for obj in (claim, desired.secret(db, "pw", "rpw")):
        assert obj["metadata"]["annotations"] == {"databases.example.com/created-for": "shop"}
    for obj in (desired.deployment(db), desired.service(db)):
        assert "annotations" not in obj["metadata"]


def test_a_credentials_checksum_rolls_the_pods_only_when_the_values_change() -> None:
    db = make_db(engine="postgres")
    data = {"username": "YXBw", "password": "c2VjcmV0", "unrelated": "eA=="}
    checksum = desired.credentials_checksum(db, data)
    template = desired.deployment(db, checksum)["spec"]["template"]
    assert template["metadata"]["annotations"]["databases.example.com/credentials-checksum"] == (
        checksum
    )
    assert desired.credentials_checksum(db, {**data, "unrelated": "eQ=="}) == checksum
    assert desired.credentials_checksum(db, {**data, "password": "bmV3"}) != checksum
    # Salted per Secret: the same password elsewhere gives another checksum.
    other = Database.model_validate({"metadata": {"name": "other", "namespace": "prod"}})
    assert desired.credentials_checksum(other, data) != checksum
    for value in data.values():
        assert value not in checksum
        assert base64.b64decode(value).decode() not in checksum


def test_pod_template_names_the_credentials_secret_only() -> None:
    annotations = desired.deployment(make_db())["spec"]["template"]["metadata"]["annotations"]
    assert annotations == {"databases.example.com/credentials-secret": "shop-credentials"}


def test_data_is_an_empty_dir_without_storage() -> None:
    db = make_db(engine="mysql")
    assert pod_spec(db)["volumes"] == [{"name": "data", "emptyDir": {}}]
    assert container(db)["volumeMounts"] == [{"name": "data", "mountPath": "/var/lib/mysql"}]


def test_data_is_the_claim_with_storage() -> None:
    db = make_db(engine="redis", storage={"size": "1Gi"})
    assert pod_spec(db)["volumes"] == [
        {"name": "data", "persistentVolumeClaim": {"claimName": "shop-data"}}
    ]
    assert container(db)["volumeMounts"] == [{"name": "data", "mountPath": "/data"}]


def test_resources_are_copied_from_the_spec() -> None:
    resources = {"requests": {"cpu": "100m", "memory": "256Mi"}, "limits": {"memory": "1Gi"}}
    assert container(make_db(resources=resources))["resources"] == resources


def test_no_resources_without_spec_resources() -> None:
    assert "resources" not in container(make_db())


# --- service --------------------------------------------------------------------------------


def test_service_defaults_to_cluster_ip_on_the_engine_port() -> None:
    service = desired.service(make_db(engine="redis"))
    assert service["apiVersion"] == "v1"
    assert service["kind"] == "Service"
    assert service["metadata"]["name"] == "shop"
    assert service["spec"] == {
        "type": "ClusterIP",
        # The primary only: reads and writes.
        "selector": {
            "app.kubernetes.io/name": "redis",
            "app.kubernetes.io/instance": "shop",
            "databases.example.com/role": "primary",
        },
        "ports": [{"name": "redis", "port": 6379, "targetPort": "redis", "protocol": "TCP"}],
    }


def test_service_type_and_port_follow_the_spec() -> None:
    spec = desired.service(make_db(serviceType="NodePort", port=15432))["spec"]
    assert spec["type"] == "NodePort"
    assert spec["ports"] == [
        {"name": "postgres", "port": 15432, "targetPort": "postgres", "protocol": "TCP"}
    ]


def test_service_targets_the_container_port_name() -> None:
    db = make_db(engine="mysql")
    target = desired.service(db)["spec"]["ports"][0]["targetPort"]
    assert target == container(db)["ports"][0]["name"]


# --- pvc ------------------------------------------------------------------------------------


def test_no_pvc_without_storage() -> None:
    db = make_db()
    assert desired.pvc(db) is None
    assert [obj["kind"] for obj in desired.children(db)] == ["Deployment", "Service"]


def test_pvc_with_storage() -> None:
    db = make_db(storage={"size": "10Gi"})
    assert desired.pvc(db) == {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {
            "name": "shop-data",
            "namespace": "prod",
            "labels": STANDARD_LABELS,
            "annotations": {"databases.example.com/created-for": "shop"},
        },
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "10Gi"}}},
    }
    assert [obj["kind"] for obj in desired.children(db)] == [
        "Deployment",
        "Service",
        "PersistentVolumeClaim",
    ]


def test_pvc_size_is_a_string_even_when_given_as_an_integer() -> None:
    claim = desired.pvc(make_db(storage={"size": 1073741824}))
    assert claim is not None
    assert claim["spec"]["resources"]["requests"]["storage"] == "1073741824"


def test_pvc_uses_the_storage_class_when_set() -> None:
    claim = desired.pvc(make_db(storage={"size": "1Gi", "storageClassName": "fast"}))
    assert claim is not None
    assert claim["spec"]["storageClassName"] == "fast"


# --- secret ---------------------------------------------------------------------------------


def decoded(secret: dict[str, Any]) -> dict[str, str]:
    return {key: base64.b64decode(value).decode() for key, value in secret["data"].items()}


def test_secret_holds_username_and_password_base64() -> None:
    secret = desired.secret(make_db(engine="postgres"), "pw", "rpw")
    assert secret["apiVersion"] == "v1"
    assert secret["kind"] == "Secret"
    assert secret["type"] == "Opaque"
    assert secret["metadata"]["name"] == "shop-credentials"
    assert "stringData" not in secret
    assert decoded(secret) == {"username": "app", "password": "pw", "replication-password": "rpw"}


def test_redis_secret_holds_only_the_password() -> None:
    assert decoded(desired.secret(make_db(engine="redis"), "pw")) == {"password": "pw"}


def test_secret_refuses_to_replace_a_referenced_secret() -> None:
    with pytest.raises(ValueError, match="credentialsSecretRef"):
        desired.secret(make_db(credentialsSecretRef={"name": "my-creds"}), "pw")


def test_secret_refuses_an_empty_password() -> None:
    with pytest.raises(ValueError, match="password"):
        desired.secret(make_db(), "")


def test_generated_password_is_32_alphanumerics_and_fresh() -> None:
    passwords = {desired.generate_password() for _ in range(20)}
    assert len(passwords) == 20
    for password in passwords:
        assert len(password) == 32
        assert password.isascii()
        assert password.isalnum()


def test_missing_credentials_keys_names_what_a_user_secret_lacks() -> None:
    db = make_db(engine="postgres")
    assert desired.missing_credentials_keys(db, {"password": "eA=="}) == ["username"]
    assert desired.missing_credentials_keys(db, {"username": "eA==", "password": "eA=="}) == []
    assert desired.missing_credentials_keys(db, None) == ["username", "password"]


# --- determinism ----------------------------------------------------------------------------


def test_builders_are_deterministic() -> None:
    db = make_db(storage={"size": "1Gi"}, deletionPolicy="Delete", resources={"limits": {"cpu": 1}})
    assert desired.children(db) == desired.children(make_db(**db.spec.to_wire()))
    assert desired.secret(db, "pw", "rpw") == desired.secret(db, "pw", "rpw")


def digest(manifest: dict[str, Any]) -> str:
    return str(manifest["metadata"]["annotations"][desired.APPLIED_DIGEST_ANNOTATION])


def test_every_applied_child_carries_a_digest_that_changes_when_a_field_goes_away() -> None:
    with_annotation = desired.children(make_db(podAnnotations={"a": "1"}, replicas=2))
    without = desired.children(make_db(replicas=2))
    assert len(with_annotation) == len(without) >= 4
    for before, after in zip(with_annotation, without, strict=True):
        assert len(digest(before)) == 16
        if before["kind"] == "Deployment":
            assert digest(before) != digest(after), before["metadata"]["name"]
        else:
            assert digest(before) == digest(after), before["metadata"]["name"]
    # So the comparison that ignores fields others add still asks for the write that removes it.
    observed = {**with_annotation[0], "metadata": {**with_annotation[0]["metadata"], "uid": "x"}}
    assert needs_write(observed, without[0], UID)


def test_the_connection_digest_depends_on_its_keys_never_on_a_secret_value() -> None:
    db = make_db()
    one = desired.connection_secret(db, {"username": "dQ==", "password": "Zmlyc3Q="})
    two = desired.connection_secret(db, {"username": "dQ==", "password": "c2Vjb25k"})
    assert one["data"] != two["data"]
    assert digest(one) == digest(two)


def test_child_keys_name_the_children_in_their_order() -> None:
    for db in (make_db(), make_db(replicas=3, engine="redis", storage={"size": "1Gi"})):
        built = desired.children(db)
        assert desired.child_keys(db) == [(c["kind"], c["metadata"]["name"]) for c in built]


@pytest.mark.parametrize(
    ("engine", "username", "reserved"),
    [
        ("postgres", "replicator", True),
        ("postgres", "database_monitor", True),
        ("postgres", "app", False),
        ("mysql", "replicator", False),
        ("redis", None, False),
    ],
)
def test_a_username_the_operator_keeps_for_the_engine_is_named(
    engine: str, username: str | None, reserved: bool
) -> None:
    """The postgres hook would set the replication password on a user named replicator, and
    trust one named as the exporter's role: the Secret is refused instead."""
    data = {"password": base64.b64encode(b"p").decode()}
    if username is not None:
        data["username"] = base64.b64encode(username.encode()).decode()
    found = desired.reserved_username(make_db(engine=engine), data)
    assert found == (username if reserved else None)
    assert replication.REPLICATION_USER in ENGINES[Engine.POSTGRES].reserved_usernames
