"""Shared fixtures: the real control plane (session-scoped) and a namespace per test."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
from kubernetes import client

from tests.cluster import Cluster
from tests.controlplane import install_crds, temporary_control_plane


@pytest.fixture(scope="session")
def cluster() -> Iterator[Cluster]:
    """etcd + kube-apiserver on loopback with the project's CRDs, for the whole session."""
    with temporary_control_plane() as plane:
        install_crds(plane.kubeconfig)
        connected = Cluster.connect(plane)
        try:
            yield connected
        finally:
            connected.api.close()


@pytest.fixture
def namespace(cluster: Cluster) -> Iterator[str]:
    """A fresh namespace for one test."""
    name = f"t-{uuid.uuid4().hex[:8]}"
    cluster.core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=name)))
    yield name
    # No namespace controller runs here, so the namespace stays Terminating; that is harmless.
    cluster.core.delete_namespace(name)
