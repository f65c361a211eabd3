"""The only module that talks to the Kubernetes API: get, create, apply, patch, delete.

Objects go in and come out as plain camelCase dicts, exactly as the API server speaks them, so
the pure builders and the status function never see client model classes. The official client
is synchronous; each call runs in a thread of the Kube's own pool (as many threads as pooled
connections), so Kopf's event loop never blocks and concurrent calls never queue for a thread.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import json
import re
import threading
from collections.abc import AsyncIterator, Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar, cast

from kubernetes import client, config
from kubernetes.client.exceptions import ApiException
from kubernetes.watch.watch import iter_resp_lines
from urllib3 import HTTPResponse
from urllib3.exceptions import HTTPError

from database_operator import tracing
from database_operator.api.backup import BACKUP_PLURAL
from database_operator.api.models import GROUP, KIND, PLURAL, VERSION
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

#: What a metadata-only watch asks for: each event's object as PartialObjectMetadata.
METADATA_WATCH = "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1"
#: How long the API server keeps a watch open before ending it (it is then made again).
WATCH_TIMEOUT_S = 300
T = TypeVar("T")

#: HTTP statuses worth retrying: conflicts, throttling, and the server's own trouble.
RETRYABLE = {401, 409, 429, 500, 502, 503, 504}
#: How kube-apiserver words a JSON patch whose ``test`` operation failed (a 422).
TEST_FAILED = "test failed"
#: HTTP statuses that refuse the content of a write (invalid or malformed).
INVALID = {400, 422}
#: How kube-apiserver's authorizer words a 403 (RBAC). Every other 403 is a refusal by
#: admission: a webhook or ValidatingAdmissionPolicy, a ResourceQuota, a terminating namespace.
RBAC_DENIAL = " cannot "
#: How kube-apiserver's NamespaceLifecycle admission words a create refused in a namespace
#: being deleted ("unable to create new content in namespace X because it is being terminated").
NAMESPACE_TERMINATING = "because it is being terminated"


@dataclass
class ApiError(Exception):
    """A failed API call, with what a caller needs to decide: retry or report.

    Two readings of a 403: missing RBAC (``forbidden``) is the operator's installation, fixed by
    an administrator, so it is retried and reported as a reconcile error; a denial by admission
    is about the object we sent (``refused``), reported on the Database as a rejection.
    """

    status: int  # the answer's HTTP status (UnreachableError: 0, there was no answer)
    reason: str
    message: str
    verb: str
    path: str

    def __str__(self) -> str:
        return f"{self.verb} {self.path}: {self.status} {self.reason}: {self.message}"

    @property
    def forbidden(self) -> bool:
        """RBAC does not allow the call."""
        return self.status == 403 and RBAC_DENIAL in self.message

    @property
    def namespace_terminating(self) -> bool:
        """A create refused because its namespace is being deleted: expected while a namespace
        goes (its Databases go with it), neither the object's fault nor the operator's."""
        return self.status == 403 and NAMESPACE_TERMINATING in self.message

    @property
    def refused(self) -> bool:
        """The server refused the content of a write (422 invalid, 400 malformed, 403 denied by
        admission): reported on the Database, tried again at the next resync."""
        return self.status in INVALID or (
            self.status == 403 and not self.forbidden and not self.namespace_terminating
        )

    @property
    def retryable(self) -> bool:
        """Worth trying again soon: a conflict, throttling, a server error, or a permission an
        administrator may grant (RBAC applied after the operator)."""
        return self.status in RETRYABLE or self.forbidden

    @property
    def stale(self) -> bool:
        """Refused because the object changed since it was read (a conflict): read it afresh
        and go again."""
        return self.status == 409


class UnreachableError(ApiError):
    """No answer: the API server could not be reached (connection refused or reset, a timeout).
    An ApiError, so that whoever handles a failed call handles this one too; there is no HTTP
    status (``status`` is 0, the code the api_errors metric counts it under)."""

    @property
    def retryable(self) -> bool:
        return True


class StaleReadError(ApiError):
    """A guarded write refused because what it was built from changed since it was read: a
    JSON patch whose ``test`` failed (the server's 422, no refusal of what we sent). Read
    afresh and go again."""

    @property
    def refused(self) -> bool:
        return False

    @property
    def retryable(self) -> bool:
        return True

    @property
    def stale(self) -> bool:
        return True


def object_at(path: str) -> tuple[str, str, str] | None:
    """(kind, namespace, name) of a namespaced object's API path (a subresource's too)."""
    for kind, (prefix, plural) in RESOURCES.items():
        head = f"{prefix}/namespaces/"
        if path.startswith(head):
            parts = path[len(head) :].split("/")
            if len(parts) >= 3 and parts[1] == plural:
                return kind, parts[0], parts[2]
    return None


class NotLeadingError(Exception):
    """A write refused before it was sent: this replica does not surely hold the Lease. No API
    call failed; whoever leads does the work."""

    def __init__(self, verb: str, path: str) -> None:
        super().__init__(f"{verb} {path}: not sent: this replica does not lead")
        self.verb = verb
        self.path = path


def api_error(error: Exception, verb: str, path: str) -> ApiError:
    if isinstance(error, ApiException):
        message = str(error.reason)
        with contextlib.suppress(ValueError, AttributeError):
            message = json.loads(error.body or "{}").get("message", message)
        return ApiError(int(error.status or 0), str(error.reason), message, verb, path)
    return UnreachableError(0, type(error).__name__, str(error), verb, path)


#: What a metadata-only listing or watch keeps of each object's metadata.
IDENTITY = ("name", "namespace", "uid", "resourceVersion", "ownerReferences", "annotations")


def identity(meta: Manifest) -> Manifest:
    """Who an object is and who owns it: the part of its metadata ``IDENTITY`` names."""
    return {key: meta[key] for key in IDENTITY if key in meta}


def in_own_thread(work: Callable[[], T], name: str) -> asyncio.Future[T]:
    """``work`` in a daemon thread of its own (one that may block for minutes, and must not
    hold up the process's exit); its result or exception, in the event loop."""
    loop = asyncio.get_running_loop()
    future: asyncio.Future[T] = loop.create_future()

    def settle(result: T | None, error: Exception | None) -> None:
        if future.done():  # cancelled meanwhile
            return
        if error is not None:
            future.set_exception(error)
        else:
            future.set_result(cast(T, result))

    def run() -> None:
        try:
            result, error = work(), None
        except Exception as failure:
            result, error = None, failure
        with contextlib.suppress(RuntimeError):  # the loop closed meanwhile: nobody waits
            loop.call_soon_threadsafe(settle, result, error)

    threading.Thread(target=run, name=name, daemon=True).start()
    return future


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
            if error.status == 404:
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
                items.append({"kind": kind, "metadata": identity(item.get("metadata") or {})})
            version = version or str(page.get("metadata", {}).get("resourceVersion", ""))
        return items, version

    def _open_watch(
        self,
        path: str,
        query: list[tuple[str, str]],
        accept: str,
        timeout: float | tuple[float, float],
    ) -> HTTPResponse:
        """A watch request's streaming response (urllib3's, unread), in the calling thread."""
        try:
            return cast(
                HTTPResponse,
                self.api.call_api(
                    path,
                    "GET",
                    query_params=query,
                    header_params={"Accept": accept},
                    auth_settings=["BearerToken"],
                    _preload_content=False,
                    _return_http_data_only=True,
                    _request_timeout=timeout,
                ),
            )
        except (ApiException, HTTPError, OSError) as raw:
            raise api_error(raw, "WATCH", path) from raw

    async def next_change(
        self, kind: str, namespace: str, name: str, resource_version: str, timeout: float
    ) -> bool:
        """Wait (at most ``timeout`` seconds) until the object changes after
        ``resource_version``: a watch of that one object, ended by its first event."""
        path = self.path(kind, namespace)
        query = [
            ("watch", "true"),
            ("fieldSelector", f"metadata.name={name}"),
            ("resourceVersion", resource_version),
            ("timeoutSeconds", str(max(1, int(timeout)))),
        ]

        def first_event() -> bool:
            response = self._open_watch(path, query, "application/json", timeout + 5)
            changed = bool(response.read(1))  # the first byte of the first event, or the end
            if changed:  # the rest of the stream is unread: this connection cannot be reused
                response.close()
            response.release_conn()
            return changed

        return await asyncio.get_running_loop().run_in_executor(self._threads, first_event)

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
        timeout_s: int = WATCH_TIMEOUT_S,
    ) -> str:
        """Follow a watch of ``kind`` from ``resource_version`` until the server ends it, after
        ``timeout_s``. ``deliver`` hears each event's type and object (without managedFields;
        ``metadata_only``: its identity only, as ``list_metadata`` gives it), in the event loop;
        ``fields``: a field selector besides the label selector.
        Returns the version to go on from; a version too old to resume from raises ApiError
        410 (list afresh).

        The stream is read in a thread of its own (it lasts minutes: a pool thread would be
        taken from the requests), closed if the caller is cancelled."""
        path = self.path(kind, namespace)
        query = [
            ("watch", "true"),
            ("resourceVersion", resource_version),
            ("allowWatchBookmarks", "true"),
            ("timeoutSeconds", str(timeout_s)),
            ("labelSelector", selector),
        ] + ([("fieldSelector", fields)] if fields else [])
        accept = METADATA_WATCH if metadata_only else "application/json"
        loop = asyncio.get_running_loop()
        opened: list[HTTPResponse] = []

        def object_of(obj: Manifest) -> Manifest:
            meta = obj.get("metadata") or {}
            if metadata_only:
                return {"kind": kind, "metadata": identity(meta)}
            meta.pop("managedFields", None)
            return {**obj, "kind": kind}

        def follow() -> str:
            version = resource_version
            response = self._open_watch(path, query, accept, (30, timeout_s + 30))
            opened.append(response)
            try:
                for line in iter_resp_lines(response):
                    if not line:
                        continue
                    event = json.loads(line)
                    obj = event.get("object") or {}
                    if event.get("type") == "ERROR":  # a Status: 410 Gone, mostly
                        status = int(obj.get("code") or 500)
                        reason, message = str(obj.get("reason")), str(obj.get("message"))
                        raise ApiError(status, reason, message, "WATCH", path)
                    version = str((obj.get("metadata") or {}).get("resourceVersion") or version)
                    if event.get("type") != "BOOKMARK":
                        loop.call_soon_threadsafe(deliver, str(event.get("type")), object_of(obj))
            except (HTTPError, OSError, ValueError) as raw:
                raise api_error(raw, "WATCH", path) from raw
            finally:  # closed, not pooled: what is left unread would reach the next call
                response.close()
                response.release_conn()
            return version

        try:
            return await in_own_thread(follow, f"watch-{kind}")
        except asyncio.CancelledError:
            for response in opened:
                response.shutdown()  # the thread's read ends at once (urllib3 2.3+)
            raise

    async def serves(self, group_version: str, resources: tuple[str, ...] = ()) -> bool:
        """Whether the API server serves ``group/version`` yet, with each of ``resources`` (a new
        CRD takes a moment; two CRDs of one group appear one after the other)."""
        try:
            found = await self._acall("GET", f"/apis/{group_version}", expected=(404,))
        except ApiError as error:
            if error.status == 404:
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
            if exist_ok and error.status == 409:
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
            if missing_ok and error.status == 404:
                return {}
            if error.status == 422 and TEST_FAILED in error.message:
                # A guarded patch whose test failed: the object changed since it was read.
                raise StaleReadError(
                    error.status, error.reason, error.message, error.verb, error.path
                ) from error
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
            if error.status == 409 and await self._replaced(kind, namespace, name, uid):
                return False  # the uid precondition failed: a namesake stands there now
            if error.status == 404:
                return False
            raise
        return True

    async def _replaced(self, kind: str, namespace: str, name: str, uid: str) -> bool:
        """After a 409 to a delete: whether the object with ``uid`` is gone (a namesake may stand
        in its place). A conflict of any other kind leaves it there, and the delete is retried."""
        current = await self.get(kind, namespace, name)
        return current is None or current["metadata"].get("uid") != uid
