"""Shared fixtures: the real control plane (session-scoped) and a namespace per test."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

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
    with cluster.scratch_namespace("t") as name:
        yield name
