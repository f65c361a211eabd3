"""A real Jaeger (v2 all-in-one, in-memory storage) on loopback: the operator exports traces to
its OTLP receiver, tests read them back through its query HTTP API. Built by hack/go-tool.sh
(`make jaeger`) into bin/jaeger; used by the tracing tests, `make demo JAEGER=1` and the bench.
"""

from __future__ import annotations

import json
import subprocess
import time
import urllib.parse
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from tests.controlplane import ROOT, free_port, stop_process

BINARY = ROOT / "bin" / "jaeger"
STARTUP_S = 30.0


def config(ports: dict[str, int]) -> dict[str, Any]:
    """OTLP in (gRPC and HTTP), memory storage, the query API and a health check: all on
    loopback, on the ports given."""

    def at(name: str) -> dict[str, str]:
        return {"endpoint": f"127.0.0.1:{ports[name]}"}

    return {
        "service": {
            "extensions": ["jaeger_storage", "jaeger_query", "healthcheckv2"],
            "pipelines": {
                "traces": {
                    "receivers": ["otlp"],
                    "processors": ["batch"],
                    "exporters": ["jaeger_storage_exporter"],
                }
            },
            "telemetry": {"metrics": {"level": "none"}, "logs": {"level": "warn"}},
        },
        "extensions": {
            "healthcheckv2": {"use_v2": True, "http": at("health")},
            "jaeger_query": {
                "storage": {"traces": "memory"},
                "http": at("query"),
                "grpc": at("query_grpc"),
            },
            "jaeger_storage": {"backends": {"memory": {"memory": {"max_traces": 100_000}}}},
        },
        "receivers": {"otlp": {"protocols": {"grpc": at("otlp_grpc"), "http": at("otlp_http")}}},
        # Stored within a fifth of a second: tests need not wait long for a trace.
        "processors": {"batch": {"timeout": "200ms"}},
        "exporters": {"jaeger_storage_exporter": {"trace_storage": "memory"}},
    }


class PortTakenError(RuntimeError):
    """A port chosen free was taken before Jaeger bound it."""


@dataclass
class Jaeger:
    workdir: Path
    #: Outlive the process that started it (`make demo`; `make cluster-down` stops it).
    detached: bool = False
    ports: dict[str, int] = field(default_factory=dict)
    proc: subprocess.Popen[bytes] | None = None

    @property
    def otlp_http(self) -> str:
        return f"http://127.0.0.1:{self.ports['otlp_http']}"

    @property
    def otlp_grpc(self) -> str:
        return f"http://127.0.0.1:{self.ports['otlp_grpc']}"

    @property
    def query(self) -> str:
        """The query API and UI (the UI's assets are not in a binary built from the module)."""
        return f"http://127.0.0.1:{self.ports['query']}"

    def start(self) -> Jaeger:
        """Start it on free ports; again on others if one was taken meanwhile (free_port's race
        with any other process on the machine: seen once in a fresh-clone CI)."""
        for _ in range(2):
            try:
                return self._start_on_free_ports()
            except PortTakenError:
                self.stop()
        return self._start_on_free_ports()

    def _start_on_free_ports(self) -> Jaeger:
        assert BINARY.is_file(), f"{BINARY} is missing: run `make jaeger`"
        names = ("health", "query", "query_grpc", "otlp_grpc", "otlp_http")
        self.ports = {name: free_port() for name in names}
        self.workdir.mkdir(parents=True, exist_ok=True)
        path = self.workdir / "jaeger.yaml"
        path.write_text(yaml.safe_dump(config(self.ports)))
        log = (self.workdir / "jaeger.log").open("wb")
        self.proc = subprocess.Popen(
            [str(BINARY), f"--config=file:{path}"],
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=self.detached,
        )
        deadline = time.monotonic() + STARTUP_S
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                said = self.log_text()
                if "address already in use" in said:
                    raise PortTakenError(said[-2000:])
                raise RuntimeError(f"jaeger exited: {said[-2000:]}")
            try:
                self._get(f"http://127.0.0.1:{self.ports['health']}/status")
                self._get(f"{self.query}/api/services")
                return self
            except OSError:
                time.sleep(0.2)
        raise RuntimeError(f"jaeger did not start: {self.log_text()[-2000:]}")

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            stop_process(self.proc)

    def log_text(self) -> str:
        return (self.workdir / "jaeger.log").read_text(errors="replace")

    @staticmethod
    def _get(url: str) -> Any:
        with urllib.request.urlopen(url, timeout=5) as answer:  # noqa: S310 - our loopback URL
            return json.load(answer)

    def traces(self, service: str, operation: str | None = None, limit: int = 100) -> list[Any]:
        """Traces of ``service`` (whose root or any span is ``operation``), newest first."""
        query = {"service": service, "limit": str(limit), "lookback": "1h"}
        if operation:
            query["operation"] = operation
        url = f"{self.query}/api/traces?{urllib.parse.urlencode(query)}"
        return list(self._get(url).get("data") or [])

    def trace(self, trace_id: str) -> dict[str, Any] | None:
        """One trace by id, or None while Jaeger does not have it."""
        try:
            data = self._get(f"{self.query}/api/traces/{trace_id}").get("data") or []
        except urllib.error.HTTPError as error:
            if error.code == 404:
                return None
            raise
        return data[0] if data else None


def tags(span: dict[str, Any]) -> dict[str, Any]:
    """A span's attributes (Jaeger calls them tags), by key."""
    return {tag["key"]: tag["value"] for tag in span.get("tags") or []}


def parent_of(span: dict[str, Any]) -> str | None:
    for reference in span.get("references") or []:
        if reference.get("refType") == "CHILD_OF":
            return str(reference["spanID"])
    return None
