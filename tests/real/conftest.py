"""The real-node tier: a control plane and a real node on this host (tests/realnode.py), so pods
really run in containers, Services really route, DNS really resolves and volumes really mount.

It needs root and the host's kernel features (`python -m tests.realnode check` lists what is
missing), so it only runs when asked for: `make e2e-real` (``pytest -m real``), or a path under
tests/real/ on the command line. Every other run deselects it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.cluster import Cluster, connected, wait_for
from tests.controlplane import ROOT
from tests.objectstore import ObjectStore, object_store
from tests.realnode import RealCluster, build_images
from tests.realnode import real_cluster as running_real_cluster
from tests.realpods import (
    START_DEADLINE_S,
    Release,
    Samples,
    apply_samples,
    install_operator,
)

HERE = Path(__file__).resolve().parent
#: Fixed, so that a killed session's leftovers are found (and restored) by the next start; the
#: logs stay there until then.
WORKDIR = ROOT / ".local" / "real-tests"


def _asked_for(config: pytest.Config) -> bool:
    if "real" in (config.option.markexpr or ""):
        return True
    for arg in config.args:
        path = Path(arg.split("::")[0]).resolve()
        if path == HERE or HERE in path.parents:
            return True
    return False


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    ours = [item for item in items if HERE in item.path.parents]
    for item in ours:
        item.add_marker(pytest.mark.real)
    if ours and not _asked_for(config):
        config.hook.pytest_deselected(items=ours)
        items[:] = [item for item in items if HERE not in item.path.parents]


def pytest_collection_finish(session: pytest.Session) -> None:
    """Build the images (hack/images/, cached) before the first test: a first build takes
    minutes, which must not count against that test's timeout."""
    if session.config.option.collectonly:
        return
    if any(HERE in item.path.parents for item in session.items):
        build_images()


@pytest.fixture(scope="session")
def real_node() -> Iterator[RealCluster]:
    """The control plane and the real node, for the whole session: ``.node_name``,
    ``.host_ip``, ``.images`` (hack/images name -> reference), ``.kubeconfig``, ``.url``,
    ``.logs`` (component -> log file), ``.ctr()``. The host is restored after."""
    # No CRDs: the chart installs them, as it does for users.
    with running_real_cluster(WORKDIR, crds=False) as node:
        yield node


@pytest.fixture(scope="session")
def real_cluster(real_node: RealCluster) -> Iterator[Cluster]:
    """The real node's cluster as the other tiers' tests hold it."""
    assert real_node.plane is not None
    with connected(real_node.plane) as cluster:
        yield cluster


@pytest.fixture
def real_namespace(real_cluster: Cluster) -> Iterator[str]:
    """A fresh namespace for one test; the namespace controller removes it and its pods after."""
    with real_cluster.scratch_namespace("real") as name:
        # The ServiceAccount admission turns pods away until the controller made "default".
        wait_for(
            lambda: (
                real_cluster.core.list_namespaced_service_account(
                    name, field_selector="metadata.name=default"
                ).items
            ),
            timeout=30,
            what=f"ServiceAccount {name}/default",
        )
        yield name


# --- the operator, installed as users install it, and what the stories share ------------------


@pytest.fixture(scope="session")
def images(real_node: RealCluster) -> dict[str, str]:
    """hack/images name -> the reference imported on the node."""
    return dict(real_node.images)


@pytest.fixture(scope="session")
def operator_release(real_cluster: Cluster, images: dict[str, str]) -> Iterator[Release]:
    """The chart (`helm install`) with the operator's own image, built from the Dockerfile: two
    replicas, leader election, the webhooks behind their Service with the chart's certificates,
    an image policy (only localhost/ images, which are this host's) and a start deadline for
    the Jobs short enough for a test to wait for. Every Database test of the tier runs
    against it."""
    release = install_operator(
        real_cluster,
        images["operator"],
        "webhook.imageRegistries={localhost/}",
        f"jobs.startDeadline={START_DEADLINE_S}",
    )
    yield release
    for pod in release.pods():
        text = release.logs(pod.metadata.name, tail=100_000)
        (WORKDIR / "logs" / f"{pod.metadata.name}.log").write_text(text)


@pytest.fixture(scope="session")
def samples(real_cluster: Cluster, operator_release: Release, images: dict[str, str]) -> Samples:
    """config/samples in the namespace "samples", on this host's images, every one Active."""
    real_cluster.kubectl("create", "namespace", "samples")
    return apply_samples(real_cluster, "samples", images)


@pytest.fixture(scope="session")
def host_store(
    real_node: RealCluster, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ObjectStore]:
    """SeaweedFS on the host's own address, where the backup Jobs' pods reach it."""
    with object_store(tmp_path_factory.mktemp("objectstore"), address=real_node.host_ip) as store:
        yield store


@pytest.fixture
def user_namespace(real_namespace: str, operator_release: Release) -> str:
    """A fresh namespace of a user's, on a cluster where the operator runs."""
    return real_namespace


@pytest.fixture
def bucket(host_store: ObjectStore, real_cluster: Cluster, user_namespace: str) -> dict[str, Any]:
    """A bucket of this test's, the Secret with the store's key in the namespace, and the
    destination that names both."""
    name = f"backups-{user_namespace}"
    host_store.create_bucket(name)
    real_cluster.create_secret(
        user_namespace,
        "backup-credentials",
        {
            "AWS_ACCESS_KEY_ID": host_store.access_key,
            "AWS_SECRET_ACCESS_KEY": host_store.secret_key,
        },
    )
    return {
        "s3": {
            "endpoint": host_store.endpoint,
            "insecure": True,  # SeaweedFS on the host, without TLS
            "bucket": name,
            "path": "real",
            "credentialsSecretRef": {"name": "backup-credentials"},
        }
    }


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    """A failed story's report carries what the operator said and did in its namespace: the
    namespace's Events and the leader's log lines that name it (a CI log is all there is)."""
    report = yield
    release = item.funcargs.get("operator_release") if hasattr(item, "funcargs") else None
    namespace = item.funcargs.get("user_namespace") if hasattr(item, "funcargs") else None
    if report.when == "call" and report.failed and release and namespace:
        events = release.cluster.kubectl(
            "get", "events", "-n", namespace, "--sort-by=.lastTimestamp", check=False
        )
        report.sections.append(("Events", "\n".join(events.splitlines()[-40:])))
        try:
            said = release.logs(release.leader(), tail=20_000).splitlines()
        except Exception as error:  # a report must not fail on its extras
            said = [f"(no operator log: {error})"]
        ours = [line for line in said if namespace in line]
        report.sections.append(("operator", "\n".join(ours[-60:])))
    return report
