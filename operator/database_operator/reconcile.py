"""One idempotent reconcile: make a Database's children match its spec, then write its status.

The same function serves create, update, resume, the periodic resync and changes of owned
children. It reads what exists, writes only what differs (so the steady state costs no write),
and reports what it did so the caller can count it and log it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from database_operator import desired
from database_operator.api.models import Database, DatabaseStatus, DeletionPolicy, Phase
from database_operator.compare import needs_write, owner_refs_to
from database_operator.desired import Manifest
from database_operator.kube import ApiError, Kube
from database_operator.status import Outcome, compute_status

#: Posts a Kubernetes Event on the Database: (type "Normal"/"Warning", reason, message).
EventSink = Callable[[str, str, str], None]


def _no_events(_type: str, _reason: str, _message: str) -> None:
    return None


@dataclass
class Result:
    """What one reconcile found and did."""

    status: DatabaseStatus
    outcome: Outcome
    #: Children created (kind list); children rewritten because they differed (kind list).
    created: list[str] = field(default_factory=list)
    corrected: list[str] = field(default_factory=list)
    #: Kinds of the children written although the spec had not changed: drift put back.
    drift: list[str] = field(default_factory=list)
    status_written: bool = False

    @property
    def result(self) -> str:
        """'failed' for a spec that cannot be acted on, 'paused', or 'success'."""
        if self.outcome.failure_reason:
            return "failed"
        return "paused" if self.outcome.paused else "success"


@dataclass(frozen=True)
class Failure:
    """A spec the operator cannot act on: reported in conditions, not retried in a loop."""

    reason: str
    message: str


async def reconcile(
    kube: Kube,
    body: Mapping[str, Any],
    events: EventSink = _no_events,
    now: Callable[[], datetime] = lambda: datetime.now(UTC),
) -> Result:
    """Bring one Database's children to the desired state and write its status when it changed.

    Raises ApiError for API failures (the caller decides whether to retry).
    """
    db = Database.model_validate(dict(body))
    result = Result(status=db.status, outcome=Outcome())
    failure: Failure | None = None
    deployment: Manifest | None

    if db.spec.paused:
        result.outcome = Outcome(paused=True)
        deployment = await kube.get("Deployment", db.namespace, db.name)
    else:
        failure = await _ensure_credentials(kube, db, result, events)
        if failure is None:
            deployment, failure = await _ensure_children(kube, db, result, events)
        else:
            deployment = await kube.get("Deployment", db.namespace, db.name)
        if failure is not None:
            result.outcome = Outcome(failure_reason=failure.reason, failure_message=failure.message)

    await write_status(kube, db, deployment=deployment, result=result, events=events, now=now())
    return result


async def write_status(
    kube: Kube,
    db: Database,
    *,
    deployment: Manifest | None,
    result: Result,
    events: EventSink,
    now: datetime,
) -> None:
    """Compute the new status; patch it through /status only when it differs from the stored one."""
    new = compute_status(db, deployment, db.status, result.outcome, now)
    result.status = new
    old_wire, new_wire = db.status.to_wire(), new.to_wire()
    if old_wire == new_wire:
        return
    # A merge patch: fields that disappeared are sent as null so they are removed.
    patch: dict[str, Any] = {key: None for key in old_wire if key not in new_wire}
    patch.update(new_wire)
    await kube.patch_status(db.namespace, db.name, patch)
    result.status_written = True
    if new.phase != db.status.phase:
        if new.phase is Phase.FAILED:
            events(
                "Warning", result.outcome.failure_reason or "Failed", result.outcome.failure_message
            )
        else:
            events(
                "Normal", f"Phase{new.phase}", f"phase {db.status.phase or 'None'} -> {new.phase}"
            )


async def _ensure_credentials(
    kube: Kube, db: Database, result: Result, events: EventSink
) -> Failure | None:
    """The credentials Secret exists and holds the engine's keys; generated once if ours."""
    name = desired.credentials_secret_name(db)
    observed = await kube.get("Secret", db.namespace, name)
    if db.spec.credentials_secret_ref is not None:
        if observed is None:
            return Failure(
                "CredentialsSecretNotFound",
                f"Secret {name!r} named by spec.credentialsSecretRef does not exist in namespace "
                f"{db.namespace!r}",
            )
    elif observed is None:
        # A volume that outlived its Secret was initialised with the lost password: a new one
        # would lock the engine out of its own data.
        if db.spec.storage and await kube.get(
            "PersistentVolumeClaim", db.namespace, desired.pvc_name(db)
        ):
            return Failure(
                "CredentialsSecretLost",
                f"Secret {name!r} is gone but PersistentVolumeClaim {desired.pvc_name(db)!r} holds "
                "data initialised with its password: restore the Secret (or delete the claim to "
                "start afresh)",
            )
        # Created once, with a fresh password; never re-applied, so never regenerated.
        await kube.create(desired.secret(db, desired.generate_password()))
        result.created.append("Secret")
        events("Normal", "Created", f"created Secret {name} with generated credentials")
        return None
    else:
        await _ensure_secret_ownership(kube, db, observed, result)

    missing = desired.missing_credentials_keys(db, observed.get("data"))
    if missing:
        return Failure(
            "CredentialsSecretInvalid",
            f"Secret {name!r} lacks the key(s) {', '.join(missing)} that {db.spec.engine} needs",
        )
    return None


async def _ensure_secret_ownership(
    kube: Kube, db: Database, observed: Manifest, result: Result
) -> None:
    """Keep labels and our owner reference on the generated Secret in line with deletionPolicy.

    A merge patch of metadata only: re-applying the Secret could touch its data.
    """
    uid = str(db.metadata.get("uid", ""))
    wanted = desired.retained_owner_references(db)
    labels = desired.labels(db)
    if not needs_write(observed, {"metadata": {"labels": labels, "ownerReferences": wanted}}, uid):
        return
    meta = observed["metadata"]
    others = [ref for ref in meta.get("ownerReferences") or [] if ref.get("uid") != uid]
    await kube.merge_patch(
        "Secret",
        db.namespace,
        meta["name"],
        {"metadata": {"labels": labels, "ownerReferences": others + wanted}},
    )
    result.corrected.append("Secret")


#: Answers of the API server that reject what we sent: retrying the same object cannot help.
REJECTED = {400, 403, 422}


async def _ensure_children(
    kube: Kube, db: Database, result: Result, events: EventSink
) -> tuple[Manifest | None, Failure | None]:
    """Apply each child that is missing or differs; return the Deployment as it now is, and the
    first child the API server refused (e.g. a PVC whose StorageClass cannot expand)."""
    uid = str(db.metadata.get("uid", ""))
    deployment: Manifest | None = None
    failure: Failure | None = None
    for manifest in desired.children(db):
        kind, name = manifest["kind"], manifest["metadata"]["name"]
        observed = await kube.get(kind, db.namespace, name)
        if needs_write(observed, manifest, uid):
            try:
                applied = await kube.apply(manifest)
            except ApiError as error:
                if error.status not in REJECTED:
                    raise
                failure = failure or Failure(
                    f"{kind}Rejected",
                    f"the API server rejected {kind} {name}: {error.message}",
                )
                continue
            if observed is None:
                result.created.append(kind)
                events("Normal", "Created", f"created {kind} {name}")
            else:
                result.corrected.append(kind)
            if db.status.observed_generation == db.metadata.get("generation"):
                result.drift.append(kind)
            observed = applied
        if kind == "Deployment":
            deployment = observed
    return deployment, failure


async def finalize(
    kube: Kube, body: Mapping[str, Any], events: EventSink = _no_events
) -> list[str]:
    """The Database is being deleted: say so in status, and with deletionPolicy Delete remove
    the PVC and the generated Secret — only if they carry our owner reference, so data the
    operator did not create is never deleted. Deployment and Service go with their owner
    reference (garbage collector). Returns the kinds deleted here.
    """
    db = Database.model_validate(dict(body))
    result = Result(status=db.status, outcome=Outcome(deleting=True))
    deployment = await kube.get("Deployment", db.namespace, db.name)
    await write_status(
        kube, db, deployment=deployment, result=result, events=events, now=datetime.now(UTC)
    )

    deleted: list[str] = []
    if db.spec.deletion_policy is not DeletionPolicy.DELETE:
        return deleted
    uid = str(db.metadata.get("uid", ""))
    candidates = [("PersistentVolumeClaim", desired.pvc_name(db))]
    if db.spec.credentials_secret_ref is None:
        candidates.append(("Secret", desired.credentials_secret_name(db)))
    for kind, name in candidates:
        observed = await kube.get(kind, db.namespace, name)
        if observed is None or not owner_refs_to(observed, uid):
            continue
        if await kube.delete(kind, db.namespace, name, observed["metadata"]["uid"]):
            deleted.append(kind)
            events("Normal", "Deleted", f"deleted {kind} {name} (deletionPolicy: Delete)")
    return deleted
