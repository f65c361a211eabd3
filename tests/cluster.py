"""What integration tests hold on to: the control plane's kubeconfig, API clients, kubectl."""

from __future__ import annotations

import contextlib
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from kubernetes import client, config

from tests.controlplane import (
    ControlPlane,
    install_crds,
    kubectl_process,
    temporary_control_plane,
)

T = TypeVar("T")

GROUP, VERSION, PLURAL = "databases.example.com", "v1", "databases"
BACKUPS = "databasebackups"


@dataclass
class Cluster:
    """A running control plane as tests use it."""

    plane: ControlPlane
    api: client.ApiClient

    @property
    def kubeconfig(self) -> Path:
        return self.plane.kubeconfig

    @classmethod
    def connect(cls, plane: ControlPlane) -> Cluster:
        return cls(plane, config.new_client_from_config(config_file=str(plane.kubeconfig)))

    @property
    def custom(self) -> client.CustomObjectsApi:
        return client.CustomObjectsApi(self.api)

    @property
    def core(self) -> client.CoreV1Api:
        return client.CoreV1Api(self.api)

    @property
    def apps(self) -> client.AppsV1Api:
        return client.AppsV1Api(self.api)

    @property
    def batch(self) -> client.BatchV1Api:
        return client.BatchV1Api(self.api)

    def kubectl(self, *args: str, check: bool = True, input: str | None = None) -> str:
        """Run kubectl against this control plane and return its stdout."""
        done = kubectl_process(self.kubeconfig, *args, stdin=input)
        if check and done.returncode != 0:
            raise AssertionError(f"kubectl {' '.join(args)} failed: {done.stderr}")
        return done.stdout + ("" if check else done.stderr)

    @contextlib.contextmanager
    def scratch_namespace(self, prefix: str) -> Iterator[str]:
        """A fresh namespace, deleted afterwards (it stays Terminating where no namespace
        controller runs; that is harmless)."""
        name = f"{prefix}-{uuid.uuid4().hex[:8]}"
        self.core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=name)))
        try:
            yield name
        finally:
            self.core.delete_namespace(name)

    # --- objects of the user's own -------------------------------------------------------------

    def create_secret(
        self, namespace: str, name: str, values: dict[str, str], **meta: Any
    ) -> client.V1Secret:
        """A Secret made by the user (not the operator), from plain ``values``."""
        return self.core.create_namespaced_secret(
            namespace,
            client.V1Secret(metadata=client.V1ObjectMeta(name=name, **meta), string_data=values),
        )

    def create_claim(self, namespace: str, name: str) -> client.V1PersistentVolumeClaim:
        """A 1Gi PersistentVolumeClaim made by the user (not the operator)."""
        return self.core.create_namespaced_persistent_volume_claim(
            namespace,
            client.V1PersistentVolumeClaim(
                metadata=client.V1ObjectMeta(name=name),
                spec=client.V1PersistentVolumeClaimSpec(
                    access_modes=["ReadWriteOnce"],
                    resources=client.V1VolumeResourceRequirements(requests={"storage": "1Gi"}),
                ),
            ),
        )

    # --- Databases --------------------------------------------------------------------------

    def create_db(self, namespace: str, name: str, spec: dict[str, Any]) -> dict[str, Any]:
        body = {
            "apiVersion": f"{GROUP}/{VERSION}",
            "kind": "Database",
            "metadata": {"name": name},
            "spec": spec,
        }
        return self.custom.create_namespaced_custom_object(  # type: ignore[no-any-return]
            GROUP, VERSION, namespace, PLURAL, body
        )

    def get_db(self, namespace: str, name: str) -> dict[str, Any]:
        return self.custom.get_namespaced_custom_object(  # type: ignore[no-any-return]
            GROUP, VERSION, namespace, PLURAL, name
        )

    def delete_db(self, namespace: str, name: str) -> None:
        self.custom.delete_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, name)

    def db_gone(self, namespace: str, name: str) -> bool:
        try:
            self.get_db(namespace, name)
        except client.ApiException as error:
            if error.status == 404:
                return True
            raise
        return False

    def patch_db(self, namespace: str, name: str, patch: dict[str, Any]) -> dict[str, Any]:
        return self.custom.patch_namespaced_custom_object(  # type: ignore[no-any-return]
            GROUP, VERSION, namespace, PLURAL, name, patch
        )

    # --- DatabaseBackups ----------------------------------------------------------------------

    def create_backup(self, namespace: str, name: str, spec: dict[str, Any]) -> dict[str, Any]:
        body = {
            "apiVersion": f"{GROUP}/{VERSION}",
            "kind": "DatabaseBackup",
            "metadata": {"name": name},
            "spec": spec,
        }
        return self.custom.create_namespaced_custom_object(  # type: ignore[no-any-return]
            GROUP, VERSION, namespace, BACKUPS, body
        )

    def get_backup(self, namespace: str, name: str) -> dict[str, Any]:
        return self.custom.get_namespaced_custom_object(  # type: ignore[no-any-return]
            GROUP, VERSION, namespace, BACKUPS, name
        )

    def list_backups(self, namespace: str, selector: str = "") -> list[dict[str, Any]]:
        found = self.custom.list_namespaced_custom_object(
            GROUP, VERSION, namespace, BACKUPS, label_selector=selector
        )
        return list(found["items"])

    def delete_backup(self, namespace: str, name: str) -> None:
        self.custom.delete_namespaced_custom_object(GROUP, VERSION, namespace, BACKUPS, name)

    def backup_gone(self, namespace: str, name: str) -> bool:
        try:
            self.get_backup(namespace, name)
        except client.ApiException as error:
            if error.status == 404:
                return True
            raise
        return False

    def s3_credentials(self, namespace: str, name: str = "backup-credentials") -> None:
        """A Secret with an S3 access key, as a user makes one for spec.backup.destination."""
        self.create_secret(
            namespace,
            name,
            {"AWS_ACCESS_KEY_ID": "backup-user", "AWS_SECRET_ACCESS_KEY": "not-a-real-secret"},
        )


@contextlib.contextmanager
def connected(plane: ControlPlane) -> Iterator[Cluster]:
    """``plane`` as tests use it, its API client closed after."""
    cluster = Cluster.connect(plane)
    try:
        yield cluster
    finally:
        cluster.api.close()


@contextlib.contextmanager
def own_cluster(*, crds: bool = False) -> Iterator[Cluster]:
    """A control plane of one's own, started in a temporary folder, stopped and removed after:
    with the project's CRDs, or without (for tests that install them, or other versions of them,
    themselves)."""
    with temporary_control_plane() as plane:
        if crds:
            install_crds(plane.kubeconfig)
        with connected(plane) as cluster:
            yield cluster


def wait_for(
    probe: Callable[[], T | None],
    timeout: float = 30.0,
    interval: float = 0.2,
    what: str = "condition",
) -> T:
    """Poll ``probe`` until it returns something truthy; fail with ``what`` after ``timeout``."""
    deadline = time.monotonic() + timeout
    last: T | None = None
    while time.monotonic() < deadline:
        last = probe()
        if last:
            return last
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout}s waiting for {what} (last: {last!r})")


def condition(db: dict[str, Any], type_: str) -> dict[str, Any] | None:
    """The condition of ``type_`` in a Database's status, or None."""
    for found in db.get("status", {}).get("conditions") or []:
        if found["type"] == type_:
            return found  # type: ignore[no-any-return]
    return None


def play_kubelet(
    cluster: Cluster,
    namespace: str,
    name: str,
    ready: int | None = None,
    replicas_ready: int | None = None,
) -> None:
    """No kubelet runs here: report a Database's pods as the controllers would, through the
    Deployments' status subresource — the primary's (Deployment ``name``, ``ready`` of its pods
    ready, all by default) and, if there is one, the read replicas' (``<name>-replicas``,
    ``replicas_ready`` ready, all by default)."""
    report_pods(cluster, namespace, name, ready)
    try:
        report_pods(cluster, namespace, f"{name}-replicas", replicas_ready)
    except client.ApiException as error:
        if error.status != 404:
            raise


def report_pods(cluster: Cluster, namespace: str, name: str, ready: int | None) -> None:
    """Write one Deployment's status: ``ready`` of its spec.replicas ready (all by default)."""
    deployment = cluster.apps.read_namespaced_deployment(name, namespace)
    replicas = deployment.spec.replicas or 0
    ready = replicas if ready is None else ready
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    rolled_out = ready == replicas
    conditions = [
        # What the Deployment controller reports; kstatus (helm --wait) reads these.
        {
            "type": "Available",
            "status": "True" if rolled_out else "False",
            "reason": "MinimumReplicasAvailable" if rolled_out else "MinimumReplicasUnavailable",
            "lastUpdateTime": now,
            "lastTransitionTime": now,
        },
        {
            "type": "Progressing",
            "status": "True",
            "reason": "NewReplicaSetAvailable" if rolled_out else "ReplicaSetUpdated",
            "lastUpdateTime": now,
            "lastTransitionTime": now,
        },
    ]
    cluster.apps.patch_namespaced_deployment_status(
        name,
        namespace,
        {
            "status": {
                "observedGeneration": deployment.metadata.generation,
                "replicas": replicas,
                "updatedReplicas": replicas,
                "readyReplicas": ready,
                "availableReplicas": ready,
                "conditions": conditions,
            }
        },
    )


#: Verbs that change something, as kube-apiserver labels its request counter.
WRITE_VERBS = {"POST", "PUT", "PATCH", "APPLY", "DELETE", "DELETECOLLECTION"}
#: Resources the operator (and Kopf on its behalf) could write.
OPERATOR_RESOURCES = {
    "databases",
    "deployments",
    "services",
    "secrets",
    "persistentvolumeclaims",
    "events",
}


def api_requests(cluster: Cluster) -> list[tuple[dict[str, str], float]]:
    """Every series of kube-apiserver's own `apiserver_request_total` counter, as (labels,
    count): a count no client can fudge."""
    response = cluster.api.call_api(
        "/metrics",
        "GET",
        auth_settings=["BearerToken"],
        _preload_content=False,
        _return_http_data_only=True,
    )
    series = []
    for line in response.data.decode().splitlines():
        if not line.startswith("apiserver_request_total{"):
            continue
        labels_text, value = line[len("apiserver_request_total{") :].rsplit("} ", 1)
        labels = dict(
            part.split("=", 1) for part in labels_text.replace('"', "").split(",") if "=" in part
        )
        series.append((labels, float(value)))
    return series


def write_requests(cluster: Cluster, successful_only: bool = False) -> dict[str, float]:
    """Write requests the API server has served so far to what the operator writes, by
    "VERB resource[/subresource]"; ``successful_only``: only those answered 2xx."""
    counts: dict[str, float] = {}
    for labels, value in api_requests(cluster):
        if (
            labels.get("verb") not in WRITE_VERBS
            or labels.get("resource") not in OPERATOR_RESOURCES
        ):
            continue
        if successful_only and not labels.get("code", "").startswith("2"):
            continue
        key = f"{labels['verb']} {labels['resource']}"
        if labels.get("subresource"):
            key += f"/{labels['subresource']}"
        counts[key] = counts.get(key, 0.0) + value
    return counts


def request_counts(cluster: Cluster, verb: str, resource: str, code: str | None = None) -> float:
    """How many ``verb`` requests on ``resource`` the API server has answered (with ``code``)."""
    return sum(
        value
        for labels, value in api_requests(cluster)
        if labels.get("verb") == verb
        and labels.get("resource") == resource
        and not labels.get("subresource")
        and (code is None or labels.get("code") == code)
    )
