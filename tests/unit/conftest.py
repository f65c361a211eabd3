"""Unit fixtures: bin/helm in a home of its own and `helm template` parsed (`helm`, `render`),
for the chart's tests (test_chart.py, test_chart_monitoring.py). Needs bin/helm (`make tools`);
a missing one fails the tests rather than skipping them."""

from __future__ import annotations

import os
import subprocess

import pytest
import yaml

from tests.unit.chart import CHART, HELM, RELEASE, Helm, Manifest, Render


@pytest.fixture(scope="module")
def helm_env(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """Helm's environment: its own cache/config/data folders, never the user's."""
    assert HELM.is_file(), f"{HELM} is missing: run `make tools`"
    home = tmp_path_factory.mktemp("helm")
    return {
        **os.environ,
        "HELM_CACHE_HOME": str(home / "cache"),
        "HELM_CONFIG_HOME": str(home / "config"),
        "HELM_DATA_HOME": str(home / "data"),
    }


@pytest.fixture(scope="module")
def helm(helm_env: dict[str, str]) -> Helm:
    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(HELM), *args],
            env=helm_env,
            capture_output=True,
            text=True,
            check=False,
            timeout=60,
        )

    return run


@pytest.fixture(scope="module")
def render(helm: Helm) -> Render:
    """`helm template` the chart with ``args`` (e.g. --set ...) and return its objects."""

    def run(*args: str) -> list[Manifest]:
        done = helm("template", RELEASE, str(CHART), "--namespace", "ops", *args)
        assert done.returncode == 0, done.stderr
        return [doc for doc in yaml.safe_load_all(done.stdout) if doc]

    return run
