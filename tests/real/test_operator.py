"""The operator as the chart runs it, from its own image: two replicas, one leader. The leader
killed, the standby takes over within the lease and reconciles; a rolling update of the operator
restarts no database pod; its webhooks, reached by the API server through their Service, refuse a
bad Database with a message naming the field."""

from __future__ import annotations

import json
import time
from functools import partial
from typing import Any

from kubernetes import client

from tests.cluster import Cluster, wait_for
from tests.realnode import RealCluster
from tests.realpods import Release, Samples, on_local_images, pods_of, wait_active

#: The chart's default leaderElection.leaseDuration, in seconds.
LEASE_DURATION_S = 15


def _holder(release: Release) -> str:
    lease = client.CoordinationV1Api(release.cluster.api).read_namespaced_lease(
        release.name, release.namespace
    )
    return str(lease.spec.holder_identity or "")


def _created(cluster: Cluster, namespace: str, name: str, spec: dict[str, Any]) -> bool:
    try:
        cluster.create_db(namespace, name, spec)
    except client.ApiException as error:
        if "failed calling webhook" in str(error.body):
            return False
        raise
    return True


def test_the_webhooks_refuse_a_bad_database_through_their_service(
    real_cluster: Cluster, operator_release: Release, user_namespace: str, images: dict[str, str]
) -> None:
    for kind in ("validatingwebhookconfigurations", "mutatingwebhookconfigurations"):
        configuration = real_cluster.kubectl("get", kind, operator_release.name, "-o", "json")
        assert '"service"' in configuration and '"url"' not in configuration, kind
    ns = user_namespace
    # The release allows images from localhost/ only (webhook.imageRegistries).
    foreign = {
        "apiVersion": "databases.example.com/v1",
        "kind": "Database",
        "metadata": {"name": "foreign", "namespace": ns},
        "spec": {"engine": "postgres", "image": "docker.io/library/postgres:15"},
    }
    refused = real_cluster.kubectl("create", "-f", "-", input=json.dumps(foreign), check=False)
    assert "denied the request" in refused
    assert "spec.image docker.io/library/postgres:15 is not from an allowed registry" in refused
    assert real_cluster.db_gone(ns, "foreign")

    # The mutating webhook pins spec.version at create; deletion protection holds a delete.
    body = on_local_images({"spec": {"engine": "redis", "deletionProtection": True}}, images)
    del body["spec"]["version"]
    created = real_cluster.create_db(ns, "protected", body["spec"])
    assert created["spec"]["version"] == "7.4"
    done = real_cluster.kubectl("delete", "-n", ns, "database", "protected", check=False)
    assert "denied the request" in done and "spec.deletionProtection: true" in done
    real_cluster.patch_db(ns, "protected", {"spec": {"deletionProtection": False}})
    real_cluster.delete_db(ns, "protected")


def test_a_rolling_update_of_the_operator_restarts_no_database_pod(
    real_cluster: Cluster, operator_release: Release, samples: Samples
) -> None:
    ns = samples.namespace
    pods_before = {
        pod.metadata.uid: sum(s.restart_count for s in pod.status.container_statuses)
        for name in samples.pods
        for pod in pods_of(real_cluster, ns, name)
    }
    operators_before = {pod.metadata.uid for pod in operator_release.pods()}
    real_cluster.kubectl(
        "rollout", "restart", "-n", operator_release.namespace,
        f"deployment/{operator_release.name}",
    )  # fmt: skip
    operator_release.wait_rolled_out()
    operators_after = {
        p.metadata.uid for p in operator_release.pods() if not p.metadata.deletion_timestamp
    }
    assert not operators_after & operators_before, "every operator pod was replaced"
    # The new leader reconciled every Database (a new leader queues all it knows): still Active,
    # and not one database pod replaced or restarted.
    wait_for(
        lambda: operator_release.leader() in {p.metadata.name for p in operator_release.pods()},
        timeout=60,
        what="a new leader",
    )
    for name in samples.pods:
        wait_active(real_cluster, ns, name)
    pods_after = {
        pod.metadata.uid: sum(s.restart_count for s in pod.status.container_statuses)
        for name in samples.pods
        for pod in pods_of(real_cluster, ns, name)
    }
    assert pods_after == pods_before


def test_the_standby_takes_over_within_the_lease_when_the_leader_is_killed(
    real_cluster: Cluster,
    operator_release: Release,
    real_node: RealCluster,
    user_namespace: str,
    images: dict[str, str],
) -> None:
    leader = operator_release.leader()
    holder = _holder(operator_release)
    pod = next(p for p in operator_release.pods() if p.metadata.name == leader)
    (container,) = pod.status.container_statuses
    # SIGKILL: no release of the Lease, as a crash or a lost node would leave it.
    real_node.ctr("tasks", "kill", "--signal", "SIGKILL", container.container_id.split("//")[1])
    killed = time.monotonic()
    body = on_local_images({"spec": {"engine": "redis"}}, images)
    # Until the kubelet has seen the container die, the webhooks' Service still sends a share of
    # the API server's calls to it, refused (the webhooks fail closed): a user's create is
    # refused for that second or two, and tried again, as kubectl apply in a loop, or GitOps,
    # would.
    wait_for(
        partial(_created, real_cluster, user_namespace, "after-failover", body["spec"]),
        timeout=30,
        interval=0.5,
        what="the Database admitted",
    )
    wait_for(
        lambda: _holder(operator_release) not in ("", holder),
        timeout=LEASE_DURATION_S + 30,
        interval=0.5,
        what="another replica to take the Lease",
    )
    took_over = time.monotonic() - killed
    wait_active(real_cluster, user_namespace, "after-failover")
    reconciled = time.monotonic() - killed
    print(f"the Lease taken over {took_over:.1f}s after the kill, the Database Active at "
          f"{reconciled:.1f}s")  # fmt: skip
