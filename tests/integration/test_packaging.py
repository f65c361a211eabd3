"""Installing the operator the way users do, against a real kube-apiserver with RBAC on: the Helm
chart (install, upgrade, uninstall; CRDs kept) and `kubectl apply -k config/default`; and proof
that the chart's RBAC is enough and no more: the operator, authenticated as the chart's
ServiceAccount and started with the chart Deployment's own arguments, reconciles a Database end
to end without a single denied request.

No kubelet or scheduler runs, so the charts' Deployments never get pods (expected): the operator
runs as a local process with the ServiceAccount's token instead. The session cluster already has
the CRDs (applied by the fixture), so tests there install the chart with crds.enabled=false; the
chart's own CRD install is tested on an empty control plane of its own.

Nor can the API server reach the chart's webhook Service (no pods, no kube-proxy): an installed
release's webhooks fail closed, so a Database is created in the release's own namespace (never
selected by them), or the chart is installed with webhook.enabled=false where the test is about
something else. The webhooks themselves are tested in test_webhooks.py, reached by URL.
"""

from __future__ import annotations

import base64
import json
import re
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client

from database_operator import rbac
from tests.cluster import Cluster, own_cluster, play_kubelet, wait_for
from tests.controlplane import ROOT, free_port, install_crds
from tests.integration.conftest import RESYNC_S, OperatorProcess, start_operator
from tests.integration.helm import (
    CHART_NAME,
    Helm,
    can_i,
    fullname,
    service_account_kubeconfig,
)
from tests.integration.waiting import phase_is, wait_for_status

HOOK_KINDS = ("validatingwebhookconfigurations", "mutatingwebhookconfigurations")
#: What the API server says when no replica behind the webhook Service answers.
WEBHOOK_DOWN = 'failed calling webhook "mutate.databases.example.com"'
#: A denied or unauthenticated request, however Kopf, the client or the operator logs it.
DENIED = re.compile(r"forbidden|unauthorized|\b40[13] ", re.IGNORECASE)
#: The name the operators started as the chart's Deployment's pod have (POD_NAME).
LOCAL_POD = "database-operator-5c7d9-local"


@pytest.fixture(scope="module")
def helm_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("helm")


@pytest.fixture
def helm(cluster: Cluster, helm_home: Path) -> Helm:
    return Helm(cluster.kubeconfig, helm_home)


@pytest.fixture
def release(helm: Helm, namespace: str) -> Iterator[str]:
    """A release name unique to the test (cluster-scoped RBAC is named after it), uninstalled
    at teardown if the test left it installed."""
    name = f"rel-{uuid.uuid4().hex[:6]}"
    yield name
    helm("uninstall", name, "--namespace", namespace, "--ignore-not-found")


def sets(*assignments: str) -> list[str]:
    """``--set`` flags, one per assignment."""
    return [flag for assignment in assignments for flag in ("--set", assignment)]


@pytest.fixture
def make_namespace(cluster: Cluster) -> Iterator[Callable[[str], str]]:
    """Create more namespaces for the test, deleted at teardown."""
    made: list[str] = []

    def make(prefix: str) -> str:
        name = f"{prefix}-{uuid.uuid4().hex[:6]}"
        cluster.core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=name)))
        made.append(name)
        return name

    yield make
    for name in made:
        cluster.core.delete_namespace(name)


@pytest.fixture
def empty_cluster() -> Iterator[Cluster]:
    """A control plane of the test's own, without CRDs: a user's fresh cluster."""
    with own_cluster() as cluster:
        yield cluster


def not_found(call: Callable[[], Any]) -> bool:
    try:
        call()
    except client.ApiException as error:
        if error.status == 404:
            return True
        raise
    return False


def container(cluster: Cluster, namespace: str, name: str) -> Any:
    return cluster.apps.read_namespaced_deployment(name, namespace).spec.template.spec.containers[0]


def rules_of(cluster: Cluster, kind: str, name: str, namespace: str | None = None) -> list[Any]:
    path = [kind, name] if namespace is None else [kind, name, "-n", namespace]
    role = json.loads(cluster.kubectl("get", *path, "-o", "json"))
    return role["rules"]  # type: ignore[no-any-return]


def start_as_deployed(
    cluster: Cluster, namespace: str, release: str, kubeconfig: Path, log: Path, *extra: str
) -> OperatorProcess:
    """The operator with the installed Deployment's own arguments (ports off, quick resyncs and
    DEBUG logs added after them, and ``extra``: the last flag wins), authenticated as
    ``kubeconfig``'s user, with the pod's namespace and name as the downward API gives them
    (POD_NAME: ``LOCAL_POD``)."""
    args = container(cluster, namespace, fullname(release)).args
    assert args[0] == "run"
    return start_operator(
        cluster,
        log,
        *args[1:],
        "--metrics-port=0",
        "--health-port=0",
        f"--resync-interval={RESYNC_S}",
        "--log-level=DEBUG",
        *extra,
        kubeconfig=kubeconfig,
        env={"POD_NAMESPACE": namespace, "POD_NAME": LOCAL_POD},
    )


def lease_holder(cluster: Cluster, namespace: str, name: str) -> str:
    """The pod holding the Lease (its holderIdentity is "<pod>_<8 hex>"), or ""."""
    holder = cluster.kubectl(
        "get", "lease", name, "-n", namespace, "-o", "jsonpath={.spec.holderIdentity}", check=False
    )
    return holder.rpartition("_")[0]


def reconciles_to_active(cluster: Cluster, namespace: str, name: str) -> None:
    """A Database gets its children and status, goes Active once its pods are ready, and loses
    its read replicas' Deployment and Service when scaled down to its primary."""
    cluster.create_db(namespace, name, {"engine": "redis", "replicas": 2})
    wait_for_status(cluster, namespace, name, "phase Pending", phase_is("Pending"))
    for deployment in (name, f"{name}-replicas"):
        cluster.apps.read_namespaced_deployment(deployment, namespace)
        cluster.core.read_namespaced_service(deployment, namespace)
    for secret in ("credentials", "connection"):
        cluster.core.read_namespaced_secret(f"{name}-{secret}", namespace)
    play_kubelet(cluster, namespace, name)
    wait_for_status(cluster, namespace, name, "phase Active", phase_is("Active"))
    cluster.patch_db(namespace, name, {"spec": {"replicas": 1}})

    def read_replicas_gone() -> bool:
        return not_found(
            lambda: cluster.apps.read_namespaced_deployment(f"{name}-replicas", namespace)
        ) and not_found(lambda: cluster.core.read_namespaced_service(f"{name}-replicas", namespace))

    wait_for(read_replicas_gone, what="the read replicas' Deployment and Service to go")


def database_yaml(name: str) -> str:
    return json.dumps(
        {
            "apiVersion": "databases.example.com/v1",
            "kind": "Database",
            "metadata": {"name": name},
            "spec": {"engine": "redis"},
        }
    )


def ca_bundles(cluster: Cluster, configuration: str) -> list[str | None]:
    """The caBundles of the two webhook configurations and of the CRD's conversion webhook."""
    objects = [
        json.loads(cluster.kubectl("get", kind, configuration, "-o", "json")) for kind in HOOK_KINDS
    ]
    crd = json.loads(cluster.kubectl("get", "crd", "databases.databases.example.com", "-o", "json"))
    clients = [obj["webhooks"][0]["clientConfig"] for obj in objects]
    clients.append(crd["spec"]["conversion"]["webhook"]["clientConfig"])
    return [client.get("caBundle") for client in clients]


def denied_lines(operator: OperatorProcess) -> list[str]:
    return [line for line in operator.log_text().splitlines() if DENIED.search(line)]


# --- the chart's lifecycle ----------------------------------------------------------------------


def test_helm_install_upgrade_and_uninstall(
    cluster: Cluster, helm: Helm, namespace: str, release: str
) -> None:
    name = fullname(release)
    helm.chart(
        "install", release, namespace, *sets("crds.enabled=false", "leaderElection.enabled=false")
    )

    cluster.core.read_namespaced_service_account(name, namespace)
    cluster.core.read_namespaced_service(f"{name}-metrics", namespace)
    cluster.core.read_namespaced_service(f"{name}-webhook", namespace)
    for kind in HOOK_KINDS:
        hooks = json.loads(cluster.kubectl("get", kind, name, "-o", "json"))["webhooks"]
        assert hooks[0]["clientConfig"]["service"]["name"] == f"{name}-webhook"
    assert rules_of(cluster, "clusterrole", name) == rbac.cluster_role_rules()
    binding = json.loads(cluster.kubectl("get", "clusterrolebinding", name, "-o", "json"))
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": name, "namespace": namespace}]
    deployment = cluster.apps.read_namespaced_deployment(name, namespace)
    assert deployment.spec.replicas == 1
    assert deployment.spec.strategy.type == "Recreate"  # one replica, no leader election
    assert "--log-level=INFO" in deployment.spec.template.spec.containers[0].args
    lease_role = f"{name}-leader-election"
    assert "NotFound" in cluster.kubectl("get", "role", lease_role, "-n", namespace, check=False)

    helm.chart(
        "upgrade", release, namespace, "--reuse-values", *sets("logLevel=DEBUG", "replicas=2")
    )
    upgraded = cluster.apps.read_namespaced_deployment(name, namespace)
    assert upgraded.metadata.generation > deployment.metadata.generation
    assert upgraded.spec.replicas == 2
    assert upgraded.spec.strategy.type == "RollingUpdate"
    args = upgraded.spec.template.spec.containers[0].args
    # Two replicas elect their leader whatever leaderElection.enabled says, on a Lease they
    # may take and renew by its name.
    assert {"--log-level=DEBUG", "--leader-election", f"--lease-name={name}"} <= set(args)
    assert rules_of(cluster, "role", lease_role, namespace) == rbac.lease_rules(name)

    helm("uninstall", release, "--namespace", namespace)
    assert not_found(lambda: cluster.apps.read_namespaced_deployment(name, namespace))
    assert not_found(lambda: cluster.core.read_namespaced_service_account(name, namespace))
    assert "NotFound" in cluster.kubectl("get", "clusterrole", name, check=False)
    assert "NotFound" in cluster.kubectl("get", "role", lease_role, "-n", namespace, check=False)
    for kind in HOOK_KINDS:  # nothing left to refuse other namespaces' Database writes
        assert "NotFound" in cluster.kubectl("get", kind, name, check=False)
    # The session's CRDs were never the release's: untouched.
    cluster.kubectl("get", "crd", "databases.databases.example.com")


def test_chart_crds_apply_unchanged_over_the_installed_ones(cluster: Cluster, helm: Helm) -> None:
    """The chart's CRDs are the ones the cluster has (config/crd/bases): applied over them on the
    server, they change no spec (same generation) and conflict with no field manager."""
    rendered = helm.chart(
        "template",
        CHART_NAME,
        # The namespace the cluster's CRDs (config/crd/bases) name in their conversion webhook.
        "database-operator-system",
        "--show-only",
        "templates/crds.yaml",
    )
    applied = cluster.kubectl(
        "apply",
        "--server-side",
        "--field-manager=helm",
        "--dry-run=server",
        "-o",
        "json",
        "-f",
        "-",
        input=rendered.stdout,
    )
    items = json.loads(applied)["items"]
    # Database and DatabaseBackup (Kopf's peering CRDs are no longer installed).
    assert sorted(crd["metadata"]["name"] for crd in items) == [
        "databasebackups.databases.example.com",
        "databases.databases.example.com",
    ]
    for crd in items:
        live = json.loads(cluster.kubectl("get", "crd", crd["metadata"]["name"], "-o", "json"))
        assert crd["metadata"]["generation"] == live["metadata"]["generation"], crd["metadata"]
        assert crd["metadata"]["annotations"]["helm.sh/resource-policy"] == "keep"


def test_chart_installs_the_crds_on_an_empty_cluster_and_keeps_them_on_uninstall(
    empty_cluster: Cluster, helm_home: Path
) -> None:
    cluster, helm = empty_cluster, Helm(empty_cluster.kubeconfig, helm_home)
    release, namespace = CHART_NAME, "database-operator-system"
    crds = ["databases.databases.example.com", "databasebackups.databases.example.com"]
    helm.chart("install", release, namespace, "--create-namespace")
    cluster.kubectl(
        "wait", "--for=condition=Established", "--timeout=60s", *[f"crd/{crd}" for crd in crds]
    )
    assert "NotFound" in cluster.kubectl("get", "crd", "kopfpeerings.kopf.dev", check=False)
    cluster.kubectl("create", "namespace", "apps")
    # No operator pod answers the webhooks: Database writes fail closed, fast and clearly,
    # except in the operator's own namespace.
    refused = cluster.kubectl(
        "apply", "-n", "apps", "-f", "-", input=database_yaml("refused"), check=False
    )
    assert WEBHOOK_DOWN in refused, refused
    cluster.create_db(namespace, "kept", {"engine": "redis"})

    uninstalled = helm("uninstall", release, "--namespace", namespace)
    assert "kept due to the resource policy" in uninstalled.stdout
    for crd in crds:
        cluster.kubectl("get", "crd", crd)
    assert cluster.get_db(namespace, "kept")["spec"]["engine"] == "redis"
    assert "NotFound" in cluster.kubectl("get", "clusterrole", CHART_NAME, check=False)
    # The webhook configurations went with the release: writes are unchecked again.
    cluster.create_db("apps", "after", {"engine": "redis"})

    # Installed again, the release adopts the CRDs it left behind.
    helm.chart("install", release, namespace, "--set", "logLevel=DEBUG")
    for crd in crds:
        live = json.loads(cluster.kubectl("get", "crd", crd, "-o", "json"))
        assert live["metadata"]["annotations"]["meta.helm.sh/release-name"] == release
    helm("uninstall", release, "--namespace", namespace)


def test_chart_takes_over_crds_that_kubectl_installed(
    empty_cluster: Cluster, helm_home: Path
) -> None:
    """CRDs applied before (`kubectl apply -k config/crd`, as the session fixture does): Helm
    refuses to adopt them silently; with --take-ownership it does, and their spec is unchanged."""
    cluster, helm = empty_cluster, Helm(empty_cluster.kubeconfig, helm_home)
    names = install_crds(cluster.kubeconfig)
    before = {
        name: json.loads(cluster.kubectl("get", "crd", name, "-o", "json"))["metadata"]
        for name in names
    }
    # The namespace config/crd's conversion webhook names (elsewhere, Helm's server-side apply
    # reports the conflict over that field: the README's --force-conflicts).
    install = ("install", CHART_NAME, "database-operator-system", "--create-namespace")
    refused = helm.chart(*install, check=False)
    assert refused.returncode != 0
    assert "exists and cannot be imported into the current release" in refused.stderr

    helm.chart(*install, "--take-ownership")
    for name in names:
        after = json.loads(cluster.kubectl("get", "crd", name, "-o", "json"))["metadata"]
        assert after["generation"] == before[name]["generation"], name
        assert after["annotations"]["helm.sh/resource-policy"] == "keep"


# --- least privilege, proven --------------------------------------------------------------------


def test_chart_service_account_runs_the_operator_across_all_namespaces(
    empty_cluster: Cluster, helm_home: Path, tmp_path: Path
) -> None:
    """On an empty cluster, everything from `helm install` (CRDs, ClusterRoles, webhooks): the
    operator as the ServiceAccount watches all namespaces, takes the leader's Lease in its own
    namespace, keeps its webhook CA in the release's Secret and writes it into the caBundles of the
    release's webhook configurations and the CRD, and reconciles a Database end to end, all
    without a denied request."""
    cluster, helm = empty_cluster, Helm(empty_cluster.kubeconfig, helm_home)
    release, namespace = "ops", "database-operator-system"
    helm.chart("install", release, namespace, "--create-namespace")
    cluster.kubectl("wait", "--for=condition=Established", "--timeout=60s", "crd", "--all")
    account = fullname(release)
    kubeconfig = service_account_kubeconfig(cluster, namespace, account, tmp_path / "sa.kubeconfig")
    cluster.kubectl("create", "namespace", "apps")

    operator = start_as_deployed(
        cluster,
        namespace,
        release,
        kubeconfig,
        tmp_path / "op.log",
        f"--webhook-port={free_port()}",
    )
    try:
        wait_for(lambda: all(ca_bundles(cluster, account)), what="the three caBundles")
        secret = cluster.core.read_namespaced_secret(f"{account}-webhook-cert", namespace)
        ca = base64.b64decode(secret.data["ca.crt"])
        assert {base64.b64decode(b or "") for b in ca_bundles(cluster, account)} == {ca}
        # The API server cannot reach the webhook Service here: the Database lives in the
        # release's namespace, which the webhooks never select.
        reconciles_to_active(cluster, namespace, "db")
        assert lease_holder(cluster, namespace, account) == LOCAL_POD

    finally:
        assert operator.stop() == 0, operator.log_text()[-3000:]
    assert denied_lines(operator) == []
    assert "--all-namespaces" in container(cluster, namespace, account).args
    user = f"system:serviceaccount:{namespace}:{account}"
    assert can_i(cluster, user, "update", f"validatingwebhookconfigurations/{account}") == "yes"
    assert can_i(cluster, user, "update", "validatingwebhookconfigurations/other") == "no"
    assert can_i(cluster, user, "patch", "crd/databases.databases.example.com") == "yes"
    assert can_i(cluster, user, "patch", "crd/databasebackups.databases.example.com") == "no"
    # The admission quota's watch of the namespaces' annotations (webhooks/namespaces.py).
    assert can_i(cluster, user, "watch", "namespaces") == "yes"
    # The Lease: its own, in its own namespace, by name (but for create).
    assert can_i(cluster, user, "update", f"leases/{account}", "-n", namespace) == "yes"
    assert can_i(cluster, user, "update", "leases/other", "-n", namespace) == "no"
    assert can_i(cluster, user, "create", "leases", "-n", "apps") == "no"


def test_chart_watching_one_namespace_grants_that_namespace_only(  # noqa: PLR0917 - fixtures
    cluster: Cluster,
    helm: Helm,
    namespace: str,
    release: str,
    make_namespace: Callable[[str], str],
    tmp_path: Path,
) -> None:
    """watchNamespaces=[ns-a]: a Role in ns-a, nothing cluster-wide; the ServiceAccount may
    read Secrets in ns-a and not in ns-b, and the operator it runs (leading on its Lease in the
    release's namespace, not ns-a) reconciles ns-a's Databases and no other."""
    ns_a, ns_b = make_namespace("ns-a"), make_namespace("ns-b")
    helm.chart(
        "install",
        release,
        namespace,
        # Webhooks off: the API server could not reach them (see the module's docstring).
        *sets(
            "crds.enabled=false",
            f"watchNamespaces={{{ns_a}}}",
            "webhook.enabled=false",
        ),
    )
    name = fullname(release)
    assert rules_of(cluster, "role", name, ns_a) == rbac.namespaced_rules()
    for kind in ("clusterrole", "clusterrolebinding"):
        assert "NotFound" in cluster.kubectl("get", kind, name, check=False)
    assert "NotFound" in cluster.kubectl("get", "role", name, "-n", ns_b, check=False)

    account = f"system:serviceaccount:{namespace}:{name}"
    assert can_i(cluster, account, "get", "secrets", "-n", ns_a) == "yes"
    assert can_i(cluster, account, "get", "secrets", "-n", ns_b) == "no"
    assert can_i(cluster, account, "list", "databases.databases.example.com", "-A") == "no"
    assert can_i(cluster, account, "list", "customresourcedefinitions") == "no"
    assert can_i(cluster, account, "list", "secrets", "-n", ns_a) == "yes"
    assert can_i(cluster, account, "list", "secrets", "-n", ns_b) == "no"
    assert can_i(cluster, account, "update", f"leases/{name}", "-n", namespace) == "yes"
    assert can_i(cluster, account, "update", f"leases/{name}", "-n", ns_a) == "no"

    cluster.create_db(ns_b, "other", {"engine": "redis"})
    kubeconfig = service_account_kubeconfig(cluster, namespace, name, tmp_path / "sa.kubeconfig")
    operator = start_as_deployed(cluster, namespace, release, kubeconfig, tmp_path / "op.log")
    try:
        reconciles_to_active(cluster, ns_a, "db")
        assert lease_holder(cluster, namespace, name) == LOCAL_POD
    finally:
        assert operator.stop() == 0, operator.log_text()[-3000:]
    assert denied_lines(operator) == []
    assert f"--namespace={ns_a}" in container(cluster, namespace, name).args
    other = cluster.get_db(ns_b, "other")
    assert "status" not in other
    assert not other["metadata"].get("finalizers")


def test_chart_pods_pass_the_restricted_pod_security_standard(
    cluster: Cluster, helm: Helm, namespace: str
) -> None:
    """The API server's PodSecurity admission, enforcing "restricted" in the namespace, admits
    the operator's pod (from the Deployment's template) and the `helm test` pod."""
    cluster.kubectl(
        "label", "namespace", namespace, "pod-security.kubernetes.io/enforce=restricted"
    )
    rendered = helm.chart("template", CHART_NAME, namespace).stdout
    objects = [obj for obj in yaml.safe_load_all(rendered) if obj]
    deployment = next(obj for obj in objects if obj["kind"] == "Deployment")
    operator_pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "operator", "namespace": namespace},
        "spec": deployment["spec"]["template"]["spec"],
    }
    test_pod = next(obj for obj in objects if obj["kind"] == "Pod")
    for pod in (operator_pod, test_pod):
        out = cluster.kubectl(
            "create", "--dry-run=server", "-o", "name", "-f", "-", input=json.dumps(pod)
        )
        assert out.strip() == f"pod/{pod['metadata']['name']}"
    # The control: a pod the standard forbids is refused there.
    privileged = {**operator_pod, "spec": {**operator_pod["spec"], "securityContext": {}}}
    refused = cluster.kubectl(
        "create", "--dry-run=server", "-f", "-", input=json.dumps(privileged), check=False
    )
    assert 'violates PodSecurity "restricted' in refused, refused


# --- kustomize ----------------------------------------------------------------------------------


def test_kustomize_default_applies_on_the_server(cluster: Cluster) -> None:
    """`kubectl apply -k config/default`, dry-run on the server (admission, schemas, RBAC
    escalation checks included). Its namespace must exist for a dry run of what goes in it."""
    cluster.kubectl("create", "namespace", "database-operator-system", check=False)
    out = cluster.kubectl("apply", "-k", str(ROOT / "config" / "default"), "--dry-run=server")
    for obj in (
        "customresourcedefinition.apiextensions.k8s.io/databases.databases.example.com",
        "serviceaccount/database-operator",
        "clusterrole.rbac.authorization.k8s.io/database-operator",
        "clusterrolebinding.rbac.authorization.k8s.io/database-operator",
        "deployment.apps/database-operator",
        "service/database-operator-webhook",
        "role.rbac.authorization.k8s.io/database-operator-webhook",
        "role.rbac.authorization.k8s.io/database-operator-leader-election",
        "rolebinding.rbac.authorization.k8s.io/database-operator-leader-election",
        "clusterrole.rbac.authorization.k8s.io/database-operator-webhook",
        "validatingwebhookconfiguration.admissionregistration.k8s.io/database-operator",
        "mutatingwebhookconfiguration.admissionregistration.k8s.io/database-operator",
    ):
        assert obj in out, out
    assert "kopf.dev" not in out
