"""`make bench`'s measured processes: the operator as a subprocess (optionally with its webhooks,
tracing, a shard, pinned CPUs), and what /proc says of a process's CPU and memory."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

from bench_stats import buckets_by, latency_summary
from tests.controlplane import _die_with_parent, free_port


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _status_mib(pid: int, field_name: str) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(f"{field_name}:"):
            return int(line.split()[1]) / 1024
    return 0.0


def peak_rss_mib(pid: int) -> float:
    """The high-water mark of the resident set (VmHWM)."""
    return _status_mib(pid, "VmHWM")


def rss_mib(pid: int) -> float:
    """The resident set now (VmRSS)."""
    return _status_mib(pid, "VmRSS")


@dataclass
class Operator:
    """`database-operator run -A` as a subprocess, with its metrics port.

    ``webhooks``: it serves its admission and conversion webhooks on a loopback port with its
    own CA and registers them (and the CRD's conversion) by URL, as `make demo` runs it.
    ``cpus``: pinned with taskset to that CPU list.
    """

    kubeconfig: Path
    log: Path
    resync: float
    shard: str | None = None
    env: dict[str, str] = field(default_factory=dict)
    webhooks: bool = False
    cpus: str | None = None
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
        if self.webhooks:
            port = free_port()
            argv += [f"--webhook-port={port}", f"--webhook-url=https://127.0.0.1:{port}"]
        if self.cpus:
            argv = ["taskset", "--cpu-list", self.cpus, *argv]  # it execs: the same pid
        self.started = time.monotonic()
        with self.log.open("ab") as log:
            self.proc = subprocess.Popen(
                argv,
                stderr=log,
                stdout=log,
                env={**os.environ, **self.env, "KUBECONFIG": str(self.kubeconfig)},
                preexec_fn=_die_with_parent,  # noqa: PLW1509 - it only calls prctl
            )
        # /readyz: the watches are up and, with webhooks, they are served and registered.
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

    def metrics(self) -> str:
        with urllib.request.urlopen(
            f"http://127.0.0.1:{self.metrics_port}/metrics", timeout=5
        ) as response:
            return response.read().decode()  # type: ignore[no-any-return]

    def metric(self, name: str) -> float:
        """Every sample whose name starts with ``name``, summed (a counter over its labels)."""
        return sum(
            float(line.rsplit(" ", 1)[1])
            for line in self.metrics().splitlines()
            if line.startswith(name) and not line.startswith("#")
        )

    def reconciles(self) -> float:
        return self.metric("database_operator_reconciles_total")

    def gc_seconds(self) -> float:
        """Seconds its garbage collector has paused it so far, every generation."""
        return self.metric("database_operator_gc_pause_seconds_sum")

    def full_collections(self) -> dict[str, float]:
        """Count, p50 and p99 of its full (generation 2) garbage collections' pauses so far."""
        by_generation = latency_summary(
            buckets_by(self.metrics(), "database_operator_gc_pause_seconds", "generation")
        )
        return by_generation.get("2", {"count": 0.0, "p50_s": 0.0, "p99_s": 0.0})

    def webhook_latency(self) -> dict[str, dict[str, float]]:
        """p50/p99 of database_operator_webhook_duration_seconds, by webhook."""
        text = self.metrics()
        return latency_summary(
            buckets_by(text, "database_operator_webhook_duration_seconds", "webhook")
        )

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


def wait_resumed(operator: Operator, n: int) -> float:
    """Seconds from the operator's start until it has reconciled every Database once."""
    while operator.reconciles() < n:
        if time.monotonic() - operator.started > 300:
            raise TimeoutError("resume took over 300 s")
        time.sleep(0.1)
    return time.monotonic() - operator.started
