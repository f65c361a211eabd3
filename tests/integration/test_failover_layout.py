"""spec.failover against the real kube-apiserver: what the API refuses, and the instances'
layout the operator writes (a Deployment and a claim per instance, the ConfigMap naming the
target primary, Services by role). No pod runs here: the instances' engines are proven on the
real node (tests/real/test_failover.py) and on loopback (test_recipes.py)."""

from __future__ import annotations

from typing import Any

from tests.cluster import Cluster, wait_for
from tests.integration.conftest import OperatorProcess
from tests.integration.refusals import rejection
from tests.integration.waiting import observed, wait_for_status

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


def test_failover_may_be_turned_on_but_never_off(cluster: Cluster, namespace: str) -> None:
    cluster.create_db(namespace, "plain", {"replicas": 2})
    cluster.patch_db(namespace, "plain", {"spec": {"failover": {"enabled": True}}})
    for patch in ({"failover": {"enabled": False}}, {"failover": None}):
        code, message = rejection(lambda p=patch: cluster.patch_db(namespace, "plain", {"spec": p}))
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
    # The Deployment named after the Database runs no pod: it holds the name against an
    # earlier operator (a rollback), which would start a primary there.
    deployments = {
        d.metadata.name: d for d in cluster.apps.list_namespaced_deployment(namespace).items
    }
    assert set(deployments) == {*names, "ha"}
    assert deployments["ha"].spec.replicas == 0
    assert [ref.controller for ref in deployments["ha"].metadata.owner_references] == [False]

    # Scaled down: the last instance's Deployment goes, its claim stays.
    cluster.patch_db(namespace, "ha", {"spec": {"replicas": 2}})
    wait_for_status(cluster, namespace, "ha", "scaled", observed)
    left = {d.metadata.name for d in cluster.apps.list_namespaced_deployment(namespace).items}
    assert left == {"ha-1", "ha-2", "ha"}
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


def test_a_database_moved_to_instances_keeps_its_volume_for_the_first_and_drops_the_old_deployments(
    cluster: Cluster, namespace: str, operator: OperatorProcess
) -> None:
    cluster.create_db(namespace, "db", {"replicas": 3, "storage": {"size": "1Gi"}})
    wait_for_status(cluster, namespace, "db", "first reconcile", observed)
    before = cluster.core.read_namespaced_persistent_volume_claim("db-data", namespace)
    primary = cluster.apps.read_namespaced_deployment("db", namespace)

    cluster.patch_db(namespace, "db", {"spec": {"failover": {"enabled": True}}})

    def moved() -> set[str] | None:
        names = {d.metadata.name for d in cluster.apps.list_namespaced_deployment(namespace).items}
        return names if names == {"db-1", "db-2", "db-3", "db"} else None

    wait_for(moved, timeout=30, what="the instances' Deployments in place of the old ones")
    holder = cluster.apps.read_namespaced_deployment("db", namespace)
    assert holder.metadata.uid != primary.metadata.uid  # the primary's is gone
    assert holder.spec.replicas == 0
    first = cluster.apps.read_namespaced_deployment("db-1", namespace)
    claim = first.spec.template.spec.volumes[0].persistent_volume_claim.claim_name
    assert claim == "db-data"
    after = cluster.core.read_namespaced_persistent_volume_claim("db-data", namespace)
    assert after.metadata.uid == before.metadata.uid  # the same volume, never a new one
    assert cluster.core.read_namespaced_config_map("db-instances", namespace).data == {
        "primary": "db-1"
    }
