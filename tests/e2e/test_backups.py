"""Backups and restores through the real Job controller, scheduler and garbage collector.

kwok plays the kubelet: a Job's pods complete, and the agent's container reports what a backup
agent reports (for a simulated, empty dump); a destination bucket named "unreachable" refuses
every request, so its Jobs fail as they would there (hack/envtest/kwok/stages.yaml). What the
Jobs' programs do to real data is proven one level down, with the engines' own binaries and a
real object store (tests/integration/test_backup_recipes.py), from the same builders.
"""

from __future__ import annotations

import json
import re
import shlex
import time
from collections.abc import Iterator
from datetime import datetime
from typing import Any

import pytest
from kubernetes import watch

from tests.cluster import BACKUPS, GROUP, VERSION, Cluster, condition, wait_for
from tests.controlplane import ROOT
from tests.e2e.waiting import gone, wait_phase
from tests.integration.conftest import OperatorProcess

#: What kwok's stage makes a backup agent report (the SHA-256 of nothing).
EMPTY_SHA256 = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"


def destination(bucket: str = "backups") -> dict[str, Any]:
    return {
        "s3": {
            "endpoint": "http://seaweedfs.storage.svc:8333",
            "insecure": True,
            "bucket": bucket,
            "path": "team-a",
            "credentialsSecretRef": {"name": "backup-credentials"},
        }
    }


def database(backup: dict[str, Any] | None = None, **spec: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"engine": "postgres", "storage": {"size": "1Gi"}} | spec
    if backup is not None:
        body["backup"] = backup
    return body


def wait_backup(
    cluster: Cluster, namespace: str, name: str, phase: str, timeout: float = 60
) -> dict[str, Any]:
    def probe() -> dict[str, Any] | None:
        found = cluster.get_backup(namespace, name)
        return found if found.get("status", {}).get("phase") == phase else None

    return wait_for(probe, timeout=timeout, what=f"DatabaseBackup {name} to be {phase}")


def events(cluster: Cluster, namespace: str, kind: str, name: str) -> list[tuple[str, str, str]]:
    """(type, reason, message) of the Events on an object."""
    found = cluster.core.list_namespaced_event(
        namespace, field_selector=f"involvedObject.kind={kind},involvedObject.name={name}"
    ).items
    return [(e.type, e.reason, e.message) for e in found]


def reasons(cluster: Cluster, namespace: str, kind: str, name: str) -> set[str]:
    return {reason for _, reason, _ in events(cluster, namespace, kind, name)}


@pytest.fixture
def credentials(full_cluster: Cluster, e2e_namespace: str) -> None:
    full_cluster.s3_credentials(e2e_namespace)


def phases_of(cluster: Cluster, namespace: str, name: str, until: str) -> Iterator[str]:
    """Each phase the DatabaseBackup ``name`` goes through, as a watch delivers every change,
    until ``until``."""
    stream = watch.Watch().stream(
        cluster.custom.list_namespaced_custom_object,
        GROUP,
        VERSION,
        namespace,
        BACKUPS,
        field_selector=f"metadata.name={name}",
        timeout_seconds=90,
    )
    last = None
    for event in stream:
        phase = (event["object"].get("status") or {}).get("phase")
        if phase and phase != last:
            last = phase
            yield phase
        if phase == until:
            return


# --- on demand ------------------------------------------------------------------------------------


def test_a_backup_waits_for_its_database_then_runs_and_completes_with_what_its_job_stored(
    full_cluster: Cluster, e2e_namespace: str, e2e_operator: OperatorProcess, credentials: None
) -> None:
    ns = e2e_namespace
    # Created together: the backup waits until the Database's primary serves.
    full_cluster.create_db(ns, "orders", database({"destination": destination()}))
    full_cluster.create_backup(ns, "orders-manual", {"database": "orders"})
    seen = list(phases_of(full_cluster, ns, "orders-manual", until="Completed"))
    assert seen == ["Pending", "Running", "Completed"]

    backup = full_cluster.get_backup(ns, "orders-manual")
    status = backup["status"]
    db = full_cluster.get_db(ns, "orders")
    assert status["location"] == f"team-a/{ns}/orders/orders-manual.pgdump"
    assert status["size"] == 0
    assert status["checksum"] == f"sha256:{EMPTY_SHA256}"
    assert status["engine"] == "postgres"
    assert status["engineVersion"] == "kwok"
    assert status["databaseUID"] == db["metadata"]["uid"]
    assert status["destination"] == destination()
    assert status["startedAt"] <= status["completedAt"]
    completed, failed = condition(backup, "Completed"), condition(backup, "Failed")
    assert completed is not None and failed is not None
    assert (completed["status"], completed["reason"]) == ("True", "BackupCompleted")
    assert completed["observedGeneration"] == backup["metadata"]["generation"]
    assert (failed["status"], failed["reason"]) == ("False", "AsExpected")
    # The backup outlives its Database: no owner reference to it.
    assert "ownerReferences" not in backup["metadata"]

    job = full_cluster.kubectl("get", "job", status["job"], "-n", ns, "-o", "json")
    assert '"name": "orders-manual"' in job and '"kind": "DatabaseBackup"' in job

    def healthy() -> dict[str, Any] | None:
        found = full_cluster.get_db(ns, "orders")
        return found if (condition(found, "BackupHealthy") or {}).get("status") == "True" else None

    db = wait_for(healthy, what="the Database's BackupHealthy condition")
    assert db["status"]["lastSuccessfulBackup"] == {
        "name": "orders-manual",
        "time": status["completedAt"],
    }
    assert condition(db, "BackupHealthy")["reason"] == "LastBackupSucceeded"  # type: ignore[index]
    assert {"BackupStarted", "BackupCompleted"} <= reasons(full_cluster, ns, "Database", "orders")
    assert {"BackupStarted", "BackupCompleted"} <= reasons(
        full_cluster, ns, "DatabaseBackup", "orders-manual"
    )


def test_a_failed_job_fails_the_backup_with_its_reason_and_the_database_says_so(
    full_cluster: Cluster, e2e_namespace: str, e2e_operator: OperatorProcess, credentials: None
) -> None:
    ns = e2e_namespace
    full_cluster.create_db(ns, "ledger", database({"destination": destination("unreachable")}))
    wait_phase(full_cluster, ns, "ledger", "Active")
    full_cluster.create_backup(ns, "ledger-manual", {"database": "ledger"})
    backup = wait_backup(full_cluster, ns, "ledger-manual", "Failed")
    failed = condition(backup, "Failed")
    assert failed is not None
    assert (failed["status"], failed["reason"]) == ("True", "BackupJobFailed")
    assert "AccessDenied (simulated by kwok)" in failed["message"]
    assert backup["status"]["message"] == failed["message"]

    def unhealthy() -> dict[str, Any] | None:
        db = full_cluster.get_db(ns, "ledger")
        found = condition(db, "BackupHealthy") or {}
        return db if found.get("reason") == "LastBackupFailed" else None

    db = wait_for(unhealthy, what="BackupHealthy to say the backup failed")
    assert condition(db, "BackupHealthy")["status"] == "False"  # type: ignore[index]
    assert db["status"]["lastFailedBackup"]["name"] == "ledger-manual"
    assert "lastSuccessfulBackup" not in db["status"]
    assert ("Warning", "BackupFailed") in {
        (kind, reason) for kind, reason, _ in events(full_cluster, ns, "Database", "ledger")
    }


@pytest.mark.parametrize(
    ("setup", "reason", "words"),
    [
        ("no-database", "DatabaseNotFound", "Database 'ghost' does not exist"),
        ("no-destination", "NoDestination", "says where to store it"),
        ("no-secret", "DestinationNotFound", "Secret 'backup-credentials' does not exist"),
        ("no-claim", "DestinationNotFound", "PersistentVolumeClaim 'bk' does not exist"),
    ],
)
@pytest.mark.usefixtures("e2e_operator")
def test_a_backup_that_cannot_start_fails_at_once_and_makes_no_job(
    full_cluster: Cluster, e2e_namespace: str, setup: str, reason: str, words: str
) -> None:
    ns = e2e_namespace
    target = "ghost"
    if setup != "no-database":
        target = "plain"
        backup = {
            "no-secret": {"destination": destination()},
            "no-claim": {"destination": {"pvc": {"claimName": "bk"}}},
        }.get(setup)
        full_cluster.create_db(ns, target, database(backup))
        wait_phase(full_cluster, ns, target, "Active")
    full_cluster.create_backup(ns, "attempt", {"database": target})
    failed = condition(wait_backup(full_cluster, ns, "attempt", "Failed"), "Failed")
    assert failed is not None
    assert failed["reason"] == reason
    assert words in failed["message"]
    assert full_cluster.kubectl("get", "jobs", "-n", ns, "-o", "name").strip() == ""


def test_a_backup_goes_to_a_claim_the_user_made_and_a_database_restores_from_it(
    full_cluster: Cluster, e2e_namespace: str, e2e_operator: OperatorProcess
) -> None:
    """Seen on a real node: a backup to the user's own claim failed at once, "does not exist":
    it was looked up in the operator's cache, which holds only the claims the operator made."""
    ns = e2e_namespace
    full_cluster.create_claim(ns, "bk")
    to_claim = {"destination": {"pvc": {"claimName": "bk"}}}
    full_cluster.create_db(ns, "kept", database(to_claim))
    wait_phase(full_cluster, ns, "kept", "Active")
    full_cluster.create_backup(ns, "kept-1", {"database": "kept"})
    backup = wait_backup(full_cluster, ns, "kept-1", "Completed")
    assert backup["status"]["destination"] == to_claim["destination"]
    job = full_cluster.batch.read_namespaced_job("kept-1", ns)
    claims = {
        v.persistent_volume_claim.claim_name
        for v in job.spec.template.spec.volumes
        if v.persistent_volume_claim
    }
    assert claims == {"bk"}

    restore = {"location": backup["status"]["location"], "destination": to_claim["destination"]}
    full_cluster.create_db(ns, "kept-copy", database(restore=restore))
    db = wait_phase(full_cluster, ns, "kept-copy", "Active")
    assert db["status"]["restoredFrom"]["location"] == backup["status"]["location"]


#: The runbooks' commands that list a Database's backups (docs/operations.md), as they are
#: written there: with NS and NAME, the alerts' {{ $labels.namespace }} and {{ $labels.database }},
#: or an example's names.
RUNBOOK_LISTING = re.compile(
    r"kubectl get dbbackup[^`;\n|]*?-l databases\.example\.com/database="
    r"(?:\{\{ \$labels\.database \}\}|[A-Za-z0-9-]+)"
)


def runbook_listings() -> set[str]:
    return set(RUNBOOK_LISTING.findall((ROOT / "docs" / "operations.md").read_text()))


def test_every_backup_is_labelled_with_its_database_and_the_runbooks_commands_find_it(
    full_cluster: Cluster, e2e_namespace: str, e2e_operator: OperatorProcess, credentials: None
) -> None:
    """The runbooks list a Database's backups by its label; a backup made from a manifest, like
    the docs' own orders-before-upgrade, had none and was never listed."""
    ns = e2e_namespace
    full_cluster.create_db(ns, "orders", database({"destination": destination()}))
    manifest = {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "DatabaseBackup",
        "metadata": {"name": "orders-before-upgrade"},
        "spec": {"database": "orders"},
    }
    full_cluster.kubectl("apply", "-n", ns, "-f", "-", input=json.dumps(manifest))
    backup = wait_backup(full_cluster, ns, "orders-before-upgrade", "Completed")
    assert backup["metadata"]["labels"]["databases.example.com/database"] == "orders"

    commands = runbook_listings()
    assert len(commands) >= 3, commands
    for command in commands:
        args = shlex.split(
            command.replace("{{ $labels.namespace }}", ns)
            .replace("{{ $labels.database }}", "orders")
            .replace("NS", ns)
            .replace("NAME", "orders")
        )[1:]
        if "-n" not in args:
            args += ["-n", ns]
        listed = full_cluster.kubectl(*args, "-o", "name").split()
        assert listed == [f"databasebackup.{GROUP}/orders-before-upgrade"], command


# --- schedule and retention ------------------------------------------------------------------


def scheduled(cluster: Cluster, namespace: str, database_name: str) -> list[dict[str, Any]]:
    return cluster.list_backups(
        namespace,
        f"databases.example.com/database={database_name},databases.example.com/origin=schedule",
    )


def test_a_schedule_takes_backups_at_its_times_and_retention_deletes_the_oldest_with_their_data(
    full_cluster: Cluster, e2e_namespace: str, e2e_operator: OperatorProcess, credentials: None
) -> None:
    ns = e2e_namespace
    policy = {
        "destination": destination(),
        "schedule": "*/4 * * * * *",  # every 4 seconds (6 fields: seconds first)
        "retention": {"count": 2},
    }
    full_cluster.create_db(ns, "events", database(policy))
    taken: dict[str, dict[str, Any]] = {}

    def retention_deleted_some() -> list[str] | None:
        for backup in scheduled(full_cluster, ns, "events"):
            taken.setdefault(backup["metadata"]["name"], backup)
        now = {b["metadata"]["name"] for b in scheduled(full_cluster, ns, "events")}
        return sorted(set(taken) - now) if len(taken) >= 4 and set(taken) - now else None

    deleted = wait_for(retention_deleted_some, timeout=90, interval=0.5, what="retention")
    for name, backup in taken.items():
        due = datetime.fromisoformat(
            backup["metadata"]["annotations"]["databases.example.com/scheduled-at"]
        )
        assert due.second % 4 == 0, name
        assert name == f"events-{due:%Y%m%d-%H%M%S}"
        created = datetime.fromisoformat(backup["metadata"]["creationTimestamp"])
        assert 0 <= (created - due).total_seconds() <= 3, f"{name} created at {created}"
    # The oldest went, and with them their stored data (their delete Jobs ran).
    assert deleted == sorted(taken)[: len(deleted)]
    for name in deleted:
        assert "BackupDataDeleted" in reasons(full_cluster, ns, "DatabaseBackup", name)

    def kept_count() -> list[str] | None:
        completed = [
            b["metadata"]["name"]
            for b in scheduled(full_cluster, ns, "events")
            if b.get("status", {}).get("phase") == "Completed"
        ]
        return completed if len(completed) == 2 else None

    wait_for(kept_count, timeout=30, what="two completed scheduled backups kept")
    db = full_cluster.get_db(ns, "events")
    assert condition(db, "BackupHealthy")["reason"] == "LastBackupSucceeded"  # type: ignore[index]

    # Suspended: no more backups, and the condition says so.
    full_cluster.patch_db(ns, "events", {"spec": {"backup": {"suspend": True}}})

    def suspended() -> dict[str, Any] | None:
        found = full_cluster.get_db(ns, "events")
        return (
            found
            if (condition(found, "BackupHealthy") or {}).get("reason") == "BackupsSuspended"
            else None
        )

    wait_for(suspended, what="BackupHealthy to say the schedule is suspended")
    before = {b["metadata"]["name"] for b in scheduled(full_cluster, ns, "events")}
    time.sleep(9)  # more than two periods of the schedule: none may come
    after = {b["metadata"]["name"] for b in scheduled(full_cluster, ns, "events")}
    assert after <= before


# --- what outlives what -------------------------------------------------------------------------


def test_a_backup_outlives_its_database_and_deleting_it_deletes_its_data_first(
    full_cluster: Cluster, e2e_namespace: str, e2e_operator: OperatorProcess, credentials: None
) -> None:
    ns = e2e_namespace
    full_cluster.create_db(ns, "shortlived", database({"destination": destination()}))
    wait_phase(full_cluster, ns, "shortlived", "Active")
    full_cluster.create_backup(ns, "kept-backup", {"database": "shortlived"})
    wait_backup(full_cluster, ns, "kept-backup", "Completed")
    full_cluster.delete_db(ns, "shortlived")
    wait_for(lambda: full_cluster.db_gone(ns, "shortlived"), what="the Database to go")
    backup = full_cluster.get_backup(ns, "kept-backup")
    assert backup["status"]["phase"] == "Completed"
    assert "deletionTimestamp" not in backup["metadata"]
    assert full_cluster.kubectl("get", "jobs", "-n", ns, "-o", "name").strip() == (
        "job.batch/kept-backup"
    )

    full_cluster.delete_backup(ns, "kept-backup")
    wait_for(lambda: full_cluster.backup_gone(ns, "kept-backup"), what="the backup to go")
    deleted = [
        message
        for _, reason, message in events(full_cluster, ns, "DatabaseBackup", "kept-backup")
        if reason == "BackupDataDeleted"
    ]
    location = f"team-a/{ns}/shortlived/kept-backup.pgdump"
    assert deleted == [f"deleted the stored backup at s3://backups/team-a: {location}"]


# --- restore ---------------------------------------------------------------------------------


def completed_backup(
    cluster: Cluster, namespace: str, source: str, engine: str = "postgres"
) -> str:
    cluster.create_db(namespace, source, database({"destination": destination()}, engine=engine))
    wait_phase(cluster, namespace, source, "Active")
    name = f"{source}-backup"
    cluster.create_backup(namespace, name, {"database": source})
    wait_backup(cluster, namespace, name, "Completed")
    return name


def test_a_database_restored_from_a_backup_gets_its_data_before_its_engine_starts(
    full_cluster: Cluster, e2e_namespace: str, e2e_operator: OperatorProcess, credentials: None
) -> None:
    ns = e2e_namespace
    backup = completed_backup(full_cluster, ns, "source")
    full_cluster.create_db(ns, "copy", database(restore={"backup": backup}))
    db = wait_phase(full_cluster, ns, "copy", "Active")

    job = full_cluster.batch.read_namespaced_job("copy-restore", ns)
    deployment = full_cluster.apps.read_namespaced_deployment("copy", ns)
    # The engine's Deployment was made only once the restore Job had completed.
    assert job.status.completion_time is not None
    assert deployment.metadata.creation_timestamp >= job.status.completion_time
    ready = condition(db, "Ready")
    assert ready is not None
    assert datetime.fromisoformat(ready["lastTransitionTime"]) >= job.status.completion_time
    assert job.metadata.owner_references[0].kind == "Database"
    volumes = {v.name: v for v in job.spec.template.spec.volumes}
    assert volumes["data"].persistent_volume_claim.claim_name == "copy-data"
    fetch = job.spec.template.spec.init_containers[0]
    assert f"--sha256={EMPTY_SHA256}" in fetch.command
    assert db["status"]["restoredFrom"]["backup"] == backup
    assert db["status"]["restoredFrom"]["location"] == f"team-a/{ns}/source/{backup}.pgdump"


def test_a_database_restores_from_a_stored_location_without_its_backup_object(
    full_cluster: Cluster, e2e_namespace: str, e2e_operator: OperatorProcess, credentials: None
) -> None:
    ns = e2e_namespace
    location = "team-a/elsewhere/orders/orders-20261201-020000.pgdump"
    restore = {"location": location, "destination": destination()}
    full_cluster.create_db(ns, "migrated", database(restore=restore))
    db = wait_phase(full_cluster, ns, "migrated", "Active")
    assert db["status"]["restoredFrom"] == {
        "location": location,
        "time": db["status"]["restoredFrom"]["time"],
    }
    fetch = full_cluster.batch.read_namespaced_job(
        "migrated-restore", ns
    ).spec.template.spec.init_containers[0]
    env = {e.name: e.value for e in fetch.env if e.value is not None}
    assert env["BACKUP_KEY"] == location
    assert not any(arg.startswith("--sha256") for arg in fetch.command)
    # Stored under another namespace's prefix (team-a/elsewhere/): fetched only if its metadata
    # says this namespace took it.
    assert f"--namespace={ns}" in fetch.command


@pytest.mark.parametrize(
    ("source", "reason", "words"),
    [
        ("missing", "RestoreSourceNotFound", "DatabaseBackup 'nothing' does not exist"),
        ("failed", "RestoreSourceNotCompleted", "DatabaseBackup 'broken-backup' failed"),
        ("redis", "RestoreSourceIncompatible", "it is a backup of 'redis', not of 'postgres'"),
        ("unreachable", "RestoreFailed", "AccessDenied (simulated by kwok)"),
    ],
)
@pytest.mark.usefixtures("e2e_operator", "credentials")
def test_a_restore_that_cannot_be_done_is_reported_and_no_database_runs(
    full_cluster: Cluster, e2e_namespace: str, source: str, reason: str, words: str
) -> None:
    ns = e2e_namespace
    restore: dict[str, Any]
    if source == "missing":
        restore = {"backup": "nothing"}
    elif source == "failed":
        full_cluster.create_db(ns, "broken", database({"destination": destination("unreachable")}))
        wait_phase(full_cluster, ns, "broken", "Active")
        full_cluster.create_backup(ns, "broken-backup", {"database": "broken"})
        wait_backup(full_cluster, ns, "broken-backup", "Failed")
        restore = {"backup": "broken-backup"}
    elif source == "redis":
        restore = {"backup": completed_backup(full_cluster, ns, "cache", engine="redis")}
    else:
        restore = {"location": "team-a/x/y/z.pgdump", "destination": destination("unreachable")}
    full_cluster.create_db(ns, "target", database(restore=restore))
    db = wait_phase(full_cluster, ns, "target", "Failed")
    ready = condition(db, "Ready")
    assert ready is not None
    assert ready["reason"] == reason
    assert words in ready["message"]
    # Never an empty database that looks restored: no Deployment was made.
    assert gone(full_cluster.apps.read_namespaced_deployment, "target", ns)
    assert "restoredFrom" not in db["status"]
    assert reason in reasons(full_cluster, ns, "Database", "target")
    if source != "unreachable":
        assert gone(full_cluster.batch.read_namespaced_job, "target-restore", ns)
