"""What the watches last delivered, kept in memory, so a reconcile reads no object it is told of.

Kopf already streams the Databases and, selected by our label on the server, their Deployments,
Services and claims. `ObjectCache` holds the latest version of each (by resourceVersion: an
event that arrives after our own write returned a newer body does not put the older one back),
stripped of `managedFields`, which is most of an object's size and read only to take lists back
(compare.py reads it from a write's answer or a fresh GET).

`CachedKube` is the `Kube` the reconcile talks to: reads of the watched kinds come from the
cache, everything else goes to the API server, and every answer to a write goes into the cache.
Only what the watches would deliver is kept (an object carrying our labels): a user's
namesake, or a user's Secret read by name, is asked of the API server each time, since no event
would tell the cache it changed. Secrets are watched by label like the other children (the ones
the operator generated); a user's (``credentialsSecretRef``, a backup store's credentials) is
never in the cache, so whoever reads one asks ``get_live``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterable, Mapping
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

from database_operator.api.models import KIND
from database_operator.kube.api import Kube
from database_operator.manifest import Key, Manifest
from database_operator.namesakes import Namesakes
from database_operator.ownership import owner_key

#: An object by (kind, namespace, name).
ObjectKey = tuple[str, str, str]


@dataclass
class LiveReads:
    """How many reads one reconcile asked of the API server (not of the cache)."""

    count: int = 0


#: The counter of the reconcile running in this task (the controller sets a fresh one around
#: each; the tasks it starts share it). None: nobody counts.
live_reads: ContextVar[LiveReads | None] = ContextVar("live_reads", default=None)


def _read_live() -> None:
    if (reads := live_reads.get()) is not None:
        reads.count += 1


def stripped(body: Mapping[str, Any]) -> Manifest:
    """The object without managedFields (a shallow copy: the rest is shared, never mutated)."""
    meta = dict(body.get("metadata") or {})
    meta.pop("managedFields", None)
    return {**body, "metadata": meta}


def newer(candidate: Mapping[str, Any], known: Mapping[str, Any] | None) -> bool:
    """Whether ``candidate`` is a later version of the object than ``known`` (a different uid
    is a new object: later by definition).

    resourceVersions are opaque to clients by contract, but etcd's are increasing integers and
    this only orders two versions of one object. Unparseable: trust the newcomer.
    """
    if known is None:
        return True
    if candidate["metadata"].get("uid") != known["metadata"].get("uid"):
        return True
    try:
        return int(candidate["metadata"]["resourceVersion"]) > int(
            known["metadata"]["resourceVersion"]
        )
    except (KeyError, TypeError, ValueError):
        return True


def version(body: Mapping[str, Any]) -> int:
    """The resourceVersion as the integer etcd makes it (0 if it is not one)."""
    try:
        return int(body["metadata"]["resourceVersion"])
    except (KeyError, TypeError, ValueError):
        return 0


def object_key(body: Mapping[str, Any]) -> ObjectKey:
    meta = body["metadata"]
    return (str(body.get("kind", "")), str(meta.get("namespace", "")), str(meta["name"]))


class ObjectCache:
    """The latest known version of each object of the ``kinds`` the watches deliver whole."""

    def __init__(self, kinds: Iterable[str]) -> None:
        self.kinds = frozenset(kinds)
        self._objects: dict[ObjectKey, Manifest] = {}
        #: The objects that belong to each Database (ownership.owner_key).
        self._owned: dict[Key, set[ObjectKey]] = {}

    def __len__(self) -> int:
        return len(self._objects)

    def holds(self, kind: str) -> bool:
        return kind in self.kinds

    def get(self, kind: str, namespace: str, name: str) -> Manifest | None:
        return self._objects.get((kind, namespace, name))

    def put(self, body: Mapping[str, Any]) -> bool:
        """Remember ``body`` if it is newer than what is held; whether it was."""
        key = object_key(body)
        held = self._objects.get(key)
        if not newer(body, held):
            return False
        if held is not None:
            self._disown(key, held)
        self._objects[key] = kept = stripped(body)
        if (owner := owner_key(kept)) is not None:
            self._owned.setdefault(owner, set()).add(key)
        return True

    def discard(self, body: Mapping[str, Any]) -> bool:
        """Forget the object (deleted, or no longer selected); whether it was held."""
        key = object_key(body)
        held = self._objects.get(key)
        if held is None or held["metadata"].get("uid") != body["metadata"].get("uid"):
            return False
        del self._objects[key]
        self._disown(key, held)
        return True

    def _disown(self, key: ObjectKey, held: Manifest) -> None:
        owner = owner_key(held)
        owned = self._owned.get(owner) if owner is not None else None
        if owned is not None:
            owned.discard(key)
            if not owned:
                del self._owned[owner]  # type: ignore[arg-type]

    def objects_of(self, kind: str, namespace: str | None) -> list[Manifest]:
        """The objects of ``kind`` held (in ``namespace``; None: everywhere)."""
        return [
            obj
            for (held_kind, held_namespace, _), obj in self._objects.items()
            if held_kind == kind and namespace in (None, held_namespace)
        ]

    def versions_of(self, owner: Key) -> frozenset[tuple[ObjectKey, str]]:
        """The resourceVersion of each object held that belongs to the Database ``owner``."""
        return frozenset(
            (key, str(self._objects[key]["metadata"].get("resourceVersion")))
            for key in self._owned.get(owner, ())
        )


class CachedKube:
    """A Kube whose reads of the watched kinds are answered from an ObjectCache and whose writes
    refresh it. ``get`` of a watched kind answers what the watch says (None: no such object with
    our label); ``get_live`` asks the API server (before creating: a namesake without our label
    is invisible to the watch)."""

    def __init__(
        self,
        kube: Kube,
        cache: ObjectCache,
        watched: Callable[[Manifest], bool] = lambda _: True,
        namesakes: Namesakes | None = None,
    ) -> None:
        self.live = kube
        self.cache = cache
        self.field_manager = kube.field_manager
        #: Whether the watches deliver an object's events (its labels select it): only those
        #: are kept, since the cache of any other would never hear of its changes.
        self.watched = watched
        #: The names the watches of the objects not ``watched`` hold (None: no such watches).
        self.namesakes = namesakes

    def _keep(self, obj: Manifest | None) -> Manifest | None:
        if obj and self.cache.holds(str(obj.get("kind", ""))) and self.watched(obj):
            self.cache.put(obj)
        return obj

    def cached(self, kind: str) -> bool:
        return self.cache.holds(kind)

    def free(self, kind: str, namespace: str, name: str) -> bool:
        """Neither the cache nor the namesakes' watches know an object of that name."""
        return (
            self.namesakes is not None
            and self.cache.get(kind, namespace, name) is None
            and self.namesakes.free(kind, namespace, name)
        )

    async def get(self, kind: str, namespace: str, name: str) -> Manifest | None:
        if not self.cache.holds(kind):
            _read_live()
            return await self.live.get(kind, namespace, name)
        return self.cache.get(kind, namespace, name)

    async def get_live(self, kind: str, namespace: str, name: str) -> Manifest | None:
        _read_live()
        return self._keep(await self.live.get(kind, namespace, name))

    def list_pages(
        self, kind: str, namespace: str | None, selector: str | None = None, limit: int = 250
    ) -> AsyncIterator[list[Manifest]]:
        _read_live()
        return self.live.list_pages(kind, namespace, selector, limit)

    async def apply(self, manifest: Manifest, dry_run: bool = False) -> Manifest:
        applied = await self.live.apply(manifest, dry_run)
        return applied if dry_run else self._keep(applied) or applied

    async def create(self, manifest: Manifest, exist_ok: bool = False) -> Manifest | None:
        return self._keep(await self.live.create(manifest, exist_ok))

    async def merge_patch(
        self, kind: str, namespace: str, name: str, patch: Manifest, sub: str | None = None
    ) -> Manifest:
        return self._keep(await self.live.merge_patch(kind, namespace, name, patch, sub)) or {}

    async def json_patch(
        self,
        kind: str,
        namespace: str,
        name: str,
        operations: list[Manifest],
        missing_ok: bool = False,
    ) -> Manifest:
        patched = await self.live.json_patch(kind, namespace, name, operations, missing_ok)
        return self._keep(patched) or patched

    async def patch_status(
        self, namespace: str, name: str, status: Manifest, kind: str = KIND
    ) -> Manifest:
        return await self.live.patch_status(namespace, name, status, kind)

    async def delete(
        self, kind: str, namespace: str, name: str, uid: str, grace_seconds: int | None = None
    ) -> bool:
        deleted = await self.live.delete(kind, namespace, name, uid, grace_seconds)
        held = self.cache.get(kind, namespace, name)
        if held is not None and held["metadata"].get("uid") == uid:
            self.cache.discard(held)
        return deleted
