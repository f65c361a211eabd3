"""The agent: what the backup, restore and delete Jobs run in the operator's image
(`database-operator agent upload | fetch | delete`).

It moves backups between a Job's scratch volume and their destination — an S3 bucket (through
boto3, never hand-signed HTTP) or a folder on a PersistentVolumeClaim — and is the one place that
stores and checks their checksums:

- ``upload``: the dump's SHA-256 and size, then the object, ``<key>.sha256`` (sha256sum's
  format) and ``<key>.json`` (engine, version, size, checksum), in that order: metadata last,
  so a backup whose metadata exists was stored whole;
- ``fetch``: the object into a scratch file, then its SHA-256 and size against ``<key>.sha256``,
  the metadata and the checksum its DatabaseBackup recorded, and the engine and major version
  against the Database being restored; only a file that passes every check is handed on;
- ``delete``: the object and both companions (already gone is fine).

Its configuration is the environment (the Jobs' env: see ``Target.from_env``); secrets come as
the variables boto3 reads itself (and the Secret's name, for the words of a refusal). What it
did goes to its termination message (JSON), which the operator reads from the pod. Exit:

- 0: done;
- 3: a failure a retry cannot cure, so the Job fails at once (its podFailurePolicy, jobs.py): a
  wrong checksum, a backup of another engine or a newer major, missing settings, and every
  store failure s3errors.py classifies as one — keys the store does not accept, a denied
  request, a missing bucket or object, an endpoint, region or TLS that cannot work;
- 1: any other failure, which a new pod may not meet: no connection, a timeout, a transfer
  cut short, a store failing or throttling (each after botocore's own five attempts). The Job
  runs another pod, up to its backoff limit.

Every call to a bucket goes through s3errors.classify, the one place that says which is which.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import os
import shutil
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO, Protocol, cast

from database_operator.backups import encryption
from database_operator.engines import Engine, major_version

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client
    from mypy_boto3_s3.literals import ServerSideEncryptionType
    from mypy_boto3_s3.type_defs import PutObjectRequestTypeDef

    from database_operator.backups.s3errors import Destination

PERMANENT = 3
TRANSIENT = 1
#: The kubelet reads a container's termination message from here (at most 4 KiB of it).
TERMINATION_LOG = "/dev/termination-log"
CHUNK = 1024 * 1024

# The environment the Jobs set (jobs.py writes the same names).
KEY = "BACKUP_KEY"
S3_ENDPOINT = "BACKUP_S3_ENDPOINT"
S3_BUCKET = "BACKUP_S3_BUCKET"
S3_REGION = "BACKUP_S3_REGION"
S3_ENCRYPTION = "BACKUP_S3_SERVER_SIDE_ENCRYPTION"
S3_KMS_KEY_ID = "BACKUP_S3_KMS_KEY_ID"
#: The name (never the values) of the Secret with the S3 keys, for the words of a failure.
S3_CREDENTIALS_SECRET = "BACKUP_S3_CREDENTIALS_SECRET"
CA_BUNDLE = "AWS_CA_BUNDLE"
PVC_DIR = "BACKUP_PVC_DIR"
#: The mounted file with the client-side encryption key, and its Secret's name (for words).
ENCRYPTION_KEY_FILE = "BACKUP_ENCRYPTION_KEY_FILE"
ENCRYPTION_SECRET = "BACKUP_ENCRYPTION_SECRET"
DEFAULT_REGION = "us-east-1"


class AgentError(Exception):
    """A failure the agent reports; ``permanent``: a retry would fail the same way."""

    def __init__(self, message: str, *, permanent: bool = True) -> None:
        super().__init__(message)
        self.permanent = permanent


class Store(Protocol):
    """Where backups are kept: put, get and delete whole objects by key."""

    def put_file(self, key: str, path: Path) -> None: ...
    def put_bytes(self, key: str, data: bytes) -> None: ...
    def put_stream(self, key: str, source: BinaryIO) -> None: ...
    def get_file(self, key: str, path: Path) -> None: ...
    def get_bytes(self, key: str) -> bytes: ...
    def delete(self, keys: Sequence[str]) -> None: ...


class FolderStore:
    """A folder (a mounted PersistentVolumeClaim). Every file is written under a temporary
    name, flushed to disk and renamed, so a reader never sees half a file."""

    def __init__(self, root: Path) -> None:
        if not root.is_dir():
            raise AgentError(f"{root} is not a folder: is the claim mounted?")
        self.root = root

    def _path(self, key: str) -> Path:
        return self.root / key

    def _write(self, key: str, fill: Any) -> None:
        path = self._path(key)
        path.parent.mkdir(parents=True, exist_ok=True)
        partial = path.with_name(path.name + ".partial")
        with partial.open("wb") as out:
            fill(out)
            out.flush()
            os.fsync(out.fileno())
        partial.replace(path)

    def put_file(self, key: str, path: Path) -> None:
        with path.open("rb") as source:
            self._write(key, lambda out: shutil.copyfileobj(source, out, CHUNK))

    def put_bytes(self, key: str, data: bytes) -> None:
        self._write(key, lambda out: out.write(data))

    def put_stream(self, key: str, source: BinaryIO) -> None:
        self._write(key, lambda out: shutil.copyfileobj(source, out, CHUNK))

    def get_file(self, key: str, path: Path) -> None:
        try:
            shutil.copyfile(self._path(key), path)
        except FileNotFoundError as error:
            raise AgentError(f"{key} does not exist in {self.root}") from error

    def get_bytes(self, key: str) -> bytes:
        try:
            return self._path(key).read_bytes()
        except FileNotFoundError as error:
            raise AgentError(f"{key} does not exist in {self.root}") from error

    def delete(self, keys: Sequence[str]) -> None:
        for key in keys:
            self._path(key).unlink(missing_ok=True)


class S3Store:
    """A bucket, through boto3 (credentials from AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, a
    private CA from AWS_CA_BUNDLE, as boto3 reads them). Every failure of every call is
    classified by s3errors, and reported in its words."""

    def __init__(self, client: S3Client, destination: Destination) -> None:
        self.client = client
        self.destination = destination
        self.bucket = destination.bucket

    @classmethod
    def connect(cls, destination: Destination) -> S3Store:
        import boto3
        from botocore.config import Config

        config = Config(
            region_name=destination.region,
            retries={"max_attempts": 5, "mode": "standard"},
            # S3-compatible stores serve buckets by path; AWS's own endpoint by host.
            s3={"addressing_style": "path" if destination.endpoint else "auto"},
            # Checksums the store must understand only where S3 requires them: the agent checks
            # its own SHA-256 end to end, and not every S3-compatible store takes the others.
            request_checksum_calculation="when_required",
            response_checksum_validation="when_required",
        )
        try:
            client = boto3.client("s3", endpoint_url=destination.endpoint or None, config=config)
        except Exception as error:
            # An endpoint or region botocore cannot use is refused here, before any request.
            raise _failed(destination, error, "connecting to") from error
        return cls(client, destination)

    def _failed(self, error: Exception, doing: str) -> AgentError:
        return _failed(self.destination, error, doing)

    def put_file(self, key: str, path: Path) -> None:
        try:
            self.client.upload_file(
                str(path), self.bucket, key, ExtraArgs=self.destination.put_args or None
            )
        except Exception as error:
            raise self._failed(error, f"uploading {key} to") from error

    def put_bytes(self, key: str, data: bytes) -> None:
        try:
            request: PutObjectRequestTypeDef = {"Bucket": self.bucket, "Key": key, "Body": data}
            if self.destination.encryption:
                request["ServerSideEncryption"] = cast(
                    "ServerSideEncryptionType", self.destination.encryption
                )
            if self.destination.kms_key_id:
                request["SSEKMSKeyId"] = self.destination.kms_key_id
            self.client.put_object(**request)
        except Exception as error:
            raise self._failed(error, f"uploading {key} to") from error

    def put_stream(self, key: str, source: BinaryIO) -> None:
        # Read once, in order (s3transfer keeps each part it read for its retries).
        try:
            self.client.upload_fileobj(
                source, self.bucket, key, ExtraArgs=self.destination.put_args or None
            )
        except Exception as error:
            raise self._failed(error, f"uploading {key} to") from error

    def get_file(self, key: str, path: Path) -> None:
        try:
            self.client.download_file(self.bucket, key, str(path))
        except Exception as error:
            raise self._failed(error, f"downloading {key} from") from error

    def get_bytes(self, key: str) -> bytes:
        try:
            return self.client.get_object(Bucket=self.bucket, Key=key)["Body"].read()
        except Exception as error:
            raise self._failed(error, f"downloading {key} from") from error

    def delete(self, keys: Sequence[str]) -> None:
        try:
            answer = self.client.delete_objects(
                Bucket=self.bucket, Delete={"Objects": [{"Key": key} for key in keys]}
            )
        except Exception as error:
            raise self._failed(error, "deleting from") from error
        # A key the store would not delete is not raised but listed, with an S3 error code
        # (already gone is not an error: S3 lists it as deleted).
        for refused in answer.get("Errors", []):
            from botocore.exceptions import ClientError

            code, message = refused.get("Code", ""), refused.get("Message", "")
            answered = ClientError({"Error": {"Code": code, "Message": message}}, "DeleteObjects")
            raise self._failed(answered, f"deleting {refused.get('Key')} from")


def _failed(destination: Destination, error: Exception, doing: str) -> AgentError:
    """The agent's error for a failure of the S3 client: classified in one place (s3errors)."""
    from database_operator.backups import s3errors

    failure = s3errors.classify(error)
    return AgentError(destination.explain(failure, doing), permanent=failure.permanent)


@dataclass(frozen=True)
class Target:
    """One backup's place: a store, and the key of its object there."""

    store: Store
    key: str
    #: The client-side encryption key, and the words that name its Secret.
    encryption_key: bytes | None = field(default=None, repr=False)
    encryption_secret: str = "the encryption key's Secret"

    @classmethod
    def from_env(cls, environ: Mapping[str, str]) -> Target:
        key = environ.get(KEY, "")
        if not key:
            raise AgentError(f"{KEY} is not set: the Job does not say where the backup is")
        secret = environ.get(ENCRYPTION_SECRET) or "the encryption key's Secret"
        encryption_key = None
        if environ.get(ENCRYPTION_KEY_FILE):
            try:
                text = Path(environ[ENCRYPTION_KEY_FILE]).read_bytes()
                encryption_key = encryption.load_key(text, f"the Secret {secret}")
            except (OSError, encryption.EncryptionError) as error:
                raise AgentError(f"encryption.keySecretRef: {error}") from None
        if environ.get(PVC_DIR):
            return cls(FolderStore(Path(environ[PVC_DIR])), key, encryption_key, secret)
        if not environ.get(S3_BUCKET):
            raise AgentError(f"neither {PVC_DIR} nor {S3_BUCKET} is set: no destination")
        from database_operator.backups.s3errors import Destination

        destination = Destination(
            bucket=environ[S3_BUCKET],
            endpoint=environ.get(S3_ENDPOINT) or None,
            region=environ.get(S3_REGION) or DEFAULT_REGION,
            secret=environ.get(S3_CREDENTIALS_SECRET) or None,
            encryption=environ.get(S3_ENCRYPTION) or None,
            kms_key_id=environ.get(S3_KMS_KEY_ID) or None,
        )
        return cls(S3Store.connect(destination), key, encryption_key, secret)

    @property
    def checksum_key(self) -> str:
        return f"{self.key}.sha256"

    @property
    def metadata_key(self) -> str:
        return f"{self.key}.json"


def sha256_of(path: Path) -> tuple[str, int]:
    """The SHA-256 (hex) and size of a file, read once."""
    digest = hashlib.sha256()
    size = 0
    with path.open("rb") as source:
        while chunk := source.read(CHUNK):
            digest.update(chunk)
            size += len(chunk)
    return digest.hexdigest(), size


def checksum_line(sha256: str, key: str) -> bytes:
    """The ``.sha256`` companion, as sha256sum writes it: ``sha256sum -c`` checks a download."""
    return f"{sha256}  {key.rsplit('/', 1)[-1]}\n".encode()


def upload(target: Target, dump: Path, metadata: Mapping[str, Any]) -> dict[str, Any]:
    """Store ``dump`` with its checksum and metadata; what was stored."""
    if not dump.is_file():
        raise AgentError(f"{dump} does not exist: the dump did not complete")
    extra: dict[str, Any] = {}
    if target.encryption_key is None:
        sha256, size = sha256_of(dump)
        target.store.put_file(target.key, dump)
    else:
        # Encrypted as it is read by the upload; the checksums are of what is stored.
        with dump.open("rb") as plain:
            try:
                sealed = encryption.Encrypting(plain, target.encryption_key, dump.stat().st_size)
            except encryption.EncryptionError as error:
                raise AgentError(str(error)) from None
            target.store.put_stream(target.key, sealed)  # type: ignore[arg-type]
        sha256, size = sealed.sha256, sealed.size
        extra = {
            "encryption": {
                "algorithm": encryption.ALGORITHM,
                "keyId": encryption.key_id(target.encryption_key),
            },
            "plaintextSize": dump.stat().st_size,
        }
    target.store.put_bytes(target.checksum_key, checksum_line(sha256, target.key))
    stored = {**metadata, **extra, "size": size, "sha256": sha256, "location": target.key}
    target.store.put_bytes(
        target.metadata_key, json.dumps(stored, indent=2, sort_keys=True).encode() + b"\n"
    )
    return stored


def compatible(engine: str, version: str, stored: Mapping[str, Any]) -> str | None:
    """Why a backup described by ``stored`` cannot be restored into ``engine`` at ``version``
    (None: it can). An engine reads what its own older majors wrote, never a newer major's."""
    if stored.get("engine") != engine:
        return f"it is a backup of {stored.get('engine')!r}, not of {engine!r}"
    have, want = major_version(str(stored.get("engineVersion", ""))), major_version(version)
    if have is not None and want is not None and have > want:
        return (
            f"it was taken from {engine} {stored.get('engineVersion')}, and {engine} {want} "
            f"cannot read what a newer major version wrote: restore into version {have} or later"
        )
    return None


def fetch(
    target: Target,
    into: Path,
    *,
    expected_sha256: str | None,
    engine: str,
    version: str,
    namespace: str | None = None,
) -> dict[str, Any]:
    """Download the backup into ``into``, only if it is whole and restorable; its metadata.
    ``namespace``: it is stored outside that namespace's prefix, and is restored only if its
    metadata says it was taken there."""
    # A damaged companion is a damaged backup: refused for good, with words, not a traceback.
    try:
        stored = json.loads(target.store.get_bytes(target.metadata_key))
    except ValueError as error:
        raise AgentError(f"{target.metadata_key} is not valid JSON: {error}") from error
    if not isinstance(stored, dict):
        raise AgentError(f"{target.metadata_key} is not a JSON object")
    if namespace is not None and stored.get("namespace") != namespace:
        raise AgentError(
            f"{target.key} is not under namespace {namespace!r}'s prefix and its metadata says "
            f"it was taken in namespace {stored.get('namespace')!r}: a Database restores only "
            "its own namespace's backups (copy it under this namespace's prefix to restore it "
            "here)"
        )
    if why := compatible(engine, version, stored):
        raise AgentError(f"{target.key} cannot be restored here: {why}")
    sealed_with = _sealed_with(target, stored)
    line = target.store.get_bytes(target.checksum_key).decode().split()
    recorded = line[0] if line else ""
    partial = into.with_name(into.name + ".partial")
    target.store.get_file(target.key, partial)
    sha256, size = sha256_of(partial)
    problems = []
    if size != stored.get("size"):
        problems.append(f"size {size} bytes, stored as {stored.get('size')}")
    for what, value in (
        (f"{target.checksum_key}", recorded),
        (f"{target.metadata_key}", stored.get("sha256")),
        ("the DatabaseBackup", expected_sha256),
    ):
        if value is not None and value != sha256:
            problems.append(f"sha256 {sha256}, {what} says {value}")
    if problems:
        partial.unlink(missing_ok=True)
        raise AgentError(
            f"{target.key} is corrupt or truncated ({'; '.join(problems)}): not restored"
        )
    if sealed_with is None:
        partial.replace(into)
        return {**stored, "verified": True}
    try:
        encryption.decrypt(partial, into, sealed_with)
    except encryption.EncryptionError as error:
        raise AgentError(f"{target.key} is not restored: {error}") from None
    finally:
        partial.unlink(missing_ok=True)
    return {**stored, "verified": True, "decrypted": True}


def _sealed_with(target: Target, stored: Mapping[str, Any]) -> bytes | None:
    """The key to decrypt the backup with (None: it is not encrypted); refused before any
    download when the Job has no key, or another one."""
    sealed = stored.get("encryption")
    if not sealed:
        return None
    wanted = sealed.get("keyId") if isinstance(sealed, dict) else None
    if target.encryption_key is None:
        raise AgentError(
            f"{target.key} is encrypted ({encryption.ALGORITHM}, key {wanted}): name the Secret "
            "that holds that key in the destination's encryption.keySecretRef"
        )
    have = encryption.key_id(target.encryption_key)
    if have != wanted:
        raise AgentError(
            f"{target.key} was encrypted with key {wanted}, and {target.encryption_secret} "
            f"holds key {have}: not restored; name the Secret with key {wanted} in "
            "encryption.keySecretRef"
        )
    return target.encryption_key


def delete(target: Target) -> dict[str, Any]:
    """Delete the backup and its companions."""
    target.store.delete([target.key, target.checksum_key, target.metadata_key])
    return {"deleted": target.key}


# --- the command line -----------------------------------------------------------------------------


def _report(path: str, result: Mapping[str, Any]) -> None:
    text = json.dumps(result, sort_keys=True, separators=(",", ":"))
    print(text, flush=True)
    # Not in a pod (a test, a person): the line above says it.
    with contextlib.suppress(OSError):
        Path(path).write_text(text[:4096])


def _upload(args: argparse.Namespace, target: Target) -> dict[str, Any]:
    version_file = Path(args.version_file)
    version = version_file.read_text().strip() if version_file.is_file() else ""
    metadata = {
        "engine": args.engine,
        "engineVersion": version,
        "namespace": args.namespace,
        "database": args.database,
        "backup": args.backup,
        "createdAt": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
    }
    return upload(target, Path(args.file), metadata)


def _fetch(args: argparse.Namespace, target: Target) -> dict[str, Any]:
    expected = args.sha256.removeprefix("sha256:") if args.sha256 else None
    return fetch(
        target,
        Path(args.to),
        expected_sha256=expected,
        engine=args.engine,
        version=args.version,
        namespace=args.namespace,
    )


def parser() -> argparse.ArgumentParser:
    root = argparse.ArgumentParser(
        prog="database-operator agent",
        description="Store, fetch and delete backups (run by the operator's Jobs; configured "
        "by the BACKUP_* environment variables).",
    )
    root.add_argument("--result-file", default=TERMINATION_LOG, help="where to write the result")
    commands = root.add_subparsers(dest="command", required=True)
    up = commands.add_parser("upload", help="store a dump with its checksum and metadata")
    up.add_argument("--file", required=True, help="the dump")
    up.add_argument("--version-file", required=True, help="the server's version, as dumped")
    up.add_argument("--engine", required=True, choices=[engine.value for engine in Engine])
    up.add_argument("--namespace", required=True)
    up.add_argument("--database", required=True)
    up.add_argument("--backup", required=True, help="the DatabaseBackup's name")
    up.set_defaults(run=_upload)
    get = commands.add_parser("fetch", help="download and verify a backup")
    get.add_argument("--to", required=True, help="where to put the verified file")
    get.add_argument("--sha256", help="the checksum its DatabaseBackup recorded")
    get.add_argument("--engine", required=True, choices=[engine.value for engine in Engine])
    get.add_argument("--version", required=True, help="the version it is restored into")
    get.add_argument(
        "--namespace",
        help="restore it only if its metadata says it was taken in this namespace (one stored "
        "outside the namespace's prefix)",
    )
    get.set_defaults(run=_fetch)
    rm = commands.add_parser("delete", help="delete a backup and its checksum and metadata")
    rm.set_defaults(run=lambda _args, target: delete(target))
    return root


def main(argv: Sequence[str] | None = None, environ: Mapping[str, str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        target = Target.from_env(os.environ if environ is None else environ)
        result = args.run(args, target)
    except AgentError as error:
        _report(args.result_file, {"error": str(error)})
        print(f"{args.command} failed: {error}", file=sys.stderr)
        return PERMANENT if error.permanent else TRANSIENT
    _report(args.result_file, result)
    return 0
