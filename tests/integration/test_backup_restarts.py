"""Backups across the operator's restarts, and what a backup's end wakes: the operator as a
subprocess against the real kube-apiserver, its Jobs played here (tests/backupjobs.py: the agent
runs as the Job's pod would, against the real object store), its Databases' pods reported as the
kubelet would (`play_kubelet`).

- A backup is judged only once the Databases are known: one created while the operator was
  stopped runs when it starts (alone, or elected leader), never fails as `DatabaseNotFound`.
- A backup whose Job exists goes on from it: its Job created just before a kill -9 (the status
  write that would have said so never made), it completes after the restart with that one Job;
  and had the Job stored data and failed, the backup records where, so deleting it deletes them.
- A backup's end reaches its Database at once (not at the next resync), and the last failure's
  time stays in the Database's status and gauge after retention deleted the failed backup.
"""

from __future__ import annotations

import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from kubernetes import client
from prometheus_client.parser import text_string_to_metric_families

from database_operator.api.backup import ORIGIN_LABEL, SCHEDULED, SCHEDULED_AT_ANNOTATION
from tests.backupjobs import (
    job_finished,
    key_of,
    pod_ended,
    run_job,
    stamp,
    store_destination,
)
from tests.cluster import BACKUPS, GROUP, VERSION, Cluster, condition, play_kubelet, wait_for
from tests.controlplane import free_port
from tests.integration.conftest import OperatorProcess, start_operator

if TYPE_CHECKING:
    from tests.objectstore import ObjectStore

DB = "orders"
BACKUP = "orders-now"
#: How soon a backup's end must show in its Database's status (the resync is an hour away).
AT_ONCE_S = 5.0


@contextmanager
def running_operator(
    cluster: Cluster, namespace: str, log: Path, *args: str
) -> Iterator[OperatorProcess]:
    """An operator of ``namespace``, stopped (SIGTERM) when the block ends, unless the block
    killed it."""
    operator = start_operator(
        cluster,
        log,
        f"--namespace={namespace}",
        "--health-port=0",
        "--metrics-port=0",
        "--log-level=DEBUG",
        *args,  # after the defaults: a flag given again wins
    )
    try:
        yield operator
    finally:
        if operator.proc.poll() is None:
            assert operator.stop() == 0, operator.log_text()[-3000:]


def election(namespace: str) -> list[str]:
    """Leader election on, with short timings (a restart takes the released Lease at once)."""
    return [
        "--leader-election",
        f"--lease-namespace={namespace}",
        "--lease-name=backups",
        "--lease-duration=3",
        "--renew-deadline=2",
        "--retry-period=0.5",
    ]


def active_database(
    cluster: Cluster, namespace: str, destination: dict[str, Any], **backup: Any
) -> dict[str, Any]:
    """The Database ``DB``, backed up to ``destination``, its primary ready."""
    cluster.create_db(
        namespace, DB, {"engine": "postgres", "backup": {"destination": destination, **backup}}
    )

    def deployed() -> bool:
        try:
            cluster.apps.read_namespaced_deployment(DB, namespace)
        except client.ApiException as error:
            if error.status == 404:
                return False
            raise
        return True

    wait_for(deployed, what="the Database's Deployment")
    play_kubelet(cluster, namespace, DB)

    def ready() -> dict[str, Any] | None:
        found = cluster.get_db(namespace, DB)
        status = found.get("status", {})
        return found if status.get("phase") == "Active" and status.get("primaryReady") else None

    return wait_for(ready, what="the Database Active, its primary ready")


def backup_in(
    cluster: Cluster, namespace: str, name: str, *phases: str, timeout: float = 30
) -> dict[str, Any]:
    """The DatabaseBackup ``name`` once its phase is one of ``phases``."""

    def probe() -> dict[str, Any] | None:
        found = cluster.get_backup(namespace, name)
        return found if found.get("status", {}).get("phase") in phases else None

    return wait_for(probe, timeout=timeout, what=f"DatabaseBackup {name} in {phases}")


def said(backup: dict[str, Any]) -> str:
    status = backup.get("status", {})
    return f"{status.get('phase')}: {status.get('message')}"


def status_write_lost(cluster: Cluster, namespace: str, name: str) -> None:
    """Undo the status the operator wrote on ``name``: as if it had been killed after creating
    the Job and before that write reached the API server."""
    cluster.custom.patch_namespaced_custom_object_status(
        GROUP, VERSION, namespace, BACKUPS, name, {"status": None}
    )
    assert "status" not in cluster.get_backup(namespace, name)


def backup_jobs(cluster: Cluster, namespace: str) -> list[str]:
    found = cluster.batch.list_namespaced_job(
        namespace, label_selector="app.kubernetes.io/component=backup"
    )
    return sorted(job.metadata.name for job in found.items)


def killed_after_its_job(
    cluster: Cluster, namespace: str, store: ObjectStore, log: Path
) -> tuple[str, str]:
    """A backup whose Job the operator created just before a kill -9 (its status write lost),
    with the operator down: the Job's name and the key it stores at."""
    destination = store_destination(cluster, namespace, store)
    with running_operator(cluster, namespace, log) as operator:
        active_database(cluster, namespace, destination)
        cluster.create_backup(namespace, BACKUP, {"database": DB})
        job = backup_in(cluster, namespace, BACKUP, "Running")["status"]["job"]
        operator.proc.kill()
        operator.proc.wait()
    status_write_lost(cluster, namespace, BACKUP)
    return job, key_of(cluster, namespace, job)


# --- judged only once the Databases are known -----------------------------------------------------


@pytest.mark.parametrize("elected", [False, True], ids=["alone", "leader-election"])
def test_a_backup_created_while_the_operator_was_stopped_runs_once_it_starts(
    cluster: Cluster, namespace: str, object_store: ObjectStore, tmp_path: Path, elected: bool
) -> None:
    args = election(namespace) if elected else []
    destination = store_destination(cluster, namespace, object_store)
    with running_operator(cluster, namespace, tmp_path / "before.log", *args):
        active_database(cluster, namespace, destination)
    cluster.create_backup(namespace, BACKUP, {"database": DB})
    with running_operator(cluster, namespace, tmp_path / "after.log", *args):
        backup = backup_in(cluster, namespace, BACKUP, "Running", "Failed", "Completed")
        assert backup["status"]["phase"] == "Running", said(backup)
        assert backup_jobs(cluster, namespace) == [backup["status"]["job"]]


# --- a backup whose Job exists goes on from it ----------------------------------------------------


def test_a_backup_whose_job_was_created_just_before_a_kill_9_completes_with_that_one_job(
    cluster: Cluster, namespace: str, object_store: ObjectStore, tmp_path: Path
) -> None:
    job, key = killed_after_its_job(cluster, namespace, object_store, tmp_path / "killed.log")
    with running_operator(cluster, namespace, tmp_path / "after.log"):
        backup = backup_in(cluster, namespace, BACKUP, "Running", "Failed", "Completed")
        assert backup["status"]["phase"] == "Running", said(backup)
        result = run_job(cluster, namespace, job, object_store, tmp_path)
        backup = backup_in(cluster, namespace, BACKUP, "Completed", "Failed")
    assert backup["status"]["phase"] == "Completed", said(backup)
    assert backup_jobs(cluster, namespace) == [job]
    status = backup["status"]
    assert (status["job"], status["location"]) == (job, key)
    assert status["checksum"] == f"sha256:{result['sha256']}"
    assert object_store.keys(namespace, key) == [key, f"{key}.json", f"{key}.sha256"]


def test_a_failed_backup_whose_job_stored_data_deletes_that_data_when_deleted(
    cluster: Cluster, namespace: str, object_store: ObjectStore, tmp_path: Path
) -> None:
    job, key = killed_after_its_job(cluster, namespace, object_store, tmp_path / "killed.log")
    # While the operator is down the Job runs and stores the backup; its pod is gone before
    # anyone reads what it reported.
    run_job(cluster, namespace, job, object_store, tmp_path, pod_kept=False)
    stored = object_store.keys(namespace, key)
    assert stored == [key, f"{key}.json", f"{key}.sha256"]
    with running_operator(cluster, namespace, tmp_path / "after.log"):
        failed = backup_in(cluster, namespace, BACKUP, "Failed", "Completed")
        assert failed["status"]["phase"] == "Failed", said(failed)
        assert failed["status"].get("location") == key, said(failed)
        cluster.delete_backup(namespace, BACKUP)
        deletion = f"{BACKUP}-delete"
        wait_for(lambda: deletion in all_jobs(cluster, namespace), what="the deletion's Job")
        run_job(cluster, namespace, deletion, object_store, tmp_path)
        wait_for(lambda: cluster.backup_gone(namespace, BACKUP), what="the backup gone")
    assert object_store.keys(namespace, key) == []


def all_jobs(cluster: Cluster, namespace: str) -> list[str]:
    return [job.metadata.name for job in cluster.batch.list_namespaced_job(namespace).items]


# --- a backup's end reaches its Database at once --------------------------------------------------


def test_each_backups_completion_is_in_its_databases_status_within_seconds(
    cluster: Cluster, namespace: str, object_store: ObjectStore, tmp_path: Path
) -> None:
    """Three backups one after the other, with the Database's resync an hour away: each one's
    completion is in the Database's status at once. (Before, a completion reached it only when
    the watch event of the backup's status came before the write's answer: 5 times in 21.)"""
    destination = store_destination(cluster, namespace, object_store)
    took = []
    with running_operator(cluster, namespace, tmp_path / "operator.log", "--resync-interval=3600"):
        active_database(cluster, namespace, destination)
        for number in range(3):
            name = f"{BACKUP}-{number}"
            cluster.create_backup(namespace, name, {"database": DB})
            job = backup_in(cluster, namespace, name, "Running")["status"]["job"]
            run_job(cluster, namespace, job, object_store, tmp_path)
            done = backup_in(cluster, namespace, name, "Completed")
            seen = time.monotonic()

            def told(name: str = name) -> dict[str, Any] | None:
                db = cluster.get_db(namespace, DB)
                healthy = condition(db, "BackupHealthy") or {}
                last = db["status"].get("lastSuccessfulBackup") or {}
                return db if last.get("name") == name and healthy.get("status") == "True" else None

            db = wait_for(told, timeout=AT_ONCE_S, what=f"{name}'s completion in the status")
            took.append(time.monotonic() - seen)
            assert db["status"]["lastSuccessfulBackup"]["time"] == done["status"]["completedAt"]
    print(f"completion to the Database's status: {', '.join(f'{s:.2f}' for s in took)} s")


def scheduled_backup(cluster: Cluster, namespace: str, name: str, due: datetime) -> None:
    """A DatabaseBackup as the schedule makes one for the due time ``due``."""
    body = {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "DatabaseBackup",
        "metadata": {
            "name": name,
            "labels": {ORIGIN_LABEL: SCHEDULED},
            "annotations": {SCHEDULED_AT_ANNOTATION: stamp(due)},
        },
        "spec": {"database": DB},
    }
    cluster.custom.create_namespaced_custom_object(GROUP, VERSION, namespace, BACKUPS, body)


def last_failure_gauge(port: int, namespace: str) -> float | None:
    """database_operator_backup_last_failure_timestamp_seconds of ``DB``, as /metrics says."""
    url = f"http://127.0.0.1:{port}/metrics"
    with urllib.request.urlopen(url, timeout=5) as response:
        text = response.read().decode()
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if (
                sample.name == "database_operator_backup_last_failure_timestamp_seconds"
                and sample.labels == {"namespace": namespace, "database": DB}
            ):
                return float(sample.value)
    return None


def test_the_last_failure_gauge_keeps_its_time_after_retention_deleted_the_failed_backup(
    cluster: Cluster, namespace: str, object_store: ObjectStore, tmp_path: Path
) -> None:
    port = free_port()
    destination = store_destination(cluster, namespace, object_store)
    now = datetime.now(UTC).replace(microsecond=0)
    args = f"--metrics-port={port}", "--resync-interval=1"
    with running_operator(cluster, namespace, tmp_path / "operator.log", *args) as operator:
        # A schedule that comes due once a year (not during the test), retention of one.
        active_database(
            cluster, namespace, destination, schedule="0 0 1 1 *", retention={"count": 1}
        )
        scheduled_backup(cluster, namespace, "orders-a", now - timedelta(hours=2))
        job = backup_in(cluster, namespace, "orders-a", "Running")["status"]["job"]
        pod_ended(cluster, namespace, job, "upload", exit_code=3, message='{"error": "refused"}')
        job_finished(cluster, namespace, job, failed=True)
        failed = backup_in(cluster, namespace, "orders-a", "Failed")
        failed_at = datetime.fromisoformat(failed["status"]["completedAt"]).timestamp()
        wait_for(lambda: last_failure_gauge(port, namespace) == failed_at, what="the gauge")

        # A later scheduled backup completes: retention deletes the failed one.
        scheduled_backup(cluster, namespace, "orders-b", now - timedelta(hours=1))
        job = backup_in(cluster, namespace, "orders-b", "Running")["status"]["job"]
        run_job(cluster, namespace, job, object_store, tmp_path)
        backup_in(cluster, namespace, "orders-b", "Completed")
        wait_for(lambda: "orders-a-delete" in all_jobs(cluster, namespace), what="its deletion")
        run_job(cluster, namespace, "orders-a-delete", object_store, tmp_path)
        wait_for(lambda: cluster.backup_gone(namespace, "orders-a"), what="orders-a deleted")
        # The Database's reconcile that follows the deletion (its backups changed).
        before = len(operator.reconciles(DB))
        wait_for(lambda: len(operator.reconciles(DB)) > before, what="a reconcile after it")
        assert last_failure_gauge(port, namespace) == failed_at
    db = cluster.get_db(namespace, DB)
    assert db["status"]["lastSuccessfulBackup"]["name"] == "orders-b"
    assert db["status"]["lastFailedBackup"] == {
        "name": "orders-a",
        "time": failed["status"]["completedAt"],
    }
