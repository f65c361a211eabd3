"""The deploy pipeline's scripts against a real control plane, with an HA pair: hack/deploy.sh
installs the chart (CRDs included) with `helm upgrade --install --wait --rollback-on-failure`;
hack/smoke.py proves a Database gets Ready at its current generation and reads the metrics of
the replica that leads (the holder of the release's Lease, never whichever pod a Service picks); a
failing smoke test rolls the release back; a release left pending by a killed deploy and a failed
first install do not block the next deploy.

The operators run from the working tree (there is no kubelet to run their image): two of them,
electing their leader on the release's Lease like the chart's two replicas (staging's values),
each named by POD_NAME as a pod would be;
hack/smoke.py reaches their metrics through POD_METRICS_URLS instead of a port-forward. A
background thread plays the kubelet for the Deployments involved, as the reconcile tests do.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
import urllib.request
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field

import pytest
from kubernetes.client.exceptions import ApiException

from tests.cluster import Cluster, own_cluster, report_pods, wait_for
from tests.controlplane import ROOT, free_port
from tests.integration.conftest import OperatorProcess, start_operator

#: The two "pods": whichever leads, a smoke test that took the first, or any, would read the
#: standby half the time.
PODS = ("database-operator-6d4f9-aaaaa", "database-operator-6d4f9-zzzzz")
#: The chart's Lease for the release "database-operator" (its full name).
LEASE = "database-operator"


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
    operators: dict[str, OperatorProcess]
    metrics: dict[str, str]
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

    def helm(self, *args: str, namespace: str | None = None) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(ROOT / "bin" / "helm"), *args, "-n", namespace or self.namespace],
            env=self.env,
            capture_output=True,
            text=True,
            check=False,
        )

    def history(
        self, release: str = "database-operator", namespace: str | None = None
    ) -> list[dict[str, object]]:
        done = self.helm("history", release, "-o", "json", namespace=namespace)
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout)  # type: ignore[no-any-return]

    def image(self, release: str = "database-operator") -> str:
        deployment = self.cluster.apps.read_namespaced_deployment(release, self.namespace)
        return str(deployment.spec.template.spec.containers[0].image)

    def logs(self) -> str:
        return "".join(operator.log_text()[-3000:] for operator in self.operators.values())


def scrape(url: str) -> str:
    with urllib.request.urlopen(url, timeout=5) as response:  # noqa: S310 - a local URL
        return str(response.read().decode())


@pytest.fixture(scope="module")
def pipeline(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Pipeline]:
    """An empty control plane (the chart installs the CRDs), two operators watching all
    namespaces and electing their leader on the release's Lease as the chart's replicas would,
    and the environment hack/deploy.sh runs with."""
    with own_cluster() as cluster:
        logs = tmp_path_factory.mktemp("deploy")
        operators: dict[str, OperatorProcess] = {}
        metrics: dict[str, str] = {}
        suffix = uuid.uuid4().hex[:6]
        namespace, smoke_namespace = f"ops-{suffix}", f"smoke-{suffix}"
        for pod in PODS:
            port = free_port()
            metrics[pod] = f"http://127.0.0.1:{port}/metrics"
            operators[pod] = start_operator(
                cluster,
                logs / f"{pod}.log",
                "--all-namespaces",
                "--leader-election",
                f"--lease-name={LEASE}",
                f"--metrics-port={port}",
                "--health-port=0",
                "--resync-interval=2",
                # The downward API's: the Lease in the release's namespace (created by the
                # deploy: they campaign once it exists).
                env={"POD_NAMESPACE": namespace, "POD_NAME": pod},
            )
        kubelet = Kubelet(cluster, {namespace, smoke_namespace})
        thread = threading.Thread(target=kubelet.run, daemon=True)
        thread.start()
        env = {
            **os.environ,
            "PATH": f"{ROOT / 'bin'}:{os.environ['PATH']}",
            "KUBECONFIG": str(cluster.kubeconfig),
            "HELM": str(ROOT / "bin" / "helm"),
            "KUBECTL": str(ROOT / "bin" / "kubectl"),
            "HELM_CACHE_HOME": str(logs / "helm" / "cache"),
            "HELM_CONFIG_HOME": str(logs / "helm" / "config"),
            "HELM_DATA_HOME": str(logs / "helm" / "data"),
            "NAMESPACE": namespace,
            "SMOKE_NAMESPACE": smoke_namespace,
            "TIMEOUT": "60s",
            "SMOKE_TIMEOUT": "40s",
            # The "pods" are local processes: their metrics by the name each has in the Lease's
            # holderIdentity.
            "POD_METRICS_URLS": " ".join(f"{pod}={url}" for pod, url in metrics.items()),
            # Nor can the API server reach the chart's webhook Service: without pods, its
            # webhooks would refuse the smoke Database (they fail closed).
            "HELM_SET": "webhook.enabled=false",
        }
        try:
            yield Pipeline(cluster, operators, metrics, kubelet, env, namespace, smoke_namespace)
        finally:
            kubelet.stop.set()
            thread.join(timeout=5)
            for operator in operators.values():
                operator.stop()


def test_a_good_release_passes_the_smoke_test_read_from_the_active_replica(
    pipeline: Pipeline,
) -> None:
    done = pipeline.deploy("staging")  # two replicas electing a leader
    assert done.returncode == 0, done.stderr + pipeline.logs()
    holder = pipeline.cluster.kubectl(
        "get", "lease", LEASE, "-n", pipeline.namespace, "-o", "jsonpath={.spec.holderIdentity}"
    )
    leader, _, _ = holder.rpartition("_")
    assert leader in PODS, holder
    (standby,) = set(PODS) - {leader}
    assert f"leader: {leader} (Lease {pipeline.namespace}/{LEASE}" in done.stderr
    assert f"passed: Ready; {leader} is active" in done.stderr
    # It started before the chart installed its CRDs, and waited for them.
    assert all(
        "waiting for the CRDs to be installed" in operator.log_text()
        for operator in pipeline.operators.values()
    )
    assert [(r["revision"], r["status"]) for r in pipeline.history()] == [(1, "deployed")]
    # Reading the other pod would have read the standby, which says so.
    assert "database_operator_active 0.0" in scrape(pipeline.metrics[standby])
    assert "database_operator_active 1.0" in scrape(pipeline.metrics[leader])
    wait_for(
        lambda: (
            not pipeline.cluster.kubectl(
                "get", "databases", "-n", pipeline.smoke_namespace, "-o", "name"
            )
        ),
        what="the smoke Database to be deleted",
    )


def test_a_bad_release_is_rolled_back_and_fails(pipeline: Pipeline) -> None:
    # Nothing makes the smoke Database's pods ready in this namespace: the smoke test must fail.
    done = pipeline.deploy(
        "staging",
        IMAGE_TAG="not-good",
        SMOKE_TIMEOUT="6s",
        SMOKE_NAMESPACE=f"{pipeline.smoke_namespace}-bad",
    )
    assert done.returncode == 1, done.stdout + done.stderr
    assert "FAILED: the Database did not become Ready" in done.stderr
    assert "rolling back to revision 1" in done.stderr
    history = pipeline.history()
    assert [r["revision"] for r in history] == [1, 2, 3]
    assert history[-1]["status"] == "deployed"
    assert "Rollback to 1" in str(history[-1]["description"])
    assert "not-good" not in pipeline.image()


def test_a_release_left_pending_by_a_killed_deploy_is_recovered(pipeline: Pipeline) -> None:
    good = pipeline.image()
    # An upgrade whose pods never get ready (the kubelet looks away), killed as a cancelled CI
    # job would be: Helm leaves the release pending-upgrade and refuses the next upgrade.
    pipeline.kubelet.namespaces.discard(pipeline.namespace)
    chart = str(ROOT / "helm" / "database-operator")
    killed = subprocess.Popen(
        [str(ROOT / "bin" / "helm"), "upgrade", "database-operator", chart, "-n",
         pipeline.namespace, "--reuse-values", "--set", "image.tag=interrupted", "--wait",
         "--timeout", "120s"],
        env=pipeline.env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        wait_for(
            lambda: pipeline.history()[-1]["status"] == "pending-upgrade",
            what="the upgrade to be pending",
        )
    finally:
        killed.send_signal(signal.SIGKILL)
        killed.wait(timeout=10)
    pipeline.kubelet.namespaces.add(pipeline.namespace)
    refused = pipeline.helm("upgrade", "database-operator", chart, "--reuse-values")
    assert "another operation (install/upgrade/rollback) is in progress" in refused.stderr

    # A smoke namespace of its own: with no garbage collector here, the last smoke Database's
    # children are still around, and the operator does not adopt a Secret it did not make.
    smoke_namespace = f"{pipeline.smoke_namespace}-3"
    pipeline.kubelet.namespaces.add(smoke_namespace)
    done = pipeline.deploy("staging", SMOKE_NAMESPACE=smoke_namespace)
    assert done.returncode == 0, done.stderr + pipeline.logs()
    assert "was left pending-upgrade by an interrupted deploy: rolling back to revision 3" in (
        done.stderr
    )
    history = pipeline.history()
    assert [(r["status"], r["description"]) for r in history[-2:]] == [
        ("superseded", "Rollback to 3"),
        ("deployed", "Upgrade complete"),
    ]
    assert pipeline.image() == good


def test_a_failed_first_install_does_not_block_the_next_deploy(pipeline: Pipeline) -> None:
    # A second release of its own (the first one owns the CRDs), in a namespace the kubelet does
    # not serve yet: its Deployment never gets ready and `helm --wait` gives up.
    namespace = f"{pipeline.namespace}-new"
    first = {"NAMESPACE": namespace, "RELEASE": "other", "TIMEOUT": "5s",
             "HELM_SET": "webhook.enabled=false,crds.enabled=false"}  # fmt: skip
    done = pipeline.deploy("dev", **first)
    assert done.returncode != 0
    assert "has been uninstalled due to rollback-on-failure" in done.stderr
    assert "not found" in pipeline.helm("history", "other", namespace=namespace).stderr

    # Installed this time, but its smoke test fails: nothing ran here before, so nothing stays.
    pipeline.kubelet.namespaces.add(namespace)
    done = pipeline.deploy(
        "dev", **{**first, "TIMEOUT": "60s"}, SMOKE_TIMEOUT="4s",
        SMOKE_NAMESPACE=f"{pipeline.smoke_namespace}-none",
    )  # fmt: skip
    assert done.returncode == 1
    assert "smoke test failed on the first install: uninstalling other" in done.stderr
    assert "not found" in pipeline.helm("history", "other", namespace=namespace).stderr

    done = pipeline.deploy("dev", **{**first, "TIMEOUT": "60s"}, SMOKE="0")
    assert done.returncode == 0, done.stderr
    assert [r["status"] for r in pipeline.history("other", namespace)] == ["deployed"]
