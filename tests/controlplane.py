"""A real Kubernetes control plane (etcd + kube-apiserver) on loopback, for tests and people.

The same implementation serves the session-scoped pytest fixture (tests/conftest.py) and
`make cluster-up` / `make cluster-down` (``python -m tests.controlplane up|down``), the way
controller-runtime's envtest does: free loopback ports, a temporary data dir, a CA with serving
and admin client certificates, service-account signing keys, RBAC authorization, and a wait for
``/readyz``. Processes run in their own process group; in the fixture they also die with the test
process (PR_SET_PDEATHSIG), so an interrupted run leaves nothing behind.

Binaries: ``$KUBEBUILDER_ASSETS`` (setup-envtest's layout) when set, else ``bin/k8s/<version>``
built by ``make envtest``, and ``bin/kubectl``.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import datetime as dt
import ipaddress
import json
import os
import re
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import yaml
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

ROOT = Path(__file__).resolve().parent.parent
KUBE_VERSION_FILE = ROOT / "hack" / "envtest" / "kube" / "go.mod"
#: Wide enough for thousands of Databases (one ClusterIP each) in the benchmark and chaos runs.
SERVICE_CIDR = "10.0.0.0/16"
READY_TIMEOUT_S = 90.0


def kube_version() -> str:
    """The pinned Kubernetes version, read from the build module."""
    pattern = r"^\s*(?:require\s+)?k8s\.io/kubernetes v(\S+)"
    found = re.search(pattern, KUBE_VERSION_FILE.read_text(), re.MULTILINE)
    if found:
        return found.group(1)
    raise RuntimeError(f"no k8s.io/kubernetes version in {KUBE_VERSION_FILE}")


CONTROL_PLANE = ("etcd", "kube-apiserver")
#: The full local cluster adds these (built by `make envtest FULL=1`).
FULL_CLUSTER = ("kube-controller-manager", "kube-scheduler", "kwok")
#: The real-node tier's control plane adds these (its node is tests/realnode.py's).
CONTROLLERS = ("kube-controller-manager", "kube-scheduler")
#: The real node's pod network: the controller-manager gives each node a /24 of it.
CLUSTER_CIDR = "10.244.0.0/16"


def find_binary(name: str) -> Path:
    """A control-plane binary: from $KUBEBUILDER_ASSETS (setup-envtest's layout) when it has it,
    else from bin/k8s/<version> (built by `make envtest`, FULL=1 for the full cluster)."""
    env = os.environ.get("KUBEBUILDER_ASSETS")
    if env and (Path(env) / name).is_file():
        return Path(env) / name
    path = ROOT / "bin" / "k8s" / kube_version() / name
    if not path.is_file():
        full = " FULL=1" if name in FULL_CLUSTER else ""
        where = f"KUBEBUILDER_ASSETS={env} or " if env else ""
        raise FileNotFoundError(f"{name} is not in {where}{path.parent}: run `make envtest{full}`")
    return path


def kubectl_path() -> Path:
    """kubectl from $KUBEBUILDER_ASSETS when it has one, else bin/kubectl (`make tools`)."""
    env = os.environ.get("KUBEBUILDER_ASSETS")
    if env and (Path(env) / "kubectl").is_file():
        return Path(env) / "kubectl"
    path = ROOT / "bin" / "kubectl"
    if not path.is_file():
        raise FileNotFoundError(f"{path} is missing: run `make tools` first")
    return path


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def stop_process(proc: subprocess.Popen[bytes], grace_s: float = 10.0) -> None:
    """SIGTERM a server a test started, then SIGKILL it if it is still there after ``grace_s``."""
    proc.terminate()
    try:
        proc.wait(timeout=grace_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def _die_with_parent() -> None:  # pragma: no cover - runs in the child between fork and exec
    """Make the kernel kill this child when the process that started it dies."""
    pr_set_pdeathsig = 1
    ctypes.CDLL("libc.so.6", use_errno=True).prctl(pr_set_pdeathsig, signal.SIGKILL)


# --- certificates -------------------------------------------------------------------------------


def _pem_key(key: ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


def _cert(
    subject: x509.Name,
    key: ec.EllipticCurvePrivateKey,
    issuer: tuple[x509.Certificate, ec.EllipticCurvePrivateKey] | None,
    *,
    ca: bool = False,
    server: bool = False,
) -> x509.Certificate:
    now = dt.datetime.now(dt.UTC)
    issuer_name, signing_key = (issuer[0].subject, issuer[1]) if issuer else (subject, key)
    builder = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(days=7))
        .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
    )
    if server:
        names: list[x509.GeneralName] = [
            x509.DNSName("localhost"),
            x509.DNSName("kubernetes.default.svc"),
            x509.IPAddress(ipaddress.ip_address("127.0.0.1")),
            x509.IPAddress(ipaddress.ip_address("10.0.0.1")),
        ]
        builder = builder.add_extension(x509.SubjectAlternativeName(names), critical=False)
    if not ca:
        usage = ExtendedKeyUsageOID.SERVER_AUTH if server else ExtendedKeyUsageOID.CLIENT_AUTH
        builder = builder.add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
    return builder.sign(signing_key, hashes.SHA256())


@dataclass(frozen=True)
class Pki:
    """Paths of the generated certificates and keys."""

    ca: Path
    ca_key: Path
    serving_cert: Path
    serving_key: Path
    admin_cert: Path
    admin_key: Path
    sa_key: Path
    sa_pub: Path

    @classmethod
    def at(cls, folder: Path) -> Pki:
        """Where make_pki writes them in ``folder``."""
        return cls(**{field_: folder / name for field_, name in PKI_FILES.items()})


#: Pki field -> file name (the names kube-apiserver's --cert-dir conventions suggest).
PKI_FILES = {
    "ca": "ca.crt",
    "ca_key": "ca.key",
    "serving_cert": "apiserver.crt",
    "serving_key": "apiserver.key",
    "admin_cert": "admin.crt",
    "admin_key": "admin.key",
    "sa_key": "sa.key",
    "sa_pub": "sa.pub",
}


def _subject(common_name: str, groups: list[str]) -> x509.Name:
    """A certificate subject: CN is the user, each O a group (how kube-apiserver reads it)."""
    attrs = [x509.NameAttribute(NameOID.COMMON_NAME, common_name)]
    attrs += [x509.NameAttribute(NameOID.ORGANIZATION_NAME, group) for group in groups]
    return x509.Name(attrs)


def _write_owner_only(path: Path, data: bytes) -> None:
    path.write_bytes(data)
    path.chmod(0o600)


def make_pki(folder: Path) -> Pki:
    """A CA, the API server's serving certificate, an admin client certificate
    (system:masters) and the ServiceAccount signing keys, written into ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)
    pki = Pki.at(folder)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca = _cert(_subject("database-operator-envtest-ca", []), ca_key, None, ca=True)
    serving_key = ec.generate_private_key(ec.SECP256R1())
    serving = _cert(_subject("kube-apiserver", []), serving_key, (ca, ca_key), server=True)
    sa_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pem = serialization.Encoding.PEM
    _write_owner_only(pki.ca, ca.public_bytes(pem))
    _write_owner_only(pki.ca_key, _pem_key(ca_key))
    _write_owner_only(pki.serving_cert, serving.public_bytes(pem))
    _write_owner_only(pki.serving_key, _pem_key(serving_key))
    _write_owner_only(pki.sa_key, _pem_key(sa_key))
    _write_owner_only(
        pki.sa_pub,
        sa_key.public_key().public_bytes(pem, serialization.PublicFormat.SubjectPublicKeyInfo),
    )
    client_certificate(pki, "envtest-admin", ["system:masters"], (pki.admin_cert, pki.admin_key))
    return pki


def client_certificate(
    pki: Pki, user: str, groups: list[str], paths: tuple[Path, Path] | None = None
) -> tuple[Path, Path]:
    """A client certificate and key for ``user`` in ``groups``, signed by the control plane's CA,
    written to ``paths`` (default: <user>.crt and <user>.key beside the CA)."""
    ca = x509.load_pem_x509_certificate(pki.ca.read_bytes())
    ca_key = serialization.load_pem_private_key(pki.ca_key.read_bytes(), password=None)
    assert isinstance(ca_key, ec.EllipticCurvePrivateKey)
    key = ec.generate_private_key(ec.SECP256R1())
    cert = _cert(_subject(user, groups), key, (ca, ca_key))
    cert_path, key_path = paths or (pki.ca.parent / f"{user}.crt", pki.ca.parent / f"{user}.key")
    _write_owner_only(cert_path, cert.public_bytes(serialization.Encoding.PEM))
    _write_owner_only(key_path, _pem_key(key))
    return cert_path, key_path


def write_kubeconfig(
    path: Path, server: str, pki: Pki, client: tuple[Path, Path] | None = None
) -> None:
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": "envtest",
                "cluster": {"server": server, "certificate-authority": str(pki.ca)},
            }
        ],
        "users": [
            {
                "name": "envtest-admin",
                "user": {
                    "client-certificate": str(client[0] if client else pki.admin_cert),
                    "client-key": str(client[1] if client else pki.admin_key),
                },
            }
        ],
        "contexts": [
            {
                "name": "envtest",
                "context": {"cluster": "envtest", "user": "envtest-admin", "namespace": "default"},
            }
        ],
        "current-context": "envtest",
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    path.chmod(0o600)


# --- the control plane --------------------------------------------------------------------------


@dataclass
class ControlPlane:
    """etcd + kube-apiserver in ``workdir``; ``start()``/``stop()`` or use it as a context manager.

    ``full`` adds kube-controller-manager (Deployments -> ReplicaSets -> Pods, the garbage
    collector, ServiceAccounts), kube-scheduler and kwok, a simulated kubelet that runs one fake
    Node and makes its pods Running and Ready without containers.
    ``detached`` processes outlive the Python process that started them (for `make cluster-up`);
    otherwise they die with it.
    ``cpus`` (a ``taskset`` CPU list, e.g. "0") pins every process of it to those CPUs, so a
    benchmark can keep them off the cores its clients measure on; None: wherever the kernel puts
    them.
    ``real`` is the control plane of a real node (tests/realnode.py): the controller-manager and
    the scheduler without kwok, the API server listening on every address and advertising
    ``host_ip`` (pods reach it through the ``kubernetes`` Service), the Node authorizer and
    NodeRestriction for the kubelet, a client certificate to the kubelet (logs, exec), and the
    controller-manager allocating node CIDRs.
    """

    workdir: Path
    detached: bool = False
    full: bool = False
    cpus: str | None = None
    real: bool = False
    host_ip: str = "127.0.0.1"
    etcd_port: int = field(default_factory=free_port)
    etcd_peer_port: int = field(default_factory=free_port)
    secure_port: int = field(default_factory=free_port)
    processes: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)
    _apiserver_argv: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        # The kubeconfig names certificate files; relative paths would break for other folders.
        self.workdir = self.workdir.resolve()

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self.secure_port}"

    @property
    def pki(self) -> Pki:
        return Pki.at(self.workdir / "pki")

    @property
    def kubeconfig(self) -> Path:
        return self.workdir / "kubeconfig"

    @property
    def state_file(self) -> Path:
        return self.workdir / "controlplane.json"

    @property
    def components(self) -> tuple[str, ...]:
        if self.real:
            return CONTROL_PLANE + CONTROLLERS
        return CONTROL_PLANE + (FULL_CLUSTER if self.full else ())

    def start(self) -> ControlPlane:
        if self.full and not self.real:
            from tests.realnode import real_node_running

            if conflict := real_node_running(any_kubelet=False):
                raise RuntimeError(f"cannot start a kwok cluster beside a real node: {conflict}")
        binary = {name: str(find_binary(name)) for name in self.components}
        self.workdir.mkdir(parents=True, exist_ok=True)
        pki = make_pki(self.workdir / "pki")
        (self.workdir / "logs").mkdir(exist_ok=True)
        etcd_url = f"http://127.0.0.1:{self.etcd_port}"
        self._spawn(
            "etcd",
            [
                binary["etcd"],
                f"--data-dir={self.workdir / 'etcd'}",
                f"--listen-client-urls={etcd_url}",
                f"--advertise-client-urls={etcd_url}",
                f"--listen-peer-urls=http://127.0.0.1:{self.etcd_peer_port}",
                f"--initial-advertise-peer-urls=http://127.0.0.1:{self.etcd_peer_port}",
                f"--initial-cluster=default=http://127.0.0.1:{self.etcd_peer_port}",
                "--unsafe-no-fsync",  # test data: durability buys nothing, fsync costs seconds
                "--log-level=warn",
            ],
        )
        self._apiserver_argv = [
            binary["kube-apiserver"],
            f"--etcd-servers={etcd_url}",
            f"--bind-address={'0.0.0.0' if self.real else '127.0.0.1'}",  # noqa: S104
            f"--advertise-address={self.host_ip if self.real else '127.0.0.1'}",
            f"--secure-port={self.secure_port}",
            f"--cert-dir={self.workdir / 'pki'}",
            f"--tls-cert-file={pki.serving_cert}",
            f"--tls-private-key-file={pki.serving_key}",
            f"--client-ca-file={pki.ca}",
            f"--authorization-mode={'Node,RBAC' if self.real else 'RBAC'}",
            f"--service-cluster-ip-range={SERVICE_CIDR}",
            f"--service-account-key-file={pki.sa_pub}",
            f"--service-account-signing-key-file={pki.sa_key}",
            "--service-account-issuer=https://kubernetes.default.svc",
            "--allow-privileged=true",
            # Without a controller-manager nothing creates the ServiceAccounts that this
            # admission plugin insists on; the full cluster has one.
            *([] if self.full or self.real else ["--disable-admission-plugins=ServiceAccount"]),
            *(
                [
                    "--enable-admission-plugins=NodeRestriction",
                    f"--kubelet-client-certificate={pki.admin_cert}",
                    f"--kubelet-client-key={pki.admin_key}",
                    # The node's name does not resolve on the host: dial its address.
                    "--kubelet-preferred-address-types=InternalIP,Hostname",
                ]
                if self.real
                else []
            ),
            "--v=0",
        ]
        self._spawn("kube-apiserver", self._apiserver_argv)
        write_kubeconfig(self.kubeconfig, self.url, pki)
        self._save_state()
        try:
            self._wait_ready(pki)
            if self.full or self.real:
                self._start_full_cluster(binary, pki)
        except BaseException:
            self.stop()
            raise
        return self

    def _save_state(self) -> None:
        self.state_file.write_text(
            json.dumps({name: proc.pid for name, proc in self.processes.items()})
        )

    def _start_full_cluster(self, binary: dict[str, str], pki: Pki) -> None:
        kubeconfig = str(self.kubeconfig)

        def component(name: str) -> list[str]:
            """What the controller-manager and the scheduler share: admin access, no election."""
            return [
                binary[name],
                f"--kubeconfig={kubeconfig}",
                f"--authentication-kubeconfig={kubeconfig}",
                f"--authorization-kubeconfig={kubeconfig}",
                "--leader-elect=false",
                "--bind-address=127.0.0.1",
                f"--secure-port={free_port()}",
                f"--cert-dir={self.workdir / 'pki' / name}",
                "--v=0",
            ]

        self._spawn(
            "kube-controller-manager",
            [
                *component("kube-controller-manager"),
                f"--service-account-private-key-file={pki.sa_key}",
                f"--root-ca-file={pki.ca}",
                f"--service-cluster-ip-range={SERVICE_CIDR}",
                "--use-service-account-credentials=false",
                # nodelifecycle lifts the not-ready taint once the node reports Ready; nodeipam
                # gives a real node its podCIDR (kwok's pods get addresses from kwok).
                *(
                    [
                        "--controllers=*,-cloud-node-lifecycle",
                        "--allocate-node-cidrs",
                        f"--cluster-cidr={CLUSTER_CIDR}",
                        "--node-cidr-mask-size=24",
                    ]
                    if self.real
                    else ["--controllers=*,-nodeipam,-cloud-node-lifecycle"]
                ),
                # Fast: a demo and its tests wait on these loops.
                "--concurrent-deployment-syncs=5",
                "--concurrent-replicaset-syncs=5",
            ],
        )
        self._spawn("kube-scheduler", component("kube-scheduler"))
        if self.real:
            self._save_state()
            return
        self._spawn(
            "kwok",
            [
                binary["kwok"],
                f"--kubeconfig={kubeconfig}",
                "--manage-all-nodes=false",
                f"--manage-nodes-with-annotation-selector={KWOK_NODE_ANNOTATION}=fake",
                f"--config={ROOT / 'hack' / 'envtest' / 'kwok' / 'stages.yaml'}",
                f"--server-address=127.0.0.1:{free_port()}",
                "--cidr=10.1.0.0/16",
                "--node-ip=127.0.0.2",
            ],
        )
        self._save_state()
        create_fake_node(self.kubeconfig)
        create_fake_storage(self.kubeconfig)

    def wait_for_node_ready(self, timeout_s: float = 60) -> None:
        run_kubectl(
            self.kubeconfig,
            "wait",
            "--for=condition=Ready",
            f"node/{FAKE_NODE}",
            f"--timeout={int(timeout_s)}s",
        )

    def _spawn(self, name: str, argv: list[str]) -> None:
        log = (self.workdir / "logs" / f"{name}.log").open("ab")
        # taskset sets the affinity and execs: the process is still the one started here.
        pinned = ["taskset", "--cpu-list", self.cpus] if self.cpus else []
        self.processes[name] = subprocess.Popen(
            [*pinned, *argv],
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
            preexec_fn=None if self.detached else _die_with_parent,  # noqa: PLW1509 (no threads yet)
        )

    def _wait_ready(self, pki: Pki) -> None:
        context = ssl.create_default_context(cafile=str(pki.ca))
        context.load_cert_chain(str(pki.admin_cert), str(pki.admin_key))
        deadline = time.monotonic() + READY_TIMEOUT_S
        last_error = ""
        while time.monotonic() < deadline:
            for name, proc in self.processes.items():
                if proc.poll() is not None:
                    raise RuntimeError(
                        f"{name} exited with {proc.returncode}: {self.log_tail(name)}"
                    )
            try:
                url = f"{self.url}/readyz"
                with urllib.request.urlopen(url, context=context, timeout=5) as r:  # noqa: S310
                    if r.status == 200:
                        return
            except OSError as error:
                last_error = str(error)
            time.sleep(0.25)
        raise TimeoutError(
            f"kube-apiserver not ready after {READY_TIMEOUT_S}s ({last_error}): "
            f"{self.log_tail('kube-apiserver')}"
        )

    def kill_apiserver(self) -> None:
        """SIGKILL kube-apiserver, as a crash would (etcd and its data stay)."""
        proc = self.processes.pop("kube-apiserver")
        proc.kill()
        proc.wait(timeout=10)

    def start_apiserver(self) -> None:
        """Start kube-apiserver again, on the same port and etcd, and wait until it is ready."""
        self._spawn("kube-apiserver", self._apiserver_argv)
        self._save_state()
        self._wait_ready(self.pki)

    def log_tail(self, name: str, lines: int = 20) -> str:
        path = self.workdir / "logs" / f"{name}.log"
        return (
            "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
            if path.exists()
            else ""
        )

    def stop(self) -> None:
        """Stop the clients of the API server, then the API server, then etcd; wait for each."""
        for name in (*reversed(FULL_CLUSTER), "kube-apiserver", "etcd"):
            proc = self.processes.pop(name, None)
            if proc is not None:
                _terminate(proc.pid)
                with contextlib.suppress(subprocess.TimeoutExpired):
                    proc.wait(timeout=10)
        self.state_file.unlink(missing_ok=True)

    def kubeconfig_for(self, user: str, groups: list[str] | None = None) -> Path:
        """A kubeconfig that authenticates as ``user`` (RBAC decides what it may do)."""
        cert = client_certificate(self.pki, user, groups or [])
        path = self.workdir / f"kubeconfig-{user}"
        write_kubeconfig(path, self.url, self.pki, cert)
        return path

    def __enter__(self) -> ControlPlane:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _terminate(pid: int, grace_s: float = 10.0) -> None:
    """SIGTERM the process group of ``pid``, then SIGKILL what is left after ``grace_s``."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pid, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline:
        try:
            os.killpg(pid, 0)
        except ProcessLookupError:
            return
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, os.WNOHANG)
        time.sleep(0.1)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pid, signal.SIGKILL)


@contextlib.contextmanager
def temporary_control_plane() -> Iterator[ControlPlane]:
    """A control plane in a fresh temporary directory, removed afterwards."""
    workdir = Path(tempfile.mkdtemp(prefix="database-operator-envtest-"))
    try:
        with ControlPlane(workdir) as plane:
            yield plane
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


# --- make cluster-up / cluster-down -------------------------------------------------------------


def cluster_up(workdir: Path, full: bool = False, real: bool = False) -> int:
    if real:  # it refuses while anything runs, and first restores what a killed run left
        from tests.realnode import cluster_up as real_cluster_up

        return real_cluster_up(workdir)
    state = workdir / "controlplane.json"
    if state.exists():
        print(f"a control plane already runs from {workdir} (make cluster-down stops it)")
        return 1
    # A previous run's data and certificates are not reused: every cluster-up starts empty.
    for stale in ("etcd", "pki", "logs"):
        shutil.rmtree(workdir / stale, ignore_errors=True)
    try:
        plane = ControlPlane(workdir, detached=True, full=full).start()
    except RuntimeError as error:  # a real node runs, or a component did not start
        print(error)
        return 1
    try:
        crds = install_crds(plane.kubeconfig)
        if full:
            plane.wait_for_node_ready()
    except BaseException:
        plane.stop()
        raise
    what = "full cluster (controller-manager, scheduler, kwok node)" if full else "kube-apiserver"
    print(f"{what} {kube_version()} is ready at {plane.url}; installed {', '.join(crds)}")
    print(f"logs: {workdir / 'logs'}; stop it with: make cluster-down")
    print(f"export KUBECONFIG={plane.kubeconfig}")
    return 0


def cluster_down(workdir: Path) -> int:
    from tests.realnode import cluster_down as real_cluster_down

    real = real_cluster_down(workdir)  # a real node's, or a killed run's leftovers
    if real is not None:
        return real
    state = workdir / "controlplane.json"
    if not state.exists():
        print(f"no control plane runs from {workdir}")
        return 0
    pids: dict[str, int] = json.loads(state.read_text())
    for name in ("operator", "jaeger", *reversed(FULL_CLUSTER), "kube-apiserver", "etcd"):
        if name in pids:
            _terminate(pids[name])
    state.unlink()
    shutil.rmtree(workdir / "etcd", ignore_errors=True)
    print("control plane stopped")
    return 0


KWOK_NODE_ANNOTATION = "kwok.x-k8s.io/node"
FAKE_NODE = "kwok-node-0"


def kubectl_process(
    kubeconfig: Path, *args: str, stdin: str | None = None
) -> subprocess.CompletedProcess[str]:
    """kubectl ARGS against the cluster of ``kubeconfig``, whatever its exit code."""
    return subprocess.run(
        [str(kubectl_path()), *args],
        env={**os.environ, "KUBECONFIG": str(kubeconfig)},
        input=stdin,
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )


def run_kubectl(kubeconfig: Path, *args: str, stdin: str | None = None) -> str:
    """kubectl ARGS; its stdout, or an error with its stderr."""
    done = kubectl_process(kubeconfig, *args, stdin=stdin)
    if done.returncode != 0:
        raise RuntimeError(f"kubectl {' '.join(args)}: {done.stderr.strip()}")
    return done.stdout


def create_fake_node(kubeconfig: Path) -> None:
    """A Node that kwok plays: big enough for every test and demo pod."""
    node = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": FAKE_NODE,
            "annotations": {KWOK_NODE_ANNOTATION: "fake", "node.alpha.kubernetes.io/ttl": "0"},
            "labels": {
                "kubernetes.io/hostname": FAKE_NODE,
                "kubernetes.io/os": "linux",
                "kubernetes.io/arch": "amd64",
                "type": "kwok",
            },
        },
        "status": {
            "allocatable": {"cpu": "64", "memory": "256Gi", "pods": "250"},
            "capacity": {"cpu": "64", "memory": "256Gi", "pods": "250"},
        },
    }
    run_kubectl(kubeconfig, "apply", "-f", "-", stdin=json.dumps(node))


#: Enough for every claim one session's e2e tests, stories and demo make (a volume is not reused:
#: released volumes stay Released).
FAKE_VOLUMES = 100


def create_fake_storage(kubeconfig: Path) -> None:
    """A default StorageClass and pre-made volumes, so PVCs bind (the PV controller in
    kube-controller-manager does the binding; kwok runs no container that would use them)."""
    docs: list[dict[str, object]] = [
        {
            "apiVersion": "storage.k8s.io/v1",
            "kind": "StorageClass",
            "metadata": {
                "name": "standard",
                "annotations": {"storageclass.kubernetes.io/is-default-class": "true"},
            },
            "provisioner": "kubernetes.io/no-provisioner",
            "volumeBindingMode": "Immediate",
            "allowVolumeExpansion": True,
        }
    ]
    for index in range(FAKE_VOLUMES):
        docs.append(
            {
                "apiVersion": "v1",
                "kind": "PersistentVolume",
                "metadata": {"name": f"kwok-pv-{index}"},
                "spec": {
                    "capacity": {"storage": "100Gi"},
                    "accessModes": ["ReadWriteOnce"],
                    "persistentVolumeReclaimPolicy": "Delete",
                    "storageClassName": "standard",
                    # Never mounted: kwok runs no containers.
                    "hostPath": {"path": f"/var/lib/kwok-pv-{index}"},
                },
            }
        )
    run_kubectl(
        kubeconfig,
        "apply",
        "-f",
        "-",
        stdin=json.dumps({"apiVersion": "v1", "kind": "List", "items": docs}),
    )


def install_crds(kubeconfig: Path, folder: Path = ROOT / "config" / "crd" / "bases") -> list[str]:
    """Apply the project's CRDs and wait until each is Established."""
    names = []
    for path in sorted(folder.glob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text()):
            if doc and doc.get("kind") == "CustomResourceDefinition":
                names.append(doc["metadata"]["name"])
    kubectl = str(kubectl_path())
    env = {**os.environ, "KUBECONFIG": str(kubeconfig)}
    subprocess.run(
        [kubectl, "apply", "--server-side", "--field-manager=envtest", "-f", str(folder)],
        check=True,
        env=env,
        stdout=subprocess.DEVNULL,
    )
    subprocess.run(
        [kubectl, "wait", "--for=condition=Established", "--timeout=60s"]
        + [f"crd/{name}" for name in names],
        check=True,
        env=env,
        stdout=subprocess.DEVNULL,
    )
    return names


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.controlplane", description=__doc__)
    parser.add_argument("command", choices=["up", "down"])
    parser.add_argument("--dir", type=Path, default=ROOT / ".local", help="state folder")
    parser.add_argument(
        "--full", action="store_true", help="add controller-manager, scheduler, kwok"
    )
    parser.add_argument(
        "--real",
        action="store_true",
        help="a real node instead: containerd, kubelet, kube-proxy, CoreDNS (tests/realnode.py)",
    )
    args = parser.parse_args(argv)
    if args.command == "up":
        return cluster_up(args.dir, args.full, args.real)
    return cluster_down(args.dir)


if __name__ == "__main__":
    sys.exit(main())
