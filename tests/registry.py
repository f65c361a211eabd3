"""A real OCI registry on loopback (`crane registry serve`, go-containerregistry's registry:
in memory, plain HTTP) for the pipeline scripts' tests: images and charts are pushed to it and
read back by the same tools the workflows use. Built by hack/go-tool.sh (`make crane`).
"""

from __future__ import annotations

import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from tests.controlplane import ROOT, free_port

CRANE = ROOT / "bin" / "crane"
STARTUP_S = 20.0


@dataclass(frozen=True)
class Registry:
    host: str  # 127.0.0.1:PORT

    def crane(self, *args: str) -> str:
        done = subprocess.run(
            [str(CRANE), *args, "--insecure"],
            capture_output=True,
            text=True,
            check=False,
            timeout=60,
        )
        if done.returncode != 0:
            raise AssertionError(f"crane {' '.join(args)} failed: {done.stderr}")
        return done.stdout.strip()

    def push_image(self, repository: str, tag: str, content: str, scratch: Path) -> str:
        """A one-layer image whose file holds ``content`` (distinct content: a distinct
        digest), tagged ``tag``; returns its digest."""
        scratch.mkdir(parents=True, exist_ok=True)
        (scratch / "content").write_text(content)
        layer = scratch / "layer.tar"
        subprocess.run(["tar", "-C", str(scratch), "-cf", str(layer), "content"], check=True)
        self.crane("append", "-f", str(layer), "-t", f"{self.host}/{repository}:{tag}")
        return self.digest(repository, tag)

    def digest(self, repository: str, tag: str) -> str:
        return self.crane("digest", f"{self.host}/{repository}:{tag}")

    def tags(self, repository: str) -> list[str]:
        return self.crane("ls", f"{self.host}/{repository}").split()


@contextmanager
def running_registry(log: Path) -> Iterator[Registry]:
    assert CRANE.is_file(), f"{CRANE} is missing: run `make crane`"
    port = free_port()
    with log.open("w") as out:
        process = subprocess.Popen(
            [str(CRANE), "registry", "serve", "--address", f"127.0.0.1:{port}"],
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:
        deadline = time.monotonic() + STARTUP_S
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if process.poll() is not None or time.monotonic() > deadline:
                    raise AssertionError(f"the registry did not start: {log.read_text()}") from None
                time.sleep(0.1)
        yield Registry(f"127.0.0.1:{port}")
    finally:
        process.terminate()
        process.wait(timeout=10)
