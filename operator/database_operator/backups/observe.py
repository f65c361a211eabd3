"""What the backup code reads from the API: whether a destination's Secrets and claim exist, and
what a Job and its pods say — and the one write that goes with it: stopping a Job whose pod did
not start by the start deadline."""

from __future__ import annotations

from datetime import datetime, timedelta

from database_operator.api.backup import (
    ACCESS_KEY_ID,
    CA_BUNDLE_KEY,
    SECRET_ACCESS_KEY,
    BackupDestination,
)
from database_operator.backups import state
from database_operator.kube.api import KubeApi
from database_operator.manifest import Manifest


async def destination_problem(
    kube: KubeApi, namespace: str, destination: BackupDestination
) -> str | None:
    """Why a Job could not use ``destination`` (a Secret, a key or a claim it needs is
    missing), or None. Names only, never a value."""
    wanted: list[tuple[str, tuple[str, ...]]] = []
    if destination.encryption is not None:
        ref = destination.encryption.key_secret_ref
        wanted.append((ref.name, (ref.key,)))
    if destination.pvc is not None:
        name = destination.pvc.claim_name
        # A user's claim: the cache holds only the claims the operator made (its watch selects
        # them by label), so a read from it would say any other claim does not exist.
        if await kube.get_live("PersistentVolumeClaim", namespace, name) is None:
            return f"PersistentVolumeClaim {name!r} does not exist in namespace {namespace!r}"
    else:
        s3 = destination.s3
        assert s3 is not None
        wanted.append((s3.credentials_secret_ref.name, (ACCESS_KEY_ID, SECRET_ACCESS_KEY)))
        if s3.ca_bundle_secret_ref is not None:
            wanted.append((s3.ca_bundle_secret_ref.name, (CA_BUNDLE_KEY,)))
    for name, keys in wanted:
        secret = await kube.get_live("Secret", namespace, name)  # a user's: never cached
        if secret is None:
            return f"Secret {name!r} does not exist in namespace {namespace!r}"
        missing = [key for key in keys if not (secret.get("data") or {}).get(key)]
        if missing:
            return f"Secret {name!r} lacks the key(s) {', '.join(missing)}"
    return None


async def _pods_of(kube: KubeApi, namespace: str, job_name: str) -> list[Manifest]:
    selector = f"batch.kubernetes.io/job-name={job_name}"
    return [pod async for page in kube.list_pages("Pod", namespace, selector) for pod in page]


async def follow_job(
    kube: KubeApi, namespace: str, job: Manifest, now: datetime, start_deadline_s: float
) -> state.JobOutcome:
    """What a Job and its pods say (state.job_outcome). A Job whose pod has not started a
    container within ``start_deadline_s`` is stopped here: suspended, so that none of its pods
    tries again, and annotated with why, so that every later look reads the same failure
    without its pods."""
    outcome = state.job_outcome(job)
    if outcome.reason == state.NOT_STARTED:
        return outcome  # stopped before
    name = job["metadata"]["name"]
    pods = await _pods_of(kube, namespace, name)
    outcome = state.job_outcome(job, pods, now, timedelta(seconds=start_deadline_s))
    if outcome.stop:
        await kube.merge_patch("Job", namespace, name, state.stopped_job_patch(outcome))
    return outcome
