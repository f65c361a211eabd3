"""What lets the operator scale, against the real API server: shards selected by the API
server, the caches (a restart reads no child it knows; the audit corrects what a watch lost),
and the classification of the API server's refusals."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.cluster import Cluster, request_counts, wait_for
from tests.integration.conftest import OperatorProcess, start_operator

SHARD = "databases.example.com/shard"


def reconciled(cluster: Cluster, namespace: str, *names: str) -> bool:
    """Whether each Database's status has seen its current generation."""
    for name in names:
        db = cluster.get_db(namespace, name)
        if (db.get("status") or {}).get("observedGeneration") != db["metadata"]["generation"]:
            return False
    return True


@pytest.fixture
def shards(
    cluster: Cluster, namespace: str, tmp_path: Path
) -> Iterator[dict[str, OperatorProcess]]:
    running = {
        shard: start_operator(
            cluster,
            tmp_path / f"operator-{shard}.log",
            f"--namespace={namespace}",
            f"--shard={shard}",
            "--resync-interval=2",
            "--health-port=0",
            "--metrics-port=0",
            "--log-level=DEBUG",
        )
        for shard in ("east", "west")
    }
    yield running
    for operator in running.values():
        assert operator.stop() == 0, operator.log_text()[-3000:]


def create_labelled(cluster: Cluster, namespace: str, name: str, shard: str | None) -> None:
    body = {
        "apiVersion": "databases.example.com/v1",
        "kind": "Database",
        "metadata": {"name": name, "labels": {SHARD: shard} if shard else {}},
        "spec": {"engine": "redis"},
    }
    cluster.custom.create_namespaced_custom_object(
        "databases.example.com", "v1", namespace, "databases", body
    )


def test_each_shard_reconciles_only_its_own_databases(
    cluster: Cluster, namespace: str, shards: dict[str, OperatorProcess]
) -> None:
    create_labelled(cluster, namespace, "orders", "east")
    create_labelled(cluster, namespace, "carts", "west")
    create_labelled(cluster, namespace, "stray", None)
    wait_for(lambda: reconciled(cluster, namespace, "orders", "carts"), what="both reconciled")
    logged = shards["east"].log_lines()
    assert {line["name"] for line in logged if line.get("event") == "reconciled"} == {"orders"}
    assert not shards["west"].reconciles("orders")
    assert not shards["east"].reconciles("carts")
    # The children carry their Database's shard (that is how its operator watches them); the
    # pods do not (moving a Database must not restart them).
    deployment = cluster.apps.read_namespaced_deployment("orders", namespace)
    assert (deployment.metadata.labels or {})[SHARD] == "east"
    assert SHARD not in (deployment.spec.template.metadata.labels or {})
    # An unlabelled Database belongs to no shard.
    assert "status" not in cluster.get_db(namespace, "stray")
    assert (
        cluster.core.list_namespaced_secret(
            namespace, field_selector="metadata.name=stray-credentials"
        ).items
        == []
    )

    # Moving a Database to another shard is relabelling it: the new shard takes over, the old
    # one lets go, and the pods' template is unchanged.
    template = deployment.spec.template.to_dict()
    cluster.patch_db(namespace, "orders", {"metadata": {"labels": {SHARD: "west"}}})

    def moved() -> bool:
        labels = cluster.apps.read_namespaced_deployment("orders", namespace).metadata.labels
        return bool(shards["west"].reconciles("orders")) and labels.get(SHARD) == "west"

    wait_for(moved, what="orders reconciled by west, its children relabelled")
    after = cluster.apps.read_namespaced_deployment("orders", namespace)
    assert after.spec.template.to_dict() == template


def test_a_restart_reads_no_child_it_knows_and_writes_nothing(
    cluster: Cluster, namespace: str, tmp_path: Path
) -> None:
    args = (
        f"--namespace={namespace}",
        "--resync-interval=60",
        "--health-port=0",
        "--metrics-port=0",
        "--log-level=DEBUG",
    )
    first = start_operator(cluster, tmp_path / "first.log", *args)
    try:
        for name in ("a", "b", "c"):
            cluster.create_db(namespace, name, {"engine": "postgres", "storage": {"size": "1Gi"}})
        wait_for(lambda: reconciled(cluster, namespace, "a", "b", "c"), what="all reconciled")
    finally:
        assert first.stop() == 0
    kinds = ("deployments", "services", "persistentvolumeclaims")
    gets = {kind: request_counts(cluster, "GET", kind) for kind in kinds}
    applies = {kind: request_counts(cluster, "APPLY", kind) for kind in kinds}
    second = start_operator(cluster, tmp_path / "second.log", *args)
    try:
        wait_for(
            lambda: all(second.reconciles(name, "resume") for name in ("a", "b", "c")),
            what="every Database resumed",
        )
    finally:
        assert second.stop() == 0
    assert {kind: request_counts(cluster, "GET", kind) for kind in kinds} == gets
    assert {kind: request_counts(cluster, "APPLY", kind) for kind in kinds} == applies
