"""The chart's and kustomize's monitoring of the databases, offline: the PodMonitor of the
exporters (opt-in, only where the Prometheus Operator's API is; its relabelings turn the pod
labels the operator sets into the labels the alerts read), and the Grafana dashboards'
ConfigMaps (opt-in, one per JSON file of files/dashboards or config/grafana, whatever files
are there: a temporary copy gets stand-ins for the ones not generated yet).

Needs bin/helm and bin/kubectl (`make tools`); a missing one fails the tests.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from database_operator import alerts
from database_operator.api.models import EXPORTER_PORT_NAME, Database
from database_operator.desired import workload
from database_operator.desired.common import MANAGED_BY, PRIMARY, REPLICA
from database_operator.webhooks import configuration as webhooks
from tests.controlplane import kubectl_path
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

POD_MONITOR_API = "monitoring.coreos.com/v1/PodMonitor"
ON = "monitoring.databases.podMonitor.enabled=true"
DASHBOARDS_ON = "monitoring.grafanaDashboards.enabled=true"
#: The dashboards the other half of the work generates (dashboards.py), by file name.
DASHBOARDS = ("operator.json", "databases.json")
SCHEMA = "dashboard.schema.json"


def pod_monitor(render: Render, *settings: str, namespace: str = "ops") -> Manifest:
    objects = render(
        *sets(ON, *settings), "--namespace", namespace, "--api-versions", POD_MONITOR_API
    )
    return only(objects, "PodMonitor")


# --- the PodMonitor -----------------------------------------------------------------------------


def test_pod_monitor_is_opt_in_and_needs_the_prometheus_operator(render: Render) -> None:
    assert "PodMonitor" not in kinds(render("--api-versions", POD_MONITOR_API))
    assert "PodMonitor" not in kinds(render(*sets(ON)))  # no monitoring.coreos.com/v1: skipped


def test_pod_monitor_scrapes_the_metrics_port_of_every_databases_pods(render: Render) -> None:
    monitor = pod_monitor(
        render,
        "monitoring.databases.podMonitor.labels.release=kps",
        "monitoring.databases.podMonitor.interval=15s",
    )
    assert monitor["metadata"]["name"] == f"{RELEASE}-databases"
    assert monitor["metadata"]["namespace"] == "ops"
    assert monitor["metadata"]["labels"]["release"] == "kps"
    assert monitor["metadata"]["labels"].keys() >= STANDARD_LABELS
    spec = monitor["spec"]
    assert spec["selector"] == {"matchLabels": {"app.kubernetes.io/managed-by": MANAGED_BY}}
    assert spec["namespaceSelector"] == {"any": True}
    (endpoint,) = spec["podMetricsEndpoints"]
    assert endpoint["port"] == EXPORTER_PORT_NAME
    assert (endpoint["interval"], endpoint["scrapeTimeout"]) == ("15s", "10s")
    assert endpoint["honorLabels"] is False  # the exporters' `role` must not win over ours


def test_pod_monitor_watches_only_the_watched_namespaces_when_named(render: Render) -> None:
    monitor = pod_monitor(render, "watchNamespaces={team-a,team-b}")
    assert monitor["spec"]["namespaceSelector"] == {"matchNames": ["team-a", "team-b"]}


def discovered(pod_labels: dict[str, str], namespace: str, name: str) -> dict[str, str]:
    """The meta labels Prometheus' Kubernetes discovery gives a pod (role: pod)."""
    meta = {
        f"__meta_kubernetes_pod_label_{re.sub(r'[^a-zA-Z0-9_]', '_', key)}": value
        for key, value in pod_labels.items()
    }
    return meta | {"__meta_kubernetes_namespace": namespace, "__meta_kubernetes_pod_name": name}


def relabelled(relabelings: list[Manifest], meta: dict[str, str]) -> dict[str, str]:
    """The target labels ``relabelings`` (replace and labeldrop only) make of ``meta``, after
    the Prometheus Operator's own (job, container, endpoint)."""
    labels = meta | {"job": "ops/x", "container": "metrics-exporter", "endpoint": "metrics"}
    for step in relabelings:
        action = step.get("action", "replace")
        if action == "labeldrop":
            labels = {k: v for k, v in labels.items() if not re.fullmatch(step["regex"], k)}
            continue
        assert action == "replace", step
        value = ";".join(labels.get(source, "") for source in step.get("sourceLabels", []))
        labels[step["targetLabel"]] = step.get("replacement", value)
    return {key: value for key, value in labels.items() if not key.startswith("__")}


@pytest.mark.parametrize("role", [PRIMARY, REPLICA])
def test_the_relabelings_give_the_labels_the_alerts_read(render: Render, role: str) -> None:
    db = Database.model_validate(
        {"metadata": {"name": "orders", "namespace": "team-a"}, "spec": {"engine": "postgres"}}
    )
    pod_labels = workload.pod_template(db, role=role)["metadata"]["labels"]
    (endpoint,) = pod_monitor(render)["spec"]["podMetricsEndpoints"]
    labels = relabelled(endpoint["relabelings"], discovered(pod_labels, "team-a", "orders-x"))
    assert labels == {
        "namespace": "team-a",
        "pod": "orders-x",
        "database": "orders",
        "engine": "postgres",
        "role": role,
        "job": alerts.DATABASES_JOB,
    }


def test_kustomize_pod_monitor_is_the_charts(render: Render) -> None:
    ours = only(kustomize("prometheus"), "PodMonitor")
    chart = pod_monitor(render, namespace=webhooks.DEFAULT_NAMESPACE)
    assert ours["metadata"]["name"] == f"{RELEASE}-databases"
    assert ours["metadata"]["namespace"] == webhooks.DEFAULT_NAMESPACE
    assert ours["spec"] == chart["spec"]


@pytest.mark.parametrize(
    ("setting", "field"),
    [
        ("monitoring.databases.podMonitor.enabld=true", "enabld"),
        ("monitoring.databases.podMonitor.interval=often", "/monitoring/databases/podMonitor"),
        ("monitoring.grafanaDashboards.enabled=maybe", "/monitoring/grafanaDashboards/enabled"),
        ("monitoring.grafanaDashboards.namespace=Not_A_Name", "/monitoring/grafanaDashboards"),
        ("monitoring.grafana.enabled=true", "grafana"),
    ],
)
def test_schema_refuses_bad_monitoring_values(helm: Helm, setting: str, field: str) -> None:
    done = helm("template", RELEASE, str(CHART), "--set", setting)
    assert done.returncode != 0
    assert "values don't meet the specifications of the schema" in done.stderr
    assert field in done.stderr, done.stderr


# --- the Grafana dashboards ---------------------------------------------------------------------


def with_dashboards(folder: Path, tmp_path: Path) -> Path:
    """A copy of ``folder`` with every JSON file of DASHBOARDS (a stand-in for a file not
    generated yet) and, beside them, the dashboards' JSON schema (which is no dashboard)."""
    copy = tmp_path / folder.name
    shutil.copytree(folder, copy)
    dashboards = copy / "files" / "dashboards" if (copy / "Chart.yaml").exists() else copy
    dashboards.mkdir(parents=True, exist_ok=True)
    for name in DASHBOARDS:
        if not (dashboards / name).exists():
            stand_in = {"title": name, "panels": [{"type": "timeseries", "title": "a\tb"}]}
            (dashboards / name).write_text(json.dumps(stand_in, indent=2) + "\n")
    if dashboards.parent.name == "files" and not (dashboards / SCHEMA).exists():
        (dashboards / SCHEMA).write_text('{"$schema": "http://json-schema.org/draft-07/schema#"}')
    return copy


def configmaps(helm: Helm, chart: Path, *args: str) -> list[Manifest]:
    done = helm("template", RELEASE, str(chart), "--namespace", "ops", *args)
    assert done.returncode == 0, done.stderr
    objects = [doc for doc in yaml.safe_load_all(done.stdout) if doc]
    return [obj for obj in objects if obj["kind"] == "ConfigMap"]


def test_dashboards_are_one_configmap_per_json_file_for_grafanas_sidecar(
    helm: Helm, tmp_path: Path
) -> None:
    chart = with_dashboards(CHART, tmp_path)
    files = chart / "files" / "dashboards"
    found = configmaps(helm, chart, *sets(DASHBOARDS_ON))
    expected = sorted(path.name for path in files.glob("*.json") if path.name != SCHEMA)
    assert set(DASHBOARDS) <= set(expected)
    assert sorted(key for cm in found for key in cm["data"]) == expected
    for cm in found:
        ((name, text),) = cm["data"].items()
        assert cm["metadata"]["name"] == f"{RELEASE}-dashboard-{name.removesuffix('.json')}"
        assert cm["metadata"]["namespace"] == "ops"
        assert cm["metadata"]["labels"]["grafana_dashboard"] == "1"
        assert cm["metadata"]["labels"].keys() >= STANDARD_LABELS
        assert "annotations" not in cm["metadata"]
        assert json.loads(text) == json.loads((files / name).read_text())


def test_dashboards_take_the_labels_annotations_and_namespace_given(
    helm: Helm, tmp_path: Path
) -> None:
    chart = with_dashboards(CHART, tmp_path)
    found = configmaps(
        helm,
        chart,
        *sets(
            DASHBOARDS_ON,
            "monitoring.grafanaDashboards.labels.team=dba",
            "monitoring.grafanaDashboards.annotations.grafana_folder=Databases",
            "monitoring.grafanaDashboards.namespace=grafana",
        ),
    )
    assert found
    for cm in found:
        assert cm["metadata"]["namespace"] == "grafana"
        assert cm["metadata"]["labels"]["team"] == "dba"
        assert cm["metadata"]["labels"]["grafana_dashboard"] == "1"
        assert cm["metadata"]["annotations"] == {"grafana_folder": "Databases"}


def test_dashboards_are_opt_in(helm: Helm, tmp_path: Path) -> None:
    assert configmaps(helm, with_dashboards(CHART, tmp_path)) == []


def test_chart_lints_with_everything_on(helm: Helm, tmp_path: Path) -> None:
    chart = with_dashboards(CHART, tmp_path)
    done = helm("lint", "--strict", str(chart), *sets(DASHBOARDS_ON, ON))
    assert done.returncode == 0, done.stdout + done.stderr


def test_kustomize_dashboards_are_the_json_files_of_config_grafana(tmp_path: Path) -> None:
    folder = with_dashboards(ROOT / "config" / "grafana", tmp_path)
    found = [obj for obj in kustomize_at(folder) if obj["kind"] == "ConfigMap"]
    assert sorted(key for cm in found for key in cm["data"]) == sorted(DASHBOARDS)
    for cm in found:
        ((name, text),) = cm["data"].items()
        # The chart's names with the release "database-operator": one set of dashboards.
        assert cm["metadata"]["name"] == f"{RELEASE}-dashboard-{name.removesuffix('.json')}"
        assert cm["metadata"]["namespace"] == webhooks.DEFAULT_NAMESPACE
        assert cm["metadata"]["labels"]["grafana_dashboard"] == "1"
        assert json.loads(text) == json.loads((folder / name).read_text())


def kustomize_at(folder: Path) -> list[Manifest]:
    """`kubectl kustomize` of any folder (tests.unit.chart.kustomize: config/'s only)."""
    done = subprocess.run(
        [str(kubectl_path()), "kustomize", str(folder)],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    return [doc for doc in yaml.safe_load_all(done.stdout) if doc]
