"""Every reason a Database's conditions (and its Warning Events) give: one enum.

status.py and reconcile.py name reasons only through it, tests read them back through it, and
the troubleshooting table in docs/operations.md is generated from `EXPLAINED` (`make
manifests`), so a new reason cannot go undocumented.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class Reason(StrEnum):
    """CamelCase, as Kubernetes condition reasons are."""

    CREATING = "Creating"
    ROLLING_OUT = "RollingOut"
    ROLLOUT_COMPLETE = "RolloutComplete"
    REPLICAS_READY = "ReplicasReady"
    PRIMARY_READY = "PrimaryReady"
    SCALED_TO_ZERO = "ScaledToZero"
    REPLICAS_UNAVAILABLE = "ReplicasUnavailable"
    PRIMARY_UNAVAILABLE = "PrimaryUnavailable"
    AS_EXPECTED = "AsExpected"
    PAUSED = "Paused"
    DELETING = "Deleting"
    CREDENTIALS_SECRET_NOT_FOUND = "CredentialsSecretNotFound"
    CREDENTIALS_SECRET_INVALID = "CredentialsSecretInvalid"
    CREDENTIALS_SECRET_LOST = "CredentialsSecretLost"
    CHILD_NAME_CONFLICT = "ChildNameConflict"
    DEPLOYMENT_REJECTED = "DeploymentRejected"
    SERVICE_REJECTED = "ServiceRejected"
    SECRET_REJECTED = "SecretRejected"
    PERSISTENT_VOLUME_CLAIM_REJECTED = "PersistentVolumeClaimRejected"
    CHILD_NOT_CONVERGED = "ChildNotConverged"
    RECONCILE_ERROR = "ReconcileError"
    # Restoring a new Database from a backup (spec.restore).
    RESTORING = "Restoring"
    RESTORE_FAILED = "RestoreFailed"
    RESTORE_SOURCE_NOT_FOUND = "RestoreSourceNotFound"
    RESTORE_SOURCE_NOT_COMPLETED = "RestoreSourceNotCompleted"
    RESTORE_SOURCE_INCOMPATIBLE = "RestoreSourceIncompatible"
    # A Database's BackupHealthy condition (spec.backup).
    LAST_BACKUP_SUCCEEDED = "LastBackupSucceeded"
    LAST_BACKUP_FAILED = "LastBackupFailed"
    NO_RECENT_BACKUP = "NoRecentBackup"
    NO_BACKUP_YET = "NoBackupYet"
    BACKUPS_SUSPENDED = "BackupsSuspended"
    # A DatabaseBackup's Completed and Failed conditions.
    WAITING_FOR_DATABASE = "WaitingForDatabase"
    BACKUP_RUNNING = "BackupRunning"
    BACKUP_COMPLETED = "BackupCompleted"
    DATABASE_NOT_FOUND = "DatabaseNotFound"
    DATABASE_SCALED_TO_ZERO = "DatabaseScaledToZero"
    NO_DESTINATION = "NoDestination"
    DESTINATION_NOT_FOUND = "DestinationNotFound"
    BACKUP_JOB_FAILED = "BackupJobFailed"
    BACKUP_JOB_LOST = "BackupJobLost"
    # A Job of a backup, a restore or a deletion whose pod did not start by the start deadline.
    START_DEADLINE_EXCEEDED = "StartDeadlineExceeded"


#: Failures of a write the API server refused, or keeps undoing: writing again changes nothing
#: until the spec or the child changes, so no resync tries it (a watch event does).
REFUSED_WRITES = frozenset(
    {
        Reason.DEPLOYMENT_REJECTED,
        Reason.SERVICE_REJECTED,
        Reason.SECRET_REJECTED,
        Reason.PERSISTENT_VOLUME_CLAIM_REJECTED,
        Reason.CHILD_NOT_CONVERGED,
    }
)


@dataclass(frozen=True)
class Problem:
    """Why a Database is not as asked: a reason, and a message for people."""

    reason: Reason
    message: str = ""


def rejected(kind: str) -> Reason:
    """The reason for a child of ``kind`` that the API server refused."""
    return Reason(f"{kind}Rejected")


@dataclass(frozen=True)
class Explanation:
    """Where a reason appears, what it means, and what to do (docs/operations.md)."""

    where: str
    meaning: str
    remedy: str


EXPLAINED: dict[Reason, Explanation] = {
    Reason.CREATING: Explanation(
        "Ready False, Progressing True",
        "the primary's Deployment does not exist yet",
        "wait; if it stays, read the operator's log",
    ),
    Reason.ROLLING_OUT: Explanation(
        "Ready False, Progressing True",
        "a rollout of a new spec (or the first pods) is in progress",
        "wait; `kubectl rollout status deploy/NAME`",
    ),
    Reason.ROLLOUT_COMPLETE: Explanation(
        "Progressing False", "the Deployments run the current spec", "—"
    ),
    Reason.REPLICAS_READY: Explanation(
        "Ready True", 'every wanted pod is ready ("3/3 replicas ready")', "—"
    ),
    Reason.PRIMARY_READY: Explanation(
        "Ready True",
        "the primary serves; some read replicas are not ready (lost, or still cloning after a "
        "scale-up)",
        "see Degraded; wait for a scale-up",
    ),
    Reason.SCALED_TO_ZERO: Explanation("Ready True", "`replicas: 0`", "—"),
    Reason.REPLICAS_UNAVAILABLE: Explanation(
        "Ready False; Degraded True",
        "Ready: the primary is not ready (or, before the Database was first Active, not every "
        'pod is); Degraded: an Active database lost read replicas ("1/2 read replicas ready")',
        "`kubectl get pods -l app.kubernetes.io/instance=NAME` (add "
        "`,databases.example.com/role=replica` for the replicas); check events, image pulls, "
        "probes; the phase goes back to Active by itself",
    ),
    Reason.PRIMARY_UNAVAILABLE: Explanation(
        "Degraded True",
        "an Active database lost its primary: writes fail, replicas serve reads",
        "see [Replicas and failover](#replicas-and-failover)",
    ),
    Reason.AS_EXPECTED: Explanation("Degraded False", "nothing is lost", "—"),
    Reason.PAUSED: Explanation(
        "Ready False (no Deployment yet), Progressing False",
        "`spec.paused: true`: children are not changed",
        "set `paused: false`",
    ),
    Reason.DELETING: Explanation(
        "all three, phase Deleting",
        "the Database is being deleted; the finalizer applies `deletionPolicy`",
        "wait; if it stays, the operator is not running (it retries the finalizer's removal "
        "until it succeeds)",
    ),
    Reason.CREDENTIALS_SECRET_NOT_FOUND: Explanation(
        "Ready False, phase Failed",
        "the Secret in `credentialsSecretRef` does not exist",
        "create it with the engine's keys; no restart needed",
    ),
    Reason.CREDENTIALS_SECRET_INVALID: Explanation(
        "Ready False, phase Failed",
        "the Secret lacks `username`/`password` (redis: `password`; postgres with read "
        "replicas: `replication-password`), or its `username` is one the operator keeps for "
        "the engine (postgres: `replicator`, `database_monitor`)",
        "add the keys, or give the application another username",
    ),
    Reason.CREDENTIALS_SECRET_LOST: Explanation(
        "Ready False, phase Failed",
        "the generated Secret was deleted while the PVC holds data initialised with its "
        "password: the operator will not make a new password the engine cannot use",
        "restore the Secret from a backup; or delete the PVC to start with empty data",
    ),
    Reason.CHILD_NAME_CONFLICT: Explanation(
        "Ready False, phase Failed",
        "an object with a child's name exists that the operator did not create (a user's "
        "Secret `<name>-credentials`, a PVC `<name>-data`, a Service or Deployment `<name>` of "
        "something else); the message names each",
        "rename the Database, or rename or delete the object; to hand over a PVC or Secret of "
        "yours, annotate it `databases.example.com/created-for=<name>` (for a Secret, use "
        "`spec.credentialsSecretRef`). The Database proceeds by itself once the clash is gone",
    ),
    Reason.DEPLOYMENT_REJECTED: Explanation(
        "Ready False, phase Failed",
        "the API server refused the Deployment, e.g. a bad `image`, resource limits below "
        "requests, or an admission webhook, policy or ResourceQuota (a 403 that is not RBAC's)",
        "fix the spec (or the policy); the message has the API server's words. It is tried "
        "again when the spec changes; after fixing a policy, touch it: `kubectl annotate db "
        "NAME databases.example.com/retry=$(date +%s) --overwrite`",
    ),
    Reason.SERVICE_REJECTED: Explanation(
        "Ready False, phase Failed",
        "the API server refused a Service, e.g. a `NodePort` clash or a quota",
        "fix the spec (or the quota); the message has the API server's words. It is tried "
        "again when the spec changes; after fixing a quota, touch it (see DeploymentRejected)",
    ),
    Reason.SECRET_REJECTED: Explanation(
        "Ready False, phase Failed",
        "the API server refused the connection Secret (e.g. an admission policy)",
        "the message has the API server's words; after fixing the policy, touch the Database "
        "(see DeploymentRejected)",
    ),
    Reason.PERSISTENT_VOLUME_CLAIM_REJECTED: Explanation(
        "Ready False, phase Failed",
        "the API server refused the PVC, e.g. growth on a StorageClass without "
        "`allowVolumeExpansion`",
        "use an expandable StorageClass, or revert `storage.size`",
    ),
    Reason.CHILD_NOT_CONVERGED: Explanation(
        "Ready False, phase Failed",
        "a child still differs from the spec right after the operator wrote it: the API server "
        "(or an admission webhook) keeps another value in the field the message names, so "
        "writing it again would never end",
        "set the field in the spec to the value the message says the cluster keeps (or stop "
        "the webhook changing it); the Database is tried again when its spec or the child "
        "changes",
    ),
    Reason.RECONCILE_ERROR: Explanation(
        "Degraded True",
        "reconciling keeps failing on API errors (RBAC — a 403 whose message says the operator "
        '"cannot" do something —, the API server down); retried with a delay doubling from '
        "0.5 s to `--retry-max-delay` (60 s), for as long as it fails",
        "the message has the failing call; check the operator's RBAC and log (`reconcile "
        "failed` lines carry `error`, `failures` and `retry_in_s`)",
    ),
    Reason.RESTORING: Explanation(
        "Ready False, Progressing True, phase Pending",
        "`spec.restore`: the Job `<name>-restore` is putting the backup onto the volume; no "
        "Deployment exists until it succeeds. While its pod cannot start a container, the "
        "message says why and when the Job is stopped",
        "wait; `kubectl logs job/NAME-restore --all-containers`",
    ),
    Reason.RESTORE_FAILED: Explanation(
        "Ready False, phase Failed",
        "the restore Job failed: the backup could not be fetched, was corrupt or truncated (its "
        "checksum did not match: it is not restored), or the engine could not load it; the "
        "message has the Job's words",
        "[Restoring a backup](#restoring-a-backup): fix the cause, then delete the claim "
        "`<name>-data` and the Job `<name>-restore` to try again on a new volume",
    ),
    Reason.RESTORE_SOURCE_NOT_FOUND: Explanation(
        "Ready False, phase Failed",
        "`spec.restore.backup` names a DatabaseBackup that does not exist, or the destination "
        "of `restore.location` (its Secret or claim) does not exist",
        "create it, or delete the Database and create it with the right source",
    ),
    Reason.RESTORE_SOURCE_NOT_COMPLETED: Explanation(
        "Ready False, phase Failed (Pending while the backup still runs)",
        "the DatabaseBackup named by `spec.restore.backup` failed: there is nothing to restore",
        "restore from another backup (`kubectl get dbbackup`)",
    ),
    Reason.RESTORE_SOURCE_INCOMPATIBLE: Explanation(
        "Ready False, phase Failed",
        "the backup is of another engine, or of a newer major version than `spec.version` "
        "(an engine cannot read what a newer major wrote)",
        "create the Database with the backup's engine and its major version or a later one",
    ),
    Reason.LAST_BACKUP_SUCCEEDED: Explanation(
        "BackupHealthy True", "the newest backup completed (and, with a schedule, recently)", "—"
    ),
    Reason.LAST_BACKUP_FAILED: Explanation(
        "BackupHealthy False",
        "the newest backup (with a schedule: the newest scheduled one) failed; the message "
        "names it and says why",
        "`kubectl describe dbbackup NAME`, `kubectl logs job/NAME --all-containers`; see "
        "[Backups](#backups)",
    ),
    Reason.NO_RECENT_BACKUP: Explanation(
        "BackupHealthy False",
        "no backup has completed within two periods of `spec.backup.schedule`",
        "see the DatabaseBackups (`kubectl get dbbackup -l databases.example.com/database=NAME`) "
        "and the operator's log",
    ),
    Reason.NO_BACKUP_YET: Explanation(
        "BackupHealthy Unknown", "no backup of this Database has finished yet", "—"
    ),
    Reason.BACKUPS_SUSPENDED: Explanation(
        "BackupHealthy False",
        "`spec.backup.suspend: true`: the schedule takes no backups",
        "set `suspend: false`",
    ),
    Reason.WAITING_FOR_DATABASE: Explanation(
        "DatabaseBackup Completed False, phase Pending",
        "the Database's primary is not ready (or it is being restored): the backup starts "
        "when it is",
        "see the Database's conditions",
    ),
    Reason.BACKUP_RUNNING: Explanation(
        "DatabaseBackup Completed False, phase Running",
        "its Job is taking the backup; while its pod cannot start a container, the message "
        "says why (the kubelet's words) and when the Job is stopped",
        "`kubectl logs job/NAME --all-containers`; see `StartDeadlineExceeded`",
    ),
    Reason.BACKUP_COMPLETED: Explanation(
        "DatabaseBackup Completed True",
        "the backup is stored with its checksum (status.location, .size, .checksum)",
        "—",
    ),
    Reason.DATABASE_NOT_FOUND: Explanation(
        "DatabaseBackup Failed True",
        "`spec.database` names no Database in the namespace (or one being deleted)",
        "create a DatabaseBackup of an existing Database",
    ),
    Reason.DATABASE_SCALED_TO_ZERO: Explanation(
        "DatabaseBackup Failed True",
        "the Database hibernates (`replicas: 0`): no server runs to take a backup from",
        "scale it up, then create a new DatabaseBackup",
    ),
    Reason.NO_DESTINATION: Explanation(
        "DatabaseBackup Failed True",
        "neither the DatabaseBackup's `spec.destination` nor the Database's "
        "`spec.backup.destination` says where to store it",
        "set one and create a new DatabaseBackup",
    ),
    Reason.DESTINATION_NOT_FOUND: Explanation(
        "DatabaseBackup Failed True; Database phase Failed (a restore)",
        "the destination's credentials Secret (or its keys), CA Secret or claim does not "
        "exist: a Job could never start",
        "create it (the message names it) and create a new DatabaseBackup",
    ),
    Reason.BACKUP_JOB_FAILED: Explanation(
        "DatabaseBackup Failed True",
        "the backup Job failed; the message has its containers' last words (e.g. the dump "
        "could not connect, the bucket refused the upload)",
        "`kubectl logs job/NAME --all-containers`; fix the cause, create a new DatabaseBackup",
    ),
    Reason.BACKUP_JOB_LOST: Explanation(
        "DatabaseBackup Failed True",
        "the backup's Job was deleted before it finished, or succeeded without reporting "
        "what it stored",
        "create a new DatabaseBackup",
    ),
    Reason.START_DEADLINE_EXCEEDED: Explanation(
        "DatabaseBackup Failed True; Database phase Failed (a restore)",
        "the Job's pod did not start a container within `--job-start-deadline` (300 s): the "
        "message has what the scheduler or the kubelet said — `Unschedulable` (no node fits), "
        "`ErrImagePull`/`ImagePullBackOff` (the operator's or the engine's image cannot be "
        "pulled: a private registry without `--agent-image-pull-secrets` in this namespace), "
        "`CreateContainerConfigError` (a Secret it reads is gone; the message names it). The "
        "operator stopped the Job (`spec.suspend`, annotated `databases.example.com/stopped`); "
        "nothing was stored or restored",
        "fix the cause (see [Jobs that cannot start](#jobs-that-cannot-start)), then create a "
        "new DatabaseBackup; for a restore, delete the Job `<name>-restore` to try again",
    ),
}


def reasons_markdown() -> str:
    """The troubleshooting table of docs/operations.md."""
    rows = ["| reason | where | meaning | what to do |", "| --- | --- | --- | --- |"]
    rows += [
        f"| `{reason}` | {why.where} | {why.meaning} | {why.remedy} |"
        for reason, why in EXPLAINED.items()
    ]
    return "\n".join(rows) + "\n"
