"""A real Kubernetes node on this host, for the real-node test tier (tests/real/) and
`make cluster-up REAL=1` (``python -m tests.controlplane up --real``).

The project's control plane (tests/controlplane.py with ``real=True``: the API server on the
host's address with the Node authorizer, node CIDRs from the controller-manager, the scheduler)
and, on this host:

- containerd (Debian's 1.6) with its own config, root, state and socket under the state folder,
  runc, and the CNI bridge ``cni0`` (10.244.0.0/24) with portmap and loopback from /usr/lib/cni;
- a kubelet (node ``realnode-0``, cgroupfs, webhook authentication and authorization);
- kube-proxy in nftables mode: its rules live in two tables of its own (``ip kube-proxy``,
  ``ip6 kube-proxy``), away from the CNI plugins' iptables-nft rules, and it needs no
  ``route_localnet`` (iptables mode sets that sysctl for localhost NodePorts);
- CoreDNS as a pod (Service ``kube-dns`` at 10.0.0.10), resolving cluster.local and forwarding
  the rest to the host's resolvers;
- static ``local`` PersistentVolumes (Retain) of a default StorageClass (WaitForFirstConsumer),
  made afresh at every start, and a recycler process that wipes a Released volume's folder and
  makes it Available again, so a session that deletes claims does not run out;
- the images of hack/images/ (no registry: ``hack/images/build.sh``, ``ctr images import``).

The node changes the host: sysctls (the kubelet's kernel defaults, ``ip_forward``), a bridge and
veths, network namespaces in /run/netns, nftables tables, cgroups under every hierarchy,
mounts, a few folders (/run/containerd, /var/lib/cni, /var/log/containers). All of it is recorded
before anything starts (``node/realnode.json`` in the state folder, and a pointer to it in
``~/.cache/database-operator``), and the teardown restores it: also after a run that was killed,
the next start (or ``make cluster-down``) restores what that run left. A real node never runs
beside a kwok cluster (tests/controlplane.py ``full``), nor beside another kubelet.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import json
import os
import re
import shutil
import signal
import socket
import ssl
import struct
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import yaml

from tests.controlplane import (
    CLUSTER_CIDR,
    ROOT,
    SERVICE_CIDR,
    ControlPlane,
    _die_with_parent,
    client_certificate,
    find_binary,
    free_port,
    install_crds,
    kubectl_path,
    kubectl_process,
    write_kubeconfig,
)

NODE_NAME = "realnode-0"
#: The node's podCIDR: the controller-manager allocates the first /24 of CLUSTER_CIDR to the
#: first node, and the CNI bridge's host-local range is set to the same.
POD_CIDR = "10.244.0.0/24"
CLUSTER_DNS = "10.0.0.10"
CLUSTER_DOMAIN = "cluster.local"
MAX_PODS = 50
#: Static volumes per start: a session's claims, with the recycler freeing released ones.
VOLUMES = 40
STORAGE_CLASS = "local"
VOLUME_LABEL = "realnode.databases.example.com/volume"
BRIDGE = "cni0"
CNI_BIN = Path("/usr/lib/cni")
CNI_PLUGINS = ("bridge", "host-local", "loopback", "portmap")
#: Images the node itself needs (the sandbox and cluster DNS); the others are imported too.
REQUIRED_IMAGES = ("pause", "coredns")
IMAGES_SCRIPT = ROOT / "hack" / "images" / "build.sh"
CACHE = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "database-operator"
#: Where the running (or killed) real node's state folder is: one per host.
ACTIVE = CACHE / "realnode-active.json"
READY_TIMEOUT_S = 120.0

#: Host commands the node runs, and the Debian package of each (`make node-packages`).
HOST_COMMANDS = {
    "containerd": "containerd",
    "containerd-shim-runc-v2": "containerd",
    "ctr": "containerd",
    "runc": "runc",
    "nft": "nftables",
    "iptables": "iptables",
    "conntrack": "conntrack",
    "socat": "socat",
    "ip": "iproute2",
    "mount": "mount",
}
CGROUP_V1_CONTROLLERS = (
    "cpu",
    "cpuacct",
    "cpuset",
    "memory",
    "pids",
    "devices",
    "freezer",
    "blkio",
)
CGROUP_V2_CONTROLLERS = ("cpu", "cpuset", "memory", "pids")
KUBE_BINARIES = (
    "etcd",
    "kube-apiserver",
    "kube-controller-manager",
    "kube-scheduler",
    "kubelet",
    "kube-proxy",
)
#: Sysctls the kubelet (its kernel defaults), the CNI plugins and kube-proxy may set: recorded at
#: start, written back at teardown when they differ (ip_forward first: writing it resets every
#: interface's forwarding). Per-interface ones of the interfaces found at start are added.
SYSCTLS = (
    "net.ipv4.ip_forward",
    "net.ipv4.conf.all.forwarding",
    "net.ipv4.conf.default.forwarding",
    "net.ipv6.conf.all.forwarding",
    "net.ipv6.conf.default.forwarding",
    "net.ipv4.conf.all.route_localnet",
    "net.ipv4.conf.default.route_localnet",
    "net.bridge.bridge-nf-call-iptables",
    "net.bridge.bridge-nf-call-ip6tables",
    "vm.overcommit_memory",
    "vm.panic_on_oom",
    "kernel.panic",
    "kernel.panic_on_oops",
    "kernel.keys.root_maxkeys",
    "kernel.keys.root_maxbytes",
    "net.netfilter.nf_conntrack_max",
    "net.netfilter.nf_conntrack_tcp_timeout_established",
    "net.netfilter.nf_conntrack_tcp_timeout_close_wait",
    "net.netfilter.nf_conntrack_tcp_be_liberal",
    "net.netfilter.nf_conntrack_udp_timeout",
    "net.netfilter.nf_conntrack_udp_timeout_stream",
)
#: Host paths the node's programs create outside the state folder (containerd's shim sockets and
#: runc state, libmount's utab, CRI's network namespaces, libcni's result cache, the kubelet's
#: container log links, iptables' lock), and defaults the configuration moves elsewhere, in case:
#: removed at teardown when they did not exist at start.
HOST_PATHS = (
    "/run/containerd",
    "/run/mount",
    "/run/netns",
    "/run/xtables.lock",
    "/var/lib/cni",
    "/var/log/containers",
    "/var/log/pods",
    "/var/lib/kubelet",
    "/var/lib/containerd",
    "/opt/containerd",
    "/etc/cni",
    "/opt/cni",
    "/etc/kubernetes",
    "/run/kubernetes",
    "/usr/libexec/kubernetes",
    "/var/lib/kube-proxy",
)
#: The node's own processes, in the order they stop.
NODE_PROCESSES = ("volume-recycler", "kube-proxy", "kubelet", "containerd")
MNT_DETACH = 2


class RealNodeError(RuntimeError):
    """The real node cannot start here, or did not come up."""


def log(message: str) -> None:
    print(f"[realnode {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


# --- what the host has ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Mount:
    """One line of /proc/self/mountinfo."""

    root: str
    point: str
    fstype: str
    options: str


def _unescape(text: str) -> str:
    return re.sub(r"\\([0-7]{3})", lambda found: chr(int(found.group(1), 8)), text)


def mounts() -> list[Mount]:
    found = []
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        left, right = line.split(" - ", 1)
        fields = left.split()
        fstype, _source, options = [*right.split(" ", 2), "", ""][:3]
        found.append(Mount(_unescape(fields[3]), _unescape(fields[4]), fstype, options))
    return found


def within(path: str | Path, folder: str | Path) -> bool:
    """Whether ``path`` is ``folder`` or inside it (by name; no symlinks resolved)."""
    path, folder = str(path).rstrip("/") or "/", str(folder).rstrip("/") or "/"
    return path == folder or path.startswith(folder + "/") or folder == "/"


def _cgroup_hierarchies() -> list[Path]:
    return [Path(m.point) for m in mounts() if m.fstype in ("cgroup", "cgroup2")]


def _cgroup_problems() -> list[str]:
    cgroup_mounts = [m for m in mounts() if m.fstype in ("cgroup", "cgroup2")]
    if any(m.point == "/sys/fs/cgroup" and m.fstype == "cgroup2" for m in cgroup_mounts):
        available = Path("/sys/fs/cgroup/cgroup.controllers").read_text().split()
        missing = [c for c in CGROUP_V2_CONTROLLERS if c not in available]
        return [f"cgroup v2 controllers {', '.join(missing)}"] if missing else []
    mounted = {
        option for m in cgroup_mounts if m.fstype == "cgroup" for option in m.options.split(",")
    }
    missing = [c for c in CGROUP_V1_CONTROLLERS if c not in mounted]
    if missing:
        return [f"cgroup v1 controllers not mounted under /sys/fs/cgroup: {', '.join(missing)}"]
    return []


def preflight() -> list[str]:
    """What this host lacks for a real node, each naming what is missing and how to get it."""
    problems = []
    if os.geteuid() != 0:
        problems.append(
            "root: the kubelet, containerd and the CNI plugins change cgroups, mounts, network"
        )
    problems += _cgroup_problems()
    try:
        os.close(os.open("/dev/kmsg", os.O_RDONLY | os.O_NONBLOCK))
    except OSError as error:
        problems.append(f"/dev/kmsg ({error.strerror}): the kubelet watches it for OOM kills")
    if "overlay" not in Path("/proc/filesystems").read_text().split():
        problems.append("overlayfs (no 'overlay' in /proc/filesystems): containerd's snapshotter")
    if not Path("/proc/sys/net/bridge/bridge-nf-call-iptables").exists():
        problems.append(
            "br_netfilter (no net.bridge.bridge-nf-call-iptables): Services on a bridge"
        )
    if not Path("/proc/sys/net/netfilter/nf_conntrack_max").exists():
        problems.append("nf_conntrack (no net.netfilter.nf_conntrack_max): kube-proxy's NAT")
    return problems + _program_problems()


def _program_problems() -> list[str]:
    problems = []
    packages: dict[str, list[str]] = {}
    for command, package in HOST_COMMANDS.items():
        if shutil.which(command) is None:
            packages.setdefault(package, []).append(command)
    for plugin in CNI_PLUGINS:
        if not (CNI_BIN / plugin).is_file():
            packages.setdefault("containernetworking-plugins", []).append(str(CNI_BIN / plugin))
    for package, what in packages.items():
        problems.append(f"{', '.join(what)} (Debian package {package}): run `make node-packages`")
    if shutil.which("nft") is not None:
        done = subprocess.run(
            ["nft", "list", "tables"], capture_output=True, text=True, check=False
        )
        if done.returncode != 0:
            problems.append(f"nf_tables (`nft list tables`: {done.stderr.strip()})")
    for name in KUBE_BINARIES:
        try:
            find_binary(name)
        except FileNotFoundError:
            problems.append(f"{name} (bin/k8s/<version>): run `make envtest-real`")
    try:
        kubectl_path()
    except FileNotFoundError:
        problems.append("bin/kubectl: run `make tools`")
    return problems


def _cmdline(pid: int) -> list[str]:
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return []
    return [part.decode(errors="replace") for part in raw.split(b"\0") if part]


def _alive(pid: int, marker: str) -> bool:
    """Whether ``pid`` runs and is ours: its command line mentions ``marker`` (the state folder),
    so a recycled pid is never mistaken for one."""
    return any(marker in part for part in _cmdline(pid))


def _processes(program: str) -> list[int]:
    """Pids of the processes whose executable's name is ``program``."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and int(entry.name) != os.getpid():
            argv = _cmdline(int(entry.name))
            if argv and Path(argv[0]).name == program:
                found.append(int(entry.name))
    return found


def kwok_running() -> str | None:
    """A description of a running kwok cluster, or None."""
    pids = _processes("kwok")
    if not pids:
        return None
    return f"a kwok cluster runs (kwok pid {pids[0]}: {' '.join(_cmdline(pids[0]))[:160]})"


def real_node_running(*, any_kubelet: bool = True) -> str | None:
    """A description of a running real node, or None: ours (the pointer in ~/.cache names a
    folder whose processes live), or, with ``any_kubelet``, any kubelet on this host (it would
    hold the kubelet's ports and the kubepods cgroups)."""
    active = _read_active()
    if active is not None:
        record = HostRecord.load(NodePaths(active).record)
        if record is not None and any(_alive(pid, str(active)) for pid in record.pids.values()):
            return f"a real node runs from {active} (make cluster-down, or end its test session)"
    pids = _processes("kubelet") if any_kubelet else []
    if pids:
        return f"a kubelet runs (pid {pids[0]}: {' '.join(_cmdline(pids[0]))[:160]})"
    return None


def _plane_running(workdir: Path) -> str | None:
    """A description of a control plane running from ``workdir`` (make cluster-up's, say), or
    None; a state file whose processes are gone is removed."""
    state = workdir / "controlplane.json"
    try:
        pids: dict[str, int] = json.loads(state.read_text())
    except (OSError, ValueError):
        return None
    if any(_alive(pid, str(workdir)) for pid in pids.values()):
        return f"a control plane runs from {workdir} (make cluster-down stops it)"
    state.unlink()
    return None


def host_ip() -> str:
    """The address of the host's default route (eth0's): what the node and the API advertise."""
    done = subprocess.run(
        ["ip", "-j", "route", "get", "1.1.1.1"], capture_output=True, text=True, check=False
    )
    if done.returncode == 0:
        routes = json.loads(done.stdout or "[]")
        if routes and routes[0].get("prefsrc"):
            return str(routes[0]["prefsrc"])
    done = subprocess.run(
        ["ip", "-j", "-4", "addr", "show", "scope", "global"],
        capture_output=True,
        text=True,
        check=True,
    )
    for link in json.loads(done.stdout or "[]"):
        for address in link.get("addr_info", []):
            return str(address["local"])
    raise RealNodeError("no global IPv4 address on this host for the node to advertise")


# --- the record of host changes -----------------------------------------------------------------


def _sysctl_path(name: str) -> Path:
    return Path("/proc/sys") / name.replace(".", "/")


def read_sysctls(names: Sequence[str]) -> dict[str, str]:
    values = {}
    for name in names:
        with contextlib.suppress(OSError):
            values[name] = _sysctl_path(name).read_text().strip()
    return values


def _links() -> list[dict[str, Any]]:
    done = subprocess.run(["ip", "-j", "link", "show"], capture_output=True, text=True, check=True)
    return list(json.loads(done.stdout or "[]"))


def _nft(*args: str, check: bool = False) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["nft", *args], capture_output=True, text=True, check=check, timeout=60)


def _nft_tables() -> list[str]:
    """Every nftables table, as "family name"."""
    done = _nft("-j", "list", "tables")
    if done.returncode != 0:
        return []
    return [
        f"{item['table']['family']} {item['table']['name']}"
        for item in json.loads(done.stdout).get("nftables", [])
        if "table" in item
    ]


@dataclass
class HostRecord:
    """What the host looked like before the node started, and the node's processes."""

    workdir: str
    started: float
    sysctls: dict[str, str]
    nft_tables: list[str]
    nft_ruleset: str
    links: list[str]
    netns: list[str]
    host_paths: dict[str, bool]
    cgroups: list[str]
    pids: dict[str, int] = field(default_factory=dict)

    @classmethod
    def capture(cls, workdir: Path) -> HostRecord:
        links = [str(link["ifname"]) for link in _links()]
        per_link = [
            f"net.ipv4.conf.{name}.{key}"
            for name in links
            if "." not in name
            for key in ("forwarding", "route_localnet")
        ]
        netns = Path("/run/netns")
        return cls(
            workdir=str(workdir),
            started=time.time(),
            sysctls=read_sysctls([*SYSCTLS, *per_link]),
            nft_tables=_nft_tables(),
            nft_ruleset=_nft("list", "ruleset").stdout,
            links=links,
            netns=sorted(p.name for p in netns.iterdir()) if netns.is_dir() else [],
            host_paths={path: os.path.lexists(path) for path in HOST_PATHS},
            cgroups=[str(tree) for tree in _kubepods_trees()],
        )

    def save(self, path: Path) -> None:
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text(json.dumps(asdict(self), indent=1))
        tmp.replace(path)

    @classmethod
    def load(cls, path: Path) -> HostRecord | None:
        try:
            return cls(**json.loads(path.read_text()))
        except (OSError, ValueError, TypeError):
            return None


def _read_active() -> Path | None:
    try:
        return Path(json.loads(ACTIVE.read_text())["workdir"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _write_active(workdir: Path) -> None:
    ACTIVE.parent.mkdir(parents=True, exist_ok=True)
    try:
        fd = os.open(ACTIVE, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    except FileExistsError:
        raise RealNodeError(
            f"{ACTIVE} names another real node ({_read_active()}): stop it first"
        ) from None
    with os.fdopen(fd, "w") as out:
        json.dump({"workdir": str(workdir), "pid": os.getpid()}, out)


def _clear_active(workdir: Path) -> None:
    if _read_active() == workdir:
        ACTIVE.unlink(missing_ok=True)


# --- paths ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class NodePaths:
    """Where the node keeps its state inside the state folder."""

    workdir: Path

    @property
    def node(self) -> Path:
        return self.workdir / "node"

    @property
    def record(self) -> Path:
        return self.node / "realnode.json"

    @property
    def logs(self) -> Path:
        return self.workdir / "logs"

    @property
    def containerd(self) -> Path:
        return self.node / "containerd"

    @property
    def socket(self) -> Path:
        return self.containerd / "containerd.sock"

    @property
    def cni(self) -> Path:
        return self.node / "cni"

    @property
    def kubelet_root(self) -> Path:
        return self.node / "kubelet"

    @property
    def volumes(self) -> Path:
        return self.node / "volumes"

    @property
    def kubeconfig(self) -> Path:
        return self.workdir / "kubeconfig"


# --- images --------------------------------------------------------------------------------------


def build_images(names: Sequence[str] | None = None) -> dict[str, tuple[str, Path]]:
    """hack/images/build.sh for ``names`` (None: every image there): name -> (ref, archive).
    The node's own images must build; another image that fails is left out, with a warning."""
    available = sorted(p.parent.name for p in IMAGES_SCRIPT.parent.glob("*/ref"))
    wanted = available if names is None else list(names)
    built: dict[str, tuple[str, Path]] = {}
    for name in [*REQUIRED_IMAGES, *(n for n in wanted if n not in REQUIRED_IMAGES)]:
        done = subprocess.run(
            [str(IMAGES_SCRIPT), name], capture_output=True, text=True, check=False, cwd=ROOT
        )
        if done.returncode != 0:
            if name in REQUIRED_IMAGES or names is not None:
                raise RealNodeError(f"hack/images/build.sh {name} failed: {done.stderr[-2000:]}")
            log(f"image {name} left out: hack/images/build.sh {name} failed")
            continue
        for line in done.stdout.splitlines():
            parts = line.split()
            if len(parts) == 3:
                built[parts[0]] = (parts[1], Path(parts[2]))
    return built


# --- configuration files --------------------------------------------------------------------------


def containerd_config(paths: NodePaths, sandbox_image: str) -> str:
    state = paths.containerd
    return f"""\
version = 2
root = "{state / "root"}"
state = "{state / "state"}"
disabled_plugins = ["io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs",
  "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.zfs"]

[grpc]
  address = "{paths.socket}"

[plugins]
  [plugins."io.containerd.grpc.v1.cri"]
    # No registry: the pods' sandbox is our own pause image, imported at start.
    sandbox_image = "{sandbox_image}"
    enable_cdi = false
    # The kubelet asks for negative oom_score_adj values, which need CAP_SYS_RESOURCE; where
    # that is missing (a sandbox), runc fails every pod. Clamp to containerd's own score.
    restrict_oom_score_adj = true
    [plugins."io.containerd.grpc.v1.cri".containerd]
      snapshotter = "overlayfs"
      default_runtime_name = "runc"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
        runtime_type = "io.containerd.runc.v2"
        [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
          SystemdCgroup = false
          BinaryName = "{shutil.which("runc") or "runc"}"
    [plugins."io.containerd.grpc.v1.cri".cni]
      bin_dir = "{CNI_BIN}"
      conf_dir = "{paths.cni / "net.d"}"
      max_conf_num = 1
  [plugins."io.containerd.internal.v1.opt"]
    path = "{state / "opt"}"
"""


def cni_config(paths: NodePaths) -> dict[str, Any]:
    mtu = 1500
    with contextlib.suppress(OSError, ValueError, IndexError, KeyError):
        route = json.loads(
            subprocess.run(
                ["ip", "-j", "route", "get", "1.1.1.1"], capture_output=True, text=True, check=True
            ).stdout
        )
        mtu = int(Path(f"/sys/class/net/{route[0]['dev']}/mtu").read_text())
    return {
        "cniVersion": "1.0.0",
        "name": "realnode",
        "plugins": [
            {
                "type": "bridge",
                "bridge": BRIDGE,
                "isGateway": True,
                "ipMasq": True,
                "hairpinMode": True,
                "mtu": mtu,
                "ipam": {
                    "type": "host-local",
                    "ranges": [[{"subnet": POD_CIDR}]],
                    "routes": [{"dst": "0.0.0.0/0"}],
                    "dataDir": str(paths.cni / "ipam"),
                },
            },
            {"type": "portmap", "capabilities": {"portMappings": True}},
        ],
    }


def kubelet_config(paths: NodePaths, ca: Path, healthz_port: int) -> dict[str, Any]:
    return {
        "apiVersion": "kubelet.config.k8s.io/v1beta1",
        "kind": "KubeletConfiguration",
        "failCgroupV1": False,  # 1.35 refuses cgroup v1 unless told
        "cgroupDriver": "cgroupfs",  # no systemd; containerd 1.6 has no RuntimeConfig RPC
        "failSwapOn": False,
        "containerRuntimeEndpoint": f"unix://{paths.socket}",
        "authentication": {
            "anonymous": {"enabled": False},
            "webhook": {"enabled": True},
            "x509": {"clientCAFile": str(ca)},
        },
        "authorization": {"mode": "Webhook"},
        "readOnlyPort": 0,
        "healthzBindAddress": "127.0.0.1",
        "healthzPort": healthz_port,
        "clusterDomain": CLUSTER_DOMAIN,
        "clusterDNS": [CLUSTER_DNS],
        "resolvConf": "/etc/resolv.conf",
        "podLogsDir": str(paths.node / "pod-logs"),
        "volumePluginDir": str(paths.node / "volume-plugins"),
        "rotateCertificates": False,
        "registerNode": True,
        "maxPods": MAX_PODS,
        # Nothing to pull the images back from: never collect them, never evict for disk.
        "imageGCHighThresholdPercent": 100,
        "imageGCLowThresholdPercent": 99,
        "evictionHard": {
            "memory.available": "100Mi",
            "nodefs.available": "1%",
            "imagefs.available": "1%",
            "nodefs.inodesFree": "1%",
        },
        "containerLogMaxSize": "10Mi",
    }


def kube_proxy_config(kubeconfig: Path, healthz_port: int, metrics_port: int) -> dict[str, Any]:
    return {
        "apiVersion": "kubeproxy.config.k8s.io/v1alpha1",
        "kind": "KubeProxyConfiguration",
        "clientConnection": {"kubeconfig": str(kubeconfig)},
        "mode": "nftables",
        "clusterCIDR": CLUSTER_CIDR,
        "hostnameOverride": NODE_NAME,
        "nodePortAddresses": ["primary"],
        "healthzBindAddress": f"127.0.0.1:{healthz_port}",
        "metricsBindAddress": f"127.0.0.1:{metrics_port}",
        # Zero: leave the host's conntrack table size and timeouts as they are.
        "conntrack": {
            "maxPerCore": 0,
            "min": 0,
            "tcpEstablishedTimeout": "0s",
            "tcpCloseWaitTimeout": "0s",
        },
    }


def coredns_manifests(image: str) -> list[dict[str, Any]]:
    """CoreDNS as the cluster's DNS: RBAC, its Corefile, one replica, Service kube-dns."""
    labels = {"k8s-app": "kube-dns"}
    namespace = "kube-system"
    corefile = f"""\
.:1053 {{
    errors
    health {{
        lameduck 2s
    }}
    ready
    kubernetes {CLUSTER_DOMAIN} in-addr.arpa ip6.arpa {{
        pods insecure
        fallthrough in-addr.arpa ip6.arpa
        ttl 30
    }}
    forward . /etc/resolv.conf
    cache 30
    loop
    loadbalance
}}
"""
    meta = {"name": "coredns", "namespace": namespace}
    return [
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": meta},
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRole",
            "metadata": {"name": "system:coredns"},
            "rules": [
                {
                    "apiGroups": [""],
                    "resources": ["endpoints", "services", "pods", "namespaces"],
                    "verbs": ["list", "watch"],
                },
                {
                    "apiGroups": ["discovery.k8s.io"],
                    "resources": ["endpointslices"],
                    "verbs": ["list", "watch"],
                },
            ],
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": {"name": "system:coredns"},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "ClusterRole",
                "name": "system:coredns",
            },
            "subjects": [{"kind": "ServiceAccount", "name": "coredns", "namespace": namespace}],
        },
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": {"Corefile": corefile}},
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {**meta, "labels": labels},
            "spec": {
                "replicas": 1,
                "selector": {"matchLabels": labels},
                "template": {
                    "metadata": {"labels": labels},
                    "spec": {
                        "serviceAccountName": "coredns",
                        "priorityClassName": "system-cluster-critical",
                        "dnsPolicy": "Default",  # the host's resolvers, to forward to
                        "securityContext": {
                            "runAsNonRoot": True,
                            "runAsUser": 65532,
                            "runAsGroup": 65532,
                            "seccompProfile": {"type": "RuntimeDefault"},
                        },
                        "containers": [
                            {
                                "name": "coredns",
                                "image": image,
                                "imagePullPolicy": "Never",
                                "args": ["-conf", "/etc/coredns/Corefile"],
                                # 1053, not 53: no NET_BIND_SERVICE needed; the Service maps 53.
                                "ports": [
                                    {"name": "dns", "containerPort": 1053, "protocol": "UDP"},
                                    {"name": "dns-tcp", "containerPort": 1053, "protocol": "TCP"},
                                ],
                                "resources": {
                                    "requests": {"cpu": "50m", "memory": "70Mi"},
                                    "limits": {"memory": "170Mi"},
                                },
                                "securityContext": {
                                    "allowPrivilegeEscalation": False,
                                    "readOnlyRootFilesystem": True,
                                    "capabilities": {"drop": ["ALL"]},
                                },
                                "volumeMounts": [{"name": "config", "mountPath": "/etc/coredns"}],
                                "readinessProbe": {
                                    "httpGet": {"path": "/ready", "port": 8181},
                                    "periodSeconds": 2,
                                },
                                "livenessProbe": {
                                    "httpGet": {"path": "/health", "port": 8080},
                                    "initialDelaySeconds": 10,
                                    "periodSeconds": 10,
                                },
                            }
                        ],
                        "volumes": [{"name": "config", "configMap": {"name": "coredns"}}],
                    },
                },
            },
        },
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": "kube-dns", "namespace": namespace, "labels": labels},
            "spec": {
                "clusterIP": CLUSTER_DNS,
                "selector": labels,
                "ports": [
                    {"name": "dns", "port": 53, "targetPort": 1053, "protocol": "UDP"},
                    {"name": "dns-tcp", "port": 53, "targetPort": 1053, "protocol": "TCP"},
                ],
            },
        },
    ]


def storage_manifests(volumes: Path, count: int = VOLUMES) -> list[dict[str, Any]]:
    """A default no-provisioner StorageClass and ``count`` local PVs on this node."""
    docs: list[dict[str, Any]] = [
        {
            "apiVersion": "storage.k8s.io/v1",
            "kind": "StorageClass",
            "metadata": {
                "name": STORAGE_CLASS,
                "annotations": {"storageclass.kubernetes.io/is-default-class": "true"},
            },
            "provisioner": "kubernetes.io/no-provisioner",
            "volumeBindingMode": "WaitForFirstConsumer",
        }
    ]
    for index in range(count):
        docs.append(
            {
                "apiVersion": "v1",
                "kind": "PersistentVolume",
                "metadata": {
                    "name": f"{NODE_NAME}-pv-{index:02d}",
                    "labels": {VOLUME_LABEL: "true"},
                },
                "spec": {
                    "capacity": {"storage": "100Gi"},  # not enforced: fits any claim
                    "accessModes": ["ReadWriteOnce"],
                    # Retain: a deleted claim leaves the PV Released; the recycler frees it.
                    "persistentVolumeReclaimPolicy": "Retain",
                    "storageClassName": STORAGE_CLASS,
                    "local": {"path": str(volumes / f"pv-{index:02d}")},
                    "nodeAffinity": {
                        "required": {
                            "nodeSelectorTerms": [
                                {
                                    "matchExpressions": [
                                        {
                                            "key": "kubernetes.io/hostname",
                                            "operator": "In",
                                            "values": [NODE_NAME],
                                        }
                                    ]
                                }
                            ]
                        }
                    },
                },
            }
        )
    return docs


def _apply(kubeconfig: Path, docs: list[dict[str, Any]]) -> None:
    done = kubectl_process(
        kubeconfig,
        "apply",
        "--server-side",
        "--field-manager=realnode",
        "-f",
        "-",
        stdin=json.dumps({"apiVersion": "v1", "kind": "List", "items": docs}),
    )
    if done.returncode != 0:
        raise RealNodeError(f"kubectl apply: {done.stderr.strip()}")


# --- the volume recycler -----------------------------------------------------------------------


def _mounted_below(path: Path) -> bool:
    """Whether a mount shows ``path`` (or something in it) anywhere: a bind of a volume."""
    return any(within(m.root, path) or within(m.point, path) for m in mounts())


def wipe_volume(path: Path) -> None:
    """Empty a volume's folder and give it back the mode of a fresh one (the kubelet's fsGroup
    changes its group and sets setgid)."""
    for child in path.iterdir():
        if child.is_dir() and not child.is_symlink():
            shutil.rmtree(child)
        else:
            child.unlink()
    os.chown(path, 0, 0)
    path.chmod(0o777)


def _api_request(
    kubeconfig: Path, method: str, path: str, body: dict[str, Any] | None = None
) -> dict[str, Any]:
    """One request to the API server of ``kubeconfig`` (the file-based client certificate that
    tests/controlplane.py writes): the decoded answer. Plain urllib: the recycler stays small."""
    config = yaml.safe_load(kubeconfig.read_text())
    cluster, user = config["clusters"][0]["cluster"], config["users"][0]["user"]
    context = ssl.create_default_context(cafile=cluster["certificate-authority"])
    context.load_cert_chain(user["client-certificate"], user["client-key"])
    request = urllib.request.Request(  # noqa: S310 (https to our own API server)
        cluster["server"] + path,
        method=method,
        data=json.dumps(body).encode() if body is not None else None,
        headers={"Content-Type": "application/merge-patch+json", "Accept": "application/json"},
    )
    with urllib.request.urlopen(request, context=context, timeout=30) as answer:  # noqa: S310
        return dict(json.load(answer))


def recycle(kubeconfig: Path, volumes: Path, interval_s: float = 1.0) -> None:
    """Forever: each Released (or Failed) PV of ours whose folder nothing mounts gets its folder
    wiped and its claimRef removed, so that it is Available to the next claim."""
    listing = f"/api/v1/persistentvolumes?labelSelector={VOLUME_LABEL}%3Dtrue"
    while True:
        try:
            found = _api_request(kubeconfig, "GET", listing)["items"]
        except (OSError, ValueError, KeyError) as error:
            log(f"listing volumes: {error}")  # the API server restarts, or stops: again later
            time.sleep(interval_s * 5)
            continue
        for pv in found:
            if pv.get("status", {}).get("phase") not in ("Released", "Failed"):
                continue
            path = Path(pv["spec"].get("local", {}).get("path", "/"))
            if path.parent != volumes or not path.is_dir():
                continue
            if _mounted_below(path):
                continue  # still mounted in a pod that is going away: next round
            claim = pv["spec"].get("claimRef") or {}
            wipe_volume(path)
            name = pv["metadata"]["name"]
            try:
                _api_request(
                    kubeconfig,
                    "PATCH",
                    f"/api/v1/persistentvolumes/{name}",
                    {"spec": {"claimRef": None}},
                )
            except (OSError, ValueError) as error:
                log(f"freeing {name}: {error}")  # the next round tries again
                continue
            log(f"recycled {name} (was {claim.get('namespace')}/{claim.get('name')})")
        time.sleep(interval_s)


# --- DNS from the host ---------------------------------------------------------------------------


def dns_query(server: str, name: str, timeout_s: float = 2.0, port: int = 53) -> list[str]:
    """The A records for ``name`` from ``server`` (one UDP query): what a pod's resolver asks."""
    ident = int.from_bytes(os.urandom(2), "big")
    question = b"".join(bytes([len(part)]) + part.encode() for part in name.strip(".").split("."))
    question += b"\0" + struct.pack("!HH", 1, 1)
    query = struct.pack("!HHHHHH", ident, 0x0100, 1, 0, 0, 0) + question
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        sock.settimeout(timeout_s)
        sock.sendto(query, (server, port))
        data = sock.recv(4096)
    answers = struct.unpack("!H", data[6:8])[0]
    offset, found = 12 + len(question), []
    for _ in range(answers):
        while data[offset] and data[offset] & 0xC0 != 0xC0:  # a name: labels, or a pointer
            offset += data[offset] + 1
        offset += 2 if data[offset] else 1
        kind, _cls, _ttl, length = struct.unpack("!HHIH", data[offset : offset + 10])
        offset += 10
        if kind == 1 and length == 4:
            found.append(socket.inet_ntoa(data[offset : offset + 4]))
        offset += length
    return found


# --- the cluster ---------------------------------------------------------------------------------


@dataclass
class RealCluster:
    """The control plane and a real node on this host. ``start()`` / ``stop()``, or
    ``real_cluster()``. ``detached`` processes outlive this Python process (`make cluster-up`);
    otherwise they die with it and the next start restores what they left."""

    workdir: Path
    detached: bool = False
    #: hack/images/ names to import (None: all of them; the node's own always).
    image_names: Sequence[str] | None = None
    crds: bool = True
    #: containerd's root (images, unpacked layers, containers' writable layers) in memory: the
    #: imports write no disk and the teardown is an unmount, not minutes of deleting files on a
    #: slow disk; about twice the images' size in RAM. Volumes and emptyDirs stay on disk.
    containerd_tmpfs: bool = True
    node_name: str = NODE_NAME
    host_ip: str = ""
    #: Image name (hack/images/<name>) -> reference, as imported.
    images: dict[str, str] = field(default_factory=dict)
    #: Seconds from the start: "control plane", "node Ready", "images", "CoreDNS Ready".
    timings: dict[str, float] = field(default_factory=dict)
    plane: ControlPlane | None = None
    processes: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)
    record: HostRecord | None = None

    def __post_init__(self) -> None:
        self.workdir = self.workdir.resolve()

    @property
    def paths(self) -> NodePaths:
        return NodePaths(self.workdir)

    @property
    def kubeconfig(self) -> Path:
        return self.paths.kubeconfig

    @property
    def url(self) -> str:
        assert self.plane is not None
        return self.plane.url

    @property
    def logs(self) -> dict[str, Path]:
        """Component -> its log file."""
        return {path.stem: path for path in sorted(self.paths.logs.glob("*.log"))}

    def ctr(self, *args: str, timeout_s: float = 120) -> str:
        """``ctr -n k8s.io ARGS`` against the node's containerd; its stdout."""
        done = subprocess.run(
            ["ctr", "--address", str(self.paths.socket), "-n", "k8s.io", *args],
            capture_output=True,
            text=True,
            check=False,
            timeout=timeout_s,
        )
        if done.returncode != 0:
            raise RealNodeError(f"ctr {' '.join(args)}: {done.stderr.strip()}")
        return done.stdout

    # --- start ---

    def start(self) -> RealCluster:
        began = time.monotonic()
        paths = self.paths
        recover()
        for conflict in (kwok_running(), real_node_running(), _plane_running(self.workdir)):
            if conflict:
                raise RealNodeError(f"cannot start a real node: {conflict}")
        problems = preflight() + _leftover_problems()
        if problems:
            raise RealNodeError(
                "this host lacks what a real node needs:\n  - " + "\n  - ".join(problems)
            )
        if len(str(paths.socket)) > 100:
            raise RealNodeError(f"{paths.socket} is too long for a unix socket: a shorter folder")
        archives = build_images(self.image_names)
        self.timings["images built"] = time.monotonic() - began
        self.host_ip = host_ip()
        # A previous run's data, certificates and logs are not reused: every start is empty.
        for stale in ("etcd", "pki", "logs", "node"):
            safe_rmtree(self.workdir / stale)
        for folder in (paths.logs, paths.containerd, paths.cni / "net.d", paths.volumes):
            folder.mkdir(parents=True, exist_ok=True)
        self.record = HostRecord.capture(self.workdir)
        self.record.save(paths.record)
        _write_active(self.workdir)
        try:
            self._start(archives, began)
        except BaseException:
            with contextlib.suppress(Exception):
                log(f"start failed; the kubelet's last lines:\n{self._tail('kubelet')}")
            self.stop()
            raise
        return self

    def _start(self, archives: dict[str, tuple[str, Path]], began: float) -> None:
        paths = self.paths
        (paths.containerd / "config.toml").write_text(
            containerd_config(paths, archives["pause"][0])
        )
        (paths.cni / "net.d" / "10-realnode.conflist").write_text(
            json.dumps(cni_config(paths), indent=1)
        )
        for index in range(VOLUMES):
            volume = paths.volumes / f"pv-{index:02d}"
            volume.mkdir()
            volume.chmod(0o777)  # any pod user may write; the kubelet applies fsGroup
        if self.containerd_tmpfs:
            root = paths.containerd / "root"
            root.mkdir(mode=0o711)
            subprocess.run(
                ["mount", "-t", "tmpfs", "-o", "mode=0711", "realnode-containerd", str(root)],
                check=True,
            )
        self._spawn(
            "containerd",
            ["containerd", "--config", str(paths.containerd / "config.toml"), "--log-level=warn"],
        )
        self._wait_containerd()
        importing = self._import_images(archives)  # meanwhile, the control plane starts
        self.plane = ControlPlane(
            self.workdir, detached=self.detached, real=True, host_ip=self.host_ip
        )
        self.plane.start()
        self.timings["control plane"] = time.monotonic() - began
        self._start_node(self.plane)
        _apply(self.kubeconfig, storage_manifests(paths.volumes))
        if self.crds:
            self._install_crds()
        self._wait_node_ready()
        self.timings["node Ready"] = time.monotonic() - began
        for name, proc in importing.items():
            _, stderr = proc.communicate(timeout=300)
            if proc.returncode != 0:
                raise RealNodeError(f"ctr images import {name}: {stderr.decode()[-2000:]}")
        self.images = {name: ref for name, (ref, _) in archives.items()}
        self.timings["images imported"] = time.monotonic() - began
        _apply(self.kubeconfig, coredns_manifests(self.images["coredns"]))
        self._wait_dns()
        self.timings["CoreDNS Ready"] = time.monotonic() - began

    def _start_node(self, plane: ControlPlane) -> None:
        """The kubelet and kube-proxy, each with a client certificate of its own, and the
        volume recycler."""
        paths, pki = self.paths, plane.pki
        kubelet_kubeconfig = self.workdir / "kubeconfig-kubelet"
        cert = client_certificate(
            pki,
            f"system:node:{NODE_NAME}",
            ["system:nodes"],
            (pki.ca.parent / "kubelet.crt", pki.ca.parent / "kubelet.key"),
        )
        write_kubeconfig(kubelet_kubeconfig, plane.url, pki, cert)
        proxy_kubeconfig = self.workdir / "kubeconfig-kube-proxy"
        cert = client_certificate(pki, "system:kube-proxy", [])
        write_kubeconfig(proxy_kubeconfig, plane.url, pki, cert)
        kubelet_yaml = paths.node / "kubelet-config.yaml"
        kubelet_yaml.write_text(yaml.safe_dump(kubelet_config(paths, pki.ca, free_port())))
        self._spawn(
            "kubelet",
            [
                str(find_binary("kubelet")),
                f"--config={kubelet_yaml}",
                f"--kubeconfig={kubelet_kubeconfig}",
                f"--root-dir={paths.kubelet_root}",
                f"--cert-dir={paths.kubelet_root / 'pki'}",
                f"--hostname-override={NODE_NAME}",
                f"--node-ip={self.host_ip}",
                "--v=1",
            ],
        )
        proxy_yaml = paths.node / "kube-proxy-config.yaml"
        proxy_yaml.write_text(
            yaml.safe_dump(kube_proxy_config(proxy_kubeconfig, free_port(), free_port()))
        )
        self._spawn(
            "kube-proxy", [str(find_binary("kube-proxy")), f"--config={proxy_yaml}", "--v=1"]
        )
        self._spawn(
            "volume-recycler",
            [sys.executable, "-m", "tests.realnode", "recycle", "--dir", str(self.workdir)],
        )

    def _install_crds(self, attempts: int = 3) -> None:
        for attempt in range(1, attempts + 1):
            try:
                install_crds(self.kubeconfig)
                return
            except subprocess.CalledProcessError:
                # `kubectl wait` fails at once on a CRD with no status yet ("accessor error:
                # <nil>"): a race on a busy host. Wait again.
                if attempt == attempts:
                    raise
                time.sleep(1)

    def _spawn(self, name: str, argv: list[str]) -> None:
        log_file = (self.paths.logs / f"{name}.log").open("ab")
        self.processes[name] = subprocess.Popen(
            argv,
            stdout=log_file,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            cwd=ROOT,
            start_new_session=True,
            preexec_fn=None if self.detached else _die_with_parent,  # noqa: PLW1509 (no threads)
        )
        log_file.close()
        assert self.record is not None
        self.record.pids[name] = self.processes[name].pid
        self.record.save(self.paths.record)

    def _check_processes(self) -> None:
        for name, proc in self.processes.items():
            if proc.poll() is not None:
                raise RealNodeError(f"{name} exited with {proc.returncode}: {self._tail(name)}")

    def _tail(self, name: str, lines: int = 25) -> str:
        path = self.paths.logs / f"{name}.log"
        text = path.read_text(errors="replace") if path.exists() else ""
        return "\n".join(text.splitlines()[-lines:])

    def _wait_containerd(self) -> None:
        deadline = time.monotonic() + 60
        while True:
            self._check_processes()
            done = subprocess.run(
                ["ctr", "--address", str(self.paths.socket), "version"],
                capture_output=True,
                check=False,
                timeout=30,
            )
            if done.returncode == 0:
                return
            if time.monotonic() > deadline:
                raise RealNodeError(f"containerd did not answer: {self._tail('containerd')}")
            time.sleep(0.2)

    def _import_images(
        self, archives: dict[str, tuple[str, Path]]
    ) -> dict[str, subprocess.Popen[bytes]]:
        """Import the sandbox image now, the others in the background (they are waited for
        before the start returns)."""
        command = ["ctr", "--address", str(self.paths.socket), "-n", "k8s.io", "images", "import"]
        self.ctr("images", "import", str(archives["pause"][1]))
        return {
            name: subprocess.Popen(
                [*command, str(archive)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
            )
            for name, (_, archive) in archives.items()
            if name != "pause"
        }

    def _api(self) -> Any:
        from kubernetes import client, config

        return client.CoreV1Api(config.new_client_from_config(config_file=str(self.kubeconfig)))

    def _wait_node_ready(self) -> None:
        from kubernetes.client import ApiException

        core = self._api()
        deadline = time.monotonic() + READY_TIMEOUT_S
        while time.monotonic() < deadline:
            self._check_processes()
            try:
                node = core.read_node(NODE_NAME)
            except ApiException as error:
                if error.status != 404:
                    raise
            else:
                for cond in node.status.conditions or []:
                    if cond.type == "Ready" and cond.status == "True" and node.spec.pod_cidr:
                        return
            time.sleep(0.2)
        raise RealNodeError(f"node {NODE_NAME} not Ready: {self._tail('kubelet')}")

    def _wait_dns(self) -> None:
        """Until CoreDNS's pod is Ready, behind its Service, and answers through the ClusterIP."""
        deadline = time.monotonic() + READY_TIMEOUT_S
        last = ""
        while time.monotonic() < deadline:
            self._check_processes()
            try:
                found = dns_query(CLUSTER_DNS, f"kubernetes.default.svc.{CLUSTER_DOMAIN}", 1.0)
                if found:
                    return
                last = "no answer"
            except OSError as error:
                last = str(error)
            time.sleep(0.5)
        pods = kubectl_process(self.kubeconfig, "get", "pods", "-A", "-o", "wide").stdout
        raise RealNodeError(f"CoreDNS did not answer at {CLUSTER_DNS} ({last}):\n{pods}")

    # --- stop ---

    def stop(self) -> list[str]:
        """Stop everything and restore the host; what could not be restored (empty: all)."""
        problems = teardown(self.workdir, self.plane, self.processes)
        self.processes.clear()
        return problems

    def __enter__(self) -> RealCluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        problems = self.stop()
        if problems:
            raise RealNodeError("teardown left: " + "; ".join(problems))


@contextlib.contextmanager
def real_cluster(
    workdir: Path, *, images: Sequence[str] | None = None, crds: bool = True
) -> Iterator[RealCluster]:
    """A control plane and a real node in ``workdir``, stopped and the host restored after."""
    with RealCluster(workdir, image_names=images, crds=crds) as cluster:
        yield cluster


# --- teardown ------------------------------------------------------------------------------------


def _leftover_problems() -> list[str]:
    """What another (not recorded) setup left that the node would collide with."""
    problems = []
    if any(link.get("ifname") == BRIDGE for link in _links()):
        problems.append(f"a {BRIDGE} bridge exists already (another CNI setup?): delete it first")
    for tree in _kubepods_trees():
        if _cgroup_pids(tree):
            problems.append(f"{tree} has processes (another kubelet's pods?)")
    return problems


def _kubepods_trees() -> list[Path]:
    return [tree for h in _cgroup_hierarchies() if (tree := h / "kubepods").is_dir()]


def _cgroup_pids(tree: Path) -> set[int]:
    pids: set[int] = set()
    for folder, _dirs, _files in os.walk(tree):
        with contextlib.suppress(OSError, ValueError):
            pids |= {int(p) for p in (Path(folder) / "cgroup.procs").read_text().split()}
    return pids


def _kill_pods(timeout_s: float = 15.0) -> None:
    """SIGKILL every process in the kubepods cgroups (the pods' containers and sandboxes)."""
    for tree in _kubepods_trees():
        for folder, _dirs, _files in os.walk(tree):
            state = Path(folder) / "freezer.state"
            if state.exists():
                with contextlib.suppress(OSError):
                    state.write_text("THAWED")
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        pids = set().union(*(_cgroup_pids(tree) for tree in _kubepods_trees()))
        if not pids:
            return
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(0.2)


def _remove_cgroups(trees: Sequence[Path]) -> list[str]:
    problems = []
    for tree in trees:
        for folder, _dirs, _files in os.walk(tree, topdown=False):
            for _ in range(20):
                try:
                    os.rmdir(folder)
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    time.sleep(0.1)  # a process just killed is still leaving it
            else:
                problems.append(f"cgroup {folder} could not be removed")
    return problems


def _stop_all(pids: Sequence[int], marker: str, grace_s: float = 10.0) -> None:
    """SIGTERM the process groups of ``pids`` (those still ours: see ``_alive``) at once, then
    SIGKILL what is left after ``grace_s``. A zombie counts as gone (its command line is empty),
    and our own children are reaped."""
    ours = [pid for pid in pids if _alive(pid, marker)]
    for pid in ours:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pid, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    while ours:
        for pid in ours:
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, os.WNOHANG)
        ours = [pid for pid in ours if _alive(pid, marker)]
        if time.monotonic() > deadline:
            for pid in ours:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(pid, signal.SIGKILL)
            deadline = time.monotonic() + grace_s
        time.sleep(0.05)


def _shims(socket_path: Path) -> list[int]:
    return [
        pid for pid in _processes("containerd-shim-runc-v2") if str(socket_path) in _cmdline(pid)
    ]


def _unmount_within(folders: Sequence[Path]) -> list[str]:
    """Lazily unmount everything mounted at or below ``folders``, deepest first."""
    libc = ctypes.CDLL("libc.so.6", use_errno=True)
    for _ in range(10):
        points = sorted(
            {m.point for m in mounts() if any(within(m.point, folder) for folder in folders)},
            key=lambda point: point.count("/"),
            reverse=True,
        )
        if not points:
            return []
        for point in points:
            libc.umount2(point.encode(), MNT_DETACH)
    return [f"still mounted: {point}" for point in points]


def safe_rmtree(path: Path) -> None:
    """rmtree, but never into a mount (a bind mount could be any host folder)."""
    if not path.exists():
        return
    busy = [m.point for m in mounts() if within(m.point, path)]
    if busy:
        raise RealNodeError(f"will not remove {path}: mounts remain below it: {busy[:5]}")
    shutil.rmtree(path)


def _restore_nftables(record: HostRecord) -> list[str]:
    problems = []
    for table in _nft_tables():
        if table not in record.nft_tables:
            done = _nft("delete", "table", *table.split())
            if done.returncode != 0:
                problems.append(f"nft delete table {table}: {done.stderr.strip()}")
    for table in record.nft_tables:  # tables that were there: take out our chains only
        problems += _remove_chains(table, ("KUBE-", "CNI-"))
    if _nft("list", "ruleset").stdout != record.nft_ruleset:
        problems.append("the nftables ruleset differs from the one at start")
    return problems


def _jumps(expr: Any) -> Iterator[str]:
    if isinstance(expr, dict):
        for key, value in expr.items():
            if key in ("jump", "goto") and isinstance(value, dict) and "target" in value:
                yield str(value["target"])
            else:
                yield from _jumps(value)
    elif isinstance(expr, list):
        for item in expr:
            yield from _jumps(item)


def _remove_chains(table: str, prefixes: Sequence[str]) -> list[str]:
    """In a table that existed before: delete the chains named ``prefixes``* and the rules that
    jump to them."""
    family, name = table.split()
    done = _nft("-a", "-j", "list", "table", family, name)
    if done.returncode != 0:
        return []
    items = json.loads(done.stdout).get("nftables", [])
    ours = [
        item["chain"]["name"]
        for item in items
        if "chain" in item and item["chain"]["name"].startswith(tuple(prefixes))
    ]
    if not ours:
        return []
    for chain in ours:
        _nft("flush", "chain", family, name, chain)
    for item in items:
        rule = item.get("rule")
        if rule and rule["chain"] not in ours and set(_jumps(rule["expr"])) & set(ours):
            _nft("delete", "rule", family, name, rule["chain"], "handle", str(rule["handle"]))
    return [
        f"nft delete chain {table} {chain}: {done.stderr.strip()}"
        for chain in ours
        if (done := _nft("delete", "chain", family, name, chain)).returncode != 0
    ]


def _forget_connections() -> None:
    """Delete the conntrack entries of the pods' and the Services' addresses (NAT state that
    would otherwise linger until it times out)."""
    if shutil.which("conntrack") is None:
        return
    for flag, network in (("-s", CLUSTER_CIDR), ("-d", CLUSTER_CIDR), ("-d", SERVICE_CIDR)):
        subprocess.run(["conntrack", "-D", flag, network], capture_output=True, check=False)


def _restore_sysctls(record: HostRecord) -> list[str]:
    problems = []
    first = "net.ipv4.ip_forward"
    for name in sorted(record.sysctls, key=lambda n: n != first):
        want = record.sysctls[name]
        path = _sysctl_path(name)
        try:
            if path.exists() and path.read_text().strip() != want:
                path.write_text(want)
        except OSError as error:
            problems.append(f"sysctl {name}={want}: {error.strerror}")
    now = read_sysctls(list(record.sysctls))
    problems += [
        f"sysctl {name} is {now[name]}, was {want}"
        for name, want in record.sysctls.items()
        if name in now and now[name] != want
    ]
    return problems


def _restore_links(record: HostRecord) -> list[str]:
    for link in _links():
        if link.get("master") == BRIDGE and link["ifname"] not in record.links:
            subprocess.run(
                ["ip", "link", "delete", link["ifname"]], capture_output=True, check=False
            )
    if BRIDGE not in record.links:
        subprocess.run(["ip", "link", "delete", BRIDGE], capture_output=True, check=False)
    return [
        f"link {link['ifname']} remains"
        for link in _links()
        if link["ifname"] not in record.links
        and (link["ifname"] == BRIDGE or link.get("master") == BRIDGE)
    ]


def _restore_host_paths(record: HostRecord, node: Path) -> list[str]:
    problems = []
    for path_name, existed in record.host_paths.items():
        path = Path(path_name)
        if existed or not os.path.lexists(path):
            continue
        try:
            if path.is_dir() and not path.is_symlink():
                safe_rmtree(path)
            else:
                path.unlink()
        except (OSError, RealNodeError) as error:
            problems.append(f"{path}: {error}")
    logs = Path("/var/log/containers")
    if record.host_paths.get(str(logs)) and logs.is_dir():
        for link in logs.iterdir():  # the kubelet's links to our pods' logs
            if link.is_symlink() and within(os.readlink(link), node):
                link.unlink()
    return problems


def teardown(
    workdir: Path,
    plane: ControlPlane | None = None,
    processes: dict[str, subprocess.Popen[bytes]] | None = None,
) -> list[str]:
    """Stop the real node of ``workdir`` (its processes, its pods, their shims, the control
    plane) and restore the host as its record says; what could not be restored. Works from the
    record alone, after a run that was killed."""
    paths = NodePaths(workdir.resolve())
    record = HostRecord.load(paths.record)
    if record is None:
        _clear_active(paths.workdir)
        return []
    steps: list[str] = []
    began = time.monotonic()

    def step(what: str) -> None:
        nonlocal began
        now = time.monotonic()
        steps.append(f"{what} {now - began:.1f}s")
        began = now

    _stop_node(paths, record, processes or {}, step)
    _stop_recorded_plane(paths.workdir)
    if plane is not None:
        plane.stop()  # already stopped: it reaps its children and forgets them
    shutil.rmtree(paths.workdir / "etcd", ignore_errors=True)
    step("control plane stopped")
    problems = _restore_host(paths, record, step)
    log(f"teardown of {paths.workdir}: {', '.join(steps)}")
    _clear_active(paths.workdir)
    return problems


def _stop_node(
    paths: NodePaths,
    record: HostRecord,
    processes: dict[str, subprocess.Popen[bytes]],
    step: Callable[[str], None],
) -> None:
    """Stop the node's processes (the kubelet first, so that nothing restarts a container),
    every pod's processes, containerd, and the shims (what they mounted is unmounted after)."""
    marker = str(paths.workdir)
    pids = {name: pid for name, pid in record.pids.items() if name in NODE_PROCESSES}
    _stop_all([pid for name, pid in pids.items() if name != "containerd"], marker)
    step("kubelet, kube-proxy, recycler stopped")
    _kill_pods()
    step("pods killed")
    _stop_all([pid for name, pid in pids.items() if name == "containerd"], marker)
    for pid in _shims(paths.socket):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    _kill_pods()
    for proc in processes.values():
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=5)
    step("containerd and shims stopped")


def _restore_host(paths: NodePaths, record: HostRecord, step: Callable[[str], None]) -> list[str]:
    """Mounts, network namespaces, links, nftables, sysctls, cgroups, folders: as recorded."""
    netns = Path("/run/netns")
    created = [Path(p) for p, existed in record.host_paths.items() if not existed]
    new_netns = [p for p in netns.iterdir() if p.name not in record.netns] if netns.is_dir() else []
    problems = _unmount_within([paths.node, *new_netns, *created])
    for path in new_netns:
        with contextlib.suppress(OSError):
            path.unlink()
    step("unmounted")
    problems += _restore_links(record)
    _forget_connections()
    problems += _restore_nftables(record)
    problems += _restore_sysctls(record)
    step("links, nftables, sysctls")
    problems += _remove_cgroups(
        [tree for tree in _kubepods_trees() if str(tree) not in record.cgroups]
    )
    step("cgroups")
    problems += _restore_host_paths(record, paths.node)
    try:
        safe_rmtree(paths.node)
    except (OSError, RealNodeError) as error:
        problems.append(f"{paths.node}: {error}")
    step("folders removed")
    return problems


def _stop_recorded_plane(workdir: Path) -> None:
    """Stop the control plane of ``workdir`` from its state file (the controllers and the API
    server, then etcd), each only if it still is that folder's."""
    state = workdir / "controlplane.json"
    try:
        pids: dict[str, int] = json.loads(state.read_text())
    except (OSError, ValueError):
        return
    _stop_all([pid for name, pid in pids.items() if name != "etcd"], str(workdir))
    _stop_all([pid for name, pid in pids.items() if name == "etcd"], str(workdir))
    state.unlink(missing_ok=True)


def recover() -> list[str]:
    """If a real node's run was killed (its record is left, its processes are gone), restore
    what it left on the host; what could not be. Nothing when none was, or it still runs."""
    active = _read_active()
    if active is None:
        return []
    record = HostRecord.load(NodePaths(active).record)
    if record is not None and any(_alive(pid, str(active)) for pid in record.pids.values()):
        return []
    log(f"restoring what the real node of a killed run ({active}) left on this host")
    problems = teardown(active)
    _clear_active(active)
    return problems


# --- make cluster-up REAL=1 / cluster-down -----------------------------------------------------


def cluster_up(workdir: Path) -> int:
    """`make cluster-up REAL=1`: a detached control plane and real node in ``workdir``, with
    every image of hack/images/, or those named in $REALNODE_IMAGES (with spaces)."""
    names = os.environ.get("REALNODE_IMAGES", "").split() or None
    cluster = RealCluster(workdir, detached=True, image_names=names)
    try:
        cluster.start()
    except RealNodeError as error:
        print(error, file=sys.stderr)
        return 1
    timings = ", ".join(f"{name} {seconds:.1f}s" for name, seconds in cluster.timings.items())
    print(f"real node {NODE_NAME} ({cluster.host_ip}) is Ready at {cluster.url}: {timings}")
    print(f"images: {', '.join(sorted(cluster.images.values()))}")
    print(f"logs: {cluster.paths.logs}; stop it with: make cluster-down")
    print(f"export KUBECONFIG={cluster.kubeconfig}")
    return 0


def cluster_down(workdir: Path) -> int | None:
    """`make cluster-down`: the real node of ``workdir`` stopped and the host restored, and a
    killed run's leftovers restored; None when neither was there (a kwok cluster, maybe)."""
    workdir = workdir.resolve()
    handled = False
    problems: list[str] = []
    if NodePaths(workdir).record.exists():
        problems += teardown(workdir)
        handled = True
    active = _read_active()
    if active is not None and active != workdir:
        left = recover()
        if _read_active() == active:
            print(f"a real node of another folder still runs: {active}")
        else:
            problems += left
            handled = True
    if not handled:
        return None
    for problem in problems:
        print(f"not restored: {problem}", file=sys.stderr)
    print("real node stopped, host restored" if not problems else "real node stopped")
    return 1 if problems else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.realnode", description=__doc__)
    parser.add_argument("command", choices=["up", "down", "check", "recycle"])
    parser.add_argument("--dir", type=Path, default=ROOT / ".local", help="state folder")
    args = parser.parse_args(argv)
    if args.command == "check":
        problems = preflight()
        for problem in problems:
            print(f"missing: {problem}")
        return 1 if problems else 0
    if args.command == "recycle":
        paths = NodePaths(args.dir.resolve())
        recycle(paths.kubeconfig, paths.volumes)
        return 0
    if args.command == "up":
        return cluster_up(args.dir)
    return cluster_down(args.dir) or 0


if __name__ == "__main__":
    sys.exit(main())
