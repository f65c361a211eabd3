"""The deploy pipeline's scripts against a real control plane: hack/deploy.sh installs the chart
(CRDs included) with `helm upgrade --install --wait --rollback-on-failure`, hack/smoke-test.sh
proves a Database gets Ready and the metrics count reconciles, and a failing smoke test rolls
the release back.

The operator runs from the working tree (there is no kubelet to run its image); a background
thread plays the kubelet for the Deployments involved, as the reconcile tests do.
"""

from __future__ import annotations

import json
import os
import subprocess
import threading
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field

import pytest
from kubernetes.client.exceptions import ApiException

from tests.cluster import Cluster, report_pods, wait_for
from tests.controlplane import ROOT, free_port, temporary_control_plane
from tests.integration.conftest import OperatorProcess, start_operator


@dataclass
class Kubelet:
    """Marks the Deployments of some namespaces ready, until stopped."""

    cluster: Cluster
    namespaces: set[str]
    stop: threading.Event = field(default_factory=threading.Event)

    def run(self) -> None:
        while not self.stop.wait(0.3):
            for namespace in list(self.namespaces):
                try:
                    deployments = self.cluster.apps.list_namespaced_deployment(namespace).items
                except ApiException:  # the namespace may not exist yet
                    continue
                for deployment in deployments:
                    status = deployment.status
                    if (status.observed_generation or 0) < deployment.metadata.generation or (
                        (status.ready_replicas or 0) != (deployment.spec.replicas or 0)
                    ):
                        try:
                            report_pods(self.cluster, namespace, deployment.metadata.name, None)
                        except ApiException:  # raced a change: the next round catches up
                            continue


@dataclass
class Pipeline:
    cluster: Cluster
    operator: OperatorProcess
    kubelet: Kubelet
    env: dict[str, str]
    namespace: str
    smoke_namespace: str

    def deploy(self, environment: str, **extra: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(ROOT / "hack" / "deploy.sh"), environment],
            env={**self.env, **extra},
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )

    def history(self) -> list[dict[str, object]]:
        done = subprocess.run(
            [
                str(ROOT / "bin" / "helm"),
                "history",
                "database-operator",
                "-n",
                self.namespace,
                "-o",
                "json",
            ],
            env=self.env,
            capture_output=True,
            text=True,
            check=True,
        )
        return json.loads(done.stdout)  # type: ignore[no-any-return]


@pytest.fixture(scope="module")
def pipeline(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Pipeline]:
    """An empty control plane (the chart installs the CRDs), the operator watching all
    namespaces, and the environment hack/deploy.sh runs with."""
    with temporary_control_plane() as plane:
        cluster = Cluster.connect(plane)
        metrics_port = free_port()
        operator = start_operator(
            cluster,
            tmp_path_factory.mktemp("deploy") / "operator.log",
            "--all-namespaces",
            f"--metrics-port={metrics_port}",
            "--health-port=0",
            "--resync-interval=2",
        )
        suffix = uuid.uuid4().hex[:6]
        namespace, smoke_namespace = f"ops-{suffix}", f"smoke-{suffix}"
        kubelet = Kubelet(cluster, {namespace})
        thread = threading.Thread(target=kubelet.run, daemon=True)
        thread.start()
        env = {
            **os.environ,
            "PATH": f"{ROOT / 'bin'}:{os.environ['PATH']}",
            "KUBECONFIG": str(plane.kubeconfig),
            "HELM": str(ROOT / "bin" / "helm"),
            "KUBECTL": str(ROOT / "bin" / "kubectl"),
            "NAMESPACE": namespace,
            "SMOKE_NAMESPACE": smoke_namespace,
            "TIMEOUT": "90s",
            "SMOKE_TIMEOUT": "30s",
            # The operator runs here, not in a pod: read its metrics directly.
            "METRICS_URL": f"http://127.0.0.1:{metrics_port}/metrics",
            # Nor can the API server reach the chart's webhook Service: without pods, its
            # webhooks would refuse the smoke Database (they fail closed).
            "HELM_SET": "webhook.enabled=false",
        }
        try:
            yield Pipeline(cluster, operator, kubelet, env, namespace, smoke_namespace)
        finally:
            kubelet.stop.set()
            thread.join(timeout=5)
            operator.stop()
            cluster.api.close()


def test_deploy_installs_the_chart_and_the_smoke_test_passes(pipeline: Pipeline) -> None:
    pipeline.kubelet.namespaces.add(pipeline.smoke_namespace)
    done = pipeline.deploy("dev")
    assert done.returncode == 0, done.stderr + pipeline.operator.log_text()[-4000:]
    assert "[smoke" in done.stderr
    assert "passed: Ready" in done.stderr
    # It started before the chart installed its CRDs, and waited for them.
    assert "waiting for the CRDs to be installed" in pipeline.operator.log_text()
    history = pipeline.history()
    assert [(r["revision"], r["status"]) for r in history] == [(1, "deployed")]
    # The chart installed the CRDs, and the smoke test cleaned up after itself.
    assert pipeline.cluster.kubectl("get", "crd", "databases.databases.example.com", "-o", "name")
    wait_for(
        lambda: (
            not pipeline.cluster.kubectl(
                "get", "databases", "-n", pipeline.smoke_namespace, "-o", "name"
            )
        ),
        what="the smoke Database to be deleted",
    )


def test_a_failing_smoke_test_rolls_the_release_back_and_fails(pipeline: Pipeline) -> None:
    # Nothing makes the smoke Database's pods ready this time: the smoke test must fail. (A
    # namespace of its own: with no garbage collector here, the last smoke test's Deployment
    # is still around, ready.)
    done = pipeline.deploy(
        "staging",
        IMAGE_TAG="not-good",
        SMOKE_TIMEOUT="5s",
        SMOKE_NAMESPACE=f"{pipeline.smoke_namespace}-2",
    )
    assert done.returncode == 1, done.stdout + done.stderr
    assert "did not become Ready" in done.stderr
    assert "rolling back to revision 1" in done.stderr
    history = pipeline.history()
    assert [r["revision"] for r in history] == [1, 2, 3]
    assert history[-1]["status"] == "deployed"
    assert "Rollback to 1" in str(history[-1]["description"])
    image = (
        pipeline.cluster.apps.read_namespaced_deployment("database-operator", pipeline.namespace)
        .spec.template.spec.containers[0]
        .image
    )
    assert "not-good" not in image
