"""The names of the children's kinds taken by objects the children's watches do not deliver (a
user's, another shard's), so that a child the cache lacks is known to be free without a GET.

Kopf's watches of the children select our label on the server, so a namesake without it is
invisible to them, and the reconcile read every child the cache lacked before applying it: a
server-side apply merges into whatever has the name, and a user's object must be seen first
(ownership.py). Those reads were most of a new Database's (one per Deployment, Service, claim).
Here, a metadata-only (PartialObjectMetadata) list and watch (watches.py) of each kind, per watched
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
from dataclasses import dataclass, field

from database_operator.kube.api import Kube
from database_operator.manifest import Manifest
from database_operator.watches import Watch

#: The kinds whose namesakes are followed: the children applied by name.
KINDS = ("Deployment", "Service", "PersistentVolumeClaim")


@dataclass
class NameWatch:
    """The names one watch holds (one kind, one namespace or all, one selector)."""

    watch: Watch
    #: (namespace, name) -> uid of every object the watch selects.
    names: dict[tuple[str, str], str] = field(default_factory=dict)

    def relisted(self, listed: list[Manifest], _: str) -> None:
        self.names = {}
        for obj in listed:
            self.hear("ADDED", obj)

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
            NameWatch(Watch(kind, namespace, selector, metadata_only=True))
            for kind in KINDS
            for namespace in namespaces
            for selector in selectors
        ]

    def free(self, kind: str, namespace: str, name: str) -> bool:
        """Whether no such object has the name, as far as every watch covering it is
        following (False when one is not, or none covers it: read it then)."""
        covering = [held for held in self.watches if held.watch.covers(kind, namespace)]
        return bool(covering) and all(
            held.watch.following and (namespace, name) not in held.names for held in covering
        )

    async def follow(self, kube: Kube) -> None:
        """List and watch, for as long as the operator runs."""
        await asyncio.gather(
            *(held.watch.follow(kube, held.relisted, held.hear) for held in self.watches)
        )
