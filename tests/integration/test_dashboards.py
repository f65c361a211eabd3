"""Every query of the shipped Grafana dashboards returns data from a real Prometheus: no panel of
either dashboard says "No data".

Each panel's every query (and each template variable's ``label_values`` query) is evaluated as
Grafana would send it — its variables substituted: ``namespace`` and ``database`` by what the
test made (a multi-select, as Grafana writes it: ``(a|b)``), ``$__rate_interval`` by 30s (a
1-second scrape makes that many samples), ``$__interval`` by 5s, ``$__range`` by 10m — through
Prometheus's HTTP API, and must return at least one series. A failure names the dashboard, the
panel and the query.

- The operator's dashboard: a Prometheus scrapes the real operator (`database-operator run`)
  against the real kube-apiserver, with Databases in several phases (Active, Pending, Failed)
  and backups (one completed, one failed), so that reconciles, failures, the work queue, the
  phases and the backup gauges all have samples.
- The databases' dashboard: the same Prometheus scrapes the real exporters beside real
  PostgreSQL, MariaDB and Redis primaries and replicas on loopback (tests/exporters.py), with
  the labels the PodMonitor's relabelings give pods in a cluster (namespace, pod, database,
  engine, role, job) set by hand in the static scrape config.

`prometheus` must be on PATH (`make prometheus`); its absence fails these tests, never skips
them. Each test prints how many panels and queries it checked (`pytest -s` shows it).
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from kubernetes import client

from database_operator import dashboards
from tests.cluster import GROUP, VERSION, Cluster, play_kubelet, wait_for
from tests.controlplane import free_port
from tests.exporters import (
    Fleet,
    exporter_fleet,  # noqa: F401 - the fleet fixture
    prometheus_server,
)
from tests.integration.conftest import RESYNC_S, start_operator
from tests.integration.test_prometheus import query

SCRAPE_INTERVAL_S = 1
#: Grafana's built-in interval variables, as a dashboard on a 1-second scrape would have them.
BUILT_INS = {"__rate_interval": "30s", "__interval": "5s", "__range": "10m"}
#: Time for every query to have data: the first reconciles, and a few scrapes for the rates.
DATA_TIMEOUT_S = 90
BACKUPS = "databasebackups"


def substitute(expr: str, variables: Mapping[str, str]) -> str:
    """``expr`` with ``$name`` and ``${name}`` replaced as Grafana replaces them."""
    values = {**BUILT_INS, **variables}

    def value(match: re.Match[str]) -> str:
        name = match.group(1) or match.group(2)
        assert name in values, f"the test gives no value to ${name} in {expr!r}"
        return values[name]

    return re.sub(r"\$\{(\w+)\}|\$(\w+)", value, expr)


def multi(*values: str) -> str:
    """A multi-value variable in a regex matcher, as Grafana writes it."""
    return "(" + "|".join(re.escape(value) for value in values) + ")"


def dashboard_queries(dashboard: dict[str, Any]) -> list[tuple[str, str, str | None]]:
    """(what, PromQL, label) of every query: the variables' (``label_values(S, L)`` as Grafana
    asks Prometheus: the values of label L on the series of S) and every panel target's (label
    None)."""
    found: list[tuple[str, str, str | None]] = []
    for variable in dashboard["templating"]["list"]:
        if variable["type"] != "query":
            continue
        parsed = re.fullmatch(r"label_values\((.*), (\w+)\)", variable["query"])
        assert parsed, variable["query"]
        selector, label = parsed.groups()
        found.append((f"variable {variable['name']}", f"group by ({label}) ({selector})", label))
    for panel in dashboard["panels"]:
        for target in panel["targets"]:
            found.append((f"panel {panel['title']!r} ({target['refId']})", target["expr"], None))
    return found


def without_data(
    prometheus: str, dashboard: dict[str, Any], variables: Mapping[str, str]
) -> list[str]:
    """The queries of ``dashboard`` that return no series, each named with its panel."""
    missing = []
    for what, expr, label in dashboard_queries(dashboard):
        promql = substitute(expr, variables)
        result = query(prometheus, promql)
        # A variable lists the label's values: a series without the label gives it none.
        if not [series for series in result if label is None or series["metric"].get(label)]:
            missing.append(f"{dashboard['title']!r} {what}: {promql}")
    return missing


def check_every_query(
    prometheus: str, dashboard: dict[str, Any], variables: Mapping[str, str]
) -> list[tuple[str, str]]:
    """Wait until every query of ``dashboard`` returns a series (failing, naming those that do
    not); print the count; return the queries whose values are all NaN (a quantile of a
    histogram that observed nothing in the window: the panel draws no line, but has data)."""
    missing: list[str] = []

    def all_answer() -> bool:
        missing[:] = without_data(prometheus, dashboard, variables)
        return not missing

    try:
        wait_for(all_answer, timeout=DATA_TIMEOUT_S, what="every query to return data")
    except AssertionError:
        raise AssertionError(
            f"{len(missing)} queries return no data:\n" + "\n".join(missing)
        ) from None
    queries = dashboard_queries(dashboard)
    print(
        f"{dashboard['title']!r}: {len(dashboard['panels'])} panels, {len(queries)} queries "
        "(variables' included), each returned data"
    )
    nan_only = []
    for what, expr, _ in queries:
        result = query(prometheus, substitute(expr, variables))
        if all(math.isnan(float(series["value"][1])) for series in result):
            nan_only.append((what, expr))
    return nan_only


def write_backup_status(
    cluster: Cluster, namespace: str, name: str, status: dict[str, Any]
) -> None:
    cluster.custom.patch_namespaced_custom_object_status(
        GROUP, VERSION, namespace, BACKUPS, name, {"status": status}
    )


@contextmanager
def claims_refused(cluster: Cluster, namespace: str) -> Iterator[None]:
    """The API server refuses every PersistentVolumeClaim of ``namespace`` (422, by a
    ValidatingAdmissionPolicy, as a cluster's policy might): an API error for the operator."""
    api = client.AdmissionregistrationV1Api(cluster.core.api_client)
    name = f"no-claims-{namespace}"
    rule = {
        "apiGroups": [""],
        "apiVersions": ["v1"],
        "operations": ["CREATE"],
        "resources": ["persistentvolumeclaims"],
    }
    api.create_validating_admission_policy(
        {
            "metadata": {"name": name},
            "spec": {
                "failurePolicy": "Fail",
                "matchConstraints": {"resourceRules": [rule]},
                "validations": [{"expression": "false", "message": "no claims in this namespace"}],
            },
        }
    )
    api.create_validating_admission_policy_binding(
        {
            "metadata": {"name": name},
            "spec": {
                "policyName": name,
                "validationActions": ["Deny"],
                "matchResources": {
                    "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": namespace}}
                },
            },
        }
    )

    def refused() -> bool:
        claim = {
            "metadata": {"name": "probe"},
            "spec": {
                "accessModes": ["ReadWriteOnce"],
                "resources": {"requests": {"storage": "1Gi"}},
            },
        }
        try:
            cluster.core.create_namespaced_persistent_volume_claim(namespace, claim, dry_run="All")
        except client.ApiException as error:
            return bool(error.status == 422)
        return False

    try:
        wait_for(refused, timeout=30, what="the API server to enforce the policy")
        yield
    finally:
        api.delete_validating_admission_policy_binding(name)
        api.delete_validating_admission_policy(name)


def databases_in_several_phases(cluster: Cluster, namespace: str) -> list[str]:
    """Databases the operator will find Active, Pending and Failed (a name taken, a claim the API
    server refuses: an API error), and backups of one of them:
    one completed (written before the operator starts, as an earlier operator would have), one
    the operator fails (its destination's Secret is missing)."""
    missing_secret = {"s3": {"bucket": "backups", "credentialsSecretRef": {"name": "absent"}}}
    orders = cluster.create_db(
        namespace,
        "orders",
        {"backup": {"destination": missing_secret, "schedule": "0 2 * * *"}},
    )
    cluster.create_db(namespace, "sessions", {"engine": "redis", "replicas": 2})
    cluster.create_db(namespace, "inventory", {"engine": "mysql"})
    # A Secret the operator did not create where the Database's own would be: ChildNameConflict.
    cluster.create_secret(namespace, "clash-credentials", {"password": "someone-elses"})
    cluster.create_db(namespace, "clash", {"engine": "redis"})
    cluster.create_db(namespace, "claimed", {"engine": "redis", "storage": {"size": "1Gi"}})
    cluster.create_backup(namespace, "orders-done", {"database": "orders"})
    write_backup_status(
        cluster,
        namespace,
        "orders-done",
        {
            "phase": "Completed",
            "completedAt": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "databaseUID": orders["metadata"]["uid"],
            "size": 1024,
            "location": "backups/orders-done.dump",
            "engine": "postgres",
        },
    )
    cluster.create_backup(namespace, "orders-failed", {"database": "orders"})
    return ["orders", "sessions", "inventory", "clash", "claimed"]


def test_every_query_of_the_operator_dashboard_returns_data(
    cluster: Cluster, namespace: str, tmp_path: Path
) -> None:
    with claims_refused(cluster, namespace):
        names = databases_in_several_phases(cluster, namespace)
        check_operator_dashboard(cluster, namespace, tmp_path, names)


def check_operator_dashboard(
    cluster: Cluster, namespace: str, tmp_path: Path, names: list[str]
) -> None:
    metrics_port = free_port()
    operator = start_operator(
        cluster,
        tmp_path / "operator.log",
        f"--namespace={namespace}",
        f"--resync-interval={RESYNC_S}",
        f"--metrics-port={metrics_port}",
        "--health-port=0",
    )
    try:
        wait_for(
            lambda: all(
                cluster.get_db(namespace, name).get("status", {}).get("phase") for name in names
            ),
            what="every Database reconciled",
        )
        play_kubelet(cluster, namespace, "sessions")
        wait_for(
            lambda: cluster.get_db(namespace, "sessions")["status"]["phase"] == "Active",
            what="sessions Active",
        )
        scrape = {
            "job_name": "database-operator",
            "static_configs": [{"targets": [f"127.0.0.1:{metrics_port}"]}],
        }
        with prometheus_server(tmp_path, [scrape], SCRAPE_INTERVAL_S) as prometheus:
            phases = {name: cluster.get_db(namespace, name)["status"]["phase"] for name in names}
            nan_only = check_every_query(
                prometheus,
                dashboards.operator_dashboard(),
                {"datasource": "prometheus", "namespace": namespace, "database": multi(*names)},
            )
            print(f"phases: {phases}; quantiles with no observation in the window: {nan_only}")
    finally:
        assert operator.stop() == 0, operator.log_text()[-3000:]


def test_every_query_of_the_databases_dashboard_returns_data(
    exporter_fleet: Fleet,  # noqa: F811 - the fixture imported above
    tmp_path: Path,
) -> None:
    """Both PostgreSQL and Redis replicate (the replication panels), MariaDB has a table (its
    size panel); a load round after Prometheus starts moves the counters of the rate panels."""
    fleet = exporter_fleet
    labels = [target.labels for target in fleet.targets]
    namespaces = sorted({label["namespace"] for label in labels})
    databases = sorted({label["database"] for label in labels})
    with prometheus_server(
        tmp_path, [fleet.scrape_config(SCRAPE_INTERVAL_S)], SCRAPE_INTERVAL_S
    ) as prometheus:
        fleet.load(2)
        nan_only = check_every_query(
            prometheus,
            dashboards.databases_dashboard(),
            {
                "datasource": "prometheus",
                "namespace": multi(*namespaces),
                "database": multi(*databases),
            },
        )
    assert nan_only == [], f"queries whose every value is NaN: {nan_only}"
