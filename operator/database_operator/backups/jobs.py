"""Pure builders of the Jobs that move data: a backup, a restore, the deletion of a backup.

Each Job's pod runs the engine's own tools in the engine's image (recipes.py) and the agent in
the operator's image (agent.py), with the Database pods' restricted security: non-root (the
engine image's UID), no privilege escalation, no capabilities, RuntimeDefault seccomp, no API
token. Credentials reach them only as secretKeyRefs; the images are pulled with the operator's
own pull secrets (JobOptions). A Job retries a failed pod twice, except when a container exits
with the agent's "a retry cannot help" status, which fails it at once. Every Job ends: it runs
at most the run deadline (activeDeadlineSeconds, enforced by Kubernetes), and one whose pod
cannot start a container (an image it cannot pull, a Secret gone, no node) is stopped by the
operator after the start deadline (state.job_outcome, observe.follow_job).

- backup: ``dump`` (engine image, against the Database's read-write Service) writes the dump
  into a scratch volume; ``upload`` (agent) stores it. Owned by its DatabaseBackup.
- restore: ``fetch`` (agent) downloads and verifies the backup; ``restore`` (engine image) puts
  it on the Database's volume before any Deployment exists. Owned by the Database.
- delete: the agent deletes a backup's stored data. Owned by its DatabaseBackup, which waits
  for it (a finalizer) before it goes.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from database_operator.api.backup import (
    ACCESS_KEY_ID,
    CA_BUNDLE_KEY,
    DATABASE_LABEL,
    SECRET_ACCESS_KEY,
    BackupDestination,
    DatabaseBackup,
)
from database_operator.api.common import GROUP, VERSION
from database_operator.api.models import SHARD_LABEL, Database
from database_operator.backups import agent, recipes
from database_operator.config import Settings
from database_operator.desired.common import (
    MANAGED_BY,
    PRIMARY,
    container_security_context,
    controlled_owner_references,
    engine_facts,
    host,
    object_labels,
    pvc_name,
    resolved_port,
    resolved_version,
)
from database_operator.desired.workload import (
    env,
    image,
    placement,
    pod_security_context,
    recipe,
)
from database_operator.engines import Engine, facts
from database_operator.manifest import Manifest

#: A Job's name is also a label value: at most 63 characters.
MAX_NAME = 63
#: How often a Job tries again after a pod failed (a dropped connection, a node gone).
BACKOFF_LIMIT = 2
#: The agent's command line in the operator's image.
AGENT_COMMAND = ["database-operator", "agent"]
BACKUP_VOLUME, RESTORE_VOLUME, INITDB_VOLUME = "backup", "restore", "initdb"
DESTINATION_VOLUME, CA_VOLUME, DATA_VOLUME = "destination", "s3-ca", "data"
DESTINATION_MOUNT = "/destination"
#: Of a Database's placement, what a backup's pod takes: the nodes it may run on.
NODE_PLACEMENT = ("nodeSelector", "tolerations", "priorityClassName")
CA_MOUNT = "/etc/database-operator/s3-ca"
#: The client-side encryption key's Secret, mounted in the agent's containers only (never the
#: engine's), as one file.
KEY_VOLUME, KEY_MOUNT, KEY_FILE = "encryption-key", "/etc/database-operator/backup-key", "key"


@dataclass(frozen=True)
class JobOptions:
    """What the settings say of every Job: the agent's image, the Secrets its pod pulls images
    with, how long its pod may wait to start a container (the operator stops it then, see
    state.job_outcome), and how long it may run in all (Kubernetes stops it then)."""

    agent_image: str
    image_pull_secrets: tuple[str, ...] = ()
    start_deadline_s: float = Settings.model_fields["job_start_deadline"].default
    run_deadline_s: int = Settings.model_fields["job_run_deadline"].default

    @classmethod
    def of(cls, settings: Settings) -> JobOptions:
        return cls(
            agent_image=settings.agent_image,
            image_pull_secrets=tuple(settings.agent_image_pull_secrets),
            start_deadline_s=settings.job_start_deadline,
            run_deadline_s=settings.job_run_deadline,
        )


def job_name(base: str, suffix: str = "") -> str:
    """``base + suffix``, shortened to a label's 63 characters with a hash of ``base`` so that
    two long names never meet."""
    name = base + suffix
    if len(name) <= MAX_NAME:
        return name
    digest = hashlib.sha256(base.encode()).hexdigest()[:8]
    keep = base[: MAX_NAME - len(suffix) - len(digest) - 1].rstrip("-.")
    return f"{keep}-{digest}{suffix}"


def backup_job_name(backup: DatabaseBackup) -> str:
    return job_name(backup.name)


def delete_job_name(backup: DatabaseBackup) -> str:
    return job_name(backup.name, "-delete")


def restore_job_name(db: Database) -> str:
    return job_name(db.name, "-restore")


def _owned_by_backup(backup: DatabaseBackup) -> list[Manifest]:
    uid = backup.metadata.get("uid")
    if not uid:
        return []
    return [
        {
            "apiVersion": f"{GROUP}/{VERSION}",
            "kind": backup.kind,
            "name": backup.name,
            "uid": str(uid),
            "controller": True,
            "blockOwnerDeletion": True,
        }
    ]


def _labels(database: str, component: str, shard: str | None) -> dict[str, str]:
    """Like a Database's children's labels (so the operator's watch of its children sees the
    Jobs), with the part the Job plays; never the engine's name with the instance, which is the
    Database's pod selector (status.selector: the scale subresource counts its pods by it), nor
    the role label its Services select by."""
    labels = {
        "app.kubernetes.io/instance": database,
        "app.kubernetes.io/component": component,
        "app.kubernetes.io/managed-by": MANAGED_BY,
        DATABASE_LABEL: database,
    }
    return labels | ({SHARD_LABEL: shard} if shard else {})


def destination_env(destination: BackupDestination, key: str) -> list[Manifest]:
    """Where the agent finds a backup: plain settings, and the S3 keys by secretKeyRef."""
    found: list[Manifest] = [{"name": agent.KEY, "value": key}]
    if destination.encryption is not None:
        ref = destination.encryption.key_secret_ref
        found += [
            {"name": agent.ENCRYPTION_KEY_FILE, "value": f"{KEY_MOUNT}/{KEY_FILE}"},
            # Its name and key only, so that a refusal can say which to fix.
            {"name": agent.ENCRYPTION_SECRET, "value": f"{ref.name} (key {ref.key})"},
        ]
    if destination.pvc is not None:
        return [*found, {"name": agent.PVC_DIR, "value": DESTINATION_MOUNT}]
    s3 = destination.s3
    assert s3 is not None  # one of the two, by the schema
    plain = {
        agent.S3_BUCKET: s3.bucket,
        agent.S3_ENDPOINT: s3.endpoint,
        agent.S3_REGION: s3.region,
        agent.CA_BUNDLE: f"{CA_MOUNT}/{CA_BUNDLE_KEY}" if s3.ca_bundle_secret_ref else None,
        # Its name only, so that a refusal of the keys can say which Secret to fix.
        agent.S3_CREDENTIALS_SECRET: s3.credentials_secret_ref.name,
        agent.S3_ENCRYPTION: s3.server_side_encryption,
        agent.S3_KMS_KEY_ID: s3.kms_key_id,
    }
    found += [{"name": name, "value": value} for name, value in plain.items() if value]
    return found + [
        {
            "name": variable,
            "valueFrom": {
                "secretKeyRef": {"name": s3.credentials_secret_ref.name, "key": variable}
            },
        }
        for variable in (ACCESS_KEY_ID, SECRET_ACCESS_KEY)
    ]


def destination_volumes(destination: BackupDestination) -> tuple[list[Manifest], list[Manifest]]:
    """The volumes the agent needs for ``destination`` (a claim, a CA bundle, an encryption
    key) and its mounts."""
    volumes, mounts = _store_volumes(destination)
    if destination.encryption is not None:
        ref = destination.encryption.key_secret_ref
        items = [{"key": ref.key, "path": KEY_FILE}]
        volumes = [
            *volumes,
            {"name": KEY_VOLUME, "secret": {"secretName": ref.name, "items": items}},
        ]
        mounts = [*mounts, {"name": KEY_VOLUME, "mountPath": KEY_MOUNT, "readOnly": True}]
    return volumes, mounts


def _store_volumes(destination: BackupDestination) -> tuple[list[Manifest], list[Manifest]]:
    if destination.pvc is not None:
        claim = {"claimName": destination.pvc.claim_name}
        return (
            [{"name": DESTINATION_VOLUME, "persistentVolumeClaim": claim}],
            [{"name": DESTINATION_VOLUME, "mountPath": DESTINATION_MOUNT}],
        )
    assert destination.s3 is not None
    if destination.s3.ca_bundle_secret_ref is None:
        return [], []
    secret = {"secretName": destination.s3.ca_bundle_secret_ref.name}
    return (
        [{"name": CA_VOLUME, "secret": secret}],
        [{"name": CA_VOLUME, "mountPath": CA_MOUNT, "readOnly": True}],
    )


def _agent(
    name: str,
    agent_image: str,
    args: list[str],
    environment: list[Manifest],
    mounts: list[Manifest],
) -> Manifest:
    return {
        "name": name,
        "image": agent_image,
        "command": [*AGENT_COMMAND, *args],
        "env": environment,
        "volumeMounts": mounts,
        "securityContext": container_security_context() | {"readOnlyRootFilesystem": True},
    }


def _engine_container(
    db: Database, name: str, script: str, environment: list[Manifest]
) -> Manifest:
    return {
        "name": name,
        "image": image(db),
        "command": ["sh", "-c", script],
        "env": environment,
        "securityContext": container_security_context(),
        # A failed script's last lines become the pod's termination message: the status says why.
        "terminationMessagePolicy": "FallbackToLogsOnError",
    }


def _job(
    name: str,
    namespace: str,
    labels: dict[str, str],
    owners: list[Manifest],
    pod: Manifest,
    *,
    options: JobOptions,
) -> Manifest:
    # The namespace is the API path the Job is created at: without it a POST goes to the
    # cluster-wide collection, which the API server refuses.
    meta: Manifest = {"name": name, "namespace": namespace, "labels": labels}
    if owners:
        meta["ownerReferences"] = owners
    # The operator's own pull secrets, for its image (the agent's) in the Database's namespace:
    # a pod that names none gets its ServiceAccount's instead.
    secrets = [{"name": secret} for secret in options.image_pull_secrets]
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": meta,
        "spec": {
            # Every Job ends: Kubernetes fails one still running then (DeadlineExceeded).
            "activeDeadlineSeconds": options.run_deadline_s,
            "backoffLimit": BACKOFF_LIMIT,
            "podFailurePolicy": {
                "rules": [
                    # An evicted or preempted pod is not the Job's failure: run it again.
                    {"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget"}]},
                    {
                        "action": "FailJob",
                        "onExitCodes": {"operator": "In", "values": [recipes.PERMANENT_EXIT]},
                    },
                ]
            },
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "restartPolicy": "Never",
                    "automountServiceAccountToken": False,
                    "enableServiceLinks": False,
                    **({"imagePullSecrets": secrets} if secrets else {}),
                    **pod,
                },
            },
        },
    }


def _shard(db: Database) -> str | None:
    return object_labels(db).get(SHARD_LABEL)


def backup_job(
    backup: DatabaseBackup,
    db: Database,
    destination: BackupDestination,
    location: str,
    options: JobOptions,
) -> Manifest:
    """The Job that takes ``backup`` of ``db`` and stores it at ``location`` in
    ``destination``."""
    engine = db.spec.engine
    dump_file = recipes.file_name(engine)
    volumes, mounts = destination_volumes(destination)
    scratch = {"name": BACKUP_VOLUME, "mountPath": recipes.BACKUP_DIR}
    dump_env = [
        *env(db),
        {"name": "DB_HOST", "value": host(db)},
        {"name": "DB_PORT", "value": str(resolved_port(db))},
        {"name": "BACKUP_DIR", "value": recipes.BACKUP_DIR},
        {"name": "BACKUP_FILE", "value": dump_file},
    ]
    dump = _engine_container(db, "dump", recipes.dump(engine), dump_env)
    dump["volumeMounts"] = [scratch]
    upload = _agent(
        "upload",
        options.agent_image,
        [
            "upload",
            f"--file={recipes.BACKUP_DIR}/{dump_file}",
            f"--version-file={recipes.BACKUP_DIR}/{recipes.VERSION_FILE}",
            f"--engine={engine.value}",
            f"--namespace={db.namespace}",
            f"--database={db.name}",
            f"--backup={backup.name}",
        ],
        destination_env(destination, location),
        [{**scratch, "readOnly": True}, *mounts],
    )
    labels = _labels(db.name, "backup", _shard(db))
    # The nodes its Database may use (a dedicated, tainted pool); not its (anti-)affinity,
    # which is written for the database's own pods.
    nodes = {key: value for key, value in placement(db).items() if key in NODE_PLACEMENT}
    pod: Manifest = {
        "securityContext": pod_security_context(db),
        "initContainers": [dump],
        "containers": [upload],
        "volumes": [{"name": BACKUP_VOLUME, "emptyDir": {}}, *volumes],
        **nodes,
    }
    return _job(
        backup_job_name(backup),
        db.namespace,
        labels,
        _owned_by_backup(backup),
        pod,
        options=options,
    )


def _appendonly(db: Database) -> bool:
    """Whether a redis Database runs with its AOF on (spec.parameters appendonly yes)."""
    return any(
        key.lower() == "appendonly" and value.strip().lower() == "yes"
        for key, value in (db.spec.parameters or {}).items()
    )


def restore_job(
    db: Database,
    destination: BackupDestination,
    location: str,
    sha256: str | None,
    options: JobOptions,
    *,
    belongs_to: str | None = None,
) -> Manifest:
    """The Job that restores the backup at ``location`` (checksum ``sha256``, if a
    DatabaseBackup recorded one) onto ``db``'s volume, before its Deployment is created;
    ``belongs_to``: only if the backup's metadata says it was taken in that namespace."""
    engine = db.spec.engine
    engine_facts_ = engine_facts(db)
    restore_file = f"{recipes.RESTORE_DIR}/{recipes.file_name(engine)}"
    volumes, mounts = destination_volumes(destination)
    scratch = {"name": RESTORE_VOLUME, "mountPath": recipes.RESTORE_DIR}
    fetch_args = [
        "fetch",
        f"--to={restore_file}",
        f"--engine={engine.value}",
        f"--version={resolved_version(db)}",
    ] + ([f"--sha256={sha256}"] if sha256 else [])
    if belongs_to is not None:
        fetch_args.append(f"--namespace={belongs_to}")
    fetch = _agent(
        "fetch",
        options.agent_image,
        fetch_args,
        destination_env(destination, location),
        [scratch, *mounts],
    )
    # PostgreSQL keeps its data in a folder of the volume (PGDATA), the others at its root.
    data_dir = engine_facts_.env.get("PGDATA", engine_facts_.data_path)
    steps = recipes.restore(engine)
    restore_env = [
        *env(db, recipe(db, PRIMARY)),
        {"name": "RESTORE_FILE", "value": restore_file},
        {"name": "RESTORE_DATA_DIR", "value": data_dir},
    ]
    if steps.loader is not None:
        restore_env.append({"name": "RESTORE_LOADER", "value": steps.loader})
    if engine is Engine.REDIS and _appendonly(db):
        restore_env.append({"name": "RESTORE_APPENDONLY", "value": "yes"})
    restore = _engine_container(db, "restore", steps.script, restore_env)
    restore["volumeMounts"] = [
        {"name": DATA_VOLUME, "mountPath": engine_facts_.data_path},
        {**scratch, "readOnly": True},
    ]
    pod_volumes = [
        {"name": DATA_VOLUME, "persistentVolumeClaim": {"claimName": pvc_name(db)}},
        {"name": RESTORE_VOLUME, "emptyDir": {}},
        *volumes,
    ]
    if steps.loader is not None:
        restore["volumeMounts"].append({"name": INITDB_VOLUME, "mountPath": recipes.INITDB_DIR})
        pod_volumes.append({"name": INITDB_VOLUME, "emptyDir": {}})
    if db.spec.resources is not None:
        restore["resources"] = db.spec.resources.to_wire()
    labels = _labels(db.name, "restore", _shard(db))
    pod: Manifest = {
        "securityContext": pod_security_context(db),
        "initContainers": [fetch],
        "containers": [restore],
        "volumes": pod_volumes,
        # Where the database will run: a volume bound on first use binds where this pod runs.
        **placement(db),
    }
    return _job(
        restore_job_name(db),
        db.namespace,
        labels,
        controlled_owner_references(db),
        pod,
        options=options,
    )


def store_only(destination: BackupDestination) -> BackupDestination:
    """``destination`` without its encryption: what a deletion needs (no key; and a key's
    Secret deleted since must not keep a backup from being deleted)."""
    return destination.model_copy(update={"encryption": None})


def delete_job(backup: DatabaseBackup, options: JobOptions) -> Manifest:
    """The Job that deletes ``backup``'s stored data (as recorded in its status)."""
    status = backup.status
    assert status.destination is not None and status.location is not None
    engine = Engine(status.engine or Engine.POSTGRES)
    destination = store_only(status.destination)
    volumes, mounts = destination_volumes(destination)
    uid = facts(engine).uid  # the UID that wrote the backup: on a claim, its files are its own
    deleter = _agent(
        "delete",
        options.agent_image,
        ["delete"],
        destination_env(destination, status.location),
        mounts,
    )
    shard = (backup.metadata.get("labels") or {}).get(SHARD_LABEL)
    labels = _labels(backup.spec.database, "backup-deletion", shard)
    pod: Manifest = {
        "securityContext": {
            "runAsNonRoot": True,
            "runAsUser": uid,
            "runAsGroup": uid,
            "fsGroup": uid,
            "seccompProfile": {"type": "RuntimeDefault"},
        },
        "containers": [deleter],
        "volumes": volumes,
    }
    return _job(
        delete_job_name(backup),
        backup.namespace,
        labels,
        _owned_by_backup(backup),
        pod,
        options=options,
    )
