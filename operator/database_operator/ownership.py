"""Whose is an object that has a child's name? The operator changes or deletes only its own.

A child is the Database's when the operator created it for that Database:
- the children that live and die with it (Deployment, Service) carry its controller owner
  reference, which names the Database's uid;
- the children that may outlive it (the generated Secret, the PVC, kept with deletionPolicy
  Retain and then carrying no owner reference) carry the annotation ``CREATED_FOR``, written
  when the operator created them, naming the Database. A Database created again under the same
  name finds its kept data and uses it again, which is what Retain is for.
- the kept children an earlier version created before it wrote ``CREATED_FOR`` (0.1.0) carry
  what every version left on them: the labels naming the Database and the operator, and the
  operator's field manager in ``managedFields``. The reconcile then writes ``CREATED_FOR`` on
  them, so the evidence is needed once. A user's object has neither the labels nor our field
  manager unless someone forged both on purpose.

- the name holder of a Database with spec.failover (the Deployment ``<name>`` with no pod,
  desired.name_holder) carries ``HOLDS_NAME_FOR`` and an owner reference to the Database that is
  not a controller's: to every earlier version it is a namesake, which makes an earlier
  operator refuse the Database instead of starting a second primary on ``<name>-data``.

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
#: Annotation on a Database's name holder (see the module docstring): the Database's name.
HOLDS_NAME_FOR = f"{GROUP}/holds-name-for"
#: The field manager of every write the operator makes (all versions), and the value of the
#: ``app.kubernetes.io/managed-by`` label on its children.
FIELD_MANAGER = "database-operator"
MANAGED_BY_LABEL = "app.kubernetes.io/managed-by"
INSTANCE_LABEL = "app.kubernetes.io/instance"
#: The children that may outlive their Database: the ones ``CREATED_FOR`` marks.
KEPT_KINDS = frozenset({"Secret", "PersistentVolumeClaim"})


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
    if controller is not None:
        return bool(
            controller.get("kind") == KIND and controller.get("uid") == db.metadata.get("uid")
        )
    return holds_name_for(observed, db) or left_by_earlier_version(observed, db)


def holds_name_for(observed: Manifest, db: Database) -> bool:
    """Whether ``observed`` is ``db``'s name holder: marked so, and owned by ``db`` itself
    (its uid), not by a namesake that was."""
    meta = observed.get("metadata", {})
    if (meta.get("annotations") or {}).get(HOLDS_NAME_FOR) != db.name:
        return False
    uid = db.metadata.get("uid")
    owners = meta.get("ownerReferences") or []
    return any(ref.get("kind") == KIND and ref.get("uid") == uid for ref in owners)


def _names_us(observed: Manifest, db: Database) -> bool:
    """A kept child without ``CREATED_FOR`` whose labels name ``db`` and the operator."""
    meta = observed.get("metadata", {})
    labels = meta.get("labels") or {}
    return (
        observed.get("kind") in KEPT_KINDS
        and CREATED_FOR not in (meta.get("annotations") or {})
        and labels.get(INSTANCE_LABEL) == db.name
        and labels.get(MANAGED_BY_LABEL) == FIELD_MANAGER
    )


def left_by_earlier_version(observed: Manifest, db: Database) -> bool:
    """Whether ``observed`` is a kept child that an earlier version (before ``CREATED_FOR``)
    created for ``db``: its labels name ``db`` and the operator, the operator's field manager
    wrote it, and no owner reference names another Database (a namesake's, waiting for the
    garbage collector). Needs ``managedFields``, which the watch caches drop: see
    ``needs_managed_fields``."""
    if not _names_us(observed, db):
        return False
    meta = observed["metadata"]
    uid = db.metadata.get("uid")
    if any(
        ref.get("kind") == KIND and ref.get("uid") != uid
        for ref in meta.get("ownerReferences") or []
    ):
        return False
    return any(entry.get("manager") == FIELD_MANAGER for entry in meta.get("managedFields") or [])


def needs_managed_fields(observed: Manifest, db: Database) -> bool:
    """Whether only ``managedFields`` can tell if ``observed`` is ``db``'s (and it lacks them:
    it came from a cache): then it is read from the API server. A controller reference decides
    on its own (``is_ours``)."""
    return (
        _names_us(observed, db)
        and controller_of(observed) is None
        and "managedFields" not in observed.get("metadata", {})
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
