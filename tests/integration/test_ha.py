"""High availability: two operators peered through one KopfPeering object in the watched
namespace; the one with the higher priority reconciles, the other stands by until it is gone.

Kopf does not create the peering object (a keep-alive to a missing one only logs "not found"),
and with a peering name given it starts paused until it has seen the object: the operator
creates it at start-up, which the tests rely on.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from tests.cluster import Cluster, wait_for
from tests.integration.conftest import RESYNC_S, OperatorProcess, start_operator

PEERING_GROUP, PEERING_VERSION, PEERING_PLURAL = "kopf.dev", "v1", "kopfpeerings"
#: Short, so a crash is noticed quickly (the operator's minimum is 5 s).
PEERING_LIFETIME_S = 10
#: Beyond the lifetime: the standby notices on its next keep-alive (every 1-5 s with this
#: lifetime), restarts its watches and reconciles; generous for a busy 2-core machine.
TAKEOVER_MARGIN_S = 20
ACTIVE_PRIORITY, STANDBY_PRIORITY = 200, 100


def observed_generation(cluster: Cluster, namespace: str, name: str, generation: int) -> bool:
    db = cluster.get_db(namespace, name)
    return bool(db.get("status", {}).get("observedGeneration") == generation)


def peers(cluster: Cluster, namespace: str, peering: str) -> dict[str, Any]:
    """The peering object's status: one keep-alive record per live operator, by identity."""
    obj = cluster.custom.get_namespaced_custom_object(
        PEERING_GROUP, PEERING_VERSION, namespace, PEERING_PLURAL, peering
    )
    return obj.get("status") or {}


def moment(line: dict[str, Any]) -> datetime:
    return datetime.fromisoformat(line["timestamp"])


def read_replicas(cluster: Cluster, namespace: str, name: str) -> int | None:
    try:
        found = cluster.apps.read_namespaced_deployment(f"{name}-replicas", namespace)
    except client.ApiException:
        return None
    return int(found.spec.replicas)


def has_peer_with_priority(cluster: Cluster, namespace: str, peering: str, priority: int) -> bool:
    return any(
        record.get("priority") == priority for record in peers(cluster, namespace, peering).values()
    )


def start_peer(
    cluster: Cluster, namespace: str, peering: str, priority: int, log_path: Path
) -> OperatorProcess:
    return start_operator(
        cluster,
        log_path,
        f"--namespace={namespace}",
        "--peering",
        f"--peering-name={peering}",
        f"--peering-lifetime={PEERING_LIFETIME_S}",
        f"--priority={priority}",
        f"--resync-interval={RESYNC_S}",
        "--health-port=0",
        "--metrics-port=0",
        # Resyncs that change nothing log "reconciled" at DEBUG: every tick shows who is active.
        "--log-level=DEBUG",
    )


def missing_keepalives(operator: OperatorProcess, peering: str) -> int:
    """Kopf's keep-alives that found no peering object (logged at DEBUG)."""
    return sum(
        1
        for line in operator.log_lines()
        if line.get("event", "").startswith(f"Keep-alive in {peering!r}")
        and line["event"].endswith("not found.")
    )


@pytest.fixture
def peering(cluster: Cluster, namespace: str) -> str:
    """A peering name unique to the test; the operators create its KopfPeering object."""
    return f"ha-{uuid.uuid4().hex[:8]}"


@pytest.fixture
def active(
    cluster: Cluster, namespace: str, peering: str, tmp_path: Path
) -> Iterator[OperatorProcess]:
    """The higher-priority operator, started first and registered in the peering object."""
    yield from registered_peer(
        cluster, namespace, peering, ACTIVE_PRIORITY, tmp_path / "active.log"
    )


@pytest.fixture
def standby(
    cluster: Cluster, namespace: str, peering: str, active: OperatorProcess, tmp_path: Path
) -> Iterator[OperatorProcess]:
    """The lower-priority operator, started once the active one is registered."""
    yield from registered_peer(
        cluster, namespace, peering, STANDBY_PRIORITY, tmp_path / "standby.log"
    )


def registered_peer(
    cluster: Cluster, namespace: str, peering: str, priority: int, log: Path
) -> Iterator[OperatorProcess]:
    """A peer started and seen in the peering object; stopped cleanly unless a test killed it."""
    running = start_peer(cluster, namespace, peering, priority, log)
    wait_for(
        lambda: has_peer_with_priority(cluster, namespace, peering, priority),
        what=f"the keep-alive of the peer with priority {priority}",
    )
    yield running
    if running.proc.poll() is None:  # not killed by the test: it must exit cleanly
        assert running.stop() == 0, running.log_text()[-3000:]


def test_only_the_higher_priority_operator_reconciles(
    cluster: Cluster, namespace: str, active: OperatorProcess, standby: OperatorProcess
) -> None:
    cluster.create_db(namespace, "db", {"engine": "redis"})
    wait_for(lambda: observed_generation(cluster, namespace, "db", 1), what="the first reconcile")
    # The active operator's resyncs are the clock: the standby had as long to act, and did not.
    wait_for(
        lambda: len(active.reconciles("db", "resync")) >= 3,
        timeout=RESYNC_S * 3 + 15,
        what="three resyncs by the active operator",
    )

    assert standby.proc.poll() is None, standby.log_text()[-3000:]
    assert standby.reconciles("db") == []
    assert active.reconciles("db", "create")
    assert cluster.apps.read_namespaced_deployment("db", namespace).spec.replicas == 1


def test_the_standby_takes_over_within_the_peering_lifetime_when_the_active_one_is_killed(
    cluster: Cluster, namespace: str, active: OperatorProcess, standby: OperatorProcess
) -> None:
    cluster.create_db(namespace, "db", {"engine": "redis"})
    wait_for(lambda: observed_generation(cluster, namespace, "db", 1), what="the first reconcile")
    assert standby.reconciles("db") == []

    active.proc.kill()  # SIGKILL: no goodbye in the peering object, only its expiry
    active.proc.wait()
    killed = time.monotonic()
    cluster.patch_db(namespace, "db", {"spec": {"replicas": 2}})

    wait_for(
        lambda: read_replicas(cluster, namespace, "db") == 1,
        timeout=PEERING_LIFETIME_S + TAKEOVER_MARGIN_S,
        what="the standby to add a read replica",
    )
    took = time.monotonic() - killed
    wait_for(lambda: observed_generation(cluster, namespace, "db", 2), what="generation 2 observed")
    assert [line["generation"] for line in standby.reconciles("db")][-1] == 2
    assert took <= PEERING_LIFETIME_S + TAKEOVER_MARGIN_S


def test_the_standby_takes_over_before_the_peering_lifetime_when_the_active_one_exits(
    cluster: Cluster, namespace: str, active: OperatorProcess, standby: OperatorProcess
) -> None:
    cluster.create_db(namespace, "db", {"engine": "redis"})
    wait_for(lambda: observed_generation(cluster, namespace, "db", 1), what="the first reconcile")
    assert standby.reconciles("db") == []

    # A graceful exit (SIGTERM, as in a rolling update) removes its record from the peering
    # object, so the standby need not wait for it to expire.
    assert active.stop() == 0, active.log_text()[-3000:]
    cluster.patch_db(namespace, "db", {"spec": {"replicas": 2}})

    wait_for(
        lambda: read_replicas(cluster, namespace, "db") == 1,
        timeout=PEERING_LIFETIME_S,
        what="the standby to add a read replica",
    )
    assert standby.reconciles("db")


def test_an_operator_creates_its_peering_object_and_reconciles(
    cluster: Cluster, namespace: str, tmp_path: Path
) -> None:
    # Kopf itself never creates the object, and without it every peer stays paused.
    peering = f"ha-{uuid.uuid4().hex[:8]}"
    lone = start_peer(cluster, namespace, peering, ACTIVE_PRIORITY, tmp_path / "lone.log")
    try:
        cluster.create_db(namespace, "db", {"engine": "redis"})
        wait_for(
            lambda: observed_generation(cluster, namespace, "db", 1),
            timeout=PEERING_LIFETIME_S + TAKEOVER_MARGIN_S,
            what="the first reconcile",
        )
        assert has_peer_with_priority(cluster, namespace, peering, ACTIVE_PRIORITY)
        assert missing_keepalives(lone, peering) == 0
    finally:
        assert lone.stop() == 0, lone.log_text()[-3000:]


def test_an_active_operator_pauses_when_a_higher_priority_peer_joins(
    cluster: Cluster, namespace: str, peering: str, tmp_path: Path
) -> None:
    # Kopf pauses the lower peer's watches; its reconcile queue must pause with them, or it
    # would go on resyncing what it had cached.
    lower = start_peer(cluster, namespace, peering, STANDBY_PRIORITY, tmp_path / "lower.log")
    higher: OperatorProcess | None = None
    try:
        cluster.create_db(namespace, "db", {"engine": "redis"})
        wait_for(
            lambda: observed_generation(cluster, namespace, "db", 1),
            timeout=PEERING_LIFETIME_S + TAKEOVER_MARGIN_S,
            what="the first reconcile by the only peer",
        )
        wait_for(lambda: lower.reconciles("db", "resync"), what="a resync by the only peer")
        higher = start_peer(cluster, namespace, peering, ACTIVE_PRIORITY, tmp_path / "higher.log")
        wait_for(
            lambda: "Pausing operations" in lower.log_text(),
            timeout=PEERING_LIFETIME_S + TAKEOVER_MARGIN_S,
            what="the lower peer to pause",
        )
        cluster.patch_db(namespace, "db", {"spec": {"replicas": 2}})
        wait_for(lambda: observed_generation(cluster, namespace, "db", 2), what="generation 2")
        wait_for(
            lambda: len(higher.reconciles("db", "resync")) >= 3,
            timeout=RESYNC_S * 3 + 15,
            what="three resyncs by the higher peer",
        )
        paused = next(
            moment(line) for line in lower.log_lines() if "Pausing operations" in line["event"]
        )
        # A reconcile in flight when the pause came may finish; none may start after it.
        started_after = [
            line
            for line in lower.reconciles("db")
            if moment(line) - timedelta(seconds=line["duration_s"]) > paused
        ]
        assert started_after == [], "the paused peer went on reconciling"
        assert [line["generation"] for line in higher.reconciles("db")][-1] == 2
    finally:
        for peer in (higher, lower):
            if peer is not None:
                assert peer.stop() == 0, peer.log_text()[-3000:]
