#!/usr/bin/env python3
"""Smoke test of a deployed release, right with one replica or an HA pair.

1. The release's health is read from the Kubernetes API: a Database in a smoke namespace must
   become Ready, with `status.observedGeneration` and the Ready condition's observedGeneration
   equal to its generation (a status left from an older spec does not count).
2. The operator's metrics are read from the replica that is working. With leader election, that
   is the holder of the release's Lease (its holderIdentity is "<pod>_<8 hex>") — the pod that
   reconciles; a port-forward to the metrics Service could land on a standby, which has
   reconciled nothing. The pod must say so itself (`database_operator_active` 1) and count
   successful reconciles. Without leader election, the release's only pod.

The smoke Database is deleted afterwards, pass or fail. Exit 0: passed; 1: failed (the reason is
printed); 2: bad input.

    env: KUBECTL (kubectl), RELEASE (database-operator), NAMESPACE (database-operator-system),
         SMOKE_NAMESPACE (database-operator-smoke), SMOKE_TIMEOUT (180s),
         POD_METRICS_URLS ("pod=url ..."; default: kubectl port-forward to each pod as needed;
         the tests set it, their operators are local processes named by POD_NAME)

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
from typing import Any

NAME = "smoke"
#: Spelled out, not imported (the standard library only); tests/unit/test_smoke.py keeps them
#: equal to the operator's.
SHARD_LABEL = "databases.example.com/shard"
API_VERSION = "databases.example.com/v1"
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
    leader_election: bool
    lease_name: str
    lease_namespace: str | None  # None: the operator's own (the release's namespace)
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
        shard = flags.get("--shard", [None])[-1]
        return cls(
            deployment=deployment["metadata"]["name"],
            selector=deployment["spec"]["selector"]["matchLabels"],
            leader_election="--leader-election" in flags,
            # The operator's default: database-operator, or database-operator-SHARD.
            lease_name=flags.get("--lease-name", [None])[-1]
            or (f"database-operator-{shard}" if shard else "database-operator"),
            lease_namespace=flags.get("--lease-namespace", [None])[-1] or None,
            namespaces=tuple(flags.get("--namespace", [])),
            metrics_port=int(flags.get("--metrics-port", ["8080"])[-1]),
            shard=shard,
        )


def lease_holder(lease: dict[str, Any], pods: set[str]) -> str:
    """The pod that holds the Lease: the one that reconciles. Its holderIdentity is
    "<pod>_<8 hex>" (runner.build.identity: the pod's name, and a suffix per process)."""
    holder = str((lease.get("spec") or {}).get("holderIdentity") or "")
    if not holder:
        raise SmokeError("the Lease has no holder: no replica leads (released, or none took it)")
    pod, _, suffix = holder.rpartition("_")
    if not pod or not re.fullmatch(r"[0-9a-f]{8}", suffix):
        raise SmokeError(f"the Lease's holder {holder!r} is not an operator's (<pod>_<8 hex>)")
    if pod not in pods:
        raise SmokeError(
            f"the Lease's holder {pod!r} is not a pod of this release ({sorted(pods)}): "
            "it keeps this release's replicas standing by"
        )
    return pod


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
        "apiVersion": API_VERSION,
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


def read_lease(cluster: Cluster, operator: Operator, namespace: str) -> Any:
    return cluster.json(
        "get", "leases", operator.lease_name, "-n", operator.lease_namespace or namespace
    )


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
        # A replica that just took the Lease over may not have said so in its metrics yet, nor
        # a new pod be listed: look again until the deadline.
        while True:
            try:
                pods = pods_of(cluster, operator, namespace, urls)
                if operator.leader_election:
                    lease = read_lease(cluster, operator, namespace)
                    pod = lease_holder(lease, pods)
                    spec = lease.get("spec") or {}
                    log(
                        f"leader: {pod} (Lease {lease['metadata']['namespace']}/"
                        f"{operator.lease_name}, acquired {spec.get('acquireTime')}, "
                        f"{spec.get('leaseTransitions', 0)} transitions; pods {sorted(pods)})"
                    )
                elif len(pods) == 1:
                    pod = next(iter(pods))
                else:
                    raise SmokeError(f"no leader election, yet {len(pods)} pods: {sorted(pods)}")
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
