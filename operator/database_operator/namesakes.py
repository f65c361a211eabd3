"""The names of the children's kinds taken by objects the children's watches do not deliver (a
user's, another shard's), so that a child the cache lacks is known to be free without a GET.

Kopf's watches of the children select our label on the server, so a namesake without it is
invisible to them, and the reconcile read every child the cache lacked before applying it: a
server-side apply merges into whatever has the name, and a user's object must be seen first
(ownership.py). Those reads were most of a new Database's (one per Deployment, Service, claim).
Here, a metadata-only (PartialObjectMetadata) list and watch of each kind, per watched
namespace, selects the complement of the children's selector: the two together see every object
of the kind, the second with names and uids only. A name is free only while every such watch
covering its namespace is listed and following; otherwise the reconcile reads, as before.

Secrets are not among the kinds: a Secret's metadata can carry its values (kubectl's
last-applied annotation), and the operator lists no Secret it did not label (operations.md).

A namesake created within the watch's delivery delay (milliseconds) before a child is applied
can be missed, as one created between a GET and the apply could be: a create racing ours.
"""

from __future__ import annotations

import asyncio
import random
from dataclasses import dataclass, field

from database_operator.kube import ApiError, Kube
from database_operator.logs import get_logger
from database_operator.manifest import Manifest

#: The kinds whose namesakes are followed: the children applied by name.
KINDS = ("Deployment", "Service", "PersistentVolumeClaim")
#: Waits before following again after a failure: doubling, capped, spread.
RETRY_FIRST_S = 0.5
RETRY_MAX_S = 30.0


@dataclass
class NameWatch:
    """The names one watch holds (one kind, one namespace or all, one selector)."""

    kind: str
    namespace: str | None
    selector: str
    #: (namespace, name) -> uid of every object the watch selects.
    names: dict[tuple[str, str], str] = field(default_factory=dict)
    #: Listed and following: ``names`` is complete, but for events in flight.
    following: bool = False

    def covers(self, kind: str, namespace: str) -> bool:
        return kind == self.kind and self.namespace in (None, namespace)

    def hear(self, event_type: str, obj: Manifest) -> None:
        meta = obj["metadata"]
        key = (str(meta.get("namespace", "")), str(meta.get("name", "")))
        if event_type == "DELETED":
            if self.names.get(key) == meta.get("uid"):
                del self.names[key]
        else:
            self.names[key] = str(meta.get("uid", ""))


class Namesakes:
    """Every name taken, in the namespaces watched, by an object the children's watches miss."""

    def __init__(self, namespaces: list[str | None], selectors: list[str]) -> None:
        self.watches = [
            NameWatch(kind, namespace, selector)
            for kind in KINDS
            for namespace in namespaces
            for selector in selectors
        ]

    def free(self, kind: str, namespace: str, name: str) -> bool:
        """Whether no such object has the name, as far as every watch covering it is
        following (False when one is not, or none covers it: read it then)."""
        covering = [watch for watch in self.watches if watch.covers(kind, namespace)]
        return bool(covering) and all(
            watch.following and (namespace, name) not in watch.names for watch in covering
        )

    async def follow(self, kube: Kube) -> None:
        """List and watch, for as long as the operator runs."""
        await asyncio.gather(*(self._follow(kube, watch) for watch in self.watches))

    @staticmethod
    async def _follow(kube: Kube, watch: NameWatch) -> None:
        delay = RETRY_FIRST_S
        while True:
            try:
                listed, version = await kube.list_metadata(
                    watch.kind, watch.namespace, watch.selector
                )
                watch.names = {}
                for obj in listed:
                    watch.hear("ADDED", obj)
                watch.following = True
                while True:  # each watch ends after minutes: made again from where it was
                    version = await kube.watch_metadata(
                        watch.kind, watch.namespace, watch.selector, version, deliver=watch.hear
                    )
                    delay = RETRY_FIRST_S  # one ran its course: whatever failed before is over
            except Exception as error:  # whatever it is, reads stand in meanwhile
                watch.following = False
                if isinstance(error, ApiError) and error.status == 410:
                    continue  # too old to resume from: list afresh (routine)
                get_logger().warning(
                    "namesake watch failed; reads stand in for it",
                    kind=watch.kind,
                    namespace=watch.namespace,
                    error=str(error) or type(error).__name__,
                    retry_in_s=round(delay, 2),
                )
                await asyncio.sleep(delay * random.uniform(0.8, 1.2))  # noqa: S311
                delay = min(RETRY_MAX_S, delay * 2)
            finally:
                watch.following = False
