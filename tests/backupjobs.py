"""Playing the Job controller and the kubelet for a backup's Jobs, where neither runs (the
integration tests' control plane is etcd and kube-apiserver only).

A Job the operator made is run as its pod would run it: the agent's container runs here, as
`python -m database_operator.cli agent`, with the command line and environment of the Job's own
manifest (secretKeyRefs resolved from the values the test holds: the object store's keys), so it
stores into and deletes from the real object store (tests/objectstore.py). The dump container
is not run (no engine here): a stand-in dump is put where it would have written one. Then the
Job's pod and status are written as the kubelet and the Job controller would: its containers'
ends (the agent's result as its termination message) and the Job's terminal conditions, which
kube-apiserver checks (since 1.31 `Complete` needs `SuccessCriteriaMet`, `Failed` needs
`FailureTarget`).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from database_operator.api.backup import ACCESS_KEY_ID, SECRET_ACCESS_KEY
from database_operator.backups import agent
from database_operator.backups.jobs import AGENT_COMMAND
from database_operator.backups.recipes import BACKUP_DIR
from tests.cluster import Cluster

if TYPE_CHECKING:
    from tests.objectstore import ObjectStore

#: The label the Job controller puts on a Job's pods (the operator finds them by it).
JOB_NAME_LABEL = "batch.kubernetes.io/job-name"
#: The Secret holding the object store's keys (a destination's credentialsSecretRef).
STORE_SECRET = "backup-store"


def stamp(when: datetime | None = None) -> str:
    return (when or datetime.now(UTC)).strftime("%Y-%m-%dT%H:%M:%SZ")


def store_destination(cluster: Cluster, namespace: str, store: ObjectStore) -> dict[str, Any]:
    """A bucket of its own for ``namespace`` in ``store``, its keys in a Secret there, and the
    destination (spec.backup.destination) that names both."""
    store.create_bucket(namespace)
    cluster.create_secret(
        namespace,
        STORE_SECRET,
        {ACCESS_KEY_ID: store.access_key, SECRET_ACCESS_KEY: store.secret_key},
    )
    return {
        "s3": {
            "endpoint": store.endpoint,
            "insecure": True,  # SeaweedFS on loopback, without TLS
            "bucket": namespace,
            "credentialsSecretRef": {"name": STORE_SECRET},
        }
    }


def template(cluster: Cluster, namespace: str, job: str) -> dict[str, Any]:
    """The pod template of the Job ``job``, as plain JSON."""
    found = cluster.batch.read_namespaced_job(job, namespace)
    return cluster.api.sanitize_for_serialization(found.spec.template)  # type: ignore[no-any-return]


def agent_container(pod_template: dict[str, Any]) -> dict[str, Any]:
    """The container that runs the agent (a backup's upload, a deletion's delete)."""
    spec = pod_template["spec"]
    return next(c for c in spec["containers"] if c["command"][:2] == AGENT_COMMAND)


def key_of(cluster: Cluster, namespace: str, job: str) -> str:
    """Where the agent of ``job`` stores or deletes (its BACKUP_KEY)."""
    env = agent_container(template(cluster, namespace, job))["env"]
    return str(next(e["value"] for e in env if e["name"] == agent.KEY))


def run_agent(
    cluster: Cluster, namespace: str, job: str, store: ObjectStore, scratch: Path
) -> tuple[str, int, str]:
    """Run the agent container of ``job`` here, as its pod would: its name, exit status and
    result (the termination message). Paths under the backup's scratch volume are mapped into
    ``scratch``; an upload gets a stand-in dump and the server's version beside it."""
    spec = agent_container(template(cluster, namespace, job))
    scratch.mkdir(parents=True, exist_ok=True)
    args = [arg.replace(f"={BACKUP_DIR}/", f"={scratch}/") for arg in spec["command"][2:]]
    flags = dict(arg.removeprefix("--").split("=", 1) for arg in args if arg.startswith("--"))
    if "file" in flags:
        Path(flags["file"]).write_bytes(b"what the dump container wrote\n" * 64)
        Path(flags["version-file"]).write_text("16.4\n")
    secrets = {ACCESS_KEY_ID: store.access_key, SECRET_ACCESS_KEY: store.secret_key}
    env = {"PATH": os.environ["PATH"], "HOME": str(scratch)}
    for variable in spec["env"]:
        if "value" in variable:
            env[variable["name"]] = variable["value"]
        else:
            env[variable["name"]] = secrets[variable["valueFrom"]["secretKeyRef"]["key"]]
    result = scratch / f"{spec['name']}-result.json"
    ran = subprocess.run(
        [sys.executable, "-m", "database_operator.cli", "agent", f"--result-file={result}", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    if not result.is_file():
        print(f"the agent of {job} reported nothing: {ran.stderr}")
    return spec["name"], ran.returncode, result.read_text() if result.is_file() else ran.stderr


def pod_ended(
    cluster: Cluster, namespace: str, job: str, name: str, *, exit_code: int, message: str
) -> None:
    """The Job's pod ran: its containers ended, ``name``'s with ``exit_code`` and ``message``
    as its termination message (the others with 0)."""
    pod_template = template(cluster, namespace, job)
    now = stamp()
    pod = {
        "metadata": {
            "name": f"{job}-played",
            "labels": {**(pod_template["metadata"].get("labels") or {}), JOB_NAME_LABEL: job},
        },
        "spec": pod_template["spec"],
    }
    cluster.core.create_namespaced_pod(namespace, pod)

    def ended(spec: dict[str, Any]) -> dict[str, Any]:
        mine = spec["name"] == name
        terminated = {
            "exitCode": exit_code if mine else 0,
            "reason": "Completed" if not mine or exit_code == 0 else "Error",
            "startedAt": now,
            "finishedAt": now,
        } | ({"message": message} if mine else {})
        return {
            "name": spec["name"],
            "image": spec["image"],
            "imageID": "",
            "ready": False,
            "restartCount": 0,
            "state": {"terminated": terminated},
        }

    spec = pod_template["spec"]
    cluster.core.patch_namespaced_pod_status(
        pod["metadata"]["name"],
        namespace,
        {
            "status": {
                "phase": "Succeeded" if exit_code == 0 else "Failed",
                "initContainerStatuses": [ended(c) for c in spec.get("initContainers", [])],
                "containerStatuses": [ended(c) for c in spec["containers"]],
            }
        },
    )


def job_finished(cluster: Cluster, namespace: str, job: str, *, failed: bool = False) -> None:
    """The Job controller's last word on ``job``: Complete (one pod succeeded) or Failed."""
    now = stamp()
    when = {"lastProbeTime": now, "lastTransitionTime": now}
    if failed:
        status: dict[str, Any] = {
            "startTime": now,
            "failed": 1,
            "active": 0,
            "conditions": [
                {"type": "FailureTarget", "status": "True", "reason": "BackoffLimitExceeded"}
                | when,
                {"type": "Failed", "status": "True", "reason": "BackoffLimitExceeded"} | when,
            ],
        }
    else:
        status = {
            "startTime": now,
            "completionTime": now,
            "succeeded": 1,
            "active": 0,
            "conditions": [
                {"type": "SuccessCriteriaMet", "status": "True"} | when,
                {"type": "Complete", "status": "True"} | when,
            ],
        }
    cluster.batch.patch_namespaced_job_status(job, namespace, {"status": status})


def run_job(
    cluster: Cluster,
    namespace: str,
    job: str,
    store: ObjectStore,
    scratch: Path,
    *,
    pod_kept: bool = True,
) -> dict[str, Any]:
    """Run a backup's (upload) or a backup deletion's (delete) Job to its end: its agent, its
    pod (unless ``pod_kept`` is False: gone before anyone read it, as a pod garbage-collected
    early), its status. What the agent reported."""
    name, code, result = run_agent(cluster, namespace, job, store, scratch / job)
    if pod_kept:
        pod_ended(cluster, namespace, job, name, exit_code=code, message=result)
    job_finished(cluster, namespace, job, failed=code != 0)
    return json.loads(result) if result.startswith("{") else {"error": result}
