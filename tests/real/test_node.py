"""The real node itself: containers run, Services route, DNS resolves, volumes keep data.

The workload is the Debian-made Redis image (hack/images/redis), run the way the operator runs
its pods (uid 999, fsGroup, RuntimeDefault seccomp, no capabilities)."""

from __future__ import annotations

import ipaddress
import socket
import time
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from tests.cluster import Cluster, wait_for
from tests.realnode import NODE_NAME, POD_CIDR, VOLUME_LABEL, RealCluster

HARDENED_POD = {
    "runAsNonRoot": True,
    "runAsUser": 999,
    "runAsGroup": 999,
    "fsGroup": 999,
    "seccompProfile": {"type": "RuntimeDefault"},
}
HARDENED_CONTAINER = {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}


@pytest.fixture(scope="module")
def redis_image(real_node: RealCluster) -> str:
    if "redis" not in real_node.images:
        pytest.fail(f"no redis image was imported (hack/images/redis): {real_node.images}")
    return real_node.images["redis"]


def pod_body(name: str, image: str, **container: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": {"app": name}},
        "spec": {
            "securityContext": HARDENED_POD,
            "automountServiceAccountToken": False,
            "enableServiceLinks": False,
            "terminationGracePeriodSeconds": 1,
            "containers": [
                {
                    "name": "main",
                    "image": image,
                    "imagePullPolicy": "Never",  # no registry: what was imported
                    "securityContext": HARDENED_CONTAINER,
                    **container,
                }
            ],
        },
    }


def redis_pod(name: str, image: str) -> dict[str, Any]:
    return pod_body(
        name,
        image,
        args=["--protected-mode", "no", "--save", ""],
        ports=[{"containerPort": 6379}],
        readinessProbe={"exec": {"command": ["redis-cli", "ping"]}, "periodSeconds": 1},
    )


def shell_pod(name: str, image: str, script: str, **spec: Any) -> dict[str, Any]:
    body = pod_body(name, image, command=["sh", "-c", script])
    body["spec"].update(spec)
    return body


def wait_ready(cluster: Cluster, namespace: str, name: str, timeout: float = 60) -> Any:
    def ready() -> Any:
        pod = cluster.core.read_namespaced_pod(name, namespace)
        for cond in pod.status.conditions or []:
            if cond.type == "Ready" and cond.status == "True":
                return pod
        return None

    return wait_for(ready, timeout=timeout, what=f"pod {namespace}/{name} Ready")


def wait_endpoint(cluster: Cluster, namespace: str, service: str, ip: str) -> None:
    """Until the Service's EndpointSlice lists ``ip`` ready: kube-proxy routes from there on
    (a ClusterIP refuses connections until then)."""
    discovery = client.DiscoveryV1Api(cluster.api)

    def listed() -> bool:
        slices = discovery.list_namespaced_endpoint_slice(
            namespace, label_selector=f"kubernetes.io/service-name={service}"
        ).items
        return any(
            ip in endpoint.addresses and endpoint.conditions.ready
            for found in slices
            for endpoint in found.endpoints or []
        )

    wait_for(listed, timeout=30, what=f"{ip} ready in {service}'s EndpointSlice")


def redis_ping(host: str, port: int = 6379, timeout: float = 20) -> bytes:
    """PING over TCP from the host; retried while kube-proxy catches up with the endpoint."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            with socket.create_connection((host, port), timeout=2) as conn:
                conn.sendall(b"PING\r\n")
                return conn.recv(64)
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def test_a_pod_runs_in_a_container_and_is_ready(
    real_cluster: Cluster, real_namespace: str, redis_image: str
) -> None:
    real_cluster.core.create_namespaced_pod(real_namespace, redis_pod("redis", redis_image))
    pod = wait_ready(real_cluster, real_namespace, "redis")

    assert pod.spec.node_name == NODE_NAME
    assert ipaddress.ip_address(pod.status.pod_ip) in ipaddress.ip_network(POD_CIDR)
    # exec and logs go through the kubelet: the API server reaches it by the node's address.
    assert real_cluster.kubectl(
        "exec", "-n", real_namespace, "redis", "--", "redis-cli", "ping"
    ) == ("PONG\n")
    status = real_cluster.kubectl(
        "exec",
        "-n",
        real_namespace,
        "redis",
        "--",
        "grep",
        "-E",
        "^(Uid|CapEff|Seccomp):",
        "/proc/1/status",
    )
    assert "999" in status.split("Uid:")[1].split("\n")[0]
    assert "0000000000000000" in status and "Seccomp:\t2" in status
    assert "Ready to accept connections" in real_cluster.kubectl(
        "logs", "-n", real_namespace, "redis"
    )


def test_a_service_resolves_in_a_pod_and_its_cluster_ip_reaches_the_pod(
    real_cluster: Cluster, real_namespace: str, redis_image: str
) -> None:
    ns = real_namespace
    real_cluster.core.create_namespaced_pod(ns, redis_pod("cache", redis_image))
    real_cluster.core.create_namespaced_service(
        ns,
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": "cache"},
            "spec": {"selector": {"app": "cache"}, "ports": [{"port": 6379}]},
        },
    )
    pod = wait_ready(real_cluster, ns, "cache")
    cluster_ip = real_cluster.core.read_namespaced_service("cache", ns).spec.cluster_ip
    wait_endpoint(real_cluster, ns, "cache", pod.status.pod_ip)

    # From the host, through kube-proxy's rules for the ClusterIP.
    assert redis_ping(cluster_ip) == b"+PONG\r\n"

    # From another pod: its resolver (the kubelet's clusterDNS, CoreDNS) finds the Service by
    # its short name and its full one, and the ClusterIP answers there too.
    client_pod = shell_pod("client", redis_image, "sleep 3600")
    real_cluster.core.create_namespaced_pod(ns, client_pod)
    wait_ready(real_cluster, ns, "client")

    def exec_in_client(*argv: str) -> str:
        return real_cluster.kubectl("exec", "-n", ns, "client", "--", *argv)

    for name in ("cache", f"cache.{ns}.svc.cluster.local"):
        assert exec_in_client("getent", "hosts", name).split()[0] == cluster_ip
    assert exec_in_client("redis-cli", "-h", "cache", "ping") == "PONG\n"


def test_a_claim_on_a_local_volume_outlives_its_pod_and_is_recycled(
    real_cluster: Cluster, real_namespace: str, redis_image: str
) -> None:
    ns = real_namespace
    real_cluster.create_claim(ns, "data")
    volume = {
        "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "data"}}],
    }
    mount = [{"name": "data", "mountPath": "/data"}]
    writer = shell_pod(
        "writer", redis_image, "echo kept > /data/proof && exec sleep 3600", **volume
    )
    writer["spec"]["containers"][0]["volumeMounts"] = mount
    real_cluster.core.create_namespaced_pod(ns, writer)
    wait_ready(real_cluster, ns, "writer")
    claim = real_cluster.core.read_namespaced_persistent_volume_claim("data", ns)
    assert claim.status.phase == "Bound"
    pv_name = claim.spec.volume_name
    pv = real_cluster.core.read_persistent_volume(pv_name)
    assert pv.metadata.labels.get(VOLUME_LABEL) == "true"

    real_cluster.core.delete_namespaced_pod("writer", ns, grace_period_seconds=0)
    wait_for(
        lambda: not real_cluster.core.list_namespaced_pod(ns).items,
        timeout=60,
        what="the writer pod gone",
    )
    reader = shell_pod("reader", redis_image, "exec sleep 3600", **volume)
    reader["spec"]["containers"][0]["volumeMounts"] = mount
    real_cluster.core.create_namespaced_pod(ns, reader)
    wait_ready(real_cluster, ns, "reader")
    assert real_cluster.kubectl("exec", "-n", ns, "reader", "--", "cat", "/data/proof") == "kept\n"

    # The claim goes: its PV is Released, wiped and Available again for the next claim.
    real_cluster.core.delete_namespaced_pod("reader", ns, grace_period_seconds=0)
    real_cluster.core.delete_namespaced_persistent_volume_claim("data", ns)

    def available() -> bool:
        found = real_cluster.core.read_persistent_volume(pv_name)
        return found.status.phase == "Available" and found.spec.claim_ref is None

    wait_for(available, timeout=90, what=f"{pv_name} recycled")
    assert not list(Path(pv.spec.local.path).iterdir())
