"""`make demo`: the product doing its job on a laptop.

Starts a full local cluster (etcd, kube-apiserver, kube-controller-manager, kube-scheduler and
kwok playing one node, so pods really get scheduled and become Ready without containers), runs
the operator from the working tree, applies config/samples, and shows the Databases and their
children live until every sample is Active, and where the metrics of the one with
spec.monitoring are served; then takes a backup of one and restores it into a new Database
(kwok completes the Jobs' pods without running them: the backup is simulated, and says so).
Everything keeps running afterwards so you can poke it; `make cluster-down` stops it all. Prints
how long each stage took. With JAEGER=1 it starts Jaeger too and the operator sends it a trace
of every reconcile.

With REAL=1 (`make demo REAL=1`, root): the same story on real pods. A real node on this host
(tests/realnode.py: containerd, a kubelet, kube-proxy, CoreDNS), the operator installed with its
chart from its own image (built from the Dockerfile), the samples on this host's images of the
engines (Debian's PostgreSQL 15, MariaDB 10.11 for MySQL, Redis 7.0); then rows written on the
primary of orders and read on its streaming replica, catalog's exporter scraped (pg_up), and a
real backup of orders stored in SeaweedFS on the host and restored into a new Database with the
same rows.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.cluster import Cluster  # noqa: E402 - after the path set-up below
from tests.controlplane import (  # noqa: E402 - after the path set-up above
    ControlPlane,
    cluster_down,
    install_crds,
    kube_version,
    run_kubectl,
)
from tests.jaeger import Jaeger  # noqa: E402
from tests.objectstore import start_object_store  # noqa: E402
from tests.realnode import RealCluster, RealNodeError  # noqa: E402
from tests.realpods import install_operator, on_local_images  # noqa: E402

from database_operator.api.models import GROUP, ROLE_LABEL, VERSION  # noqa: E402

WORKDIR = ROOT / ".local"
SAMPLES = [
    ROOT / "config" / "samples" / f"{name}.yaml"
    for name in ("postgres", "mysql", "redis", "monitored")
]
TIMEOUT_S = 180
API_VERSION = f"{GROUP}/{VERSION}"

timings: list[tuple[str, float]] = []


@contextlib.contextmanager
def stage(name: str) -> Iterator[None]:
    print(f"==> {name}", flush=True)
    started = time.monotonic()
    yield
    took = time.monotonic() - started
    timings.append((name, took))
    print(f"    done in {took:.1f}s", flush=True)


def port(preferred: int) -> int:
    """``preferred`` when it is free on loopback, else any free port."""
    with socket.socket() as sock:
        try:
            sock.bind(("127.0.0.1", preferred))
            return preferred
        except OSError:
            sock.bind(("127.0.0.1", 0))
            return int(sock.getsockname()[1])


def start_operator(
    plane: ControlPlane, metrics_port: int, health_port: int, webhook_port: int, traces: str
) -> int:
    """The operator, sending traces to the OTLP endpoint ``traces`` (empty: no tracing)."""
    log = (WORKDIR / "logs" / "operator.log").open("ab")
    tracing = {"OTEL_EXPORTER_OTLP_ENDPOINT": traces, "OTEL_TRACES_SAMPLER": "always_on"}
    proc = subprocess.Popen(
        [
            str(ROOT / ".venv" / "bin" / "database-operator"),
            "run",
            "--all-namespaces",
            f"--metrics-port={metrics_port}",
            f"--health-port={health_port}",
            "--resync-interval=15",
            # Outside the cluster: the operator serves its webhooks on loopback with its own CA
            # and registers them (and the CRD's conversion) by URL.
            f"--webhook-port={webhook_port}",
            f"--webhook-url=https://127.0.0.1:{webhook_port}",
            *(["--tracing"] if traces else []),
        ],
        env={**os.environ, **(tracing if traces else {}), "KUBECONFIG": str(plane.kubeconfig)},
        stdout=log,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        start_new_session=True,  # it outlives this script; `make cluster-down` stops it
    )
    # Recorded with the cluster's processes, so `make cluster-down` stops it too.
    state = json.loads(plane.state_file.read_text())
    plane.state_file.write_text(json.dumps({**state, "operator": proc.pid}))
    return proc.pid


def wait_ready(health_port: int) -> None:
    """Until /readyz answers: Kopf watches and the webhooks are registered and served."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            url = f"http://127.0.0.1:{health_port}/readyz"
            with urllib.request.urlopen(url, timeout=2):
                return
        except OSError:
            time.sleep(0.3)
    raise SystemExit("the operator did not become ready: see .local/logs/operator.log")


def snapshot(kubeconfig: Path) -> tuple[list[str], bool]:
    """Lines of the live view, and whether every Database is Active."""
    dbs = json.loads(run_kubectl(kubeconfig, "get", "databases", "-A", "-o", "json"))["items"]
    pods = json.loads(run_kubectl(kubeconfig, "get", "pods", "-A", "-o", "json"))["items"]
    lines = [
        f"{'DATABASE':<12}{'ENGINE':<10}{'PHASE':<10}{'READY':<7}PODS (P: primary, R: replica)"
    ]
    for db in dbs:
        name, status = db["metadata"]["name"], db.get("status", {})
        mine = [
            p
            for p in pods
            if p["metadata"].get("labels", {}).get("app.kubernetes.io/instance") == name
        ]
        states = ", ".join(
            f"{role_of(p)}:{p['metadata']['name'].rsplit('-', 1)[-1]}:{pod_state(p)}"
            for p in sorted(mine, key=role_of)
        )
        ready = f"{status.get('readyReplicas', 0)}/{db['spec'].get('replicas', 1)}"
        phase, engine = status.get("phase", "-"), db["spec"]["engine"]
        lines.append(f"{name:<12}{engine:<10}{phase:<10}{ready:<7}{states or '-'}")
    all_active = bool(dbs) and all(db.get("status", {}).get("phase") == "Active" for db in dbs)
    return lines, all_active


def role_of(pod: dict[str, Any]) -> str:
    role = pod["metadata"].get("labels", {}).get(ROLE_LABEL, "")
    return "P" if role == "primary" else "R"


def pod_state(pod: dict[str, object]) -> str:
    status = pod.get("status") or {}
    assert isinstance(status, dict)
    conditions = {c["type"]: c["status"] for c in status.get("conditions") or []}
    if conditions.get("Ready") == "True":
        return "Ready"
    return str(status.get("phase", "Pending"))


def live_view(kubeconfig: Path) -> bool:
    deadline = time.monotonic() + TIMEOUT_S
    shown: list[str] = []
    while time.monotonic() < deadline:
        lines, done = snapshot(kubeconfig)
        if lines != shown:
            stamp = f"[{time.strftime('%H:%M:%S')}]"
            print(
                "\n".join(
                    f"    {stamp} {line}" if i == 0 else f"    {' ' * len(stamp)} {line}"
                    for i, line in enumerate(lines)
                ),
                flush=True,
            )
            shown = lines
        if done:
            return True
        time.sleep(0.5)
    return False


#: Where the demo's backups go. kwok runs no containers: the backup and restore Jobs' pods
#: complete as a kubelet would report them, so the demo shows the objects and their states;
#: the recipe tests run the same Jobs' programs for real against the engines and SeaweedFS.
BACKUP_POLICY = {
    "destination": {
        "s3": {
            "endpoint": "http://seaweedfs.storage.svc:8333",
            "insecure": True,  # the demo's SeaweedFS serves no TLS
            "bucket": "backups",
            "path": "demo",
            "credentialsSecretRef": {"name": "backup-credentials"},
        }
    },
    "schedule": "0 2 * * *",
    "retention": {"count": 7},
}


def backup_and_restore(kubeconfig: Path) -> bool:
    """Give orders a backup policy, take a backup now, restore it into orders-restored."""

    def kubectl(*args: str, stdin: str | None = None) -> str:
        return run_kubectl(kubeconfig, *args, stdin=stdin)

    credentials = {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": "backup-credentials"},
        "stringData": {"AWS_ACCESS_KEY_ID": "demo", "AWS_SECRET_ACCESS_KEY": "demo-secret-key"},
    }
    backup = {
        "apiVersion": API_VERSION,
        "kind": "DatabaseBackup",
        "metadata": {"name": "orders-demo"},
        "spec": {"database": "orders"},
    }
    restored = {
        "apiVersion": API_VERSION,
        "kind": "Database",
        "metadata": {"name": "orders-restored"},
        "spec": {
            "engine": "postgres",
            "storage": {"size": "1Gi"},
            "restore": {"backup": "orders-demo"},
        },
    }
    print("    " + kubectl("apply", "-f", "-", stdin=json.dumps(credentials)).strip())
    patch = json.dumps({"spec": {"backup": BACKUP_POLICY}})
    print("    " + kubectl("patch", "db", "orders", "--type=merge", "-p", patch).strip())
    print("    " + kubectl("apply", "-f", "-", stdin=json.dumps(backup)).strip())
    if not wait_until(kubeconfig, "dbbackup", "orders-demo", "Completed"):
        return False
    print("    " + kubectl("apply", "-f", "-", stdin=json.dumps(restored)).strip())
    if not wait_until(kubeconfig, "db", "orders-restored", "Active"):
        return False
    for line in kubectl("get", "dbbackup", "-o", "wide").splitlines():
        print(f"    {line}")
    restored_from = kubectl("get", "db", "orders-restored", "-o", "jsonpath={.status.restoredFrom}")
    print(f"    orders-restored restoredFrom: {restored_from}")
    print(
        "    SIMULATED: kwok runs no container, so no dump was taken (0 bytes, the checksum of\n"
        "    nothing) and nothing was restored; the objects and their states are the real ones.\n"
        "    make demo REAL=1 runs the same Jobs for real, on a real node."
    )
    return True


def metrics_endpoints(kubeconfig: Path) -> list[str]:
    """Where the Databases with spec.monitoring serve their metrics: each Service's and pod's
    port named `metrics`, and how to read it."""
    lines = []
    for kind in ("services", "pods"):
        items = json.loads(run_kubectl(kubeconfig, "get", kind, "-o", "json"))["items"]
        for item in items:
            ports = (
                item["spec"].get("ports", [])
                if kind == "services"
                else [p for c in item["spec"]["containers"] for p in c.get("ports", [])]
            )
            for found in ports:
                if found.get("name") == "metrics":
                    number = found.get("port") or found["containerPort"]
                    lines.append(f"{kind[:-1]}/{item['metadata']['name']}  metrics: {number}")
    return lines


def wait_until(kubeconfig: Path, kind: str, name: str, phase: str, timeout_s: float = 60) -> bool:
    """Print ``name``'s phase as it changes until it is ``phase``."""
    deadline = time.monotonic() + timeout_s
    shown = ""
    while time.monotonic() < deadline:
        found = run_kubectl(kubeconfig, "get", kind, name, "-o", "jsonpath={.status.phase}")
        if found != shown:
            print(f"    [{time.strftime('%H:%M:%S')}] {kind}/{name}: {found or '-'}", flush=True)
            shown = found
        if found == phase:
            return True
        time.sleep(0.3)
    print(f"    {kind}/{name} did not become {phase}: see .local/logs/operator.log")
    return False


# --- REAL=1: the same story on real pods --------------------------------------------------------

#: What psql runs with in the engine's own container: its env's user and password (the password
#: never on a command line), over TCP to the server beside it.
PSQL = (
    'PGPASSWORD="$POSTGRES_PASSWORD" exec psql -X -A -t -q -v ON_ERROR_STOP=1 -h 127.0.0.1 '
    '-U "$POSTGRES_USER" -d "$POSTGRES_USER" -c "$1"'
)


def psql(kubeconfig: Path, deployment: str, sql: str) -> str:
    """``sql`` in the postgres container of ``deployment``'s pod."""
    return run_kubectl(
        kubeconfig,
        "exec",
        f"deploy/{deployment}",
        "-c",
        "postgres",
        "--",
        "sh",
        "-c",
        PSQL,
        "sh",
        sql,
    ).strip()


def start_real() -> RealCluster:
    """The control plane and a real node on this host, detached (`make cluster-down` stops it
    and restores the host)."""
    cluster = RealCluster(WORKDIR, detached=True, crds=False)
    try:
        cluster.start()
    except RealNodeError as error:
        raise SystemExit(str(error)) from None
    print(
        f"    node {cluster.node_name} ({cluster.host_ip}) Ready; images: "
        + ", ".join(sorted(cluster.images.values()))
    )
    return cluster


def apply_real_samples(kubeconfig: Path, images: dict[str, str]) -> None:
    """The samples, as a user with a mirror of their own applies them: spec.image (and the
    exporter's) set to this host's image of each engine."""
    built = run_kubectl(kubeconfig, "kustomize", str(ROOT / "config" / "samples"))
    for doc in yaml.safe_load_all(built):
        if doc:
            sample = on_local_images(doc, images)
            print(
                "    "
                + run_kubectl(kubeconfig, "apply", "-f", "-", stdin=json.dumps(sample)).strip()
                + f" (image {sample['spec']['image']})"
            )


def real_data(kubeconfig: Path) -> None:
    """Rows written on orders' primary, read on its streaming replica."""
    psql(kubeconfig, "orders", "CREATE TABLE IF NOT EXISTS demo (id int, note text)")
    psql(
        kubeconfig,
        "orders",
        "INSERT INTO demo SELECT i, 'row ' || i FROM generate_series(1, 1000) i",
    )
    print("    orders (primary):  INSERT 1000 rows into demo")
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        count = psql(kubeconfig, "orders-replicas", "SELECT count(*) FROM demo")
        if count == "1000":
            break
        time.sleep(0.5)
    recovery = psql(kubeconfig, "orders-replicas", "SELECT pg_is_in_recovery()")
    print(
        f"    orders-replicas:   {count} rows in demo "
        f"(pg_is_in_recovery: {recovery}, a hot standby)"
    )
    states = psql(kubeconfig, "orders", "SELECT state FROM pg_stat_replication")
    print(f"    orders (primary):  pg_stat_replication -> {states}")


def real_metrics(kubeconfig: Path) -> None:
    """catalog's exporters, read on their pods' addresses from this host."""
    pods = json.loads(
        run_kubectl(
            kubeconfig, "get", "pods", "-l", "app.kubernetes.io/instance=catalog", "-o", "json"
        )
    )
    for pod in pods["items"]:
        address = f"http://{pod['status']['podIP']}:9187/metrics"
        with urllib.request.urlopen(address, timeout=5) as answer:
            up = [line for line in answer.read().decode().splitlines() if line.startswith("pg_up")]
        print(f"    {pod['metadata']['name']}: {address} -> {', '.join(up)}")


def real_backup_and_restore(cluster: RealCluster, kubeconfig: Path) -> bool:
    """A backup of orders in SeaweedFS on this host, restored into orders-restored."""
    store, process = start_object_store(WORKDIR / "seaweedfs", cluster.host_ip, detached=True)
    state = json.loads((WORKDIR / "controlplane.json").read_text())
    (WORKDIR / "controlplane.json").write_text(json.dumps({**state, "seaweedfs": process.pid}))
    store.create_bucket("backups")
    print(f"    SeaweedFS (S3) at {store.endpoint}, bucket backups")
    secret = {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": "backup-credentials"},
        "stringData": {
            "AWS_ACCESS_KEY_ID": store.access_key,
            "AWS_SECRET_ACCESS_KEY": store.secret_key,
        },
    }
    policy = json.loads(json.dumps(BACKUP_POLICY))
    policy["destination"]["s3"]["endpoint"] = store.endpoint
    run_kubectl(kubeconfig, "apply", "-f", "-", stdin=json.dumps(secret))
    print(
        "    "
        + run_kubectl(
            kubeconfig,
            "patch",
            "db",
            "orders",
            "--type=merge",
            "-p",
            json.dumps({"spec": {"backup": policy}}),
        ).strip()
    )
    backup = {
        "apiVersion": API_VERSION,
        "kind": "DatabaseBackup",
        "metadata": {"name": "orders-demo"},
        "spec": {"database": "orders"},
    }
    print("    " + run_kubectl(kubeconfig, "apply", "-f", "-", stdin=json.dumps(backup)).strip())
    if not wait_until(kubeconfig, "dbbackup", "orders-demo", "Completed", timeout_s=180):
        return False
    for line in run_kubectl(kubeconfig, "get", "dbbackup", "-o", "wide").splitlines():
        print(f"    {line}")
    print("    in the store: " + ", ".join(store.keys("backups")))
    restored = on_local_images(
        {
            "apiVersion": API_VERSION,
            "kind": "Database",
            "metadata": {"name": "orders-restored"},
            "spec": {
                "engine": "postgres",
                "storage": {"size": "1Gi"},
                "restore": {"backup": "orders-demo"},
            },
        },
        cluster.images,
    )
    print("    " + run_kubectl(kubeconfig, "apply", "-f", "-", stdin=json.dumps(restored)).strip())
    if not wait_until(kubeconfig, "db", "orders-restored", "Active", timeout_s=180):
        return False
    count = psql(kubeconfig, "orders-restored", "SELECT count(*) FROM demo")
    print(f"    orders-restored:   {count} rows in demo")
    store.close()
    return count == "1000"


def main_real(started: float) -> int:
    with stage("real node: control plane, containerd, kubelet, kube-proxy, CoreDNS, images"):
        cluster = start_real()
    kubeconfig = cluster.kubeconfig
    with stage("operator: helm install from its own image (built from the Dockerfile)"):
        release = install_operator(
            connected_cluster(cluster), cluster.images["operator"], namespace="database-operator"
        )
        print(f"    {len(release.pods())} replicas, leader {release.leader()}")
    with stage("samples, on this host's images: " + ", ".join(p.name for p in SAMPLES)):
        apply_real_samples(kubeconfig, cluster.images)
    with stage("waiting for every Database to be Active (real pods: initdb, streaming clones)"):
        ok = live_view(kubeconfig)
    if ok:
        with stage("data: written on the primary of orders, read on its streaming replica"):
            real_data(kubeconfig)
        with stage("metrics: catalog's exporters (spec.monitoring), scraped from this host"):
            real_metrics(kubeconfig)
        with stage("a real backup of orders in SeaweedFS, and a new Database restored from it"):
            ok = real_backup_and_restore(cluster, kubeconfig)
    print_timings(started)
    if not ok:
        print(
            "\nThe demo did not finish: see `kubectl get db,pods -A` and `kubectl logs -n "
            "database-operator deploy/database-operator`"
        )
        return 1
    print(
        f"""
Every sample is Active, on real pods. The cluster keeps running; poke it:

  export KUBECONFIG={kubeconfig} PATH={ROOT / "bin"}:{ROOT / ".venv" / "bin"}:$PATH
  kubectl get db,pods,pvc                         # Databases and their real pods
  kubectl logs -n database-operator deploy/database-operator   # the operator's JSON logs
  kubectl exec deploy/orders -c postgres -- sh -c \\
    'PGPASSWORD="$POSTGRES_PASSWORD" psql -h 127.0.0.1 -U "$POSTGRES_USER" -c "TABLE demo LIMIT 3"'
  kubectl exec deploy/sessions -c redis -- redis-cli INFO replication   # (REDISCLI_AUTH: its env)
  kubectl scale db/orders --replicas=3            # another streaming replica, cloned
  kubectl delete pod -l app.kubernetes.io/instance=orders,{ROLE_LABEL}=primary  # back on its volume
  kubectl database backup orders --wait           # another real backup (the kubectl plugin)
  kubectl get dbbackup -o wide                    # backups: phase, size, location

Stop everything and restore the host: make cluster-down"""
    )
    return 0


def connected_cluster(cluster: RealCluster) -> Cluster:
    assert cluster.plane is not None
    return Cluster.connect(cluster.plane)


def print_timings(started: float) -> None:
    total = time.monotonic() - started
    print("\nTimings:")
    for name, took in timings:
        print(f"  {took:6.1f}s  {name}")
    print(f"  {total:6.1f}s  total")


def main() -> int:
    started = time.monotonic()
    if (WORKDIR / "controlplane.json").exists():
        print("==> stopping the cluster a previous run left in .local")
        cluster_down(WORKDIR)
    for stale in ("etcd", "pki", "logs"):
        subprocess.run(["rm", "-rf", str(WORKDIR / stale)], check=True)
    if os.environ.get("REAL") == "1":
        return main_real(started)

    with stage(
        f"full local cluster: Kubernetes {kube_version()}, controller-manager, scheduler, kwok node"
    ):
        plane = ControlPlane(WORKDIR, detached=True, full=True).start()
        install_crds(plane.kubeconfig)
        plane.wait_for_node_ready()
    metrics_port, health_port, webhook_port = port(8080), port(8081), port(9443)
    jaeger = None
    if os.environ.get("JAEGER") == "1":
        with stage("Jaeger (traces): OTLP receiver, in-memory storage, query API"):
            jaeger = Jaeger(WORKDIR / "jaeger", detached=True).start()
            assert jaeger.proc is not None
            state = json.loads(plane.state_file.read_text())
            plane.state_file.write_text(json.dumps({**state, "jaeger": jaeger.proc.pid}))
    with stage("operator (from the working tree), its webhooks on 127.0.0.1"):
        traces = jaeger.otlp_http if jaeger else ""
        start_operator(plane, metrics_port, health_port, webhook_port, traces)
        wait_ready(health_port)
    with stage("samples: " + ", ".join(p.name for p in SAMPLES)):
        for sample in SAMPLES:
            print("    " + run_kubectl(plane.kubeconfig, "apply", "-f", str(sample)).strip())
    with stage("waiting for every Database to be Active"):
        ok = live_view(plane.kubeconfig)
    if ok:
        with stage("metrics: the exporter beside the engine of catalog (spec.monitoring)"):
            for line in metrics_endpoints(plane.kubeconfig):
                print(f"    {line}")
        with stage("a backup of orders, and a new Database restored from it"):
            ok = backup_and_restore(plane.kubeconfig)

    print_timings(started)
    if not ok:
        print(
            f"\nNot every Database became Active within {TIMEOUT_S}s, or the backup demo "
            "failed: see .local/logs/operator.log"
        )
        return 1
    kubeconfig = plane.kubeconfig
    print(
        f"""
Every sample is Active. The cluster and the operator keep running; poke them:

  export KUBECONFIG={kubeconfig} PATH={ROOT / "bin"}:{ROOT / ".venv" / "bin"}:$PATH
  kubectl get db                                  # Databases, their phase and readiness
  kubectl get deploy,rs,pods,svc,pvc,secrets      # what the operator made
  kubectl get secret sessions-connection -o jsonpath='{{.data.uri}}' | base64 -d   # bind to it
  kubectl scale db/sessions --replicas=5          # 1 primary + 4 read replicas (Redis replicaof)
  kubectl scale db/orders --replicas=3            # 1 primary + 2 streaming replicas (Postgres)
  kubectl delete pod -l app.kubernetes.io/instance=inventory   # break it: watch it heal
  kubectl annotate pod -l app.kubernetes.io/instance=sessions,{ROLE_LABEL}=replica \\
    database-operator.example.com/simulate=not-ready            # replicas unready: Degraded
  kubectl annotate pod -l app.kubernetes.io/instance=sessions,{ROLE_LABEL}=primary \\
    database-operator.example.com/simulate=not-ready            # primary unready: not Ready
  kubectl annotate pod -l app.kubernetes.io/instance=sessions \\
    database-operator.example.com/simulate-                     # ready again: Active
  kubectl patch db orders --type=merge -p '{{"spec":{{"version":"16.4"}}}}'  # a minor rollout
  kubectl patch db orders --type=merge -p '{{"spec":{{"version":"17"}}}}'    # refused: says why
  kubectl get databases.v1beta1.{GROUP} orders -o yaml        # the old API version
  kubectl patch db sessions --type=merge -p '{{"spec":{{"deletionProtection":true}}}}'
  kubectl delete db sessions                      # refused until deletionProtection is false
  kubectl get dbbackup -o wide                    # backups: phase, size, location
  kubectl database backup orders --wait           # the kubectl plugin (.venv/bin on PATH)
  kubectl database status orders                  # a Database, its conditions and backups
  kubectl describe db orders-restored             # restored from orders-demo before it started
  kubectl get job                                 # the backup and restore Jobs (kwok completes
                                                  #   their pods; the recipe tests run them)
  curl -s localhost:{metrics_port}/metrics | grep ^database_operator_   # the operator's metrics
  kubectl get svc catalog -o jsonpath='{{.spec.ports}}'   # catalog's metrics port (9187)
  kubectl get db catalog -o jsonpath='{{.spec.monitoring}}'   # its exporter (spec.monitoring)
  # On a cluster that runs containers (kwok runs none, so nothing answers here):
  #   kubectl port-forward svc/catalog 9187:metrics & curl -s localhost:9187/metrics | grep ^pg_up
  tail -f .local/logs/operator.log                # its JSON logs
{traces_hint(jaeger)}
Stop everything: make cluster-down"""
    )
    return 0


def traces_hint(jaeger: Jaeger | None) -> str:
    if jaeger is None:
        return "  (make demo JAEGER=1 adds Jaeger and a trace of every reconcile)\n"
    api = f"{jaeger.query}/api/traces?service=database-operator&limit=5"
    return f"""  curl -s '{api}' | python3 -m json.tool | less   # the last reconciles' traces
  grep -o '"trace_id": "[0-9a-f]*"' .local/logs/operator.log | tail -1   # a log line's trace
  curl -s {jaeger.query}/api/traces/<trace_id>    # ... and its trace
  (Jaeger's query API and UI: {jaeger.query}; a Jaeger built from its Go module has no UI
  assets, so the UI page is a placeholder: read the API, or point Grafana at it)
"""


if __name__ == "__main__":
    sys.exit(main())
