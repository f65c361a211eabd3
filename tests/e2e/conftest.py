"""End-to-end fixtures: a full local cluster (controller-manager, scheduler, a kwok node), so
Deployments really get ReplicaSets and Pods, pods really get scheduled and become Ready, and the
garbage collector follows owner references."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.cluster import Cluster, connected
from tests.controlplane import ControlPlane, install_crds
from tests.integration.conftest import OperatorProcess, start_operator


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "tests/e2e/" in str(item.path):
            item.add_marker(pytest.mark.e2e)


@pytest.fixture(scope="session")
def full_cluster() -> Iterator[Cluster]:
    workdir = Path(tempfile.mkdtemp(prefix="database-operator-e2e-"))
    try:
        with ControlPlane(workdir, full=True) as plane:
            install_crds(plane.kubeconfig)
            plane.wait_for_node_ready()
            with connected(plane) as cluster:
                yield cluster
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


@pytest.fixture
def e2e_namespace(full_cluster: Cluster) -> Iterator[str]:
    # The namespace controller runs here: the namespace and everything in it go away after.
    with full_cluster.scratch_namespace("e2e") as name:
        yield name


@pytest.fixture
def e2e_operator(
    full_cluster: Cluster, e2e_namespace: str, tmp_path: Path
) -> Iterator[OperatorProcess]:
    running = start_operator(
        full_cluster,
        tmp_path / "operator.log",
        f"--namespace={e2e_namespace}",
        "--resync-interval=2",
        "--health-port=0",
        "--metrics-port=0",
        "--log-level=DEBUG",
    )
    yield running
    assert running.stop() == 0, running.log_text()[-3000:]
