"""The Database's status, computed from what a reconcile observed: pure, no I/O, no clock.

`compute_status(db, workloads, previous, outcome, now)` returns the whole new status. Given the
same inputs and an unchanged world it returns a status equal to `previous` (transition times are
kept, `now` is used only on a flip), so the caller can skip the write when nothing changed.

A Database runs as a primary (Deployment `<name>`, 1 pod, 0 when spec.replicas is 0) and, for
engines with replication and spec.replicas > 1, read replicas (Deployment `<name>-replicas`,
spec.replicas - 1 pods). For each of the two, ``rolled_out`` means: it exists (or is absent
and wanted with 0 pods), its controller saw its current spec (status.observedGeneration >=
metadata.generation), its spec.replicas is what is wanted, and status.updatedReplicas too;
``ready`` means ``rolled_out`` and readyReplicas == availableReplicas == wanted. ``all ready``:
both ready; ``primary ready``: the primary ready with its one pod. ``was_active`` means the
previous phase was Active or Degraded. Rows are checked top to bottom.

Ready
    =================================  ======  ===============================================
    when                               status  reason
    =================================  ======  ===============================================
    outcome.deleting                   False   Deleting
    outcome.failure                    False   <failure.reason> (message: failure.message)
    outcome.restoring                  False   Restoring (the restore Job runs)
    all ready, spec.replicas == 0      True    ScaledToZero
    all ready                          True    ReplicasReady ("3/3 replicas ready: ...")
    was_active, primary ready          True    PrimaryReady (read replicas lost or rolling)
    no primary, paused                 False   Paused
    no primary                         False   Creating
    either not rolled_out              False   RollingOut
    otherwise                          False   ReplicasUnavailable ("the primary is not ready")
    =================================  ======  ===============================================

Progressing
    =================================  ======  ===============================================
    outcome.deleting                   True    Deleting
    outcome.failure                    False   <failure.reason>
    outcome.restoring                  True    Restoring
    spec.paused                        False   Paused (children are not changed)
    all ready                          False   RolloutComplete
    no primary                         True    Creating
    either not rolled_out              True    RollingOut
    not was_active                     True    RollingOut (first pods not ready yet)
    read replicas starting, not lost   True    RollingOut (a scale-up)
    otherwise                          False   RolloutComplete (pods lost, see Degraded)
    =================================  ======  ===============================================

Degraded
    =================================  ======  ===============================================
    outcome.failure                    True    <failure.reason>
    outcome.error                      True    <error.reason> (message: error.message)
    outcome.deleting                   False   Deleting
    was_active, primary lost           True    PrimaryUnavailable (reads and writes fail)
    was_active, read replicas lost     True    ReplicasUnavailable ("1/2 read replicas ready")
    otherwise                          False   AsExpected
    =================================  ======  ===============================================

"Primary lost": the primary's Deployment is at its spec (its controller saw the current
generation and the wanted pod count; its pod may be rolled out or being replaced) but not ready,
and the previous status had it ready (or Degraded already said PrimaryUnavailable). A pod
deleted or crashing is caught even by a reconcile that sees it between two pods. "Read replicas
lost": rolled out, and ready read replicas fell below min(wanted, the previous ready read
replicas), or Degraded already says ReplicasUnavailable and they are still below what is
wanted. A rollout, a scale-up (more wanted
than were ever ready) or a scale-down loses nothing.

Phase: Deleting if outcome.deleting; else Failed if outcome.failure; else Degraded if the
Degraded condition is True and the Database was Active; else Active if Ready; else Pending if it
never was Active; else Active (a rollout or scale-up of an Active database: Ready False and
Progressing True say so).

BackupHealthy (only with spec.backup): what backups/state.py says of the Database's backups;
status.lastSuccessfulBackup and lastFailedBackup name them. status.restoredFrom is set once a
restore completed, and kept.

Every condition carries observedGeneration = metadata.generation (it was evaluated for that
generation even if its status did not change); lastTransitionTime moves only when status flips.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from database_operator import desired
from database_operator.api.backup import RestoreRecord
from database_operator.api.models import (
    Binding,
    ConditionStatus,
    Database,
    DatabaseStatus,
    InstanceStatus,
    Phase,
)
from database_operator.backups.state import BACKUP_HEALTHY, BackupSummary
from database_operator.conditions import Verdict, false, set_condition, stamped, true
from database_operator.reasons import Problem, Reason

__all__ = ["InstancesSeen", "Outcome", "Workloads", "compute_status", "set_condition"]

READY = "Ready"
PROGRESSING = "Progressing"
DEGRADED = "Degraded"

PAUSED_MESSAGE = "spec.paused is true: the operator does not create or change any child"
DELETING_MESSAGE = "the Database is being deleted"


@dataclass(frozen=True)
class Outcome:
    """What the reconcile found or did this round, beyond the observed workloads."""

    #: Why the spec cannot be acted on (e.g. CredentialsSecretNotFound): phase Failed.
    failure: Problem | None = None
    paused: bool = False
    deleting: bool = False
    #: An error that keeps being retried (ReconcileError): Degraded says so.
    error: Problem | None = None
    #: The connection Secret, once it exists (status.binding).
    binding: str | None = None
    #: spec.restore: what the restore is doing (no Deployment exists until it is done).
    restoring: Problem | None = None
    #: spec.restore: the restore that completed (status.restoredFrom).
    restored: RestoreRecord | None = None
    #: spec.failover: what the instances' engines answered (None: not looked at).
    instances: InstancesSeen | None = None
    #: spec.failover: the instances whose new Deployment waits its turn (a rollout, replicas
    #: first, the primary last).
    held: tuple[str, ...] = ()


@dataclass(frozen=True)
class InstancesSeen:
    """spec.failover: the primary the engines confirm (None: none does), the target primary,
    and each instance."""

    current_primary: str | None
    target_primary: str | None
    instances: list[InstanceStatus]


@dataclass(frozen=True)
class Workloads:
    """The Deployments as observed (camelCase wire dicts; None: absent)."""

    primary: dict[str, Any] | None = None
    replicas: dict[str, Any] | None = None

    @classmethod
    def of_instances(cls, deployments: dict[str, dict[str, Any] | None], primary: str) -> Workloads:
        """spec.failover: the primary instance's Deployment, and the others' added up as if
        they were one Deployment of read replicas (a rollout is current when each is)."""
        others = [found for name, found in deployments.items() if name != primary and found]
        if not others:
            return cls(primary=deployments.get(primary))

        def total(*path: str) -> int:
            return sum(_int_at(found, *path) or 0 for found in others)

        current = all(
            (_int_at(found, "status", "observedGeneration") or 0)
            >= (_int_at(found, "metadata", "generation") or 0)
            for found in others
        )
        replicas: dict[str, Any] = {
            "metadata": {"generation": 0},
            "spec": {"replicas": total("spec", "replicas")},
            "status": {
                "observedGeneration": 0 if current else -1,
                **{
                    key: total("status", key)
                    for key in ("replicas", "updatedReplicas", "readyReplicas", "availableReplicas")
                },
            },
        }
        return cls(primary=deployments.get(primary), replicas=replicas)


@dataclass(frozen=True)
class _Deployment:
    """The facts about one Deployment the rules need, read once from its wire form."""

    exists: bool
    wanted: int
    replicas: int
    updated: int
    ready: int
    available: int
    #: Its controller saw the current generation, and the pod count is the one wanted.
    current: bool
    rolled_out: bool

    @property
    def is_ready(self) -> bool:
        return self.rolled_out and self.ready == self.wanted and self.available == self.wanted


@dataclass(frozen=True)
class _Observed:
    """The primary and the read replicas, against the spec."""

    primary: _Deployment
    replicas: _Deployment

    @property
    def wanted(self) -> int:
        return self.primary.wanted + self.replicas.wanted

    @property
    def ready(self) -> int:
        return self.primary.ready + self.replicas.ready

    @property
    def rolled_out(self) -> bool:
        return self.primary.rolled_out and self.replicas.rolled_out

    @property
    def all_ready(self) -> bool:
        return self.primary.is_ready and self.replicas.is_ready

    @property
    def primary_ready(self) -> bool:
        return self.primary.wanted == 1 and self.primary.is_ready

    def ready_message(self) -> str:
        text = f"{self.ready}/{self.wanted} replicas ready"
        if self.replicas.wanted:
            primary = "ready" if self.primary_ready else "not ready"
            text += (
                f": the primary is {primary}, "
                f"{self.replicas.ready}/{self.replicas.wanted} read replicas ready"
            )
        return text

    def rollout_message(self) -> str:
        updated = self.primary.updated + self.replicas.updated
        return (
            f"rolling out: {updated}/{self.wanted} replicas updated, "
            f"{self.ready}/{self.wanted} ready"
        )


def _int_at(obj: dict[str, Any] | None, *path: str) -> int | None:
    """An integer at a path of a wire dict, or None when any step is missing."""
    value: Any = obj
    for key in path:
        if not isinstance(value, dict):
            return None
        value = value.get(key)
    return value if isinstance(value, int) else None


def _deployment(deployment: dict[str, Any] | None, wanted: int) -> _Deployment:
    """Read a Deployment (None when it does not exist) against the pods wanted of it."""
    generation = _int_at(deployment, "metadata", "generation") or 0
    seen_generation = _int_at(deployment, "status", "observedGeneration")
    updated = _int_at(deployment, "status", "updatedReplicas") or 0
    current = (
        deployment is not None
        and seen_generation is not None
        and seen_generation >= generation
        and _int_at(deployment, "spec", "replicas") == wanted
    )
    rolled_out = (deployment is None and wanted == 0) or (current and updated == wanted)
    return _Deployment(
        exists=deployment is not None,
        wanted=wanted,
        replicas=_int_at(deployment, "status", "replicas") or 0,
        updated=updated,
        ready=_int_at(deployment, "status", "readyReplicas") or 0,
        available=_int_at(deployment, "status", "availableReplicas") or 0,
        current=current,
        rolled_out=rolled_out,
    )


def _observe(db: Database, workloads: Workloads) -> _Observed:
    return _Observed(
        primary=_deployment(workloads.primary, desired.primary_count(db)),
        replicas=_deployment(workloads.replicas, desired.read_replica_count(db)),
    )


def _ready(observed: _Observed, outcome: Outcome, was_active: bool) -> Verdict:  # noqa: PLR0911
    if outcome.deleting:
        return false(Reason.DELETING, DELETING_MESSAGE)
    if outcome.failure:
        return false(outcome.failure.reason, outcome.failure.message)
    if outcome.restoring:
        return false(outcome.restoring.reason, outcome.restoring.message)
    if observed.all_ready and observed.wanted == 0:
        return true(Reason.SCALED_TO_ZERO, "spec.replicas is 0: no database pod runs")
    if observed.all_ready:
        return true(Reason.REPLICAS_READY, observed.ready_message())
    if was_active and observed.primary_ready:
        return true(Reason.PRIMARY_READY, observed.ready_message())
    if not observed.primary.exists and outcome.paused:
        return false(Reason.PAUSED, f"{PAUSED_MESSAGE}; the Deployment does not exist")
    if not observed.primary.exists:
        return false(Reason.CREATING, "the Deployment does not exist yet")
    if not observed.rolled_out:
        return false(Reason.ROLLING_OUT, observed.rollout_message())
    return false(Reason.REPLICAS_UNAVAILABLE, observed.ready_message())


def _progressing(  # noqa: PLR0911 - a return per row of the truth table
    observed: _Observed, outcome: Outcome, was_active: bool, previous: DatabaseStatus
) -> Verdict:
    if outcome.deleting:
        return true(Reason.DELETING, DELETING_MESSAGE)
    if outcome.failure:
        return false(outcome.failure.reason, outcome.failure.message)
    if outcome.restoring:
        return true(outcome.restoring.reason, outcome.restoring.message)
    if outcome.paused:
        return false(Reason.PAUSED, PAUSED_MESSAGE)
    if outcome.held:
        return true(
            Reason.ROLLING_OUT,
            "rolling out one instance at a time, the primary last: "
            f"{', '.join(outcome.held)} wait(s) their turn",
        )
    if observed.all_ready:
        return false(Reason.ROLLOUT_COMPLETE, "the Deployments are rolled out")
    if not observed.primary.exists:
        return true(Reason.CREATING, "creating the Deployment and its Service")
    if not observed.rolled_out or not was_active:
        return true(Reason.ROLLING_OUT, observed.rollout_message())
    if observed.replicas.ready < observed.replicas.wanted and not _lost_read_replicas(
        observed, previous
    ):
        return true(Reason.ROLLING_OUT, f"read replicas starting: {observed.ready_message()}")
    return false(
        Reason.ROLLOUT_COMPLETE, f"the Deployments are rolled out; {observed.ready_message()}"
    )


def _degraded(
    observed: _Observed, outcome: Outcome, was_active: bool, previous: DatabaseStatus
) -> Verdict:
    if outcome.failure:
        return true(outcome.failure.reason, outcome.failure.message)
    if outcome.error:
        return true(outcome.error.reason, outcome.error.message)
    if outcome.deleting:
        return false(Reason.DELETING, DELETING_MESSAGE)
    if was_active and _lost_primary(observed, previous):
        return true(
            Reason.PRIMARY_UNAVAILABLE,
            "the primary is not ready: reads and writes through the Database's Service fail"
            + ("; the read replicas serve reads" if observed.replicas.ready else ""),
        )
    if was_active and _lost_read_replicas(observed, previous):
        return true(
            Reason.REPLICAS_UNAVAILABLE,
            f"{observed.replicas.ready}/{observed.replicas.wanted} read replicas ready",
        )
    return false(Reason.AS_EXPECTED, "")


def _still_degraded(previous: DatabaseStatus, reason: Reason) -> bool:
    found = next((c for c in previous.conditions or [] if c.type == DEGRADED), None)
    return bool(found and found.status is ConditionStatus.TRUE and found.reason == reason)


def _lost_primary(observed: _Observed, previous: DatabaseStatus) -> bool:
    # `current`, not `rolled_out`: a lost pod's replacement is not counted as updated until it
    # exists, and a reconcile that saw that moment must not forget the loss.
    primary = observed.primary
    if primary.wanted == 0 or not primary.current or primary.is_ready:
        return False
    return bool(previous.primary_ready) or _still_degraded(previous, Reason.PRIMARY_UNAVAILABLE)


def _lost_read_replicas(observed: _Observed, previous: DatabaseStatus) -> bool:
    """Ready read replicas dropped below what was ready and is still wanted, or stay below
    after a drop. Scaling up (more wanted than ever ready) and scaling down lose nothing."""
    replicas = observed.replicas
    if not replicas.rolled_out or replicas.ready >= replicas.wanted:
        return False
    before = previous.ready_read_replicas or 0
    return replicas.ready < min(replicas.wanted, before) or _still_degraded(
        previous, Reason.REPLICAS_UNAVAILABLE
    )


def _phase(ready: Verdict, degraded: Verdict, outcome: Outcome, was_active: bool) -> Phase:
    if outcome.deleting:
        return Phase.DELETING
    if outcome.failure:
        return Phase.FAILED
    if was_active and degraded.status is ConditionStatus.TRUE:
        return Phase.DEGRADED
    if ready.status is ConditionStatus.TRUE:
        return Phase.ACTIVE
    # Never active: Pending. Active before: a rollout or scale-up keeps it Active (Ready False,
    # Progressing True say what is going on); only lost pods or failing reconciles degrade it.
    return Phase.ACTIVE if was_active else Phase.PENDING


def _generation(db: Database) -> int | None:
    value = db.metadata.get("generation")
    return value if isinstance(value, int) else None


def compute_status(
    db: Database,
    workloads: Workloads,
    previous: DatabaseStatus,
    outcome: Outcome,
    now: datetime,
    *,
    backups: BackupSummary | None = None,
) -> DatabaseStatus:
    """The new status of `db` (see the module docstring for the rules).

    `workloads` are the observed Deployments; `previous` is the status now stored; `now` is a
    timezone-aware time used only for flips; `backups` what its backups say (backups/state.py;
    None: they were not looked at, and what the status says of them stands).
    """
    observed = _observe(db, workloads)
    was_active = previous.phase in (Phase.ACTIVE, Phase.DEGRADED)
    verdicts: dict[str, Verdict | None] = {
        READY: _ready(observed, outcome, was_active),
        PROGRESSING: _progressing(observed, outcome, was_active, previous),
        DEGRADED: _degraded(observed, outcome, was_active, previous),
    }
    if backups is None:  # not looked at this time: what the status said stands
        backups = BackupSummary(previous.last_successful_backup, previous.last_failed_backup)
    else:
        verdicts[BACKUP_HEALTHY] = backups.health
    generation = _generation(db)
    conditions = stamped(previous.conditions, verdicts, generation, now)
    ready, degraded = verdicts[READY], verdicts[DEGRADED]
    assert ready is not None and degraded is not None
    replicated = observed.replicas.wanted > 0
    seen = outcome.instances
    return DatabaseStatus(
        observed_generation=generation,
        phase=_phase(ready, degraded, outcome, was_active),
        version=desired.resolved_version(db),
        replicas=observed.primary.replicas + observed.replicas.replicas,
        ready_replicas=observed.ready,
        primary_ready=observed.primary_ready,
        read_replicas=observed.replicas.wanted,
        ready_read_replicas=observed.replicas.ready,
        selector=desired.selector_string(db),
        endpoint=desired.endpoint(db),
        read_endpoint=desired.read_endpoint(db) if replicated else None,
        credentials_secret=desired.credentials_secret_name(db),
        binding=Binding(name=outcome.binding) if outcome.binding else None,
        last_successful_backup=backups.last_success,
        last_failed_backup=backups.last_failure,
        restored_from=outcome.restored or previous.restored_from,
        current_primary=seen.current_primary if seen else previous.current_primary,
        target_primary=seen.target_primary if seen else previous.target_primary,
        instances=(seen.instances or None) if seen else previous.instances,
        conditions=conditions,
    )
