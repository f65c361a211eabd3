"""spec.networkPolicy against the real kube-apiserver: the peers the API refuses, the
NetworkPolicy the operator keeps (what the API server stores of it, so every rule is one it
accepts), and its removal when the spec turns it off — never a namesake the user made.

No network plugin here enforces a policy (nor does the real node's bridge plugin): what the
policy admits is checked as the API server keeps it; its selectors against the operator's pods
in tests/unit/test_network_policy.py."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from tests.cluster import Cluster, condition, wait_for
from tests.integration.conftest import OperatorProcess, operator_of
from tests.integration.refusals import rejection
from tests.integration.waiting import observed, wait_for_status

OPERATOR_NAMESPACE = "database-operator-system"
API_PODS = {"podSelector": {"matchLabels": {"app": "shop-api"}}}
OWN_PODS = {
    "podSelector": {
        "matchLabels": {
            "app.kubernetes.io/instance": "shop",
            "app.kubernetes.io/managed-by": "database-operator",
        }
    }
}


@pytest.fixture
def operator_in_namespace(
    cluster: Cluster, namespace: str, tmp_path: Path
) -> Iterator[OperatorProcess]:
    """An operator that knows its own namespace, as one in a pod does (POD_NAMESPACE)."""
    env = {"POD_NAMESPACE": OPERATOR_NAMESPACE}
    with operator_of(cluster, namespace, tmp_path / "operator.log", env) as running:
        yield running


def networking(cluster: Cluster) -> client.NetworkingV1Api:
    return client.NetworkingV1Api(cluster.core.api_client)


def policy_or_none(cluster: Cluster, namespace: str, name: str) -> dict[str, Any] | None:
    try:
        found = networking(cluster).read_namespaced_network_policy(name, namespace)
    except client.ApiException as error:
        if error.status != 404:
            raise
        return None
    stored: dict[str, Any] = cluster.core.api_client.sanitize_for_serialization(found)
    return stored


@pytest.mark.parametrize(
    ("peer", "says"),
    [
        ({}, "a peer needs podSelector, namespaceSelector or ipBlock"),
        (
            {"ipBlock": {"cidr": "10.0.0.0/8"}, "podSelector": {}},
            "a peer with ipBlock takes no podSelector or namespaceSelector",
        ),
    ],
)
def test_a_peer_that_names_nobody_or_mixes_addresses_and_pods_is_refused(
    cluster: Cluster, namespace: str, peer: dict[str, Any], says: str
) -> None:
    for field in ("clientsFrom", "metricsFrom"):
        code, message = rejection(
            lambda f=field: cluster.create_db(
                namespace, "shop", {"networkPolicy": {"enabled": True, f: [peer]}}
            )
        )
        assert code == 422
        assert f"spec.networkPolicy.{field}[0]" in message and says in message, message


def test_the_operator_keeps_the_policy_while_it_is_on_and_deletes_it_when_off(
    cluster: Cluster, namespace: str, operator_in_namespace: OperatorProcess
) -> None:
    spec = {
        "replicas": 3,
        "storage": {"size": "1Gi"},
        "failover": {"enabled": True},
        "monitoring": {"enabled": True},
        "networkPolicy": {"enabled": True, "clientsFrom": [API_PODS]},
    }
    cluster.create_db(namespace, "shop", spec)
    stored = wait_for(
        lambda: policy_or_none(cluster, namespace, "shop"), timeout=30, what="the NetworkPolicy"
    )
    owner = stored["metadata"]["ownerReferences"][0]
    assert (owner["kind"], owner["name"], owner["controller"]) == ("Database", "shop", True)
    assert stored["spec"]["podSelector"]["matchLabels"] == {
        "app.kubernetes.io/name": "postgres",
        "app.kubernetes.io/instance": "shop",
        "app.kubernetes.io/component": "database",
        "app.kubernetes.io/managed-by": "database-operator",
    }
    assert stored["spec"]["policyTypes"] == ["Ingress"]
    operator = {
        "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": OPERATOR_NAMESPACE}}
    }
    assert stored["spec"]["ingress"] == [
        {
            "ports": [{"port": "postgres", "protocol": "TCP"}],
            "from": [API_PODS, OWN_PODS, operator],
        },
        {
            "ports": [{"port": "metrics", "protocol": "TCP"}],
            "from": [
                {
                    "namespaceSelector": {
                        "matchLabels": {"kubernetes.io/metadata.name": "monitoring"}
                    }
                }
            ],
        },
    ]

    # A change of peers is applied to the same object.
    uid = stored["metadata"]["uid"]
    cluster.patch_db(namespace, "shop", {"spec": {"networkPolicy": {"clientsFrom": []}}})
    changed = wait_for(
        lambda: (
            (found := policy_or_none(cluster, namespace, "shop"))
            and found["spec"]["ingress"][0]["from"] == [OWN_PODS, operator]
            and found
        ),
        timeout=30,
        what="the NetworkPolicy's clients to change",
    )
    assert changed["metadata"]["uid"] == uid

    cluster.patch_db(namespace, "shop", {"spec": {"networkPolicy": {"enabled": False}}})
    wait_for(
        lambda: policy_or_none(cluster, namespace, "shop") is None,
        timeout=30,
        what="the NetworkPolicy to be deleted",
    )
    wait_for_status(cluster, namespace, "shop", "the change reconciled", observed)


def test_a_namesake_policy_the_user_made_is_left_alone(
    cluster: Cluster, namespace: str, operator_in_namespace: OperatorProcess
) -> None:
    """A Database without spec.networkPolicy never deletes a NetworkPolicy it did not make,
    even one named after it."""
    mine = client.V1NetworkPolicy(
        metadata=client.V1ObjectMeta(name="shop"),
        spec=client.V1NetworkPolicySpec(
            pod_selector=client.V1LabelSelector(), policy_types=["Ingress"]
        ),
    )
    created = networking(cluster).create_namespaced_network_policy(namespace, mine)
    cluster.create_db(namespace, "shop", {})
    wait_for_status(cluster, namespace, "shop", "the first reconcile", observed)
    cluster.patch_db(namespace, "shop", {"spec": {"paused": False, "replicas": 0}})
    wait_for_status(cluster, namespace, "shop", "a second reconcile", observed)
    kept = policy_or_none(cluster, namespace, "shop")
    assert kept is not None and kept["metadata"]["uid"] == created.metadata.uid
    assert "ownerReferences" not in kept["metadata"]

    # Asked for one then, the operator refuses the Database rather than take the user's.
    cluster.patch_db(namespace, "shop", {"spec": {"networkPolicy": {"enabled": True}}})
    refused = wait_for_status(
        cluster, namespace, "shop", "ChildNameConflict", ready_reason("ChildNameConflict")
    )
    assert "NetworkPolicy 'shop'" in (condition(refused, "Ready") or {})["message"]
    after = policy_or_none(cluster, namespace, "shop")
    assert after is not None and after["spec"] == kept["spec"]
    assert after["metadata"]["resourceVersion"] == kept["metadata"]["resourceVersion"]


def ready_reason(reason: str) -> Any:
    return lambda db: (condition(db, "Ready") or {}).get("reason") == reason
