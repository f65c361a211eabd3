"""The children of a Database with spec.failover: one Deployment and one claim per instance."""

from __future__ import annotations

import re
from typing import Any

from database_operator import desired
from database_operator.api.models import INSTANCE_LABEL, ROLE_LABEL, Database, Failover
from database_operator.desired.common import (
    TARGET_PRIMARY_KEY,
    has_instances,
    instance_names,
    instance_pvc_name,
    instances_config_name,
)
from database_operator.desired.storage import pvcs
from database_operator.desired.workload import instance_deployments
from database_operator.ownership import CREATED_FOR, HOLDS_NAME_FOR, controller_of, is_ours

UID = "0b1c2d3e-0000-4000-8000-000000000001"
SECRET = "shop-db-secret"
INSTANCES = ["shop-1", "shop-2", "shop-3"]


def make_db(status: dict[str, Any] | None = None, **spec: Any) -> Database:
    """A PostgreSQL Database ``shop`` in ``prod`` with instances (3, 1Gi each), overridable."""
    full: dict[str, Any] = {
        "engine": "postgres",
        "replicas": 3,
        "storage": {"size": "1Gi"},
        "failover": {"enabled": True},
        "credentialsSecretRef": {"name": SECRET},
    } | spec
    body: dict[str, Any] = {
        "metadata": {"name": "shop", "namespace": "prod", "uid": UID, "generation": 1},
        "spec": {key: value for key, value in full.items() if value is not None},
    }
    if status is not None:
        body["status"] = status
    return Database.model_validate(body)


def keys(children: list[dict[str, Any]]) -> list[tuple[str, str]]:
    return [(child["kind"], child["metadata"]["name"]) for child in children]


def deployments(db: Database) -> dict[str, dict[str, Any]]:
    """The Deployments that run pods (the name holder aside)."""
    return {
        child["metadata"]["name"]: child
        for child in desired.children(db)
        if child["kind"] == "Deployment" and not is_holder(child)
    }


def is_holder(child: dict[str, Any]) -> bool:
    return HOLDS_NAME_FOR in (child["metadata"].get("annotations") or {})


def name_holder(db: Database) -> dict[str, Any]:
    [found] = [child for child in desired.children(db) if is_holder(child)]
    return found


def engine_container(deployment: dict[str, Any]) -> dict[str, Any]:
    containers: list[dict[str, Any]] = deployment["spec"]["template"]["spec"]["containers"]
    [found] = [c for c in containers if c["name"] == "postgres"]
    return found


def env_of(deployment: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {var["name"]: var for var in engine_container(deployment)["env"]}


# --- the names ------------------------------------------------------------------------------


def test_failover_enabled_makes_instances() -> None:
    assert has_instances(make_db())
    assert not has_instances(make_db(failover=None))
    assert not has_instances(make_db(failover={"enabled": False}))


def test_the_instances_are_numbered_from_one() -> None:
    db = make_db()

    assert instance_names(db) == INSTANCES
    assert instances_config_name(db) == "shop-instances"
    assert [instance_pvc_name(db, name) for name in INSTANCES] == [
        "shop-data",
        "shop-2-data",
        "shop-3-data",
    ]


# --- the children ---------------------------------------------------------------------------


def test_the_children_are_a_deployment_per_instance_the_two_services_and_a_claim_each() -> None:
    assert keys(desired.children(make_db())) == [
        ("Deployment", "shop-1"),
        ("Deployment", "shop-2"),
        ("Deployment", "shop-3"),
        ("Deployment", "shop"),
        ("Service", "shop"),
        ("Service", "shop-replicas"),
        ("PersistentVolumeClaim", "shop-data"),
        ("PersistentVolumeClaim", "shop-2-data"),
        ("PersistentVolumeClaim", "shop-3-data"),
    ]


def test_child_keys_agree_with_children() -> None:
    db = make_db()

    assert desired.child_keys(db) == keys(desired.children(db))


def test_each_instance_deployment_runs_one_pod_recreated() -> None:
    for name, deployment in deployments(make_db()).items():
        assert deployment["spec"]["replicas"] == 1, name
        assert deployment["spec"]["strategy"] == {"type": "Recreate"}, name


def test_each_instance_deployment_selects_its_instance_and_no_role() -> None:
    for name, deployment in deployments(make_db()).items():
        selector = deployment["spec"]["selector"]["matchLabels"]
        assert selector == {
            "app.kubernetes.io/name": "postgres",
            "app.kubernetes.io/instance": "shop",
            INSTANCE_LABEL: name,
        }
        assert ROLE_LABEL not in selector


def test_each_instance_pod_template_carries_its_instance_label_and_no_role() -> None:
    for name, deployment in deployments(make_db()).items():
        pod_labels = deployment["spec"]["template"]["metadata"]["labels"]
        assert pod_labels[INSTANCE_LABEL] == name
        assert ROLE_LABEL not in pod_labels
        # The Deployment's selector picks its own pods.
        assert deployment["spec"]["selector"]["matchLabels"].items() <= pod_labels.items()


def test_each_instance_mounts_its_own_claim() -> None:
    for name, deployment in deployments(make_db()).items():
        volumes = deployment["spec"]["template"]["spec"]["volumes"]
        claim = "shop-data" if name == "shop-1" else f"{name}-data"
        assert volumes == [{"name": "data", "persistentVolumeClaim": {"claimName": claim}}]


def test_the_services_select_by_role() -> None:
    services = {
        c["metadata"]["name"]: c for c in desired.children(make_db()) if c["kind"] == "Service"
    }

    assert services["shop"]["spec"]["selector"] == {
        "app.kubernetes.io/name": "postgres",
        "app.kubernetes.io/instance": "shop",
        ROLE_LABEL: "primary",
    }
    assert services["shop-replicas"]["spec"]["selector"] == {
        "app.kubernetes.io/name": "postgres",
        "app.kubernetes.io/instance": "shop",
        ROLE_LABEL: "replica",
    }


def test_the_claims_are_alike_but_for_their_names() -> None:
    claims = pvcs(make_db())

    assert [claim["metadata"]["name"] for claim in claims] == [
        "shop-data",
        "shop-2-data",
        "shop-3-data",
    ]
    for claim in claims:
        assert claim["spec"]["resources"] == {"requests": {"storage": "1Gi"}}
        assert claim["spec"]["accessModes"] == ["ReadWriteOnce"]


def test_each_instance_reads_the_target_primary_from_the_configmap() -> None:
    for deployment in instance_deployments(make_db()):
        assert env_of(deployment)["TARGET_PRIMARY"] == {
            "name": "TARGET_PRIMARY",
            "valueFrom": {"configMapKeyRef": {"name": "shop-instances", "key": TARGET_PRIMARY_KEY}},
        }
        assert TARGET_PRIMARY_KEY == "primary"


def test_each_instance_knows_its_own_name() -> None:
    for deployment in instance_deployments(make_db()):
        name = deployment["metadata"]["name"]
        assert env_of(deployment)["INSTANCE_NAME"] == {"name": "INSTANCE_NAME", "value": name}


def test_credentials_come_from_the_secret_by_reference_only() -> None:
    for deployment in instance_deployments(make_db()):
        for name, var in env_of(deployment).items():
            if "PASSWORD" in name or name == "POSTGRES_USER":
                assert "value" not in var, name
                assert var["valueFrom"]["secretKeyRef"]["name"] == SECRET, name


#: ``password=`` followed by anything but a (possibly quoted) ``$`` reference.
LITERAL_PASSWORD = re.compile(r"password=(?![\"']?\$)", re.IGNORECASE)


def strings(value: Any) -> list[str]:
    """Every string in a manifest, keys and values."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [text for key, item in value.items() for text in [key, *strings(item)]]
    if isinstance(value, list):
        return [text for item in value for text in strings(item)]
    return []


def test_no_literal_password_in_command_args_env_probes_or_hooks() -> None:
    for deployment in instance_deployments(make_db()):
        texts = strings(deployment)
        assert any("password=" in text.lower() for text in texts)  # the check sees something
        for text in texts:
            assert not LITERAL_PASSWORD.search(text), text


# --- scaling --------------------------------------------------------------------------------


def test_surplus_names_the_instances_scaled_away() -> None:
    db = make_db(replicas=2)

    # And the read replicas' Deployment of the layout before instances (a Database moved to
    # them); the primary's is the name holder's name.
    former = [("Deployment", "shop-replicas")]
    scaled_away = [("Deployment", f"shop-{n}") for n in range(3, 11)]
    assert desired.surplus(db) == [*former, *scaled_away, ("NetworkPolicy", "shop")]


def test_surplus_never_names_the_target_primary() -> None:
    db = make_db(status={"targetPrimary": "shop-3"}, replicas=2)

    surplus = desired.surplus(db)

    assert ("Deployment", "shop-3") not in surplus
    assert surplus[1:-1] == [("Deployment", f"shop-{n}") for n in range(4, 11)]


def test_surplus_with_one_instance_names_the_read_service_and_the_others() -> None:
    surplus = desired.surplus(make_db(replicas=1))

    assert ("Service", "shop-replicas") in surplus
    assert ("Deployment", "shop-1") not in surplus
    assert ("Deployment", "shop-2") in surplus


def test_hibernating_keeps_the_first_instance_with_no_pod() -> None:
    db = make_db(replicas=0)

    found = deployments(db)

    assert list(found) == ["shop-1"]
    assert found["shop-1"]["spec"]["replicas"] == 0
    assert ("Deployment", "shop-1") not in desired.surplus(db)
    assert ("PersistentVolumeClaim", "shop-data") in keys(desired.children(db))


# --- the name holder: an earlier operator refuses a Database with instances ------------------


def test_the_name_holder_runs_no_pod_mounts_nothing_and_selects_no_database_pod() -> None:
    holder = name_holder(make_db())
    spec = holder["spec"]
    labels = spec["selector"]["matchLabels"]

    assert spec["replicas"] == 0
    assert "volumes" not in spec["template"]["spec"]
    assert spec["template"]["metadata"]["labels"] == labels
    for deployment in deployments(make_db()).values():
        pod_labels = deployment["spec"]["template"]["metadata"]["labels"]
        assert not labels.items() <= pod_labels.items()


def test_the_name_holder_is_owned_by_the_database_but_not_controlled() -> None:
    meta = name_holder(make_db())["metadata"]

    [owner] = meta["ownerReferences"]
    assert (owner["kind"], owner["uid"], owner["controller"]) == ("Database", UID, False)
    assert meta["annotations"][HOLDS_NAME_FOR] == "shop"


def test_the_name_holder_is_this_versions_own_and_foreign_to_earlier_ones() -> None:
    db = make_db()
    holder = {**name_holder(db), "metadata": {**name_holder(db)["metadata"], "uid": "h1"}}
    namesake = make_db().model_copy(update={"metadata": {**db.metadata, "uid": "another"}})

    assert is_ours(holder, db)
    assert not is_ours(holder, namesake)
    # What an earlier version asks (ownership.py at e183ecd): a controller reference to the
    # Database, else the created-for mark, else (a Secret or a claim only) the labels.
    assert controller_of(holder) is None
    assert CREATED_FOR not in holder["metadata"]["annotations"]


def test_a_hibernating_database_keeps_its_name_holder() -> None:
    assert name_holder(make_db(replicas=0))["spec"]["replicas"] == 0


# --- without failover -----------------------------------------------------------------------


def test_without_failover_the_children_are_the_primary_and_read_replicas_as_before() -> None:
    db = make_db(failover=None)

    assert keys(desired.children(db)) == [
        ("Deployment", "shop"),
        ("Service", "shop"),
        ("Deployment", "shop-replicas"),
        ("Service", "shop-replicas"),
        ("PersistentVolumeClaim", "shop-data"),
    ]
    primary = deployments(db)["shop"]
    assert primary["spec"]["selector"]["matchLabels"][ROLE_LABEL] == "primary"
    assert INSTANCE_LABEL not in primary["spec"]["template"]["metadata"]["labels"]
    assert "TARGET_PRIMARY" not in env_of(primary)


def test_failover_disabled_is_as_without_failover() -> None:
    assert keys(desired.children(make_db(failover={"enabled": False}))) == keys(
        desired.children(make_db(failover=None))
    )


# --- the model ------------------------------------------------------------------------------


def test_failover_defaults_disabled_five_seconds_and_16_mib() -> None:
    failover = Failover()

    assert failover.enabled is False
    assert failover.delay == 5
    assert failover.max_lag == 16 * 1024 * 1024


def test_failover_reads_camel_case() -> None:
    db = make_db(failover={"enabled": True, "delay": 30, "maxLag": 1024})

    assert db.spec.failover == Failover(enabled=True, delay=30, max_lag=1024)


def test_zero_loss_mode_changes_no_pod_it_is_set_on_the_primary_by_a_reload() -> None:
    def built(synchronous: bool) -> list[dict[str, Any]]:
        failover = {"enabled": True, "synchronous": synchronous}
        spec = {"engine": "postgres", "replicas": 3, "failover": failover}
        meta = {"name": "shop", "namespace": "prod"}
        return desired.instance_deployments(
            Database.model_validate({"metadata": meta, "spec": spec})
        )

    assert built(True) == built(False)


def test_every_instance_holds_the_lock_of_its_volume() -> None:
    for engine, root in (("postgres", "/var/lib/postgresql/data"), ("redis", "/data")):
        spec = {"engine": engine, "replicas": 2, "failover": {"enabled": True}}
        db = Database.model_validate(
            {"metadata": {"name": "shop", "namespace": "prod"}, "spec": spec}
        )
        for deployment in desired.instance_deployments(db):
            container = deployment["spec"]["template"]["spec"]["containers"][0]
            env = {e["name"]: e.get("value") for e in container["env"]}
            assert env["INSTANCE_LOCK"] == f"{root}/.instance.lock"
            assert "flock 9" in container["command"][2]
