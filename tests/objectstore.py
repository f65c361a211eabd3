"""A real S3-compatible object store on loopback for the backup tests: SeaweedFS (`weed mini`,
Apache-2.0) with an S3 identity that may do everything and one that may only read, so every
request is signed and checked, and an unsigned or wrongly signed one, a write without the right
to write, or one into a bucket that does not exist is refused as AWS would. Built by
hack/go-tool.sh (`make seaweedfs`) into bin/weed; the session fixture ``object_store`` in
tests/conftest.py starts one for a test run.

`weed mini` rather than `weed server -filer -s3`: the same master, volume server, filer and S3
gateway in one process, but made for small set-ups: one volume per bucket instead of seven, and
a SIGTERM usually stops it in about a second (`weed server` takes fifteen). Every port it would
open is named here: each is a free loopback port, or turned off (WebDAV, the admin UI, the
Iceberg and Lance catalogues).
"""

from __future__ import annotations

import json
import os
import secrets
import signal
import subprocess
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import boto3
from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError

from tests.controlplane import ROOT, _die_with_parent, free_port

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client

BINARY = ROOT / "bin" / "weed"
REGION = "us-east-1"
STARTUP_S = 60.0
#: A stop takes about a second; now and then the volume server waits for a connection that
#: never ends, and the data is thrown away anyway: then it is killed.
STOP_S = 5.0
#: The flag of every listener `weed mini` opens (each gets a free loopback port).
PORTS = tuple(
    f"{service}.{port}"
    for service in ("master", "volume", "filer", "s3", "admin")
    for port in ("port", "port.grpc")
)
#: Small volumes, a bounded count of them: files grow as data comes, so a run's disk use is
#: what it stored, and a bucket takes one volume (a collection) of its own.
VOLUME_SIZE_MB = 64
VOLUMES = 128
#: Variables `weed` would read as configuration (an extra S3 identity from AWS_ACCESS_KEY_ID,
#: buckets from S3_BUCKET, any setting as WEED_*): the store must not depend on the caller's.
FOREIGN_ENV = ("AWS_", "S3_", "WEED_")


def identities(
    access_key: str, secret_key: str, reader: tuple[str, str] | None = None
) -> dict[str, object]:
    """The S3 identity configuration (`-s3.config`): one user allowed everything the tests do,
    and a ``reader`` (access key, secret key) who may read and list, not write or delete."""
    users: list[dict[str, object]] = [
        {
            "name": "tests",
            "credentials": [{"accessKey": access_key, "secretKey": secret_key}],
            "actions": ["Admin", "Read", "Write", "List", "Tagging"],
        }
    ]
    if reader is not None:
        credentials = [{"accessKey": reader[0], "secretKey": reader[1]}]
        users.append({"name": "reader", "credentials": credentials, "actions": ["Read", "List"]})
    return {"identities": users}


def command(
    workdir: Path, ports: dict[str, int], s3_config: Path, address: str = "127.0.0.1"
) -> list[str]:
    """The `weed mini` command line: on ``address`` only (loopback by default), data under
    ``workdir``."""
    flags = {
        "dir": str(workdir / "data"),
        "ip": address,
        "ip.bind": address,
        **ports,
        "s3.config": str(s3_config),
        # AWS never creates a bucket on upload: a missing bucket is an error there, so here too.
        "s3.autoCreateBucket": "false",
        "master.volumeSizeLimitMB": VOLUME_SIZE_MB,
        "volume.max": VOLUMES,
        # No other volume server to hand over to: stop at once.
        "volume.preStopSeconds": 0,
        # No report to the project's telemetry server (and no network to reach it anyway).
        "master.telemetry": "false",
        "webdav": "false",
        "admin.ui": "false",
        "admin.port.legacy": 0,
        "s3.port.iceberg": 0,
        "s3.port.lance": 0,
    }
    return [
        str(BINARY),
        "-logtostderr",
        f"-config_dir={workdir}",
        "mini",
        *(f"-{name}={value}" for name, value in flags.items()),
    ]


@dataclass
class ObjectStore:
    """A running store and the one identity that may use it."""

    endpoint: str  # http://ADDRESS:PORT
    access_key: str
    secret_key: str
    region: str = REGION
    #: The keys of the identity that may read and list only.
    reader_access_key: str = ""
    reader_secret_key: str = ""
    #: Every port its process listens on (a killed one's sockets are named by them).
    ports: dict[str, int] = field(default_factory=dict, repr=False, compare=False)
    _client: S3Client | None = field(default=None, init=False, repr=False, compare=False)

    def client(self) -> S3Client:
        """A boto3 S3 client for this store, with path-style addressing (bucket names are not
        host names on loopback). boto3's clients are thread-safe: one serves every caller."""
        if self._client is None:
            self._client = self.connect(Config())
        return self._client

    def connect(self, config: Config) -> S3Client:
        """A new client with botocore settings of the caller's (timeouts, retries), merged
        with path-style addressing."""
        # A session of its own: credentials and region from here, never from the caller's
        # environment or ~/.aws.
        session = boto3.session.Session(
            aws_access_key_id=self.access_key,
            aws_secret_access_key=self.secret_key,
            region_name=self.region,
        )
        path_style = Config(s3={"addressing_style": "path"})
        return session.client("s3", endpoint_url=self.endpoint, config=path_style.merge(config))

    def create_bucket(self, name: str) -> None:
        self.client().create_bucket(Bucket=name)

    def keys(self, bucket: str, prefix: str = "") -> list[str]:
        """Every key in ``bucket`` under ``prefix``, in S3's (lexicographic) order."""
        pages = (
            self.client().get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix)
        )
        return [item["Key"] for page in pages for item in page.get("Contents", [])]

    def get(self, bucket: str, key: str) -> bytes:
        return self.client().get_object(Bucket=bucket, Key=key)["Body"].read()

    def put(self, bucket: str, key: str, data: bytes) -> None:
        self.client().put_object(Bucket=bucket, Key=key, Body=data)

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None


def _wait_until_answering(
    store: ObjectStore, process: subprocess.Popen[bytes], log_path: Path
) -> None:
    """Until a signed request is answered: the gateway listens and knows the identity."""
    # No retries of its own, short timeouts: this loop is the retry.
    probe = store.connect(Config(retries={"max_attempts": 1}, connect_timeout=1, read_timeout=5))
    deadline = time.monotonic() + STARTUP_S
    try:
        while True:
            try:
                probe.list_buckets()
                return
            except (BotoCoreError, ClientError):
                if process.poll() is not None or time.monotonic() > deadline:
                    tail = log_path.read_text(errors="replace")[-3000:]
                    raise RuntimeError(
                        f"SeaweedFS did not start (log {log_path}):\n{tail}"
                    ) from None
                time.sleep(0.2)
    finally:
        probe.close()


def start_object_store(
    workdir: Path, address: str = "127.0.0.1", *, detached: bool = False
) -> tuple[ObjectStore, subprocess.Popen[bytes]]:
    """SeaweedFS on ``address`` with a generated access key, its data and log (weed.log) in
    ``workdir``, once it answers; and its process. Killed by the kernel if this process dies
    first, unless ``detached`` (`make demo REAL=1`: `make cluster-down` stops it)."""
    if not BINARY.is_file():
        raise FileNotFoundError(f"{BINARY} is missing: run `make seaweedfs`")
    workdir.mkdir(parents=True, exist_ok=True)
    (workdir / "data").mkdir(exist_ok=True)
    ports = {name: free_port() for name in PORTS}
    store = ObjectStore(
        endpoint=f"http://{address}:{ports['s3.port']}",
        access_key="AK" + secrets.token_hex(9).upper(),
        secret_key=secrets.token_urlsafe(30),
        reader_access_key="RK" + secrets.token_hex(9).upper(),
        reader_secret_key=secrets.token_urlsafe(30),
        ports=ports,
    )
    s3_config = workdir / "s3.json"
    s3_config.touch(mode=0o600)
    reader = (store.reader_access_key, store.reader_secret_key)
    s3_config.write_text(json.dumps(identities(store.access_key, store.secret_key, reader)))
    env = {name: value for name, value in os.environ.items() if not name.startswith(FOREIGN_ENV)}
    # weed reads *.toml from -config_dir, ., ~/.seaweedfs and /etc/seaweedfs: the first three
    # are the (empty of them) workdir, so a developer's own set-up is not read.
    env["HOME"] = str(workdir)
    log_path = workdir / "weed.log"
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            command(workdir, ports, s3_config, address),
            cwd=workdir,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=detached,
            preexec_fn=None if detached else _die_with_parent,  # noqa: PLW1509 - only prctl
        )
    try:
        _wait_until_answering(store, process, log_path)
    except BaseException:
        _stop(process, ports.values())
        raise
    return store, process


@contextmanager
def object_store(workdir: Path, address: str = "127.0.0.1") -> Iterator[ObjectStore]:
    """SeaweedFS on ``address`` (loopback by default; the host's own address for pods on a real
    node) with a generated access key, its data and log (weed.log) in ``workdir``; stopped on
    exit, and killed by the kernel if the test process dies first."""
    store, process = start_object_store(workdir, address)
    try:
        yield store
    finally:
        store.close()
        _stop(process, store.ports.values())


def _stop(process: subprocess.Popen[bytes], ports: Iterable[int]) -> None:
    process.send_signal(signal.SIGTERM)
    try:
        process.wait(timeout=STOP_S)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
        _remove_sockets(ports)


def _remove_sockets(ports: Iterable[int]) -> None:
    """What a killed `weed` leaves: its Unix sockets between services, named by their ports."""
    for port in ports:
        for path in Path("/tmp").glob(f"seaweedfs-*-{port}.sock"):  # noqa: S108 - weed names it
            path.unlink(missing_ok=True)
