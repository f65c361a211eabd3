"""Every Job the operator makes ends, on the real kube-apiserver: a backup, restore or delete Job
whose pod cannot start a container is stopped at the start deadline, and what it was for fails
with the kubelet's words instead of waiting for ever (issue 38).

No Job controller or kubelet runs here: the test plays them, creating a Job's pod from its
template and writing the pod's status as the kubelet writes one that cannot start
(`ErrImagePull`, `ImagePullBackOff`, `CreateContainerConfigError`); a Job the test leaves alone
never gets a pod, as a Job whose pods a quota or an admission policy refuses. The operator runs
with a start deadline of a few seconds, set by its environment variable.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from database_operator.backups.state import STOPPED_ANNOTATION
from tests.cluster import Cluster, condition, play_kubelet, wait_for
from tests.integration.conftest import OperatorProcess, start_operator

#: The start deadline the operator runs with here (seconds): more than one of its looks (every
#: 5 s) at a pod that waits comes before it.
START_DEADLINE_S = 12
#: The label the Job controller puts on a Job's pods (the operator finds them by it).
JOB_NAME_LABEL = "batch.kubernetes.io/job-name"
CREDENTIALS = "backup-credentials"
DESTINATION = {"s3": {"bucket": "backups", "credentialsSecretRef": {"name": CREDENTIALS}}}
IMAGE = "registry.example.com/database-operator:1.2.3"
PULL_FAILED = f'failed to pull and unpack image "{IMAGE}": 401 Unauthorized'
BACK_OFF = f'Back-off pulling image "{IMAGE}"'
SECRET_GONE = f'secret "{CREDENTIALS}" not found'


@pytest.fixture
def operator(cluster: Cluster, namespace: str, tmp_path: Path) -> Iterator[OperatorProcess]:
    """An operator of this test's namespace whose Jobs have ``START_DEADLINE_S`` to start."""
    running = start_operator(
        cluster,
        tmp_path / "operator.log",
        f"--namespace={namespace}",
        # No resync comes during a test: the operator must look again by itself while a Job's pod
        # waits, for its reason and at the deadline (no watch event tells of either).
        "--resync-interval=600",
        "--health-port=0",
        "--metrics-port=0",
        "--log-level=DEBUG",
        env={"DATABASE_OPERATOR_JOB_START_DEADLINE": str(START_DEADLINE_S)},
    )
    yield running
    assert running.stop() == 0, running.log_text()[-3000:]


def stamp(when: datetime | None = None) -> str:
    return (when or datetime.now(UTC)).strftime("%Y-%m-%dT%H:%M:%SZ")


def active_database(cluster: Cluster, namespace: str, name: str, **backup: Any) -> None:
    """A Database backed up to ``DESTINATION`` (its Secret made), Active: its pods reported
    ready as the kubelet would."""
    cluster.s3_credentials(namespace, CREDENTIALS)
    spec = {"engine": "postgres", "backup": {"destination": DESTINATION, **backup}}
    cluster.create_db(namespace, name, spec)
    wait_for(
        lambda: cluster.apps.list_namespaced_deployment(namespace).items,
        what="the Database's Deployment",
    )

    def active() -> bool:
        # Reported again at each try, as the Deployment controller would for a generation the
        # operator wrote after the first report (a fresh-clone run under load once timed out
        # waiting here; alone it never did).
        play_kubelet(cluster, namespace, name)
        return bool(cluster.get_db(namespace, name).get("status", {}).get("phase") == "Active")

    wait_for(active, interval=1, what=f"Database {name} Active")


def backup_status(cluster: Cluster, namespace: str, name: str) -> dict[str, Any]:
    return cluster.get_backup(namespace, name).get("status") or {}


def wait_backup(
    cluster: Cluster, namespace: str, name: str, phase: str = "", saying: str = ""
) -> dict[str, Any]:
    """The status of the DatabaseBackup ``name`` once it is in ``phase`` (any: "") and its
    message says ``saying``."""

    def probe() -> dict[str, Any] | None:
        status = backup_status(cluster, namespace, name)
        if phase and status.get("phase") != phase:
            return None
        return status if saying in status.get("message", "") and status else None

    return wait_for(probe, timeout=30, what=f"DatabaseBackup {name} {phase} saying {saying!r}")


def play_waiting_pod(
    cluster: Cluster, namespace: str, job: str, container: str, *, reason: str, message: str
) -> None:
    """Play the Job controller and the kubelet for ``job``: its pod (the Job's template) exists,
    every container before ``container`` ended just now, and ``container`` waits to start for
    ``reason``."""
    found = cluster.batch.read_namespaced_job(job, namespace)
    template: dict[str, Any] = cluster.api.sanitize_for_serialization(found.spec.template)
    spec = template["spec"]
    name = f"{job}-played"
    pod = {
        "metadata": {
            "name": name,
            "labels": {**(template["metadata"].get("labels") or {}), JOB_NAME_LABEL: job},
        },
        "spec": spec,
    }
    cluster.core.create_namespaced_pod(namespace, pod)
    now = stamp()

    def status_of(each: dict[str, Any], order: list[str]) -> dict[str, Any]:
        if order.index(each["name"]) < order.index(container):
            state = {"terminated": {"exitCode": 0, "reason": "Completed", "finishedAt": now}}
        elif each["name"] == container:
            state = {"waiting": {"reason": reason, "message": message}}
        else:
            state = {"waiting": {"reason": "PodInitializing"}}
        return {
            "name": each["name"],
            "image": each["image"],
            "imageID": "",
            "ready": False,
            "restartCount": 0,
            "state": state,
        }

    inits, mains = spec.get("initContainers", []), spec["containers"]
    order = [c["name"] for c in [*inits, *mains]]
    cluster.core.patch_namespaced_pod_status(
        name,
        namespace,
        {
            "status": {
                "phase": "Pending",
                "startTime": now,
                "initContainerStatuses": [status_of(c, order) for c in inits],
                "containerStatuses": [status_of(c, order) for c in mains],
            }
        },
    )


def stopped(cluster: Cluster, namespace: str, job: str) -> str:
    """Why the operator stopped ``job`` (it must have: suspended, and annotated)."""
    found = cluster.batch.read_namespaced_job(job, namespace)
    assert found.spec.suspend is True
    return str((found.metadata.annotations or {})[STOPPED_ANNOTATION])


def events(cluster: Cluster, namespace: str, kind: str, name: str) -> list[tuple[str, str]]:
    """(reason, message) of the Events on an object."""
    found = cluster.core.list_namespaced_event(
        namespace, field_selector=f"involvedObject.kind={kind},involvedObject.name={name}"
    ).items
    return [(event.reason, event.message) for event in found]


# --- a backup -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("container", "reason", "message"),
    [
        pytest.param("upload", "ImagePullBackOff", BACK_OFF, id="agent-image-not-pulled"),
        pytest.param("dump", "ErrImagePull", PULL_FAILED, id="engine-image-not-pulled"),
        pytest.param("upload", "CreateContainerConfigError", SECRET_GONE, id="credentials-deleted"),
    ],
)
@pytest.mark.usefixtures("operator")
def test_a_backup_whose_pod_cannot_start_says_why_then_fails_at_the_start_deadline(
    cluster: Cluster, namespace: str, container: str, reason: str, message: str
) -> None:
    active_database(cluster, namespace, "orders")
    cluster.create_backup(namespace, "orders-now", {"database": "orders"})
    job = wait_backup(cluster, namespace, "orders-now", "Running")["job"]
    if reason == "CreateContainerConfigError":
        # Deleted after the Job was made: the kubelet cannot fill the agent's environment.
        cluster.core.delete_namespaced_secret(CREDENTIALS, namespace)
    play_waiting_pod(cluster, namespace, job, container, reason=reason, message=message)
    said = f"{container}: {reason}: {message}"

    waiting = wait_backup(cluster, namespace, "orders-now", saying=said)
    assert waiting["phase"] == "Running"
    assert "stopped at" in waiting["message"]

    failed = wait_backup(cluster, namespace, "orders-now", "Failed")
    verdict = condition({"status": failed}, "Failed")
    assert verdict is not None
    assert (verdict["status"], verdict["reason"]) == ("True", "StartDeadlineExceeded")
    assert failed["message"] == (
        f"Job {job} failed (StartDeadlineExceeded): its pod did not start within "
        f"{START_DEADLINE_S} s: {said}"
    )
    # Stopped: the Job controller deletes its pod and makes no other.
    assert said in stopped(cluster, namespace, job)

    def unhealthy() -> dict[str, Any] | None:
        found = condition(cluster.get_db(namespace, "orders"), "BackupHealthy")
        return found if found and found["reason"] == "LastBackupFailed" else None

    # The Database's reconcile that follows the backup's write is woken at once, yet it comes
    # after the backup's status: wait for it rather than read it.
    health = wait_for(unhealthy, what="BackupHealthy LastBackupFailed")
    assert said in health["message"]


@pytest.mark.usefixtures("operator")
def test_the_schedule_goes_on_after_a_backup_whose_job_never_started(
    cluster: Cluster, namespace: str
) -> None:
    # Every 5 seconds; no pod is ever made for its Jobs (as when a quota refuses them).
    active_database(cluster, namespace, "orders", schedule="*/5 * * * * *")

    def two_backups() -> list[dict[str, Any]] | None:
        found = sorted(cluster.list_backups(namespace), key=lambda b: b["metadata"]["name"])
        return found if len(found) >= 2 else None

    first, second = wait_for(two_backups, timeout=40, what="a second scheduled backup")[:2]
    status = first["status"]
    verdict = condition(first, "Failed")
    assert verdict is not None and verdict["reason"] == "StartDeadlineExceeded"
    assert (status["phase"], verdict["status"]) == ("Failed", "True")
    assert f"Job {status['job']} has made no pod" in status["message"]
    # Taken once the first had failed: while it ran, the due times were skipped.
    assert second["metadata"]["creationTimestamp"] >= status["completedAt"]


@pytest.mark.usefixtures("operator")
def test_deleting_a_backup_whose_delete_job_cannot_start_ends_and_keeps_the_data(
    cluster: Cluster, namespace: str
) -> None:
    active_database(cluster, namespace, "orders")
    cluster.create_backup(namespace, "orders-now", {"database": "orders"})
    failed = wait_backup(cluster, namespace, "orders-now", "Failed")  # its Job made no pod
    location = failed["location"]
    cluster.delete_backup(namespace, "orders-now")
    wait_for(
        lambda: (
            cluster.batch.list_namespaced_job(
                namespace, field_selector="metadata.name=orders-now-delete"
            ).items
        ),
        what="the delete Job",
    )
    play_waiting_pod(
        cluster,
        namespace,
        "orders-now-delete",
        "delete",
        reason="ImagePullBackOff",
        message=BACK_OFF,
    )

    wait_for(lambda: cluster.backup_gone(namespace, "orders-now"), what="the backup gone")
    kept = [
        text
        for reason, text in events(cluster, namespace, "DatabaseBackup", "orders-now")
        if reason == "BackupDataKept"
    ]
    assert any(
        text.startswith(f"kept the stored backup at s3://backups: {location}: ")
        and f"delete: ImagePullBackOff: {BACK_OFF}" in text
        for text in kept
    ), kept
    assert "did not start" in stopped(cluster, namespace, "orders-now-delete")


@pytest.mark.usefixtures("operator")
def test_a_running_backup_deleted_has_its_job_deleted_with_its_pods_not_orphaned(
    cluster: Cluster, namespace: str
) -> None:
    """batch/v1 orphans a Job's pods unless the delete says otherwise: the pod would go on
    writing while the delete Job deletes what it wrote. Background propagation needs no
    finalizer on the Job (the garbage collector, absent here, deletes the pods after it)."""
    active_database(cluster, namespace, "orders")
    cluster.create_backup(namespace, "orders-now", {"database": "orders"})
    job = wait_backup(cluster, namespace, "orders-now", "Running")["job"]
    cluster.delete_backup(namespace, "orders-now")

    def gone() -> bool:
        found = cluster.batch.list_namespaced_job(namespace, field_selector=f"metadata.name={job}")
        return not found.items

    wait_for(gone, what=f"Job {job} deleted (an orphaning delete leaves it, finalizer orphan)")


# --- a restore ------------------------------------------------------------------------------


@pytest.mark.usefixtures("operator")
def test_a_restore_whose_pod_cannot_start_fails_the_database_at_the_start_deadline(
    cluster: Cluster, namespace: str
) -> None:
    cluster.s3_credentials(namespace, CREDENTIALS)
    restore = {"location": "team/old/orders/nightly.pgdump", "destination": DESTINATION}
    cluster.create_db(
        namespace, "orders", {"engine": "postgres", "storage": {"size": "1Gi"}, "restore": restore}
    )
    wait_for(
        lambda: (
            cluster.batch.list_namespaced_job(
                namespace, field_selector="metadata.name=orders-restore"
            ).items
        ),
        what="the restore Job",
    )
    play_waiting_pod(
        cluster, namespace, "orders-restore", "fetch", reason="ErrImagePull", message=PULL_FAILED
    )
    said = f"fetch: ErrImagePull: {PULL_FAILED}"

    def ready(reason: str, saying: str) -> dict[str, Any] | None:
        found = condition(cluster.get_db(namespace, "orders"), "Ready")
        return found if found and found["reason"] == reason and saying in found["message"] else None

    waiting = wait_for(lambda: ready("Restoring", said), what="the restore saying why it waits")
    assert "stopped at" in waiting["message"]
    failed = wait_for(lambda: ready("StartDeadlineExceeded", said), what="the restore failed")
    assert failed["message"] == (
        "restoring team/old/orders/nightly.pgdump failed (Job orders-restore, "
        f"StartDeadlineExceeded): its pod did not start within {START_DEADLINE_S} s: {said}"
    )
    assert cluster.get_db(namespace, "orders")["status"]["phase"] == "Failed"
    assert said in stopped(cluster, namespace, "orders-restore")
    # No Deployment: nothing was restored, nothing runs on the volume.
    assert cluster.apps.list_namespaced_deployment(namespace).items == []
