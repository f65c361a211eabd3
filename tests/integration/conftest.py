"""Integration fixtures: everything here needs the control plane, and most tests an operator."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import urllib.request
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.cluster import Cluster, wait_for


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "tests/integration/" in str(item.path):
            item.add_marker(pytest.mark.integration)


@dataclass
class OperatorProcess:
    """`database-operator run` in a subprocess, its stderr (the log) captured to a file."""

    proc: subprocess.Popen[bytes]
    log_path: Path

    def log_text(self) -> str:
        return self.log_path.read_text(errors="replace")

    def log_lines(self) -> list[dict[str, Any]]:
        """Every complete log line, parsed: each must be one JSON object. A line still being
        written (no newline yet) is left for the next read."""
        text = self.log_text()
        complete = text[: text.rfind("\n") + 1]
        return [json.loads(line) for line in complete.splitlines() if line.strip()]

    def reconciles(self, name: str, trigger: str | None = None) -> list[dict[str, Any]]:
        return [
            line
            for line in self.log_lines()
            if line.get("event") == "reconciled"
            and line.get("name") == name
            and (trigger is None or line.get("trigger") == trigger)
        ]

    def resyncs(self, name: str) -> list[dict[str, Any]]:
        """The resyncs of ``name`` that came due: reconciled, or skipped as a fixed point (a
        reconcile that would find what the last one found; logged at DEBUG)."""
        return [
            line
            for line in self.log_lines()
            if line.get("name") == name
            and (
                (line.get("event") == "reconciled" and line.get("trigger") == "resync")
                or line.get("event") == "resync skipped"
            )
        ]

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        return self.proc.returncode


def is_ready(health_port: int) -> bool:
    """The operator's /readyz answers 200 (with webhooks: they are served)."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{health_port}/readyz", timeout=2):
            return True
    except OSError:
        return False


def start_operator(
    cluster: Cluster,
    log_path: Path,
    *args: str,
    kubeconfig: Path | None = None,
    env: Mapping[str, str] | None = None,
) -> OperatorProcess:
    """Start `database-operator run ARGS` as the admin, or as the user of ``kubeconfig``, with
    ``env`` added to the environment."""
    env = {**os.environ, **(env or {}), "KUBECONFIG": str(kubeconfig or cluster.kubeconfig)}
    log = log_path.open("wb")
    proc = subprocess.Popen(
        [sys.executable, "-m", "database_operator.cli", "run", *args],
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
    )
    operator = OperatorProcess(proc, log_path)
    # Kopf has logged in, or the operator waits for CRDs that a test is about to install.
    started = ("Initial authentication has finished", "waiting for the CRDs to be installed")
    wait_for(
        lambda: proc.poll() is not None or any(line in operator.log_text() for line in started),
        timeout=30,
        what="the operator to start",
    )
    assert proc.poll() is None, f"the operator exited: {operator.log_text()}"
    return operator


#: Resync often, so drift tests need not wait long.
RESYNC_S = 1.0


@contextlib.contextmanager
def operator_of(
    cluster: Cluster, namespace: str, log_path: Path, env: Mapping[str, str] | None = None
) -> Iterator[OperatorProcess]:
    """An operator watching only ``namespace`` (so tests cannot disturb each other), resyncing
    often, with ``env`` added; stopped cleanly at the end."""
    running = start_operator(
        cluster,
        log_path,
        f"--namespace={namespace}",
        f"--resync-interval={RESYNC_S}",
        "--health-port=0",
        "--metrics-port=0",
        "--log-level=DEBUG",
        env=env,
    )
    try:
        yield running
    finally:
        stopped = running.stop()
    assert stopped == 0, running.log_text()[-3000:]


@pytest.fixture
def operator(cluster: Cluster, namespace: str, tmp_path: Path) -> Iterator[OperatorProcess]:
    """An operator watching only this test's namespace."""
    with operator_of(cluster, namespace, tmp_path / "operator.log") as running:
        yield running


@pytest.fixture
def tmp_shared(tmp_path: Path) -> Iterator[Path]:
    """A folder the engines' users (postgres, ...) can use too: pytest's tmp_path is private to
    root, and the engines refuse to run as root (the recipe tests)."""
    from tests.engines import owned, run_as

    base = Path("/tmp") / f"recipes-{tmp_path.name}"  # noqa: S108 - a test's own folder
    owned(base, run_as())
    yield base
    shutil.rmtree(base, ignore_errors=True)
