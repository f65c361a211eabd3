"""Admission rules that the CRD schema and CEL cannot express: they need the namespace, the other
Databases, the operator's settings, or the engine's upgrade path. Kopf's ``on.validate`` and
``on.mutate`` handlers (handlers.py) call these; the rules themselves are pure functions.

- mutate: pin ``spec.version`` at create (and keep it pinned on update), so that an operator
  release with a newer default never upgrades an existing database on its own;
- validate: the namespace's quota, the image policy (the engine's and the metrics exporter's
  images), version changes the engine cannot make on its data, deletion protection, a backup
  schedule that never fires, a restore from a backup that does not exist, failed or cannot be
  read; warnings for what is allowed but risky.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from kubernetes.utils import parse_quantity
from pydantic import ValidationError

from database_operator import cron
from database_operator.api.backup import BACKUP_KIND, DatabaseBackup
from database_operator.api.models import (
    MAX_DATABASES,
    MAX_STORAGE,
    OWNED_POD_LABELS,
    Database,
    DatabaseSpec,
)
from database_operator.backups.restore import Gate, resolve
from database_operator.desired.monitoring import exporter_container
from database_operator.desired.workload import image
from database_operator.engines import ENGINES, Engine, major_version, reserved_key
from database_operator.kube.api import Kube
from database_operator.kube.errors import ApiError
from database_operator.manifest import Manifest
from database_operator.webhooks.namespaces import NamespaceAnnotations


class RefusedError(Exception):
    """A request the webhook refuses; ``code`` is the HTTP status kubectl shows."""

    def __init__(self, message: str, code: int = 403) -> None:
        super().__init__(message)
        self.code = code


@dataclass
class Verdict:
    """Warnings for an allowed request (refusals are raised as :class:`RefusedError`)."""

    warnings: list[str] = field(default_factory=list)


# --- mutate --------------------------------------------------------------------------------------


def pinned_version(spec: Mapping[str, Any], old: Manifest | None) -> str | None:
    """The version to write into an empty ``spec.version``: the old object's (its spec, else
    the version its status reports deployed), else the engine's default today. None when
    ``spec.version`` is set or the engine is unknown (the schema refuses that next)."""
    if spec.get("version"):
        return None
    if old is not None:
        before = (old.get("spec") or {}).get("version") or (old.get("status") or {}).get("version")
        if before:
            return str(before)
    try:
        return ENGINES[Engine(spec.get("engine") or Engine.POSTGRES)].default_version
    except ValueError:
        return None


# --- validate ------------------------------------------------------------------------------------


def spec_problems(spec: Mapping[str, Any]) -> None:
    """The whole spec against the v1 model, and the CEL rules a model cannot hold: a spec that
    arrived through v1beta1 carries v1-only fields in an annotation that its schema did not
    check."""
    try:
        checked = DatabaseSpec.model_validate(spec)
    except ValidationError as error:
        first = error.errors()[0]
        where = ".".join(str(part) for part in first["loc"])
        raise RefusedError(f"spec.{where}: {first['msg']}", 422) from error
    for key in checked.parameters or {}:
        if reserved_key(checked.engine, key):
            message = f"spec.parameters.{key} is set by the operator for {checked.engine}"
            raise RefusedError(message, 422)
    for label in checked.pod_labels or {}:
        if label in OWNED_POD_LABELS:
            message = f"spec.podLabels may not set {label}: the operator selects its pods by it"
            raise RefusedError(message, 422)
    # The schema's pattern checks each field's range; only a parser sees "February 30".
    schedule = checked.backup.schedule if checked.backup else None
    if schedule and (problem := cron.validate(schedule)):
        raise RefusedError(f"spec.backup.schedule: {problem}", 422)


def _quantity(text: str, what: str) -> Decimal:
    try:
        return Decimal(parse_quantity(text))
    except ValueError as error:
        raise RefusedError(f"{what} is not a quantity: {text!r}") from error


def storage_of(spec: Mapping[str, Any]) -> Decimal:
    """The storage a spec requests, in bytes (0 without storage)."""
    storage = spec.get("storage") or {}
    return _quantity(str(storage["size"]), "spec.storage.size") if "size" in storage else Decimal(0)


def quota_problem(
    namespace: str,
    annotations: Mapping[str, str],
    others: Sequence[Mapping[str, Any]],
    spec: Mapping[str, Any],
    old_spec: Mapping[str, Any] | None,
) -> str | None:
    """Why the namespace's caps refuse this Database (``others``: the specs of the namespace's
    other Databases; ``old_spec`` on update), or None. An update is refused only for growing
    storage, so that lowering a cap never blocks unrelated changes."""
    if MAX_DATABASES in annotations and old_spec is None:
        text = annotations[MAX_DATABASES]
        if not text.isdigit():
            return f"namespace {namespace}'s annotation {MAX_DATABASES} is not a number: {text!r}"
        if len(others) + 1 > int(text):
            return (
                f"namespace {namespace} allows at most {text} Databases (annotation "
                f"{MAX_DATABASES}) and has {len(others)}: delete one or ask for a higher limit"
            )
    if MAX_STORAGE in annotations:
        limit = _quantity(
            annotations[MAX_STORAGE], f"namespace {namespace}'s annotation {MAX_STORAGE}"
        )
        wanted = storage_of(spec)
        growing = wanted > (storage_of(old_spec) if old_spec is not None else Decimal(0))
        in_use = sum((storage_of(other) for other in others), Decimal(0))
        if growing and in_use + wanted > limit:
            return (
                f"spec.storage.size {spec['storage']['size']} would bring namespace "
                f"{namespace}'s requested storage to {_human(in_use + wanted)}, above its limit "
                f"{annotations[MAX_STORAGE]} (annotation {MAX_STORAGE}); in use by other "
                f"Databases: {_human(in_use)}"
            )
    return None


def quota_applies(spec: Mapping[str, Any], old_spec: Mapping[str, Any] | None) -> bool:
    """Whether the namespace's caps can refuse this request at all: a create, or an update that
    grows storage (:func:`quota_problem` refuses nothing else). Every other update (the
    operator's own finalizer, a label, a version) is let through without reading a thing."""
    return old_spec is None or storage_of(spec) > storage_of(old_spec)


def _human(size: Decimal) -> str:
    """Bytes as the largest binary unit that keeps a whole number (Kubernetes' own style)."""
    for unit, factor in (("Ti", 2**40), ("Gi", 2**30), ("Mi", 2**20), ("Ki", 2**10)):
        if size >= factor and size % factor == 0:
            return f"{int(size // factor)}{unit}"
    return str(int(size))


def from_registry(reference: str, prefix: str) -> bool:
    """Whether the image ``reference`` comes from ``prefix`` (a registry, or a registry and
    path): the prefix must end where a path segment, tag or digest does, so that
    `registry.example.com` never lets `registry.example.com.evil.io/x` through."""
    if prefix.endswith("/"):
        return reference.startswith(prefix)
    return reference == prefix or reference.startswith((f"{prefix}/", f"{prefix}:", f"{prefix}@"))


def image_problem(db: Database, allowed: Sequence[str]) -> str | None:
    """Why the image policy (allowed registry prefixes; empty: any) refuses the image the
    Database would run, or None."""
    running = image(db)
    if not allowed or any(from_registry(running, prefix) for prefix in allowed):
        return None
    where = "spec.image" if db.spec.image else "spec.image (empty, so the official image)"
    return (
        f"{where} {running} is not from an allowed registry ({', '.join(allowed)}): set "
        "spec.image to an image from one of them"
    )


def exporter_image(db: Database) -> str | None:
    """The metrics exporter's image the Database would run, or None without monitoring."""
    container = exporter_container(db)
    return str(container["image"]) if container is not None else None


def exporter_image_problem(db: Database, allowed: Sequence[str]) -> str | None:
    """Why the image policy refuses the metrics exporter's image (spec.monitoring), or None:
    the policy is about what runs in the pods, and the exporter runs there too."""
    running = exporter_image(db)
    if running is None or not allowed or any(from_registry(running, p) for p in allowed):
        return None
    monitoring = db.spec.monitoring
    where = (
        "spec.monitoring.image"
        if monitoring is not None and monitoring.image
        else "spec.monitoring.image (empty, so the pinned exporter release)"
    )
    return (
        f"{where} {running} is not from an allowed registry ({', '.join(allowed)}): set "
        "spec.monitoring.image to an image from one of them"
    )


def version_change(old: Database, new: Database) -> Verdict:
    """Refuse a version change the engine cannot make on the data it keeps; warn when it can
    but there is no way back. Without storage the data goes with the pod anyway; with
    spec.image set the image, not the version, says what runs."""
    verdict = Verdict()
    engine = new.spec.engine
    facts = ENGINES[engine]
    before = old.spec.version or old.status.version or facts.default_version
    after = new.spec.version or facts.default_version
    if new.spec.storage is None or new.spec.image or before == after:
        return verdict
    old_major, new_major = major_version(before), major_version(after)
    if old_major is None or new_major is None:
        verdict.warnings.append(
            f"spec.version {before} -> {after}: the operator cannot tell the major versions, "
            f"so it cannot check that {engine} can upgrade its data in place"
        )
        return verdict
    if new_major < old_major:
        raise RefusedError(
            f"spec.version {before} -> {after} is a major-version downgrade: {engine} {new_major} "
            f"cannot read data written by {engine} {old_major}. Keep spec.version at "
            f"{old_major}.x, or create a new Database at {after} and restore a dump into it",
            422,
        )
    steps = facts.major_upgrade_steps
    if new_major > old_major and steps is not None and new_major - old_major > steps:
        can = "no major upgrade in place" if steps == 0 else f"at most {steps} major at a time"
        raise RefusedError(
            f"spec.version {before} -> {after}: {engine} makes {can} on existing data. "
            f"Keep spec.version at {old_major}.x, or {facts.major_upgrade_path}",
            422,
        )
    if new_major > old_major:
        verdict.warnings.append(
            f"spec.version {before} -> {after} upgrades the data in spec.storage in place when "
            f"the new pod starts; {engine} {old_major} cannot read it afterwards: take a backup "
            "first"
        )
    return verdict


def deletion_problem(old: Manifest) -> str | None:
    """Why deletion protection refuses deleting ``old``, or None."""
    if not (old.get("spec") or {}).get("deletionProtection"):
        return None
    meta = old.get("metadata") or {}
    name, namespace = meta.get("name", ""), meta.get("namespace", "")
    return (
        f"Database {namespace}/{name} has spec.deletionProtection: true. To delete it, first run "
        f"kubectl patch database {name} -n {namespace} --type merge "
        """-p '{"spec":{"deletionProtection":false}}'"""
    )


# --- the handlers' work ----------------------------------------------------------------------


@dataclass
class Admission:
    """What the webhook handlers do, with the API to read the namespace and its Databases."""

    kube: Kube
    allowed_images: Sequence[str] = ()
    #: The namespaces' annotations as a watch holds them; one it cannot vouch for (or a watch
    #: never started: the default) is read.
    namespaces: NamespaceAnnotations = field(default_factory=NamespaceAnnotations)

    async def validate(
        self, operation: str, new: Manifest | None, old: Manifest | None
    ) -> list[str]:
        """The warnings of an allowed request; raises :class:`RefusedError`."""
        if operation == "DELETE":
            if old is not None and (problem := deletion_problem(old)):
                raise RefusedError(problem)
            return []
        if new is None:
            return []
        spec = new.get("spec") or {}
        spec_problems(spec)
        db = Database.model_validate(new)
        warnings = await self._check_restore(db) if operation == "CREATE" else []
        before = Database.model_validate(old) if old is not None else None
        verdict = version_change(before, db) if before is not None else Verdict()
        image_changed = before is None or image(before) != image(db)
        if image_changed and (problem := image_problem(db, self.allowed_images)):
            raise RefusedError(problem)
        exporter_changed = before is None or exporter_image(before) != exporter_image(db)
        if exporter_changed and (problem := exporter_image_problem(db, self.allowed_images)):
            raise RefusedError(problem)
        await self._check_quota(db.namespace, db.name, spec, (old or {}).get("spec"))
        return verdict.warnings + warnings

    async def _check_restore(self, db: Database) -> list[str]:
        """A restore from a DatabaseBackup that does not exist, failed, or cannot be read by
        this engine and version is refused here; one still running is let through with a
        warning (the operator restores it once it completed)."""
        if db.spec.restore is None or db.spec.restore.backup is None:
            return []
        name = db.spec.restore.backup
        found = await self.kube.get(BACKUP_KIND, db.namespace, name)
        named = {name: DatabaseBackup.model_validate(found)} if found is not None else {}
        resolved = resolve(db, named)
        if isinstance(resolved, Gate) and resolved.failure is not None:
            raise RefusedError(resolved.failure.message, 422)
        if isinstance(resolved, Gate) and resolved.progress is not None:
            return [
                f"spec.restore.backup: DatabaseBackup {name} has not completed yet: the "
                "Database is restored once it has (and fails if it fails)"
            ]
        return []

    async def _check_quota(
        self, namespace: str, name: str, spec: Mapping[str, Any], old_spec: Any
    ) -> None:
        if not quota_applies(spec, old_spec):
            return
        annotations = self.namespaces.of(namespace)
        if annotations is None:
            ns = await self.kube.get("Namespace", "", namespace)
            annotations = ((ns or {}).get("metadata") or {}).get("annotations") or {}
        if MAX_DATABASES not in annotations and MAX_STORAGE not in annotations:
            return
        try:
            others = [
                item.get("spec") or {}
                async for page in self.kube.list_pages("Database", namespace)
                for item in page
                if (item.get("metadata") or {}).get("name") != name
            ]
        except ApiError as error:
            raise RefusedError(
                f"cannot read the namespace's Databases to check its quota: {error}", 503
            ) from error
        if problem := quota_problem(namespace, annotations, others, spec, old_spec):
            raise RefusedError(problem)
