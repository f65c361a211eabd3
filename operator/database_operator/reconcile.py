"""One idempotent reconcile: make a Database's children match its spec, then write its status;
and the end of a Database's life: finalize, then let it go.

Ownership comes before action: every child is read first, and if any object by a child's name
is not the Database's own (see ownership.py) nothing at all is written but the status, which
says what clashes. Only a missing or differing child is written, so the steady state costs no
write. What a reconcile did is returned for the caller to count, log and cache.
"""

from __future__ import annotations

import base64
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from database_operator import desired, tracing
from database_operator.api.backup import RestoreRecord
from database_operator.api.models import KIND, Database, DatabaseStatus, DeletionPolicy, Phase
from database_operator.backups import restore, schedule, state
from database_operator.backups.state import Backups, BackupSummary
from database_operator.carryover import carry_over
from database_operator.compare import (
    covers,
    difference,
    dotted,
    list_takebacks,
    needs_write,
    owner_refs_to,
)
from database_operator.engines import facts
from database_operator.kube import ApiError, KubeApi
from database_operator.manifest import Manifest
from database_operator.ownership import (
    CREATED_FOR,
    conflict,
    conflict_message,
    is_ours,
    needs_managed_fields,
)
from database_operator.reasons import REFUSED_WRITES, Problem, Reason, rejected
from database_operator.status import Outcome, Workloads, compute_status

#: Posts a Kubernetes Event on the Database: (type "Normal"/"Warning", reason, message).
EventSink = Callable[[str, str, str], None]
#: The operator's finalizer on every Database: the data-bearing children are dealt with (kept or
#: deleted, as deletionPolicy says) before the Database goes. The name Kopf used for it before.
FINALIZER = "databases.example.com/finalizer"


def _no_events(_type: str, _reason: str, _message: str) -> None:
    return None


#: The one clock of the reconcile layer: a function, so tests can pass their own.
Clock = Callable[[], datetime]


def system_clock() -> datetime:
    return datetime.now(UTC)


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
    #: Kinds whose lists were taken back from another field manager.
    taken_back: list[str] = field(default_factory=list)
    #: Kinds of the children deleted because the spec no longer asks for them.
    removed: list[str] = field(default_factory=list)
    #: Kinds of the children deleted and created anew (an immutable field had to change).
    recreated: list[str] = field(default_factory=list)
    #: The Database as our status write returned it (None: the status did not change).
    body: Manifest | None = None
    #: The Database turned out to be gone (or replaced): nothing was done.
    gone: bool = False
    #: What its backups say (None: not looked at), and what its schedule did.
    backups: BackupSummary | None = None
    backups_created: list[str] = field(default_factory=list)
    backups_deleted: list[str] = field(default_factory=list)
    #: When its backup schedule is next due (None: none).
    next_backup: datetime | None = None

    @property
    def status_written(self) -> bool:
        return self.body is not None

    @property
    def waits_for_a_change(self) -> bool:
        """A write was refused (or undone): only a change of the spec or a child can help."""
        failure = self.outcome.failure
        return failure is not None and failure.reason in REFUSED_WRITES

    @property
    def result(self) -> str:
        """'failed' for a spec that cannot be acted on, 'paused', 'gone', or 'success'."""
        if self.gone:
            return "gone"
        if self.outcome.failure:
            return "failed"
        return "paused" if self.outcome.paused else "success"


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


async def reconcile(
    kube: KubeApi,
    body: Mapping[str, Any],
    events: EventSink = _no_events,
    now: Clock = system_clock,
    *,
    confirmed: bool = False,
    backups: Backups | None = None,
    agent_image: str = "",
) -> Result:
    """Bring one Database's children to the desired state and write its status when it changed.

    ``confirmed``: ``body`` came from the API server just now (not from a cache that may hold a
    Database deleted meanwhile); else it is re-read before anything is created. ``backups``:
    its DatabaseBackups as the watch has them, for its restore, its schedule and what its
    status says of them (None: not looked at); ``agent_image``: the image of the Jobs' agent.
    Raises ApiError for API failures (the caller decides whether to retry).
    """
    db = Database.model_validate(dict(body))
    at = now()
    result = Result(status=db.status, outcome=Outcome())
    observed = await _observe(kube, db)
    conflicts = [found for obj in observed.named_like_children() if (found := conflict(obj, db))]
    children = {key: obj for key, obj in observed.children.items() if obj and is_ours(obj, db)}
    failure: Problem | None = None
    restoring: Problem | None = None
    restored: RestoreRecord | None = None

    if conflicts:
        failure = Problem(Reason.CHILD_NAME_CONFLICT, conflict_message(conflicts))
    elif db.spec.paused:
        result.outcome = Outcome(paused=True)
    else:
        if not confirmed and _creates_something(observed):
            fresh = await kube.get(KIND, db.namespace, db.name)
            if fresh is None or fresh["metadata"].get("uid") != db.metadata.get("uid"):
                result.gone = True
                return result
        credentials, failure = await _ensure_credentials(kube, db, observed, result)
        if credentials is not None:
            gate = await restore.gate(
                kube,
                db,
                (backups or Backups()).named,
                primary=children.get(("Deployment", db.name)),
                agent_image=agent_image,
            )
            checksum = desired.credentials_checksum(db, credentials)
            wanted = carry_over(
                [*desired.children(db, checksum), desired.connection_secret(db, credentials)],
                children,
                db,
                checksum,
            )
            if gate.hold:  # the restore is not done: no database runs on the volume yet
                wanted = [child for child in wanted if child["kind"] != "Deployment"]
            failure = gate.failure or await _ensure_children(kube, db, wanted, children, result)
            await _remove_surplus(kube, db, observed, result)
            restoring, restored = gate.progress, gate.restored
    if backups is not None and failure is None and not conflicts:
        tended = await schedule.tend(kube, db, backups.of_database, at)
        result.backups_created, result.backups_deleted = tended.created, tended.deleted
        result.next_backup = tended.next_due
    connection = ("Secret", desired.connection_secret_name(db))
    result.outcome = Outcome(
        paused=result.outcome.paused,
        failure=failure,
        binding=connection[1] if children.get(connection) else None,
        restoring=restoring,
        restored=restored,
    )
    if backups is not None:
        result.backups = state.summarize(db, backups.of_database, at)
    result.status, result.body = await write_status(
        kube,
        db,
        workloads=Workloads(
            primary=children.get(("Deployment", db.name)),
            replicas=children.get(("Deployment", desired.replicas_name(db))),
        ),
        outcome=result.outcome,
        events=events,
        now=lambda: at,
        backups=result.backups,
    )
    if result.created:
        # One Event for a creation, not one per child; it names the first phase too.
        events(
            "Normal",
            "Created",
            f"created {', '.join(result.created)}; phase {result.status.phase or 'None'}",
        )
    return result


async def observe_workloads(kube: KubeApi, db: Database) -> Workloads:
    """The primary's and the read replicas' Deployments, if they are the Database's own."""

    async def ours(name: str) -> Manifest | None:
        found = await kube.get("Deployment", db.namespace, name)
        return found if found is not None and is_ours(found, db) else None

    return Workloads(primary=await ours(db.name), replicas=await ours(desired.replicas_name(db)))


def _creates_something(observed: Observed) -> bool:
    return (observed.generated and observed.credentials is None) or any(
        obj is None for obj in observed.children.values()
    )


async def _observe(kube: KubeApi, db: Database) -> Observed:
    """Read the credentials Secret, every child the spec asks for, the connection Secret, and
    what may be left of read replicas scaled away.

    A watched child comes from the watch's cache; one the cache lacks is asked of the API server
    (``get_live``), since a namesake without our label is invisible to the watch, and must be
    seen before anything is created under its name.
    """
    credentials = await kube.get("Secret", db.namespace, desired.credentials_secret_name(db))
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


async def read_child(kube: KubeApi, db: Database, kind: str, name: str) -> Manifest | None:
    """A child by name, from the watch's cache when it holds the kind; from the API server when
    the cache lacks it (a namesake without our label), or when only its ``managedFields`` can
    say whether it is ours (a kept child an earlier version made: ownership.py)."""
    found = await kube.get(kind, db.namespace, name)
    if kube.cached(kind) and (found is None or needs_managed_fields(found, db)):
        found = await kube.get_live(kind, db.namespace, name)
    return found


def merge_patch_of(old: Manifest, new: Manifest) -> Manifest:
    """The merge patch that turns the status ``old`` into ``new`` (empty: they are equal).
    Fields that disappeared are sent as null, so they are removed."""
    if old == new:
        return {}
    patch: dict[str, Any] = {key: None for key in old if key not in new}
    patch.update(new)
    return patch


async def write_status(
    kube: KubeApi,
    db: Database,
    *,
    workloads: Workloads,
    outcome: Outcome,
    events: EventSink,
    now: Clock,
    backups: BackupSummary | None = None,
) -> tuple[DatabaseStatus, Manifest | None]:
    """Compute the new status; patch it through /status only when it differs from the stored
    one. Returns the new status and the Database as the patch returned it (None: not written).
    ``backups``: what its backups say (None: not looked at; the status keeps what it said)."""
    new = compute_status(db, workloads, db.status, outcome, now(), backups=backups)
    patch = merge_patch_of(db.status.to_wire(), new.to_wire())
    if not patch:
        return new, None
    attributes = {
        "database.phase": str(new.phase or ""),
        "database.previous_phase": str(db.status.phase or ""),
    }
    with tracing.span("write status", attributes):
        written = await kube.patch_status(db.namespace, db.name, patch)
    if new.phase != db.status.phase:
        if new.phase is Phase.FAILED:
            failure = outcome.failure or Problem(Reason.RECONCILE_ERROR)
            events("Warning", failure.reason, failure.message)
        elif db.status.phase is not None:  # the first phase is in the creation Event
            events(
                "Normal", f"Phase{new.phase}", f"phase {db.status.phase or 'None'} -> {new.phase}"
            )
    return new, written


async def _ensure_credentials(
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
    elif secret is None:
        # A volume that outlived its Secret was initialised with the lost password: a new one
        # would lock the engine out of its own data.
        if observed.children.get(("PersistentVolumeClaim", desired.pvc_name(db))) is not None:
            return None, Problem(
                Reason.CREDENTIALS_SECRET_LOST,
                f"Secret {name!r} is gone but PersistentVolumeClaim {desired.pvc_name(db)!r} holds "
                "data initialised with its password: restore the Secret from a backup, with its "
                f"annotation {CREATED_FOR}={db.name} (or delete the claim to start afresh)",
            )
        secret, failure = await _generate_secret(kube, db)
        if failure is not None:
            return None, failure
        result.created.append("Secret")
    else:
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
    return data, None


async def _generate_secret(kube: KubeApi, db: Database) -> tuple[Manifest | None, Problem | None]:
    """Create the Secret with a fresh password. Created once and never re-applied, so never
    regenerated; if it turns out to exist (an earlier create whose answer was lost, or a
    namesake made meanwhile) the existing one is used only if it is ours."""
    manifest = desired.secret(db, desired.generate_password(), desired.generate_password())
    created = await kube.create(manifest, exist_ok=True)
    if created is not None:
        return created, None
    existing = await kube.get("Secret", db.namespace, manifest["metadata"]["name"])
    if existing is None:
        raise ApiError(409, "Conflict", "the Secret was created and deleted meanwhile", "POST", "")
    found = conflict(existing, db)
    if found is not None:
        return None, Problem(Reason.CHILD_NAME_CONFLICT, conflict_message([found]))
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
    patch = _owner_references_patch(db, observed, wanted) | {"labels": labels}
    patch["annotations"] = marked
    body: Manifest = {"metadata": patch} | ({"data": new_keys} if new_keys else {})
    result.corrected.append("Secret")
    return await kube.merge_patch("Secret", db.namespace, observed["metadata"]["name"], body)


def _owner_references_patch(db: Database, observed: Manifest, wanted: list[Manifest]) -> Manifest:
    """The metadata patch that makes our owner references on ``observed`` ``wanted`` and keeps
    other owners'."""
    uid = str(db.metadata.get("uid", ""))
    others = [
        ref for ref in observed["metadata"].get("ownerReferences") or [] if ref.get("uid") != uid
    ]
    return {"ownerReferences": others + wanted}


async def _ensure_children(
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
    children[key] = await _write_child(kube, current, manifest, uid, result)
    (result.created if current is None else result.corrected).append(manifest["kind"])
    if current is not None and db.status.observed_generation == db.metadata.get("generation"):
        result.drift.append(manifest["kind"])


#: Fields the API server will not change in place, by kind.
IMMUTABLE: dict[str, tuple[tuple[str, ...], ...]] = {"Deployment": (("spec", "selector"),)}


def _immutable_changed(observed: Manifest, wanted: Manifest) -> bool:
    for path in IMMUTABLE.get(wanted["kind"], ()):
        have: Any = observed
        want: Any = wanted
        for step in path:
            have, want = (have or {}).get(step), (want or {}).get(step)
        if not covers(have, want) or not covers(want, have):
            return True
    return False


async def _remove_surplus(kube: KubeApi, db: Database, observed: Observed, result: Result) -> None:
    """Delete the Database's own children that the spec no longer asks for (never a namesake)."""
    for obj in observed.surplus:
        if is_ours(obj, db):
            meta = obj["metadata"]
            if await kube.delete(obj["kind"], db.namespace, meta["name"], meta["uid"]):
                result.removed.append(obj["kind"])


class ChildNotConvergedError(ApiError):
    """A child still differs after being written: our comparison and the API server disagree.
    Writing it again would change nothing, so the Database fails with ChildNotConverged."""

    @classmethod
    def of(cls, written: Manifest, manifest: Manifest, verb: str) -> ChildNotConvergedError:
        """The error naming the first field ``written`` does not hold as ``manifest`` has it."""
        path, have, want = difference(written, manifest) or ((), None, None)
        field = dotted(path) or "a field"
        if manifest["kind"] == "Secret":  # never a secret value in a status, Event or log
            message = f"{_where(manifest)} keeps another value in {field} than the operator wrote"
        else:
            message = (
                f"{_where(manifest)} keeps {field} at {have!r} after the operator wrote "
                f"{want!r}: set the spec to the value the cluster keeps"
            )
        return cls(0, "NotConverged", message, verb, _where(manifest))


async def _write_child(
    kube: KubeApi, observed: Manifest | None, manifest: Manifest, uid: str, result: Result
) -> Manifest:
    """Server-side apply ``manifest``; when another field manager's list elements survive the
    apply (or make it invalid), take those lists back and apply again. Raises ApiError, with
    ``refused`` when the API server will not take our spec at all."""
    try:
        applied: Manifest | None = await kube.apply(manifest)
        refusal: ApiError | None = None
    except ApiError as error:
        if observed is None or not error.refused:
            raise
        applied, refusal = None, error
    if applied is not None and not needs_write(applied, manifest, uid):
        return applied

    base = applied or observed
    assert base is not None  # an apply that created nothing raised above
    if "managedFields" not in base["metadata"]:  # from a cache, which drops them
        base = await kube.get_live(manifest["kind"], _namespace(manifest), _name(manifest)) or base
    operations = list_takebacks(base, manifest, kube.field_manager)
    if not operations:
        if refusal is not None:
            raise refusal
        raise ChildNotConvergedError.of(base, manifest, "APPLY")
    taken = await kube.json_patch(
        manifest["kind"],
        manifest["metadata"]["namespace"],
        manifest["metadata"]["name"],
        [_test_version(base), *operations],
    )
    result.taken_back.append(manifest["kind"])
    final = await kube.apply(manifest) if refusal is not None else taken
    if needs_write(final, manifest, uid):
        raise ChildNotConvergedError.of(final, manifest, "PATCH")
    return final


def _test_version(obj: Manifest) -> Manifest:
    """A JSON-patch test of the resourceVersion: the patch applies to what we looked at, or not
    at all (422, retried)."""
    return {
        "op": "test",
        "path": "/metadata/resourceVersion",
        "value": obj["metadata"]["resourceVersion"],
    }


def _namespace(manifest: Manifest) -> str:
    return str(manifest["metadata"]["namespace"])


def _name(manifest: Manifest) -> str:
    return str(manifest["metadata"]["name"])


def _where(manifest: Manifest) -> str:
    meta = manifest["metadata"]
    return f"{manifest['kind']} {meta['namespace']}/{meta['name']}"


# --- the end of a Database's life ---------------------------------------------------------------


def has_finalizer(body: Mapping[str, Any]) -> bool:
    return FINALIZER in (body.get("metadata", {}).get("finalizers") or [])


async def add_finalizer(kube: KubeApi, body: Mapping[str, Any], kind: str = KIND) -> Manifest:
    """Add our finalizer to a Database (or an object of ``kind``); returns it as it now is."""
    meta = body["metadata"]
    operations: list[Manifest]
    if meta.get("finalizers"):
        operations = [{"op": "add", "path": "/metadata/finalizers/-", "value": FINALIZER}]
    else:
        # Creating the list must not replace one that someone wrote meanwhile.
        operations = [
            _test_version(dict(body)),
            {"op": "add", "path": "/metadata/finalizers", "value": [FINALIZER]},
        ]
    return await kube.json_patch(kind, meta["namespace"], meta["name"], operations)


async def remove_finalizer(kube: KubeApi, body: Mapping[str, Any], kind: str = KIND) -> None:
    """Remove our finalizer: exactly that list element, whatever else changed meanwhile."""
    meta = body["metadata"]
    index = (meta.get("finalizers") or []).index(FINALIZER)
    path = f"/metadata/finalizers/{index}"
    await kube.json_patch(
        kind,
        meta["namespace"],
        meta["name"],
        [{"op": "test", "path": path, "value": FINALIZER}, {"op": "remove", "path": path}],
        missing_ok=True,
    )


async def finalize(
    kube: KubeApi,
    body: Mapping[str, Any],
    events: EventSink = _no_events,
    now: Clock = system_clock,
) -> list[str]:
    """The Database is being deleted: say so in status, then apply deletionPolicy to the
    children that may outlive it — only those the operator created (ownership.py):

    - Delete: delete them now (their owner reference would let the garbage collector do it too);
    - Retain: make sure they carry no owner reference to it, so the garbage collector keeps them
      even if the policy was switched to Retain just before the delete.

    Deployment and Service go with their controller owner reference (garbage collector).
    Returns what was deleted or released, e.g. ["deleted PersistentVolumeClaim"]. Idempotent:
    run it again after any failure.
    """
    db = Database.model_validate(dict(body))
    await write_status(
        kube,
        db,
        workloads=await observe_workloads(kube, db),
        outcome=Outcome(deleting=True),
        events=events,
        now=now,
    )

    done: list[str] = []
    kept = [("PersistentVolumeClaim", desired.pvc_name(db))]
    generated = desired.generated_secret_name(db)
    if desired.credentials_secret_name(db) != generated or db.spec.credentials_secret_ref is None:
        # The Secret the operator generated, even if the spec has named another since; never
        # the one the spec names.
        kept.append(("Secret", generated))
    uid = str(db.metadata.get("uid", ""))
    for kind, name in kept:
        observed = await read_child(kube, db, kind, name)
        if observed is None or not is_ours(observed, db):
            continue
        if db.spec.deletion_policy is DeletionPolicy.DELETE:
            if await kube.delete(kind, db.namespace, name, observed["metadata"]["uid"]):
                done.append(f"deleted {kind}")
                events("Normal", "Deleted", f"deleted {kind} {name} (deletionPolicy: Delete)")
        elif owner_refs_to(observed, uid):
            patch = {"metadata": _owner_references_patch(db, observed, [])}
            await kube.merge_patch(kind, db.namespace, name, patch)
            done.append(f"kept {kind}")
    return done
