"""The fault suite: the operator heals from every fault an unreliable cluster throws at it.

On a control plane of its own (so that killing kube-apiserver disturbs no other test), and
bounded in time and count. `make chaos` runs the same tests at full length (FAULTS_SCALE).

- a finalizer removal refused (one 409, or a run of 500s longer than any client's retries);
- kill -9 of the operator during a burst of creates;
- kube-apiserver killed and started again under a running operator;
- a proxy that fails a share of writes (some after passing them on), resets connections, cuts
  watches and adds latency, while Databases are created, changed and deleted.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from tests.cluster import Cluster, connected, request_counts, wait_for
from tests.controlplane import ControlPlane, install_crds
from tests.faults import Chaos, FaultProxy, fail_deletes, fail_finalizer_removal
from tests.integration.conftest import OperatorProcess, start_operator

#: `make chaos` sets FAULTS_SCALE (e.g. 20): more Databases, longer chaos.
SCALE = int(os.environ.get("FAULTS_SCALE", "1"))
RESYNC_S = 2.0
#: Retries double from 0.5 s to this cap: the suite must not wait a minute per fault.
RETRY_CAP_S = 2.0
ENGINES = ("postgres", "mysql", "redis")


@pytest.fixture(scope="module")
def plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControlPlane]:
    """A control plane of the fault suite's own."""
    with ControlPlane(tmp_path_factory.mktemp("faults")) as started:
        install_crds(started.kubeconfig)
        yield started


@pytest.fixture(scope="module")
def faulty(plane: ControlPlane) -> Iterator[Cluster]:
    with connected(plane) as cluster:
        yield cluster


@pytest.fixture
def ns(faulty: Cluster) -> Iterator[str]:
    with faulty.scratch_namespace("f") as name:
        yield name


@pytest.fixture
def proxy(plane: ControlPlane, tmp_path: Path) -> Iterator[FaultProxy]:
    with FaultProxy(plane, tmp_path) as running:
        yield running


def run_operator(
    cluster: Cluster, namespace: str, log: Path, kubeconfig: Path | None = None
) -> OperatorProcess:
    return start_operator(
        cluster,
        log,
        f"--namespace={namespace}",
        f"--resync-interval={RESYNC_S}",
        f"--retry-max-delay={RETRY_CAP_S}",
        "--health-port=0",
        "--metrics-port=0",
        "--log-level=DEBUG",
        kubeconfig=kubeconfig,
    )


def is_observed(db: dict[str, Any]) -> bool:
    status = db.get("status") or {}
    return bool(status.get("observedGeneration") == db["metadata"]["generation"])


def all_observed(cluster: Cluster, namespace: str) -> bool:
    dbs = cluster.custom.list_namespaced_custom_object(
        "databases.example.com", "v1", namespace, "databases"
    )["items"]
    return bool(dbs) and all(is_observed(db) for db in dbs)


def spec_for(index: int) -> dict[str, Any]:
    """A fixed mix: every engine, some with storage, some deleting their data."""
    spec: dict[str, Any] = {"engine": ENGINES[index % 3]}
    if index % 4 == 0:
        spec["storage"] = {"size": "1Gi"}
    if index % 5 == 0:
        spec["deletionPolicy"] = "Delete"
    return spec


def read_replicas(cluster: Cluster, namespace: str, name: str) -> int | None:
    try:
        found = cluster.apps.read_namespaced_deployment(f"{name}-replicas", namespace)
    except client.ApiException:
        return None
    return int(found.spec.replicas)


def databases(cluster: Cluster, namespace: str) -> dict[str, dict[str, Any]]:
    items = cluster.custom.list_namespaced_custom_object(
        "databases.example.com", "v1", namespace, "databases"
    )["items"]
    return {db["metadata"]["name"]: db for db in items}


def controller_uid(obj: Any) -> str | None:
    return next((r.uid for r in obj.metadata.owner_references or [] if r.controller), None)


def assert_children_are_whole(cluster: Cluster, namespace: str, exact: bool = True) -> None:
    """Every Database has its own Secret, Deployment and Service (and PVC). ``exact``: and
    there is no other Deployment or Service (no garbage collector runs here, so a test that
    deletes Databases checks only theirs)."""
    dbs = databases(cluster, namespace)
    for name, db in dbs.items():
        uid = db["metadata"]["uid"]
        secret = cluster.core.read_namespaced_secret(f"{name}-credentials", namespace)
        assert secret.metadata.annotations == {"databases.example.com/created-for": name}
        assert controller_uid(cluster.apps.read_namespaced_deployment(name, namespace)) == uid
        assert controller_uid(cluster.core.read_namespaced_service(name, namespace)) == uid
        if db["spec"].get("storage"):
            cluster.core.read_namespaced_persistent_volume_claim(f"{name}-data", namespace)
    if exact:
        expected = sorted(
            [*dbs] + [f"{name}-replicas" for name, db in dbs.items() if db["spec"]["replicas"] > 1]
        )
        deployments = cluster.apps.list_namespaced_deployment(namespace).items
        services = cluster.core.list_namespaced_service(namespace).items
        assert sorted(d.metadata.name for d in deployments) == expected
        assert sorted(s.metadata.name for s in services) == expected


# --- a finalizer that cannot be removed at first -------------------------------------------------


@pytest.mark.parametrize(("status", "times"), [(409, 1), (500, 8)])
def test_a_refused_finalizer_removal_is_retried_until_the_database_is_gone(  # noqa: PLR0917
    faulty: Cluster, ns: str, proxy: FaultProxy, tmp_path: Path, status: int, times: int
) -> None:
    proxy.rules.append(fail_finalizer_removal(status, times))
    operator = run_operator(faulty, ns, tmp_path / "operator.log", proxy.kubeconfig)
    try:
        faulty.create_db(ns, "db", {"engine": "redis"})
        wait_for(lambda: is_observed(faulty.get_db(ns, "db")), what="the first reconcile")
        faulty.delete_db(ns, "db")
        started = time.monotonic()
        wait_for(lambda: faulty.db_gone(ns, "db"), timeout=60, what="the Database to be gone")
        print(  # the figures `make chaos` shows
            f"finalizer removal refused {times}x with {status}: "
            f"gone {time.monotonic() - started:.1f} s after the delete"
        )
    finally:
        assert operator.stop() == 0, operator.log_text()[-3000:]
    assert proxy.injected[f"{status} instead of PATCH"] == times
    failures = [line for line in operator.log_lines() if line["event"] == "reconcile failed"]
    stale = [line for line in operator.log_lines() if line["event"].startswith("stale read")]
    if status == 409:  # a conflict is a stale read: read afresh and retried at once, no failure
        assert (len(failures), len(stale)) == (0, times)
    else:
        assert len(failures) == times


def test_a_conflict_on_deleting_a_secret_is_no_reason_to_keep_it(
    faulty: Cluster, ns: str, proxy: FaultProxy, tmp_path: Path
) -> None:
    """A 409 to a delete means "gone" only when the uid precondition failed (a namesake stands
    there); any other conflict is retried, so deletionPolicy Delete still deletes."""
    proxy.rules.append(fail_deletes("secrets", 409, 1))
    operator = run_operator(faulty, ns, tmp_path / "operator.log", proxy.kubeconfig)
    try:
        faulty.create_db(ns, "db", {"engine": "redis", "deletionPolicy": "Delete"})
        wait_for(lambda: is_observed(faulty.get_db(ns, "db")), what="the first reconcile")
        faulty.delete_db(ns, "db")
        wait_for(lambda: faulty.db_gone(ns, "db"), timeout=60, what="the Database to be gone")
    finally:
        assert operator.stop() == 0, operator.log_text()[-3000:]
    assert proxy.injected["409 instead of DELETE"] == 1
    secret = {s.metadata.name: s for s in faulty.core.list_namespaced_secret(ns).items}.get(
        "db-credentials"
    )
    assert secret is None or secret.metadata.deletion_timestamp is not None


# --- kill -9 during a burst of creates -----------------------------------------------------------


def test_kill_9_during_a_burst_of_creates_converges_with_no_duplicate_or_orphan(
    faulty: Cluster, ns: str, tmp_path: Path
) -> None:
    count = 30 * SCALE
    before = request_counts(faulty, "POST", "secrets", code="201")
    deletes_before = request_counts(faulty, "DELETE", "secrets")
    operator = run_operator(faulty, ns, tmp_path / "first.log")
    for index in range(count):
        faulty.create_db(ns, f"db-{index}", spec_for(index))

    def some_done() -> bool:
        return sum(1 for line in operator.log_lines() if line["event"] == "reconciled") >= 5

    wait_for(some_done, what="a few reconciles")
    operator.proc.send_signal(signal.SIGKILL)
    operator.proc.wait()
    assert not all_observed(faulty, ns), "the kill came too late to test anything"

    restarted = run_operator(faulty, ns, tmp_path / "second.log")
    started = time.monotonic()
    try:
        wait_for(lambda: all_observed(faulty, ns), timeout=60 * SCALE, what="all reconciled")
        print(
            f"kill -9 during {count} creates: all reconciled "
            f"{time.monotonic() - started:.1f} s after the restart"
        )
    finally:
        assert restarted.stop() == 0, restarted.log_text()[-3000:]
    assert_children_are_whole(faulty, ns)
    # Each generated Secret was created once: no password was made twice. (A create cut off
    # by the kill may be stored yet not counted as 201 — the API server saw its client go —
    # so at most one per Database, and none deleted to make room for another.)
    created = request_counts(faulty, "POST", "secrets", code="201") - before
    assert created <= count, f"{created} Secrets created for {count} Databases"
    assert request_counts(faulty, "DELETE", "secrets") == deletes_before


# --- kube-apiserver killed and started again -----------------------------------------------------


def test_the_operator_recovers_from_an_apiserver_restart_without_restarting(
    faulty: Cluster, plane: ControlPlane, ns: str, tmp_path: Path
) -> None:
    operator = run_operator(faulty, ns, tmp_path / "operator.log")
    try:
        faulty.create_db(ns, "db", {"engine": "redis"})
        wait_for(lambda: is_observed(faulty.get_db(ns, "db")), what="the first reconcile")
        plane.kill_apiserver()
        time.sleep(3)
        plane.start_apiserver()
        started = time.monotonic()
        faulty.patch_db(ns, "db", {"spec": {"replicas": 2}})
        faulty.create_db(ns, "after", {"engine": "postgres"})
        wait_for(
            lambda: read_replicas(faulty, ns, "db") == 1,
            timeout=90,
            what="the change made after the restart to reach the read replicas",
        )
        wait_for(lambda: all_observed(faulty, ns), timeout=90, what="both Databases reconciled")
        print(
            "kube-apiserver killed for 3 s: changes made after its restart reconciled in "
            f"{time.monotonic() - started:.1f} s, no operator restart"
        )
        assert operator.proc.poll() is None, "the operator exited"
    finally:
        assert operator.stop() == 0, operator.log_text()[-3000:]
    assert_children_are_whole(faulty, ns)


# --- chaos ---------------------------------------------------------------------------------------


def test_under_chaos_everything_converges_and_deletions_finish(
    faulty: Cluster, ns: str, proxy: FaultProxy, tmp_path: Path
) -> None:
    count = 20 * SCALE
    chaos = Chaos(
        write_error_rate=0.15,
        reset_rate=0.03,
        watch_cut_s=(2.0, 6.0),
        latency_s=(0.0, 0.05),
        seed=int(os.environ.get("FAULTS_SEED", "10")),
    )
    operator = run_operator(faulty, ns, tmp_path / "operator.log", proxy.kubeconfig)
    try:
        with proxy.chaos_on(chaos):
            for index in range(count):
                faulty.create_db(ns, f"db-{index}", spec_for(index))
            time.sleep(3 * SCALE)
            for index in range(0, count, 3):
                faulty.patch_db(ns, f"db-{index}", {"spec": {"replicas": 0}})
            doomed = [f"db-{index}" for index in range(1, count, 4)]
            # A Database deleted before its first reconcile got through has no Secret to keep.
            created = {s.metadata.name for s in faulty.core.list_namespaced_secret(ns).items}
            for name in doomed:
                faulty.delete_db(ns, name)
            time.sleep(5 * SCALE)
        # The faults stop; whatever they left half done must now be finished.
        calm = time.monotonic()
        wait_for(lambda: all_observed(faulty, ns), timeout=60 * SCALE, what="all reconciled")
        wait_for(
            lambda: all(faulty.db_gone(ns, name) for name in doomed),
            timeout=60 * SCALE,
            what="the deleted Databases to be gone",
        )
        converged = time.monotonic() - calm
        assert operator.proc.poll() is None
    finally:
        assert operator.stop() == 0, operator.log_text()[-3000:]
    injected = sum(proxy.injected.values())
    assert injected >= 10, f"too few faults to prove anything: {dict(proxy.injected)}"
    assert proxy.injected["watch cut"] >= 1, "no watch was cut"
    assert_children_are_whole(faulty, ns, exact=False)
    for index in range(0, count, 3):
        name = f"db-{index}"
        if name not in doomed:
            assert faulty.apps.read_namespaced_deployment(name, ns).spec.replicas == 0
    for index in range(1, count, 4):
        # deletionPolicy went with each: Delete removed the Secret, Retain kept it, unowned.
        name = f"db-{index}"
        found = {s.metadata.name: s for s in faulty.core.list_namespaced_secret(ns).items}
        secret = found.get(f"{name}-credentials")
        if secret is None:
            if f"{name}-credentials" in created:
                assert spec_for(index).get("deletionPolicy") == "Delete", f"{name}'s Secret is gone"
        elif spec_for(index).get("deletionPolicy") == "Delete":
            assert secret.metadata.deletion_timestamp is not None, f"{name}'s Secret was kept"
        else:
            assert not secret.metadata.owner_references, f"{name}'s Secret would be collected"
    print(
        f"chaos: {count} Databases ({len(doomed)} deleted), {injected} faults injected, all "
        f"converged {converged:.1f} s after the faults stopped: "
        f"{dict(sorted(proxy.injected.items()))}"
    )
