"""Watches of the API: a stream of an object's or a collection's changes, followed in a thread of
its own, and the wait for one object's next change. ``Kube.watch`` and ``Kube.next_change`` are
their faces; a failed watch raises ``ApiError`` as every other call does (410 Gone: its version
``expired``).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
from collections.abc import Callable
from concurrent.futures import Executor
from typing import TypeVar, cast

from kubernetes import client
from kubernetes.client.exceptions import ApiException
from kubernetes.watch.watch import iter_resp_lines
from urllib3 import HTTPResponse
from urllib3.exceptions import HTTPError

from database_operator.kube.errors import ApiError, api_error
from database_operator.manifest import Manifest

#: What a metadata-only watch asks for: each event's object as PartialObjectMetadata.
METADATA_WATCH = "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1"
#: How long the API server keeps a watch open before ending it (it is then made again).
WATCH_TIMEOUT_S = 300
#: What a metadata-only listing or watch keeps of each object's metadata.
IDENTITY = ("name", "namespace", "uid", "resourceVersion", "ownerReferences", "annotations")
T = TypeVar("T")


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


def open_watch(
    api: client.ApiClient,
    path: str,
    query: list[tuple[str, str]],
    accept: str,
    timeout: float | tuple[float, float],
) -> HTTPResponse:
    """A watch request's streaming response (urllib3's, unread), in the calling thread."""
    try:
        return cast(
            HTTPResponse,
            api.call_api(
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
    api: client.ApiClient,
    path: str,
    name: str,
    resource_version: str,
    timeout: float,
    *,
    threads: Executor,
) -> bool:
    """Wait (at most ``timeout`` seconds) until the object ``name`` of the collection ``path``
    changes after ``resource_version``: a watch of that one object, ended by its first event,
    in one of ``threads``."""
    query = [
        ("watch", "true"),
        ("fieldSelector", f"metadata.name={name}"),
        ("resourceVersion", resource_version),
        ("timeoutSeconds", str(max(1, int(timeout)))),
    ]

    def first_event() -> bool:
        response = open_watch(api, path, query, "application/json", timeout + 5)
        changed = bool(response.read(1))  # the first byte of the first event, or the end
        if changed:  # the rest of the stream is unread: this connection cannot be reused
            response.close()
        response.release_conn()
        return changed

    return await asyncio.get_running_loop().run_in_executor(threads, first_event)


async def watch(
    api: client.ApiClient,
    kind: str,
    path: str,
    selector: str,
    resource_version: str,
    *,
    deliver: Callable[[str, Manifest], None],
    metadata_only: bool = False,
    fields: str = "",
    timeout_s: int = WATCH_TIMEOUT_S,
) -> str:
    """Follow a watch of the collection ``path`` (of ``kind``) from ``resource_version`` until
    the server ends it, after ``timeout_s``. ``deliver`` hears each event's type and object
    (without managedFields; ``metadata_only``: its identity only, as ``Kube.list_metadata``
    gives it), in the event loop; ``fields``: a field selector besides the label selector.
    Returns the version to go on from; a version too old to resume from raises ApiError
    410 (``expired``: list afresh).

    The stream is read in a thread of its own (it lasts minutes: a pool thread would be
    taken from the requests), closed if the caller is cancelled."""
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
        response = open_watch(api, path, query, accept, (30, timeout_s + 30))
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
