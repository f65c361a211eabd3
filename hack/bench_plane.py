"""`make bench`'s control plane: a fresh etcd + kube-apiserver with the CRDs and the bench's
namespaces, the Databases it creates, what the API server counted, and a watch that times when
each Database was seen and reconciled.

Imported by hack/bench.py, which puts the repository root on ``sys.path`` (for ``tests``).
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import json
import shutil
import socket
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kubernetes import client, config
from tests.controlplane import ControlPlane, install_crds

from database_operator.api.models import GROUP, PLURAL, SHARD_LABEL, VERSION

ROOT = Path(__file__).resolve().parent.parent
NAMESPACES = [f"bench-{i}" for i in range(10)]
CONCURRENCY = 32
#: The annotation a latency measurement changes in a Database's podAnnotations.
CHANGE_ANNOTATION = f"bench.{GROUP.split('.', 1)[1]}/change"
WRITE_VERBS = {"POST", "PUT", "PATCH", "APPLY", "DELETE"}
READ_VERBS = {"GET", "LIST"}
#: What the operator (or the floor) works on; requests on other resources are the control
#: plane's own housekeeping.
RESOURCES = {
    "databases",
    "secrets",
    "deployments",
    "services",
    "persistentvolumeclaims",
    "events",
    "customresourcedefinitions",
    "namespaces",
}


def spec_for(i: int) -> dict[str, Any]:
    """The fixed mix: engines in turn; every third postgres/mysql keeps data on a volume."""
    engine = ("postgres", "mysql", "redis")[i % 3]
    spec: dict[str, Any] = {"engine": engine}
    if engine != "redis" and i % 9 < 3:
        spec["storage"] = {"size": "1Gi"}
    return spec


def database(i: int, shards: int = 0) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": f"db-{i:05d}", "namespace": NAMESPACES[i % len(NAMESPACES)]}
    if shards:
        meta["labels"] = {SHARD_LABEL: f"s{i % shards}"}
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "Database",
        "metadata": meta,
        "spec": spec_for(i),
    }


def new_api(kubeconfig: Path) -> client.ApiClient:
    configuration = client.Configuration()
    config.load_kube_config(config_file=str(kubeconfig), client_configuration=configuration)
    configuration.connection_pool_maxsize = CONCURRENCY
    return client.ApiClient(configuration)


def call(
    api: client.ApiClient,
    verb: str,
    path: str,
    body: Any = None,
    content_type: str = "application/json",
) -> dict[str, Any]:
    response = api.call_api(
        path,
        verb,
        body=body,
        header_params={"Accept": "application/json", "Content-Type": content_type},
        auth_settings=["BearerToken"],
        _preload_content=False,
        _return_http_data_only=True,
    )
    return json.loads(response.data or b"{}")  # type: ignore[no-any-return]


def db_path(namespace: str, name: str | None = None) -> str:
    path = f"/apis/{GROUP}/{VERSION}/namespaces/{namespace}/{PLURAL}"
    return f"{path}/{name}" if name else path


# --- what the API server counted ------------------------------------------------------------------


def apiserver_metrics(api: client.ApiClient) -> str:
    """kube-apiserver's /metrics, as text."""
    response = api.call_api(
        "/metrics",
        "GET",
        auth_settings=["BearerToken"],
        _preload_content=False,
        _return_http_data_only=True,
    )
    return response.data.decode()  # type: ignore[no-any-return]


def request_totals(api: client.ApiClient) -> dict[tuple[str, str], float]:
    """apiserver_request_total summed by (verb, resource[/subresource])."""
    totals: dict[tuple[str, str], float] = {}
    for line in apiserver_metrics(api).splitlines():
        if not line.startswith("apiserver_request_total{"):
            continue
        text, value = line[len("apiserver_request_total{") :].rsplit("} ", 1)
        labels = dict(p.split("=", 1) for p in text.replace('"', "").split(",") if "=" in p)
        if labels.get("resource") not in RESOURCES:
            continue
        resource = labels["resource"] + (
            f"/{labels['subresource']}" if labels.get("subresource") else ""
        )
        key = (labels.get("verb", ""), resource)
        totals[key] = totals.get(key, 0.0) + float(value)
    return totals


@dataclass
class Requests:
    """Requests between two scrapes, less the bench's own."""

    by_key: dict[tuple[str, str], float]

    @classmethod
    def between(
        cls,
        before: dict[tuple[str, str], float],
        after: dict[tuple[str, str], float],
        own: dict[tuple[str, str], float] | None = None,
    ) -> Requests:
        own = own or {}
        return cls(
            {
                k: after.get(k, 0.0) - before.get(k, 0.0) - own.get(k, 0.0)
                for k in after
                if after.get(k, 0.0) - before.get(k, 0.0) - own.get(k, 0.0)
            }
        )

    def count(self, verbs: set[str], resource: str | None = None) -> float:
        return sum(
            v
            for (verb, res), v in self.by_key.items()
            if verb in verbs and (resource is None or res.split("/")[0] == resource)
        )

    @property
    def writes(self) -> float:
        return self.count(WRITE_VERBS) - self.events

    @property
    def events(self) -> float:
        return self.count(WRITE_VERBS, "events")

    @property
    def reads(self) -> float:
        return self.count(READ_VERBS)

    def summary(self) -> dict[str, float]:
        return {f"{verb} {res}": v for (verb, res), v in sorted(self.by_key.items())}


# --- watching the Databases -----------------------------------------------------------------------


class Watcher:
    """Streams every Database event; remembers when each generation was first seen, and when
    each Database's status first observed it."""

    def __init__(self, api: client.ApiClient) -> None:
        self.api = api
        self.seen: dict[tuple[str, str, int], float] = {}
        self.observed: dict[tuple[str, str, int], float] = {}
        self.reconciled: set[tuple[str, str]] = set()
        self.changed = threading.Condition()
        self._response: Any = None
        self._closed = False
        #: How often the watch had to be started again (each time after a fresh list).
        self.restarts = 0
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        """List, then watch from the list's version; again whenever the stream ends (the API
        server drops a watcher that falls behind, e.g. when the machine is saturated)."""
        while not self._closed:
            with contextlib.suppress(Exception):
                listed = call(self.api, "GET", f"/apis/{GROUP}/{VERSION}/{PLURAL}")
                now = time.monotonic()
                for item in listed.get("items") or []:
                    self._event(item, now)
                self._response = self.api.call_api(
                    f"/apis/{GROUP}/{VERSION}/{PLURAL}",
                    "GET",
                    query_params=[
                        ("watch", "true"),
                        ("resourceVersion", listed["metadata"]["resourceVersion"]),
                    ],
                    auth_settings=["BearerToken"],
                    _preload_content=False,
                    _return_http_data_only=True,
                    _request_timeout=3600,
                )
                buffer = b""
                for chunk in self._response.stream(65536, decode_content=False):
                    buffer += chunk
                    *lines, buffer = buffer.split(b"\n")
                    now = time.monotonic()
                    for line in lines:
                        if line.strip():
                            self._event(json.loads(line)["object"], now)
            if not self._closed:
                self.restarts += 1
                time.sleep(0.2)

    def _event(self, obj: dict[str, Any], now: float) -> None:
        meta = obj.get("metadata", {})
        if "name" not in meta:
            return  # an ERROR event (e.g. 410 Gone): the next list catches up
        key = (meta.get("namespace", ""), meta.get("name", ""))
        generation = int(meta.get("generation", 0))
        self.seen.setdefault((*key, generation), now)
        observed = (obj.get("status") or {}).get("observedGeneration")
        if observed:
            self.observed.setdefault((*key, int(observed)), now)
            with self.changed:
                self.reconciled.add(key)
                self.changed.notify_all()

    def wait_reconciled(self, count: int, timeout: float) -> float:
        deadline = time.monotonic() + timeout
        with self.changed:
            while len(self.reconciled) < count:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError(f"{len(self.reconciled)} of {count} reconciled")
                self.changed.wait(min(left, 1.0))
        return time.monotonic()

    def close(self) -> None:
        """Stop streaming: shut the socket down (closing it from here would wait for the read
        in progress)."""
        self._closed = True
        with contextlib.suppress(Exception):
            self._response.connection.sock.shutdown(socket.SHUT_RDWR)


@contextlib.contextmanager
def control_plane(cpus: str | None = None) -> Iterator[tuple[ControlPlane, client.ApiClient]]:
    """A fresh control plane with the CRDs and NAMESPACES; etcd and kube-apiserver on ``cpus``
    (a taskset list, e.g. "0") when given."""
    workdir = Path(tempfile.mkdtemp(prefix="database-operator-bench-"))
    try:
        with ControlPlane(workdir, cpus=cpus) as plane:
            install_crds(plane.kubeconfig)
            api = new_api(plane.kubeconfig)
            for namespace in NAMESPACES:
                call(
                    api,
                    "POST",
                    "/api/v1/namespaces",
                    {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}},
                )
            # The CRD is Established; wait until its resource is served too.
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:
                with contextlib.suppress(Exception):
                    call(api, "GET", db_path(NAMESPACES[0]))
                    break
                time.sleep(0.1)
            yield plane, api
            api.close()
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def create_databases(api: client.ApiClient, n: int, shards: int = 0, first: int = 0) -> float:
    """Create Databases ``first`` to N - 1, 32 at a time; returns when the first create was
    sent."""
    started = time.monotonic()
    with concurrent.futures.ThreadPoolExecutor(CONCURRENCY) as pool:
        list(
            pool.map(
                lambda i: call(
                    api, "POST", db_path(database(i)["metadata"]["namespace"]), database(i, shards)
                ),
                range(first, n),
            )
        )
    return started
