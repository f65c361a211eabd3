"""The backup agent against a real S3 store (SeaweedFS, tests/objectstore.py) that refuses it,
lacks the bucket, is not there, or goes away mid-transfer: which failures end its Job at once
(exit 3, a retry cannot cure them) and which are worth another pod (exit 1).

The agent runs as the backup, restore and delete Jobs run it — `database-operator agent
upload | fetch | delete` in a process of its own — with the env jobs.destination_env builds for
an S3 destination, its secretKeyRefs resolved from the keys the test holds. Run with ``-s`` to
see how long each took to give up.
"""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import json
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from database_operator.api.backup import ACCESS_KEY_ID, SECRET_ACCESS_KEY, BackupDestination
from database_operator.backups import agent, jobs
from database_operator.backups.encryption import key_id
from tests.controlplane import free_port
from tests.tcpcut import cutting_proxy

if TYPE_CHECKING:
    from tests.objectstore import ObjectStore

#: The destination's credentialsSecretRef.
SECRET = "backup-store"
KEY = "faults/prod/shop/shop-1.rdb"
#: Large enough to be cut mid-transfer below, small enough to be quick.
DUMP = bytes(range(256)) * 4096
SHA256 = hashlib.sha256(DUMP).hexdigest()
WRONG_SECRET_KEY = "wrong-secret-key-of-the-test"
AGENT_TIMEOUT_S = 120


@dataclass(frozen=True)
class Ran:
    """One run of the agent: its exit status, the error of its result, how long it took."""

    status: int
    error: str
    stderr: str
    seconds: float


@dataclass(frozen=True)
class Agent:
    """The agent of a Job whose destination is ``bucket`` at ``endpoint``, with ``keys``."""

    work: Path
    bucket: str
    endpoint: str
    keys: dict[str, str] = field(repr=False)
    #: More of the destination's s3 settings (e.g. serverSideEncryption).
    s3: dict[str, str] = field(default_factory=dict)
    #: The client-side encryption key's Secret value (base64), if the destination names one.
    encryption_key: str | None = field(default=None, repr=False)

    def env(self) -> dict[str, str]:
        encryption = {"keySecretRef": {"name": "backup-key"}} if self.encryption_key else None
        destination = BackupDestination.model_validate(
            {
                "s3": {
                    "endpoint": self.endpoint,
                    "bucket": self.bucket,
                    "credentialsSecretRef": {"name": SECRET},
                    **self.s3,
                },
                "encryption": encryption,
            }
        )
        resolved: dict[str, str] = {}
        for var in jobs.destination_env(destination, KEY):
            if "value" in var:
                resolved[var["name"]] = var["value"]
            else:
                ref = var["valueFrom"]["secretKeyRef"]
                assert ref["name"] == SECRET
                resolved[var["name"]] = self.keys[ref["key"]]
        if self.encryption_key is not None:  # the Secret's volume, mounted
            key_file = self.work / f"key-{key_id(base64.b64decode(self.encryption_key))}"
            key_file.write_text(self.encryption_key)
            resolved["BACKUP_ENCRYPTION_KEY_FILE"] = str(key_file)
        # Nothing of this machine's AWS set-up: only what a Job's pod has.
        home = self.work / "home"
        home.mkdir(exist_ok=True)
        return resolved | {
            "PATH": os.environ["PATH"],
            "HOME": str(home),
            "AWS_EC2_METADATA_DISABLED": "true",
        }

    def run(self, command: str, *args: str) -> Ran:
        result_file = self.work / "termination-log"
        result_file.unlink(missing_ok=True)
        started = time.monotonic()
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "database_operator.cli",
                "agent",
                f"--result-file={result_file}",
                command,
                *args,
            ],
            env=self.env(),
            cwd=self.work,
            capture_output=True,
            text=True,
            timeout=AGENT_TIMEOUT_S,
            check=False,
        )
        seconds = time.monotonic() - started
        result = json.loads(result_file.read_text()) if result_file.exists() else {}
        return Ran(done.returncode, result.get("error", ""), done.stderr, seconds)

    def upload(self) -> Ran:
        (self.work / "backup.rdb").write_bytes(DUMP)
        (self.work / "engine-version").write_text("7.2.4\n")
        return self.run(
            "upload",
            f"--file={self.work / 'backup.rdb'}",
            f"--version-file={self.work / 'engine-version'}",
            "--engine=redis",
            "--namespace=prod",
            "--database=shop",
            "--backup=shop-1",
        )

    @property
    def restored(self) -> Path:
        return self.work / "restore" / "backup.rdb"

    def fetch(self) -> Ran:
        self.restored.parent.mkdir(exist_ok=True)
        return self.run(
            "fetch", f"--to={self.restored}", "--engine=redis", "--version=7", f"--sha256={SHA256}"
        )

    def delete(self) -> Ran:
        return self.run("delete")

    def command(self, name: str) -> Ran:
        return {"upload": self.upload, "fetch": self.fetch, "delete": self.delete}[name]()

    def but(self, **changes: Any) -> Agent:
        return dataclasses.replace(self, **changes)


COMMANDS = ["upload", "fetch", "delete"]


@pytest.fixture
def bucket(object_store: ObjectStore) -> str:
    """A fresh bucket for one test."""
    name = f"f-{uuid.uuid4().hex[:12]}"
    object_store.create_bucket(name)
    return name


@pytest.fixture
def stored(object_store: ObjectStore, bucket: str) -> list[str]:
    """A backup in the bucket, as the agent's upload stores it (the object, its checksum and
    its metadata); their keys."""
    metadata = {"engine": "redis", "engineVersion": "7.2.4", "size": len(DUMP), "sha256": SHA256}
    object_store.put(bucket, KEY, DUMP)
    object_store.put(bucket, f"{KEY}.sha256", f"{SHA256}  shop-1.rdb\n".encode())
    object_store.put(bucket, f"{KEY}.json", json.dumps(metadata).encode())
    return sorted([KEY, f"{KEY}.sha256", f"{KEY}.json"])


@pytest.fixture
def cli(object_store: ObjectStore, bucket: str, stored: list[str], tmp_path: Path) -> Agent:
    """The agent with the store's keys, its bucket holding a backup."""
    keys = {ACCESS_KEY_ID: object_store.access_key, SECRET_ACCESS_KEY: object_store.secret_key}
    return Agent(tmp_path, bucket, object_store.endpoint, keys)


def figures(what: str, ran: Ran) -> None:
    """How long the agent took to give up, and what it said (pytest -s shows it)."""
    print(f"\n[figures] {what}: exit {ran.status} after {ran.seconds:.2f} s: {ran.error}")


def test_the_agent_stores_fetches_and_deletes_with_the_right_keys(
    cli: Agent, object_store: ObjectStore, bucket: str
) -> None:
    """The other tests' baseline: with these settings every command works."""
    assert cli.fetch().status == 0
    assert cli.restored.read_bytes() == DUMP
    assert cli.delete().status == 0
    assert object_store.keys(bucket) == []
    assert cli.upload().status == 0
    assert object_store.get(bucket, KEY) == DUMP


def test_with_server_side_encryption_the_store_encrypts_the_backup_and_its_companions(
    cli: Agent, object_store: ObjectStore, bucket: str
) -> None:
    """spec...s3.serverSideEncryption AES256: every object the upload stores is asked to be
    encrypted at rest, and the store (SeaweedFS's SSE-S3) says it is; a restore reads it back
    as it was, with nothing more to say."""
    encrypted = cli.but(s3={"serverSideEncryption": "AES256"})
    assert encrypted.env()["BACKUP_S3_SERVER_SIDE_ENCRYPTION"] == "AES256"
    assert encrypted.upload().status == 0
    client = object_store.client()
    for key in (KEY, f"{KEY}.sha256", f"{KEY}.json"):
        assert client.head_object(Bucket=bucket, Key=key).get("ServerSideEncryption") == "AES256"
    assert encrypted.fetch().status == 0
    assert encrypted.restored.read_bytes() == DUMP
    # Without the setting: the bucket's default (none here), as before.
    assert cli.upload().status == 0
    assert client.head_object(Bucket=bucket, Key=KEY).get("ServerSideEncryption") is None


def new_key() -> str:
    return base64.b64encode(os.urandom(32)).decode()


def test_an_encrypted_backup_is_ciphertext_in_the_store_and_only_its_key_restores_it(
    cli: Agent, object_store: ObjectStore, bucket: str
) -> None:
    """The store holds no byte of the dump in clear; a fetch without the key, or with another
    one, is refused for good before anything is downloaded, naming the key the backup needs; a
    stored byte changed is refused by the checksums, and, were they rewritten too, by GCM's tag."""
    key = new_key()
    sealed = cli.but(encryption_key=key)
    assert sealed.upload().status == 0
    stored = object_store.get(bucket, KEY)
    assert DUMP not in stored and DUMP[:16] not in stored
    metadata = json.loads(object_store.get(bucket, f"{KEY}.json"))
    needed = key_id(base64.b64decode(key))
    assert metadata["encryption"] == {"algorithm": "AES-256-GCM", "keyId": needed}
    assert metadata["sha256"] == hashlib.sha256(stored).hexdigest()
    cli.restored.parent.mkdir(exist_ok=True)
    args = ["fetch", f"--to={cli.restored}", "--engine=redis", "--version=7"]

    for what, agent_ in (("no key", cli), ("another key", cli.but(encryption_key=new_key()))):
        refused = agent_.run(*args)
        figures(f"an encrypted backup fetched with {what}", refused)
        assert refused.status == agent.PERMANENT, refused.stderr
        assert f"key {needed}" in refused.error
        assert key not in refused.error + refused.stderr
        assert not list(cli.restored.parent.iterdir()), "nothing downloaded"

    assert sealed.run(*args).status == 0
    assert cli.restored.read_bytes() == DUMP
    cli.restored.unlink()

    # One byte changed, and the companions made to agree: only the tag can tell.
    tampered = bytearray(stored)
    tampered[40] ^= 1
    digest = hashlib.sha256(tampered).hexdigest()
    object_store.put(bucket, KEY, bytes(tampered))
    object_store.put(bucket, f"{KEY}.sha256", f"{digest}  shop-1.rdb\n".encode())
    object_store.put(bucket, f"{KEY}.json", json.dumps(metadata | {"sha256": digest}).encode())
    refused = sealed.run(*args)
    assert refused.status == agent.PERMANENT, refused.stderr
    assert "authentication tag does not verify" in refused.error
    assert not list(cli.restored.parent.iterdir()), "nothing decrypted is handed on"


def test_a_backup_another_namespace_took_is_refused_for_good_and_fetches_nothing(
    cli: Agent,
) -> None:
    """A restore from outside the Database's namespace's prefix passes --namespace: the backup
    is fetched only if its metadata names that namespace (a shared bucket holds every
    namespace's backups; one namespace must not read another's)."""
    assert cli.upload().status == 0  # metadata: taken in namespace "prod"
    cli.restored.parent.mkdir(exist_ok=True)
    args = ["fetch", f"--to={cli.restored}", "--engine=redis", "--version=7"]
    refused = cli.run(*args, "--namespace=staging")
    figures("another namespace's backup", refused)
    assert refused.status == agent.PERMANENT, refused.stderr
    assert "taken in namespace 'prod'" in refused.error
    assert "namespace 'staging'" in refused.error
    assert not cli.restored.exists()
    assert not list(cli.restored.parent.iterdir()), "nothing fetched, not even in part"
    assert cli.run(*args, "--namespace=prod").status == 0
    assert cli.restored.read_bytes() == DUMP


# --- for good: the Job fails on its first pod ----------------------------------------------------


@pytest.mark.parametrize("command", COMMANDS)
def test_a_wrong_secret_key_fails_every_command_for_good_and_names_the_secret_to_fix(
    command: str, cli: Agent, object_store: ObjectStore, bucket: str, stored: list[str]
) -> None:
    wrong = cli.but(keys=cli.keys | {SECRET_ACCESS_KEY: WRONG_SECRET_KEY})

    ran = wrong.command(command)

    figures(f"{command} with a wrong secret key", ran)
    assert ran.status == agent.PERMANENT, ran.stderr
    assert f"s3://{bucket}: the store does not accept the credentials (SignatureDoesNotMatch" in (
        ran.error
    )
    assert f"check {ACCESS_KEY_ID} and {SECRET_ACCESS_KEY} in the Secret {SECRET}" in ran.error
    for secret in (WRONG_SECRET_KEY, object_store.secret_key):
        assert secret not in ran.error + ran.stderr
    assert object_store.keys(bucket) == stored, "nothing stored, nothing deleted"
    assert not cli.restored.exists()


def test_an_access_key_the_store_does_not_know_fails_an_upload_for_good(
    cli: Agent, object_store: ObjectStore, bucket: str, stored: list[str]
) -> None:
    ran = cli.but(keys=cli.keys | {ACCESS_KEY_ID: "AKNOBODYKNOWS"}).upload()

    figures("upload with an unknown access key", ran)
    assert ran.status == agent.PERMANENT, ran.stderr
    assert "does not accept the credentials (InvalidAccessKeyId" in ran.error
    assert f"in the Secret {SECRET}" in ran.error


@pytest.mark.parametrize("command", ["upload", "delete"])
def test_keys_that_may_only_read_fail_a_write_for_good_and_leave_the_backup(
    command: str, cli: Agent, object_store: ObjectStore, bucket: str, stored: list[str]
) -> None:
    reader = cli.but(
        keys={
            ACCESS_KEY_ID: object_store.reader_access_key,
            SECRET_ACCESS_KEY: object_store.reader_secret_key,
        }
    )
    assert reader.fetch().status == 0, "they may read"

    ran = reader.command(command)

    figures(f"{command} with keys that may only read", ran)
    assert ran.status == agent.PERMANENT, ran.stderr
    assert "access denied (AccessDenied" in ran.error
    assert f"may read, write and delete objects in the bucket {bucket}" in ran.error
    # A delete the store refused key by key (a 200 that lists errors) is no success.
    assert object_store.keys(bucket) == stored


@pytest.mark.parametrize("command", COMMANDS)
def test_a_bucket_that_does_not_exist_fails_every_command_for_good_and_is_named(
    command: str, cli: Agent, object_store: ObjectStore
) -> None:
    missing = f"gone-{uuid.uuid4().hex[:12]}"

    ran = cli.but(bucket=missing).command(command)

    figures(f"{command} into a missing bucket", ran)
    assert ran.status == agent.PERMANENT, ran.stderr
    assert f"the bucket {missing} does not exist at {object_store.endpoint} (NoSuchBucket" in (
        ran.error
    )
    assert "create it, or correct the destination's s3.bucket" in ran.error


def test_a_backup_that_is_not_in_the_bucket_fails_the_fetch_for_good(
    cli: Agent, object_store: ObjectStore, bucket: str
) -> None:
    object_store.client().delete_object(Bucket=bucket, Key=f"{KEY}.json")

    ran = cli.fetch()

    figures("fetch of a backup without metadata", ran)
    assert ran.status == agent.PERMANENT, ran.stderr
    assert f"downloading {KEY}.json from s3://{bucket}: the object does not exist" in ran.error


def test_an_endpoint_the_api_accepts_but_botocore_cannot_use_fails_for_good(cli: Agent) -> None:
    # A host name with an underscore: the API's pattern lets it through, botocore refuses it
    # before any request.
    endpoint = "http://seaweed_fs.storage:8333"

    ran = cli.but(endpoint=endpoint).upload()

    figures("upload to an endpoint botocore refuses", ran)
    assert ran.status == agent.PERMANENT, ran.stderr
    assert f"Invalid endpoint: {endpoint}" in ran.error
    assert f"check s3.endpoint ({endpoint})" in ran.error


def test_an_https_endpoint_on_a_store_without_tls_fails_for_good(cli: Agent) -> None:
    endpoint = cli.endpoint.replace("http://", "https://")

    ran = cli.but(endpoint=endpoint).fetch()

    figures("fetch over https from a store without TLS", ran)
    assert ran.status == agent.PERMANENT, ran.stderr
    assert "WRONG_VERSION_NUMBER" in ran.error
    assert "one without TLS, an http:// s3.endpoint" in ran.error


# --- worth a retry: the Job runs another pod -----------------------------------------------------


@pytest.mark.parametrize("command", COMMANDS)
def test_a_store_nobody_listens_on_is_worth_a_retry_for_every_command(
    command: str, cli: Agent
) -> None:
    nowhere = f"http://127.0.0.1:{free_port()}"

    ran = cli.but(endpoint=nowhere).command(command)

    figures(f"{command} with nobody listening", ran)
    assert ran.status == agent.TRANSIENT, ran.stderr
    assert f'Could not connect to the endpoint URL: "{nowhere}/' in ran.error
    assert "worth a retry" in ran.error


@pytest.fixture
def cut(cli: Agent) -> Iterator[Agent]:
    """The agent, through a proxy that cuts every connection after 256 KiB: requests and
    answers smaller than that pass, the backup itself (1 MiB) never does."""
    with cutting_proxy(cli.endpoint, limit=256 * 1024) as proxy:
        yield cli.but(endpoint=proxy.endpoint)
        assert proxy.cuts > 0, "a transfer was cut"


@pytest.mark.parametrize("command", ["upload", "fetch"])
def test_a_store_that_goes_away_mid_transfer_is_worth_a_retry(
    command: str, cut: Agent, object_store: ObjectStore, bucket: str, stored: list[str]
) -> None:
    if command == "upload":
        object_store.client().delete_objects(
            Bucket=bucket, Delete={"Objects": [{"Key": key} for key in stored]}
        )

    ran = cut.command(command)

    figures(f"{command} cut mid-transfer", ran)
    assert ran.status == agent.TRANSIENT, ran.stderr
    assert "worth a retry" in ran.error
    assert not cut.restored.exists(), "no half of a backup is handed on"
    if command == "upload":
        assert f"{KEY}.json" not in object_store.keys(bucket), "no metadata of a partial upload"


def test_an_encrypted_dump_larger_than_a_part_is_uploaded_in_parts_and_restored_whole(
    cli: Agent, object_store: ObjectStore, bucket: str
) -> None:
    """Past boto3's multipart threshold (8 MB) the encrypting stream, which cannot seek, is
    read once, part by part: what is stored is what was hashed, and it decrypts whole."""
    sealed = cli.but(encryption_key=new_key())
    dump = os.urandom(20 * 2**20 + 17)
    (sealed.work / "big.rdb").write_bytes(dump)
    (sealed.work / "engine-version").write_text("7.2.4\n")
    uploaded = sealed.run(
        "upload", f"--file={sealed.work / 'big.rdb'}",
        f"--version-file={sealed.work / 'engine-version'}", "--engine=redis",
        "--namespace=prod", "--database=shop", "--backup=shop-1",
    )  # fmt: skip
    assert uploaded.status == 0, uploaded.stderr
    data = object_store.get(bucket, KEY)
    assert len(data) == len(dump) + 36
    metadata = json.loads(object_store.get(bucket, f"{KEY}.json"))
    assert metadata["sha256"] == hashlib.sha256(data).hexdigest()
    cli.restored.parent.mkdir(exist_ok=True)
    fetched = sealed.run("fetch", f"--to={cli.restored}", "--engine=redis", "--version=7")
    assert fetched.status == 0, fetched.stderr
    assert cli.restored.read_bytes() == dump
