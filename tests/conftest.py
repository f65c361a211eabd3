"""Shared fixtures: the real control plane (session-scoped), a namespace per test, and an S3
object store (session-scoped)."""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from tests.cluster import Cluster, own_cluster

if TYPE_CHECKING:
    from tests.objectstore import ObjectStore


@pytest.fixture(scope="session")
def cluster() -> Iterator[Cluster]:
    """etcd + kube-apiserver on loopback with the project's CRDs, for the whole session."""
    with own_cluster(crds=True) as cluster:
        yield cluster


@pytest.fixture
def namespace(cluster: Cluster) -> Iterator[str]:
    """A fresh namespace for one test."""
    with cluster.scratch_namespace("t") as name:
        yield name


@pytest.fixture(scope="session")
def object_store() -> Iterator[ObjectStore]:
    """SeaweedFS's S3 on loopback with one access key (`make seaweedfs`), for the whole session;
    its data in a temporary directory removed afterwards. Tests share it: each its own bucket."""
    # Imported here: boto3 only for the sessions that use the store.
    from tests.objectstore import object_store as running_object_store

    with (
        tempfile.TemporaryDirectory(prefix="objectstore-") as workdir,
        running_object_store(Path(workdir)) as store,
    ):
        yield store
