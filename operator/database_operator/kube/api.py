"""The calls of the Kubernetes API: get, list, create, apply, patch, delete (and watch, through
watching.py).

Objects go in and come out as plain camelCase dicts, exactly as the API server speaks them, so
the pure builders and the status function never see client model classes. The official client
is synchronous; each call runs in a thread of the Kube's own pool (as many threads as pooled
connections), so Kopf's event loop never blocks and concurrent calls never queue for a thread.
"""

from __future__ import annotations

import asyncio
import copy
import json
import re
from collections.abc import AsyncIterator, Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Protocol

from kubernetes import client, config
from kubernetes.client.exceptions import ApiException
from urllib3.exceptions import HTTPError

from database_operator import tracing
from database_operator.api.backup import BACKUP_PLURAL
from database_operator.api.models import GROUP, KIND, PLURAL, VERSION
from database_operator.kube import watching
from database_operator.kube.errors import ApiError, NotLeadingError, api_error, stale_read
from database_operator.manifest import Manifest
from database_operator.ownership import FIELD_MANAGER

#: kind -> (API path prefix, plural) for the kinds the operator reads and writes.
RESOURCES: dict[str, tuple[str, str]] = {
    "Secret": ("/api/v1", "secrets"),
    "Service": ("/api/v1", "services"),
    "PersistentVolumeClaim": ("/api/v1", "persistentvolumeclaims"),
    "Deployment": ("/apis/apps/v1", "deployments"),
    "Database": (f"/apis/{GROUP}/{VERSION}", PLURAL),
    "DatabaseBackup": (f"/apis/{GROUP}/{VERSION}", BACKUP_PLURAL),
    "Event": ("/api/v1", "events"),
    # Backups and restores run in Jobs; the results their agents report are read from the pods.
    "Job": ("/apis/batch/v1", "jobs"),
    "Pod": ("/api/v1", "pods"),
    # spec.failover: the ConfigMap that names an instance's target primary.
    "ConfigMap": ("/api/v1", "configmaps"),
    # spec.networkPolicy: what may reach the Database's pods.
    "NetworkPolicy": ("/apis/networking.k8s.io/v1", "networkpolicies"),
    # What the webhooks read (a namespace's quota) and write (their own registration).
    "Namespace": ("/api/v1", "namespaces"),
    "ValidatingWebhookConfiguration": (
        "/apis/admissionregistration.k8s.io/v1",
        "validatingwebhookconfigurations",
    ),
    "MutatingWebhookConfiguration": (
        "/apis/admissionregistration.k8s.io/v1",
        "mutatingwebhookconfigurations",
    ),
    "CustomResourceDefinition": ("/apis/apiextensions.k8s.io/v1", "customresourcedefinitions"),
    # Leader election (HA): the Lease whose holder reconciles.
    "Lease": ("/apis/coordination.k8s.io/v1", "leases"),
    # Read only: the peering objects of releases before leader election (see leader.py).
    "KopfPeering": ("/apis/kopf.dev/v1", "kopfpeerings"),
    "ClusterKopfPeering": ("/apis/kopf.dev/v1", "clusterkopfpeerings"),
}


def object_at(path: str) -> tuple[str, str, str] | None:
    """(kind, namespace, name) of a namespaced object's API path (a subresource's too)."""
    for kind, (prefix, plural) in RESOURCES.items():
        head = f"{prefix}/namespaces/"
        if path.startswith(head):
            parts = path[len(head) :].split("/")
            if len(parts) >= 3 and parts[1] == plural:
                return kind, parts[0], parts[2]
    return None


def new_api_client(connections: int = 16) -> client.ApiClient:
    """A client for the cluster the operator runs in, else the current kubeconfig context,
    keeping up to ``connections`` connections open (urllib3's default of 10 would make calls
    beyond it wait for a connection, or open and drop one each time)."""
    configuration = client.Configuration()
    try:
        config.load_incluster_config(client_configuration=configuration)
    except config.ConfigException:
        config.load_kube_config(client_configuration=configuration)
    configuration.connection_pool_maxsize = connections
    return client.ApiClient(configuration)


class KubeApi(Protocol):
    """What the reconcile needs of the API: `Kube`, `cache.CachedKube`, or a test's fake."""

    field_manager: str

    def cached(self, kind: str) -> bool:
        """Whether ``get`` of ``kind`` answers from a watch's cache rather than the server."""
        ...

    def free(self, kind: str, namespace: str, name: str) -> bool:
        """Whether the watches show that no object of ``kind`` has the name (False: they
        cannot say; ask the server)."""
        ...

    async def get(self, kind: str, namespace: str, name: str) -> Manifest | None: ...
    async def get_live(self, kind: str, namespace: str, name: str) -> Manifest | None: ...
    def list_pages(
        self, kind: str, namespace: str | None, selector: str | None = None, limit: int = 250
    ) -> AsyncIterator[list[Manifest]]: ...
    async def apply(self, manifest: Manifest, dry_run: bool = False) -> Manifest: ...
    async def create(self, manifest: Manifest, exist_ok: bool = False) -> Manifest | None: ...
    async def merge_patch(
        self, kind: str, namespace: str, name: str, patch: Manifest, sub: str | None = None
    ) -> Manifest: ...
    async def json_patch(
        self,
        kind: str,
        namespace: str,
        name: str,
        operations: list[Manifest],
        missing_ok: bool = False,
    ) -> Manifest: ...
    async def patch_status(
        self, namespace: str, name: str, status: Manifest, kind: str = KIND
    ) -> Manifest: ...
    async def delete(
        self, kind: str, namespace: str, name: str, uid: str, grace_seconds: int | None = None
    ) -> bool: ...


#: An API path: /api/v1 or /apis/GROUP/VERSION, then [namespaces/NS/]RESOURCE[/NAME[/SUB]].
_API_PATH = re.compile(
    r"^/(?:api/v1|apis/[^/]+/[^/]+)(?:/namespaces/(?P<namespace>[^/]+))?"
    r"/(?P<resource>[^/]+)(?:/(?P<name>[^/]+))?(?:/(?P<sub>[^/]+))?$"
)


def describe(verb: str, path: str) -> tuple[str, dict[str, str]]:
    """A request's span name ("PATCH deployments") and attributes."""
    attributes = {"http.request.method": verb, "url.path": path}
    found = _API_PATH.match(path)
    if found is None:  # discovery, e.g. GET /apis/databases.example.com/v1
        return f"{verb} {path}", attributes
    resource = found["resource"] + (f"/{found['sub']}" if found["sub"] else "")
    attributes["k8s.resource"] = resource
    for key, group in (("k8s.namespace.name", "namespace"), ("k8s.object.name", "name")):
        if found[group]:
            attributes[key] = found[group]
    return f"{verb} {resource}", attributes


class Kube:
    """Typed-enough access to the few resources the operator manages.

    ``on_error`` is told of every failed call (metrics count them by status). Calls run in a
    pool of as many threads as the client keeps connections.
    """

    def __init__(
        self,
        api: client.ApiClient,
        field_manager: str = FIELD_MANAGER,
        on_error: Callable[[ApiError], None] | None = None,
    ) -> None:
        self.api = api
        self.field_manager = field_manager
        self.on_error = on_error
        threads = int(api.configuration.connection_pool_maxsize or 10)
        self._threads = ThreadPoolExecutor(threads, thread_name_prefix="kube")
        #: Asked before every write; a write it refuses raises NotLeadingError unsent.
        self.fence: Callable[[], bool] | None = None

    def fenced(self, may_write: Callable[[], bool]) -> Kube:
        """This Kube (the same connections and threads) writing only while ``may_write``."""
        clone = copy.copy(self)
        clone.fence = may_write
        return clone

    @staticmethod
    def path(
        kind: str, namespace: str | None, name: str | None = None, sub: str | None = None
    ) -> str:
        """The API path of a kind's collection, or of one object; cluster-scoped: no namespace."""
        prefix, plural = RESOURCES[kind]
        path = f"{prefix}/namespaces/{namespace}/{plural}" if namespace else f"{prefix}/{plural}"
        if name:
            path += f"/{name}"
        if sub:
            path += f"/{sub}"
        return path

    def _call(
        self,
        verb: str,
        path: str,
        *,
        body: Any = None,
        content_type: str = "application/json",
        query: list[tuple[str, str]] | None = None,
        expected: tuple[int, ...] = (),
        accept: str = "application/json",
    ) -> tuple[int, Manifest]:
        """One request: its HTTP status and answer. ``expected`` error statuses are answers,
        not errors worth counting."""
        try:
            response = self.api.call_api(
                path,
                verb,
                query_params=query or [],
                header_params={"Accept": accept, "Content-Type": content_type},
                body=body,
                auth_settings=["BearerToken"],
                _preload_content=False,
                _return_http_data_only=True,
                _request_timeout=30,
            )
        except (ApiException, HTTPError, OSError) as raw:
            error = api_error(raw, verb, path)
            if self.on_error is not None and error.status not in expected:
                self.on_error(error)
            raise error from raw
        return response.status, json.loads(response.data or b"{}")

    async def _acall(self, verb: str, path: str, **kwargs: Any) -> Manifest:
        """The request in the client's threads, as a span of whatever is current (a reconcile's)."""
        if verb != "GET" and self.fence is not None and not self.fence():
            raise NotLeadingError(verb, path)
        loop = asyncio.get_running_loop()
        with tracing.span(*describe(verb, path), record_errors=False) as span:
            try:
                status, answer = await loop.run_in_executor(
                    self._threads, lambda: self._call(verb, path, **kwargs)
                )
            except ApiError as error:
                span.set_attribute("http.response.status_code", error.status)
                if error.status not in kwargs.get("expected", ()):
                    tracing.fail(span, error)
                raise
            span.set_attribute("http.response.status_code", status)
            return answer

    def close(self) -> None:
        self._threads.shutdown(wait=False, cancel_futures=True)
        self.api.close()

    # --- reads ----------------------------------------------------------------------------------

    async def get(self, kind: str, namespace: str, name: str) -> Manifest | None:
        """The object, or None when it does not exist."""
        try:
            return await self._acall("GET", self.path(kind, namespace, name), expected=(404,))
        except ApiError as error:
            if error.not_found:
                return None
            raise

    #: The API server is all a Kube knows: its reads are always live.
    get_live = get

    def cached(self, kind: str) -> bool:
        return False

    def free(self, kind: str, namespace: str, name: str) -> bool:
        return False

    async def _pages(
        self,
        kind: str,
        namespace: str | None,
        selector: str | None,
        limit: int,
        accept: str,
        *,
        fields: str = "",
    ) -> AsyncIterator[Manifest]:
        """The pages of a listing, ``limit`` objects each, all of one snapshot."""
        query = [("limit", str(limit))] + ([("labelSelector", selector)] if selector else [])
        query += [("fieldSelector", fields)] if fields else []
        token = ""
        while True:
            page = await self._acall(
                "GET",
                self.path(kind, namespace),
                query=query + ([("continue", token)] if token else []),
                accept=accept,
            )
            yield page
            token = page.get("metadata", {}).get("continue") or ""
            if not token:
                return

    async def list_pages(
        self, kind: str, namespace: str | None, selector: str | None = None, limit: int = 250
    ) -> AsyncIterator[list[Manifest]]:
        """Every object of ``kind`` (in ``namespace``, else everywhere) that ``selector``
        selects, ``limit`` at a time: a large listing never sits in memory whole."""
        # A list's items name neither kind nor apiVersion: the list does.
        api_version = RESOURCES[kind][0].removeprefix("/apis/").removeprefix("/api/")
        async for page in self._pages(kind, namespace, selector, limit, "application/json"):
            yield [
                {**item, "kind": kind, "apiVersion": api_version}
                for item in page.get("items") or []
            ]

    async def list_objects(
        self,
        kind: str,
        namespace: str | None,
        selector: str | None = None,
        limit: int = 250,
        fields: str = "",
    ) -> tuple[list[Manifest], str]:
        """Every object of ``kind`` (in ``namespace``, else everywhere) that ``selector`` (and
        the field selector ``fields``) selects, without managedFields, and the version of the
        listing (to watch from)."""
        api_version = RESOURCES[kind][0].removeprefix("/apis/").removeprefix("/api/")
        items: list[Manifest] = []
        version = ""
        pages = self._pages(kind, namespace, selector, limit, "application/json", fields=fields)
        async for page in pages:
            for item in page.get("items") or []:
                (item.get("metadata") or {}).pop("managedFields", None)
                items.append({**item, "kind": kind, "apiVersion": api_version})
            version = version or str(page.get("metadata", {}).get("resourceVersion", ""))
        return items, version

    async def list_metadata(
        self,
        kind: str,
        namespace: str | None,
        selector: str | None = None,
        limit: int = 500,
        fields: str = "",
    ) -> tuple[list[Manifest], str]:
        """Who is there: for every object of ``kind`` (in ``namespace``, else everywhere) that
        ``selector`` (and the field selector ``fields``) selects, its identity (name,
        namespace, uid, resourceVersion) and owners (ownerReferences, annotations) — no bodies,
        no managedFields — and the version of the listing."""
        accept = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1"
        items: list[Manifest] = []
        version = ""
        async for page in self._pages(kind, namespace, selector, limit, accept, fields=fields):
            for item in page.get("items") or []:
                meta = watching.identity(item.get("metadata") or {})
                items.append({"kind": kind, "metadata": meta})
            version = version or str(page.get("metadata", {}).get("resourceVersion", ""))
        return items, version

    async def next_change(
        self, kind: str, namespace: str, name: str, resource_version: str, timeout: float
    ) -> bool:
        """Wait (at most ``timeout`` seconds) until the object changes after
        ``resource_version``: a watch of that one object, ended by its first event."""
        path = self.path(kind, namespace)
        return await watching.next_change(
            self.api, path, name, resource_version, timeout, threads=self._threads
        )

    async def watch(
        self,
        kind: str,
        namespace: str | None,
        selector: str,
        resource_version: str,
        *,
        deliver: Callable[[str, Manifest], None],
        metadata_only: bool = False,
        fields: str = "",
        timeout_s: int = watching.WATCH_TIMEOUT_S,
    ) -> str:
        """Follow a watch of ``kind`` (in ``namespace``, else everywhere) from
        ``resource_version`` until the server ends it: ``watching.watch``. Returns the version
        to go on from; one too old to resume from raises ApiError (``expired``: list afresh)."""
        return await watching.watch(
            self.api,
            kind,
            self.path(kind, namespace),
            selector,
            resource_version,
            deliver=deliver,
            metadata_only=metadata_only,
            fields=fields,
            timeout_s=timeout_s,
        )

    async def serves(self, group_version: str, resources: tuple[str, ...] = ()) -> bool:
        """Whether the API server serves ``group/version`` yet, with each of ``resources`` (a new
        CRD takes a moment; two CRDs of one group appear one after the other)."""
        try:
            found = await self._acall("GET", f"/apis/{group_version}", expected=(404,))
        except ApiError as error:
            if error.not_found:
                return False
            raise
        served = {resource.get("name") for resource in found.get("resources") or []}
        return all(resource in served for resource in resources)

    # --- writes ---------------------------------------------------------------------------------

    async def apply(self, manifest: Manifest, dry_run: bool = False) -> Manifest:
        """Server-side apply under our field manager: we own the fields we send, nothing else.
        ``dry_run``: the API server answers with what it would store, and stores nothing."""
        meta = manifest["metadata"]
        query = [("fieldManager", self.field_manager), ("force", "true")]
        return await self._acall(
            "PATCH",
            self.path(manifest["kind"], meta["namespace"], meta["name"]),
            body=manifest,
            content_type="application/apply-patch+yaml",
            query=query + ([("dryRun", "All")] if dry_run else []),
        )

    async def create(self, manifest: Manifest, exist_ok: bool = False) -> Manifest | None:
        """Create the object; with ``exist_ok`` an existing namesake is fine (returns None)."""
        meta = manifest["metadata"]
        try:
            return await self._acall(
                "POST",
                self.path(manifest["kind"], meta.get("namespace")),
                body=manifest,
                query=[("fieldManager", self.field_manager)],
                expected=(409,) if exist_ok else (),
            )
        except ApiError as error:
            if exist_ok and error.stale:  # 409: it stands there already
                return None
            raise

    async def replace(self, manifest: Manifest) -> Manifest:
        """PUT the whole object; its metadata.resourceVersion makes a concurrent change a 409."""
        meta = manifest["metadata"]
        return await self._acall(
            "PUT",
            self.path(manifest["kind"], meta.get("namespace"), meta["name"]),
            body=manifest,
            query=[("fieldManager", self.field_manager)],
        )

    async def merge_patch(
        self, kind: str, namespace: str, name: str, patch: Manifest, sub: str | None = None
    ) -> Manifest:
        return await self._acall(
            "PATCH",
            self.path(kind, namespace, name, sub),
            body=patch,
            content_type="application/merge-patch+json",
            query=[("fieldManager", self.field_manager)],
        )

    async def json_patch(
        self,
        kind: str,
        namespace: str,
        name: str,
        operations: list[Manifest],
        missing_ok: bool = False,
    ) -> Manifest:
        """A JSON patch (RFC 6902); its ``test`` operations make it all-or-nothing (a failed
        one raises StaleReadError). With ``missing_ok`` an absent object is no error (returns
        {})."""
        try:
            return await self._acall(
                "PATCH",
                self.path(kind, namespace, name),
                body=operations,
                content_type="application/json-patch+json",
                query=[("fieldManager", self.field_manager)],
                expected=(404,) if missing_ok else (),
            )
        except ApiError as error:
            if missing_ok and error.not_found:
                return {}
            if (stale := stale_read(error)) is not None:
                raise stale from error
            raise

    async def patch_status(
        self, namespace: str, name: str, status: Manifest, kind: str = KIND
    ) -> Manifest:
        """Merge-patch a Database's (or another kind's) status through the status subresource."""
        return await self.merge_patch(kind, namespace, name, {"status": status}, "status")

    async def delete(
        self, kind: str, namespace: str, name: str, uid: str, grace_seconds: int | None = None
    ) -> bool:
        """Delete the object with this uid (never a namesake created since); False if gone.
        Its dependents go too (in the background): batch/v1 would orphan a Job's pods, left
        running without it, unless told. ``grace_seconds``: a pod's grace period instead of
        its own (never 0, which would let the object go before its containers have)."""
        body: Manifest = {
            "kind": "DeleteOptions",
            "apiVersion": "v1",
            "preconditions": {"uid": uid},
            "propagationPolicy": "Background",
        }
        if grace_seconds is not None:
            body["gracePeriodSeconds"] = max(1, grace_seconds)
        try:
            await self._acall(
                "DELETE", self.path(kind, namespace, name), body=body, expected=(404, 409)
            )
        except ApiError as error:
            if error.stale and await self._replaced(kind, namespace, name, uid):
                return False  # the uid precondition failed: a namesake stands there now
            if error.not_found:
                return False
            raise
        return True

    async def _replaced(self, kind: str, namespace: str, name: str, uid: str) -> bool:
        """After a 409 to a delete: whether the object with ``uid`` is gone (a namesake may stand
        in its place). A conflict of any other kind leaves it there, and the delete is retried."""
        current = await self.get(kind, namespace, name)
        return current is None or current["metadata"].get("uid") != uid
