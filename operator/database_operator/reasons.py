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
    RECONCILE_ERROR = "ReconcileError"


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
        "replicas: `replication-password`)",
        "add the keys",
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
        "fix the spec (or the policy); the message has the API server's words",
    ),
    Reason.SERVICE_REJECTED: Explanation(
        "Ready False, phase Failed",
        "the API server refused a Service, e.g. a `NodePort` clash or a quota",
        "fix the spec (or the quota); the message has the API server's words",
    ),
    Reason.SECRET_REJECTED: Explanation(
        "Ready False, phase Failed",
        "the API server refused the connection Secret (e.g. an admission policy)",
        "the message has the API server's words",
    ),
    Reason.PERSISTENT_VOLUME_CLAIM_REJECTED: Explanation(
        "Ready False, phase Failed",
        "the API server refused the PVC, e.g. growth on a StorageClass without "
        "`allowVolumeExpansion`",
        "use an expandable StorageClass, or revert `storage.size`",
    ),
    Reason.RECONCILE_ERROR: Explanation(
        "Degraded True",
        "reconciling keeps failing on API errors (RBAC — a 403 whose message says the operator "
        '"cannot" do something —, the API server down); retried with a delay doubling from '
        "0.5 s to `--retry-max-delay` (60 s), for as long as it fails",
        "the message has the failing call; check the operator's RBAC and log (`reconcile "
        "failed` lines carry `error`, `failures` and `retry_in_s`)",
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
