"""Whose is an object that has a child's name? The operator changes or deletes only its own.

A child is the Database's when the operator created it for that Database:
- the children that live and die with it (Deployment, Service) carry its controller owner
  reference, which names the Database's uid;
- the children that may outlive it (the generated Secret, the PVC, kept with deletionPolicy
  Retain and then carrying no owner reference) carry the annotation ``CREATED_FOR``, written
  when the operator created them, naming the Database. A Database created again under the same
  name finds its kept data and uses it again, which is what Retain is for.

Anything else by that name — a user's Secret, an unrelated Service — is foreign: never adopted,
changed or deleted, only reported.
"""

from __future__ import annotations

from dataclasses import dataclass

from database_operator.api.models import GROUP, KIND, Database
from database_operator.manifest import Manifest

#: Annotation on the kept children (generated Secret, PVC): the name of the Database they were
#: created for. A user can write it on a PVC of theirs to hand it over to a Database.
CREATED_FOR = f"{GROUP}/created-for"


def owner_key(obj: Manifest) -> tuple[str, str] | None:
    """The (namespace, name) of the Database a child belongs to, if it names one: its
    controller owner reference, else (a kept child) the annotation CREATED_FOR."""
    meta = obj.get("metadata", {})
    namespace = meta.get("namespace")
    if namespace is None:
        return None
    owner = controller_of(obj)
    if (
        owner is not None
        and owner.get("kind") == KIND
        and owner.get("apiVersion", "").startswith(f"{GROUP}/")
    ):
        return (namespace, str(owner["name"]))
    created_for = (meta.get("annotations") or {}).get(CREATED_FOR)
    return (namespace, created_for) if created_for else None


def controller_of(obj: Manifest) -> Manifest | None:
    """The controller owner reference of ``obj``, if it has one."""
    refs = obj.get("metadata", {}).get("ownerReferences") or []
    return next((ref for ref in refs if ref.get("controller")), None)


def is_ours(observed: Manifest, db: Database) -> bool:
    """Whether the operator created ``observed`` for ``db`` (see the module docstring)."""
    meta = observed.get("metadata", {})
    if (meta.get("annotations") or {}).get(CREATED_FOR) == db.name:
        return True
    controller = controller_of(observed)
    return bool(
        controller is not None
        and controller.get("kind") == KIND
        and controller.get("uid") == db.metadata.get("uid")
    )


@dataclass(frozen=True)
class Conflict:
    """An object that has a child's name but is not the Database's."""

    kind: str
    name: str
    #: Who owns it instead, for the message: "Database x", "ReplicaSet y", or None.
    owner: str | None

    def describe(self) -> str:
        held = f"it belongs to {self.owner}" if self.owner else "the operator did not create it"
        return f"{self.kind} {self.name!r} exists and {held}"


def conflict(observed: Manifest, db: Database) -> Conflict | None:
    """The conflict ``observed`` is for ``db``, or None when it is ``db``'s own."""
    if is_ours(observed, db):
        return None
    meta = observed.get("metadata", {})
    controller = controller_of(observed)
    owner = f"{controller.get('kind')} {controller.get('name')!r}" if controller else None
    return Conflict(str(observed.get("kind", "")), str(meta.get("name", "")), owner)


def conflict_message(conflicts: list[Conflict]) -> str:
    """One message for the Ready condition and the Warning Event: what clashes and what to do."""
    clashes = "; ".join(found.describe() for found in conflicts)
    return (
        f"{clashes}: the operator does not take over or change objects it did not create. "
        "Rename the Database, or rename or delete the object. To let the Database use a "
        f"PersistentVolumeClaim or Secret of yours, annotate it {CREATED_FOR}=<database name> "
        "(for a Secret, spec.credentialsSecretRef is the usual way)"
    )
