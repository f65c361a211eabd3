"""hack/smoke.py's decisions: which replica leads, and when a Database counts as Ready."""

from __future__ import annotations

from typing import Any

import pytest

from database_operator.api.models import GROUP, SHARD_LABEL, VERSION
from database_operator.runner.build import identity
from tests.hack import load

smoke: Any = load("smoke")


def lease(holder: str | None) -> Any:
    spec: dict[str, Any] = {"leaseDurationSeconds": 15, "leaseTransitions": 2}
    if holder is not None:
        spec["holderIdentity"] = holder
    return {"metadata": {"name": "database-operator", "namespace": "ops"}, "spec": spec}


def test_the_leader_is_the_pod_named_in_the_leases_holder_identity() -> None:
    # runner.build.identity(): the pod's name and a suffix per process. The leader's name sorts
    # last: a smoke test that took the first pod would read the standby.
    pods = {"database-operator-6d4f9-aaaaa", "database-operator-6d4f9-zzzzz"}
    assert (
        smoke.lease_holder(lease("database-operator-6d4f9-zzzzz_0f3a9c1e"), pods)
        == "database-operator-6d4f9-zzzzz"
    )


def test_the_operators_own_identity_is_read_back_as_its_pod(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("POD_NAME", "database-operator-6d4f9-zzzzz")
    pod = smoke.lease_holder(lease(identity()), {"database-operator-6d4f9-zzzzz"})
    assert pod == "database-operator-6d4f9-zzzzz"


@pytest.mark.parametrize(
    ("holder", "error"),
    [
        (None, "the Lease has no holder"),
        ("", "the Lease has no holder"),  # released (a clean stop), none took it yet
        ("database-operator-6d4f9-aaaaa", "is not an operator's"),
        ("database-operator-6d4f9-aaaaa_xyz", "is not an operator's"),
        ("someone-else_0f3a9c1e", "'someone-else' is not a pod of this release"),
    ],
)
def test_no_leader_is_a_failure_that_says_why(holder: str | None, error: str) -> None:
    with pytest.raises(smoke.SmokeError, match=error):
        smoke.lease_holder(lease(holder), {"database-operator-6d4f9-aaaaa"})


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
                "run", "--namespace=a", "--namespace=b", "--metrics-port=9090",
                "--leader-election", "--shard=east", "--lease-name=ha-east"]}]}},
        },
    }  # fmt: skip
    args = deployment["spec"]["template"]["spec"]["containers"][0]["args"]
    operator = smoke.Operator.from_deployment(deployment)
    assert operator.leader_election and operator.lease_name == "ha-east"
    assert operator.lease_namespace is None  # the operator's own
    assert operator.namespaces == ("a", "b")
    assert (operator.metrics_port, operator.shard) == (9090, "east")
    # Unnamed, the Lease is the operator's default: per shard.
    args[:] = ["run", "--leader-election", "--shard=east", "--lease-namespace=elsewhere"]
    operator = smoke.Operator.from_deployment(deployment)
    assert (operator.lease_name, operator.lease_namespace) == (
        "database-operator-east",
        "elsewhere",
    )
    args[:] = ["run", "--no-leader-election"]
    operator = smoke.Operator.from_deployment(deployment)
    assert not operator.leader_election and operator.namespaces == () and operator.shard is None
    assert operator.lease_name == "database-operator"


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


def test_the_smoke_tests_own_spelling_of_the_api_is_the_operators() -> None:
    """hack/smoke.py runs with the standard library only, so it spells the API out."""
    assert smoke.SHARD_LABEL == SHARD_LABEL
    assert f"{GROUP}/{VERSION}" == smoke.API_VERSION
