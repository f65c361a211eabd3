"""The Helm chart and the kustomize install as the unit tests read them, offline
(test_chart.py, test_chart_monitoring.py): where they are (`CHART`, `ROOT`), the release the
chart is rendered as (`RELEASE`), the labels every object of it has, `sets` (``--set`` flags),
`only` and `kinds` (of rendered objects), `kustomize` (a config/ folder, parsed). The fixtures
that run bin/helm (`helm`, `render`) are in tests/unit/conftest.py."""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from tests.controlplane import kubectl_path

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "helm" / "database-operator"
HELM = ROOT / "bin" / "helm"
RELEASE = "database-operator"
STANDARD_LABELS = {
    "app.kubernetes.io/name",
    "app.kubernetes.io/instance",
    "app.kubernetes.io/version",
    "app.kubernetes.io/managed-by",
    "helm.sh/chart",
}

Manifest = dict[str, Any]
Helm = Callable[..., subprocess.CompletedProcess[str]]
Render = Callable[..., list[Manifest]]


def sets(*assignments: str) -> list[str]:
    """``--set`` flags, one per assignment."""
    return [flag for assignment in assignments for flag in ("--set", assignment)]


def only(objects: list[Manifest], kind: str, name: str | None = None) -> Manifest:
    """The one object of ``kind`` (named ``name``, when given)."""
    found = [
        obj for obj in objects if obj["kind"] == kind and name in (None, obj["metadata"]["name"])
    ]
    assert len(found) == 1, f"{len(found)} {kind}s {name or ''} rendered"
    return found[0]


def kinds(objects: list[Manifest]) -> list[str]:
    return [obj["kind"] for obj in objects]


def kustomize(base: str) -> list[Manifest]:
    """`kubectl kustomize config/<base>`, parsed."""
    done = subprocess.run(
        [str(kubectl_path()), "kustomize", str(ROOT / "config" / base)],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    return [doc for doc in yaml.safe_load_all(done.stdout) if doc]
