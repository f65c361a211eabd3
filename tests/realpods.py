"""What the real-pod tests do as a user would: install the operator with its chart from its own
image, apply Databases with kubectl, and talk to the engines from a client pod with what the
connection Secret gives an application.

- `install_operator`: ``helm upgrade --install`` of helm/database-operator with the image built
  from the project's Dockerfile (hack/images/operator), waited for; `Release` finds its pods and
  its leader (the Lease's holder).
- `ClientPod`: a pod of the engine's image that mounts a Database's connection Secret where the
  Service Binding specification puts it (``/bindings/db``), and runs the engine's own client
  there with `kubectl exec`: `psql`, `redis`, `mysql`. The password goes from the mounted file
  into the client's environment, never onto a command line; the URI is used without it.
- `wait_active`, `pods_of`, `running_pods`: what the stories wait for.
"""

from __future__ import annotations

import contextlib
import json
import subprocess
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import yaml
from kubernetes import client

from tests.cluster import Cluster, condition, wait_for
from tests.controlplane import ROOT

HELM = ROOT / "bin" / "helm"
#: HOME for helm and kubectl (their caches), inside the clone's ignored .local/.
LOCAL_HOME = ROOT / ".local" / "home"
CHART = ROOT / "helm" / "database-operator"
RELEASE = "database-operator"
OPERATOR_NAMESPACE = "database-operator"
#: Where the Service Binding specification mounts a binding: $SERVICE_BINDING_ROOT/<name>.
BINDING = "/bindings/db"
#: A pod's real start: pulling nothing, but an engine's first start (initdb) takes seconds.
POD_TIMEOUT_S = 180.0

#: The operator's start deadline for its Jobs here (the chart's default is 300 s): a pod
#: this host runs starts its containers within seconds, the images being local.
START_DEADLINE_S = 45


def helm(*args: str, kubeconfig: Path, timeout_s: float = 600) -> str:
    """helm ARGS against the cluster of ``kubeconfig``; its stdout, or an error with its output."""
    done = subprocess.run(
        [str(HELM), *args],
        env={"KUBECONFIG": str(kubeconfig), "HOME": str(LOCAL_HOME), "PATH": ""},
        capture_output=True,
        text=True,
        check=False,
        timeout=timeout_s,
    )
    if done.returncode != 0:
        raise AssertionError(f"helm {' '.join(args)}: {done.stdout}\n{done.stderr}")
    return done.stdout


@dataclass(frozen=True)
class Release:
    """The operator as the chart installed it."""

    cluster: Cluster
    namespace: str
    name: str
    image: str

    @property
    def selector(self) -> str:
        return f"app.kubernetes.io/instance={self.name},app.kubernetes.io/name=database-operator"

    def pods(self) -> list[client.V1Pod]:
        return list(
            self.cluster.core.list_namespaced_pod(
                self.namespace, label_selector=self.selector
            ).items
        )

    def leader(self) -> str:
        """The pod that holds the Lease (its holderIdentity is ``<pod>_<8 hex>``)."""
        lease = client.CoordinationV1Api(self.cluster.api).read_namespaced_lease(
            self.name, self.namespace
        )
        holder = lease.spec.holder_identity or ""
        return str(holder.rsplit("_", 1)[0])

    def logs(self, pod: str, tail: int = 200) -> str:
        return self.cluster.kubectl(
            "logs", "-n", self.namespace, pod, f"--tail={tail}", check=False
        )

    def wait_rolled_out(self, timeout_s: float = POD_TIMEOUT_S) -> None:
        self.cluster.kubectl(
            "rollout",
            "status",
            "-n",
            self.namespace,
            f"deployment/{self.name}",
            f"--timeout={int(timeout_s)}s",
        )


def install_operator(
    cluster: Cluster, image: str, *values: str, namespace: str = OPERATOR_NAMESPACE
) -> Release:
    """The chart with the operator's own image (a local one: pulled from nowhere), two
    replicas with leader election, its webhooks behind their Service with the operator's own
    certificates; ``values`` are more ``--set`` pairs. Waits until every pod is Ready and the
    webhooks answer (a Database the schema and webhook both accept is created dry-run)."""
    repository, tag = image.rsplit(":", 1)
    helm(
        "upgrade", "--install", RELEASE, str(CHART),
        "--namespace", namespace, "--create-namespace",
        "--set", f"image.repository={repository}",
        "--set", f"image.tag={tag}",
        "--set", "image.pullPolicy=Never",
        "--set", "replicas=2",
        *(arg for value in values for arg in ("--set", value)),
        "--wait", "--timeout", "5m",
        kubeconfig=cluster.kubeconfig,
    )  # fmt: skip
    release = Release(cluster, namespace, RELEASE, image)
    release.wait_rolled_out()
    probe = {
        "apiVersion": "databases.example.com/v1",
        "kind": "Database",
        "metadata": {"name": "webhook-probe", "namespace": "default"},
        "spec": {"engine": "redis"},
    }
    wait_for(
        partial(_webhooks_answer, cluster, json.dumps(probe)),
        timeout=60,
        interval=1,
        what="the operator's webhooks to answer through their Service",
    )
    return release


def _webhooks_answer(cluster: Cluster, manifest: str) -> bool:
    """A server-side dry run of ``manifest`` went through the webhooks: admitted, or refused
    by them (not "failed calling webhook")."""
    answer = cluster.kubectl("create", "--dry-run=server", "-f", "-", input=manifest, check=False)
    return "created (server dry run)" in answer or "denied the request" in answer


# --- Databases and their pods -------------------------------------------------------------------


def wait_active(
    cluster: Cluster, namespace: str, name: str, timeout_s: float = POD_TIMEOUT_S
) -> dict[str, Any]:
    """The Database once Active and Ready for its current generation, with every pod it wants
    ready (Ready alone is True while read replicas still start: the primary serves)."""

    def probe() -> dict[str, Any] | None:
        db = cluster.get_db(namespace, name)
        status = db.get("status") or {}
        ready = condition(db, "Ready")
        current = status.get("observedGeneration") == db["metadata"]["generation"]
        wanted = 1 + status.get("readReplicas", 0) if db["spec"].get("replicas", 1) else 0
        if (
            current
            and status.get("phase") == "Active"
            and ready
            and ready["status"] == "True"
            and status.get("readyReplicas", 0) == wanted
        ):
            return db
        return None

    try:
        return wait_for(probe, timeout=timeout_s, interval=1, what=f"Database {name} Active")
    except AssertionError as error:
        raise AssertionError(f"{error}\n{describe(cluster, namespace, name)}") from None


def describe(cluster: Cluster, namespace: str, name: str) -> str:
    """What a failed wait shows: the Database's status and its pods, with their last words."""
    db = cluster.get_db(namespace, name)
    lines = [json.dumps(db.get("status"), indent=1)]
    for pod in pods_of(cluster, namespace, name):
        states = [
            f"{s.name}: ready={s.ready} restarts={s.restart_count} {s.state}"
            for s in pod.status.container_statuses or []
        ]
        lines.append(f"pod {pod.metadata.name} {pod.status.phase} {states}")
        lines.append(cluster.kubectl("logs", "-n", namespace, pod.metadata.name, "--all-containers",
                                     "--tail=20", check=False))  # fmt: skip
    return "\n".join(lines)


def pods_of(
    cluster: Cluster, namespace: str, database: str, role: str | None = None
) -> list[client.V1Pod]:
    """The Database's pods (with ``role``: its primary's or its read replicas'), oldest first."""
    selector = f"app.kubernetes.io/instance={database},app.kubernetes.io/component=database"
    if role:
        selector += f",databases.example.com/role={role}"
    pods = cluster.core.list_namespaced_pod(namespace, label_selector=selector).items
    return sorted(pods, key=lambda pod: pod.metadata.creation_timestamp)


def running_pods(
    cluster: Cluster, namespace: str, database: str, role: str | None = None
) -> list[client.V1Pod]:
    """Its pods that are Ready with every container running, none of them terminating."""
    found = []
    for pod in pods_of(cluster, namespace, database, role):
        statuses = pod.status.container_statuses or []
        ready = statuses and all(s.ready and s.state.running for s in statuses)
        if ready and pod.metadata.deletion_timestamp is None:
            found.append(pod)
    return found


def apply(cluster: Cluster, namespace: str, *args: str, input: str | None = None) -> str:
    """``kubectl apply -n NAMESPACE ARGS`` (e.g. ``-f -`` with ``input``)."""
    return cluster.kubectl("apply", "-n", namespace, *args, input=input)


# --- a client, as an application would connect ----------------------------------------------------

#: The URI of the binding without its password: the password reaches the client by its
#: environment (from the mounted file), never by a command line.
_URI_WITHOUT_PASSWORD = r"sed -E 's#^([a-z]+://[^:@/]*):[^@]*@#\1@#' " + BINDING
#: redis-cli reads a URI's user info without a ':' as the password: the user goes too (the
#: password alone, AUTH <password>, is the default user's).
_URI_WITHOUT_USERINFO = r"sed -E 's#^([a-z]+://)[^@/]*@#\1#' " + BINDING


@dataclass(frozen=True)
class ClientPod:
    """A pod of an engine's image that mounts a Database's connection Secret at /bindings/db."""

    cluster: Cluster
    namespace: str
    name: str

    def sh(self, script: str, *args: str, check: bool = True, stdin: str | None = None) -> str:
        """``sh -c SCRIPT sh ARGS`` in the pod (``stdin`` on its standard input: the way a
        secret goes in); its stdout (stripped), and with ``check=False`` its stderr too (what a
        refusal says)."""
        done = subprocess.run(
            [str(ROOT / "bin" / "kubectl"), "exec", *(["-i"] if stdin is not None else []),
             "-n", self.namespace, self.name, "--", "sh", "-c", script, "sh", *args],
            env={"KUBECONFIG": str(self.cluster.kubeconfig), "HOME": str(LOCAL_HOME),
                 "PATH": "/usr/bin:/bin"},
            input=stdin, capture_output=True, text=True, check=False, timeout=120,
        )  # fmt: skip
        if check and done.returncode != 0:
            raise RuntimeError(f"in {self.name}: {script} {args}: {done.stderr.strip()}")
        return (done.stdout + ("" if check else done.stderr)).strip()

    def psql(self, sql: str, *, uri: str = "uri", check: bool = True) -> str:
        """``sql`` through the binding's ``uri`` (or ``read-only-uri``)."""
        return self.sh(
            f'PGPASSWORD="$(cat {BINDING}/password)" PGCONNECT_TIMEOUT=5 exec psql -X -A -t -q '
            f'-v ON_ERROR_STOP=1 -d "$({_URI_WITHOUT_PASSWORD}/{uri})" -c "$1"',
            sql,
            check=check,
        )

    def redis(self, *command: str, uri: str = "uri", check: bool = True) -> str:
        """A Redis command through the binding's ``uri`` (or ``read-only-uri``)."""
        return self.sh(
            f'REDISCLI_AUTH="$(cat {BINDING}/password)" exec redis-cli --no-auth-warning '
            f'-u "$({_URI_WITHOUT_USERINFO}/{uri})" "$@"',
            *command,
            check=check,
        )

    def psql_at(self, address: str, sql: str, *, check: bool = False) -> str:
        """``sql`` on the server at one pod's own ``address`` (a replica, say), as the binding's
        user, in its database."""
        b = BINDING
        return self.sh(
            f'PGPASSWORD="$(cat {b}/password)" PGCONNECT_TIMEOUT=5 exec psql -X -A -t -q '
            f'-h "$1" -U "$(cat {b}/username)" -d "$(cat {b}/database)" -c "$2"',
            address,
            sql,
            check=check,
        )

    def redis_at(self, address: str, *command: str, check: bool = False) -> str:
        """A Redis command on the server at one pod's own ``address``."""
        return self.sh(
            f'at="$1"; shift; REDISCLI_AUTH="$(cat {BINDING}/password)" '
            'exec redis-cli --no-auth-warning -h "$at" "$@"',
            address,
            *command,
            check=check,
        )

    def mysql(self, sql: str, *, check: bool = True) -> str:
        """``sql`` with the binding's host, port, user and database (the MySQL client takes no
        URI); the password by MYSQL_PWD."""
        b = BINDING
        return self.sh(
            f'MYSQL_PWD="$(cat {b}/password)" exec mysql --connect-timeout=5 -N -B '
            f'-h "$(cat {b}/host)" -P "$(cat {b}/port)" -u "$(cat {b}/username)" '
            f'"$(cat {b}/database)" -e "$1"',
            sql,
            check=check,
        )


@contextlib.contextmanager
def client_pod(
    cluster: Cluster, namespace: str, image: str, binding_secret: str, name: str = "client"
) -> Iterator[ClientPod]:
    """A client pod (the engine's image, which has its client) that mounts ``binding_secret``;
    deleted after."""
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": {"app": "client"}},
        "spec": {
            "automountServiceAccountToken": False,
            "enableServiceLinks": False,
            "terminationGracePeriodSeconds": 0,
            "securityContext": {
                "runAsNonRoot": True,
                "runAsUser": 999,
                "runAsGroup": 999,
                "seccompProfile": {"type": "RuntimeDefault"},
            },
            "containers": [
                {
                    "name": "client",
                    "image": image,
                    "imagePullPolicy": "Never",
                    "command": ["sleep", "infinity"],
                    "securityContext": {
                        "allowPrivilegeEscalation": False,
                        "capabilities": {"drop": ["ALL"]},
                    },
                    "volumeMounts": [{"name": "binding", "mountPath": BINDING, "readOnly": True}],
                }
            ],
            "volumes": [{"name": "binding", "secret": {"secretName": binding_secret}}],
        },
    }
    cluster.kubectl("apply", "-n", namespace, "-f", "-", input=json.dumps(pod))
    try:
        cluster.kubectl(
            "wait", "-n", namespace, f"pod/{name}", "--for=condition=Ready", "--timeout=120s"
        )
        yield ClientPod(cluster, namespace, name)
    finally:
        cluster.kubectl(
            "delete", "-n", namespace, f"pod/{name}", "--wait=false", "--ignore-not-found"
        )


def until_equal(
    call: Callable[[], object], expected: object, *, timeout_s: float = 60, what: str
) -> None:
    """Until ``call()`` returns ``expected`` (replication, a Service's endpoints and kube-proxy
    follow a change by a second or so)."""
    wait_for(lambda: call() == expected, timeout=timeout_s, interval=0.5, what=what)


def until_answers(call: Any, *, timeout_s: float = 60, what: str = "an answer") -> str:
    """``call()``'s answer once it stops failing (a Service's endpoints and kube-proxy's rules
    follow a pod's readiness by a second or so)."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            return str(call())
        except RuntimeError as error:
            if time.monotonic() > deadline:
                raise AssertionError(f"no {what} within {timeout_s}s: {error}") from None
            time.sleep(1)


# --- the samples, on images this host built ---------------------------------------------------

SAMPLES = ROOT / "config" / "samples"
#: Which of hack/images runs each engine, and its metrics exporter: Debian's builds (MariaDB
#: stands in for MySQL, as the webhook allows through spec.image).
ENGINE_IMAGES = {
    "postgres": ("postgresql", "postgres-exporter"),
    "mysql": ("mariadb", "mysqld-exporter"),
    "redis": ("redis", "redis-exporter"),
}


def on_local_images(db: dict[str, Any], images: dict[str, str]) -> dict[str, Any]:
    """A Database manifest as a user with a mirror of their own writes it: spec.image (and the
    exporter's) set to this host's image of the engine, spec.version to what that image runs."""
    spec = db["spec"]
    engine_image, exporter_image = ENGINE_IMAGES[spec.get("engine", "postgres")]
    reference = images[engine_image]
    spec["image"] = reference
    spec["version"] = reference.rsplit(":", 1)[1]
    if (spec.get("monitoring") or {}).get("enabled"):
        spec["monitoring"]["image"] = images[exporter_image]
    return db


def wanted_pods(db: dict[str, Any]) -> int:
    """The pods a Database runs: spec.replicas (MySQL has no replicas: one)."""
    spec = db["spec"]
    replicas = int(spec.get("replicas", 1))
    return min(replicas, 1) if spec.get("engine") == "mysql" else replicas


@dataclass(frozen=True)
class Samples:
    """config/samples applied in ``namespace``: ``pods`` is each one's wanted pod count."""

    namespace: str
    images: dict[str, str]
    pods: dict[str, int]


def apply_samples(cluster: Cluster, namespace: str, images: dict[str, str]) -> Samples:
    """``kubectl apply`` of every sample of config/samples/kustomization.yaml (on this host's
    images), then each waited for until Active."""
    built = cluster.kubectl("kustomize", str(SAMPLES))
    docs = [on_local_images(doc, images) for doc in yaml.safe_load_all(built) if doc]
    apply(cluster, namespace, "-f", "-", input=json.dumps({"kind": "List", "apiVersion": "v1",
                                                              "items": docs}))  # fmt: skip
    pods = {doc["metadata"]["name"]: wanted_pods(doc) for doc in docs}
    for name in pods:
        wait_active(cluster, namespace, name)
    return Samples(namespace, images, pods)


# --- Prometheus, as the Prometheus Operator would configure it ----------------------------------


def _snake(name: str) -> str:
    return "".join(f"_{c.lower()}" if c.isupper() else c for c in name)


def _meta_name(label: str) -> str:
    """A Kubernetes label as Prometheus' discovery spells it in a meta label."""
    return "".join(c if c.isalnum() else "_" for c in label)


def discovered_pods(cluster: Cluster, namespaces: list[str]) -> list[dict[str, Any]]:
    """The targets Prometheus' Kubernetes pod discovery finds in ``namespaces`` — one per
    declared container port, with its ``__meta_kubernetes_*`` labels — as a file_sd list.
    Debian's Prometheus is built without that discovery; the pods are real, the relabelling
    that follows is Prometheus' own."""
    targets = []
    for namespace in namespaces:
        for pod in cluster.core.list_namespaced_pod(namespace).items:
            if not pod.status.pod_ip:
                continue
            pod_labels: dict[str, str] = {
                "__meta_kubernetes_namespace": namespace,
                "__meta_kubernetes_pod_name": pod.metadata.name,
                "__meta_kubernetes_pod_ip": pod.status.pod_ip,
                "__meta_kubernetes_pod_phase": pod.status.phase,
            }
            for key, value in (pod.metadata.labels or {}).items():
                pod_labels[f"__meta_kubernetes_pod_label_{_meta_name(key)}"] = value
                pod_labels[f"__meta_kubernetes_pod_labelpresent_{_meta_name(key)}"] = "true"
            for container in pod.spec.containers:
                for port in container.ports or []:
                    labels = pod_labels | {
                        "__meta_kubernetes_pod_container_name": container.name,
                        "__meta_kubernetes_pod_container_port_name": port.name or "",
                        "__meta_kubernetes_pod_container_port_number": str(port.container_port),
                    }
                    address = f"{pod.status.pod_ip}:{port.container_port}"
                    targets.append({"targets": [address], "labels": labels})
    return targets


def podmonitor_scrape_config(podmonitor: dict[str, Any], targets_file: Path) -> dict[str, Any]:
    """The ``scrape_configs`` entry the Prometheus Operator generates for a PodMonitor with one
    podMetricsEndpoint — the selector and the port as keep rules, its own target labels, then
    the PodMonitor's relabelings — over the pods of ``targets_file`` (`discovered_pods`)."""
    spec = podmonitor["spec"]
    (endpoint,) = spec["podMetricsEndpoints"]
    meta = podmonitor["metadata"]
    relabel: list[dict[str, Any]] = [
        {"action": "drop", "source_labels": ["__meta_kubernetes_pod_phase"],
         "regex": "(Failed|Succeeded)"},
    ]  # fmt: skip
    for label, value in spec["selector"]["matchLabels"].items():
        relabel.append(
            {"action": "keep",
             "source_labels": [f"__meta_kubernetes_pod_label_{_meta_name(label)}"],
             "regex": value}
        )  # fmt: skip
    relabel += [
        {"action": "keep", "source_labels": ["__meta_kubernetes_pod_container_port_name"],
         "regex": endpoint["port"]},
        {"source_labels": ["__meta_kubernetes_namespace"], "target_label": "namespace"},
        {"source_labels": ["__meta_kubernetes_pod_container_name"], "target_label": "container"},
        {"source_labels": ["__meta_kubernetes_pod_name"], "target_label": "pod"},
        {"target_label": "job", "replacement": f"{meta['namespace']}/{meta['name']}"},
        {"target_label": "endpoint", "replacement": endpoint["port"]},
    ]  # fmt: skip
    relabel += [
        {_snake(key): value for key, value in rule.items()}
        for rule in endpoint.get("relabelings", [])
    ]
    return {
        "job_name": f"podMonitor/{meta['namespace']}/{meta['name']}/0",
        "honor_labels": bool(endpoint.get("honorLabels", False)),
        "metrics_path": endpoint.get("path", "/metrics"),
        "scheme": endpoint.get("scheme", "http"),
        "scrape_interval": "2s",
        "scrape_timeout": "2s",
        "file_sd_configs": [{"files": [str(targets_file)], "refresh_interval": "1s"}],
        "relabel_configs": relabel,
    }


def chart_podmonitor(kubeconfig: Path) -> dict[str, Any]:
    """The chart's PodMonitor of the databases, rendered as `helm install` would render it on a
    cluster with the Prometheus Operator."""
    rendered = helm(
        "template", RELEASE, str(CHART), "--namespace", OPERATOR_NAMESPACE,
        "--api-versions", "monitoring.coreos.com/v1/PodMonitor",
        "--set", "monitoring.databases.podMonitor.enabled=true",
        "--show-only", "templates/podmonitor.yaml",
        kubeconfig=kubeconfig,
    )  # fmt: skip
    found: dict[str, Any] = yaml.safe_load(rendered)
    return found
