"""hack/smoke.py's decisions: which replica is active, and when a Database counts as Ready."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from tests.hack import load

smoke: Any = load("smoke")
NOW = datetime(2026, 12, 4, 12, 0, tzinfo=UTC)


def record(priority: int, seen_ago_s: float, lifetime: int = 60, naive: bool = True) -> Any:
    seen = NOW - timedelta(seconds=seen_ago_s)
    text = (seen.replace(tzinfo=None) if naive else seen).isoformat()
    return {"priority": priority, "lifetime": lifetime, "lastseen": text}


def test_peers_whose_keep_alive_expired_are_not_live() -> None:
    status = {
        "pod-a": record(100, 5),
        "pod-b": record(200, 61),  # gone: a crashed replica's record lingers until it expires
        "pod-c": record(150, 10, naive=False),
        "junk": "not a record",
    }
    assert smoke.live_peers(status, NOW) == {"pod-a": 100, "pod-c": 150}


def test_the_active_peer_is_the_one_with_the_highest_priority() -> None:
    assert smoke.active_peer({"pod-a": 100, "pod-z": 200}, {"pod-a", "pod-z"}) == "pod-z"


@pytest.mark.parametrize(
    ("peers", "error"),
    [
        ({}, "no live peer"),
        ({"pod-a": 200, "pod-b": 200}, "share the top priority 200: Kopf pauses them all"),
        ({"pod-a": 100, "someone-else": 300}, "'someone-else' is not a pod of this release"),
    ],
)
def test_no_active_replica_is_a_failure_that_says_why(peers: dict[str, int], error: str) -> None:
    with pytest.raises(smoke.SmokeError, match=error):
        smoke.active_peer(peers, {"pod-a", "pod-b"})


def database(generation: int, observed: int | None, ready: dict[str, Any] | None) -> Any:
    status: dict[str, Any] = {"conditions": [ready] if ready else []}
    if observed is not None:
        status["observedGeneration"] = observed
    return {"metadata": {"generation": generation}, "status": status}


def ready(status: str, generation: int) -> dict[str, Any]:
    return {"type": "Ready", "status": status, "reason": "R", "message": "m",
            "observedGeneration": generation}  # fmt: skip


@pytest.mark.parametrize(
    ("db", "problem"),
    [
        (database(2, 2, ready("True", 2)), None),
        (database(2, 1, ready("True", 1)), "observedGeneration 1 of generation 2"),
        (database(2, None, None), "observedGeneration None of generation 2"),
        (database(2, 2, None), "no Ready condition"),
        (database(2, 2, ready("False", 2)), "Ready False R: m"),
        (database(2, 2, ready("True", 1)), "Ready computed for generation 1, not 2"),
    ],
)
def test_ready_means_ready_for_the_current_generation(db: Any, problem: str | None) -> None:
    assert smoke.ready_problem(db) == problem


def test_the_operator_is_read_from_its_deployment_args() -> None:
    deployment: dict[str, Any] = {
        "metadata": {"name": "rel-database-operator"},
        "spec": {
            "selector": {"matchLabels": {"app.kubernetes.io/instance": "rel"}},
            "template": {"spec": {"containers": [{"name": "operator", "args": [
                "run", "--namespace=a", "--namespace=b", "--metrics-port=9090", "--peering",
                "--shard=east", "--peering-name=database-operator-east"]}]}},
        },
    }  # fmt: skip
    operator = smoke.Operator.from_deployment(deployment)
    assert operator.peering and operator.peering_name == "database-operator-east"
    assert operator.namespaces == ("a", "b")
    assert (operator.metrics_port, operator.shard) == (9090, "east")
    deployment["spec"]["template"]["spec"]["containers"][0]["args"] = ["run", "--no-peering"]
    operator = smoke.Operator.from_deployment(deployment)
    assert not operator.peering and operator.namespaces == () and operator.shard is None


def test_metrics_are_read_by_name_and_labels() -> None:
    text = (
        'database_operator_reconciles_total{result="success"} 3.0\n'
        'database_operator_reconciles_total{result="error"} 1.0\n'
        "database_operator_active 1.0\n"
    )
    assert smoke.check_metrics(text, "pod-a") == 3.0
    with pytest.raises(smoke.SmokeError, match="not the active replica"):
        smoke.check_metrics(text.replace("active 1.0", "active 0.0"), "pod-a")
    with pytest.raises(smoke.SmokeError, match="no successful reconcile"):
        smoke.check_metrics(text.replace('"success"} 3.0', '"success"} 0.0'), "pod-a")


@pytest.mark.parametrize(("text", "value"), [("180s", 180), ("3m", 180), ("45", 45)])
def test_timeouts_read_like_kubectl_s(text: str, value: float) -> None:
    assert smoke.seconds(text) == value
