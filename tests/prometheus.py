"""A real Prometheus on loopback and what tests read over HTTP: `prometheus_server` runs Debian's
Prometheus (on PATH: hack/install-prometheus.sh) on the scrape configs given; `query` and
`value` ask it through its HTTP API; `scrape` and `sample` read the operator's own /metrics
without it; `http_get` is the body of one answer (an exporter's /metrics too). Used by the
operator's metrics tests (tests/integration/test_prometheus.py, test_lifecycle.py), the
monitoring tests (tests/exporters.py and the tests of its fleet) and the real node's.

A missing `prometheus` or `promtool` fails the test rather than skipping it (`required_tool`),
so CI cannot go green without having checked the metrics.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import subprocess
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from tests.cluster import wait_for
from tests.controlplane import free_port, stop_process


def required_tool(name: str) -> str:
    """The path of ``name`` (prometheus, promtool); the test fails if it is not on PATH."""
    path = shutil.which(name)
    if path is None:
        pytest.fail(
            f"`{name}` is not on PATH: run hack/install-prometheus.sh (make test does) to install "
            "prometheus and promtool"
        )
    return path


def http_get(url: str, timeout: float = 10) -> bytes | None:
    """The body of a 200 answer, or None while the server is not (yet) answering."""
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:  # noqa: S310 - loopback
            return response.read()  # type: ignore[no-any-return]
    except (urllib.error.URLError, ConnectionError, TimeoutError):
        return None


@contextlib.contextmanager
def prometheus_server(
    folder: Path, scrape_configs: Sequence[Mapping[str, Any]], interval_s: float = 1
) -> Iterator[str]:
    """Prometheus on loopback with ``scrape_configs`` (scraping and evaluating every
    ``interval_s``), its config, data and log in ``folder``, ready; its base URL."""
    binary = required_tool("prometheus")
    port = free_port()
    config = folder / "prometheus.yml"
    interval = f"{interval_s}s"
    config.write_text(
        yaml.safe_dump(
            {
                "global": {
                    "scrape_interval": interval,
                    "scrape_timeout": interval,
                    "evaluation_interval": interval,
                },
                "scrape_configs": list(scrape_configs),
            }
        )
    )
    log = folder / "prometheus.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [
                binary,
                f"--config.file={config}",
                f"--storage.tsdb.path={folder / 'tsdb'}",
                f"--web.listen-address=127.0.0.1:{port}",
                "--log.level=warn",
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
        )
    url = f"http://127.0.0.1:{port}"
    try:
        wait_for(
            lambda: proc.poll() is not None or http_get(f"{url}/-/ready") is not None,
            timeout=30,
            what="Prometheus to be ready",
        )
        assert proc.poll() is None, f"Prometheus exited: {log.read_text(errors='replace')}"
        yield url
    finally:
        stop_process(proc)


def query(prometheus: str, promql: str) -> list[dict[str, Any]]:
    """An instant query through Prometheus's HTTP API: the vector it returns."""
    body = http_get(
        f"{prometheus}/api/v1/query?{urllib.parse.urlencode({'query': promql})}", timeout=5
    )
    assert body is not None, f"Prometheus did not answer the query {promql!r}"
    answer = json.loads(body)
    assert answer["status"] == "success", answer
    assert answer["data"]["resultType"] == "vector", answer
    return answer["data"]["result"]  # type: ignore[no-any-return]


def value(prometheus: str, promql: str) -> float | None:
    """The value of a query that selects one series, or None while it selects none."""
    result = query(prometheus, promql)
    assert len(result) <= 1, f"{promql!r} selected several series: {result}"
    return float(result[0]["value"][1]) if result else None


def scrape(port: int) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    """Every sample the operator serves on /metrics: (name, labels) -> value (empty while it
    does not answer)."""
    text = http_get(f"http://127.0.0.1:{port}/metrics", timeout=5)
    return {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in text_string_to_metric_families((text or b"").decode())
        for sample in family.samples
    }


def sample(
    samples: dict[tuple[str, frozenset[tuple[str, str]]], float], name: str, **labels: str
) -> float | None:
    return samples.get((name, frozenset(labels.items())))
