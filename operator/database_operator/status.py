"""The Database's status, computed from what a reconcile observed: pure, no I/O, no clock.

`compute_status(db, deployment, previous, outcome, now)` returns the whole new status. Given the
same inputs and an unchanged world it returns a status equal to `previous` (transition times are
kept, `now` is used only on a flip), so the caller can skip the write when nothing changed.

Inputs: ``desired`` is the Database's spec.replicas; ``rolled_out`` means the Deployment exists,
its controller saw its current spec (status.observedGeneration >= metadata.generation), its
spec.replicas equals the Database's, and status.updatedReplicas equals ``desired``;
``ready`` means ``rolled_out`` and readyReplicas == availableReplicas == ``desired``;
``was_active`` means the previous phase was Active or Degraded. Rows are checked top to bottom.

Ready
    =================================  ======  ===============================================
    when                               status  reason
    =================================  ======  ===============================================
    outcome.deleting                   False   Deleting
    outcome.failure_reason             False   <failure_reason> (message: failure_message)
    ready, desired == 0                True    ScaledToZero
    ready                              True    ReplicasReady ("3/3 replicas ready")
    no Deployment, paused              False   Paused
    no Deployment                      False   Creating
    not rolled_out                     False   RollingOut
    otherwise                          False   ReplicasUnavailable ("1/3 replicas ready")
    =================================  ======  ===============================================

Progressing
    =================================  ======  ===============================================
    outcome.deleting                   True    Deleting
    outcome.failure_reason             False   <failure_reason>
    spec.paused                        False   Paused (children are not changed)
    ready                              False   RolloutComplete
    no Deployment                      True    Creating
    not rolled_out                     True    RollingOut
    not was_active                     True    RollingOut (first pods not ready yet)
    otherwise                          False   RolloutComplete (replicas lost, see Degraded)
    =================================  ======  ===============================================

Degraded
    =================================  ======  ===============================================
    outcome.failure_reason             True    <failure_reason>
    outcome.error_reason               True    <error_reason> (message: error_message)
    outcome.deleting                   False   Deleting
    was_active, replicas lost          True    ReplicasUnavailable ("1/3 replicas ready")
    otherwise                          False   AsExpected
    =================================  ======  ===============================================

"Replicas lost": readyReplicas fell below min(spec.replicas, the previous readyReplicas), or
Degraded already says ReplicasUnavailable and readyReplicas is still below spec.replicas. A
scale-up (more wanted than were ever ready) or a scale-down loses nothing.

Phase: Deleting if outcome.deleting; else Failed if outcome.failure_reason; else Active if Ready;
else Pending if it never was Active; else Degraded if the Degraded condition is True; else Active
(a rollout or scale-up of an Active database: Ready False and Progressing True say so).

Every condition carries observedGeneration = metadata.generation (it was evaluated for that
generation even if its status did not change); lastTransitionTime moves only when status flips.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from database_operator import desired
from database_operator.api.models import (
    Condition,
    ConditionStatus,
    Database,
    DatabaseStatus,
    Phase,
)

READY = "Ready"
PROGRESSING = "Progressing"
DEGRADED = "Degraded"

PAUSED_MESSAGE = "spec.paused is true: the operator does not create or change any child"
DELETING_MESSAGE = "the Database is being deleted"


@dataclass(frozen=True)
class Outcome:
    """What the reconcile found or did this round, beyond the observed Deployment."""

    #: CamelCase reason the spec cannot be acted on (e.g. CredentialsSecretNotFound).
    failure_reason: str | None = None
    failure_message: str = ""
    paused: bool = False
    deleting: bool = False
    #: CamelCase reason of a retryable error this round (e.g. an API error).
    error_reason: str | None = None
    error_message: str = ""


@dataclass(frozen=True)
class _Verdict:
    """One condition's status, reason and message, before times and generations are stamped."""

    status: ConditionStatus
    reason: str
    message: str = ""


def _true(reason: str, message: str = "") -> _Verdict:
    return _Verdict(ConditionStatus.TRUE, reason, message)


def _false(reason: str, message: str = "") -> _Verdict:
    return _Verdict(ConditionStatus.FALSE, reason, message)


@dataclass(frozen=True)
class _Observed:
    """The facts about the Deployment the rules need, read once from its wire form."""

    exists: bool
    desired: int
    replicas: int
    updated: int
    ready: int
    available: int
    rolled_out: bool

    @property
    def is_ready(self) -> bool:
        return self.rolled_out and self.ready == self.desired and self.available == self.desired

    def ready_message(self) -> str:
        return f"{self.ready}/{self.desired} replicas ready"

    def rollout_message(self) -> str:
        return (
            f"rolling out: {self.updated}/{self.desired} replicas updated, "
            f"{self.ready}/{self.desired} ready"
        )


def _int_at(obj: dict[str, Any] | None, *path: str) -> int | None:
    """An integer at a path of a wire dict, or None when any step is missing."""
    value: Any = obj
    for key in path:
        if not isinstance(value, dict):
            return None
        value = value.get(key)
    return value if isinstance(value, int) else None


def _observe(db: Database, deployment: dict[str, Any] | None) -> _Observed:
    """Read a Deployment (camelCase wire dict, or None when it does not exist) against the spec."""
    desired_replicas = db.spec.replicas
    generation = _int_at(deployment, "metadata", "generation") or 0
    seen_generation = _int_at(deployment, "status", "observedGeneration")
    updated = _int_at(deployment, "status", "updatedReplicas") or 0
    rolled_out = (
        deployment is not None
        and seen_generation is not None
        and seen_generation >= generation
        and _int_at(deployment, "spec", "replicas") == desired_replicas
        and updated == desired_replicas
    )
    return _Observed(
        exists=deployment is not None,
        desired=desired_replicas,
        replicas=_int_at(deployment, "status", "replicas") or 0,
        updated=updated,
        ready=_int_at(deployment, "status", "readyReplicas") or 0,
        available=_int_at(deployment, "status", "availableReplicas") or 0,
        rolled_out=rolled_out,
    )


def _ready(observed: _Observed, outcome: Outcome) -> _Verdict:
    if outcome.deleting:
        return _false("Deleting", DELETING_MESSAGE)
    if outcome.failure_reason:
        return _false(outcome.failure_reason, outcome.failure_message)
    return _ready_from_deployment(observed, outcome.paused)


def _ready_from_deployment(observed: _Observed, paused: bool) -> _Verdict:
    if observed.is_ready and observed.desired == 0:
        return _true("ScaledToZero", "spec.replicas is 0: no database pod runs")
    if observed.is_ready:
        return _true("ReplicasReady", observed.ready_message())
    if not observed.exists and paused:
        return _false("Paused", f"{PAUSED_MESSAGE}; the Deployment does not exist")
    if not observed.exists:
        return _false("Creating", "the Deployment does not exist yet")
    if not observed.rolled_out:
        return _false("RollingOut", observed.rollout_message())
    return _false("ReplicasUnavailable", observed.ready_message())


def _progressing(observed: _Observed, outcome: Outcome, was_active: bool) -> _Verdict:
    if outcome.deleting:
        return _true("Deleting", DELETING_MESSAGE)
    if outcome.failure_reason:
        return _false(outcome.failure_reason, outcome.failure_message)
    if outcome.paused:
        return _false("Paused", PAUSED_MESSAGE)
    return _progressing_from_deployment(observed, was_active)


def _progressing_from_deployment(observed: _Observed, was_active: bool) -> _Verdict:
    if observed.is_ready:
        return _false("RolloutComplete", "the Deployment is rolled out")
    if not observed.exists:
        return _true("Creating", "creating the Deployment and its Service")
    if not observed.rolled_out or not was_active:
        return _true("RollingOut", observed.rollout_message())
    return _false("RolloutComplete", f"the Deployment is rolled out; {observed.ready_message()}")


def _degraded(
    observed: _Observed, outcome: Outcome, was_active: bool, previous: DatabaseStatus
) -> _Verdict:
    if outcome.failure_reason:
        return _true(outcome.failure_reason, outcome.failure_message)
    if outcome.error_reason:
        return _true(outcome.error_reason, outcome.error_message)
    if outcome.deleting:
        return _false("Deleting", DELETING_MESSAGE)
    if was_active and _lost_replicas(observed, previous):
        return _true("ReplicasUnavailable", observed.ready_message())
    return _false("AsExpected", "")


def _lost_replicas(observed: _Observed, previous: DatabaseStatus) -> bool:
    """Ready replicas dropped below what was ready and is still wanted, or stay below after a
    drop. Scaling up (more wanted than ever ready) and scaling down lose nothing."""
    if observed.ready >= observed.desired:
        return False
    before = previous.ready_replicas or 0
    if observed.ready < min(observed.desired, before):
        return True
    still = next((c for c in previous.conditions or [] if c.type == DEGRADED), None)
    return bool(
        still and still.status is ConditionStatus.TRUE and still.reason == "ReplicasUnavailable"
    )


def _phase(ready: _Verdict, degraded: _Verdict, outcome: Outcome, was_active: bool) -> Phase:
    if outcome.deleting:
        return Phase.DELETING
    if outcome.failure_reason:
        return Phase.FAILED
    if ready.status is ConditionStatus.TRUE:
        return Phase.ACTIVE
    if not was_active:
        return Phase.PENDING
    # A rollout or scale-up of an Active database keeps it Active (Ready False, Progressing
    # True say what is going on); only lost replicas or failing reconciles make it Degraded.
    return Phase.DEGRADED if degraded.status is ConditionStatus.TRUE else Phase.ACTIVE


def set_condition(conditions: list[Condition], new: Condition) -> list[Condition]:
    """`conditions` with `new` in place of the one of its type (appended if absent).

    lastTransitionTime is kept from the old condition when status did not change: it records
    when the status last flipped, not when it was last evaluated. The input is not modified.
    """
    result: list[Condition] = []
    replaced = False
    for old in conditions:
        if old.type != new.type:
            result.append(old)
            continue
        if old.status == new.status:
            new = new.model_copy(update={"last_transition_time": old.last_transition_time})
        result.append(new)
        replaced = True
    return result if replaced else [*result, new]


def _generation(db: Database) -> int | None:
    value = db.metadata.get("generation")
    return value if isinstance(value, int) else None


def _seconds(now: datetime) -> datetime:
    """`now` at whole seconds, as metav1.Time stores it (so a round trip compares equal)."""
    if now.tzinfo is None:
        raise ValueError("now must be timezone-aware, e.g. datetime.now(UTC)")
    return now.replace(microsecond=0)


def compute_status(
    db: Database,
    deployment: dict[str, Any] | None,
    previous: DatabaseStatus,
    outcome: Outcome,
    now: datetime,
) -> DatabaseStatus:
    """The new status of `db` (see the module docstring for the rules).

    `deployment` is the observed Deployment as a camelCase wire dict (None: it does not exist);
    `previous` is the status now stored; `now` is a timezone-aware time used only for flips.
    """
    observed = _observe(db, deployment)
    was_active = previous.phase in (Phase.ACTIVE, Phase.DEGRADED)
    verdicts = {
        READY: _ready(observed, outcome),
        PROGRESSING: _progressing(observed, outcome, was_active),
        DEGRADED: _degraded(observed, outcome, was_active, previous),
    }
    generation = _generation(db)
    stamped = _seconds(now)
    conditions = list(previous.conditions or [])
    for type_, verdict in verdicts.items():
        conditions = set_condition(
            conditions,
            Condition(
                type=type_,
                status=verdict.status,
                observed_generation=generation,
                last_transition_time=stamped,
                reason=verdict.reason,
                message=verdict.message,
            ),
        )
    return DatabaseStatus(
        observed_generation=generation,
        phase=_phase(verdicts[READY], verdicts[DEGRADED], outcome, was_active),
        version=desired.resolved_version(db),
        replicas=observed.replicas,
        ready_replicas=observed.ready,
        selector=desired.selector_string(db),
        endpoint=desired.endpoint(db),
        credentials_secret=desired.credentials_secret_name(db),
        conditions=conditions,
    )
