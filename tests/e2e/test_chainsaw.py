"""The Chainsaw suite (tests/chainsaw/, docs/chainsaw.md): the user stories as declarative YAML,
run by Chainsaw against the full local cluster and an operator that watches `chainsaw-*` (the
namespaces Chainsaw makes, one per test) and serves its webhooks, as `make chainsaw` does.

Chainsaw's JUnit report lands in .local/chainsaw/ (a CI artifact); its output is printed when it
fails, one line per operation, so the failing step is named."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from tests.cluster import Cluster, wait_for
from tests.controlplane import ROOT, free_port, kubectl_path
from tests.integration.conftest import is_ready, start_operator

SUITE = ROOT / "tests" / "chainsaw"
CHAINSAW = ROOT / "bin" / "chainsaw"
REPORTS = ROOT / ".local" / "chainsaw"
#: The whole suite; each test's steps have their own timeouts (.chainsaw.yaml).
SUITE_TIMEOUT_S = 900


def test_the_chainsaw_suite_passes(full_cluster: Cluster, tmp_path: Path) -> None:
    assert CHAINSAW.exists(), "bin/chainsaw is missing: run `make chainsaw-binary`"
    webhook_port, health_port = free_port(), free_port()
    operator = start_operator(
        full_cluster,
        tmp_path / "operator.log",
        "--namespace=chainsaw-*",
        "--resync-interval=2",
        f"--health-port={health_port}",
        "--metrics-port=0",
        "--webhook-address=127.0.0.1",
        f"--webhook-port={webhook_port}",
        f"--webhook-url=https://127.0.0.1:{webhook_port}",
        "--webhook-configuration=database-operator-chainsaw",
    )
    try:
        wait_for(lambda: is_ready(health_port), timeout=30, what="/readyz with the webhooks served")
        REPORTS.mkdir(parents=True, exist_ok=True)
        env = {
            **os.environ,
            "KUBECONFIG": str(full_cluster.kubeconfig),
            # The scripts of the tests call kubectl: ours, of the cluster's version.
            "PATH": f"{kubectl_path().parent}{os.pathsep}{os.environ.get('PATH', '')}",
        }
        done = subprocess.run(
            [
                str(CHAINSAW),
                "test",
                str(SUITE),
                f"--config={SUITE / '.chainsaw.yaml'}",
                f"--report-path={REPORTS}",
                "--no-color",
            ],
            env=env,
            capture_output=True,
            text=True,
            timeout=SUITE_TIMEOUT_S,
            check=False,
        )
        print(done.stdout[-20000:])
        assert done.returncode == 0, (
            f"chainsaw failed (exit {done.returncode}):\n{done.stdout[-15000:]}\n{done.stderr}"
            f"\noperator log:\n{operator.log_text()[-5000:]}"
        )
    finally:
        assert operator.stop() == 0, operator.log_text()[-3000:]
