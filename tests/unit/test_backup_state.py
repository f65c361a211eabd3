"""What a backup's status says: its Job's outcome, its phase and conditions, where it is stored,
and what a Database's status says of its backups (the BackupHealthy truth table)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from database_operator.api.backup import (
    ORIGIN_LABEL,
    SCHEDULED,
    SCHEDULED_AT_ANNOTATION,
    BackupPhase,
    BackupRecord,
    DatabaseBackup,
    DatabaseBackupStatus,
)
from database_operator.api.common import Condition, ConditionStatus
from database_operator.api.models import Database
from database_operator.backups import state
from database_operator.manifest import Manifest
from database_operator.reasons import Reason

T0 = datetime(2026, 3, 10, 2, 0, tzinfo=UTC)
T1 = T0 + timedelta(minutes=5)
UID = "u-1"


# --- job_outcome ----------------------------------------------------------------------------


def job(*conditions: tuple[str, str], completion: str | None = None) -> Manifest:
    """A Job with conditions (type, reason), each True."""
    status: Manifest = {
        "conditions": [
            {
                "type": type_,
                "status": "True",
                "reason": reason,
                "message": f"the Job says {reason}",
                "lastTransitionTime": "2026-03-10T02:04:00Z",
            }
            for type_, reason in conditions
        ]
    }
    if completion:
        status["completionTime"] = completion
    return {"metadata": {"name": "shop-nightly"}, "status": status}


def pod(*terminated: tuple[str, int, str], init: tuple[str, int, str] | None = None) -> Manifest:
    """A pod whose containers terminated with (name, exit code, termination message)."""

    def statuses(found: tuple[tuple[str, int, str], ...]) -> list[Manifest]:
        return [
            {"name": name, "state": {"terminated": {"exitCode": code, "message": message}}}
            for name, code, message in found
        ]

    return {
        "metadata": {"name": "shop-nightly-x1"},
        "status": {
            "initContainerStatuses": statuses((init,) if init else ()),
            "containerStatuses": statuses(terminated),
        },
    }


RESULT = {"size": 1234, "sha256": "ab" * 32, "engineVersion": "16.4", "location": "k"}


@pytest.mark.parametrize(
    "found",
    [
        pytest.param({"metadata": {"name": "j"}}, id="no-status"),
        pytest.param(job(), id="no-conditions"),
        pytest.param(job(("SuccessCriteriaMet", "CompletionsReached")), id="success-pending"),
        pytest.param(job(("FailureTarget", "BackoffLimitExceeded")), id="failure-pending"),
    ],
)
def test_a_job_without_complete_or_failed_is_running(found: Manifest) -> None:
    assert state.job_outcome(found) == state.JobOutcome()


def test_a_complete_job_reports_what_the_upload_container_said() -> None:
    outcome = state.job_outcome(
        job(("Complete", "CompletionsReached"), completion="2026-03-10T02:05:00Z"),
        [pod(("upload", 0, json.dumps(RESULT)), init=("dump", 0, ""))],
    )
    assert (outcome.finished, outcome.failed, outcome.result) == (True, False, RESULT)
    assert outcome.finished_at == T1


@pytest.mark.parametrize(
    "pods",
    [
        pytest.param([], id="no-pod"),
        pytest.param([pod(("upload", 0, "stored it"))], id="not-json"),
        pytest.param([pod(("upload", 0, "[1, 2]"))], id="not-an-object"),
        pytest.param([pod(("other", 0, json.dumps(RESULT)))], id="another-container"),
    ],
)
def test_a_complete_job_without_a_readable_result_has_none(pods: list[Manifest]) -> None:
    outcome = state.job_outcome(job(("Complete", "CompletionsReached")), pods)
    assert (outcome.finished, outcome.failed, outcome.result) == (True, False, None)


def test_a_failed_job_gives_its_reason_and_the_agents_error_unwrapped() -> None:
    failed = pod(("upload", 3, json.dumps({"error": "uploading k to s3://b: AccessDenied"})))
    outcome = state.job_outcome(job(("Failed", "PodFailurePolicy")), [failed])
    assert (outcome.finished, outcome.failed, outcome.reason) == (True, True, "PodFailurePolicy")
    assert outcome.message == "upload: uploading k to s3://b: AccessDenied"
    assert outcome.finished_at == datetime(2026, 3, 10, 2, 4, tzinfo=UTC)


def test_a_failed_job_gives_a_scripts_log_tail_once_however_many_pods_said_it() -> None:
    log = "pg_dump: error: connection to server\n  failed:   Connection refused\n"
    pods = [pod(init=("dump", 1, log)) for _ in range(3)]
    outcome = state.job_outcome(job(("Failed", "BackoffLimitExceeded")), pods)
    assert outcome.reason == "BackoffLimitExceeded"
    assert (
        outcome.message == "dump: pg_dump: error: connection to server failed: Connection refused"
    )


def test_a_failed_job_whose_containers_said_nothing_gives_the_jobs_words() -> None:
    outcome = state.job_outcome(job(("Failed", "DeadlineExceeded")), [pod(("upload", 137, ""))])
    assert outcome.message == "DeadlineExceeded: the Job says DeadlineExceeded"


def test_long_last_words_are_shortened_to_their_end() -> None:
    words = "start " + "x" * 5000 + " the real cause"
    outcome = state.job_outcome(job(("Failed", "BackoffLimitExceeded")), [pod(("dump", 1, words))])
    said = outcome.message.removeprefix("dump: ")
    assert said.startswith("…")
    assert said.endswith("the real cause")
    assert len(said) == state.MAX_WORDS + 1


# --- a Job whose pod cannot start: the start deadline -----------------------------------------

DEADLINE = timedelta(minutes=5)
#: When the Job (and its first pod) was created.
MADE = "2026-03-10T02:00:00Z"
IMAGE = "registry.example.com/database-operator:1.2.3"
PULL = f'failed to pull and unpack image "{IMAGE}": 401 Unauthorized'


def unfinished_job(**status: Any) -> Manifest:
    return {"metadata": {"name": "shop-nightly", "creationTimestamp": MADE}, "status": status}


def waiting_pod(
    name: str,
    reason: str,
    message: str = "",
    *,
    init_ended: str | None = None,
    phase: str = "Pending",
) -> Manifest:
    """The backup Job's pod: its dump (an init container) ended at ``init_ended`` and the
    container ``name`` waits; or, without ``init_ended``, ``name`` is the first to wait."""
    waits = {"name": name, "state": {"waiting": {"reason": reason, "message": message}}}
    ended = {
        "name": "dump",
        "state": {"terminated": {"exitCode": 0, "finishedAt": init_ended}},
    }
    return {
        "metadata": {"name": "shop-nightly-x1", "creationTimestamp": MADE},
        "status": {
            "phase": phase,
            "startTime": MADE,
            "initContainerStatuses": [ended] if init_ended else [waits],
            "containerStatuses": [waits] if init_ended else [],
        },
    }


def unscheduled_pod() -> Manifest:
    return {
        "metadata": {"name": "shop-nightly-x1", "creationTimestamp": MADE},
        "status": {
            "phase": "Pending",
            "conditions": [
                {
                    "type": "PodScheduled",
                    "status": "False",
                    "reason": "Unschedulable",
                    "message": "0/3 nodes are available: 3 Insufficient memory.",
                    "lastTransitionTime": "2026-03-10T02:00:01Z",
                }
            ],
        },
    }


def outcome_at(minutes: float, *pods: Manifest, found: Manifest | None = None) -> state.JobOutcome:
    return state.job_outcome(
        found or unfinished_job(active=1), pods, T0 + timedelta(minutes=minutes), DEADLINE
    )


@pytest.mark.parametrize(
    ("waiting", "said"),
    [
        pytest.param(
            waiting_pod("dump", "ErrImagePull", PULL),
            f"dump: ErrImagePull: {PULL}",
            id="image-pull",
        ),
        pytest.param(
            waiting_pod("upload", "ImagePullBackOff", f'Back-off pulling image "{IMAGE}"'),
            f'upload: ImagePullBackOff: Back-off pulling image "{IMAGE}"',
            id="pull-back-off",
        ),
        pytest.param(
            waiting_pod("upload", "CreateContainerConfigError", 'secret "s3-creds" not found'),
            'upload: CreateContainerConfigError: secret "s3-creds" not found',
            id="secret-gone",
        ),
        pytest.param(
            unscheduled_pod(),
            "pod shop-nightly-x1 Unschedulable: 0/3 nodes are available: 3 Insufficient memory.",
            id="unschedulable",
        ),
    ],
)
def test_a_pod_that_cannot_start_says_why_until_the_start_deadline_then_fails(
    waiting: Manifest, said: str
) -> None:
    before = outcome_at(4, waiting)
    assert (before.finished, before.waiting, before.deadline) == (False, said, T1)
    assert "stopped at 2026-03-10T02:05:00Z" in state.waiting_note(before)
    after = outcome_at(5, waiting)
    assert (after.finished, after.failed, after.stop) == (True, True, True)
    assert after.reason == state.NOT_STARTED == "StartDeadlineExceeded"
    assert after.message == f"its pod did not start within 300 s: {said}"
    assert after.finished_at == T1


def test_a_container_that_waits_is_timed_from_when_its_turn_came_not_from_the_job() -> None:
    # The dump ran for an hour; then the agent's image could not be pulled.
    late = waiting_pod("upload", "ErrImagePull", PULL, init_ended="2026-03-10T03:00:00Z")
    assert outcome_at(64, late).waiting == f"upload: ErrImagePull: {PULL}"
    assert outcome_at(64, late).finished is False
    assert outcome_at(65, late).reason == state.NOT_STARTED


def test_a_container_being_created_is_no_problem_to_report_but_counts_toward_the_deadline() -> None:
    # A claim that cannot be mounted shows as nothing but ContainerCreating.
    creating = waiting_pod("dump", "ContainerCreating")
    assert outcome_at(4, creating) == state.JobOutcome(waiting="", deadline=T1)
    assert outcome_at(6, creating).message == (
        "its pod did not start within 300 s: dump: ContainerCreating"
    )


def test_a_job_that_made_no_pod_is_timed_from_its_creation() -> None:
    assert outcome_at(4).finished is False
    outcome = outcome_at(5)
    assert outcome.reason == state.NOT_STARTED
    assert "Job shop-nightly has made no pod" in outcome.message
    assert "ResourceQuota" in outcome.message


@pytest.mark.parametrize(
    "pods",
    [
        pytest.param(
            [
                {
                    "metadata": {"name": "p", "creationTimestamp": MADE},
                    "status": {
                        "phase": "Running",
                        "containerStatuses": [{"name": "upload", "state": {"running": {}}}],
                    },
                }
            ],
            id="a-container-runs",
        ),
        pytest.param(
            [pod(init=("dump", 1, "refused")) | {"status": {"phase": "Failed"}}], id="between-pods"
        ),
    ],
)
def test_a_job_whose_pod_runs_or_ended_is_never_stopped_for_the_start_deadline(
    pods: list[Manifest],
) -> None:
    assert outcome_at(600, *pods) == state.JobOutcome()


def test_without_a_clock_a_job_is_only_read() -> None:
    assert state.job_outcome(unfinished_job(), [unscheduled_pod()]) == state.JobOutcome()


def test_a_stopped_job_reads_as_the_same_failure_without_its_pods() -> None:
    failed = outcome_at(5, waiting_pod("dump", "ErrImagePull", PULL))
    patch = state.stopped_job_patch(failed)
    assert patch == {
        "metadata": {"annotations": {state.STOPPED_ANNOTATION: failed.message}},
        "spec": {"suspend": True},
    }
    stopped = unfinished_job() | {"metadata": {"name": "j", **patch["metadata"]}}
    again = state.job_outcome(stopped)
    assert (again.finished, again.failed, again.reason) == (True, True, state.NOT_STARTED)
    assert (again.message, again.stop) == (failed.message, False)
    assert state.STOPPED_ANNOTATION == "databases.example.com/stopped"


# --- advance --------------------------------------------------------------------------------


def make_backup(
    name: str = "shop-1",
    *,
    generation: int = 2,
    database: str = "shop",
    scheduled: bool = False,
    scheduled_at: datetime | None = None,
    **status: Any,
) -> DatabaseBackup:
    metadata: Manifest = {"name": name, "namespace": "prod", "generation": generation}
    if scheduled:
        metadata["labels"] = {ORIGIN_LABEL: SCHEDULED}
    if scheduled_at is not None:
        metadata["annotations"] = {
            SCHEDULED_AT_ANNOTATION: scheduled_at.strftime("%Y-%m-%dT%H:%M:%SZ")
        }
    return DatabaseBackup.model_validate(
        {"metadata": metadata, "spec": {"database": database}, "status": status}
    )


def conditions_of(status: DatabaseBackupStatus) -> dict[str, tuple[str, str, Any, Any]]:
    return {
        c.type: (c.status.value, c.reason, c.observed_generation, c.last_transition_time)
        for c in status.conditions or []
    }


def test_a_running_backup_is_neither_completed_nor_failed() -> None:
    status = state.advance(
        make_backup(), BackupPhase.RUNNING, Reason.BACKUP_RUNNING, "Job x runs", T0, job="x"
    )
    assert (status.phase, status.message, status.job, status.observed_generation) == (
        BackupPhase.RUNNING,
        "Job x runs",
        "x",
        2,
    )
    assert conditions_of(status) == {
        "Completed": ("False", "BackupRunning", 2, T0),
        "Failed": ("False", "AsExpected", 2, T0),
    }


def test_completion_flips_completed_and_keeps_the_time_of_failed() -> None:
    running = state.advance(make_backup(), BackupPhase.RUNNING, Reason.BACKUP_RUNNING, "", T0)
    backup = make_backup(**running.to_wire())
    done = state.advance(
        backup, BackupPhase.COMPLETED, Reason.BACKUP_COMPLETED, "stored", T1, size=7
    )
    assert (done.phase, done.size) == (BackupPhase.COMPLETED, 7)
    assert conditions_of(done) == {
        "Completed": ("True", "BackupCompleted", 2, T1),
        "Failed": ("False", "AsExpected", 2, T0),
    }


def test_failure_flips_failed_and_keeps_the_time_of_completed() -> None:
    pending = state.advance(make_backup(), BackupPhase.PENDING, Reason.WAITING_FOR_DATABASE, "", T0)
    backup = make_backup(**pending.to_wire())
    failed = state.advance(backup, BackupPhase.FAILED, Reason.BACKUP_JOB_FAILED, "why", T1)
    assert conditions_of(failed) == {
        "Completed": ("False", "BackupJobFailed", 2, T0),
        "Failed": ("True", "BackupJobFailed", 2, T1),
    }
    assert failed.message == "why"


def test_the_same_verdict_again_changes_nothing() -> None:
    pending = state.advance(
        make_backup(), BackupPhase.PENDING, Reason.WAITING_FOR_DATABASE, "w", T0
    )
    backup = make_backup(**pending.to_wire())
    again = state.advance(backup, BackupPhase.PENDING, Reason.WAITING_FOR_DATABASE, "w", T1)
    assert again == backup.status


def test_a_new_generation_is_stamped_on_every_condition_without_moving_its_time() -> None:
    pending = state.advance(make_backup(), BackupPhase.PENDING, Reason.WAITING_FOR_DATABASE, "", T0)
    backup = make_backup(generation=3, **pending.to_wire())
    again = state.advance(backup, BackupPhase.PENDING, Reason.WAITING_FOR_DATABASE, "", T1)
    assert again.observed_generation == 3
    assert conditions_of(again) == {
        "Completed": ("False", "WaitingForDatabase", 3, T0),
        "Failed": ("False", "AsExpected", 3, T0),
    }


def test_advance_leaves_the_backup_alone() -> None:
    backup = make_backup()
    before = backup.model_dump()
    state.advance(backup, BackupPhase.FAILED, Reason.NO_DESTINATION, "x", T0)
    assert backup.model_dump() == before


# --- location -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("prefix", "key"),
    [
        ("backups", "backups/prod/shop/shop-1.pgdump"),
        ("team/backups", "team/backups/prod/shop/shop-1.pgdump"),
        (None, "prod/shop/shop-1.pgdump"),
        ("", "prod/shop/shop-1.pgdump"),
    ],
)
def test_a_backup_is_stored_under_its_namespace_and_database(prefix: str | None, key: str) -> None:
    assert state.location(prefix, make_backup(), "pgdump") == key


# --- summarize ------------------------------------------------------------------------------

DAILY = "0 2 * * *"
NOW = datetime(2026, 3, 10, 12, 0, tzinfo=UTC)


def at(day: int, hour: int = 2, minute: int = 10) -> datetime:
    """A time in March 2026."""
    return datetime(2026, 3, day, hour, minute, tzinfo=UTC)


def make_db(
    schedule: str | None = DAILY, *, suspend: bool = False, backup: bool = True
) -> Database:
    spec: Manifest = {}
    if backup:
        policy: Manifest = {"destination": {"pvc": {"claimName": "b"}}, "suspend": suspend}
        if schedule:
            policy["schedule"] = schedule
        spec["backup"] = policy
    return Database.model_validate(
        {"metadata": {"name": "shop", "namespace": "prod", "uid": UID}, "spec": spec}
    )


def done(
    name: str,
    phase: BackupPhase,
    finished: datetime | None,
    *,
    scheduled: bool = True,
    uid: str = UID,
    message: str | None = None,
) -> DatabaseBackup:
    """A backup of shop that reached ``phase`` at ``finished`` (a scheduled one was due at
    02:00 that day)."""
    due = (finished or NOW).replace(hour=2, minute=0)
    return make_backup(
        name,
        scheduled=scheduled,
        scheduled_at=due if scheduled else None,
        phase=phase.value,
        completedAt=finished.isoformat() if finished else None,
        databaseUID=uid,
        message=message,
    )


def running(name: str, due: datetime) -> DatabaseBackup:
    """A scheduled backup of shop, due at ``due``, that started and has not finished."""
    return make_backup(name, scheduled=True, scheduled_at=due, phase="Running", databaseUID=UID)


OK, FAIL = BackupPhase.COMPLETED, BackupPhase.FAILED


@pytest.mark.parametrize(
    ("db", "backups", "verdict"),
    [
        pytest.param(make_db(backup=False), [done("a", OK, at(10))], None, id="no-spec-backup"),
        pytest.param(
            make_db(suspend=True),
            [done("a", OK, at(10))],
            ("False", "BackupsSuspended"),
            id="suspended",
        ),
        pytest.param(
            make_db(suspend=True),
            [done("a", FAIL, at(10))],
            ("False", "BackupsSuspended"),
            id="suspended-wins-over-a-failure",
        ),
        pytest.param(
            make_db(),
            [done("a", OK, at(9)), done("b", FAIL, at(10))],
            ("False", "LastBackupFailed"),
            id="the-newest-scheduled-failed",
        ),
        pytest.param(
            make_db(),
            [done("a", FAIL, at(9)), done("b", OK, at(10))],
            ("True", "LastBackupSucceeded"),
            id="a-failure-then-a-success",
        ),
        pytest.param(
            make_db(),
            [done("a", OK, at(7))],
            ("False", "NoRecentBackup"),
            id="no-success-within-two-periods-of-the-newest-completion",
        ),
        pytest.param(
            make_db(),
            [done("a", OK, at(8, 13))],
            ("True", "LastBackupSucceeded"),
            id="a-success-within-two-periods",
        ),
        pytest.param(
            make_db(),
            [running("a", at(10, 2, 0))],
            ("Unknown", "NoBackupYet"),
            id="the-first-scheduled-backup-still-running",
        ),
        pytest.param(
            make_db(),
            [running("a", at(7, 2, 0)), running("b", at(10, 2, 0))],
            ("False", "NoRecentBackup"),
            id="nothing-completed-two-periods-after-the-first-scheduled-backup",
        ),
        pytest.param(make_db(), [], ("Unknown", "NoBackupYet"), id="nothing-yet"),
        pytest.param(
            make_db(schedule=None),
            [done("a", OK, at(9), scheduled=False), done("b", FAIL, at(10), scheduled=False)],
            ("False", "LastBackupFailed"),
            id="on-demand-only-the-newest-failed",
        ),
        pytest.param(
            make_db(schedule=None),
            [done("a", OK, at(1), scheduled=False)],
            ("True", "LastBackupSucceeded"),
            id="on-demand-only-no-period-to-be-late-for",
        ),
        pytest.param(
            make_db(schedule=None), [], ("Unknown", "NoBackupYet"), id="on-demand-nothing-yet"
        ),
    ],
)
def test_backup_healthy(
    db: Database, backups: list[DatabaseBackup], verdict: tuple[str, str] | None
) -> None:
    health = state.summarize(db, backups, NOW).health
    found = (health.status.value, health.reason) if health is not None else None
    assert found == verdict


def test_the_newest_success_and_failure_are_named_with_their_times() -> None:
    backups = [done("a", OK, at(8)), done("b", OK, at(9)), done("c", FAIL, at(7))]
    summary = state.summarize(make_db(), backups, NOW)
    assert summary.last_success is not None and summary.last_failure is not None
    assert (summary.last_success.name, summary.last_success.time) == ("b", at(9))
    assert (summary.last_failure.name, summary.last_failure.time) == ("c", at(7))


def test_the_records_are_kept_without_spec_backup_too() -> None:
    summary = state.summarize(make_db(backup=False), [done("a", OK, at(9))], NOW)
    assert summary.last_success is not None and summary.last_success.name == "a"
    assert summary.health is None


def test_the_last_failure_stays_after_its_backup_is_deleted_until_a_newer_one_fails() -> None:
    said = BackupRecord(name="c", time=at(7))
    db = make_db()
    db = db.model_copy(update={"status": db.status.model_copy(update={"last_failed_backup": said})})
    # c deleted by retention once b completed: the status still says when a backup last failed.
    summary = state.summarize(db, [done("b", OK, at(9))], NOW)
    assert summary.last_failure == said
    # An older failure still held does not take its place; a newer one does.
    summary = state.summarize(db, [done("b", OK, at(9)), done("a", FAIL, at(6))], NOW)
    assert summary.last_failure == said
    summary = state.summarize(db, [done("b", OK, at(9)), done("d", FAIL, at(9, 5))], NOW)
    assert summary.last_failure == BackupRecord(name="d", time=at(9, 5))


@pytest.mark.parametrize(
    "foreign",
    [
        pytest.param(done("old", OK, at(10), uid="a-namesake-before"), id="another-uid"),
        pytest.param(
            make_backup(
                "other",
                database="other",
                phase="Completed",
                completedAt=at(10).isoformat(),
                databaseUID=UID,
            ),
            id="another-database",
        ),
        pytest.param(make_backup("new", phase="Pending"), id="not-started"),
    ],
)
def test_only_this_databases_backups_count(foreign: DatabaseBackup) -> None:
    summary = state.summarize(make_db(), [foreign], NOW)
    assert (summary.last_success, summary.last_failure) == (None, None)
    assert summary.health is not None and summary.health.reason == Reason.NO_BACKUP_YET


def test_an_on_demand_failure_does_not_flip_a_schedules_health() -> None:
    backups = [done("nightly", OK, at(10)), done("manual", FAIL, at(10, 5), scheduled=False)]
    summary = state.summarize(make_db(), backups, NOW)
    assert summary.health is not None
    assert (summary.health.reason, summary.health.message) == (
        Reason.LAST_BACKUP_SUCCEEDED,
        "nightly completed at 2026-03-10T02:10:00Z",
    )
    assert summary.last_failure is not None and summary.last_failure.name == "manual"


def test_a_failure_message_names_the_backup_its_time_and_why() -> None:
    backups = [done("nightly", FAIL, at(10), message="Job x failed: disk full")]
    health = state.summarize(make_db(), backups, NOW).health
    assert health is not None
    assert health.message == "nightly failed at 2026-03-10T02:10:00Z: Job x failed: disk full"


@pytest.mark.parametrize(
    ("db", "period"),
    [
        pytest.param(make_db(), timedelta(days=1), id="active"),
        pytest.param(make_db("0 */6 * * *"), timedelta(hours=6), id="every-six-hours"),
        pytest.param(make_db(suspend=True), None, id="suspended"),
        pytest.param(make_db(schedule=None), None, id="on-demand-only"),
        pytest.param(make_db(backup=False), None, id="no-spec-backup"),
    ],
)
def test_the_period_is_reported_only_for_an_active_schedule(
    db: Database, period: timedelta | None
) -> None:
    assert state.summarize(db, [done("a", OK, at(10))], NOW).period == period


@pytest.mark.parametrize(
    "backups",
    [
        pytest.param([done("a", OK, at(10))], id="healthy"),
        pytest.param([done("a", FAIL, at(10))], id="failed"),
        pytest.param([], id="nothing-yet"),
    ],
)
def test_messages_say_no_relative_time_so_an_unchanged_status_costs_no_write(
    backups: list[DatabaseBackup],
) -> None:
    first = state.summarize(make_db(), backups, at(10, 3, 0)).health
    later = state.summarize(make_db(), backups, at(11, 1, 59)).health
    assert first == later


def test_an_overdue_message_says_since_when_not_how_long() -> None:
    backups = [done("a", OK, at(6))]
    first = state.summarize(make_db(), backups, at(9)).health
    later = state.summarize(make_db(), backups, at(10, 23)).health
    assert first == later
    assert first is not None
    assert first.message == (
        "no backup has completed since 2026-03-06T02:10:00Z: more than two periods of the "
        "schedule '0 2 * * *'"
    )


def test_a_backups_conditions_survive_the_wire() -> None:
    status = state.advance(make_backup(), BackupPhase.RUNNING, Reason.BACKUP_RUNNING, "", T0)
    wire = status.to_wire()
    assert wire["conditions"][0]["lastTransitionTime"] == "2026-03-10T02:00:00Z"
    assert Condition.model_validate(wire["conditions"][0]).status is ConditionStatus.FALSE
