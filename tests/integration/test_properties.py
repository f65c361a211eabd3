"""Property: any Database a user can write is either refused by the API server with the field
named, or reaches a documented state with a reason — never a silent stuck object, never a write
loop. Specs are drawn by hypothesis, valid and invalid alike, and sent to the real kube-apiserver
with the operator running; `make chaos` draws many more (PROPERTY_EXAMPLES).
"""

from __future__ import annotations

import itertools
import json
import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from kubernetes import client

from tests.cluster import Cluster, condition, wait_for, write_requests
from tests.integration.conftest import RESYNC_S, OperatorProcess, start_operator

EXAMPLES = int(os.environ.get("PROPERTY_EXAMPLES", "25"))
ROOT = Path(__file__).resolve().parents[2]
PHASES = {"Pending", "Active", "Degraded", "Failed"}


def documented_reasons() -> set[str]:
    """The condition reasons docs/operations.md explains, `<Kind>Rejected` spelled out."""
    text = (ROOT / "docs" / "operations.md").read_text()
    table = text[text.index("## Troubleshooting by condition reason") :]
    reasons = set(re.findall(r"`([A-Z][A-Za-z]+)`", table))
    kinds = ("Deployment", "Service", "PersistentVolumeClaim")
    return reasons | {f"{kind}Rejected" for kind in kinds} | {"ReplicasReady", "RolloutComplete"}


quantities = st.sampled_from(["1Gi", "10Gi", "512Mi", "0", "-1Gi", "lots", 1073741824, "1.5Gi"])
cpu = st.sampled_from(["100m", "1", "2", "0.5", "bogus"])
specs = st.fixed_dictionaries(
    {},
    optional={
        "engine": st.sampled_from(["postgres", "mysql", "redis", "mongodb"]),
        "version": st.sampled_from(["16", "17", "8.4", "7.4", "latest", "bad tag!", "x" * 200]),
        "replicas": st.integers(-1, 12),
        "port": st.integers(-5, 70000),
        "storage": st.fixed_dictionaries(
            {"size": quantities},
            optional={"storageClassName": st.sampled_from(["standard", "", "Bad_Class"])},
        ),
        # Empty maps the API server drops; limits below requests, which it refuses.
        "resources": st.fixed_dictionaries(
            {},
            optional={
                "limits": st.dictionaries(st.just("cpu"), cpu, max_size=1),
                "requests": st.dictionaries(st.just("cpu"), cpu, max_size=1),
            },
        ),
        "credentialsSecretRef": st.sampled_from(
            [{"name": "missing-secret"}, {"name": "Bad_Name"}, {}]
        ),
        "serviceType": st.sampled_from(["ClusterIP", "NodePort", "LoadBalancer", "Bogus"]),
        "paused": st.booleans(),
        "deletionPolicy": st.sampled_from(["Retain", "Delete", "Keep"]),
        "image": st.sampled_from(["registry.example.com/pg:1", " spaced ", ""]),
    },
)


@pytest.fixture(scope="module")
def prop_namespace(cluster: Cluster) -> Iterator[str]:
    with cluster.scratch_namespace("prop") as name:
        yield name


@pytest.fixture(scope="module")
def prop_operator(
    cluster: Cluster, prop_namespace: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[OperatorProcess]:
    running = start_operator(
        cluster,
        tmp_path_factory.mktemp("prop") / "operator.log",
        f"--namespace={prop_namespace}",
        f"--resync-interval={RESYNC_S}",
        "--retry-max-delay=2",
        "--health-port=0",
        "--metrics-port=0",
        "--log-level=DEBUG",
    )
    yield running
    assert running.stop() == 0, running.log_text()[-3000:]


NAMES = itertools.count()
CREATED: list[str] = []


def settled(db: dict[str, Any]) -> bool:
    status = db.get("status") or {}
    ready = condition(db, "Ready")
    return bool(
        status.get("observedGeneration") == db["metadata"]["generation"]
        and ready
        and ready.get("observedGeneration") == db["metadata"]["generation"]
    )


@settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(spec=specs)
def test_every_database_is_refused_with_its_field_or_reaches_a_documented_state(
    cluster: Cluster, prop_namespace: str, prop_operator: OperatorProcess, spec: dict[str, Any]
) -> None:
    name = f"p-{next(NAMES)}"
    refusal = create_or_refusal(cluster, prop_namespace, name, spec)
    if refusal is not None:
        event("refused")
        assert "spec." in refusal, f"the refusal names no field: {refusal}"
        return
    CREATED.append(name)

    def reached() -> dict[str, Any] | None:
        found = cluster.get_db(prop_namespace, name)
        return found if settled(found) else None

    db = wait_for(reached, timeout=30, what=f"{name} {spec} to reach a state")
    ready = condition(db, "Ready") or {}
    event(f"{db['status']['phase']} {ready.get('reason')}")
    assert db["status"]["phase"] in PHASES, db["status"]
    assert ready["reason"] in documented_reasons(), ready
    if db["status"]["phase"] == "Failed":
        assert ready["message"], "a Failed Database says why"


def create_or_refusal(
    cluster: Cluster, namespace: str, name: str, spec: dict[str, Any]
) -> str | None:
    """Create the Database; the API server's message if it refused it (422)."""
    try:
        cluster.create_db(namespace, name, spec)
    except client.ApiException as error:
        if error.status != 422:
            raise
        return str(json.loads(error.body)["message"])
    return None


def test_no_drawn_database_makes_a_write_loop(
    cluster: Cluster, prop_namespace: str, prop_operator: OperatorProcess
) -> None:
    """After the examples: resyncs of every accepted Database write nothing (a refused write,
    retried once a resync for a Failed Database, is not a successful write)."""
    assert CREATED, "the property test accepted no Database"

    def resyncs() -> int:  # reconciled, or skipped as a fixed point (OperatorProcess.resyncs)
        return sum(
            1
            for line in prop_operator.log_lines()
            if (line.get("event") == "reconciled" and line.get("trigger") == "resync")
            or line.get("event") == "resync skipped"
        )

    start = resyncs()
    wait_for(lambda: resyncs() >= start + len(CREATED), timeout=30, what="a round of resyncs")
    before = write_requests(cluster, successful_only=True)
    start = resyncs()
    wait_for(lambda: resyncs() >= start + 3 * len(CREATED), timeout=60, what="three rounds")
    after = write_requests(cluster, successful_only=True)
    writes = {k: after[k] - before.get(k, 0) for k in after if after[k] != before.get(k)}
    assert writes == {}, f"resyncs of {len(CREATED)} Databases wrote: {writes}"
