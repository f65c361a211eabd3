"""The status of a Database from what a reconcile observed: the truth table and transitions."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from database_operator.api.backup import BackupRecord, RestoreRecord
from database_operator.api.models import (
    Condition,
    ConditionStatus,
    Database,
    DatabaseStatus,
    Phase,
)
from database_operator.backups.state import BackupSummary
from database_operator.conditions import false, true
from database_operator.reasons import Problem, Reason
from database_operator.status import Outcome, Workloads, compute_status, set_condition

T0 = datetime(2024, 5, 1, 12, 0, 0, tzinfo=UTC)
T1 = T0 + timedelta(minutes=1)
T2 = T0 + timedelta(minutes=2)
T3 = T0 + timedelta(minutes=3)
NO_STATUS = DatabaseStatus()
OK = Outcome()


def make_db(generation: int = 1, **spec: Any) -> Database:
    return Database.model_validate(
        {
            "metadata": {
                "name": "shop",
                "namespace": "prod",
                "uid": "u-1",
                "generation": generation,
            },
            "spec": spec,
        }
    )


def make_deployment(
    replicas: int = 1,
    *,
    ready: int | None = None,
    updated: int | None = None,
    available: int | None = None,
    generation: int = 1,
    observed_generation: int | None = None,
    spec_replicas: int | None = None,
) -> dict[str, Any]:
    """A Deployment as the API returns it; by default fully rolled out with `replicas` pods."""
    ready = replicas if ready is None else ready
    status: dict[str, Any] = {
        "observedGeneration": generation if observed_generation is None else observed_generation,
        "replicas": replicas,
        "updatedReplicas": replicas if updated is None else updated,
        "readyReplicas": ready,
        "availableReplicas": ready if available is None else available,
    }
    # The API server leaves zero counts out.
    status = {key: value for key, value in status.items() if value}
    return {
        "metadata": {"name": "shop", "namespace": "prod", "generation": generation},
        "spec": {"replicas": replicas if spec_replicas is None else spec_replicas},
        "status": status,
    }


def condition(status: DatabaseStatus, type_: str) -> Condition:
    matches = [c for c in status.conditions or [] if c.type == type_]
    assert len(matches) == 1, f"exactly one {type_} condition expected"
    return matches[0]


def summary(status: DatabaseStatus) -> tuple[Phase | None, str, str, str]:
    """phase and the status/reason of each condition, compactly."""

    def brief(type_: str) -> str:
        found = condition(status, type_)
        return f"{found.status.value}/{found.reason}"

    return status.phase, brief("Ready"), brief("Progressing"), brief("Degraded")


def active_status() -> DatabaseStatus:
    return compute_status(make_db(), Workloads(make_deployment()), NO_STATUS, OK, T0)


# --- the truth table ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("deployment", "previous_phase", "outcome", "expected"),
    [
        pytest.param(
            None,
            None,
            OK,
            (Phase.PENDING, "False/Creating", "True/Creating", "False/AsExpected"),
            id="no-deployment-yet",
        ),
        pytest.param(
            make_deployment(ready=0, updated=0, observed_generation=0),
            None,
            OK,
            (Phase.PENDING, "False/RollingOut", "True/RollingOut", "False/AsExpected"),
            id="deployment-not-observed-yet",
        ),
        pytest.param(
            make_deployment(ready=0),
            None,
            OK,
            (Phase.PENDING, "False/ReplicasUnavailable", "True/RollingOut", "False/AsExpected"),
            id="first-pods-not-ready",
        ),
        pytest.param(
            make_deployment(),
            None,
            OK,
            (Phase.ACTIVE, "True/ReplicasReady", "False/RolloutComplete", "False/AsExpected"),
            id="rolled-out",
        ),
        pytest.param(
            make_deployment(ready=0),
            Phase.ACTIVE,
            OK,
            (
                Phase.DEGRADED,
                "False/ReplicasUnavailable",
                "False/RolloutComplete",
                "True/PrimaryUnavailable",
            ),
            id="active-lost-its-primary",
        ),
        pytest.param(
            make_deployment(ready=0),
            Phase.DEGRADED,
            OK,
            (
                Phase.DEGRADED,
                "False/ReplicasUnavailable",
                "False/RolloutComplete",
                "True/PrimaryUnavailable",
            ),
            id="still-degraded",
        ),
        pytest.param(
            make_deployment(generation=2, observed_generation=1),
            Phase.ACTIVE,
            OK,
            (Phase.ACTIVE, "False/RollingOut", "True/RollingOut", "False/AsExpected"),
            id="active-rolling-out-with-all-replicas-ready",
        ),
        pytest.param(
            make_deployment(ready=0),
            Phase.FAILED,
            OK,
            (Phase.PENDING, "False/ReplicasUnavailable", "True/RollingOut", "False/AsExpected"),
            id="failed-then-fixed-is-pending",
        ),
        pytest.param(
            make_deployment(),
            Phase.ACTIVE,
            Outcome(failure=Problem(Reason.CREDENTIALS_SECRET_NOT_FOUND, "no Secret x")),
            (
                Phase.FAILED,
                "False/CredentialsSecretNotFound",
                "False/CredentialsSecretNotFound",
                "True/CredentialsSecretNotFound",
            ),
            id="failure",
        ),
        pytest.param(
            make_deployment(),
            Phase.ACTIVE,
            Outcome(error=Problem(Reason.RECONCILE_ERROR, "409 Conflict")),
            (Phase.DEGRADED, "True/ReplicasReady", "False/RolloutComplete", "True/ReconcileError"),
            id="retryable-error-while-ready",
        ),
        pytest.param(
            None,
            None,
            Outcome(error=Problem(Reason.RECONCILE_ERROR, "403 Forbidden")),
            (Phase.PENDING, "False/Creating", "True/Creating", "True/ReconcileError"),
            id="retryable-error-before-ready",
        ),
        pytest.param(
            make_deployment(),
            Phase.ACTIVE,
            Outcome(paused=True),
            (Phase.ACTIVE, "True/ReplicasReady", "False/Paused", "False/AsExpected"),
            id="paused-while-ready",
        ),
        pytest.param(
            None,
            None,
            Outcome(paused=True),
            (Phase.PENDING, "False/Paused", "False/Paused", "False/AsExpected"),
            id="paused-before-creation",
        ),
        pytest.param(
            make_deployment(),
            Phase.ACTIVE,
            Outcome(deleting=True),
            (Phase.DELETING, "False/Deleting", "True/Deleting", "False/Deleting"),
            id="deleting",
        ),
        pytest.param(
            make_deployment(),
            Phase.ACTIVE,
            Outcome(deleting=True, failure=Problem(Reason.CREDENTIALS_SECRET_NOT_FOUND)),
            (
                Phase.DELETING,
                "False/Deleting",
                "True/Deleting",
                "True/CredentialsSecretNotFound",
            ),
            id="deleting-wins-over-failure-for-phase",
        ),
    ],
)
def test_truth_table(
    deployment: dict[str, Any] | None,
    previous_phase: Phase | None,
    outcome: Outcome,
    expected: tuple[Phase, str, str, str],
) -> None:
    assert summary(
        compute_status(make_db(), Workloads(deployment), previous_of(previous_phase), outcome, T0)
    ) == (expected)


def previous_of(phase: Phase | None) -> DatabaseStatus:
    """A stored status in ``phase`` as the operator would have left it for one replica."""
    if phase is Phase.ACTIVE:
        return DatabaseStatus(phase=phase, ready_replicas=1, primary_ready=True)
    if phase is Phase.DEGRADED:
        lost = Condition(
            type="Degraded",
            status=ConditionStatus.TRUE,
            reason="PrimaryUnavailable",
            last_transition_time=T0,
        )
        return DatabaseStatus(phase=phase, ready_replicas=0, conditions=[lost])
    return DatabaseStatus(phase=phase)


# --- readiness details ----------------------------------------------------------------------


def test_zero_replicas_is_ready_scaled_to_zero() -> None:
    status = compute_status(make_db(replicas=0), Workloads(make_deployment(0)), NO_STATUS, OK, T0)
    assert summary(status) == (
        Phase.ACTIVE,
        "True/ScaledToZero",
        "False/RolloutComplete",
        "False/AsExpected",
    )
    assert (status.replicas, status.ready_replicas) == (0, 0)


def test_scaling_to_zero_is_not_ready_until_the_deployment_follows() -> None:
    status = compute_status(
        make_db(replicas=0), Workloads(make_deployment(1)), active_status(), OK, T1
    )
    assert condition(status, "Ready").reason == "RollingOut"


def test_scaling_up_is_not_ready_until_the_deployment_spec_follows() -> None:
    status = compute_status(
        make_db(), Workloads(make_deployment(0, spec_replicas=0)), NO_STATUS, OK, T1
    )
    assert condition(status, "Ready").status is ConditionStatus.FALSE
    assert condition(status, "Progressing").reason == "RollingOut"


def test_ready_needs_available_replicas_too() -> None:
    status = compute_status(make_db(), Workloads(make_deployment(available=0)), NO_STATUS, OK, T0)
    assert condition(status, "Ready").status is ConditionStatus.FALSE


def replicated(
    primary_ready: int = 1, replicas_ready: int = 2, generation: int = 1, read: int = 2
) -> Workloads:
    """The primary and the read replicas of make_db(replicas=read + 1)."""
    return Workloads(
        primary=make_deployment(1, ready=primary_ready, generation=generation),
        replicas=make_deployment(read, ready=replicas_ready, generation=generation),
    )


def test_read_replicas_count_as_replicas_and_have_their_own_endpoint() -> None:
    status = compute_status(make_db(replicas=3), replicated(replicas_ready=1), NO_STATUS, OK, T0)
    assert (status.replicas, status.ready_replicas) == (3, 2)
    assert (status.primary_ready, status.read_replicas, status.ready_read_replicas) == (True, 2, 1)
    assert status.endpoint == "shop.prod.svc:5432"
    assert status.read_endpoint == "shop-replicas.prod.svc:5432"
    assert condition(status, "Ready").message == (
        "2/3 replicas ready: the primary is ready, 1/2 read replicas ready"
    )
    assert summary(status)[0] == Phase.PENDING, "Ready waits for every replica the first time"


def test_a_lost_read_replica_degrades_but_the_database_stays_ready() -> None:
    active = compute_status(make_db(replicas=3), replicated(), NO_STATUS, OK, T0)
    lost = compute_status(make_db(replicas=3), replicated(replicas_ready=1), active, OK, T1)
    assert summary(lost) == (
        Phase.DEGRADED,
        "True/PrimaryReady",
        "False/RolloutComplete",
        "True/ReplicasUnavailable",
    )
    assert condition(lost, "Degraded").message == "1/2 read replicas ready"


def test_a_lost_primary_makes_the_database_not_ready_though_replicas_serve_reads() -> None:
    active = compute_status(make_db(replicas=3), replicated(), NO_STATUS, OK, T0)
    lost = compute_status(make_db(replicas=3), replicated(primary_ready=0), active, OK, T1)
    assert summary(lost) == (
        Phase.DEGRADED,
        "False/ReplicasUnavailable",
        "False/RolloutComplete",
        "True/PrimaryUnavailable",
    )
    assert "the read replicas serve reads" in condition(lost, "Degraded").message
    assert "the primary is not ready" in condition(lost, "Ready").message


def test_a_primary_caught_between_two_pods_is_lost_and_stays_lost_while_it_crashes() -> None:
    """Seen on a real node: the primary's pod deleted, and one reconcile saw the Deployment with
    no pod at all (nothing updated yet, at its current generation); the next ones saw the new
    pod crash-looping. Every one of them must say the primary is lost."""
    active = active_status()
    between = Workloads(make_deployment(1, ready=0, updated=0, available=0))
    gone = compute_status(make_db(), between, active, OK, T1)
    assert summary(gone) == (
        Phase.DEGRADED,
        "False/RollingOut",
        "True/RollingOut",
        "True/PrimaryUnavailable",
    )
    assert gone.primary_ready is False
    crashing = compute_status(make_db(), Workloads(make_deployment(ready=0)), gone, OK, T2)
    assert summary(crashing)[0] == Phase.DEGRADED
    assert summary(crashing)[3] == "True/PrimaryUnavailable"
    back = compute_status(make_db(), Workloads(make_deployment()), crashing, OK, T3)
    assert summary(back) == (
        Phase.ACTIVE,
        "True/ReplicasReady",
        "False/RolloutComplete",
        "False/AsExpected",
    )


def test_a_rollout_of_the_primary_loses_nothing() -> None:
    active = compute_status(make_db(replicas=3), replicated(), NO_STATUS, OK, T0)
    rolling = Workloads(
        primary=make_deployment(1, ready=0, generation=2, observed_generation=1),
        replicas=make_deployment(2, generation=2),
    )
    status = compute_status(make_db(2, replicas=3), rolling, active, OK, T1)
    assert summary(status) == (
        Phase.ACTIVE,
        "False/RollingOut",
        "True/RollingOut",
        "False/AsExpected",
    )


def test_mysql_has_no_read_replicas() -> None:
    status = compute_status(
        make_db(engine="mysql"), Workloads(make_deployment()), NO_STATUS, OK, T0
    )
    assert (status.read_replicas, status.read_endpoint) == (0, None)


def test_the_binding_names_the_connection_secret_once_it_exists() -> None:
    bound = compute_status(
        make_db(), Workloads(None), NO_STATUS, Outcome(binding="shop-connection"), T0
    )
    assert bound.binding is not None
    assert bound.binding.name == "shop-connection"
    assert compute_status(make_db(), Workloads(None), NO_STATUS, OK, T0).binding is None


def test_failure_message_names_the_problem() -> None:
    outcome = Outcome(
        failure=Problem(
            Reason.CREDENTIALS_SECRET_NOT_FOUND, "Secret my-creds not found in namespace prod"
        ),
    )
    status = compute_status(make_db(), Workloads(None), NO_STATUS, outcome, T0)
    ready = condition(status, "Ready")
    assert (ready.reason, ready.message) == (
        "CredentialsSecretNotFound",
        "Secret my-creds not found in namespace prod",
    )


def test_error_message_is_carried_by_degraded() -> None:
    outcome = Outcome(error=Problem(Reason.RECONCILE_ERROR, "the API server said 500"))
    degraded = condition(
        compute_status(make_db(), Workloads(None), NO_STATUS, outcome, T0), "Degraded"
    )
    assert (degraded.status, degraded.message) == (ConditionStatus.TRUE, "the API server said 500")


def test_paused_condition_says_children_are_not_changed() -> None:
    status = compute_status(
        make_db(paused=True), Workloads(make_deployment()), NO_STATUS, Outcome(paused=True), T0
    )
    progressing = condition(status, "Progressing")
    assert progressing.status is ConditionStatus.FALSE
    assert progressing.reason == "Paused"
    assert "spec.paused is true" in progressing.message
    assert "change" in progressing.message


# --- the other status fields ----------------------------------------------------------------


def test_status_fields_describe_the_deployment_and_how_to_connect() -> None:
    db = make_db(generation=4, engine="redis", replicas=1, port=16379)
    status = compute_status(
        db, Workloads(make_deployment(1, ready=1, generation=7)), NO_STATUS, OK, T0
    )
    assert status.observed_generation == 4
    assert status.version == "7.4"
    assert (status.replicas, status.ready_replicas) == (1, 1)
    assert status.selector == "app.kubernetes.io/instance=shop,app.kubernetes.io/name=redis"
    assert status.endpoint == "shop.prod.svc:16379"
    assert status.credentials_secret == "shop-credentials"


def test_status_fields_default_to_zero_without_a_deployment() -> None:
    status = compute_status(make_db(version="15"), Workloads(None), NO_STATUS, OK, T0)
    assert (status.replicas, status.ready_replicas) == (0, 0)
    assert status.version == "15"


def test_credentials_secret_follows_the_ref() -> None:
    db = make_db(credentialsSecretRef={"name": "my-creds"})
    assert compute_status(db, Workloads(None), NO_STATUS, OK, T0).credentials_secret == "my-creds"


def test_conditions_are_ready_progressing_degraded_once_each() -> None:
    status = compute_status(make_db(), Workloads(None), active_status(), OK, T1)
    assert [c.type for c in status.conditions or []] == ["Ready", "Progressing", "Degraded"]


def test_status_serialises_to_camel_case() -> None:
    wire = active_status().to_wire()
    assert wire["observedGeneration"] == 1
    assert wire["readyReplicas"] == 1
    assert wire["credentialsSecret"] == "shop-credentials"
    ready = wire["conditions"][0]
    assert ready["lastTransitionTime"] == "2024-05-01T12:00:00Z"
    assert ready["observedGeneration"] == 1


# --- transitions over time ------------------------------------------------------------------


def test_pending_active_degraded_active() -> None:
    db = make_db()
    pending = compute_status(db, Workloads(make_deployment(ready=0)), NO_STATUS, OK, T0)
    active = compute_status(db, Workloads(make_deployment()), pending, OK, T1)
    degraded = compute_status(db, Workloads(make_deployment(ready=0)), active, OK, T2)
    recovered = compute_status(db, Workloads(make_deployment()), degraded, OK, T3)

    assert [s.phase for s in (pending, active, degraded, recovered)] == [
        Phase.PENDING,
        Phase.ACTIVE,
        Phase.DEGRADED,
        Phase.ACTIVE,
    ]
    assert condition(active, "Ready").last_transition_time == T1
    assert condition(degraded, "Ready").last_transition_time == T2
    assert condition(degraded, "Degraded").last_transition_time == T2
    assert condition(recovered, "Ready").last_transition_time == T3
    assert condition(recovered, "Degraded").last_transition_time == T3


def test_last_transition_time_moves_only_when_status_flips() -> None:
    db = make_db()
    first = compute_status(
        db, Workloads(make_deployment(ready=0, updated=0, observed_generation=0)), NO_STATUS, OK, T0
    )
    # Still not ready, for another reason: status unchanged, so the time stays.
    second = compute_status(db, Workloads(make_deployment(ready=0)), first, OK, T1)
    assert condition(second, "Ready").reason != condition(first, "Ready").reason
    assert condition(second, "Ready").last_transition_time == T0
    assert condition(second, "Degraded").last_transition_time == T0
    # Progressing stays True/RollingOut: its time stays too.
    assert condition(second, "Progressing").last_transition_time == T0


def test_observed_generation_follows_the_generation_even_without_a_flip() -> None:
    first = compute_status(make_db(generation=1), Workloads(make_deployment()), NO_STATUS, OK, T0)
    second = compute_status(
        make_db(generation=2, version="17"), Workloads(make_deployment()), first, OK, T1
    )
    assert second.observed_generation == 2
    for type_ in ("Ready", "Progressing", "Degraded"):
        found = condition(second, type_)
        assert found.observed_generation == 2, type_
        assert found.last_transition_time == T0, type_


def test_an_unchanged_world_gives_an_equal_status() -> None:
    db = make_db()
    first = compute_status(db, Workloads(make_deployment()), NO_STATUS, OK, T0)
    assert compute_status(db, Workloads(make_deployment()), first, OK, T3) == first


def test_status_survives_a_round_trip_through_the_api() -> None:
    db = make_db()
    first = compute_status(
        db, Workloads(make_deployment()), NO_STATUS, OK, T0 + timedelta(microseconds=7)
    )
    stored = DatabaseStatus.model_validate(first.to_wire())
    assert compute_status(db, Workloads(make_deployment()), stored, OK, T3) == stored


def test_failed_then_fixed_becomes_active() -> None:
    db = make_db()
    failed = compute_status(
        db,
        Workloads(make_deployment()),
        NO_STATUS,
        Outcome(failure=Problem(Reason.CREDENTIALS_SECRET_INVALID)),
        T0,
    )
    assert failed.phase is Phase.FAILED
    fixed = compute_status(db, Workloads(make_deployment()), failed, OK, T1)
    assert fixed.phase is Phase.ACTIVE
    assert condition(fixed, "Degraded").status is ConditionStatus.FALSE


def test_other_condition_types_are_kept() -> None:
    foreign = Condition(
        type="Backup", status=ConditionStatus.TRUE, last_transition_time=T0, reason="Done"
    )
    previous = DatabaseStatus(phase=Phase.ACTIVE, conditions=[foreign])
    status = compute_status(make_db(), Workloads(make_deployment()), previous, OK, T1)
    assert condition(status, "Backup") == foreign


def test_inputs_are_not_mutated() -> None:
    db = make_db()
    deployment = make_deployment(ready=0)
    previous = active_status()
    snapshot = (db.model_dump(), repr(deployment), previous.model_dump())
    compute_status(db, Workloads(deployment), previous, OK, T1)
    assert snapshot == (db.model_dump(), repr(deployment), previous.model_dump())


def test_naive_now_is_refused() -> None:
    with pytest.raises(ValueError, match="timezone-aware"):
        compute_status(make_db(), Workloads(None), NO_STATUS, OK, datetime(2024, 5, 1))


# --- set_condition --------------------------------------------------------------------------


def make_condition(status: ConditionStatus, at: datetime, reason: str = "R") -> Condition:
    return Condition(
        type="Ready", status=status, observed_generation=1, last_transition_time=at, reason=reason
    )


def test_set_condition_appends_a_new_type() -> None:
    new = make_condition(ConditionStatus.TRUE, T0)
    assert set_condition([], new) == [new]


def test_set_condition_keeps_the_time_when_status_is_unchanged() -> None:
    old = make_condition(ConditionStatus.TRUE, T0, reason="Old")
    result = set_condition([old], make_condition(ConditionStatus.TRUE, T1, reason="New"))
    assert [(c.reason, c.last_transition_time) for c in result] == [("New", T0)]


def test_set_condition_moves_the_time_on_a_flip() -> None:
    old = make_condition(ConditionStatus.TRUE, T0)
    result = set_condition([old], make_condition(ConditionStatus.FALSE, T1))
    assert [(c.status, c.last_transition_time) for c in result] == [(ConditionStatus.FALSE, T1)]


def test_set_condition_does_not_modify_its_input() -> None:
    old = make_condition(ConditionStatus.TRUE, T0)
    conditions = [old]
    set_condition(conditions, make_condition(ConditionStatus.FALSE, T1))
    assert conditions == [old]
    assert old.status is ConditionStatus.TRUE


def test_scaling_up_an_active_database_is_progress_not_degradation() -> None:
    active = compute_status(make_db(replicas=1), Workloads(make_deployment(1)), NO_STATUS, OK, T0)
    scaling = compute_status(
        make_db(2, replicas=3), replicated(replicas_ready=0, generation=2), active, OK, T1
    )
    assert summary(scaling) == (
        Phase.ACTIVE,
        "True/PrimaryReady",
        "True/RollingOut",
        "False/AsExpected",
    )


def test_scaling_down_loses_nothing() -> None:
    three = compute_status(make_db(replicas=3), replicated(), NO_STATUS, OK, T0)
    one = compute_status(
        make_db(2, replicas=1), Workloads(make_deployment(1, generation=2)), three, OK, T1
    )
    assert summary(one)[0] == Phase.ACTIVE
    assert condition(one, "Degraded").status is ConditionStatus.FALSE


def test_degraded_stays_until_every_wanted_read_replica_is_back() -> None:
    db = make_db(replicas=4)
    three = compute_status(db, replicated(read=3, replicas_ready=3), NO_STATUS, OK, T0)
    lost_two = compute_status(db, replicated(read=3, replicas_ready=1), three, OK, T1)
    one_back = compute_status(db, replicated(read=3, replicas_ready=2), lost_two, OK, T2)
    all_back = compute_status(db, replicated(read=3, replicas_ready=3), one_back, OK, T3)
    assert [s.phase for s in (lost_two, one_back, all_back)] == [
        Phase.DEGRADED,
        Phase.DEGRADED,
        Phase.ACTIVE,
    ]


def test_every_reason_is_explained_in_the_operations_guide() -> None:
    from database_operator.reasons import EXPLAINED

    assert set(EXPLAINED) == set(Reason)


# --- restore and backups --------------------------------------------------------------------

RESTORING = Outcome(restoring=Problem(Reason.RESTORING, "restoring DatabaseBackup nightly: Job x"))


def test_a_restoring_database_is_pending_and_progressing_until_the_restore_is_done() -> None:
    status = compute_status(make_db(), Workloads(None), NO_STATUS, RESTORING, T0)
    assert summary(status) == (
        Phase.PENDING,
        "False/Restoring",
        "True/Restoring",
        "False/AsExpected",
    )
    assert condition(status, "Ready").message == "restoring DatabaseBackup nightly: Job x"


def test_a_failed_restore_is_a_failure_not_progress() -> None:
    outcome = Outcome(
        failure=Problem(Reason.RESTORE_FAILED, "the backup is corrupt"),
        restoring=RESTORING.restoring,
    )
    status = compute_status(make_db(), Workloads(None), NO_STATUS, outcome, T0)
    assert summary(status) == (
        Phase.FAILED,
        "False/RestoreFailed",
        "False/RestoreFailed",
        "True/RestoreFailed",
    )


NIGHTLY = BackupRecord(name="shop-20240501-020000", time=T0)
BROKEN = BackupRecord(name="shop-20240430-020000", time=T0 - timedelta(days=1))
HEALTHY = BackupSummary(
    last_success=NIGHTLY,
    last_failure=BROKEN,
    health=true(Reason.LAST_BACKUP_SUCCEEDED, "shop-20240501-020000 completed"),
)


def with_backups(
    backups: BackupSummary | None, previous: DatabaseStatus = NO_STATUS, at: datetime = T0
) -> DatabaseStatus:
    return compute_status(
        make_db(), Workloads(make_deployment()), previous, OK, at, backups=backups
    )


def test_backup_healthy_says_what_the_backups_summary_says() -> None:
    status = with_backups(HEALTHY)
    healthy = condition(status, "BackupHealthy")
    assert (healthy.status, healthy.reason, healthy.message) == (
        ConditionStatus.TRUE,
        "LastBackupSucceeded",
        "shop-20240501-020000 completed",
    )
    assert (healthy.observed_generation, healthy.last_transition_time) == (1, T0)
    assert (status.last_successful_backup, status.last_failed_backup) == (NIGHTLY, BROKEN)


def test_backup_healthy_flips_with_its_own_transition_time() -> None:
    healthy = with_backups(HEALTHY)
    failing = BackupSummary(NIGHTLY, BROKEN, false(Reason.LAST_BACKUP_FAILED, "x failed"))
    failed = with_backups(failing, healthy, T1)
    assert condition(failed, "BackupHealthy").last_transition_time == T1
    assert condition(failed, "Ready").last_transition_time == T0


def test_backup_healthy_goes_when_the_summary_has_no_verdict() -> None:
    status = with_backups(BackupSummary(NIGHTLY, None, None), with_backups(HEALTHY), T1)
    assert "BackupHealthy" not in [c.type for c in status.conditions or []]
    assert (status.last_successful_backup, status.last_failed_backup) == (NIGHTLY, None)


def test_backups_not_looked_at_keep_what_the_status_said_of_them() -> None:
    previous = with_backups(HEALTHY)
    status = with_backups(None, previous, T1)
    assert (status.last_successful_backup, status.last_failed_backup) == (NIGHTLY, BROKEN)
    assert condition(status, "BackupHealthy") == condition(previous, "BackupHealthy")
    assert status == previous


RESTORED = RestoreRecord(backup="nightly", location="prod/old/nightly.pgdump", time=T1)


def test_restored_from_is_set_once_the_restore_completed_and_then_kept() -> None:
    restored = compute_status(make_db(), Workloads(None), NO_STATUS, Outcome(restored=RESTORED), T1)
    assert restored.restored_from == RESTORED
    later = compute_status(make_db(), Workloads(make_deployment()), restored, OK, T2)
    assert later.restored_from == RESTORED
    assert later.to_wire()["restoredFrom"] == {
        "backup": "nightly",
        "location": "prod/old/nightly.pgdump",
        "time": "2024-05-01T12:01:00Z",
    }
