"""Monitoring on real pods: the exporter beside each engine answers /metrics with its engine up,
and a real Prometheus, configured from the chart's PodMonitor as the Prometheus Operator would
configure it, scrapes the pods with the labels the alerts and dashboards read. (Debian's
Prometheus has no Kubernetes discovery: the test lists the pods into a file_sd file with the
labels that discovery gives them; the selection and relabelling are Prometheus' own.)"""

from __future__ import annotations

import base64
import json
import urllib.parse
from functools import partial
from pathlib import Path
from typing import Any

from tests.cluster import Cluster, wait_for
from tests.exporters import listener
from tests.prometheus import http_get, prometheus_server
from tests.realnode import RealCluster
from tests.realpods import (
    Samples,
    chart_podmonitor,
    discovered_pods,
    on_local_images,
    podmonitor_scrape_config,
    running_pods,
    wait_active,
)

UP = {"postgres": "pg_up", "mysql": "mysql_up", "redis": "redis_up"}


def query(url: str, expression: str) -> list[dict[str, Any]]:
    answer = http_get(f"{url}/api/v1/query?query={urllib.parse.quote(expression)}")
    assert answer is not None
    found: list[dict[str, Any]] = json.loads(answer)["data"]["result"]
    return found


def test_every_engines_exporter_reports_it_up_and_prometheus_scrapes_the_pods_by_the_podmonitor(
    real_cluster: Cluster,
    real_node: RealCluster,
    samples: Samples,
    user_namespace: str,
    tmp_path: Path,
) -> None:
    ns = user_namespace
    monitoring = {"enabled": True}
    for name, engine in (("watched-my", "mysql"), ("watched-kv", "redis")):
        body = on_local_images(
            {"spec": {"engine": engine, "monitoring": monitoring}}, samples.images
        )
        real_cluster.create_db(ns, name, body["spec"])
    watched = {
        (samples.namespace, "catalog"): "postgres",
        (ns, "watched-my"): "mysql",
        (ns, "watched-kv"): "redis",
    }
    for namespace, name in watched:
        wait_active(real_cluster, namespace, name)

    # Each exporter, on its pod's own address: its engine is up.
    for (namespace, name), engine in watched.items():
        for pod in running_pods(real_cluster, namespace, name):
            address = f"http://{pod.status.pod_ip}:{exporter_port(pod)}/metrics"
            wait_for(
                partial(_serves, address, f"\n{UP[engine]} 1\n"),
                timeout=60,
                what=f"{UP[engine]} 1 from {pod.metadata.name}",
            )

    # The PostgreSQL exporters (primary and replica) log in as their own role, without any
    # password: no Secret reaches them, and they are up (the role and its pg_hba.conf line made
    # on the primary, the replica's cloned).
    for pod in running_pods(real_cluster, samples.namespace, "catalog"):
        [sidecar] = [c for c in pod.spec.containers if c.name == "metrics-exporter"]
        assert not [var.name for var in sidecar.env or [] if var.value_from], sidecar.env
        assert {var.name: var.value for var in sidecar.env}["DATA_SOURCE_USER"] == (
            "database_monitor"
        )

    # The Redis exporter, asked to scrape a server the test runs on the node, sends it no
    # password (the exporter's own user's is in a file that names only the local server), and
    # serves no key's value.
    [kv] = running_pods(real_cluster, ns, "watched-kv")
    secret = real_cluster.core.read_namespaced_secret("watched-kv-credentials", ns).data
    password = base64.b64decode(secret["password"])
    node = real_cluster.core.list_node().items[0]
    node_ip = next(a.address for a in node.status.addresses if a.type == "InternalIP")
    port, received, thread = listener("0.0.0.0")  # noqa: S104 - the pods reach the node there
    exporter_at = f"http://{kv.status.pod_ip}:{exporter_port(kv)}"
    http_get(f"{exporter_at}/scrape?target=redis://{node_ip}:{port}", timeout=30)
    thread.join(timeout=30)
    sent = b"".join(received)
    assert sent, "the exporter never reached the node's server: the check proves nothing"
    assert b"AUTH" not in sent.upper() and password not in sent, sent
    answer = http_get(f"{exporter_at}/metrics?check-keys=*", timeout=30) or b""
    assert b"\nredis_up 1\n" in answer and b"redis_key_" not in answer
    assert b'redis_script_values{key="maxclients"} 10000' in answer

    targets = tmp_path / "pods.json"
    targets.write_text(json.dumps(discovered_pods(real_cluster, [samples.namespace, ns])))
    config = podmonitor_scrape_config(chart_podmonitor(real_cluster.kubeconfig), targets)
    with prometheus_server(tmp_path, [config]) as url:
        for (namespace, name), engine in watched.items():
            selector = (
                f'{UP[engine]}{{job="database-operator-databases",namespace="{namespace}",'
                f'database="{name}",engine="{engine}"}}'
            )
            wanted = len(running_pods(real_cluster, namespace, name))
            series = wait_for(
                partial(_series, url, f"{selector} == 1", wanted),
                timeout=60,
                interval=1,
                what=f"{selector} == 1 for each of its pods",
            )
            roles = sorted(s["metric"]["role"] for s in series)
            assert roles == (["primary", "replica"] if wanted == 2 else ["primary"])
            assert {s["metric"]["pod"] for s in series} == {
                p.metadata.name for p in running_pods(real_cluster, namespace, name)
            }


def _serves(address: str, text: str) -> bool:
    return text in (http_get(address) or b"").decode()


def _series(url: str, expression: str, count: int) -> list[dict[str, Any]] | None:
    """The series ``expression`` finds, once there are ``count`` of them."""
    found = query(url, expression)
    return found if len(found) == count else None


def exporter_port(pod: Any) -> int:
    for container in pod.spec.containers:
        for port in container.ports or []:
            if port.name == "metrics":
                return int(port.container_port)
    raise AssertionError(f"{pod.metadata.name} has no port 'metrics'")
