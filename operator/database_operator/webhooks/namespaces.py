"""The watched namespaces' annotations, for the admission quota, without a read per create.

The validating webhook checks a namespace's quota (`databases.example.com/max-databases`,
`/max-storage`: annotations on the Namespace) at every create, and read the Namespace to do so:
a request in the admission path of every new Database, queued behind the reconciles' own
requests (at N = 1,000 with the webhooks on, the validating call's median was 95 ms, most of it
that read). Here a metadata-only (PartialObjectMetadata) list and watch (watches.py) keeps the
namespaces' annotations in memory: of every namespace when the operator watches them all or
some by pattern, else of each named one by its name's field selector (RBAC narrowed to those
names by resourceNames allows a list and watch only so). While the watch covering a namespace
is not listed and following, or the namespace is not among those held, it is read as before.

A quota annotation written within the watch's delivery delay (milliseconds) before a create
can be missed, as one written while a create's admission is under way could be: the check was
never atomic with the write (two creates at once each count the other's absence).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from database_operator.config import is_exact
from database_operator.kube.api import Kube
from database_operator.kube.errors import ApiError
from database_operator.logs import get_logger
from database_operator.manifest import Manifest
from database_operator.watches import Watch


class NamespaceWatch:
    """The annotations one watch holds: of every namespace, or of one by name."""

    def __init__(self, name: str | None = None) -> None:
        self.name = name
        fields = f"metadata.name={name}" if name else ""
        self.watch = Watch("Namespace", None, "", metadata_only=True, fields=fields)
        self.annotations: dict[str, dict[str, str]] = {}

    def covers(self, namespace: str) -> bool:
        return self.name in (None, namespace)

    def relisted(self, listed: list[Manifest], _: str) -> None:
        self.annotations = {}
        for obj in listed:
            self.hear("ADDED", obj)

    def hear(self, event_type: str, obj: Manifest) -> None:
        meta = obj["metadata"]
        name = str(meta.get("name", ""))
        if event_type == "DELETED":
            self.annotations.pop(name, None)
        else:
            self.annotations[name] = dict(meta.get("annotations") or {})


class NamespaceAnnotations:
    """The annotations of the namespaces whose Databases the webhooks see."""

    def __init__(self, watched: Sequence[str] = ()) -> None:
        if watched and all(is_exact(namespace) for namespace in watched):
            self.watches = [NamespaceWatch(namespace) for namespace in watched]
        else:
            self.watches = [NamespaceWatch()]

    def of(self, namespace: str) -> dict[str, str] | None:
        """The namespace's annotations, or None when they are not known for sure (no watch
        covering it follows, or it has not heard of the namespace yet): read it then."""
        for held in self.watches:
            if held.covers(namespace) and held.watch.following:
                return held.annotations.get(namespace)
        return None

    async def follow(self, kube: Kube) -> None:
        """List and watch, for as long as the webhooks are served."""
        await asyncio.gather(*(self._follow(kube, held) for held in self.watches))

    @staticmethod
    async def _follow(kube: Kube, held: NamespaceWatch) -> None:
        """One watch; a first listing RBAC refuses ends it (one warning, no retries, a read
        per create). Any other failure is the watch's to retry: unlisted, it lists again."""
        try:
            held.relisted(await held.watch.list_now(kube), held.watch.version)
        except Exception as error:  # all but RBAC's refusal: the watch lists again, and retries
            if isinstance(error, ApiError) and error.forbidden:
                get_logger().warning(
                    "cannot watch namespaces; the quota check reads each namespace instead",
                    namespace=held.name,
                    error=str(error),
                )
                return
        await held.watch.follow(kube, held.relisted, held.hear)
