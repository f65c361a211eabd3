"""One idempotent reconcile: make a Database's children match its spec, then write its status;
and the end of a Database's life: finalize, then let it go.

Ownership comes before action: every child is read first (observe.py), and if any object by a
child's name is not the Database's own (see ownership.py) nothing at all is written but the
status, which says what clashes. Only a missing or differing child is written (apply.py,
takeback.py), so the steady state costs no write; the status is written only when it changed
(report.py). Deletion is in finalizer.py (the finalizer itself, on Databases and backups alike,
is finalizers.py's). What a reconcile did is returned for the caller to count, log and cache
(result.py).
"""

from __future__ import annotations

from database_operator import desired
from database_operator.api.backup import RestoreRecord
from database_operator.api.models import INSTANCE_LABEL, KIND, Database
from database_operator.backups import restore
from database_operator.backups.jobs import JobOptions
from database_operator.backups.state import Backups
from database_operator.backups.tending import tend_backups
from database_operator.carryover import carry_over
from database_operator.clock import Clock, system_clock
from database_operator.events import EventSink, no_events
from database_operator.failover import rollout
from database_operator.failover.decide import Memory
from database_operator.failover.tend import tend
from database_operator.kube.api import KubeApi
from database_operator.manifest import Manifest
from database_operator.ownership import conflict, conflict_message, holds_name_for, is_ours
from database_operator.reasons import Problem, Reason
from database_operator.reconcile.apply import ensure_children, ensure_credentials, remove_surplus
from database_operator.reconcile.finalizer import finalize
from database_operator.reconcile.observe import Observed, observe
from database_operator.reconcile.report import report_failure, write_status
from database_operator.reconcile.result import Result
from database_operator.status import InstancesSeen, Outcome, Workloads

__all__ = ["Result", "finalize", "reconcile", "report_failure"]


async def reconcile(
    kube: KubeApi,
    db: Database,
    events: EventSink = no_events,
    now: Clock = system_clock,
    *,
    confirmed: bool = False,
    backups: Backups | None = None,
    jobs: JobOptions | None = None,
    memory: Memory | None = None,
    operator_namespace: str | None = None,
) -> Result:
    """Bring one Database's children to the desired state and write its status when it changed.

    ``confirmed``: ``db`` came from the API server just now (not from a cache that may hold a
    Database deleted meanwhile); else it is re-read before anything is created. ``backups``:
    its DatabaseBackups as the watch has them, for its restore, its schedule and what its
    status says of them (None: not looked at); ``jobs``: what the settings say of the Jobs
    (a restore's); ``memory``: what was seen of its instances (spec.failover) at the last look;
    ``operator_namespace``: the operator's own, which its NetworkPolicy (spec.networkPolicy)
    admits.
    Raises ApiError for API failures (the caller decides whether to retry).
    """
    at = now()
    result = Result(status=db.status, outcome=Outcome())
    observed = await observe(kube, db)
    conflicts = [found for obj in observed.named_like_children() if (found := conflict(obj, db))]
    children = {key: obj for key, obj in observed.children.items() if obj and is_ours(obj, db)}
    failure: Problem | None = None
    restoring: Problem | None = None
    restored: RestoreRecord | None = None
    instances: InstancesSeen | None = None
    held: tuple[str, ...] = ()

    if conflicts:
        failure = Problem(Reason.CHILD_NAME_CONFLICT, conflict_message(conflicts))
    elif db.spec.paused:
        result.outcome = Outcome(paused=True)
    else:
        if not confirmed and observed.creates_something():
            fresh = await kube.get(KIND, db.namespace, db.name)
            if fresh is None or fresh["metadata"].get("uid") != db.metadata.get("uid"):
                result.gone = True
                return result
        credentials, failure = await ensure_credentials(kube, db, observed, result)
        if credentials is not None:
            gate = await restore.gate(
                kube,
                db,
                (backups or Backups()).named,
                primary=children.get(("Deployment", _first_deployment(db))),
                options=jobs or JobOptions(agent_image=""),
                now=at,
            )
            checksum = desired.credentials_checksum(db, credentials)
            wanted = carry_over(
                [
                    *desired.children(db, checksum, operator_namespace),
                    desired.connection_secret(db, credentials),
                ],
                children,
                db,
                checksum,
            )
            if gate.hold:  # the restore is not done: no database runs on the volume yet
                wanted = [child for child in wanted if child["kind"] != "Deployment"]
            elif desired.has_instances(db) and gate.failure is None:
                turn = await _turns(kube, db, wanted, observed, events)
                # Before the Deployments: their pods read the ConfigMap it makes.
                looked = await tend(
                    kube,
                    db,
                    credentials,
                    memory or Memory(),
                    events=events,
                    clock=now,
                    rollout_switchover=turn.switchover,
                )
                instances, failure = looked.seen, looked.failure
                result.look_again, result.failed_over = looked.look_again, looked.failed_over
                held = tuple(turn.held)
                wanted = [child for child in wanted if not _held(child, held)]
            failure = (
                gate.failure or failure or await ensure_children(kube, db, wanted, children, result)
            )
            await remove_surplus(kube, db, observed, result)
            restoring, restored = gate.progress, gate.restored
            result.job_deadline = gate.deadline
    if backups is not None:
        keep = failure is None and not conflicts
        tended = await tend_backups(kube, db, backups.of_database, at, keep_schedule=keep)
        result.backups, schedule = tended.summary, tended.schedule
        result.backups_created, result.backups_deleted = schedule.created, schedule.deleted
        result.next_backup = schedule.next_due
    connection = ("Secret", desired.connection_secret_name(db))
    result.outcome = Outcome(
        paused=result.outcome.paused,
        failure=failure,
        binding=connection[1] if children.get(connection) else None,
        restoring=restoring,
        restored=restored,
        instances=instances,
        held=held,
    )
    written = await write_status(
        kube,
        db,
        workloads=_workloads(db, children, instances),
        outcome=result.outcome,
        events=events,
        now=lambda: at,
        backups=result.backups,
    )
    result.status, result.status_wire, result.body = written.status, written.wire, written.body
    if result.created:
        # One Event for a creation, not one per child; it names the first phase too.
        events(
            "Normal",
            "Created",
            f"created {', '.join(result.created)}; phase {result.status.phase or 'None'}",
        )
    return result


def _first_deployment(db: Database) -> str:
    """The Deployment that runs on the Database's first volume (a restore's)."""
    return desired.instance_name(db, 1) if desired.has_instances(db) else db.name


def _workloads(
    db: Database, children: dict[tuple[str, str], Manifest], seen: InstancesSeen | None
) -> Workloads:
    """The Deployments the status counts: the primary's and the read replicas'; with
    spec.failover, the primary instance's and the others' (added up)."""
    if not desired.has_instances(db):
        return Workloads(
            primary=children.get(("Deployment", db.name)),
            replicas=children.get(("Deployment", desired.replicas_name(db))),
        )
    primary = (
        (seen.current_primary or seen.target_primary) if seen else db.status.target_primary
    ) or desired.instance_name(db, 1)
    found = {name: children.get(("Deployment", name)) for name in desired.instance_names(db)}
    return Workloads.of_instances(found, primary)


async def _turns(
    kube: KubeApi, db: Database, wanted: list[Manifest], observed: Observed, events: EventSink
) -> rollout.Rollout:
    """Which instances' new Deployments wait (failover/rollout.py; the one written now is an
    Event); and, for a Database moving to instances, <name>-1 while the old primary may still
    run on the volume it takes: never beside it."""
    instances = set(desired.instance_names(db))  # the name holder is none: it runs no pod
    deployments = {
        c["metadata"]["name"]: c
        for c in wanted
        if c["kind"] == "Deployment" and c["metadata"]["name"] in instances
    }
    found = {name: observed.children.get(("Deployment", name)) for name in deployments}
    turn = rollout.plan(deployments, found, db.status)
    if turn.next is not None:
        events("Normal", "RollingOut", f"updating instance {turn.next}; the primary goes last")
    first = desired.instance_name(db, 1)
    # Only before <name>-1 exists: once made, the old primary was gone (and no pod list is
    # asked for at every look of a Database that moved long ago).
    if observed.children.get(("Deployment", first)) is None and await _old_primary_runs(
        kube, db, observed
    ):
        turn.held.append(first)
    return turn


def _held(child: Manifest, held: tuple[str, ...]) -> bool:
    return child["kind"] == "Deployment" and child["metadata"]["name"] in held


async def _old_primary_runs(kube: KubeApi, db: Database, observed: Observed) -> bool:
    """Whether the primary of a Database's former layout (its Deployment ``<name>``, until
    the name holder replaces it, or a pod of it still stopping) may still run on
    ``<name>-data``."""
    former = observed.children.get(("Deployment", db.name))
    if former is not None and not holds_name_for(former, db):
        return True
    selector = ",".join(
        [f"{key}={value}" for key, value in desired.selector_labels(db, desired.PRIMARY).items()]
        + [f"!{INSTANCE_LABEL}"]
    )
    async for page in kube.list_pages("Pod", db.namespace, selector):
        if page:
            return True
    return False
