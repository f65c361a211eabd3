"""The Helm chart and the kustomize install, offline: lint, render, schema, RBAC from rbac.py,
CRDs from config/crd/bases, the restricted security context, and both installs agreeing.

Needs bin/helm and bin/kubectl (`make tools`); a missing one fails the tests rather than
skipping them, so packaging is never silently untested.
"""

from __future__ import annotations

import json
import re
import tarfile
from pathlib import Path
from typing import Any

import pytest
import yaml

from database_operator import rbac
from database_operator.webhooks import configuration as webhooks
from tests.unit.chart import (
    CHART,
    RELEASE,
    ROOT,
    STANDARD_LABELS,
    Helm,
    Manifest,
    Render,
    kinds,
    kustomize,
    only,
    sets,
)

CRD_BASES = ROOT / "config" / "crd" / "bases"
ENV_VALUES = ["values-dev.yaml", "values-staging.yaml", "values-prod.yaml"]
#: The release's objects' names (the release name contains the chart's: no prefix).
FULLNAME = RELEASE
WEBHOOK = f"{FULLNAME}-webhook"
#: The Role (and RoleBinding) on the Lease, in the operator's namespace.
LEADER_ELECTION = f"{FULLNAME}-leader-election"
#: The ClusterRoles aggregated into Kubernetes' admin, edit and view roles, by role.
AGGREGATED = {f"{FULLNAME}-{role}": role for role in ("admin", "edit", "view")}
CERT_MANAGER_API = "cert-manager.io/v1"
SERVICE_MONITOR_API = "monitoring.coreos.com/v1/ServiceMonitor"
PROMETHEUS_RULE_API = "monitoring.coreos.com/v1/PrometheusRule"


def container(objects: list[Manifest]) -> Manifest:
    containers = only(objects, "Deployment")["spec"]["template"]["spec"]["containers"]
    assert len(containers) == 1
    return containers[0]  # type: ignore[no-any-return]


def crd_bases() -> dict[str, Manifest]:
    """The committed CRDs of config/crd/bases, by name."""
    crds = {}
    for path in sorted(CRD_BASES.glob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text()):
            if doc and doc["kind"] == "CustomResourceDefinition":
                crds[doc["metadata"]["name"]] = doc
    return crds


# --- lint and render ----------------------------------------------------------------------------


@pytest.mark.parametrize("values", [None, *ENV_VALUES])
def test_chart_lints_strictly(helm: Helm, values: str | None) -> None:
    extra = ["--values", str(CHART / values)] if values else []
    done = helm("lint", "--strict", str(CHART), *extra)
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.parametrize("values", [None, *ENV_VALUES])
def test_chart_renders_every_values_file(render: Render, values: str | None) -> None:
    extra = ["--values", str(CHART / values)] if values else []
    objects = render(*extra, "--api-versions", SERVICE_MONITOR_API)
    for kind in ("ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Deployment"):
        only(objects, kind, FULLNAME)
    only(objects, "Service", f"{FULLNAME}-metrics")
    only(objects, "Service", WEBHOOK)
    only(objects, "ValidatingWebhookConfiguration", FULLNAME)
    only(objects, "MutatingWebhookConfiguration", FULLNAME)
    for obj in objects:
        assert set(obj["metadata"]["labels"]) >= STANDARD_LABELS, obj["metadata"]["name"]


def test_prod_values_run_two_replicas_electing_a_leader_with_a_budget(render: Render) -> None:
    objects = render("--values", str(CHART / "values-prod.yaml"))
    deployment = only(objects, "Deployment")
    assert deployment["spec"]["replicas"] == 2
    assert deployment["spec"]["strategy"]["type"] == "RollingUpdate"
    assert "--leader-election" in container(objects)["args"]
    assert "--log-format=json" in container(objects)["args"]
    assert only(objects, "PodDisruptionBudget")["spec"]["minAvailable"] == 1


def test_dev_values_run_one_replica_with_debug_logs(render: Render) -> None:
    objects = render("--values", str(CHART / "values-dev.yaml"))
    assert only(objects, "Deployment")["spec"]["replicas"] == 1
    args = container(objects)["args"]
    assert {"--log-level=DEBUG", "--log-format=json", "--leader-election"} <= set(args)
    assert "PodDisruptionBudget" not in kinds(objects)


# --- Chart.yaml: Artifact Hub ------------------------------------------------------------------


def chart_yaml() -> Manifest:
    return yaml.safe_load((CHART / "Chart.yaml").read_text())  # type: ignore[no-any-return]


def annotation(name: str) -> Any:
    """The Artifact Hub annotation ``artifacthub.io/<name>``: a string, parsed as YAML."""
    value = chart_yaml()["annotations"][f"artifacthub.io/{name}"]
    assert isinstance(value, str), f"{name}: Artifact Hub annotations are strings"
    return yaml.safe_load(value)


def test_artifact_hub_crds_are_the_served_storage_version_of_the_committed_crd() -> None:
    crd = crd_bases()["databases.databases.example.com"]
    storage = next(version for version in crd["spec"]["versions"] if version["storage"])
    (listed,) = annotation("crds")
    assert listed["kind"] == crd["spec"]["names"]["kind"]
    assert listed["name"] == crd["spec"]["names"]["plural"]
    assert listed["version"] == storage["name"]
    assert listed["displayName"] and listed["description"]


def test_artifact_hub_crd_examples_are_config_samples() -> None:
    samples = ROOT / "config" / "samples"
    listed = yaml.safe_load((samples / "kustomization.yaml").read_text())["resources"]
    assert annotation("crdsExamples") == [
        yaml.safe_load((samples / name).read_text()) for name in listed
    ]


def test_artifact_hub_operator_links_and_icon() -> None:
    chart = chart_yaml()
    assert annotation("operator") is True
    assert annotation("license") == "Apache-2.0"
    assert annotation("operatorCapabilities") in {
        "Basic Install",
        "Seamless Upgrades",
        "Full Lifecycle",
        "Deep Insights",
        "Auto Pilot",
    }
    links = {link["name"]: link["url"] for link in annotation("links")}
    assert set(links) == {"source", "docs"}
    assert all(url.startswith(chart["home"]) for url in links.values())
    # The icon is the committed SVG, served from the repository's main branch.
    repository = chart["home"].removeprefix("https://github.com/")
    path = (CHART / "icon.svg").relative_to(ROOT)
    assert chart["icon"] == f"https://raw.githubusercontent.com/{repository}/main/{path}"
    assert (CHART / "icon.svg").read_text().startswith('<svg xmlns="http://www.w3.org/2000/svg"')


def test_chart_package_has_the_readme_and_leaves_the_icon_out(helm: Helm, tmp_path: Path) -> None:
    done = helm("package", str(CHART), "--destination", str(tmp_path))
    assert done.returncode == 0, done.stderr
    (package,) = tmp_path.glob("*.tgz")
    with tarfile.open(package) as archive:
        names = {name.split("/", 1)[1] for name in archive.getnames()}
    assert "icon.svg" not in names
    assert {"Chart.yaml", "values.yaml", "values.schema.json", "README.md"} <= names


# --- RBAC: only rbac.py's rules -----------------------------------------------------------------


def test_watching_all_namespaces_binds_a_cluster_role_with_rbac_py_rules(render: Render) -> None:
    objects = render()
    role = only(objects, "ClusterRole", FULLNAME)
    assert role["rules"] == rbac.cluster_role_rules()
    binding = only(objects, "ClusterRoleBinding", FULLNAME)
    assert binding["roleRef"] == {
        "apiGroup": "rbac.authorization.k8s.io",
        "kind": "ClusterRole",
        "name": role["metadata"]["name"],
    }
    account = only(objects, "ServiceAccount")
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": account["metadata"]["name"], "namespace": "ops"}
    ]
    # The only Roles, in the operator's namespace: the webhooks' Secret and the Lease.
    assert {
        (obj["metadata"]["name"], obj["metadata"]["namespace"])
        for obj in objects
        if obj["kind"] == "Role"
    } == {(WEBHOOK, "ops"), (LEADER_ELECTION, "ops")}


def test_watching_named_namespaces_binds_a_role_in_each_and_nothing_cluster_wide(
    render: Render,
) -> None:
    objects = render("--set", "watchNamespaces={a,b}")
    roles = {
        obj["metadata"]["namespace"]: obj
        for obj in objects
        if obj["kind"] == "Role" and obj["metadata"]["name"] == FULLNAME
    }
    bindings = {
        obj["metadata"]["namespace"]: obj
        for obj in objects
        if obj["kind"] == "RoleBinding" and obj["metadata"]["name"] == FULLNAME
    }
    assert set(roles) == set(bindings) == {"a", "b"}
    account = only(objects, "ServiceAccount")["metadata"]["name"]
    for namespace, role in roles.items():
        assert role["rules"] == rbac.namespaced_rules()
        assert bindings[namespace]["roleRef"]["name"] == role["metadata"]["name"]
        assert bindings[namespace]["subjects"] == [
            {"kind": "ServiceAccount", "name": account, "namespace": "ops"}
        ]
    # Cluster-wide, only the webhooks' small ClusterRole: get these namespaces (quota
    # annotations), the release's webhook configurations and the CRD by name. (The aggregated
    # ClusterRoles are users', bound to no one by the chart.)
    cluster_role = only(
        [obj for obj in objects if obj["metadata"]["name"] not in AGGREGATED], "ClusterRole"
    )
    assert cluster_role["metadata"]["name"] == WEBHOOK
    assert cluster_role["rules"] == rbac.webhook_cluster_rules(FULLNAME, ["a", "b"])
    assert only(objects, "ClusterRoleBinding")["roleRef"]["name"] == WEBHOOK
    args = container(objects)["args"]
    assert [arg for arg in args if arg.startswith(("--namespace", "--all-namespaces"))] == [
        "--namespace=a",
        "--namespace=b",
    ]


def test_rbac_rules_come_from_the_generated_file_only() -> None:
    rules = yaml.safe_load((CHART / "files" / "rbac-rules.yaml").read_text())
    assert rules == rbac.rules_file()
    for template in (CHART / "templates").glob("*.yaml"):
        text = template.read_text()
        assert "verbs:" not in text and "apiGroups:" not in text, template.name


def test_rbac_and_service_account_are_created_separately(render: Render) -> None:
    no_rbac = render("--set", "rbac.create=false")
    assert not {"ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding"} & set(kinds(no_rbac))
    assert "ServiceAccount" in kinds(no_rbac)

    byo = render("--set", "serviceAccount.create=false", "--set", "serviceAccount.name=mine")
    assert "ServiceAccount" not in kinds(byo)
    for binding in (only(byo, "ClusterRoleBinding", FULLNAME), only(byo, "RoleBinding", WEBHOOK)):
        assert binding["subjects"][0]["name"] == "mine"
    pod = only(byo, "Deployment")["spec"]["template"]["spec"]
    assert pod["serviceAccountName"] == "mine"


def test_databases_join_the_built_in_admin_edit_and_view_roles_by_default(
    render: Render,
) -> None:
    objects = render()
    for name, role in AGGREGATED.items():
        cluster_role = only(objects, "ClusterRole", name)
        assert cluster_role["metadata"]["labels"][rbac.AGGREGATE_LABEL.format(role=role)] == "true"
        assert cluster_role["rules"] == rbac.AGGREGATE_RULES[role]
    # Bound to no one: Kubernetes' aggregation puts them into admin, edit and view.
    bound = {obj["roleRef"]["name"] for obj in objects if obj["kind"].endswith("Binding")}
    assert not bound & set(AGGREGATED)
    # Only view may read status, and nobody may write it but the operator.
    for rule in rbac.AGGREGATE_RULES["admin"] + rbac.AGGREGATE_RULES["view"]:
        assert "*" not in rule["verbs"] + rule["resources"]
        if "databases/status" in rule["resources"]:
            assert set(rule["verbs"]) == {"get", "list", "watch"}


@pytest.mark.parametrize("setting", ["rbac.aggregateToDefaultRoles=false", "rbac.create=false"])
def test_aggregated_roles_are_left_out_on_request(render: Render, setting: str) -> None:
    names = {obj["metadata"]["name"] for obj in render("--set", setting)}
    assert not names & set(AGGREGATED)


# --- CRDs ---------------------------------------------------------------------------------------


def test_crds_are_the_committed_ones_and_survive_uninstall(render: Render) -> None:
    rendered = {
        obj["metadata"]["name"]: obj
        for obj in render()
        if obj["kind"] == "CustomResourceDefinition"
    }
    committed = crd_bases()
    assert set(rendered) == set(committed)
    # The one difference: the conversion webhook is the release's Service, in its namespace.
    conversion = rendered["databases.databases.example.com"]["spec"]["conversion"]
    service = conversion["webhook"]["clientConfig"]["service"]
    assert (service["namespace"], service["name"]) == ("ops", WEBHOOK)
    service["namespace"] = webhooks.DEFAULT_NAMESPACE
    for name, crd in rendered.items():
        assert crd["spec"] == committed[name]["spec"], name
        assert crd["metadata"]["annotations"]["helm.sh/resource-policy"] == "keep"
        assert committed[name]["metadata"].get("labels", {}).items() <= (
            crd["metadata"]["labels"].items()
        )


def test_crds_enabled_false_renders_none(render: Render) -> None:
    assert "CustomResourceDefinition" not in kinds(render("--set", "crds.enabled=false"))


# --- values.schema.json -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("setting", "field"),
    [
        ("logLevel=LOUD", "/logLevel"),
        ("logFormat=xml", "/logFormat"),
        ("replicas=0", "/replicas"),
        ("metrics.port=70000", "/metrics/port"),
        ("health.port=0", "/health/port"),
        ("watchNamespaces={Not_A_Namespace}", "/watchNamespaces/0"),
        ("resyncInterval=0", "/resyncInterval"),
        ("workers=0", "/workers"),
        ("retryMaxDelay=0", "/retryMaxDelay"),
        ("leaderElection.enabled=maybe", "/leaderElection/enabled"),
        ("leaderElection.leaseName=Not_A_Name", "/leaderElection/leaseName"),
        ("leaderElection.leaseDuration=0.5", "/leaderElection/leaseDuration"),
        ("leaderElection.retryPeriod=0", "/leaderElection/retryPeriod"),
        ("podDisruptionBudget.minAvailable=most", "/podDisruptionBudget/minAvailable"),
        ("webhook.port=0", "/webhook/port"),
        ("webhook.enabled=maybe", "/webhook/enabled"),
        ("webhook.imageRegistries={a b}", "/webhook/imageRegistries/0"),
        ("webhook.certManager.issuerRef.kind=Issuer", "/webhook/certManager/issuerRef"),
        ("tracing.protocol=http/json", "/tracing/protocol"),
        ("tracing.endpoint=jaeger:4318", "/tracing/endpoint"),
        ("networkPolicy.enabled=maybe", "/networkPolicy/enabled"),
        ("networkPolicy.egress[0].ports[0].protocol=ICMP", "/networkPolicy/egress/0/ports/0"),
        ("networkPolicy.metricsFrom[0].podSelektor=x", "/networkPolicy/metricsFrom/0"),
        ("metrics.prometheusRule.enabled=maybe", "/metrics/prometheusRule/enabled"),
        ("logLevl=DEBUG", "logLevl"),
    ],
)
def test_schema_rejects_bad_values_naming_the_field(helm: Helm, setting: str, field: str) -> None:
    done = helm("template", RELEASE, str(CHART), "--set", setting)
    assert done.returncode != 0
    assert "values don't meet the specifications of the schema" in done.stderr
    assert field in done.stderr, done.stderr


def test_same_metrics_and_health_port_is_refused(helm: Helm) -> None:
    done = helm("template", RELEASE, str(CHART), "--set", "health.port=8080")
    assert done.returncode != 0
    assert "metrics.port and health.port must differ" in done.stderr


def leaf_paths(schema: Manifest, prefix: str = "") -> list[str]:
    """Dotted paths of the values the chart defines: schema properties, not free-form maps."""
    paths = []
    for name, child in schema.get("properties", {}).items():
        path = f"{prefix}{name}"
        if child.get("additionalProperties") is False and "properties" in child:
            paths += leaf_paths(child, f"{path}.")
        else:
            paths.append(path)
    return paths


def test_values_yaml_and_schema_agree_and_every_key_is_documented() -> None:
    schema = json.loads((CHART / "values.schema.json").read_text())
    assert schema["$schema"] == "http://json-schema.org/draft-07/schema#"
    assert schema["additionalProperties"] is False
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    text = (CHART / "values.yaml").read_text()
    for path in leaf_paths(schema):
        if path == "global":  # Helm's own, for subcharts
            continue
        node: Any = values
        for part in path.split("."):
            assert part in node, f"{path} is in values.schema.json but not in values.yaml"
            node = node[part]
        assert re.search(rf"^\s*# {re.escape(path)}\b", text, re.MULTILINE), (
            f"values.yaml: no comment starting with {path!r}"
        )


# --- the Deployment -----------------------------------------------------------------------------


def test_pods_meet_the_restricted_pod_security_standard(render: Render) -> None:
    objects = render()
    pod = only(objects, "Deployment")["spec"]["template"]["spec"]
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["runAsUser"] == pod["securityContext"]["runAsGroup"] == 65532
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    context = container(objects)["securityContext"]
    assert context["readOnlyRootFilesystem"] is True
    assert context["allowPrivilegeEscalation"] is False
    assert context["capabilities"] == {"drop": ["ALL"]}
    assert pod["automountServiceAccountToken"] is True
    assert "hostNetwork" not in pod and "hostPID" not in pod


def test_deployment_runs_the_operator_with_the_values_as_flags(render: Render) -> None:
    objects = render(
        *sets(
            "logLevel=WARNING",
            "logFormat=console",
            "metrics.port=9090",
            "health.port=9091",
            "resyncInterval=30",
            "retryMaxDelay=20",
            "workers=4",
            "leaderElection.leaseName=ha",
            "leaderElection.leaseDuration=30",
            "leaderElection.renewDeadline=20",
            "leaderElection.retryPeriod=4",
        )
    )
    main = container(objects)
    assert main["image"] == "ghcr.io/example/database-operator:0.1.0"
    assert main["args"] == [
        "run",
        "--all-namespaces",
        "--log-level=WARNING",
        "--log-format=console",
        "--metrics-port=9090",
        "--health-port=9091",
        "--resync-interval=30",
        "--retry-max-delay=20",
        "--workers=4",
        "--job-start-deadline=300",
        "--job-run-deadline=86400",
        "--leader-election",
        "--lease-name=ha",
        "--lease-duration=30",
        "--renew-deadline=20",
        "--retry-period=4",
        "--webhook-port=9443",
        f"--webhook-configuration={FULLNAME}",
        f"--webhook-service=ops/{WEBHOOK}",
        f"--webhook-secret={WEBHOOK}-cert",
    ]
    assert {port["name"]: port["containerPort"] for port in main["ports"]} == {
        "metrics": 9090,
        "health": 9091,
        "webhook": 9443,
    }
    assert main["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "health"}
    assert main["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "health"}
    service = only(objects, "Service", f"{FULLNAME}-metrics")
    assert service["spec"]["ports"][0]["targetPort"] == "metrics"


@pytest.mark.parametrize(
    ("values", "flag"),
    [
        pytest.param([], None, id="no-pull-secrets"),
        pytest.param(
            ["imagePullSecrets[0].name=ghcr", "imagePullSecrets[1].name=mirror"],
            "--agent-image-pull-secrets=ghcr,mirror",
            id="the-operators-own",
        ),
        pytest.param(
            ["imagePullSecrets[0].name=ghcr", "jobs.imagePullSecrets={team-pull}"],
            "--agent-image-pull-secrets=team-pull",
            id="the-jobs-own",
        ),
    ],
)
def test_the_jobs_pull_with_the_operators_pull_secrets_unless_given_theirs(
    render: Render, values: list[str], flag: str | None
) -> None:
    args = container(render(*sets(*values)))["args"]
    given = [arg for arg in args if arg.startswith("--agent-image-pull-secrets")]
    assert given == ([flag] if flag else [])


def test_the_jobs_deadlines_are_values(render: Render) -> None:
    args = container(render(*sets("jobs.startDeadline=60", "jobs.runDeadline=7200")))["args"]
    assert {"--job-start-deadline=60", "--job-run-deadline=7200"} <= set(args)


def test_pod_name_and_namespace_reach_the_operator_from_the_downward_api(render: Render) -> None:
    env = {
        var["name"]: var
        for var in container(render("--set", "extraEnv.HTTPS_PROXY=http://proxy:3128"))["env"]
    }
    # The Lease's namespace (the operator's own) and its holder's name.
    assert env["POD_NAMESPACE"]["valueFrom"] == {"fieldRef": {"fieldPath": "metadata.namespace"}}
    assert env["POD_NAME"]["valueFrom"] == {"fieldRef": {"fieldPath": "metadata.name"}}
    assert env["HTTPS_PROXY"]["value"] == "http://proxy:3128"


def test_pod_labels_and_annotations_are_added_but_never_break_the_selector(
    render: Render,
) -> None:
    deployment = only(
        render(
            *sets(
                "podLabels.team=databases",
                "podLabels.app\\.kubernetes\\.io/name=other",
                "podAnnotations.example\\.com/scrape=yes",
            )
        ),
        "Deployment",
    )
    template = deployment["spec"]["template"]["metadata"]
    assert template["labels"]["team"] == "databases"
    assert template["labels"].items() >= deployment["spec"]["selector"]["matchLabels"].items()
    assert template["annotations"] == {"example.com/scrape": "yes"}


def test_leader_election_rolls_updates_over_and_without_it_one_replica_is_recreated(
    render: Render,
) -> None:
    rolling = {
        "type": "RollingUpdate",
        "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0},
    }
    one = render()
    assert only(one, "Deployment")["spec"]["strategy"] == rolling
    assert "--leader-election" in container(one)["args"]

    alone = render("--set", "leaderElection.enabled=false")
    assert only(alone, "Deployment")["spec"]["strategy"] == {"type": "Recreate"}
    args = container(alone)["args"]
    assert "--no-leader-election" in args
    assert not [arg for arg in args if arg.startswith(("--lease", "--renew", "--retry-period"))]

    # More than one replica: leader election whatever leaderElection.enabled says.
    three = render(*sets("replicas=3", "leaderElection.enabled=false"))
    assert only(three, "Deployment")["spec"]["replicas"] == 3
    assert only(three, "Deployment")["spec"]["strategy"] == rolling
    assert "--leader-election" in container(three)["args"]
    assert f"--lease-name={FULLNAME}" in container(three)["args"]


@pytest.mark.parametrize(
    "timings",
    [
        ("leaseDuration=10", "renewDeadline=10"),
        ("renewDeadline=5", "retryPeriod=5"),
        ("leaseDuration=5", "renewDeadline=10"),
    ],
)
def test_lease_timings_out_of_order_are_refused(helm: Helm, timings: tuple[str, str]) -> None:
    done = helm("template", RELEASE, str(CHART), *sets(*(f"leaderElection.{t}" for t in timings)))
    assert done.returncode != 0
    assert "leaseDuration" in done.stderr and "must be longer than renewDeadline" in done.stderr
    # Without leader election the timings are not used, and not checked.
    alone = helm(
        "template",
        RELEASE,
        str(CHART),
        *sets("leaderElection.enabled=false", *(f"leaderElection.{t}" for t in timings)),
    )
    assert alone.returncode == 0, alone.stderr


def test_service_monitor_and_budget_are_opt_in(render: Render) -> None:
    defaults = kinds(render("--api-versions", SERVICE_MONITOR_API))
    assert "ServiceMonitor" not in defaults
    assert "PodDisruptionBudget" not in defaults

    objects = render(
        *sets("metrics.serviceMonitor.enabled=true", "podDisruptionBudget.enabled=true"),
        "--api-versions",
        SERVICE_MONITOR_API,
    )
    monitor = only(objects, "ServiceMonitor")
    service = only(objects, "Service", f"{FULLNAME}-metrics")
    assert monitor["spec"]["selector"]["matchLabels"].items() <= (
        service["metadata"]["labels"].items()
    )
    assert monitor["spec"]["endpoints"][0]["port"] == service["spec"]["ports"][0]["name"]
    # The backup gauges' own `namespace` (the Database's) must not become exported_namespace.
    assert monitor["spec"]["endpoints"][0]["honorLabels"] is True
    pods = only(objects, "Deployment")["spec"]["selector"]["matchLabels"]
    assert only(objects, "PodDisruptionBudget")["spec"]["selector"]["matchLabels"] == pods
    assert service["spec"]["selector"] == pods


def test_service_monitor_is_skipped_without_the_prometheus_operator(helm: Helm) -> None:
    done = helm("template", RELEASE, str(CHART), "--set", "metrics.serviceMonitor.enabled=true")
    assert done.returncode == 0, done.stderr
    assert "kind: ServiceMonitor" not in done.stdout


def test_prometheus_rule_is_opt_in(render: Render) -> None:
    assert "PrometheusRule" not in kinds(render("--api-versions", PROMETHEUS_RULE_API))


def test_prometheus_rule_has_the_generated_alerts_and_the_labels_given(render: Render) -> None:
    objects = render(
        *sets("metrics.prometheusRule.enabled=true", "metrics.prometheusRule.labels.release=kps"),
        "--api-versions",
        PROMETHEUS_RULE_API,
    )
    rule = only(objects, "PrometheusRule")
    assert rule["apiVersion"] == "monitoring.coreos.com/v1"
    assert rule["metadata"]["name"] == FULLNAME
    assert rule["metadata"]["namespace"] == "ops"
    assert rule["metadata"]["labels"]["release"] == "kps"
    assert rule["metadata"]["labels"].keys() >= STANDARD_LABELS
    assert rule["spec"] == yaml.safe_load((CHART / "files" / "prometheus-rules.yaml").read_text())


def test_prometheus_rule_is_skipped_without_the_prometheus_operator(helm: Helm) -> None:
    done = helm("template", RELEASE, str(CHART), "--set", "metrics.prometheusRule.enabled=true")
    assert done.returncode == 0, done.stderr
    assert "kind: PrometheusRule" not in done.stdout


def test_helm_test_pod_checks_the_metrics_endpoint(render: Render) -> None:
    hooks = [
        obj
        for obj in render()
        if obj["metadata"].get("annotations", {}).get("helm.sh/hook") == "test"
    ]
    assert len(hooks) == 1
    pod = hooks[0]["spec"]
    check = pod["containers"][0]
    image_tag = check["image"].rsplit(":", 1)[1]
    assert re.fullmatch(r"\d+\.\d+\.\d+", image_tag), check["image"]
    script = " ".join(check["command"])
    assert "http://database-operator-metrics.ops.svc:8080/metrics" in script
    assert "grep database_operator_build_info" in script
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    assert check["securityContext"]["capabilities"] == {"drop": ["ALL"]}
    assert check["securityContext"]["allowPrivilegeEscalation"] is False


# --- kustomize (config/default) installs the same operator --------------------------------------


@pytest.fixture(scope="module")
def kustomized() -> list[Manifest]:
    return kustomize("default")


def test_kustomize_has_the_same_rbac_as_the_chart(
    kustomized: list[Manifest], render: Render
) -> None:
    chart = render("--namespace", webhooks.DEFAULT_NAMESPACE)
    for kind in ("ClusterRole", "Role"):
        for name in (FULLNAME, WEBHOOK, LEADER_ELECTION, *AGGREGATED):
            if kind == "Role" and name not in (WEBHOOK, LEADER_ELECTION):
                continue  # watching all namespaces: no Role of the reconciles
            if kind == "ClusterRole" and name == LEADER_ELECTION:
                continue  # the Lease: a Role in the operator's namespace only
            assert only(kustomized, kind, name)["rules"] == only(chart, kind, name)["rules"]
    lease_binding = only(kustomized, "RoleBinding", LEADER_ELECTION)
    assert lease_binding["roleRef"]["name"] == LEADER_ELECTION
    assert lease_binding["metadata"]["namespace"] == "database-operator-system"
    binding = only(kustomized, "ClusterRoleBinding", FULLNAME)
    account = only(kustomized, "ServiceAccount")["metadata"]
    assert binding["roleRef"]["name"] == FULLNAME
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": account["name"], "namespace": account["namespace"]}
    ]
    deployment = only(kustomized, "Deployment")
    assert deployment["spec"]["template"]["spec"]["serviceAccountName"] == account["name"]
    assert deployment["metadata"]["namespace"] == account["namespace"]
    assert account["namespace"] == "database-operator-system"


def test_kustomize_runs_the_same_container_as_the_chart_defaults(
    kustomized: list[Manifest], render: Render
) -> None:
    chart = render("--namespace", webhooks.DEFAULT_NAMESPACE)
    assert container(kustomized) == container(chart)
    ours, theirs = (only(objs, "Deployment")["spec"] for objs in (kustomized, chart))
    assert ours["replicas"] == theirs["replicas"]
    assert ours["strategy"] == theirs["strategy"]
    for key in ("securityContext", "automountServiceAccountToken", "volumes"):
        assert ours["template"]["spec"][key] == theirs["template"]["spec"][key], key


def test_kustomize_installs_the_same_crds(kustomized: list[Manifest]) -> None:
    crds = {o["metadata"]["name"]: o for o in kustomized if o["kind"] == "CustomResourceDefinition"}
    assert crds == crd_bases()


def test_kustomize_leaves_monitoring_out_by_default(kustomized: list[Manifest]) -> None:
    assert "ServiceMonitor" not in kinds(kustomized)
    monitoring = kustomize("prometheus")
    monitor, service = only(monitoring, "ServiceMonitor"), only(monitoring, "Service")
    assert service["metadata"]["name"] == f"{FULLNAME}-metrics"
    assert monitor["spec"]["selector"]["matchLabels"].items() <= (
        service["metadata"]["labels"].items()
    )
    assert monitor["spec"]["endpoints"][0]["honorLabels"] is True
    pods = only(kustomized, "Deployment")["spec"]["selector"]["matchLabels"]
    assert service["spec"]["selector"] == pods


def test_kustomize_prometheus_rule_is_the_charts(render: Render) -> None:
    rule = only(kustomize("prometheus"), "PrometheusRule")
    chart = render(
        "--namespace",
        webhooks.DEFAULT_NAMESPACE,
        *sets("metrics.prometheusRule.enabled=true"),
        "--api-versions",
        PROMETHEUS_RULE_API,
    )
    assert rule["metadata"]["namespace"] == webhooks.DEFAULT_NAMESPACE
    assert rule["spec"] == only(chart, "PrometheusRule")["spec"]


def lease_roles(objects: list[Manifest]) -> list[Manifest]:
    return [
        obj
        for obj in objects
        if obj["kind"] in ("Role", "ClusterRole")
        and any("coordination.k8s.io" in rule["apiGroups"] for rule in obj["rules"])
    ]


def test_the_lease_role_is_granted_only_with_leader_election_narrowed_to_its_name(
    render: Render,
) -> None:
    for objects, lease in (
        (render(), FULLNAME),
        (render(*sets("leaderElection.leaseName=ha", "watchNamespaces={a}")), "ha"),
        (render(*sets("replicas=2", "leaderElection.enabled=false")), FULLNAME),
    ):
        role = only(lease_roles(objects), "Role", LEADER_ELECTION)
        # In the operator's own namespace (never a watched one), with rbac.py's rules.
        assert role["metadata"]["namespace"] == "ops"
        assert role["rules"] == rbac.lease_rules(lease)
        binding = only(objects, "RoleBinding", LEADER_ELECTION)
        assert binding["metadata"]["namespace"] == "ops"
        assert binding["roleRef"] == {
            "apiGroup": "rbac.authorization.k8s.io",
            "kind": "Role",
            "name": LEADER_ELECTION,
        }
        assert binding["subjects"] == [
            {"kind": "ServiceAccount", "name": FULLNAME, "namespace": "ops"}
        ]
        # The operator's own ClusterRole or Roles hold nothing of it.
        for obj in objects:
            if obj["metadata"]["name"] == FULLNAME and obj["kind"] in ("Role", "ClusterRole"):
                assert not [r for r in obj["rules"] if "coordination.k8s.io" in r["apiGroups"]]
    for objects in (
        render("--set", "leaderElection.enabled=false"),
        render(*sets("leaderElection.enabled=false", "watchNamespaces={a}")),
    ):
        assert lease_roles(objects) == []
        assert not [obj for obj in objects if obj["metadata"]["name"] == LEADER_ELECTION]


def test_shards_run_one_deployment_each_with_its_own_selector_and_lease(
    render: Render,
) -> None:
    objects = render(*sets("shards={east,west}", "replicas=2"))
    deployments = [obj for obj in objects if obj["kind"] == "Deployment"]
    assert [d["metadata"]["name"] for d in deployments] == [
        "database-operator-east",
        "database-operator-west",
    ]
    for deployment, shard in zip(deployments, ("east", "west"), strict=True):
        selector = deployment["spec"]["selector"]["matchLabels"]
        assert selector["databases.example.com/operator-shard"] == shard
        assert deployment["spec"]["template"]["metadata"]["labels"].items() >= selector.items()
        args = deployment["spec"]["template"]["spec"]["containers"][0]["args"]
        assert f"--shard={shard}" in args
        assert f"--lease-name=database-operator-{shard}" in args
        assert "--leader-election" in args
    # One Role on both Leases, each by its name.
    role = only(lease_roles(objects), "Role", LEADER_ELECTION)
    assert role["rules"][0]["resourceNames"] == ["database-operator-east", "database-operator-west"]
    assert role["rules"] == [
        {**rbac.lease_rules()[0], "resourceNames": role["rules"][0]["resourceNames"]},
        rbac.lease_rules()[1],
    ]
    # Without shards: the one Deployment, its selector as before (selectors are immutable).
    single = only(render(), "Deployment")
    assert "databases.example.com/operator-shard" not in single["spec"]["selector"]["matchLabels"]
    assert not any(arg.startswith("--shard") for arg in container(render())["args"])


# --- webhooks -----------------------------------------------------------------------------------


def hook_configurations(objects: list[Manifest]) -> list[Manifest]:
    """The rendered webhook configurations, as configuration.py builds them (labels aside)."""
    found = [
        obj
        for obj in objects
        if obj["kind"] in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration")
    ]
    for obj in found:
        assert set(obj["metadata"].pop("labels")) >= STANDARD_LABELS
        obj["metadata"]["labels"] = {}
    return found


@pytest.mark.parametrize("watched", [[], ["b", "a"]])
def test_webhook_configurations_are_the_operators_own_with_the_release_names(
    render: Render, watched: list[str]
) -> None:
    """The same objects the operator's code describes (files/webhooks.yaml is generated from
    it), pointed at the release's Service, never selecting kube-system nor the release's
    namespace, and only the watched namespaces when named."""
    objects = render(*(sets(f"watchNamespaces={{{','.join(watched)}}}") if watched else []))
    expected = webhooks.configurations(
        FULLNAME,
        lambda path: webhooks.service_client("ops", WEBHOOK, path),
        webhooks.namespace_selector(watched, "ops"),
    )
    assert hook_configurations(objects) == expected
    service = only(objects, "Service", WEBHOOK)
    assert service["spec"]["ports"] == [
        {"name": "https", "port": 443, "targetPort": "webhook", "protocol": "TCP"}
    ]
    pods = only(objects, "Deployment")["spec"]["selector"]["matchLabels"]
    assert service["spec"]["selector"] == pods
    # Self-managed certificates: the operator writes the caBundles; the chart never does.
    assert '"caBundle":' not in json.dumps(objects)


def test_the_generated_webhook_file_is_the_kustomize_one() -> None:
    assert (CHART / "files" / "webhooks.yaml").read_text() == (
        ROOT / "config" / "webhook" / "manifests.yaml"
    ).read_text()


def test_webhooks_off_render_none_and_stop_serving_v1beta1(render: Render) -> None:
    objects = render("--set", "webhook.enabled=false")
    assert not {"MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"} & set(
        kinds(objects)
    )
    assert [obj["metadata"]["name"] for obj in objects if obj["kind"] == "Service"] == [
        f"{FULLNAME}-metrics"
    ]
    assert not [obj for obj in objects if obj["metadata"]["name"] == WEBHOOK]
    main = container(objects)
    assert not [arg for arg in main["args"] if arg.startswith("--webhook")]
    assert "webhook" not in {port["name"] for port in main["ports"]}
    crd = only(objects, "CustomResourceDefinition", "databases.databases.example.com")
    assert crd["spec"]["conversion"] == {"strategy": "None"}
    assert {v["name"]: v["served"] for v in crd["spec"]["versions"]} == {
        "v1": True,
        "v1beta1": False,
    }


def test_webhook_port_must_not_clash_with_the_other_ports(helm: Helm) -> None:
    done = helm("template", RELEASE, str(CHART), "--set", "webhook.port=8081")
    assert done.returncode != 0
    assert "webhook.port must differ from metrics.port and health.port" in done.stderr


def test_image_registries_reach_the_operator_as_one_flag(render: Render) -> None:
    args = container(
        render("--set", "webhook.imageRegistries={registry.example.com/,docker.io/library/}")
    )["args"]
    assert "--image-registries=registry.example.com/,docker.io/library/" in args
    assert not [arg for arg in container(render())["args"] if arg.startswith("--image-")]


def test_cert_manager_issues_the_certificate_and_injects_the_ca(render: Render) -> None:
    objects = render(
        "--set", "webhook.certManager.enabled=true", "--api-versions", CERT_MANAGER_API
    )
    inject = {"cert-manager.io/inject-ca-from": f"ops/{WEBHOOK}"}
    for kind in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"):
        assert only(objects, kind)["metadata"]["annotations"] == inject
    crd = only(objects, "CustomResourceDefinition", "databases.databases.example.com")
    assert crd["metadata"]["annotations"].items() >= inject.items()
    certificate = only(objects, "Certificate", WEBHOOK)["spec"]
    assert certificate["secretName"] == f"{WEBHOOK}-cert"
    assert certificate["dnsNames"] == [f"{WEBHOOK}.ops.svc", f"{WEBHOOK}.ops.svc.cluster.local"]
    issuer = only(objects, "Issuer")
    assert issuer["spec"] == {"selfSigned": {}}
    assert certificate["issuerRef"] == {"kind": "Issuer", "name": issuer["metadata"]["name"]}
    # The operator serves the mounted Secret and needs no RBAC for certificates.
    main = container(objects)
    webhook_args = [arg for arg in main["args"] if arg.startswith("--webhook")]
    assert webhook_args == [
        "--webhook-port=9443",
        f"--webhook-configuration={FULLNAME}",
        "--webhook-cert-dir=/etc/database-operator/webhook",
    ]
    mount = next(m for m in main["volumeMounts"] if m["name"] == "webhook-cert")
    assert mount == {
        "name": "webhook-cert",
        "mountPath": "/etc/database-operator/webhook",
        "readOnly": True,
    }
    volumes = only(objects, "Deployment")["spec"]["template"]["spec"]["volumes"]
    assert {"name": "webhook-cert", "secret": {"secretName": f"{WEBHOOK}-cert"}} in volumes
    assert only(objects, "ClusterRole", WEBHOOK)["rules"] == rbac.webhook_cluster_rules(
        self_managed=False
    )
    # No Secret to keep: the only Role is the Lease's.
    assert [obj["metadata"]["name"] for obj in objects if obj["kind"] == "Role"] == [
        LEADER_ELECTION
    ]

    theirs = render(
        *sets(
            "webhook.certManager.enabled=true",
            "webhook.certManager.issuerRef.kind=ClusterIssuer",
            "webhook.certManager.issuerRef.name=corporate-ca",
        ),
        "--api-versions",
        CERT_MANAGER_API,
    )
    assert "Issuer" not in kinds(theirs)
    assert only(theirs, "Certificate")["spec"]["issuerRef"] == {
        "kind": "ClusterIssuer",
        "name": "corporate-ca",
    }


def test_cert_manager_without_its_api_fails_with_what_to_do(helm: Helm) -> None:
    done = helm("template", RELEASE, str(CHART), "--set", "webhook.certManager.enabled=true")
    assert done.returncode != 0
    assert "webhook.certManager.enabled needs cert-manager" in done.stderr


def test_kustomize_installs_the_same_webhooks_as_the_chart(
    kustomized: list[Manifest], render: Render
) -> None:
    chart = render("--namespace", webhooks.DEFAULT_NAMESPACE)
    assert hook_configurations(chart) == [
        {**obj, "metadata": {**obj["metadata"], "labels": {}}}
        for obj in kustomized
        if obj["kind"].endswith("WebhookConfiguration")
    ]
    ours, theirs = only(kustomized, "Service", WEBHOOK), only(chart, "Service", WEBHOOK)
    assert ours["spec"]["ports"] == theirs["spec"]["ports"]
    assert ours["spec"]["selector"].items() <= theirs["spec"]["selector"].items()
    assert (
        ours["spec"]["selector"]
        == only(kustomized, "Deployment")["spec"]["selector"]["matchLabels"]
    )


def test_kustomize_cert_manager_overlay_matches_the_chart(render: Render) -> None:
    overlay = kustomize("certmanager")
    chart = render(
        "--namespace",
        webhooks.DEFAULT_NAMESPACE,
        "--set",
        "webhook.certManager.enabled=true",
        "--api-versions",
        CERT_MANAGER_API,
    )
    assert container(overlay) == container(chart)
    for kind in ("Certificate", "Issuer"):
        assert only(overlay, kind)["spec"] == only(chart, kind)["spec"]
    for kind in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"):
        assert (
            only(overlay, kind)["metadata"]["annotations"]
            == (only(chart, kind)["metadata"]["annotations"])
        )
    crd = "databases.databases.example.com"
    annotation = "cert-manager.io/inject-ca-from"
    assert (
        only(overlay, "CustomResourceDefinition", crd)["metadata"]["annotations"][annotation]
        == only(chart, "CustomResourceDefinition", crd)["metadata"]["annotations"][annotation]
    )
    assert only(overlay, "ClusterRole", WEBHOOK)["rules"] == rbac.webhook_cluster_rules(
        self_managed=False
    )
    # The Secret's Role and binding go; the Lease's stay.
    assert {
        (obj["kind"], obj["metadata"]["name"])
        for obj in overlay
        if obj["kind"] in ("Role", "RoleBinding")
    } == {("Role", LEADER_ELECTION), ("RoleBinding", LEADER_ELECTION)}


# --- tracing ------------------------------------------------------------------------------------


def test_tracing_is_off_unless_enabled_then_the_standard_variables_configure_it(
    render: Render,
) -> None:
    off = container(render())
    assert "--tracing" not in off["args"]
    assert not [var for var in off["env"] if var["name"].startswith("OTEL_")]

    on = container(
        render(
            *sets(
                "tracing.enabled=true",
                "tracing.endpoint=http://jaeger-collector.observability:4317",
                "tracing.protocol=grpc",
                "tracing.sampler=always_on",
                "tracing.resourceAttributes.deployment\\.environment=prod",
            )
        )
    )
    assert "--tracing" in on["args"]
    env = {var["name"]: var.get("value") for var in on["env"]}
    assert env["OTEL_EXPORTER_OTLP_ENDPOINT"] == "http://jaeger-collector.observability:4317"
    assert env["OTEL_EXPORTER_OTLP_PROTOCOL"] == "grpc"
    assert env["OTEL_TRACES_SAMPLER"] == "always_on"
    assert env["OTEL_TRACES_SAMPLER_ARG"] == "0.1"
    assert env["OTEL_RESOURCE_ATTRIBUTES"] == "deployment.environment=prod,k8s.namespace.name=ops"


def test_tracing_without_an_endpoint_fails_with_what_to_set(helm: Helm) -> None:
    done = helm("template", RELEASE, str(CHART), "--set", "tracing.enabled=true")
    assert done.returncode != 0
    assert "tracing.enabled needs tracing.endpoint" in done.stderr


# --- NetworkPolicy ------------------------------------------------------------------------------


def policy_ports(policy: Manifest) -> list[int]:
    """The port of each ingress rule, in order (one port a rule)."""
    ports = []
    for rule in policy["spec"]["ingress"]:
        assert len(rule["ports"]) == 1, rule
        assert rule["ports"][0]["protocol"] == "TCP"
        ports.append(rule["ports"][0]["port"])
    return ports


def test_network_policy_is_opt_in(render: Render) -> None:
    assert "NetworkPolicy" not in kinds(render())


@pytest.mark.parametrize(
    "ports", [[], sets("metrics.port=9090", "webhook.port=9444", "health.port=9081")]
)
def test_network_policy_admits_the_deployments_metrics_and_webhook_ports(
    render: Render, ports: list[str]
) -> None:
    objects = render(*sets("networkPolicy.enabled=true"), *ports)
    policy = only(objects, "NetworkPolicy")
    container_ports = {port["name"]: port["containerPort"] for port in container(objects)["ports"]}
    assert policy_ports(policy) == [container_ports["metrics"], container_ports["webhook"]]
    # The kubelet's probes come from the node, which NetworkPolicy never blocks.
    assert container_ports["health"] not in policy_ports(policy)
    # Egress unrestricted by default: the operator must reach the API server.
    assert policy["spec"]["policyTypes"] == ["Ingress"]
    assert "egress" not in policy["spec"]
    pods = only(objects, "Deployment")["spec"]["template"]["metadata"]["labels"]
    assert policy["spec"]["podSelector"]["matchLabels"].items() <= pods.items()
    # No peers named: from anywhere.
    assert all("from" not in rule for rule in policy["spec"]["ingress"])


def test_network_policy_leaves_the_webhook_port_out_without_webhooks(render: Render) -> None:
    objects = render(*sets("networkPolicy.enabled=true", "webhook.enabled=false"))
    container_ports = {port["name"]: port["containerPort"] for port in container(objects)["ports"]}
    assert "webhook" not in container_ports
    assert policy_ports(only(objects, "NetworkPolicy")) == [container_ports["metrics"]]


def test_network_policy_admits_only_the_peers_given(render: Render) -> None:
    monitoring = {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "mon"}}}
    api_server = {"ipBlock": {"cidr": "10.0.0.0/24"}}
    objects = render(
        *sets("networkPolicy.enabled=true"),
        "--set-json",
        f"networkPolicy.metricsFrom={json.dumps([monitoring])}",
        "--set-json",
        f"networkPolicy.webhookFrom={json.dumps([api_server])}",
    )
    metrics, webhook = only(objects, "NetworkPolicy")["spec"]["ingress"]
    assert metrics["from"] == [monitoring]
    assert webhook["from"] == [api_server]


def test_network_policy_restricts_egress_only_to_the_rules_given(render: Render) -> None:
    api_server = {
        "to": [{"ipBlock": {"cidr": "10.0.0.1/32"}}],
        "ports": [{"port": 6443, "protocol": "TCP"}],
    }
    objects = render(
        *sets("networkPolicy.enabled=true"),
        "--set-json",
        f"networkPolicy.egress={json.dumps([api_server])}",
    )
    policy = only(objects, "NetworkPolicy")
    assert policy["spec"]["policyTypes"] == ["Ingress", "Egress"]
    assert policy["spec"]["egress"] == [api_server]
    assert len(policy_ports(policy)) == 2  # ingress as without egress rules


def test_kustomize_network_policy_is_the_charts_and_is_opt_in(
    kustomized: list[Manifest], render: Render
) -> None:
    assert "NetworkPolicy" not in kinds(kustomized)
    ours = only(kustomize("networkpolicy"), "NetworkPolicy")
    theirs = only(
        render("--namespace", webhooks.DEFAULT_NAMESPACE, *sets("networkPolicy.enabled=true")),
        "NetworkPolicy",
    )
    assert ours["metadata"]["namespace"] == theirs["metadata"]["namespace"]
    pods = only(kustomized, "Deployment")["spec"]["template"]["metadata"]["labels"]
    assert ours["spec"]["podSelector"]["matchLabels"].items() <= pods.items()
    assert {**ours["spec"], "podSelector": None} == {**theirs["spec"], "podSelector": None}
    container_ports = {port["containerPort"] for port in container(kustomized)["ports"]}
    assert set(policy_ports(ours)) < container_ports  # the health port is left closed
