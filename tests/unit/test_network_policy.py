"""spec.networkPolicy: the NetworkPolicy the operator keeps for a Database's pods, as plain data.

Whether a network plugin enforces it is the plugin's business (the real node's bridge plugin
does not); what is checked here is what it admits, and that its selectors pick the pods the
operator starts: the database pods, and the backup Jobs' pods that dump from the engine.
"""

from __future__ import annotations

from typing import Any

import pytest

from database_operator import desired
from database_operator.api.backup import BackupDestination, DatabaseBackup
from database_operator.api.models import Database
from database_operator.backups import jobs
from database_operator.desired.policy import network_policy
from database_operator.engines import Engine

OPERATOR_NAMESPACE = "database-operator-system"
SAME_NAMESPACE: dict[str, Any] = {"podSelector": {}}
OWN_PODS = {
    "podSelector": {
        "matchLabels": {
            "app.kubernetes.io/instance": "shop",
            "app.kubernetes.io/managed-by": "database-operator",
        }
    }
}
OPERATOR = {
    "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": OPERATOR_NAMESPACE}}
}
MONITORING = {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}}}
API_PODS = {"podSelector": {"matchLabels": {"app": "shop-api"}}}


def make_db(engine: Engine = Engine.POSTGRES, **spec: Any) -> Database:
    """A Database shop in namespace prod with the given (camelCase) spec."""
    return Database.model_validate(
        {
            "metadata": {"name": "shop", "namespace": "prod", "uid": "u-1", "generation": 1},
            "spec": {"engine": engine, "storage": {"size": "1Gi"}, **spec},
        }
    )


def rules(db: Database, operator_namespace: str | None = OPERATOR_NAMESPACE) -> list[Any]:
    policy = network_policy(db, operator_namespace)
    assert policy is not None
    ingress: list[Any] = policy["spec"]["ingress"]
    return ingress


def matches(selector: dict[str, str], labels: dict[str, str]) -> bool:
    return all(labels.get(key) == value for key, value in selector.items())


@pytest.mark.parametrize("spec", [{}, {"networkPolicy": {}}, {"networkPolicy": {"enabled": False}}])
def test_no_network_policy_unless_it_is_enabled(spec: dict[str, Any]) -> None:
    assert network_policy(make_db(**spec), OPERATOR_NAMESPACE) is None


def test_by_default_the_engine_port_is_open_to_the_namespace_and_the_databases_own_pods() -> None:
    policy = network_policy(make_db(networkPolicy={"enabled": True}), OPERATOR_NAMESPACE)
    assert policy is not None
    assert policy["metadata"]["name"] == "shop"
    assert policy["metadata"]["ownerReferences"][0]["uid"] == "u-1"
    assert policy["spec"]["policyTypes"] == ["Ingress"]  # what the pods reach is left alone
    # The container port by its name: spec.port is the Services' port, not the engine's.
    assert policy["spec"]["ingress"] == [
        {"ports": [{"port": "postgres", "protocol": "TCP"}], "from": [SAME_NAMESPACE, OWN_PODS]}
    ]


def test_clients_from_replaces_the_namespace_and_an_empty_list_leaves_only_the_own_pods() -> None:
    given = make_db(networkPolicy={"enabled": True, "clientsFrom": [API_PODS]})
    assert rules(given)[0]["from"] == [API_PODS, OWN_PODS]
    none = make_db(networkPolicy={"enabled": True, "clientsFrom": []})
    assert rules(none)[0]["from"] == [OWN_PODS]


def test_an_address_range_is_passed_on_with_its_exceptions() -> None:
    block = {"ipBlock": {"cidr": "10.0.0.0/8", "except": ["10.1.0.0/16"]}}
    db = make_db(networkPolicy={"enabled": True, "clientsFrom": [block]})
    assert rules(db)[0]["from"] == [block, OWN_PODS]


@pytest.mark.parametrize("engine", [Engine.POSTGRES, Engine.REDIS])
def test_with_failover_the_operators_namespace_reaches_the_engines(engine: Engine) -> None:
    """The operator asks each instance's engine its role on the pod's address."""
    db = make_db(engine, replicas=3, failover={"enabled": True}, networkPolicy={"enabled": True})
    assert rules(db)[0]["from"] == [SAME_NAMESPACE, OWN_PODS, OPERATOR]
    # Outside a cluster its namespace is unknown, and no policy names it by pod.
    assert rules(db, None)[0]["from"] == [SAME_NAMESPACE, OWN_PODS]
    # Without failover it never connects to an engine.
    plain = make_db(engine, networkPolicy={"enabled": True})
    assert OPERATOR not in rules(plain)[0]["from"]


def test_the_exporters_port_is_open_to_the_monitoring_namespace_or_to_metrics_from() -> None:
    monitored = make_db(monitoring={"enabled": True}, networkPolicy={"enabled": True})
    assert rules(monitored)[1] == {
        "ports": [{"port": "metrics", "protocol": "TCP"}],
        "from": [MONITORING],
    }
    prometheus = {
        "namespaceSelector": {"matchLabels": {"team": "observability"}},
        "podSelector": {"matchLabels": {"app.kubernetes.io/name": "prometheus"}},
    }
    chosen = make_db(
        monitoring={"enabled": True},
        networkPolicy={"enabled": True, "metricsFrom": [prometheus]},
    )
    assert rules(chosen)[1]["from"] == [prometheus]
    # No exporter, no metrics port: the clients' peers never reach it either.
    assert len(rules(make_db(networkPolicy={"enabled": True, "metricsFrom": [prometheus]}))) == 1


@pytest.mark.parametrize("engine", list(Engine))
def test_the_engine_port_is_the_one_the_pods_name(engine: Engine) -> None:
    db = make_db(engine, networkPolicy={"enabled": True}, port=15000)
    port = rules(db)[0]["ports"][0]["port"]
    container = desired.deployment(db)["spec"]["template"]["spec"]["containers"][0]
    assert port in [entry["name"] for entry in container["ports"]]
    # The Services' port (spec.port) is not the one the policy must open.
    assert desired.service(db)["spec"]["ports"][0]["port"] == 15000
    assert 15000 not in [entry["containerPort"] for entry in container["ports"]]


@pytest.mark.parametrize(
    "spec",
    [
        pytest.param({}, id="primary"),
        pytest.param({"replicas": 3}, id="read-replicas"),
        pytest.param({"replicas": 3, "failover": {"enabled": True}}, id="instances"),
    ],
)
def test_it_selects_every_database_pod_and_admits_its_backup_jobs(spec: dict[str, Any]) -> None:
    db = make_db(networkPolicy={"enabled": True}, **spec)
    policy = network_policy(db, OPERATOR_NAMESPACE)
    assert policy is not None
    templates = [
        child["spec"]["template"]["metadata"]["labels"]
        for child in desired.children(db)
        if child["kind"] == "Deployment" and child["spec"]["replicas"] != 0
    ]
    assert templates
    for labels in templates:
        assert matches(policy["spec"]["podSelector"]["matchLabels"], labels)
        assert matches(OWN_PODS["podSelector"]["matchLabels"], labels)
    backup = DatabaseBackup.model_validate(
        {
            "metadata": {"name": "shop-1", "namespace": "prod", "uid": "b-1"},
            "spec": {"database": "shop"},
        }
    )
    destination = BackupDestination.model_validate({"pvc": {"claimName": "backups"}})
    options = jobs.JobOptions(agent_image="agent:1")
    job = jobs.backup_job(backup, db, destination, "prod/shop/shop-1.pgdump", options)
    job_pod = job["spec"]["template"]["metadata"]["labels"]
    assert matches(OWN_PODS["podSelector"]["matchLabels"], job_pod)
    # A backup Job's pod is no database pod: the policy restricts what reaches it, not the Job.
    assert not matches(policy["spec"]["podSelector"]["matchLabels"], job_pod)


def test_the_network_policy_is_surplus_when_it_is_off_and_a_child_when_on() -> None:
    """Turned off, the operator deletes the one it made (only its own: ownership is checked)."""
    specs: list[dict[str, Any]] = [{}, {"failover": {"enabled": True}, "replicas": 2}]
    for spec in specs:
        off = make_db(**spec)
        on = make_db(**spec, networkPolicy={"enabled": True})
        assert ("NetworkPolicy", "shop") in desired.surplus(off)
        assert ("NetworkPolicy", "shop") not in desired.surplus(on)
        assert ("NetworkPolicy", "shop") in desired.child_keys(on)
        assert ("NetworkPolicy", "shop") not in desired.child_keys(off)
        operator = [
            c
            for c in desired.children(on, None, OPERATOR_NAMESPACE)
            if c["kind"] == "NetworkPolicy"
        ]
        assert operator[0]["metadata"]["annotations"]  # stamped with its applied digest
