"""spec.failover against the real kube-apiserver: what the API refuses, and the instances'
layout the operator writes (a Deployment and a claim per instance, the ConfigMap naming the
target primary, Services by role). No pod runs here: the instances' engines are proven on the
real node (tests/real/test_failover.py) and on loopback (test_recipes.py)."""

from __future__ import annotations

from typing import Any

from tests.cluster import Cluster
from tests.integration.conftest import OperatorProcess
from tests.integration.test_api import rejection
from tests.integration.test_reconcile import observed, wait_for_status

INSTANCE = "databases.example.com/instance"
ROLE = "databases.example.com/role"
FAILOVER = {"replicas": 3, "storage": {"size": "1Gi"}, "failover": {"enabled": True}}


def test_failover_is_refused_for_an_engine_it_does_not_serve(
    cluster: Cluster, namespace: str
) -> None:
    code, message = rejection(
        lambda: cluster.create_db(namespace, "shop", {"engine": "mysql", **FAILOVER})
    )
    assert code == 422
    assert "spec.failover is available for postgres, redis only" in message


def test_failover_is_set_at_creation_and_kept(cluster: Cluster, namespace: str) -> None:
    cluster.create_db(namespace, "plain", {"replicas": 2})
    code, message = rejection(
        lambda: cluster.patch_db(namespace, "plain", {"spec": {"failover": {"enabled": True}}})
    )
    assert code == 422 and "spec.failover is set when a Database is created" in message
    cluster.create_db(namespace, "ha", FAILOVER)
    for patch in ({"failover": {"enabled": False}}, {"failover": None}):
        code, message = rejection(lambda p=patch: cluster.patch_db(namespace, "ha", {"spec": p}))
        assert code == 422 and "spec.failover" in message


def test_the_defaults_of_failover_are_filled_in(cluster: Cluster, namespace: str) -> None:
    created = cluster.create_db(namespace, "ha", {"failover": {"enabled": True}})
    assert created["spec"]["failover"] == {
        "enabled": True,
        "delay": 5,
        "maxLag": 16777216,
        "synchronous": False,
    }


def test_instances_are_a_deployment_and_a_claim_each_and_a_configmap_names_the_primary(
    cluster: Cluster, namespace: str, operator: OperatorProcess
) -> None:
    cluster.create_db(namespace, "ha", FAILOVER)
    db = wait_for_status(cluster, namespace, "ha", "first reconcile", observed)
    names = [f"ha-{n}" for n in (1, 2, 3)]
    for name in names:
        deployment = cluster.apps.read_namespaced_deployment(name, namespace)
        assert deployment.spec.replicas == 1
        assert deployment.spec.strategy.type == "Recreate"
        assert deployment.spec.selector.match_labels[INSTANCE] == name
        assert ROLE not in deployment.spec.selector.match_labels
        assert ROLE not in deployment.spec.template.metadata.labels
    claims = {
        c.metadata.name
        for c in cluster.core.list_namespaced_persistent_volume_claim(namespace).items
    }
    assert claims == {"ha-data", "ha-2-data", "ha-3-data"}
    config = cluster.core.read_namespaced_config_map("ha-instances", namespace)
    assert config.data == {"primary": "ha-1"}
    assert [ref.kind for ref in config.metadata.owner_references] == ["Database"]
    selectors: dict[str, Any] = {
        name: cluster.core.read_namespaced_service(name, namespace).spec.selector[ROLE]
        for name in ("ha", "ha-replicas")
    }
    assert selectors == {"ha": "primary", "ha-replicas": "replica"}
    status = db["status"]
    assert status["targetPrimary"] == "ha-1"
    assert "currentPrimary" not in status  # no engine has answered: none is confirmed
    assert [(i["name"], i["role"]) for i in status["instances"]] == [
        (name, "unknown") for name in names
    ]
    # No Deployment named after the Database: the instances replace the primary's.
    deployments = {
        d.metadata.name for d in cluster.apps.list_namespaced_deployment(namespace).items
    }
    assert deployments == set(names)

    # Scaled down: the last instance's Deployment goes, its claim stays.
    cluster.patch_db(namespace, "ha", {"spec": {"replicas": 2}})
    wait_for_status(cluster, namespace, "ha", "scaled", observed)
    deployments = {
        d.metadata.name for d in cluster.apps.list_namespaced_deployment(namespace).items
    }
    assert deployments == {"ha-1", "ha-2"}
    claims = {
        c.metadata.name
        for c in cluster.core.list_namespaced_persistent_volume_claim(namespace).items
    }
    assert "ha-3-data" in claims


def test_zero_loss_mode_is_refused_for_redis(cluster: Cluster, namespace: str) -> None:
    failover = {"enabled": True, "synchronous": True}
    code, message = rejection(
        lambda: cluster.create_db(namespace, "cache", {"engine": "redis", "failover": failover})
    )
    assert code == 422 and "spec.failover.synchronous is for postgres only" in message
