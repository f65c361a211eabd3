"""The project's Helm chart against a control plane, and the RBAC it grants there: `Helm` runs
bin/helm (`make tools`) with a kubeconfig and folders of its own; `CHART` and `fullname` name the
chart and a release's objects; `service_account_kubeconfig` authenticates as a ServiceAccount (a
token, as a pod has); `can_i` asks what an account may do."""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

import yaml

from tests.cluster import Cluster
from tests.controlplane import ROOT

HELM = ROOT / "bin" / "helm"
CHART = ROOT / "helm" / "database-operator"
CHART_NAME = "database-operator"


@dataclass
class Helm:
    """bin/helm against one control plane, with its own cache/config/data folders."""

    kubeconfig: Path
    home: Path

    def __call__(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        assert HELM.is_file(), f"{HELM} is missing: run `make tools`"
        env = {
            **os.environ,
            "KUBECONFIG": str(self.kubeconfig),
            "HELM_CACHE_HOME": str(self.home / "cache"),
            "HELM_CONFIG_HOME": str(self.home / "config"),
            "HELM_DATA_HOME": str(self.home / "data"),
        }
        done = subprocess.run(
            [str(HELM), *args], env=env, capture_output=True, text=True, check=False, timeout=180
        )
        if check and done.returncode != 0:
            raise AssertionError(f"helm {' '.join(args)} failed: {done.stderr}")
        return done

    def chart(
        self, verb: str, release: str, namespace: str, *args: str, check: bool = True
    ) -> subprocess.CompletedProcess[str]:
        """``helm <verb> <release> <the chart> --namespace <namespace> <args>``: the project's
        chart installed, upgraded or rendered."""
        return self(verb, release, str(CHART), "--namespace", namespace, *args, check=check)


def fullname(release: str) -> str:
    """The chart's name for the release's objects (the release name does not contain it)."""
    return f"{release}-{CHART_NAME}"


def service_account_kubeconfig(cluster: Cluster, namespace: str, account: str, path: Path) -> Path:
    """A kubeconfig that authenticates with a token of the ServiceAccount (as a pod would)."""
    token = cluster.kubectl("create", "token", account, "-n", namespace, "--duration=1h").strip()
    pki = cluster.plane.pki
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": "c",
                "cluster": {"server": cluster.plane.url, "certificate-authority": str(pki.ca)},
            }
        ],
        "users": [{"name": account, "user": {"token": token}}],
        "contexts": [{"name": "c", "context": {"cluster": "c", "user": account}}],
        "current-context": "c",
    }
    path.write_text(yaml.safe_dump(config))
    path.chmod(0o600)
    return path


def can_i(cluster: Cluster, account: str, *request: str) -> str:
    """kubectl's answer, "yes" or "no" (its first line: warnings follow on stderr)."""
    answer = cluster.kubectl("auth", "can-i", *request, f"--as={account}", check=False)
    return answer.splitlines()[0].strip()
