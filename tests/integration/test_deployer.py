"""config/deployer is enough to deploy, and no more: on an empty control plane (kube-apiserver
with RBAC on), the CI deploy job's ServiceAccount installs the chart with its defaults (CRDs,
webhooks), upgrades it to the prod values with every optional object the chart has in core
Kubernetes, and rolls it back, as hack/deploy.sh does; the smoke test's requests are allowed;
and what a deploy never needs is refused.

Helm runs without --wait: no kubelet runs here, so the Deployment never gets pods.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from database_operator import rbac
from tests.cluster import Cluster, own_cluster
from tests.controlplane import ROOT
from tests.integration.helm import CHART, Helm, can_i, service_account_kubeconfig

RELEASE = rbac.DEPLOYER_RELEASE
NAMESPACE = rbac.DEPLOYER_NAMESPACE
ACCOUNT = f"system:serviceaccount:{NAMESPACE}:{rbac.DEPLOYER}"


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    """An empty control plane of the module's own (no CRDs), with config/deployer applied."""
    with own_cluster() as cluster:
        cluster.kubectl("apply", "-k", str(ROOT / "config" / "deployer"))
        yield cluster


@pytest.fixture(scope="module")
def deployer(cluster: Cluster, tmp_path_factory: pytest.TempPathFactory) -> Helm:
    """bin/helm authenticated as the deployer's ServiceAccount, with a token as CI has."""
    home = tmp_path_factory.mktemp("deployer")
    kubeconfig = service_account_kubeconfig(
        cluster, NAMESPACE, rbac.DEPLOYER, home / "deployer.kubeconfig"
    )
    return Helm(kubeconfig, home)


def test_the_deployer_installs_upgrades_and_rolls_back_the_chart(
    cluster: Cluster, deployer: Helm
) -> None:
    def deploy(*values: str) -> None:
        deployer(
            "upgrade", "--install", RELEASE, str(CHART),
            "--namespace", NAMESPACE, "--create-namespace", *values,
        )  # fmt: skip

    deploy()  # the chart's defaults: CRDs, webhooks and leader election on
    for crd in rbac.CHART_CRDS:
        if crd.endswith(".kopf.dev"):  # earlier releases' only: Kopf's peering
            assert "NotFound" in cluster.kubectl("get", "crd", crd, check=False)
        else:
            cluster.kubectl("get", "crd", crd)
    lease_role = f"{RELEASE}-leader-election"
    granted = json.loads(cluster.kubectl("get", "role", lease_role, "-n", NAMESPACE, "-o", "json"))
    assert granted["rules"] == rbac.lease_rules(RELEASE)
    for kind in ("validatingwebhookconfigurations", "mutatingwebhookconfigurations"):
        cluster.kubectl("get", kind, RELEASE)
    for role in ("admin", "edit", "view"):
        cluster.kubectl("get", "clusterrole", f"{RELEASE}-{role}")

    # The prod values (two replicas electing a leader, a PodDisruptionBudget), a NetworkPolicy
    # (with egress rules: the API server validates them too), and Roles in watched namespaces
    # instead of the ClusterRole.
    cluster.kubectl("create", "namespace", "apps")
    egress = [{"to": [{"ipBlock": {"cidr": "127.0.0.1/32"}}], "ports": [{"port": 6443}]}]
    deploy(
        "--values", str(CHART / "values-prod.yaml"),
        "--set", "networkPolicy.enabled=true", "--set", "watchNamespaces={apps}",
        "--set-json", f"networkPolicy.egress={json.dumps(egress)}",
    )  # fmt: skip
    cluster.kubectl("get", "poddisruptionbudget", RELEASE, "-n", NAMESPACE)
    policy = json.loads(
        cluster.kubectl("get", "networkpolicy", RELEASE, "-n", NAMESPACE, "-o", "json")
    )
    assert policy["spec"]["policyTypes"] == ["Ingress", "Egress"]
    assert policy["spec"]["egress"][0]["ports"] == [{"port": 6443, "protocol": "TCP"}]
    cluster.kubectl("get", "role,rolebinding", RELEASE, "-n", "apps")

    # hack/deploy.sh's way back after a failed smoke test.
    deployer("rollback", RELEASE, "1", "--namespace", NAMESPACE)
    history = json.loads(deployer("history", RELEASE, "-n", NAMESPACE, "-o", "json").stdout)
    assert [entry["status"] for entry in history] == ["superseded", "superseded", "deployed"]
    assert "NotFound" in cluster.kubectl("get", "role", RELEASE, "-n", "apps", check=False)
    cluster.kubectl("get", "clusterrole", RELEASE)


@pytest.mark.parametrize(
    "request_",
    [
        # hack/smoke.py
        ("list", "deployments", "-n", NAMESPACE),
        ("create", "namespaces"),
        ("patch", f"namespaces/{rbac.SMOKE_NAMESPACE}"),
        ("create", "databases.databases.example.com", "-n", rbac.SMOKE_NAMESPACE),
        ("patch", "databases.databases.example.com", "-n", rbac.SMOKE_NAMESPACE),
        ("delete", "databases.databases.example.com", "-n", rbac.SMOKE_NAMESPACE),
        ("get", f"leases/{RELEASE}", "-n", NAMESPACE),  # the leader
        # Held to grant it: the chart's Lease Role names one Lease per shard.
        ("update", f"leases/{RELEASE}-east", "-n", NAMESPACE),
        ("list", "pods", "-n", NAMESPACE),
        ("create", "pods", "--subresource=portforward", "-n", NAMESPACE),
        # Helm's release records
        ("list", "secrets", "-n", NAMESPACE),
        ("update", "secrets", "-n", NAMESPACE),
    ],
)
def test_the_deployer_may_run_the_smoke_test(cluster: Cluster, request_: tuple[str, ...]) -> None:
    assert can_i(cluster, ACCOUNT, *request_) == "yes"


@pytest.mark.parametrize(
    "request_",
    [
        # Secrets elsewhere: never replaced (listed and watched as the operator does, to grant it).
        ("update", "secrets", "-n", "kube-system"),
        # Other products' cluster-wide objects are not the release's to change.
        ("patch", "clusterroles/cluster-admin"),
        ("delete", "clusterrolebindings/cluster-admin"),
        ("update", "validatingwebhookconfigurations/other"),
        ("delete", "mutatingwebhookconfigurations/other"),
        ("delete", "customresourcedefinitions/other.example.com"),
        ("patch", "namespaces/kube-system"),
        ("delete", "namespaces"),
        ("escalate", "clusterroles"),
        ("bind", "clusterroles"),
        ("impersonate", "serviceaccounts"),
        ("create", "serviceaccounts", "--subresource=token", "-n", NAMESPACE),
        ("create", "pods", "--subresource=exec", "-n", NAMESPACE),
        ("create", "nodes"),
    ],
)
def test_the_deployer_may_not_do_more(cluster: Cluster, request_: tuple[str, ...]) -> None:
    assert can_i(cluster, ACCOUNT, *request_) == "no"


def test_the_deployer_account_is_config_deployers(cluster: Cluster) -> None:
    bindings = json.loads(
        cluster.kubectl("get", "clusterrolebinding,rolebinding", "-A", "-o", "json")
    )["items"]
    ours = [b for b in bindings if b["roleRef"]["name"] == rbac.DEPLOYER]
    assert {b["kind"] for b in ours} == {"ClusterRoleBinding", "RoleBinding"}
    for binding in ours:
        assert binding["subjects"] == [
            {"kind": "ServiceAccount", "name": rbac.DEPLOYER, "namespace": NAMESPACE}
        ]
