"""An in-memory stand-in for the operator's `Kube` interface, for millisecond unit tests of the
branches of reconcile and the controller. Beside the integration tests against the real API
server, never instead: it knows nothing of defaults, validation or field managers, and its apply
is a plain deep merge.

Every write is recorded; `fail` queues errors for the next calls that match.
"""

from __future__ import annotations

import asyncio
import copy
import itertools
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

from database_operator.kube.errors import ApiError, StaleReadError
from database_operator.manifest import Manifest
from database_operator.ownership import FIELD_MANAGER

ObjectKey = tuple[str, str, str]  # kind, namespace, name


def _merge(base: Any, patch: Any) -> Any:
    if isinstance(base, dict) and isinstance(patch, dict):
        merged = dict(base)
        for key, value in patch.items():
            if value is None:
                merged.pop(key, None)
            else:
                merged[key] = _merge(base.get(key), value)
        return merged
    return copy.deepcopy(patch)


def _steps(path: str) -> list[str]:
    return [part.replace("~1", "/").replace("~0", "~") for part in path.split("/")[1:]]


def _json_patch(obj: Manifest, operations: list[Manifest]) -> Manifest:
    result = copy.deepcopy(obj)
    for op in operations:
        *parents, last = _steps(op["path"])
        target: Any = result
        for step in parents:
            target = target[int(step)] if isinstance(target, list) else target.setdefault(step, {})
        if op["op"] == "test":
            current = target[int(last)] if isinstance(target, list) else target.get(last)
            if current != op["value"]:
                # As Kube.json_patch raises the server's 422 for a failed test.
                raise StaleReadError(422, "Invalid", f"test failed at {op['path']}", "PATCH", "")
        elif op["op"] in ("add", "replace"):
            if isinstance(target, list):
                if last == "-":
                    target.append(op["value"])
                else:
                    target[int(last)] = op["value"]
            else:
                target[last] = op["value"]
        elif op["op"] == "remove":
            if isinstance(target, list):
                del target[int(last)]
            else:
                del target[last]
    return result


@dataclass
class FakeKube:
    """Objects by (kind, namespace, name); what was written; errors to answer with."""

    objects: dict[ObjectKey, Manifest] = field(default_factory=dict)
    writes: list[tuple[str, str, str]] = field(default_factory=list)
    #: Reads asked of the "server": (verb, kind, name or namespace).
    reads: list[tuple[str, str, str]] = field(default_factory=list)
    failures: list[tuple[str, str, Exception]] = field(default_factory=list)
    #: Every call, answered or refused: (verb, kind).
    calls: list[tuple[str, str]] = field(default_factory=list)
    field_manager: str = FIELD_MANAGER
    _versions: itertools.count[int] = field(default_factory=lambda: itertools.count(100))

    def fail(self, verb: str, kind: str, status: int, times: int = 1) -> None:
        """Answer the next ``times`` calls of ``verb`` on ``kind`` with ``status``."""
        for _ in range(times):
            self.failures.append((verb, kind, ApiError(status, "Injected", "fake", verb, kind)))

    def _check(self, verb: str, kind: str) -> None:
        self.calls.append((verb, kind))
        for index, (fverb, fkind, error) in enumerate(self.failures):
            if fverb == verb and fkind == kind:
                del self.failures[index]
                raise error

    def put(self, obj: Manifest) -> Manifest:
        """Store ``obj`` as if created by someone; returns the stored copy."""
        stored = copy.deepcopy(obj)
        meta = stored.setdefault("metadata", {})
        meta.setdefault("uid", str(uuid.uuid4()))
        meta.setdefault("generation", 1)
        meta["resourceVersion"] = str(next(self._versions))
        self.objects[(stored["kind"], meta.get("namespace", ""), meta["name"])] = stored
        return copy.deepcopy(stored)

    def _written(
        self, verb: str, kind: str, name: str, obj: Manifest, what: str | None = None
    ) -> Manifest:
        self.writes.append((verb, what or kind, name))
        obj["metadata"]["resourceVersion"] = str(next(self._versions))
        self.objects[(kind, obj["metadata"].get("namespace", ""), name)] = obj
        return copy.deepcopy(obj)

    def written(self, verb: str | None = None) -> list[tuple[str, str, str]]:
        return [w for w in self.writes if verb is None or w[0] == verb]

    # --- the Kube interface ---------------------------------------------------------------------

    async def get(self, kind: str, namespace: str, name: str) -> Manifest | None:
        self._check("GET", kind)
        self.reads.append(("GET", kind, name))
        found = self.objects.get((kind, namespace, name))
        return copy.deepcopy(found) if found is not None else None

    #: Everything here is "live": nothing is cached.
    async def get_live(self, kind: str, namespace: str, name: str) -> Manifest | None:
        return await self.get(kind, namespace, name)

    def cached(self, kind: str) -> bool:
        return False

    def free(self, kind: str, namespace: str, name: str) -> bool:
        return False

    async def list_pages(
        self, kind: str, namespace: str | None, selector: str | None = None, limit: int = 250
    ) -> AsyncIterator[list[Manifest]]:
        items, _ = await self.list_metadata(kind, namespace, selector)
        keys = [(kind, item["metadata"]["namespace"], item["metadata"]["name"]) for item in items]
        for start in range(0, len(keys), limit):
            yield [copy.deepcopy(self.objects[key]) for key in keys[start : start + limit]]

    async def list_objects(
        self,
        kind: str,
        namespace: str | None,
        selector: str | None = None,
        limit: int = 250,
        fields: str = "",
    ) -> tuple[list[Manifest], str]:
        items, version = await self.list_metadata(kind, namespace, selector, fields=fields)
        keys = [(kind, item["metadata"]["namespace"], item["metadata"]["name"]) for item in items]
        return [copy.deepcopy(self.objects[key]) for key in keys], version

    async def watch(self, *_: Any, **__: Any) -> str:
        """Hears nothing, until cancelled: the tests deliver the events themselves."""
        await asyncio.Event().wait()
        raise AssertionError("never set")

    async def list_metadata(
        self,
        kind: str,
        namespace: str | None,
        selector: str | None = None,
        limit: int = 500,
        fields: str = "",
    ) -> tuple[list[Manifest], str]:
        self._check("LIST", kind)
        self.reads.append(("LIST", kind, namespace or ""))
        wanted = dict(term.split("=", 1) for term in selector.split(",")) if selector else {}
        # The one field selector the operator sends: metadata.name=<name>.
        named = fields.removeprefix("metadata.name=") if fields else None
        items = [
            {"kind": kind, "metadata": copy.deepcopy(obj["metadata"])}
            for (held_kind, held_namespace, held_name), obj in self.objects.items()
            if held_kind == kind
            and namespace in (None, held_namespace)
            and named in (None, held_name)
            and wanted.items() <= (obj["metadata"].get("labels") or {}).items()
        ]
        return items, str(next(self._versions))

    async def create(self, manifest: Manifest, exist_ok: bool = False) -> Manifest | None:
        self._check("POST", manifest["kind"])
        meta = manifest["metadata"]
        key = (manifest["kind"], meta.get("namespace", ""), meta.get("name", ""))
        if key in self.objects:
            if exist_ok:
                return None
            raise ApiError(409, "AlreadyExists", "exists", "POST", "")
        obj = copy.deepcopy(manifest)
        obj["metadata"].setdefault("uid", str(uuid.uuid4()))
        return self._written("POST", key[0], key[2], obj)

    async def apply(self, manifest: Manifest, dry_run: bool = False) -> Manifest:
        self._check("APPLY", manifest["kind"])
        meta = manifest["metadata"]
        key = (manifest["kind"], meta["namespace"], meta["name"])
        current = self.objects.get(key) or {"metadata": {"uid": str(uuid.uuid4())}}
        return self._written("APPLY", key[0], key[2], _merge(current, manifest))

    async def merge_patch(
        self, kind: str, namespace: str, name: str, patch: Manifest, sub: str | None = None
    ) -> Manifest:
        self._check("PATCH", kind)
        current = self._existing(kind, namespace, name)
        return self._written("PATCH", kind, name, _merge(current, patch))

    async def json_patch(
        self,
        kind: str,
        namespace: str,
        name: str,
        operations: list[Manifest],
        missing_ok: bool = False,
    ) -> Manifest:
        self._check("PATCH", kind)
        if (kind, namespace, name) not in self.objects and missing_ok:
            return {}
        patched = _json_patch(self._existing(kind, namespace, name), operations)
        meta = patched["metadata"]
        if meta.get("deletionTimestamp") and not meta.get("finalizers"):
            # As the API server does: the write that empties the list deletes the object, and
            # answers with the object at that write's resourceVersion.
            del self.objects[(kind, namespace, name)]
            self.writes.append(("PATCH", kind, name))
            meta["resourceVersion"] = str(next(self._versions))
            return patched
        return self._written("PATCH", kind, name, patched)

    async def patch_status(
        self, namespace: str, name: str, status: Manifest, kind: str = "Database"
    ) -> Manifest:
        self._check("PATCH", f"{kind}/status")
        current = self._existing(kind, namespace, name)
        current["status"] = _merge(current.get("status") or {}, status)
        return self._written("PATCH", kind, name, current, what=f"{kind}/status")

    async def delete(
        self, kind: str, namespace: str, name: str, uid: str, grace_seconds: int | None = None
    ) -> bool:
        self._check("DELETE", kind)
        found = self.objects.get((kind, namespace, name))
        if found is None or found["metadata"]["uid"] != uid:
            return False
        del self.objects[(kind, namespace, name)]
        self.writes.append(("DELETE", kind, name))
        return True

    def _existing(self, kind: str, namespace: str, name: str) -> Manifest:
        found = self.objects.get((kind, namespace, name))
        if found is None:
            raise ApiError(404, "NotFound", f"{kind} {name} not found", "PATCH", "")
        return copy.deepcopy(found)
