"""The operator's own lifecycle: what happens around it rather than to a Database.

- a namespace being deleted refuses every create in it: expected, logged as such, not as errors;
- kube-apiserver gone for longer than any retry budget: the watches resume within seconds of
  its return, and /readyz says the operator cannot watch while it is gone;
- the Database CRD deleted and created again: the operator says it is not ready (it neither
  exits nor stays deaf) and watches again once the CRD is back.

The last two break the API server for everyone: they run on a control plane of their own.
"""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from tests.cluster import Cluster, connected, wait_for
from tests.controlplane import ControlPlane, free_port, install_crds
from tests.integration.conftest import RESYNC_S, OperatorProcess, start_operator
from tests.prometheus import sample, scrape

DATABASES = 10
#: Longer than Kopf's whole retry budget of old (1+2+4+8+16+30 s), which then started over: its
#: attempts at 92 s and 122 s bracket the return, so the old watch came back about 27 s late.
OUTAGE_S = 93.0
#: Nothing but a watch event can make a change reach the operator in time: no resync does.
SLOW_RESYNC_S = 600


def test_a_namespace_being_deleted_is_expected_not_an_error(
    cluster: Cluster, tmp_path: Path
) -> None:
    # Not the namespace fixture: this namespace is deleted by the test, and stays Terminating
    # (no namespace controller runs here to empty it).
    namespace = f"t-{uuid.uuid4().hex[:8]}"
    cluster.core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=namespace)))
    operator = start_operator(
        cluster,
        tmp_path / "operator.log",
        f"--namespace={namespace}",
        f"--resync-interval={RESYNC_S}",
        "--health-port=0",
        "--metrics-port=0",
    )
    try:
        names = [f"db-{index}" for index in range(DATABASES)]
        for name in names:
            cluster.create_db(namespace, name, {"engine": "redis"})
        wait_for(
            lambda: all(
                (cluster.get_db(namespace, name).get("status") or {}).get("observedGeneration")
                for name in names
            ),
            what="every Database reconciled",
        )
        cluster.core.delete_namespace(namespace)
        # What the namespace controller does first: it deletes the content, Secrets and
        # Deployments before the Databases, whose finalizer holds them a while.
        for name in names:
            cluster.core.delete_namespaced_secret(f"{name}-credentials", namespace)
            cluster.apps.delete_namespaced_deployment(name, namespace)
        deleted = time.monotonic()

        def refused() -> int:
            return sum(
                1
                for line in operator.log_lines()
                if "being terminated" in str(line.get("error", ""))
                or line["event"] == "namespace is being deleted: nothing is created in it"
            )

        wait_for(lambda: refused() >= DATABASES, what="a create refused for each Database")
        time.sleep(3 * RESYNC_S)  # and a few retries more
    finally:
        assert operator.stop() == 0, operator.log_text()[-3000:]
    lines = operator.log_lines()
    errors = [line for line in lines if line["level"] == "error"]
    print(
        f"namespace deleted under {DATABASES} Databases: {refused()} creates refused in "
        f"{time.monotonic() - deleted:.1f} s, {len(errors)} ERROR lines"
    )
    assert errors == [], errors[:3]
    for name in names:  # nothing written on them said they failed
        db = cluster.get_db(namespace, name)
        assert db["status"].get("phase") != "Failed", db["status"]


# --- on a control plane of their own -------------------------------------------------------------


@pytest.fixture(scope="module")
def plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControlPlane]:
    with ControlPlane(tmp_path_factory.mktemp("lifecycle")) as started:
        install_crds(started.kubeconfig)
        yield started


@pytest.fixture(scope="module")
def own(plane: ControlPlane) -> Iterator[Cluster]:
    with connected(plane) as cluster:
        yield cluster


@pytest.fixture
def ns(own: Cluster) -> Iterator[str]:
    with own.scratch_namespace("l") as name:
        yield name


def readiness(port: int) -> tuple[int, dict[str, Any]]:
    """/readyz's status code and body (0: no answer)."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=2) as answer:
            return answer.status, json.loads(answer.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())
    except OSError:
        return 0, {}


def observed(cluster: Cluster, namespace: str, name: str, generation: int) -> bool:
    try:
        status = cluster.get_db(namespace, name).get("status") or {}
    except client.ApiException:
        return False
    return bool(status.get("observedGeneration") == generation)


def slow_resync_operator(
    cluster: Cluster, namespace: str, log: Path
) -> tuple[OperatorProcess, int, int]:
    """The operator, its health port and its metrics port."""
    port, metrics_port = free_port(), free_port()
    operator = start_operator(
        cluster,
        log,
        f"--namespace={namespace}",
        f"--resync-interval={SLOW_RESYNC_S}",
        f"--health-port={port}",
        f"--metrics-port={metrics_port}",
        "--log-level=DEBUG",
    )
    wait_for(lambda: readiness(port)[0] == 200, what="the operator ready")
    return operator, port, metrics_port


def watch_restarts(metrics_port: int) -> dict[str, float | None]:
    """database_operator_watch_restarts_total by resource, as the operator serves it now."""
    samples = scrape(metrics_port)
    return {
        resource: sample(samples, "database_operator_watch_restarts_total", resource=resource)
        for resource in ("databases", "databasebackups")
    }


def test_watches_resume_within_seconds_of_the_api_servers_return_after_a_long_outage(
    own: Cluster, plane: ControlPlane, ns: str, tmp_path: Path
) -> None:
    operator, port, metrics_port = slow_resync_operator(own, ns, tmp_path / "operator.log")
    try:
        own.create_db(ns, "db", {"engine": "redis"})
        wait_for(lambda: observed(own, ns, "db", 1), what="the first reconcile")
        assert watch_restarts(metrics_port) == {"databases": 0, "databasebackups": 0}
        plane.kill_apiserver()
        killed = time.monotonic()
        not_ready: list[float] = []
        while time.monotonic() - killed < OUTAGE_S:
            code, body = readiness(port)
            if code == 503 and not not_ready:
                not_ready.append(time.monotonic() - killed)
                assert body["status"] == "not watching", body
            time.sleep(1)
        plane.start_apiserver()
        back = time.monotonic()
        own.patch_db(ns, "db", {"spec": {"replicas": 0}})
        wait_for(
            lambda: observed(own, ns, "db", 2),
            timeout=60,
            what="the change made after the return to be reconciled",
        )
        resumed = time.monotonic() - back
        wait_for(lambda: readiness(port)[0] == 200, timeout=30, what="the operator ready again")
        ready_again = time.monotonic() - back
        # Each watch was established again after its failed attempts.
        restarted = wait_for(
            lambda: all((found := watch_restarts(metrics_port)).values()) and found,
            timeout=30,
            what="the watches' restarts counted",
        )
        print(
            f"kube-apiserver down {OUTAGE_S:.0f} s: not ready "
            f"{not_ready[0] if not_ready else float('nan'):.1f} s into it; a change made on its "
            f"return reconciled in {resumed:.1f} s (resync {SLOW_RESYNC_S} s), ready again in "
            f"{ready_again:.1f} s; watch restarts counted: {restarted}"
        )
        assert operator.proc.poll() is None, "the operator exited"
        # Gone while its operator runs: the CRD test deletes every Database (finalized first).
        own.delete_db(ns, "db")
        wait_for(lambda: own.db_gone(ns, "db"), what="the Database finalized")
    finally:
        assert operator.stop() == 0, operator.log_text()[-3000:]
    assert not_ready, "/readyz said ready all through the outage"
    # Kopf tries again every 4 s ± 1 at most: the watch, not a resync, brought the change.
    assert resumed < 10, f"the watch resumed {resumed:.1f} s after the API server's return"
    # A watch event, or the watch's listing afresh (its resourceVersion was too old for the new
    # API server): "update" or "resume"; not a resync or an audit.
    brought = [line["trigger"] for line in operator.reconciles("db") if line["generation"] == 2]
    assert brought[:1] in (["update"], ["resume"]), brought
    # One outage, one restart of each watch (back after its failed attempts, then often listed
    # afresh at once: the same restart).
    assert restarted == {"databases": 1, "databasebackups": 1}


def test_the_crd_deleted_and_created_again_is_waited_for_then_watched_again(
    own: Cluster, plane: ControlPlane, ns: str, tmp_path: Path
) -> None:
    operator, port, metrics_port = slow_resync_operator(own, ns, tmp_path / "operator.log")
    try:
        own.create_db(ns, "db", {"engine": "redis"})
        wait_for(lambda: observed(own, ns, "db", 1), what="the first reconcile")
        assert watch_restarts(metrics_port) == {"databases": 0, "databasebackups": 0}
        # The operator finalizes the Database the CRD's deletion deletes; then the CRD goes.
        own.kubectl("delete", "crd", "databases.databases.example.com", "--timeout=60s")
        gone = time.monotonic()
        wait_for(lambda: readiness(port)[0] == 503, timeout=20, what="the operator not ready")
        not_ready = time.monotonic() - gone
        reason = readiness(port)[1].get("reason", "")
        time.sleep(3)
        assert operator.proc.poll() is None, f"the operator exited: {operator.log_text()[-2000:]}"
        assert readiness(port)[0] == 503
        install_crds(plane.kubeconfig)
        back = time.monotonic()
        own.create_db(ns, "db", {"engine": "redis"})
        wait_for(
            lambda: observed(own, ns, "db", 1),
            timeout=60,
            what="a Database created after the CRD's return to be reconciled",
        )
        created = time.monotonic() - back
        own.patch_db(ns, "db", {"spec": {"replicas": 0}})
        changed = time.monotonic()
        wait_for(lambda: observed(own, ns, "db", 2), timeout=30, what="its change reconciled")
        patched = time.monotonic() - changed
        wait_for(lambda: readiness(port)[0] == 200, timeout=30, what="the operator ready again")
        # Kopf run anew: each watch started again, once.
        restarted = watch_restarts(metrics_port)
        print(
            f"CRD deleted: not ready {not_ready:.1f} s after it was gone ({reason!r}); created "
            f"again: a new Database reconciled in {created:.1f} s, a change to it in "
            f"{patched:.1f} s (resync {SLOW_RESYNC_S} s); watch restarts counted: {restarted}"
        )
    finally:
        assert operator.stop() == 0, operator.log_text()[-3000:]
    starts = [
        line
        for line in operator.log_lines()
        if str(line["event"]).startswith("Starting the watch-stream for databases.")
    ]
    assert len(starts) == 2, "the Database watch was not started again"
    assert restarted == {"databases": 1, "databasebackups": 1}
    assert patched < 10
