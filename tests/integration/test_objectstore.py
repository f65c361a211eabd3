"""The test object store is a real S3: objects go in and come back whole, boto3's multipart
uploads (how the backup agent sends a large dump) work, and a request not signed with the
store's secret key is refused."""

from __future__ import annotations

import dataclasses
import hashlib
import io
import os
import uuid

import pytest
from boto3.s3.transfer import TransferConfig
from botocore import UNSIGNED
from botocore.config import Config
from botocore.exceptions import ClientError

from tests.objectstore import ObjectStore

MIB = 1024 * 1024
#: What S3 answers, depending on the server, to a request signed with a wrong secret key.
REFUSED = {"SignatureDoesNotMatch", "InvalidAccessKeyId", "AccessDenied", "403"}


@pytest.fixture
def bucket(object_store: ObjectStore) -> str:
    """A fresh bucket for one test."""
    name = f"t-{uuid.uuid4().hex[:12]}"
    object_store.create_bucket(name)
    return name


def test_an_object_is_stored_listed_read_back_and_deleted(
    object_store: ObjectStore, bucket: str
) -> None:
    object_store.put(bucket, "backups/ns/db/first.pgdump", b"dump")
    object_store.put(bucket, "backups/ns/db/first.pgdump.sha256", b"sum")
    object_store.put(bucket, "elsewhere/other", b"other")

    assert object_store.keys(bucket, prefix="backups/") == [
        "backups/ns/db/first.pgdump",
        "backups/ns/db/first.pgdump.sha256",
    ]
    assert object_store.get(bucket, "backups/ns/db/first.pgdump") == b"dump"

    object_store.client().delete_object(Bucket=bucket, Key="backups/ns/db/first.pgdump")
    assert object_store.keys(bucket) == ["backups/ns/db/first.pgdump.sha256", "elsewhere/other"]


def test_a_multipart_upload_comes_back_byte_identical(
    object_store: ObjectStore, bucket: str
) -> None:
    data = os.urandom(12 * MIB + 123)
    parts = TransferConfig(multipart_threshold=5 * MIB, multipart_chunksize=5 * MIB)
    client = object_store.client()

    client.upload_fileobj(io.BytesIO(data), bucket, "big.bin", Config=parts)

    head = client.head_object(Bucket=bucket, Key="big.bin")
    # A multipart object's ETag is "<md5 of the parts' md5s>-<number of parts>".
    assert head["ETag"].strip('"').endswith("-3")
    assert head["ContentLength"] == len(data)
    assert hashlib.sha256(object_store.get(bucket, "big.bin")).digest() == (
        hashlib.sha256(data).digest()
    )


def test_a_request_signed_with_a_wrong_secret_key_is_refused(
    object_store: ObjectStore, bucket: str
) -> None:
    object_store.put(bucket, "secret", b"data")
    impostor = dataclasses.replace(object_store, secret_key="not-the-secret-key")

    with pytest.raises(ClientError) as refused:
        impostor.get(bucket, "secret")

    error = refused.value.response
    assert error["Error"]["Code"] in REFUSED
    assert error["ResponseMetadata"]["HTTPStatusCode"] == 403


def test_an_unknown_access_key_is_refused(object_store: ObjectStore, bucket: str) -> None:
    stranger = dataclasses.replace(object_store, access_key="AKNOBODY0000000000")

    with pytest.raises(ClientError) as refused:
        stranger.keys(bucket)

    assert refused.value.response["Error"]["Code"] in REFUSED
    assert refused.value.response["ResponseMetadata"]["HTTPStatusCode"] == 403


def test_an_unsigned_request_is_refused(object_store: ObjectStore, bucket: str) -> None:
    object_store.put(bucket, "secret", b"data")
    anonymous = object_store.connect(Config(signature_version=UNSIGNED))

    with pytest.raises(ClientError) as refused:
        anonymous.get_object(Bucket=bucket, Key="secret")

    assert refused.value.response["Error"]["Code"] in REFUSED
    assert refused.value.response["ResponseMetadata"]["HTTPStatusCode"] == 403
