"""Upgrade fixtures: an earlier version's CRDs and operator (run from a git worktree of its
commit), a mix of Databases it made, then this version's CRDs and operator; what changed is
measured from the API server's own objects and request counters.

One control plane for the module (the CRDs change under it, so not the session's); each earlier
version has its own namespace, and each operator watches only the namespace it is tested in.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.cluster import (
    Cluster,
    condition,
    own_cluster,
    play_kubelet,
    wait_for,
    write_requests,
)
from tests.controlplane import ROOT, install_crds
from tests.integration.conftest import OperatorProcess, start_operator
from tests.upgrade.versions import Version


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "tests/upgrade/" in str(item.path):
            item.add_marker(pytest.mark.integration)


#: Resync often, so that a write loop would show within the few seconds the tests wait.
RESYNC_S = 1.0
#: Resyncs of every Database the new operator must have done before writes are counted.
RESYNCS = 2


@contextlib.contextmanager
def checkout(version: Version) -> Iterator[Path]:
    """A detached git worktree of ``version``'s commit in a temporary folder, removed after."""
    found = subprocess.run(
        ["git", "-C", str(ROOT), "cat-file", "-e", f"{version.sha}^{{commit}}"],
        capture_output=True,
        check=False,
    )
    if found.returncode != 0:
        pytest.fail(
            f"commit {version.sha} ({version.name}) is not in this clone: the upgrade tests "
            "check out earlier versions from the repository's history, so they need all of it "
            "(git fetch --unshallow; on GitHub Actions, actions/checkout with fetch-depth: 0)"
        )
    folder = Path(tempfile.mkdtemp(prefix=f"upgrade-{version.name}-"))
    source = folder / "src"
    subprocess.run(
        [
            "git",
            "-C",
            str(ROOT),
            "worktree",
            "add",
            "--detach",
            "--quiet",
            str(source),
            version.sha,
        ],
        check=True,
    )
    try:
        yield source
    finally:
        subprocess.run(
            ["git", "-C", str(ROOT), "worktree", "remove", "--force", str(source)], check=False
        )
        shutil.rmtree(folder, ignore_errors=True)


def run_operator(
    cluster: Cluster, log: Path, namespace: str, source: Path | None = None
) -> OperatorProcess:
    """This version's operator, or (``source``: a checkout) an earlier one: the same Python and
    locked dependencies, its own package first on the path."""
    env: dict[str, str] = {}
    if source is not None:
        package = source / "operator"
        env["PYTHONPATH"] = os.pathsep.join(
            [str(package), *filter(None, [os.environ.get("PYTHONPATH")])]
        )
        where = subprocess.run(
            [sys.executable, "-c", "import database_operator; print(database_operator.__file__)"],
            env={**os.environ, **env},
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        assert where.startswith(str(package)), f"imported {where} instead of {package}"
    return start_operator(
        cluster,
        log,
        f"--namespace={namespace}",
        f"--resync-interval={RESYNC_S}",
        "--health-port=0",
        "--metrics-port=0",
        "--log-level=DEBUG",
        env=env,
    )


#: The user's own Secret of the Database that names one (read, never written).
USER_SECRET = "own-credentials"


def database_mix(version: Version) -> dict[str, dict[str, Any]]:
    """Every engine, with and without storage, both deletion policies (generated Secrets kept
    and owned), a user's Secret, and read replicas where ``version`` has them."""
    mix: dict[str, dict[str, Any]] = {
        "pg-kept": {"engine": "postgres", "storage": {"size": "1Gi"}},
        "pg-owned": {"engine": "postgres", "storage": {"size": "1Gi"}, "deletionPolicy": "Delete"},
        "pg-scratch": {"engine": "postgres"},
        "pg-user-secret": {
            "engine": "postgres",
            "storage": {"size": "1Gi"},
            "credentialsSecretRef": {"name": USER_SECRET},
        },
        "mysql-kept": {"engine": "mysql", "storage": {"size": "1Gi"}},
        "redis-scratch": {"engine": "redis"},
    }
    if version.replicas:
        mix["pg-replicas"] = {"engine": "postgres", "replicas": 2, "storage": {"size": "1Gi"}}
        mix["redis-replicas"] = {"engine": "redis", "replicas": 3}
    return mix


def snapshot(cluster: Cluster, namespace: str) -> dict[str, dict[str, Any]]:
    """Every Secret, PVC, Deployment and Service in ``namespace`` as "Kind/name": what an
    upgrade must not replace or change (uid, data, generation, pod template, selector)."""
    plain = cluster.api.sanitize_for_serialization
    found: dict[str, dict[str, Any]] = {}
    for secret in cluster.core.list_namespaced_secret(namespace).items:
        found[f"Secret/{secret.metadata.name}"] = {
            "uid": secret.metadata.uid,
            "data": secret.data,
            "annotations": secret.metadata.annotations or {},
        }
    for claim in cluster.core.list_namespaced_persistent_volume_claim(namespace).items:
        found[f"PersistentVolumeClaim/{claim.metadata.name}"] = {
            "uid": claim.metadata.uid,
            "spec": plain(claim.spec),
            "annotations": claim.metadata.annotations or {},
        }
    for deployment in cluster.apps.list_namespaced_deployment(namespace).items:
        found[f"Deployment/{deployment.metadata.name}"] = {
            "uid": deployment.metadata.uid,
            "generation": deployment.metadata.generation,
            "replicas": deployment.spec.replicas,
            "selector": plain(deployment.spec.selector),
            "template": plain(deployment.spec.template),
        }
    for service in cluster.core.list_namespaced_service(namespace).items:
        found[f"Service/{service.metadata.name}"] = {
            "uid": service.metadata.uid,
            "selector": service.spec.selector,
        }
    return found


def writes_since(cluster: Cluster, before: dict[str, float]) -> dict[str, int]:
    """Write requests served since ``before`` (a ``write_requests`` reading), by "VERB
    resource[/subresource]", those that did not change left out."""
    now = write_requests(cluster)
    return {
        key: int(count - before.get(key, 0.0))
        for key, count in now.items()
        if count > before.get(key, 0.0)
    }


@dataclass
class Upgrade:
    """One earlier version's Databases taken over by this version: before and after."""

    version: Version
    namespace: str
    databases: dict[str, dict[str, Any]]
    before: dict[str, dict[str, Any]]
    after: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: Writes the new operator made, from its start until every Database had resynced twice.
    writes: dict[str, int] = field(default_factory=dict)
    #: Each Database as the new operator left it.
    status: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: The new operator's log lines (parsed).
    log: list[dict[str, Any]] = field(default_factory=list)


def all_active(cluster: Cluster, namespace: str, names: list[str]) -> bool:
    """Play the kubelet for every Deployment made so far; whether every Database is Active."""
    for name in names:
        with contextlib.suppress(Exception):
            play_kubelet(cluster, namespace, name)
    return all(
        cluster.get_db(namespace, name).get("status", {}).get("phase") == "Active" for name in names
    )


def unsettled(
    cluster: Cluster, namespace: str, names: list[str], operator: OperatorProcess
) -> dict[str, Any]:
    """The Databases not yet reconciled by ``operator`` for their generation, Ready, and
    resynced RESYNCS times since: what each lacks."""
    lacking: dict[str, Any] = {}
    for name in names:
        db = cluster.get_db(namespace, name)
        status = db.get("status", {})
        ready = condition(db, "Ready") or {}
        if status.get("observedGeneration") != db["metadata"]["generation"]:
            lacking[name] = ("observedGeneration", status.get("observedGeneration"))
        elif ready.get("status") != "True":
            lacking[name] = ("Ready", ready.get("reason"), ready.get("message"))
        elif len(operator.resyncs(name)) < RESYNCS:
            lacking[name] = ("resyncs", len(operator.resyncs(name)))
    return lacking


def wait_settled(
    cluster: Cluster, namespace: str, names: list[str], operator: OperatorProcess, what: str
) -> None:
    try:
        wait_for(lambda: not unsettled(cluster, namespace, names, operator), timeout=90, what=what)
    except AssertionError as error:
        lacking = unsettled(cluster, namespace, names, operator)
        raise AssertionError(
            f"{error}: {lacking}; the operator's log ends: {operator.log_text()[-4000:]}"
        ) from None


class Upgrades:
    """The upgrade from each earlier version, done once (on first use) for the module."""

    def __init__(self, cluster: Cluster, folder: Path, stack: contextlib.ExitStack) -> None:
        self.cluster = cluster
        self.folder = folder
        self.stack = stack
        self.sources: dict[Version, Path] = {}
        self.done: dict[Version, Upgrade] = {}

    def source(self, version: Version) -> Path:
        if version not in self.sources:
            self.sources[version] = self.stack.enter_context(checkout(version))
        return self.sources[version]

    def operator(self, log: str, namespace: str, version: Version | None) -> OperatorProcess:
        source = None if version is None else self.source(version)
        running = run_operator(self.cluster, self.folder / log, namespace, source)
        self.stack.callback(running.stop)
        return running

    def of(self, version: Version) -> Upgrade:
        if version not in self.done:
            self.done[version] = self._upgrade(version)
        return self.done[version]

    def _upgrade(self, version: Version) -> Upgrade:
        cluster = self.cluster
        namespace = self.stack.enter_context(
            cluster.scratch_namespace(f"from-{version.name}".replace(".", ""))
        )
        install_crds(cluster.kubeconfig, self.source(version) / "config" / "crd" / "bases")
        earlier = self.operator(f"{version.name}.log", namespace, version)
        cluster.create_secret(
            namespace, USER_SECRET, {"username": "app", "password": "s3cret-of-the-user"}
        )
        mix = database_mix(version)
        for name, spec in mix.items():
            cluster.create_db(namespace, name, spec)
        names = list(mix)
        wait_for(
            lambda: all_active(cluster, namespace, names),
            timeout=90,
            what=f"{version.name}'s Databases Active",
        )
        assert earlier.stop() == 0, earlier.log_text()[-3000:]
        upgrade = Upgrade(version, namespace, mix, snapshot(cluster, namespace))

        counted = write_requests(cluster)
        install_crds(cluster.kubeconfig)
        current = self.operator(f"current-from-{version.name}.log", namespace, None)
        wait_settled(
            cluster,
            namespace,
            names,
            current,
            f"{version.name}'s Databases Ready under this version, {RESYNCS} resyncs each",
        )
        upgrade.writes = writes_since(cluster, counted)
        upgrade.after = snapshot(cluster, namespace)
        upgrade.status = {name: cluster.get_db(namespace, name) for name in names}
        upgrade.log = current.log_lines()
        assert current.stop() == 0, current.log_text()[-3000:]
        return upgrade


@pytest.fixture(scope="module")
def upgrade_cluster() -> Iterator[Cluster]:
    """A control plane of the module's own: the tests install other versions' CRDs."""
    with own_cluster() as cluster:
        yield cluster


@pytest.fixture(scope="module")
def upgrades(
    upgrade_cluster: Cluster, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Upgrades]:
    with contextlib.ExitStack() as stack:
        yield Upgrades(upgrade_cluster, tmp_path_factory.mktemp("upgrade-logs"), stack)


#: What the tests measured, for the summary at the end of the run.
FIGURES: list[str] = []


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if FIGURES:
        terminalreporter.section("upgrade figures")
        for line in FIGURES:
            terminalreporter.write_line(line)
