"""Writing what the spec asks for: the credentials Secret (generated once, never re-applied),
each child that is missing or differs, and the removal of children the spec no longer asks
for. Only a missing or differing child is written, so the steady state costs no write."""

from __future__ import annotations

import base64
from typing import Any

from database_operator import desired
from database_operator.api.models import Database
from database_operator.compare import covers, needs_write
from database_operator.engines import facts
from database_operator.kube.api import Kube, KubeApi
from database_operator.kube.errors import ApiError, StaleReadError
from database_operator.manifest import Manifest
from database_operator.ownership import CREATED_FOR, conflict, conflict_message, is_ours
from database_operator.reasons import Problem, Reason, rejected
from database_operator.reconcile.observe import ChildKey, Observed
from database_operator.reconcile.result import Result
from database_operator.reconcile.takeback import ChildNotConvergedError, write_child

#: Fields the API server will not change in place, by kind.
IMMUTABLE: dict[str, tuple[tuple[str, ...], ...]] = {"Deployment": (("spec", "selector"),)}


async def ensure_credentials(
    kube: KubeApi, db: Database, observed: Observed, result: Result
) -> tuple[Manifest | None, Problem | None]:
    """The credentials Secret exists and holds the engine's keys; generated once if ours.
    Returns its ``data``, or why it cannot be used."""
    name = desired.credentials_secret_name(db)
    secret = observed.credentials
    if not observed.generated:
        if secret is None:
            return None, Problem(
                Reason.CREDENTIALS_SECRET_NOT_FOUND,
                f"Secret {name!r} named by spec.credentialsSecretRef does not exist in namespace "
                f"{db.namespace!r}",
            )
    else:
        has_data = observed.children.get(("PersistentVolumeClaim", desired.pvc_name(db)))
        if secret is None and has_data is not None and kube.cached("Secret"):
            # The cache said it is missing: the API server has the last word before a Database
            # is failed for it.
            secret = await kube.get_live("Secret", db.namespace, name)
        if secret is None:
            # A volume that outlived its Secret was initialised with the lost password: a new
            # one would lock the engine out of its own data.
            if has_data is not None:
                return None, Problem(
                    Reason.CREDENTIALS_SECRET_LOST,
                    f"Secret {name!r} is gone but PersistentVolumeClaim {desired.pvc_name(db)!r} "
                    "holds data initialised with its password: restore the Secret from a backup, "
                    f"with its annotation {CREATED_FOR}={db.name} (or delete the claim to start "
                    "afresh)",
                )
            secret, failure = await _generate_secret(kube, db, result)
            if failure is not None:
                return None, failure
        if "Secret" not in result.created:
            secret = await _ensure_secret_ownership(kube, db, secret, result)

    data = (secret or {}).get("data") or {}
    missing = desired.missing_credentials_keys(db, data)
    if missing:
        why = (
            " (read replicas need it)"
            if set(missing) - set(facts(db.spec.engine).secret_keys)
            else ""
        )
        return None, Problem(
            Reason.CREDENTIALS_SECRET_INVALID,
            f"Secret {name!r} lacks the key(s) {', '.join(missing)} that {db.spec.engine} "
            f"needs{why}",
        )
    if (reserved := desired.reserved_username(db, data)) is not None:
        return None, Problem(
            Reason.CREDENTIALS_SECRET_INVALID,
            f"Secret {name!r} names the user {reserved!r}, which the operator keeps for "
            f"{db.spec.engine}'s own use: give the application another username",
        )
    return data, None


async def _generate_secret(
    kube: KubeApi, db: Database, result: Result
) -> tuple[Manifest, Problem | None]:
    """Create the Secret with a fresh password. Created once and never re-applied, so never
    regenerated. It is created without a read first (the cache not holding it is enough to
    try): if it turns out to exist (a namesake without our label, which the watch does not
    deliver, or an earlier create whose answer was lost) the existing one is read and used only
    if it is ours."""
    manifest = desired.secret(db, desired.generate_password(), desired.generate_password())
    created = await kube.create(manifest, exist_ok=True)
    if created is not None:
        result.created.append("Secret")
        return created, None
    name = manifest["metadata"]["name"]
    existing = await kube.get_live("Secret", db.namespace, name)
    if existing is None:
        # The create found it (409 AlreadyExists), the read does not: look again.
        raise StaleReadError(
            409,
            "AlreadyExists",
            "the Secret was created and deleted meanwhile",
            "POST",
            Kube.path("Secret", db.namespace, name),
        )
    found = conflict(existing, db)
    if found is not None:
        return existing, Problem(Reason.CHILD_NAME_CONFLICT, conflict_message([found]))
    return existing, None


async def _ensure_secret_ownership(
    kube: KubeApi, db: Database, observed: Manifest, result: Result
) -> Manifest:
    """Keep labels and our owner reference on the generated Secret in line with deletionPolicy,
    mark it created for the Database (one an earlier version made lacks the mark), and add the
    replication keys a Secret generated before the operator ran replicas lacks — once read
    replicas are asked for, so an upgrade leaves the data of the Secrets it finds alone.

    One merge patch: re-applying the Secret could touch the password; adding a key cannot.
    """
    uid = str(db.metadata.get("uid", ""))
    wanted = desired.retained_owner_references(db)
    labels = desired.labels(db)
    marked = {CREATED_FOR: db.name}
    new_keys = {
        key: base64.b64encode(desired.generate_password().encode()).decode()
        for key in desired.replication_keys_to_generate(db, observed.get("data"))
        if desired.read_replica_count(db)
    }
    meta_ok = not needs_write(
        observed,
        {"metadata": {"labels": labels, "ownerReferences": wanted, "annotations": marked}},
        uid,
    )
    if meta_ok and not new_keys:
        return observed
    patch = owner_references_patch(db, observed, wanted) | {"labels": labels}
    patch["annotations"] = marked
    body: Manifest = {"metadata": patch} | ({"data": new_keys} if new_keys else {})
    result.corrected.append("Secret")
    return await kube.merge_patch("Secret", db.namespace, observed["metadata"]["name"], body)


def owner_references_patch(db: Database, observed: Manifest, wanted: list[Manifest]) -> Manifest:
    """The metadata patch that makes our owner references on ``observed`` ``wanted`` and keeps
    other owners'."""
    uid = str(db.metadata.get("uid", ""))
    others = [
        ref for ref in observed["metadata"].get("ownerReferences") or [] if ref.get("uid") != uid
    ]
    return {"ownerReferences": others + wanted}


async def ensure_children(
    kube: KubeApi,
    db: Database,
    wanted: list[Manifest],
    children: dict[ChildKey, Manifest],
    result: Result,
) -> Problem | None:
    """Write each child that is missing or differs (``children`` gets what it now is); the
    first child the API server refused (e.g. a PVC whose StorageClass cannot expand) or keeps
    different from what was written (e.g. cpu 0.1m stored as 1m by a server that rounds it)."""
    failure: Problem | None = None
    for manifest in wanted:
        try:
            await _ensure_child(kube, db, manifest, children, result)
        except ChildNotConvergedError as error:
            failure = failure or Problem(Reason.CHILD_NOT_CONVERGED, error.message)
        except ApiError as error:
            if not error.refused:
                raise
            kind, name = manifest["kind"], manifest["metadata"]["name"]
            failure = failure or Problem(
                rejected(kind), f"the API server rejected {kind} {name}: {error.message}"
            )
    return failure


async def _ensure_child(
    kube: KubeApi,
    db: Database,
    manifest: Manifest,
    children: dict[ChildKey, Manifest],
    result: Result,
) -> None:
    """Write ``manifest`` if it is missing or differs; record what was done."""
    key = (manifest["kind"], manifest["metadata"]["name"])
    uid = str(db.metadata.get("uid", ""))
    current = children.get(key)
    if not needs_write(current, manifest, uid):
        return
    if current is not None and _immutable_changed(current, manifest):
        # Only a new object can have it (a Deployment's selector, e.g. one made by 0.1.0):
        # this one is ours, so replace it.
        meta = current["metadata"]
        await kube.delete(manifest["kind"], db.namespace, meta["name"], meta["uid"])
        result.recreated.append(manifest["kind"])
        current = None
    children[key] = await write_child(kube, current, manifest, uid, result)
    (result.created if current is None else result.corrected).append(manifest["kind"])
    if current is not None and db.status.observed_generation == db.metadata.get("generation"):
        result.drift.append(manifest["kind"])


def _immutable_changed(observed: Manifest, wanted: Manifest) -> bool:
    for path in IMMUTABLE.get(wanted["kind"], ()):
        have: Any = observed
        want: Any = wanted
        for step in path:
            have, want = (have or {}).get(step), (want or {}).get(step)
        if not covers(have, want) or not covers(want, have):
            return True
    return False


async def remove_surplus(kube: KubeApi, db: Database, observed: Observed, result: Result) -> None:
    """Delete the Database's own children that the spec no longer asks for (never a namesake)."""
    for obj in observed.surplus:
        if is_ours(obj, db):
            meta = obj["metadata"]
            if await kube.delete(obj["kind"], db.namespace, meta["name"], meta["uid"]):
                result.removed.append(obj["kind"])
