"""`make bench`'s operator runs: create N with the operator running, restart it, steady state,
spec-change latency; the same create with its webhooks on; its memory as the Databases grow."""

from __future__ import annotations

import random
import time
from pathlib import Path
from typing import Any

from bench_plane import (
    CHANGE_ANNOTATION,
    Requests,
    Watcher,
    apiserver_metrics,
    call,
    control_plane,
    create_databases,
    database,
    db_path,
    request_totals,
)
from bench_process import Operator, rss_mib, wait_resumed
from bench_stats import buckets_by, latency_summary, percentile
from kubernetes import client

STEADY_RESYNC_S = 5.0
STEADY_PERIODS = 3
#: 200 changes, one every 0.1 s: a round spans four periods of a 5 s resync, so whether the
#: audit's listing lands in it is not luck, and a p95 is the 10th slowest, not the 3rd.
LATENCY_CHANGES = 200
#: kube-apiserver's histogram of each admission webhook call, by webhook name.
APISERVER_WEBHOOK_HISTOGRAM = "apiserver_admission_webhook_admission_duration_seconds"


def measure_latency(
    api: client.ApiClient, watcher: Watcher, n: int, round_: int
) -> dict[str, float]:
    """Change the spec of LATENCY_CHANGES Databases, one every 0.1 s; time each change to the
    watch event that carries it (the floor) and to the status that observed it."""
    rng = random.Random(n + round_)  # noqa: S311 - a reproducible pick, not a secret
    picks = rng.sample(range(n), min(LATENCY_CHANGES, n))
    sent: list[tuple[str, str, int, float]] = []
    for k, i in enumerate(picks):
        body = database(i)
        namespace, name = body["metadata"]["namespace"], body["metadata"]["name"]
        at = time.monotonic()
        changed = call(
            api,
            "PATCH",
            db_path(namespace, name),
            {"spec": {"podAnnotations": {CHANGE_ANNOTATION: f"{round_}-{k}"}}},
            content_type="application/merge-patch+json",
        )
        sent.append((namespace, name, int(changed["metadata"]["generation"]), at))
        time.sleep(0.1)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and any(
        (ns, nm, g) not in watcher.observed for ns, nm, g, _ in sent
    ):
        time.sleep(0.1)
    status = [
        watcher.observed[(ns, nm, g)] - at
        for ns, nm, g, at in sent
        if (ns, nm, g) in watcher.observed
    ]
    events = [
        watcher.seen[(ns, nm, g)] - at for ns, nm, g, at in sent if (ns, nm, g) in watcher.seen
    ]
    return {
        "changes": len(sent),
        "status_p50_s": percentile(status, 0.5),
        "status_p95_s": percentile(status, 0.95),
        "watch_p50_s": percentile(events, 0.5),
        "watch_p95_s": percentile(events, 0.95),
        "missed": len(sent) - len(status),
    }


def measure_create(
    api: client.ApiClient, watcher: Watcher, operator: Operator, n: int
) -> dict[str, Any]:
    """Create N Databases with ``operator`` running: time until each is reconciled, its CPU and
    peak RSS, and the requests per Database (less the bench's own creates)."""
    before, cpu0, gc0 = request_totals(api), operator.cpu(), operator.gc_seconds()
    started = create_databases(api, n)
    finished = watcher.wait_reconciled(n, 600)
    time.sleep(2.0)  # what the creates still set off (children's own events)
    requests = Requests.between(before, request_totals(api), {("POST", "databases"): n})
    return {
        "seconds": finished - started,
        "cpu_s": operator.cpu() - cpu0,
        "gc_s": operator.gc_seconds() - gc0,
        "peak_rss_mib": operator.rss(),
        "writes_per_db": requests.writes / n,
        "events_per_db": requests.events / n,
        "reads_per_db": requests.reads / n,
        "reconciles_per_db": operator.reconciles() / n,
        "requests": requests.summary(),
    }


def run_operator(n: int, logs: Path, resync: float | None = None) -> dict[str, Any]:
    """Create N with the operator running; restart it; steady state; spec-change latency."""
    result: dict[str, Any] = {}
    with control_plane() as (plane, api):
        watcher = Watcher(api)
        operator = Operator(
            plane.kubeconfig, logs / f"operator-{n}.log", resync=resync or 60.0
        ).start()
        result["create"] = measure_create(api, watcher, operator, n)
        operator.stop()
        # Restart: time to resume, then spec-change latency with the default resync.
        before = request_totals(api)
        operator = Operator(plane.kubeconfig, logs / f"operator-{n}.log", resync=60.0).start()
        resumed = wait_resumed(operator, n)
        time.sleep(0.5)
        requests = Requests.between(before, request_totals(api))
        result["restart"] = {
            "seconds": resumed,
            "writes_per_db": requests.writes / n,
            "events_per_db": requests.events / n,
            "reads_per_db": requests.reads / n,
            "requests": requests.summary(),
        }
        result["latency"] = measure_latency(api, watcher, n, round_=1)
        result["latency"]["gc_full"] = operator.full_collections()
        rss = operator.rss()
        operator.stop()

        # Steady state with a short resync: STEADY_PERIODS periods, nothing changing; then the
        # spec-change latency while those resyncs keep coming.
        operator = Operator(
            plane.kubeconfig, logs / f"operator-{n}.log", resync=STEADY_RESYNC_S
        ).start()
        wait_resumed(operator, n)
        time.sleep(STEADY_RESYNC_S)
        before, cpu0, reconciles0 = request_totals(api), operator.cpu(), operator.reconciles()
        skipped0 = operator.metric("database_operator_resyncs_skipped_total")
        time.sleep(STEADY_RESYNC_S * STEADY_PERIODS)
        requests = Requests.between(before, request_totals(api))
        periods = n * STEADY_PERIODS
        result["steady"] = {
            "resync_s": STEADY_RESYNC_S,
            "writes_per_db_per_resync": requests.writes / periods,
            "reads_per_db_per_resync": requests.reads / periods,
            "reconciles_per_db_per_period": (operator.reconciles() - reconciles0) / periods,
            "skipped_per_db_per_period": (
                operator.metric("database_operator_resyncs_skipped_total") - skipped0
            )
            / periods,
            "cpu_s_per_period": (operator.cpu() - cpu0) / STEADY_PERIODS,
            "requests": requests.summary(),
        }
        result["latency_short_resync"] = measure_latency(api, watcher, n, round_=2)
        result["latency_short_resync"]["gc_full"] = operator.full_collections()
        rss = max(rss, operator.rss())
        result["peak_rss_mib"] = max(result["create"]["peak_rss_mib"], rss, operator.rss())
        operator.stop()
        watcher.close()
        result["bench_watch_restarts"] = watcher.restarts
    return result


def run_webhooks(n: int, logs: Path) -> dict[str, Any]:
    """Create N with the operator serving its admission webhooks (and registering them, and the
    CRD's conversion, by URL, as `make demo` runs it): the create figures, and each webhook's
    latency as the operator timed it and as kube-apiserver did (its call, network and TLS
    included)."""
    with control_plane() as (plane, api):
        watcher = Watcher(api)
        operator = Operator(
            plane.kubeconfig, logs / f"webhooks-{n}.log", resync=60.0, webhooks=True
        ).start()
        figures = measure_create(api, watcher, operator, n)
        figures["webhook_latency"] = operator.webhook_latency()
        figures["apiserver_webhook_latency"] = latency_summary(
            buckets_by(apiserver_metrics(api), APISERVER_WEBHOOK_HISTOGRAM, "name")
        )
        operator.stop()
        watcher.close()
    return figures


def run_rss(counts: list[int], logs: Path) -> list[dict[str, float]]:
    """One operator; create Databases up to each count in turn (waiting until all are
    reconciled): its peak and current RSS at each."""
    points: list[dict[str, float]] = []
    with control_plane() as (plane, api):
        watcher = Watcher(api)
        operator = Operator(plane.kubeconfig, logs / "rss.log", resync=60.0).start()
        created = 0
        for count in sorted(counts):
            started = create_databases(api, count, first=created)
            finished = watcher.wait_reconciled(count, 900)
            created = count
            time.sleep(2.0)  # the children's events settle
            points.append(
                {
                    "n": count,
                    "seconds": finished - started,
                    "peak_rss_mib": operator.rss(),
                    "rss_mib": rss_mib(operator.proc.pid),
                }
            )
        operator.stop()
        watcher.close()
    return points
