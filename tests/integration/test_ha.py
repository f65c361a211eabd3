"""High availability: operators elect their leader on a Lease; only the leader reconciles.

Each test runs real operator processes against the real API server and reads, from each
replica's own log, when it led ("leading" until "stopped leading" or "released the lease") and
when each of its reconciles started. "Never two writers" is then checked as it should be: the
replicas' leaderships never overlap, and no replica starts a reconcile outside its own.
(The election itself, in-process, is tests/integration/test_leader.py.)
"""

from __future__ import annotations

import itertools
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from tests.cluster import Cluster, wait_for
from tests.controlplane import ControlPlane, install_crds
from tests.integration.conftest import RESYNC_S, OperatorProcess, start_operator

#: The operator's defaults (controller-runtime's): a crash is measured as users will see it.
LEASE_S, RENEW_S, RETRY_S = 15.0, 10.0, 2.0
#: Simultaneous starts of two replicas.
RACES = 4

Interval = tuple[datetime, datetime]


def moment(line: dict[str, Any]) -> datetime:
    return datetime.fromisoformat(line["timestamp"])


def election_args(namespace: str, lease: str, *timings: float) -> list[str]:
    lease_s, renew_s, retry_s = timings or (LEASE_S, RENEW_S, RETRY_S)
    return [
        f"--namespace={namespace}",
        "--leader-election",
        f"--lease-namespace={namespace}",
        f"--lease-name={lease}",
        f"--lease-duration={lease_s}",
        f"--renew-deadline={renew_s}",
        f"--retry-period={retry_s}",
        f"--resync-interval={RESYNC_S}",
        "--health-port=0",
        "--metrics-port=0",
        # Resyncs that change nothing log "reconciled" at DEBUG: every one shows who acts.
        "--log-level=DEBUG",
    ]


def replica(
    cluster: Cluster, namespace: str, lease: str, name: str, log: Path, *timings: float
) -> OperatorProcess:
    return start_operator(
        cluster, log, *election_args(namespace, lease, *timings), env={"POD_NAME": name}
    )


def leaderships(lines: list[dict[str, Any]], until: datetime) -> list[Interval]:
    """When the replica led, by its own log (a leadership still on ends at ``until``)."""
    spans: list[Interval] = []
    began: datetime | None = None
    for line in lines:
        event = line.get("event", "")
        if event == "leading":
            began = moment(line)
        elif began is not None and (
            event.startswith("stopped leading") or event == "released the lease"
        ):
            spans.append((began, moment(line)))
            began = None
    if began is not None:
        spans.append((began, until))
    return spans


def reconcile_starts(lines: list[dict[str, Any]]) -> list[datetime]:
    """When each reconcile of the replica began (its log line is written when it ends)."""
    return [
        moment(line) - timedelta(seconds=float(line.get("duration_s", 0)))
        for line in lines
        if line.get("event") == "reconciled"
    ]


def assert_one_writer(
    *replicas: OperatorProcess, killed: tuple[int, datetime] | None = None
) -> dict[str, int]:
    """No two replicas led at once, and none reconciled unless it led; reconciles per replica.
    A replica ``killed`` (its index, and when) led at most until then."""
    logs = [op.log_lines() for op in replicas]
    now = datetime.now(UTC)  # after the reads: a leadership still on covers what was read
    spans = {
        index: leaderships(lines, killed[1] if killed and killed[0] == index else now)
        for index, lines in enumerate(logs)
    }
    flat = sorted((span, index) for index, each in spans.items() for span in each)
    for (first, a), (second, b) in itertools.pairwise(flat):
        assert a == b or first[1] <= second[0], f"replicas {a} and {b} led at once: {flat}"
    counts: dict[str, int] = {}
    # Log timestamps are the replica's clock; a reconcile's start is computed from its end.
    slack = timedelta(milliseconds=50)
    for index, lines in enumerate(logs):
        starts = reconcile_starts(lines)
        outside = [
            at
            for at in starts
            if not any(begin - slack <= at <= end for begin, end in spans[index])
        ]
        assert outside == [], f"replica {index} reconciled without leading: {outside}"
        counts[str(index)] = len(starts)
    return counts


def first_reconcile_after(operator: OperatorProcess, after: datetime) -> datetime | None:
    return next((at for at in reconcile_starts(operator.log_lines()) if at >= after), None)


def converged(cluster: Cluster, namespace: str, names: list[str]) -> bool:
    items = cluster.custom.list_namespaced_custom_object(
        "databases.example.com", "v1", namespace, "databases"
    )["items"]
    observed = {
        item["metadata"]["name"]
        for item in items
        if (item.get("status") or {}).get("observedGeneration") == item["metadata"]["generation"]
    }
    return set(names) <= observed


def reconciled(cluster: Cluster, namespace: str, name: str) -> Callable[[], bool]:
    return lambda: converged(cluster, namespace, [name])


def stop(*replicas: OperatorProcess | None) -> None:
    for each in replicas:
        if each is not None and each.proc.poll() is None:
            assert each.stop() == 0, each.log_text()[-3000:]


@pytest.fixture
def lease() -> str:
    return f"ha-{uuid.uuid4().hex[:8]}"


def test_kill_9_of_the_leader_while_databases_are_created_every_second(
    cluster: Cluster, namespace: str, lease: str, tmp_path: Path
) -> None:
    active = replica(cluster, namespace, lease, "active", tmp_path / "active.log")
    standby: OperatorProcess | None = None
    names: list[str] = []
    creating = threading.Event()

    def create_every_second() -> None:
        while creating.is_set():
            name = f"db-{len(names)}"
            cluster.create_db(namespace, name, {"engine": "redis"})
            names.append(name)
            time.sleep(1)

    try:
        wait_for(lambda: "leading" in active.log_text(), what="the first replica to lead")
        standby = replica(cluster, namespace, lease, "standby", tmp_path / "standby.log")
        creating.set()
        creator = threading.Thread(target=create_every_second, daemon=True)
        creator.start()
        wait_for(lambda: len(names) >= 5, what="five Databases")
        wait_for(lambda: converged(cluster, namespace, names[:5]), what="the first five")
        active.proc.kill()  # SIGKILL: no release, only the Lease's expiry
        killed = datetime.now(UTC)
        active.proc.wait()
        killed_at = time.monotonic()
        wait_for(
            lambda: first_reconcile_after(standby, killed) is not None,
            timeout=LEASE_S + RETRY_S + 10,
            what="the standby's first reconcile",
        )
        first = first_reconcile_after(standby, killed)
        assert first is not None
        took_over = (first - killed).total_seconds()
        time.sleep(3)  # a few more Databases while the new leader works
        creating.clear()
        creator.join()
        wait_for(lambda: converged(cluster, namespace, names), timeout=60, what="all Databases")
        all_converged = time.monotonic() - killed_at
        counts = assert_one_writer(active, standby, killed=(0, killed))
        print(
            f"kill -9 of the leader: the standby reconciled {took_over:.1f} s later "
            f"(lease {LEASE_S:.0f} s, retry {RETRY_S:.0f} s); all {len(names)} Databases "
            f"(one created every second) converged {all_converged:.1f} s after the kill; "
            f"reconciles by replica: {counts}"
        )
        assert took_over <= LEASE_S + RETRY_S + 1
        errors = [line for line in standby.log_lines() if line.get("event") == "reconcile failed"]
        assert errors == [], errors[:3]
    finally:
        creating.clear()
        stop(standby)


def test_a_sigterm_hands_the_lease_over_in_under_two_seconds(
    cluster: Cluster, namespace: str, lease: str, tmp_path: Path
) -> None:
    active = replica(cluster, namespace, lease, "active", tmp_path / "active.log")
    standby: OperatorProcess | None = None
    try:
        wait_for(lambda: "leading" in active.log_text(), what="the first replica to lead")
        standby = replica(cluster, namespace, lease, "standby", tmp_path / "standby.log")
        cluster.create_db(namespace, "db", {"engine": "redis"})
        wait_for(lambda: converged(cluster, namespace, ["db"]), what="the first reconcile")
        time.sleep(RETRY_S + 0.5)  # the standby waits on the Lease between tries
        terminated = datetime.now(UTC)
        active.proc.send_signal(signal.SIGTERM)  # a rolling update's first step
        wait_for(
            lambda: first_reconcile_after(standby, terminated) is not None,
            timeout=LEASE_S,
            what="the standby's first reconcile",
        )
        first = first_reconcile_after(standby, terminated)
        assert first is not None
        handover = (first - terminated).total_seconds()
        assert active.proc.wait(timeout=30) == 0, active.log_text()[-3000:]
        counts = assert_one_writer(active, standby)
        print(f"SIGTERM: the standby reconciled {handover:.2f} s later; reconciles {counts}")
        assert handover < 2.0
    finally:
        stop(active, standby)


def test_two_replicas_started_at_the_same_instant_never_both_reconcile(
    cluster: Cluster, namespace: str, tmp_path: Path
) -> None:
    leaders: list[int] = []
    for race in range(RACES):
        lease = f"race-{race}-{uuid.uuid4().hex[:6]}"
        cluster.create_db(namespace, f"db-{race}", {"engine": "redis"})
        replicas: list[OperatorProcess] = []
        for index in range(2):  # both spawned at once: no wait for either to start
            log = tmp_path / f"race-{race}-{index}.log"
            proc = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "database_operator.cli",
                    "run",
                    *election_args(namespace, lease),
                ],
                env={
                    **os.environ,
                    "KUBECONFIG": str(cluster.kubeconfig),
                    "POD_NAME": f"replica-{index}",
                },
                stdout=log.open("wb"),
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
            )
            replicas.append(OperatorProcess(proc, log))
        try:
            wait_for(reconciled(cluster, namespace, f"db-{race}"), 60, what=f"db-{race} reconciled")
            time.sleep(3 * RESYNC_S)  # resyncs: every one shows who reconciles
            counts = assert_one_writer(*replicas)
            assert sorted(counts.values())[0] == 0, counts  # one of them never reconciled
            leaders.append(next(int(i) for i, n in counts.items() if n))
        finally:
            stop(*replicas)
    print(f"{RACES} simultaneous starts: one reconciler each time (leaders: {leaders})")


# --- kube-apiserver away for longer than the renew deadline --------------------------------------


@pytest.fixture(scope="module")
def plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControlPlane]:
    """A control plane of this test's own: it kills kube-apiserver."""
    with ControlPlane(tmp_path_factory.mktemp("ha")) as started:
        install_crds(started.kubeconfig)
        yield started


def test_an_api_server_outage_beyond_the_renew_deadline_makes_the_leader_step_down(
    plane: ControlPlane, tmp_path: Path, lease: str
) -> None:
    timings = (8.0, 5.0, 1.0)  # lease, renew deadline, retry: the outage outlasts the deadline
    outage_s = 12.0
    own = Cluster.connect(plane)
    namespace = f"ha-{uuid.uuid4().hex[:6]}"
    own.core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=namespace)))
    first = replica(own, namespace, lease, "first", tmp_path / "first.log", *timings)
    second: OperatorProcess | None = None
    try:
        wait_for(lambda: "leading" in first.log_text(), what="the first replica to lead")
        second = replica(own, namespace, lease, "second", tmp_path / "second.log", *timings)
        own.create_db(namespace, "db", {"engine": "redis"})
        wait_for(lambda: converged(own, namespace, ["db"]), what="the first reconcile")
        plane.kill_apiserver()
        time.sleep(outage_s)
        stepped_down = "stopped leading" in first.log_text()
        plane.start_apiserver()
        back = datetime.now(UTC)
        # A real change (one read replica), so that a reconcile, not a skipped resync, follows.
        own.patch_db(namespace, "db", {"spec": {"replicas": 2}})
        wait_for(lambda: converged(own, namespace, ["db"]), timeout=60, what="the change")

        def reconciled_after() -> list[tuple[str, datetime]]:
            return [
                (name, at)
                for name, op in (("first", first), ("second", second))
                if op is not None and (at := first_reconcile_after(op, back)) is not None
            ]

        after = wait_for(reconciled_after, what="a reconcile logged after the return")
        counts = assert_one_writer(first, second)
        print(
            f"kube-apiserver away {outage_s:.0f} s (renew deadline {timings[1]:.0f} s): the "
            f"leader stepped down during it; after its return {after[0][0]} reconciled "
            f"{(after[0][1] - back).total_seconds():.1f} s later; reconciles {counts}"
        )
        assert stepped_down, first.log_text()[-3000:]
    finally:
        stop(first, second)
        own.api.close()
