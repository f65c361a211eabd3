#!/usr/bin/env python3
"""Smoke test of a deployed release, right with one replica or an HA pair.

1. The release's health is read from the Kubernetes API: a Database in a smoke namespace must
   become Ready, with `status.observedGeneration` and the Ready condition's observedGeneration
   equal to its generation (a status left from an older spec does not count).
2. The operator's metrics are read from the replica that is working. With peering, that is the
   live peer of the peering object with the highest priority — the pod Kopf lets reconcile;
   a port-forward to the metrics Service could land on the standby, which has reconciled
   nothing. The pod must say so itself (`database_operator_active` 1) and count successful
   reconciles. Without peering, the release's only pod.

The smoke Database is deleted afterwards, pass or fail. Exit 0: passed; 1: failed (the reason is
printed); 2: bad input.

    env: KUBECTL (kubectl), RELEASE (database-operator), NAMESPACE (database-operator-system),
         SMOKE_NAMESPACE (database-operator-smoke), SMOKE_TIMEOUT (180s),
         POD_METRICS_URLS ("pod=url ..."; default: kubectl port-forward to each pod as needed;
         the tests set it, their operators are local processes named by POD_ID)

Only the standard library and kubectl: CI runs it with the runner's python3.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

NAME = "smoke"
SHARD_LABEL = "databases.example.com/shard"
POLL_S = 2.0


class SmokeError(Exception):
    """The release is not healthy; the message says what was seen."""


def log(message: str) -> None:
    print(f"[smoke {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def seconds(text: str) -> float:
    match = re.fullmatch(r"(\d+)(s|m)?", text.strip())
    if not match:
        raise ValueError(f"SMOKE_TIMEOUT {text!r} is not a duration like 180s or 3m")
    return int(match[1]) * (60 if match[2] == "m" else 1)


@dataclass(frozen=True)
class Operator:
    """What the release's Deployment says about how its operator runs."""

    deployment: str
    selector: dict[str, str]
    peering: bool
    peering_name: str
    namespaces: tuple[str, ...]  # empty: all
    metrics_port: int
    shard: str | None

    @classmethod
    def from_deployment(cls, deployment: dict[str, Any]) -> Operator:
        container = deployment["spec"]["template"]["spec"]["containers"][0]
        flags: dict[str, list[str]] = {}
        for arg in container.get("args", []):
            key, _, value = arg.partition("=")
            flags.setdefault(key, []).append(value)
        return cls(
            deployment=deployment["metadata"]["name"],
            selector=deployment["spec"]["selector"]["matchLabels"],
            peering="--peering" in flags,
            peering_name=flags.get("--peering-name", ["database-operator"])[-1],
            namespaces=tuple(flags.get("--namespace", [])),
            metrics_port=int(flags.get("--metrics-port", ["8080"])[-1]),
            shard=flags.get("--shard", [None])[-1],
        )


def live_peers(status: dict[str, Any], now: datetime) -> dict[str, int]:
    """Peer id -> priority, for the peers whose keep-alive has not expired."""
    alive = {}
    for peer, record in (status or {}).items():
        if not isinstance(record, dict):
            continue
        seen = datetime.fromisoformat(str(record.get("lastseen", "")).replace("Z", "+00:00"))
        if seen.tzinfo is None:  # Kopf writes UTC without an offset
            seen = seen.replace(tzinfo=UTC)
        if seen + timedelta(seconds=float(record.get("lifetime", 60))) >= now:
            alive[peer] = int(record.get("priority", 0))
    return alive


def active_peer(peers: dict[str, int], pods: set[str]) -> str:
    """The peer Kopf lets reconcile: the one highest priority, if it is one of ours and alone."""
    if not peers:
        raise SmokeError("the peering object has no live peer")
    top = max(peers.values())
    leaders = sorted(peer for peer, priority in peers.items() if priority == top)
    if len(leaders) > 1:
        raise SmokeError(f"peers {leaders} share the top priority {top}: Kopf pauses them all")
    if leaders[0] not in pods:
        raise SmokeError(
            f"the top peer {leaders[0]!r} is not a pod of this release ({sorted(pods)}): "
            "it keeps this release's replicas paused"
        )
    return leaders[0]


def sample(metrics: str, name: str, labels: str = "") -> float | None:
    """The value of one sample of Prometheus' text format, or None if it is absent."""
    pattern = re.escape(name + (f"{{{labels}}}" if labels else "")) + r" ([0-9.eE+-]+|NaN)$"
    match = re.search(pattern, metrics, re.MULTILINE)
    return float(match[1]) if match else None


class Cluster:
    def __init__(self, kubectl: str) -> None:
        self.kubectl = kubectl

    def run(self, *args: str, stdin: str | None = None) -> str:
        done = subprocess.run(
            [self.kubectl, *args], input=stdin, capture_output=True, text=True, check=False
        )
        if done.returncode != 0:
            raise SmokeError(f"kubectl {' '.join(args)}: {done.stderr.strip()}")
        return done.stdout

    def json(self, *args: str) -> Any:
        return json.loads(self.run(*args, "-o", "json"))


def find_operator(cluster: Cluster, release: str, namespace: str) -> Operator:
    found = cluster.json(
        "get", "deployments", "-n", namespace, "-l", f"app.kubernetes.io/instance={release}"
    )["items"]
    operators = sorted(
        (d for d in found if d["spec"]["template"]["spec"]["containers"][0]["name"] == "operator"),
        key=lambda d: str(d["metadata"]["name"]),
    )
    if not operators:
        raise SmokeError(f"release {release} has no operator Deployment in {namespace}")
    return Operator.from_deployment(operators[0])


def apply_database(cluster: Cluster, namespace: str, operator: Operator) -> None:
    the_namespace = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}}
    cluster.run("apply", "-f", "-", stdin=json.dumps(the_namespace))
    labels = {SHARD_LABEL: operator.shard} if operator.shard else {}
    database = {
        "apiVersion": "databases.example.com/v1",
        "kind": "Database",
        "metadata": {"name": NAME, "namespace": namespace, "labels": labels},
        "spec": {"engine": "redis", "replicas": 1, "deletionPolicy": "Delete"},
    }
    cluster.run("apply", "-f", "-", stdin=json.dumps(database))


def ready_problem(database: dict[str, Any]) -> str | None:
    """Why the Database does not yet count as Ready for its current generation, or None."""
    generation = database["metadata"].get("generation")
    status = database.get("status") or {}
    if status.get("observedGeneration") != generation:
        return f"observedGeneration {status.get('observedGeneration')} of generation {generation}"
    ready = next((c for c in status.get("conditions", []) if c.get("type") == "Ready"), None)
    if ready is None:
        return "no Ready condition"
    if ready.get("status") != "True":
        return f"Ready {ready.get('status')} {ready.get('reason')}: {ready.get('message')}"
    if ready.get("observedGeneration") != generation:
        return f"Ready computed for generation {ready.get('observedGeneration')}, not {generation}"
    return None


def wait_ready(cluster: Cluster, namespace: str, deadline: float) -> None:
    problem = "not read yet"
    while time.monotonic() < deadline:
        problem = ready_problem(cluster.json("get", "database", NAME, "-n", namespace)) or ""
        if not problem:
            return
        time.sleep(POLL_S)
    raise SmokeError(f"the Database did not become Ready: {problem}")


def pods_of(cluster: Cluster, operator: Operator, namespace: str, urls: dict[str, str]) -> set[str]:
    if urls:
        return set(urls)
    selector = ",".join(f"{key}={value}" for key, value in sorted(operator.selector.items()))
    return {
        pod["metadata"]["name"]
        for pod in cluster.json("get", "pods", "-n", namespace, "-l", selector)["items"]
    }


def peering_status(cluster: Cluster, operator: Operator, smoke_namespace: str) -> Any:
    if operator.namespaces:  # one KopfPeering per watched namespace
        obj = cluster.json(
            "get", "kopfpeerings.kopf.dev", operator.peering_name, "-n", smoke_namespace
        )
    else:
        obj = cluster.json("get", "clusterkopfpeerings.kopf.dev", operator.peering_name)
    return obj.get("status") or {}


@contextmanager
def port_forward(kubectl: str, namespace: str, pod: str, port: int) -> Iterator[str]:
    """A local URL of the pod's metrics, through `kubectl port-forward` to that very pod."""
    process = subprocess.Popen(
        [kubectl, "port-forward", "-n", namespace, f"pod/{pod}", f":{port}"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        line = process.stdout.readline()  # Forwarding from 127.0.0.1:PORT -> 8080
        match = re.search(r"127\.0\.0\.1:(\d+)", line)
        if not match:
            raise SmokeError(f"kubectl port-forward to {pod}: {line or process.stderr}")
        yield f"http://127.0.0.1:{match[1]}/metrics"
    finally:
        process.terminate()
        process.wait(timeout=10)


def scrape(url: str) -> str:
    with urllib.request.urlopen(url, timeout=10) as response:  # noqa: S310 - a local URL
        return str(response.read().decode())


def check_metrics(metrics: str, pod: str) -> float:
    active = sample(metrics, "database_operator_active")
    if active != 1:
        raise SmokeError(
            f"{pod} says it is not the active replica (database_operator_active {active})"
        )
    successes = sample(metrics, "database_operator_reconciles_total", 'result="success"')
    if not successes:
        raise SmokeError(f"{pod} counts no successful reconcile")
    return successes


def smoke(env: dict[str, str]) -> None:
    cluster = Cluster(env.get("KUBECTL", "kubectl"))
    release = env.get("RELEASE", "database-operator")
    namespace = env.get("NAMESPACE", "database-operator-system")
    smoke_namespace = env.get("SMOKE_NAMESPACE", "database-operator-smoke")
    deadline = time.monotonic() + seconds(env.get("SMOKE_TIMEOUT", "180s"))
    urls = dict(item.split("=", 1) for item in env.get("POD_METRICS_URLS", "").split())

    operator = find_operator(cluster, release, namespace)
    log(f"applying Database {smoke_namespace}/{NAME} (operator {operator.deployment})")
    apply_database(cluster, smoke_namespace, operator)
    try:
        wait_ready(cluster, smoke_namespace, deadline)
        log("Ready at its current generation")
        # A peer that just started may not be in the peering object yet, nor a pod that just
        # took over active: look again until the deadline.
        while True:
            try:
                pods = pods_of(cluster, operator, namespace, urls)
                if operator.peering:
                    peers = live_peers(
                        peering_status(cluster, operator, smoke_namespace), datetime.now(UTC)
                    )
                    pod = active_peer(peers, pods)
                    log(f"active replica: {pod} (priority {peers[pod]}; peers {sorted(peers)})")
                elif len(pods) == 1:
                    pod = next(iter(pods))
                else:
                    raise SmokeError(f"no peering, yet {len(pods)} pods: {sorted(pods)}")
                if pod in urls:
                    metrics = scrape(urls[pod])
                else:
                    with port_forward(
                        cluster.kubectl, namespace, pod, operator.metrics_port
                    ) as url:
                        metrics = scrape(url)
                successes = check_metrics(metrics, pod)
                log(
                    f"passed: Ready; {pod} is active and counts {successes:g} successful reconciles"
                )
                return
            except (SmokeError, OSError) as error:
                if time.monotonic() >= deadline:
                    raise SmokeError(str(error)) from None
                time.sleep(POLL_S)
    finally:
        subprocess.run(
            [cluster.kubectl, "delete", "database", NAME, "-n", smoke_namespace,
             "--ignore-not-found", "--wait=false"],
            capture_output=True, check=False,
        )  # fmt: skip


def main() -> int:
    try:
        smoke(dict(os.environ))
    except ValueError as error:
        log(f"bad input: {error}")
        return 2
    except SmokeError as error:
        log(f"FAILED: {error}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
