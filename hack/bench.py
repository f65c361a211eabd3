"""`make bench`: the operator against a floor client, on one local control plane, side by side.

For each N (100 and 1,000 by default; `N=` or `--n` to change) the bench starts a fresh
etcd + kube-apiserver for each contender, interleaved (floor, operator, next N: floor,
operator) so both see the same machine:

- floor: one process that creates the N Databases and does only the writes the job needs,
  built by the operator's own `desired` and `status` code: credentials Secret, each child,
  the connection Secret, one status patch. 32 requests at a time, no reads.
- operator: `database-operator run -A`, while the bench creates the same N Databases, 32 at a
  time. Then it is restarted (resume), runs in steady state with a 5 s resync, and its
  spec-change -> status latency is measured against the watch-event floor.

Request counts come from kube-apiserver's own `apiserver_request_total`, less the bench's own
creates; CPU and peak RSS from /proc of the measured process. `--shards-n` (2,000 by default;
0: skip) compares one process with two shard processes. `--tracing-n` (1,000 by default; 0:
skip) compares tracing off, on (every reconcile sampled, exported to a real Jaeger) and on with
no collector at all. Figures are printed as a table and written as JSON (`--out`, default
.local/bench/<commit>.json) for comparison between commits.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import contextlib
import json
import os
import platform
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from kubernetes import client, config  # noqa: E402
from tests.controlplane import ControlPlane, _die_with_parent, install_crds  # noqa: E402
from tests.jaeger import Jaeger  # noqa: E402

GROUP, VERSION, PLURAL = "databases.example.com", "v1", "databases"
NAMESPACES = [f"bench-{i}" for i in range(10)]
CONCURRENCY = 32
STEADY_RESYNC_S = 5.0
STEADY_PERIODS = 3
LATENCY_CHANGES = 50
SHARD_LABEL = "databases.example.com/shard"
WRITE_VERBS = {"POST", "PUT", "PATCH", "APPLY", "DELETE"}
READ_VERBS = {"GET", "LIST"}
#: What the operator (or the floor) works on; requests on other resources are the control
#: plane's own housekeeping.
RESOURCES = {
    "databases",
    "secrets",
    "deployments",
    "services",
    "persistentvolumeclaims",
    "events",
    "customresourcedefinitions",
    "namespaces",
}


def spec_for(i: int) -> dict[str, Any]:
    """The fixed mix: engines in turn; every third postgres/mysql keeps data on a volume."""
    engine = ("postgres", "mysql", "redis")[i % 3]
    spec: dict[str, Any] = {"engine": engine}
    if engine != "redis" and i % 9 < 3:
        spec["storage"] = {"size": "1Gi"}
    return spec


def database(i: int, shards: int = 0) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": f"db-{i:05d}", "namespace": NAMESPACES[i % len(NAMESPACES)]}
    if shards:
        meta["labels"] = {SHARD_LABEL: f"s{i % shards}"}
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "Database",
        "metadata": meta,
        "spec": spec_for(i),
    }


def new_api(kubeconfig: Path) -> client.ApiClient:
    configuration = client.Configuration()
    config.load_kube_config(config_file=str(kubeconfig), client_configuration=configuration)
    configuration.connection_pool_maxsize = CONCURRENCY
    return client.ApiClient(configuration)


def call(
    api: client.ApiClient,
    verb: str,
    path: str,
    body: Any = None,
    content_type: str = "application/json",
) -> dict[str, Any]:
    response = api.call_api(
        path,
        verb,
        body=body,
        header_params={"Accept": "application/json", "Content-Type": content_type},
        auth_settings=["BearerToken"],
        _preload_content=False,
        _return_http_data_only=True,
    )
    return json.loads(response.data or b"{}")  # type: ignore[no-any-return]


def db_path(namespace: str, name: str | None = None) -> str:
    path = f"/apis/{GROUP}/{VERSION}/namespaces/{namespace}/{PLURAL}"
    return f"{path}/{name}" if name else path


# --- what the API server counted ------------------------------------------------------------------


def request_totals(api: client.ApiClient) -> dict[tuple[str, str], float]:
    """apiserver_request_total summed by (verb, resource[/subresource])."""
    response = api.call_api(
        "/metrics",
        "GET",
        auth_settings=["BearerToken"],
        _preload_content=False,
        _return_http_data_only=True,
    )
    totals: dict[tuple[str, str], float] = {}
    for line in response.data.decode().splitlines():
        if not line.startswith("apiserver_request_total{"):
            continue
        text, value = line[len("apiserver_request_total{") :].rsplit("} ", 1)
        labels = dict(p.split("=", 1) for p in text.replace('"', "").split(",") if "=" in p)
        if labels.get("resource") not in RESOURCES:
            continue
        resource = labels["resource"] + (
            f"/{labels['subresource']}" if labels.get("subresource") else ""
        )
        key = (labels.get("verb", ""), resource)
        totals[key] = totals.get(key, 0.0) + float(value)
    return totals


@dataclass
class Requests:
    """Requests between two scrapes, less the bench's own."""

    by_key: dict[tuple[str, str], float]

    @classmethod
    def between(
        cls,
        before: dict[tuple[str, str], float],
        after: dict[tuple[str, str], float],
        own: dict[tuple[str, str], float] | None = None,
    ) -> Requests:
        own = own or {}
        return cls(
            {
                k: after.get(k, 0.0) - before.get(k, 0.0) - own.get(k, 0.0)
                for k in after
                if after.get(k, 0.0) - before.get(k, 0.0) - own.get(k, 0.0)
            }
        )

    def count(self, verbs: set[str], resource: str | None = None) -> float:
        return sum(
            v
            for (verb, res), v in self.by_key.items()
            if verb in verbs and (resource is None or res.split("/")[0] == resource)
        )

    @property
    def writes(self) -> float:
        return self.count(WRITE_VERBS) - self.events

    @property
    def events(self) -> float:
        return self.count(WRITE_VERBS, "events")

    @property
    def reads(self) -> float:
        return self.count(READ_VERBS)

    def summary(self) -> dict[str, float]:
        return {f"{verb} {res}": v for (verb, res), v in sorted(self.by_key.items())}


# --- watching the Databases -----------------------------------------------------------------------


class Watcher:
    """Streams every Database event; remembers when each generation was first seen, and when
    each Database's status first observed it."""

    def __init__(self, api: client.ApiClient) -> None:
        self.api = api
        self.seen: dict[tuple[str, str, int], float] = {}
        self.observed: dict[tuple[str, str, int], float] = {}
        self.reconciled: set[tuple[str, str]] = set()
        self.changed = threading.Condition()
        self._response: Any = None
        self._closed = False
        #: How often the watch had to be started again (each time after a fresh list).
        self.restarts = 0
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        """List, then watch from the list's version; again whenever the stream ends (the API
        server drops a watcher that falls behind, e.g. when the machine is saturated)."""
        while not self._closed:
            with contextlib.suppress(Exception):
                listed = call(self.api, "GET", f"/apis/{GROUP}/{VERSION}/{PLURAL}")
                now = time.monotonic()
                for item in listed.get("items") or []:
                    self._event(item, now)
                self._response = self.api.call_api(
                    f"/apis/{GROUP}/{VERSION}/{PLURAL}",
                    "GET",
                    query_params=[
                        ("watch", "true"),
                        ("resourceVersion", listed["metadata"]["resourceVersion"]),
                    ],
                    auth_settings=["BearerToken"],
                    _preload_content=False,
                    _return_http_data_only=True,
                    _request_timeout=3600,
                )
                buffer = b""
                for chunk in self._response.stream(65536, decode_content=False):
                    buffer += chunk
                    *lines, buffer = buffer.split(b"\n")
                    now = time.monotonic()
                    for line in lines:
                        if line.strip():
                            self._event(json.loads(line)["object"], now)
            if not self._closed:
                self.restarts += 1
                time.sleep(0.2)

    def _event(self, obj: dict[str, Any], now: float) -> None:
        meta = obj.get("metadata", {})
        if "name" not in meta:
            return  # an ERROR event (e.g. 410 Gone): the next list catches up
        key = (meta.get("namespace", ""), meta.get("name", ""))
        generation = int(meta.get("generation", 0))
        self.seen.setdefault((*key, generation), now)
        observed = (obj.get("status") or {}).get("observedGeneration")
        if observed:
            self.observed.setdefault((*key, int(observed)), now)
            with self.changed:
                self.reconciled.add(key)
                self.changed.notify_all()

    def wait_reconciled(self, count: int, timeout: float) -> float:
        deadline = time.monotonic() + timeout
        with self.changed:
            while len(self.reconciled) < count:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError(f"{len(self.reconciled)} of {count} reconciled")
                self.changed.wait(min(left, 1.0))
        return time.monotonic()

    def close(self) -> None:
        """Stop streaming: shut the socket down (closing it from here would wait for the read
        in progress)."""
        self._closed = True
        with contextlib.suppress(Exception):
            self._response.connection.sock.shutdown(socket.SHUT_RDWR)


# --- processes ------------------------------------------------------------------------------------


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def peak_rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return 0.0


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class Operator:
    """`database-operator run -A` as a subprocess, with its metrics port."""

    kubeconfig: Path
    log: Path
    resync: float
    shard: str | None = None
    env: dict[str, str] = field(default_factory=dict)
    proc: subprocess.Popen[bytes] = field(init=False)
    metrics_port: int = field(default_factory=free_port)
    started: float = 0.0

    def start(self) -> Operator:
        health = free_port()
        argv = [
            sys.executable,
            "-m",
            "database_operator.cli",
            "run",
            "-A",
            f"--metrics-port={self.metrics_port}",
            f"--health-port={health}",
            f"--resync-interval={self.resync}",
            f"--log-level={os.environ.get('BENCH_LOG_LEVEL', 'WARNING')}",
        ]
        if self.shard:
            argv.append(f"--shard={self.shard}")
        if self.env:
            argv.append("--tracing")
        self.started = time.monotonic()
        with self.log.open("ab") as log:
            self.proc = subprocess.Popen(
                argv,
                stderr=log,
                stdout=log,
                env={**os.environ, **self.env, "KUBECONFIG": str(self.kubeconfig)},
                preexec_fn=_die_with_parent,  # noqa: PLW1509 - it only calls prctl
            )
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            with (
                contextlib.suppress(OSError),
                urllib.request.urlopen(f"http://127.0.0.1:{health}/readyz", timeout=1) as ready,
            ):
                if ready.status == 200:
                    return self
            if self.proc.poll() is not None:
                raise RuntimeError(f"operator exited: see {self.log}")
            time.sleep(0.05)
        raise TimeoutError("operator not ready")

    def metric(self, name: str) -> float:
        with urllib.request.urlopen(
            f"http://127.0.0.1:{self.metrics_port}/metrics", timeout=5
        ) as response:
            text = response.read().decode()
        return sum(
            float(line.rsplit(" ", 1)[1])
            for line in text.splitlines()
            if line.startswith(name) and not line.startswith("#")
        )

    def reconciles(self) -> float:
        return self.metric("database_operator_reconciles_total")

    def cpu(self) -> float:
        return cpu_seconds(self.proc.pid)

    def rss(self) -> float:
        return peak_rss_mib(self.proc.pid)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


@contextlib.contextmanager
def control_plane() -> Iterator[tuple[ControlPlane, client.ApiClient]]:
    workdir = Path(tempfile.mkdtemp(prefix="database-operator-bench-"))
    try:
        with ControlPlane(workdir) as plane:
            install_crds(plane.kubeconfig)
            api = new_api(plane.kubeconfig)
            for namespace in NAMESPACES:
                call(
                    api,
                    "POST",
                    "/api/v1/namespaces",
                    {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}},
                )
            # The CRD is Established; wait until its resource is served too.
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:
                with contextlib.suppress(Exception):
                    call(api, "GET", db_path(NAMESPACES[0]))
                    break
                time.sleep(0.1)
            yield plane, api
            api.close()
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def create_databases(api: client.ApiClient, n: int, shards: int = 0) -> float:
    """Create N Databases, 32 at a time; returns when the first create was sent."""
    started = time.monotonic()
    with concurrent.futures.ThreadPoolExecutor(CONCURRENCY) as pool:
        list(
            pool.map(
                lambda i: call(
                    api, "POST", db_path(database(i)["metadata"]["namespace"]), database(i, shards)
                ),
                range(n),
            )
        )
    return started


# --- the floor --------------------------------------------------------------------------------


def floor_client(kubeconfig: Path, n: int) -> dict[str, float]:
    """Create the N Databases and write exactly what each needs, 32 requests at a time."""
    from database_operator import desired
    from database_operator.api.models import Database
    from database_operator.kube import Kube
    from database_operator.status import Outcome, Workloads, compute_status

    api = new_api(kubeconfig)
    cpu0, t0, wall0 = time.process_time(), time.monotonic(), time.time()

    def one(i: int) -> None:
        body = database(i)
        namespace = body["metadata"]["namespace"]
        created = call(api, "POST", db_path(namespace), body)
        db = Database.model_validate(created)
        secret = desired.secret(db, desired.generate_password(), desired.generate_password())
        objects = [
            secret,
            *desired.children(db, desired.credentials_checksum(db, secret["data"])),
            desired.connection_secret(db, secret["data"]),
        ]
        for manifest in objects:
            call(api, "POST", Kube.path(manifest["kind"], namespace), manifest)
        status = compute_status(db, Workloads(), db.status, Outcome(), datetime.now(UTC))
        call(
            api,
            "PATCH",
            db_path(namespace, db.name) + "/status",
            {"status": status.to_wire()},
            content_type="application/merge-patch+json",
        )

    with concurrent.futures.ThreadPoolExecutor(CONCURRENCY) as pool:
        list(pool.map(one, range(n)))
    return {
        "seconds": time.monotonic() - t0,
        "cpu_s": time.process_time() - cpu0,
        "peak_rss_mib": peak_rss_mib(os.getpid()),
        "started_wall": wall0,
    }


def run_floor(n: int) -> dict[str, Any]:
    with control_plane() as (plane, api):
        watcher = Watcher(api)
        before = request_totals(api)
        done = subprocess.run(
            [sys.executable, __file__, "floor", str(plane.kubeconfig), str(n)],
            check=True,
            capture_output=True,
            text=True,
        )
        figures = json.loads(done.stdout)
        watcher.wait_reconciled(n, 120)
        watcher.close()
        requests = Requests.between(before, request_totals(api), {("POST", "databases"): n})
        return {
            "seconds": figures["seconds"],
            "cpu_s": figures["cpu_s"],
            "peak_rss_mib": figures["peak_rss_mib"],
            "writes_per_db": requests.writes / n,
            "events_per_db": requests.events / n,
            "reads_per_db": requests.reads / n,
            "requests": requests.summary(),
        }


# --- the operator -----------------------------------------------------------------------------


def percentile(values: list[float], share: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(share * (len(ordered) - 1)))]


def wait_resumed(operator: Operator, n: int) -> float:
    """Seconds from the operator's start until it has reconciled every Database once."""
    while operator.reconciles() < n:
        if time.monotonic() - operator.started > 300:
            raise TimeoutError("resume took over 300 s")
        time.sleep(0.1)
    return time.monotonic() - operator.started


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
            {"spec": {"podAnnotations": {"bench.example.com/change": f"{round_}-{k}"}}},
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


def run_operator(n: int, logs: Path, resync: float | None = None) -> dict[str, Any]:
    """Create N with the operator running; restart it; steady state; spec-change latency."""
    result: dict[str, Any] = {}
    with control_plane() as (plane, api):
        watcher = Watcher(api)
        operator = Operator(
            plane.kubeconfig, logs / f"operator-{n}.log", resync=resync or 60.0
        ).start()
        before, cpu0 = request_totals(api), operator.cpu()
        started = create_databases(api, n)
        finished = watcher.wait_reconciled(n, 600)
        time.sleep(2.0)  # what the creates still set off (children's own events)
        requests = Requests.between(before, request_totals(api), {("POST", "databases"): n})
        result["create"] = {
            "seconds": finished - started,
            "cpu_s": operator.cpu() - cpu0,
            "peak_rss_mib": operator.rss(),
            "writes_per_db": requests.writes / n,
            "events_per_db": requests.events / n,
            "reads_per_db": requests.reads / n,
            "reconciles_per_db": operator.reconciles() / n,
            "requests": requests.summary(),
        }
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
        time.sleep(STEADY_RESYNC_S * STEADY_PERIODS)
        requests = Requests.between(before, request_totals(api))
        periods = n * STEADY_PERIODS
        result["steady"] = {
            "resync_s": STEADY_RESYNC_S,
            "writes_per_db_per_resync": requests.writes / periods,
            "reads_per_db_per_resync": requests.reads / periods,
            "reconciles_per_db_per_period": (operator.reconciles() - reconciles0) / periods,
            "cpu_s_per_period": (operator.cpu() - cpu0) / STEADY_PERIODS,
            "requests": requests.summary(),
        }
        result["latency_short_resync"] = measure_latency(api, watcher, n, round_=2)
        rss = max(rss, operator.rss())
        result["peak_rss_mib"] = max(result["create"]["peak_rss_mib"], rss, operator.rss())
        operator.stop()
        watcher.close()
        result["bench_watch_restarts"] = watcher.restarts
    return result


def run_sharded(n: int, shards: int, logs: Path) -> dict[str, Any]:
    """N Databases labelled over ``shards`` shards: one process for all, or one per shard."""
    with control_plane() as (plane, api):
        watcher = Watcher(api)
        operators = [
            Operator(
                plane.kubeconfig,
                logs / f"shard-{n}-{s}.log",
                resync=60.0,
                shard=f"s{s}" if shards > 1 else None,
            ).start()
            for s in range(shards)
        ]
        cpu0 = sum(o.cpu() for o in operators)
        started = create_databases(api, n, shards=2)
        finished = watcher.wait_reconciled(n, 900)
        figures = {
            "processes": shards,
            "seconds": finished - started,
            "cpu_s": sum(o.cpu() for o in operators) - cpu0,
            "peak_rss_mib_per_process": max(o.rss() for o in operators),
        }
        for operator in operators:
            operator.stop()
        watcher.close()
    return figures


def run_traced(n: int, logs: Path, tracing: str) -> dict[str, Any]:
    """N Databases created with tracing off, on (to a real Jaeger) or on with no collector."""
    jaeger = Jaeger(logs / "jaeger").start() if tracing == "jaeger" else None
    env = {}
    if tracing != "off":
        endpoint = jaeger.otlp_http if jaeger else f"http://127.0.0.1:{free_port()}"
        env = {"OTEL_EXPORTER_OTLP_ENDPOINT": endpoint, "OTEL_TRACES_SAMPLER": "always_on"}
    try:
        with control_plane() as (plane, api):
            watcher = Watcher(api)
            operator = Operator(
                plane.kubeconfig, logs / f"tracing-{tracing}-{n}.log", resync=60.0, env=env
            ).start()
            cpu0 = operator.cpu()
            started = create_databases(api, n)
            finished = watcher.wait_reconciled(n, 900)
            figures = {
                "tracing": tracing,
                "seconds": finished - started,
                "cpu_s": operator.cpu() - cpu0,
                "peak_rss_mib": operator.rss(),
                "spans_dropped": operator.metric("database_operator_trace_spans_dropped_total"),
            }
            operator.stop()  # exports what is queued
            watcher.close()
        if jaeger:
            traces = jaeger.traces("database-operator", "reconcile Database", limit=100_000)
            figures["traces_in_jaeger"] = len(traces)
            spans = sum(len(trace["spans"]) for trace in traces)
            figures["spans_per_trace"] = spans / max(1, len(traces))
    finally:
        if jaeger:
            jaeger.stop()
    return figures


# --- the report -------------------------------------------------------------------------------


def table(n: int, floor: dict[str, Any], op: dict[str, Any]) -> str:
    c, r, s, lat = op["create"], op["restart"], op["steady"], op["latency"]
    short = op["latency_short_resync"]

    def ratio(a: float, b: float) -> str:
        return f" ({a / b:.1f}x)" if b else ""

    rows = [
        (
            "time from first create to every Database reconciled",
            f"{floor['seconds']:.1f} s",
            f"{c['seconds']:.1f} s{ratio(c['seconds'], floor['seconds'])}",
        ),
        (
            "client CPU",
            f"{floor['cpu_s']:.1f} s",
            f"{c['cpu_s']:.1f} s{ratio(c['cpu_s'], floor['cpu_s'])}",
        ),
        (
            "writes per Database on create (+ Events)",
            f"{floor['writes_per_db']:.1f}",
            f"{c['writes_per_db']:.1f} (+ {c['events_per_db']:.1f} Events)",
        ),
        (
            "reads per Database on create",
            f"{floor['reads_per_db']:.1f}",
            f"{c['reads_per_db']:.1f}",
        ),
        ("reconciles per Database on create", "-", f"{c['reconciles_per_db']:.2f}"),
        ("peak memory (RSS)", f"{floor['peak_rss_mib']:.0f} MiB", f"{op['peak_rss_mib']:.0f} MiB"),
        (
            f"restart: time to resume {n}",
            "-",
            f"{r['seconds']:.1f} s, {r['reads_per_db']:.1f} reads and "
            f"{r['writes_per_db'] + r['events_per_db']:.1f} writes per Database",
        ),
        (
            f"steady state, resync {s['resync_s']:.0f} s: writes / reads per Database per resync",
            "-",
            f"{s['writes_per_db_per_resync']:.2f} / {s['reads_per_db_per_resync']:.2f}",
        ),
        (
            f"steady state, resync {s['resync_s']:.0f} s: reconciles per Database per period, "
            "CPU per period",
            "-",
            f"{s['reconciles_per_db_per_period']:.2f}, {s['cpu_s_per_period']:.2f} s",
        ),
        (
            "spec change -> status p50 / p95, default resync (60 s)",
            f"watch event p95 {lat['watch_p95_s'] * 1000:.0f} ms",
            f"{lat['status_p50_s'] * 1000:.0f} ms / {lat['status_p95_s'] * 1000:.0f} ms",
        ),
        (
            f"spec change -> status p50 / p95, resync {s['resync_s']:.0f} s",
            f"watch event p95 {short['watch_p95_s'] * 1000:.0f} ms",
            f"{short['status_p50_s'] * 1000:.0f} ms / {short['status_p95_s'] * 1000:.0f} ms",
        ),
    ]
    width = max(len(row[0]) for row in rows)
    lines = [
        f"| N = {n:,}".ljust(width + 2) + " | floor | operator |",
        "| " + "-" * width + " | --- | --- |",
    ]
    lines += [f"| {a.ljust(width)} | {b} | {c_} |" for a, b, c_ in rows]
    return "\n".join(lines)


def shard_table(n: int, one: dict[str, Any], many: dict[str, Any]) -> str:
    return "\n".join(
        [
            f"| N = {n:,} | 1 process | {many['processes']} shards |",
            "| --- | --- | --- |",
            "| time to every Database reconciled | "
            f"{one['seconds']:.1f} s | {many['seconds']:.1f} s |",
            f"| CPU (all processes) | {one['cpu_s']:.1f} s | {many['cpu_s']:.1f} s |",
            f"| peak RSS per process | {one['peak_rss_mib_per_process']:.0f} MiB | "
            f"{many['peak_rss_mib_per_process']:.0f} MiB |",
        ]
    )


def off_span_ns(calls: int = 1_000_000) -> float:
    """What one span costs with tracing off (the code path every API call takes), in ns."""
    from database_operator import tracing

    assert not tracing.enabled()
    attributes = {"http.request.method": "GET", "url.path": "/api/v1/namespaces/a/secrets/b"}
    started = time.perf_counter()
    for _ in range(calls):
        with tracing.span("GET secrets", attributes, record_errors=False) as span:
            span.set_attribute("http.response.status_code", 200)
    return (time.perf_counter() - started) / calls * 1e9


def tracing_table(n: int, runs: list[dict[str, Any]], off_ns: float) -> str:
    off = runs[0]
    spans = next((r["spans_per_trace"] for r in runs if "spans_per_trace" in r), 0.0)
    per_reconcile_us = off_ns * spans / 1000
    share = per_reconcile_us / 1e6 / (off["cpu_s"] / n)
    names = {"off": "off", "jaeger": "on, to Jaeger", "absent": "on, no collector"}
    lines = [
        f"| N = {n:,}, tracing | " + " | ".join(names[r["tracing"]] for r in runs) + " |",
        "| --- |" + " --- |" * len(runs),
        "| time to every Database reconciled | "
        + " | ".join(
            f"{r['seconds']:.1f} s ({r['seconds'] / off['seconds'] - 1:+.0%})" for r in runs
        )
        + " |",
        "| operator CPU | "
        + " | ".join(f"{r['cpu_s']:.1f} s ({r['cpu_s'] / off['cpu_s'] - 1:+.0%})" for r in runs)
        + " |",
        "| peak RSS | " + " | ".join(f"{r['peak_rss_mib']:.0f} MiB" for r in runs) + " |",
        "| spans dropped (counted) | "
        + " | ".join(f"{r['spans_dropped']:.0f}" for r in runs)
        + " |",
        f"| tracing off: {off_ns:.0f} ns per span x {spans:.1f} spans per reconcile | "
        f"{per_reconcile_us:.1f} µs per reconcile, {share:.3%} of its CPU |"
        + " |"
        * (len(runs) - 1),
    ]
    return "\n".join(lines)


def commit() -> str:
    with contextlib.suppress(Exception):
        return subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],
            cwd=ROOT,
            check=True,
            capture_output=True,
            text=True,
        ).stdout.strip()
    return "unknown"


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if args[:1] == ["floor"]:  # the floor client's own process
        print(json.dumps(floor_client(Path(args[1]), int(args[2]))))
        return 0
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", default="100,1000", help="Database counts, comma-separated")
    parser.add_argument(
        "--shards-n", type=int, default=2000, help="Databases for the sharding comparison (0: skip)"
    )
    parser.add_argument(
        "--tracing-n", type=int, default=1000, help="Databases for the tracing cost (0: skip)"
    )
    parser.add_argument("--operator-only", action="store_true", help="skip the floor")
    parser.add_argument("--out", type=Path, help="JSON output (default .local/bench/<commit>.json)")
    options = parser.parse_args(args)
    logs = ROOT / ".local" / "bench"
    logs.mkdir(parents=True, exist_ok=True)
    report: dict[str, Any] = {
        "commit": commit(),
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version()},
        "runs": {},
        "sharding": None,
        "tracing": None,
    }
    tables = []
    for n in [int(x) for x in options.n.split(",") if x.strip()]:
        print(f"N = {n}: floor ...", flush=True)
        floor = run_floor(n) if not options.operator_only else None
        print(f"N = {n}: operator ...", flush=True)
        op = run_operator(n, logs)
        report["runs"][str(n)] = {"floor": floor, "operator": op}
        if floor:
            tables.append(table(n, floor, op))
            print(tables[-1], flush=True)
        else:
            print(json.dumps(op, indent=1), flush=True)
    if options.shards_n:
        print(f"N = {options.shards_n}: one process, then 2 shards ...", flush=True)
        one = run_sharded(options.shards_n, 1, logs)
        many = run_sharded(options.shards_n, 2, logs)
        report["sharding"] = {"n": options.shards_n, "one": one, "shards": many}
        tables.append(shard_table(options.shards_n, one, many))
        print(tables[-1], flush=True)
    if options.tracing_n:
        print(f"N = {options.tracing_n}: tracing off, on (Jaeger), on (no collector) ...")
        runs = [run_traced(options.tracing_n, logs, mode) for mode in ("off", "jaeger", "absent")]
        off_ns = off_span_ns()
        report["tracing"] = {"n": options.tracing_n, "runs": runs, "off_span_ns": off_ns}
        tables.append(tracing_table(options.tracing_n, runs, off_ns))
        print(tables[-1], flush=True)
    out = options.out or logs / f"{report['commit']}.json"
    out.write_text(json.dumps(report, indent=1) + "\n")
    print(f"\nJSON: {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
