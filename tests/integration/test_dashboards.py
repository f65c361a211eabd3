"""Every query of the shipped Grafana dashboards returns data from a real Prometheus: no panel of
either dashboard says "No data".

Each panel's every query (and each template variable's ``label_values`` query) is evaluated as
Grafana would send it — its variables substituted: ``namespace`` and ``database`` by what the
test made (a multi-select, as Grafana writes it: ``(a|b)``), ``$__rate_interval`` by 30s (a
1-second scrape makes that many samples), ``$__interval`` by 5s, ``$__range`` by 10m — through
Prometheus's HTTP API, and must return at least one series with a value that is not NaN (a
quantile of a histogram that observed nothing in the window is NaN: Grafana draws nothing). A
failure names the dashboard, the panel and the query.

- The operator's dashboard: a Prometheus scrapes the real operator (`database-operator run`,
  its webhooks served and registered as tests/integration/test_webhooks.py runs them) against
  the real kube-apiserver, with Databases in several phases (Active, Pending, Failed) and
  backups (one completed before, one failed, one that completes while Prometheus scrapes), so
  that reconciles, failures, the work queue, the phases, the webhooks' latency and the backups'
  gauges and duration all have samples. No Job controller or kubelet runs there: the test
  plays them for the backup's Job, with the backup agent's own result (`finish_backup_job`).
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
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from kubernetes import client

from database_operator import dashboards
from database_operator.backups import agent
from database_operator.backups.recipes import BACKUP_DIR
from database_operator.backups.state import UPLOAD_CONTAINER
from tests.cluster import GROUP, PLURAL, VERSION, Cluster, play_kubelet, wait_for
from tests.controlplane import free_port
from tests.exporters import (
    Fleet,
    exporter_fleet,  # noqa: F401 - the fleet fixture
)
from tests.integration.webhooks import conversion_kept, start_webhook_operator
from tests.prometheus import prometheus_server, query

SCRAPE_INTERVAL_S = 1
#: Grafana's built-in interval variables, as a dashboard on a 1-second scrape would have them.
BUILT_INS = {"__rate_interval": "30s", "__interval": "5s", "__range": "10m"}
#: Time for every query to have data: the first reconciles, and a few scrapes for the rates.
DATA_TIMEOUT_S = 90
BACKUPS = "databasebackups"
#: The label the Job controller puts on a Job's pods (the operator finds them by it).
JOB_NAME_LABEL = "batch.kubernetes.io/job-name"


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


def without_a_value(
    prometheus: str, dashboard: dict[str, Any], variables: Mapping[str, str]
) -> list[str]:
    """The queries of ``dashboard`` that return no series, or only NaN (a quantile of a histogram
    that observed nothing in the window: Grafana draws no line, the panel looks empty), each
    named with its panel."""
    missing = []
    for what, expr, label in dashboard_queries(dashboard):
        promql = substitute(expr, variables)
        result = query(prometheus, promql)
        # A variable lists the label's values: a series without the label gives it none.
        found = [series for series in result if label is None or series["metric"].get(label)]
        if not found:
            missing.append(f"{dashboard['title']!r} {what}: no series: {promql}")
        elif all(math.isnan(float(series["value"][1])) for series in found):
            missing.append(f"{dashboard['title']!r} {what}: only NaN: {promql}")
    return missing


def check_every_query(
    prometheus: str,
    dashboard: dict[str, Any],
    variables: Mapping[str, str],
    traffic: Callable[[], None] = lambda: None,
) -> None:
    """Wait until every query of ``dashboard`` returns a value that is not NaN (failing, naming
    those that do not); print the count. ``traffic``, called before each look, keeps something
    observed within the rate interval (the webhooks' reviews)."""
    missing: list[str] = []

    def all_answer() -> bool:
        traffic()
        missing[:] = without_a_value(prometheus, dashboard, variables)
        return not missing

    started = time.monotonic()
    try:
        wait_for(all_answer, timeout=DATA_TIMEOUT_S, what="every query to return a value")
    except AssertionError:
        raise AssertionError(
            f"{len(missing)} queries return no value:\n" + "\n".join(missing)
        ) from None
    queries = dashboard_queries(dashboard)
    print(
        f"{dashboard['title']!r}: {len(dashboard['panels'])} panels, {len(queries)} queries "
        f"(variables' included), each returned a value that is not NaN, within "
        f"{time.monotonic() - started:.1f} s"
    )


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


def webhook_traffic(cluster: Cluster, namespace: str) -> Callable[[], None]:
    """Reviews for each of the operator's webhooks: a Database write (server-side dry run: it
    passes the mutating and validating webhooks and stores nothing) and a read through v1beta1
    (the conversion)."""
    probe = {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "Database",
        "metadata": {"name": "webhook-probe"},
        "spec": {"engine": "redis"},
    }

    def review() -> None:
        cluster.custom.create_namespaced_custom_object(
            GROUP, VERSION, namespace, PLURAL, probe, dry_run="All"
        )
        cluster.custom.list_namespaced_custom_object(GROUP, "v1beta1", namespace, PLURAL)

    return review


def stamp(when: datetime) -> str:
    return when.strftime("%Y-%m-%dT%H:%M:%SZ")


def finish_backup_job(cluster: Cluster, namespace: str, backup: str, scratch: Path) -> None:
    """Play the Job controller and the kubelet for ``backup``'s running Job: its pod (the Job's
    template) ran, the upload container ended with the agent's result as its termination
    message, and the Job completed.

    The result is the agent's own: `agent.main` runs the upload container's command line (its
    paths mapped into ``scratch``) on a stand-in dump, storing it in a folder (the agent's
    PersistentVolumeClaim store) where the Job names a bucket: what the agent reports does not
    depend on where it stored the dump."""
    status = cluster.get_backup(namespace, backup)["status"]
    job = cluster.batch.read_namespaced_job(status["job"], namespace)
    template = cluster.core.api_client.sanitize_for_serialization(job.spec.template)
    upload = next(c for c in template["spec"]["containers"] if c["name"] == UPLOAD_CONTAINER)
    files, store, result = scratch / "backup", scratch / "store", scratch / "result.json"
    files.mkdir(parents=True)
    store.mkdir()
    args = [arg.replace(f"={BACKUP_DIR}/", f"={files}/") for arg in upload["command"][2:]]
    flags = dict(arg.removeprefix("--").split("=", 1) for arg in args if arg.startswith("--"))
    Path(flags["file"]).write_bytes(b"what the dump container wrote\n" * 64)
    # What the dump container writes beside the dump: the server's version.
    version = cluster.get_db(namespace, flags["database"])["spec"]["version"]
    Path(flags["version-file"]).write_text(f"{version}\n")
    key = next(e["value"] for e in upload["env"] if e["name"] == agent.KEY)
    ran = agent.main(
        ["--result-file", str(result), *args], {agent.KEY: key, agent.PVC_DIR: str(store)}
    )
    assert ran == 0, result.read_text()

    started = status["startedAt"]
    # Whole seconds, as the API server keeps them; not before the backup started.
    finished = stamp(datetime.now(UTC).replace(microsecond=0) + timedelta(seconds=1))
    pod = {
        "metadata": {
            "name": f"{job.metadata.name}-play",
            "labels": {
                **(template["metadata"].get("labels") or {}),
                JOB_NAME_LABEL: job.metadata.name,
            },
        },
        "spec": template["spec"],
    }
    cluster.core.create_namespaced_pod(namespace, pod)

    def ended(container: dict[str, Any], message: str = "") -> dict[str, Any]:
        terminated = {"exitCode": 0, "reason": "Completed", "startedAt": started}
        terminated |= {"finishedAt": finished} | ({"message": message} if message else {})
        return {
            "name": container["name"],
            "image": container["image"],
            "imageID": "",
            "ready": False,
            "restartCount": 0,
            "state": {"terminated": terminated},
        }

    cluster.core.patch_namespaced_pod_status(
        pod["metadata"]["name"],
        namespace,
        {
            "status": {
                "phase": "Succeeded",
                "initContainerStatuses": [ended(c) for c in template["spec"]["initContainers"]],
                "containerStatuses": [ended(upload, result.read_text())],
            }
        },
    )
    done = {"lastProbeTime": finished, "lastTransitionTime": finished}
    cluster.batch.patch_namespaced_job_status(
        job.metadata.name,
        namespace,
        {
            "status": {
                "startTime": started,
                "completionTime": finished,
                "succeeded": 1,
                "active": 0,
                "conditions": [
                    {"type": "SuccessCriteriaMet", "status": "True", **done},
                    {"type": "Complete", "status": "True", **done},
                ],
            }
        },
    )


def test_every_query_of_the_operator_dashboard_returns_data(
    cluster: Cluster, namespace: str, tmp_path: Path
) -> None:
    with conversion_kept(cluster), claims_refused(cluster, namespace):
        names = databases_in_several_phases(cluster, namespace)
        check_operator_dashboard(cluster, namespace, tmp_path, names)


def check_operator_dashboard(
    cluster: Cluster, namespace: str, tmp_path: Path, names: list[str]
) -> None:
    """The operator serves its webhooks (registered for the namespace, as
    tests/integration/test_webhooks.py runs it), which review writes and reads while the queries
    are asked; a backup of ``sessions`` runs, and its Job completes once Prometheus scrapes, so
    that the backup duration has an observation in the rate interval."""
    metrics_port = free_port()
    hooks = start_webhook_operator(
        cluster, namespace, tmp_path / "operator.log", f"--metrics-port={metrics_port}"
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
        cluster.s3_credentials(namespace)
        destination = {
            "s3": {"bucket": "backups", "credentialsSecretRef": {"name": "backup-credentials"}}
        }
        cluster.create_backup(
            namespace, "sessions-now", {"database": "sessions", "destination": destination}
        )
        wait_for(
            lambda: backup_phase(cluster, namespace, "sessions-now") == "Running",
            what="the backup's Job created",
        )
        scrape = {
            "job_name": "database-operator",
            "static_configs": [{"targets": [f"127.0.0.1:{metrics_port}"]}],
        }
        with prometheus_server(tmp_path, [scrape], SCRAPE_INTERVAL_S) as prometheus:
            # The histograms' zeros scraped first: the completion is an increase rate() sees.
            wait_for(
                lambda: query(prometheus, "database_operator_backup_duration_seconds_count"),
                what="a first scrape of the operator",
            )
            finish_backup_job(cluster, namespace, "sessions-now", tmp_path / "agent")
            wait_for(
                lambda: backup_phase(cluster, namespace, "sessions-now") == "Completed",
                what="the backup Completed",
            )
            phases = {name: cluster.get_db(namespace, name)["status"]["phase"] for name in names}
            check_every_query(
                prometheus,
                dashboards.operator_dashboard(),
                {"datasource": "prometheus", "namespace": namespace, "database": multi(*names)},
                webhook_traffic(cluster, namespace),
            )
            print(f"phases: {phases}")
    finally:
        assert hooks.process.stop() == 0, hooks.process.log_text()[-3000:]


def backup_phase(cluster: Cluster, namespace: str, name: str) -> str | None:
    phase = cluster.get_backup(namespace, name).get("status", {}).get("phase")
    return str(phase) if phase else None


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
        check_every_query(
            prometheus,
            dashboards.databases_dashboard(),
            {
                "datasource": "prometheus",
                "namespace": multi(*namespaces),
                "database": multi(*databases),
            },
        )
