"""What the backup code reads from the API: whether a destination's Secrets and claim exist, and
what a Job (and, once it finished, its pods) says."""

from __future__ import annotations

from database_operator.api.backup import (
    ACCESS_KEY_ID,
    CA_BUNDLE_KEY,
    SECRET_ACCESS_KEY,
    BackupDestination,
)
from database_operator.backups import state
from database_operator.kube import KubeApi
from database_operator.manifest import Manifest


async def destination_problem(
    kube: KubeApi, namespace: str, destination: BackupDestination
) -> str | None:
    """Why a Job could not use ``destination`` (a Secret, a key or a claim it needs is
    missing), or None. Names only, never a value."""
    if destination.pvc is not None:
        name = destination.pvc.claim_name
        if await kube.get("PersistentVolumeClaim", namespace, name) is None:
            return f"PersistentVolumeClaim {name!r} does not exist in namespace {namespace!r}"
        return None
    s3 = destination.s3
    assert s3 is not None
    wanted: list[tuple[str, tuple[str, ...]]] = [
        (s3.credentials_secret_ref.name, (ACCESS_KEY_ID, SECRET_ACCESS_KEY))
    ]
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


async def job_result(kube: KubeApi, namespace: str, job: Manifest) -> state.JobOutcome:
    """What a Job says; its pods are read only once it has finished."""
    outcome = state.job_outcome(job)
    if not outcome.finished:
        return outcome
    return state.job_outcome(job, await _pods_of(kube, namespace, job["metadata"]["name"]))
