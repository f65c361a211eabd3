"""Reading what exists: the credentials Secret and a Database's children, read once per
reconcile, before anything is written."""

from __future__ import annotations

from dataclasses import dataclass

from database_operator import desired
from database_operator.api.models import Database
from database_operator.kube.api import KubeApi
from database_operator.manifest import Manifest
from database_operator.ownership import is_ours, needs_managed_fields
from database_operator.status import Workloads

#: A child by (kind, name).
ChildKey = tuple[str, str]


@dataclass
class Observed:
    """The credentials Secret and the children as the API server has them (None: absent), read
    once per reconcile."""

    credentials: Manifest | None
    #: Every child the spec asks for, and the connection Secret.
    children: dict[ChildKey, Manifest | None]
    #: Objects with the names of children the spec no longer asks for (read replicas scaled
    #: away): deleted if they are the Database's own.
    surplus: list[Manifest]
    #: The credentials Secret is the operator's own (generated), not the user's: a child.
    generated: bool

    def named_like_children(self) -> list[Manifest]:
        """What exists under a child's name: each must be the Database's own. A user's Secret
        (spec.credentialsSecretRef) is read, never written, so it is not among them."""
        found = [self.credentials if self.generated else None, *self.children.values()]
        return [obj for obj in found if obj is not None]

    def creates_something(self) -> bool:
        """Something is missing that the reconcile would create."""
        return (self.generated and self.credentials is None) or any(
            obj is None for obj in self.children.values()
        )


async def observe(kube: KubeApi, db: Database) -> Observed:
    """Read the credentials Secret, every child the spec asks for, the connection Secret, and
    what may be left of read replicas scaled away.

    A watched child comes from the watch's cache; one the cache lacks is asked of the API server
    (``get_live``) unless the namesakes' watches know its name is free, since a namesake without
    our label is invisible to the children's watch, and must be seen before anything is created
    under its name.
    """
    credentials = await read_credentials(kube, db)
    wanted = desired.child_keys(db)
    wanted.append(("Secret", desired.connection_secret_name(db)))

    children = {(kind, name): await read_child(kube, db, kind, name) for kind, name in wanted}
    surplus = [await kube.get(kind, db.namespace, name) for kind, name in desired.surplus(db)]
    return Observed(
        credentials,
        children,
        [obj for obj in surplus if obj is not None],
        generated=db.spec.credentials_secret_ref is None,
    )


async def read_credentials(kube: KubeApi, db: Database) -> Manifest | None:
    """The credentials Secret. A user's carries no label of ours, so no watch delivers it: it
    is read from the API server. A generated one comes from the cache, which lacking it is
    enough to create it: the create (not an apply) finds a namesake (apply.py)."""
    name = desired.credentials_secret_name(db)
    if db.spec.credentials_secret_ref is not None:
        return await kube.get_live("Secret", db.namespace, name)
    found = await kube.get("Secret", db.namespace, name)
    if found is not None and kube.cached("Secret") and needs_managed_fields(found, db):
        found = await kube.get_live("Secret", db.namespace, name)
    return found


async def read_child(kube: KubeApi, db: Database, kind: str, name: str) -> Manifest | None:
    """A child by name, from the watch's cache when it holds the kind. From the API server when
    the cache lacks it and the namesakes' watches cannot say the name is free (namesakes.py),
    or when only its ``managedFields`` can say whether it is ours (a kept child an earlier
    version made: ownership.py)."""
    found = await kube.get(kind, db.namespace, name)
    if not kube.cached(kind):
        return found
    if found is None and not kube.free(kind, db.namespace, name):
        return await kube.get_live(kind, db.namespace, name)
    if found is not None and needs_managed_fields(found, db):
        return await kube.get_live(kind, db.namespace, name)
    return found


async def observe_workloads(kube: KubeApi, db: Database) -> Workloads:
    """The primary's and the read replicas' Deployments, if they are the Database's own."""

    async def ours(name: str) -> Manifest | None:
        found = await kube.get("Deployment", db.namespace, name)
        return found if found is not None and is_ours(found, db) else None

    return Workloads(primary=await ours(db.name), replicas=await ours(desired.replicas_name(db)))
