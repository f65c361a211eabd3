"""An operator with its admission and conversion webhooks on a loopback port, as `make demo` runs
it (and tests/integration/test_webhooks.py tests it): `start_webhook_operator` starts one that
registers URL-based webhook configurations for the test's namespace and the CRD's conversion;
`conversion_kept` puts the CRD's conversion stanza back afterwards. `apply` and `database` are
kubectl apply of a Database manifest, as a user meets the webhooks."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import yaml

from tests.cluster import Cluster, wait_for
from tests.controlplane import free_port, kubectl_process
from tests.integration.conftest import RESYNC_S, OperatorProcess, is_ready, start_operator

GROUP = "databases.example.com"
V1BETA1 = f"{GROUP}/v1beta1"
CRD = f"databases.{GROUP}"
#: kubectl's name for the Databases as v1beta1.
BETA = f"databases.v1beta1.{GROUP}"


class WebhookOperator:
    """An operator with webhooks on a loopback port, and where to reach it."""

    def __init__(self, process: OperatorProcess, port: int, health_port: int, name: str) -> None:
        self.process = process
        self.port = port
        self.health_port = health_port
        self.configuration = name

    def ready(self) -> bool:
        return is_ready(self.health_port)


def start_webhook_operator(
    cluster: Cluster, namespace: str, log: Path, *extra: str, env: dict[str, str] | None = None
) -> WebhookOperator:
    port, health_port = free_port(), free_port()
    name = f"dbop-{namespace}"
    process = start_operator(
        cluster,
        log,
        f"--namespace={namespace}",
        f"--resync-interval={RESYNC_S}",
        f"--health-port={health_port}",
        "--metrics-port=0",
        "--log-level=DEBUG",
        f"--webhook-port={port}",
        f"--webhook-url=https://127.0.0.1:{port}",
        f"--webhook-configuration={name}",
        *extra,
        env=env,
    )
    running = WebhookOperator(process, port, health_port, name)
    wait_for(running.ready, timeout=30, what="/readyz with the webhooks served")
    return running


@contextmanager
def conversion_kept(cluster: Cluster) -> Iterator[None]:
    """The CRD's conversion stanza as it was before: an operator run with ``--webhook-url``
    points it at its own URL and leaves it there when it stops (other replicas may still serve
    it); the session's other tests find the CRD as the session installed it."""
    before = cluster.kubectl("get", "crd", CRD, "-o", "jsonpath={.spec.conversion}")
    try:
        yield
    finally:
        patch = [{"op": "replace", "path": "/spec/conversion", "value": json.loads(before)}]
        cluster.kubectl("patch", "crd", CRD, "--type=json", "-p", json.dumps(patch))
        after = cluster.kubectl("get", "crd", CRD, "-o", "jsonpath={.spec.conversion}")
        assert json.loads(after) == json.loads(before), after


def apply(
    cluster: Cluster, namespace: str, manifest: dict[str, Any]
) -> subprocess.CompletedProcess[str]:
    """`kubectl apply` as a user runs it: stdout, stderr (warnings, refusals) and exit code."""
    return kubectl_process(
        cluster.kubeconfig, "apply", "-n", namespace, "-f", "-", stdin=yaml.safe_dump(manifest)
    )


def database(name: str, spec: dict[str, Any], api_version: str = f"{GROUP}/v1") -> dict[str, Any]:
    return {"apiVersion": api_version, "kind": "Database", "metadata": {"name": name}, "spec": spec}
