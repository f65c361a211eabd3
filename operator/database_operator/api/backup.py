"""pydantic models of backups: where they go (a Database's ``spec.backup``, a DatabaseBackup's
``spec.destination``), what a Database is restored from (``spec.restore``), and the
``DatabaseBackup`` kind itself. The single source of their CRD schemas, like models.py.
"""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum

from pydantic import ConfigDict, Field, JsonValue

from database_operator.api.common import (
    DATABASE_NAME_MAX_LENGTH,
    DATABASE_NAME_PATTERN,
    GROUP,
    NAME_PATTERN,
    VERSION,
    Condition,
    Resource,
    _Model,
    cel,
)
from database_operator.cron import PATTERN as CRON_PATTERN

BACKUP_KIND = "DatabaseBackup"
BACKUP_PLURAL = "databasebackups"
#: The label on every DatabaseBackup and backup Job: the name of the Database it is a backup of.
DATABASE_LABEL = f"{GROUP}/database"
#: The label on the DatabaseBackups a schedule created (retention counts only those).
ORIGIN_LABEL = f"{GROUP}/origin"
SCHEDULED = "schedule"
#: The annotation on a scheduled DatabaseBackup: the due time it was taken for (RFC 3339).
SCHEDULED_AT_ANNOTATION = f"{GROUP}/scheduled-at"
#: The keys of the S3 credentials Secret (the names AWS tools read from the environment).
ACCESS_KEY_ID = "AWS_ACCESS_KEY_ID"
SECRET_ACCESS_KEY = "AWS_SECRET_ACCESS_KEY"
CA_BUNDLE_KEY = "ca.crt"
#: The default key of the Secret that holds a backup encryption key.
ENCRYPTION_KEY = "key"
#: An S3 bucket name (the rules every S3 implementation accepts).
BUCKET_PATTERN = r"^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$"
#: A key prefix or an object key: path segments of safe characters, no leading, trailing or
#: doubled slash, no "." or ".." segment.
KEY_PATTERN = r"^[A-Za-z0-9_=+@-][A-Za-z0-9_.=+@-]*(/[A-Za-z0-9_=+@-][A-Za-z0-9_.=+@-]*)*$"
#: A duration of whole hours, days or weeks: "36h", "30d", "8w".
MAX_AGE_PATTERN = r"^[1-9][0-9]{0,5}[hdw]$"


class SecretRef(_Model):
    """A Secret in the same namespace."""

    name: str = Field(
        min_length=1, max_length=253, pattern=NAME_PATTERN, description="Name of the Secret."
    )


def https_unless_insecure(*, optional: bool) -> dict[str, JsonValue]:
    """The rule on a spec's ``destination``: an S3 endpoint is https unless s3.insecure says
    otherwise. On the specs, not on S3Destination: a DatabaseBackup's status copies the
    destination it used, and an object stored before the rule (kept by the API server's
    validation ratcheting while its destination is unchanged) must still get its status."""
    s3 = "self.destination.s3"
    rule = (
        f"!has({s3}) || !has({s3}.endpoint) || {s3}.endpoint.startsWith('https://') || "
        f"(has({s3}.insecure) && {s3}.insecure)"
    )
    return cel(
        f"!has(self.destination) || {rule}" if optional else rule,
        "s3.endpoint is http://: the backups, and the requests signed with the S3 keys, would "
        "cross the network in clear text; use https://, or set s3.insecure: true to accept it",
        ".destination.s3.endpoint",
    )


class ServerSideEncryption(StrEnum):
    """How the store encrypts what it keeps (S3's x-amz-server-side-encryption)."""

    AES256 = "AES256"
    KMS = "aws:kms"


class S3Destination(_Model):
    """An S3 bucket (AWS, or any S3-compatible store: Ceph RGW, SeaweedFS, MinIO, GCS's XML
    API...)."""

    model_config = ConfigDict(
        json_schema_extra={
            "x-kubernetes-validations": [
                cel(
                    "!has(self.kmsKeyId) || (has(self.serverSideEncryption) && "
                    "self.serverSideEncryption == 'aws:kms')",
                    "s3.kmsKeyId names the KMS key of serverSideEncryption: aws:kms; set that "
                    "too, or drop kmsKeyId",
                    ".kmsKeyId",
                )
            ]
        }
    )

    endpoint: str | None = Field(
        default=None,
        max_length=512,
        pattern=r"^https?://[^\s/?#]+(/[^\s?#]*)?$",
        description="URL of the S3 API, e.g. https://s3.eu-west-1.amazonaws.com or "
        "https://seaweedfs.storage.svc:8333 (http:// only with insecure: true). Empty: AWS S3 "
        "in the region. With an endpoint, buckets are addressed path-style (what S3-compatible "
        "stores expect).",
    )
    bucket: str = Field(pattern=BUCKET_PATTERN, description="The bucket; it must exist.")
    path: str | None = Field(
        default=None,
        max_length=512,
        pattern=KEY_PATTERN,
        description="Key prefix inside the bucket. Each backup is stored at "
        "<path>/<namespace>/<database>/<backup name>.<ext>, with a .sha256 and a .json beside it.",
    )
    region: str | None = Field(
        default=None,
        max_length=64,
        pattern=r"^[a-z0-9-]+$",
        description="The bucket's region; empty: us-east-1.",
    )
    credentials_secret_ref: SecretRef = Field(
        description=f"Secret with the keys {ACCESS_KEY_ID} and {SECRET_ACCESS_KEY}. Only the "
        "backup, restore and delete Jobs read it, from their environment."
    )
    insecure: bool = Field(
        default=False,
        description="Allow an http:// endpoint: the backups and the S3 requests cross the "
        "network in clear text (the requests are signed, the keys themselves never sent). "
        "Without it, an endpoint must be https://.",
    )
    ca_bundle_secret_ref: SecretRef | None = Field(
        default=None,
        description=f"Secret whose key {CA_BUNDLE_KEY} holds the CA certificates (PEM) that "
        "sign the endpoint's certificate, for a store with a private CA.",
    )
    server_side_encryption: ServerSideEncryption | None = Field(
        default=None,
        description="How the store encrypts each object it keeps (the backup, its .sha256 and "
        ".json): AES256 with keys the store manages (SSE-S3), or aws:kms with a KMS key "
        "(kmsKeyId; without it, the store's default KMS key). Restores need nothing more: the "
        "store decrypts for whoever may read. Empty: the bucket's default encryption.",
    )
    kms_key_id: str | None = Field(
        default=None,
        min_length=1,
        max_length=2048,
        pattern=r"^[A-Za-z0-9:/_.+=@-]+$",
        description="With serverSideEncryption aws:kms: the KMS key (its id, ARN or alias).",
    )


class PvcDestination(_Model):
    """A PersistentVolumeClaim in the same namespace (ReadWriteMany where backups of several
    Databases or nodes share it)."""

    claim_name: str = Field(
        min_length=1, max_length=253, pattern=NAME_PATTERN, description="Name of the claim."
    )


class SecretKeyRef(SecretRef):
    """A key of a Secret in the same namespace."""

    key: str = Field(
        default=ENCRYPTION_KEY,
        min_length=1,
        max_length=253,
        pattern=r"^[-._a-zA-Z0-9]+$",
        description="The key in its data.",
    )


class BackupEncryption(_Model):
    """Client-side encryption: the agent encrypts each backup before it leaves the Job, so the
    store holds ciphertext only."""

    key_secret_ref: SecretKeyRef = Field(
        description="The Secret key that holds the encryption key: 32 random bytes, base64 "
        "(openssl rand -base64 32). AES-256-GCM; the key's id (not the key) is in each "
        "backup's metadata, and a restore with another key is refused, naming the one it needs. "
        "Keep the Secret: without it, its backups cannot be restored."
    )


class BackupDestination(_Model):
    """Where backups are stored: exactly one of s3 or pvc."""

    model_config = ConfigDict(
        json_schema_extra={
            "x-kubernetes-validations": [
                cel(
                    "has(self.s3) != has(self.pvc)",
                    "a destination is exactly one of s3 or pvc",
                )
            ]
        }
    )

    s3: S3Destination | None = Field(default=None, description="An S3 bucket.")
    pvc: PvcDestination | None = Field(default=None, description="A PersistentVolumeClaim.")
    encryption: BackupEncryption | None = Field(
        default=None,
        description="Encrypt each backup in the Job, before it is stored (either destination).",
    )

    def describe(self) -> str:
        """Where, for people (no credentials)."""
        if self.s3 is not None:
            prefix = f"/{self.s3.path}" if self.s3.path else ""
            return f"s3://{self.s3.bucket}{prefix}"
        assert self.pvc is not None
        return f"pvc/{self.pvc.claim_name}"


class Retention(_Model):
    """Which scheduled backups to keep: a backup goes when neither rule keeps it, and the newest
    completed one is always kept (so a schedule that stopped succeeding never ages every backup
    away)."""

    model_config = ConfigDict(
        json_schema_extra={
            "x-kubernetes-validations": [
                cel(
                    "has(self.count) || has(self.maxAge)",
                    "retention needs count, maxAge, or both",
                )
            ]
        }
    )

    count: int | None = Field(
        default=None, ge=1, le=1000, description="Keep the newest COUNT completed backups."
    )
    max_age: str | None = Field(
        default=None,
        pattern=MAX_AGE_PATTERN,
        description="Keep the completed backups younger than this: hours, days or weeks, "
        "e.g. 36h, 30d, 8w.",
    )


class BackupPolicy(_Model):
    """A Database's backups: where they go, and when the operator takes them."""

    model_config = ConfigDict(
        json_schema_extra={
            "x-kubernetes-validations": [
                https_unless_insecure(optional=False),
                cel(
                    "!has(self.retention) || has(self.schedule)",
                    "backup.retention applies to the backups the schedule takes: set "
                    "backup.schedule too",
                    ".retention",
                ),
            ]
        }
    )

    destination: BackupDestination = Field(
        description="Where this Database's backups go (a DatabaseBackup may name another)."
    )
    schedule: str | None = Field(
        default=None,
        max_length=128,
        pattern=CRON_PATTERN,
        description="When to take a backup, in cron syntax, UTC: 5 fields (minute hour "
        "day-of-month month day-of-week, e.g. '0 2 * * *'), 6 with seconds first, or @daily, "
        "@hourly, @weekly, @monthly, @yearly. Each run is a DatabaseBackup named "
        "<database>-<UTC time>. Empty: backups only on demand.",
    )
    retention: Retention | None = Field(
        default=None,
        description="How many scheduled backups to keep; those it lets go are deleted with "
        "their stored data. Backups taken on demand are never deleted by retention.",
    )
    suspend: bool = Field(
        default=False,
        description="When true the schedule takes no backups (those running finish).",
    )


class RestoreSource(_Model):
    """The backup a new Database starts from."""

    model_config = ConfigDict(
        json_schema_extra={
            "x-kubernetes-validations": [
                cel(
                    "has(self.backup) != has(self.location)",
                    "restore is exactly one of backup (a DatabaseBackup) or location (a stored "
                    "backup's key)",
                ),
                cel(
                    "!has(self.destination) || has(self.location)",
                    "restore.destination goes with restore.location (a DatabaseBackup knows "
                    "where it is stored)",
                    ".destination",
                ),
                https_unless_insecure(optional=True),
            ]
        }
    )

    backup: str | None = Field(
        default=None,
        max_length=253,
        pattern=NAME_PATTERN,
        description="A Completed DatabaseBackup in this namespace, of the same engine and of "
        "this major version or an older one.",
    )
    location: str | None = Field(
        default=None,
        max_length=1024,
        pattern=KEY_PATTERN,
        description="The key (or, on a PVC, the path) of a stored backup, as a DatabaseBackup's "
        "status.location gives it: for a backup whose DatabaseBackup is gone, e.g. in another "
        "cluster. Outside this namespace's prefix (<path>/<namespace>/) it is restored only if "
        "the backup's metadata says it was taken in this namespace: in a shared bucket, no "
        "namespace restores another's backups.",
    )
    destination: BackupDestination | None = Field(
        default=None,
        description="Where location is stored; empty: spec.backup.destination.",
    )


class BackupRecord(_Model):
    """A DatabaseBackup, and when it completed or failed."""

    name: str = Field(description="Name of the DatabaseBackup.")
    time: datetime = Field(description="When it completed (or failed).")


class RestoreRecord(_Model):
    """What a Database was restored from."""

    backup: str | None = Field(default=None, description="The DatabaseBackup, if one was named.")
    location: str = Field(description="The stored backup's key or path.")
    time: datetime | None = Field(default=None, description="When the restore completed.")


# --- the DatabaseBackup kind --------------------------------------------------------------------


class DatabaseBackupSpec(_Model):
    """One backup of one Database. Immutable: a backup records one run; take another by
    creating a new DatabaseBackup."""

    model_config = ConfigDict(
        json_schema_extra={
            "x-kubernetes-validations": [
                cel(
                    "self == oldSelf",
                    "spec is immutable: a DatabaseBackup records one backup; create another",
                ),
                https_unless_insecure(optional=True),
            ]
        }
    )

    database: str = Field(
        min_length=1,
        max_length=DATABASE_NAME_MAX_LENGTH,
        pattern=DATABASE_NAME_PATTERN,
        description="The Database to back up, in this namespace.",
    )
    destination: BackupDestination | None = Field(
        default=None,
        description="Where to store it; empty: the Database's spec.backup.destination.",
    )


class BackupPhase(StrEnum):
    PENDING = "Pending"
    RUNNING = "Running"
    COMPLETED = "Completed"
    FAILED = "Failed"


class DatabaseBackupStatus(_Model):
    """What became of the backup, written by the operator."""

    observed_generation: int | None = Field(
        default=None, description="The metadata.generation this status is for."
    )
    phase: BackupPhase | None = Field(
        default=None, description="Pending, Running, then Completed or Failed."
    )
    started_at: datetime | None = Field(default=None, description="When its Job was created.")
    completed_at: datetime | None = Field(default=None, description="When it completed or failed.")
    size: int | None = Field(default=None, ge=0, description="Size of the stored backup, bytes.")
    location: str | None = Field(
        default=None,
        description="The key (S3) or path (PVC) of the stored backup in its destination.",
    )
    checksum: str | None = Field(
        default=None, description="sha256:<hex> of the stored backup, verified on restore."
    )
    engine: str | None = Field(default=None, description="The engine backed up.")
    engine_version: str | None = Field(
        default=None, description="The version the database server reported when backed up."
    )
    destination: BackupDestination | None = Field(
        default=None,
        description="Where it is stored (the spec's, else the Database's at the time): restore "
        "and deletion use it, whatever becomes of the Database.",
    )
    database_uid: str | None = Field(
        default=None,
        alias="databaseUID",  # Kubernetes spells initialisms in capitals: podIP, hostIP
        description="metadata.uid of the Database backed up.",
    )
    job: str | None = Field(default=None, description="The Job that takes the backup.")
    message: str | None = Field(
        default=None, max_length=32768, description="What happened, for people; why on failure."
    )
    conditions: list[Condition] | None = Field(
        default=None,
        description="Completed and Failed.",
        json_schema_extra={"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["type"]},
    )


class DatabaseBackup(Resource):
    """A backup of a Database: its engine's own dump, stored with a checksum in an S3 bucket or on
    a PVC."""

    api_version: str = f"{GROUP}/{VERSION}"
    kind: str = BACKUP_KIND
    spec: DatabaseBackupSpec
    status: DatabaseBackupStatus = Field(default_factory=DatabaseBackupStatus)

    @property
    def scheduled(self) -> bool:
        return (self.metadata.get("labels") or {}).get(ORIGIN_LABEL) == SCHEDULED
