"""A built Job's pod on this machine, for the backup recipe tests
(tests/integration/test_backup_recipes.py): no kubelet runs here, so `Pod` runs the containers of
a Job the operator's builders made (backups/jobs.py) as the kubelet would, in order, the first
that fails ending the pod.

Each container's command, args and env come from the built manifest, secretKeyRefs are resolved
from the values the test holds (the Database's generated credentials, the store's keys), and the
agent runs as `python -m database_operator.cli agent`, as `database-operator agent` runs in the
operator's image. What differs is only what a shared test machine must: the pod's volumes are
folders (the manifest's mount paths are mapped to them: `on_host`), `Local` puts this machine's
values (the Service's address, PATH, the user) in place of a pod's own, and the agent writes its
termination message to a file of the pod's. `StandIn` is the image's ``docker-entrypoint.sh``
the restore containers end in; `source_init_script` sources what they leave for it.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from database_operator.backups import jobs
from database_operator.manifest import Manifest
from tests.engines import owned

#: Each Job container gets this long.
CONTAINER_TIMEOUT_S = 300
#: How the image's entrypoint sources a *.sh file of /docker-entrypoint-initdb.d (not
#: executable: the restore container writes it with printf): in its own shell, under its flags.
#: POSIX sh, not the official images' bash: an image's entrypoint may be either, and the loaders
#: must work under both (MySQL's once began with bash's `set -o pipefail`).
SOURCE_INIT_SCRIPT = ["sh", "-c", 'set -e; . "$0"']


@dataclass(frozen=True)
class Local:
    """What this machine puts in place of a pod's own: ``substitutes`` replace env values the
    manifest sets (and must set); ``provided`` is what the image or its entrypoint would add;
    ``path`` the tools' PATH; ``user`` who runs the container (an engine's image runs as its
    own non-root user)."""

    substitutes: Mapping[str, str] = field(default_factory=dict)
    provided: Mapping[str, str] = field(default_factory=dict)
    path: str | None = None
    user: str | None = None


@dataclass(frozen=True)
class Ran:
    """One container's run: exit status, output, wall time, and the agent's result."""

    container: str
    returncode: int
    stdout: str
    stderr: str
    seconds: float
    result: dict[str, Any] | None


def on_host(text: str, mounts: Mapping[str, Path]) -> str:
    """``text`` with each mount path (a whole path component) replaced by its folder here."""
    if not mounts:
        return text
    paths = "|".join(re.escape(mount) for mount in sorted(mounts, key=len, reverse=True))
    return re.sub(rf"(?<![\w./-])(?:{paths})(?![\w.-])", lambda found: str(mounts[found[0]]), text)


class Pod:
    """A built Job's pod on this machine: its volumes are folders (given ones, e.g. a claim, or
    fresh ones in ``folder`` owned by ``owner``), its containers run in order as the kubelet runs
    a Job's pod: init containers first, and the first that fails ends the pod."""

    def __init__(
        self,
        job: Manifest,
        folder: Path,
        secrets: Mapping[str, Mapping[str, str]],
        *,
        volumes: Mapping[str, Path] | None = None,
        owner: str | None = None,
    ) -> None:
        spec = job["spec"]["template"]["spec"]
        self.containers: dict[str, Manifest] = {
            c["name"]: c for c in [*spec.get("initContainers", []), *spec["containers"]]
        }
        self.folder = owned(folder, owner)
        self.home = owned(folder / "home", owner)
        self.secrets = secrets
        given = volumes or {}
        self.volumes = {
            volume["name"]: given.get(volume["name"]) or owned(folder / volume["name"], owner)
            for volume in spec.get("volumes", [])
        }
        for volume in spec.get("volumes", []):  # a Secret's volume: its keys as files
            if "secret" in volume and volume["name"] not in given:
                data = secrets[volume["secret"]["secretName"]]
                items = volume["secret"].get("items") or [{"key": k, "path": k} for k in data]
                for item in items:
                    (self.volumes[volume["name"]] / item["path"]).write_text(data[item["key"]])

    def mounts(self, name: str) -> dict[str, Path]:
        return {
            m["mountPath"]: self.volumes[m["name"]]
            for m in self.containers[name].get("volumeMounts", [])
        }

    def env(self, name: str, substitutes: Mapping[str, str] | None = None) -> dict[str, str]:
        """The container's env as the kubelet resolves it (secretKeyRefs from the test's
        values; an optional key that is missing is left out), mount paths mapped."""
        mounts = self.mounts(name)
        resolved: dict[str, str] = {}
        for var in self.containers[name].get("env", []):
            if "value" in var:
                resolved[var["name"]] = on_host(var["value"], mounts)
                continue
            ref = var["valueFrom"]["secretKeyRef"]
            value = self.secrets.get(ref["name"], {}).get(ref["key"])
            if value is None:
                assert ref.get("optional"), f"Secret {ref['name']} has no key {ref['key']}"
                continue
            resolved[var["name"]] = value
        unknown = set(substitutes or {}) - set(resolved)
        assert not unknown, f"{name} sets no {unknown}: nothing to substitute"
        return resolved | dict(substitutes or {})

    def environment(self, name: str, local: Local) -> dict[str, str]:
        """Everything the container's processes see."""
        base = {"PATH": local.path or os.environ["PATH"], "HOME": str(self.home)}
        return base | self.env(name, local.substitutes) | dict(local.provided)

    def result_file(self, name: str) -> Path:
        return self.folder / f"{name}.termination-log"

    def argv(self, name: str) -> list[str]:
        container = self.containers[name]
        mounts = self.mounts(name)
        argv = [on_host(arg, mounts) for arg in [*container["command"], *container.get("args", [])]]
        agent = jobs.AGENT_COMMAND
        if argv[: len(agent)] == agent:
            # The operator image's `database-operator agent`; its termination message in a file
            # of this pod's (the kubelet's /dev/termination-log is no test's to write).
            result = f"--result-file={self.result_file(name)}"
            return [sys.executable, "-m", "database_operator.cli", "agent", result, *argv[2:]]
        return argv

    def run(self, name: str, local: Local | None = None) -> Ran:
        local = local or Local()
        result_file = self.result_file(name)
        result_file.unlink(missing_ok=True)
        started = time.monotonic()
        done = subprocess.run(
            self.argv(name),
            env=self.environment(name, local),
            cwd=self.home,
            capture_output=True,
            text=True,
            user=local.user,
            timeout=CONTAINER_TIMEOUT_S,
            check=False,
        )
        seconds = time.monotonic() - started
        result = json.loads(result_file.read_text()) if result_file.exists() else None
        return Ran(name, done.returncode, done.stdout, done.stderr, seconds, result)

    def run_all(self, locals_: Mapping[str, Local] | None = None) -> list[Ran]:
        """Every container in order, until one fails (its Ran is the last)."""
        ran: list[Ran] = []
        for name in self.containers:
            ran.append(self.run(name, (locals_ or {}).get(name)))
            if ran[-1].returncode != 0:
                break
        return ran


def succeeded(ran: Sequence[Ran], pod: Pod) -> dict[str, Ran]:
    """The runs by container, after checking that every container ran and exited 0."""
    for one in ran:
        assert one.returncode == 0, f"{one.container} exited {one.returncode}: {one.stderr[-3000:]}"
    assert [one.container for one in ran] == list(pod.containers)
    return {one.container: one for one in ran}


# --- the image's entrypoint, which the restore containers end in ----------------------------------


@dataclass(frozen=True)
class StandIn:
    """The image's ``docker-entrypoint.sh``, which this machine lacks: it records its
    arguments (the restore container's exec) and does nothing else; the test does the rest."""

    bin: Path
    called: Path

    @classmethod
    def create(cls, folder: Path, user: str | None) -> StandIn:
        bin_ = owned(folder / "image-bin", user)
        called = folder / "entrypoint-called"
        script = bin_ / "docker-entrypoint.sh"
        script.write_text(f"#!/bin/sh\nprintf '%s\\n' \"$@\" > {called}\n")
        script.chmod(0o755)
        owned(folder, user)
        return cls(bin_, called)

    def path(self, *before: Path) -> str:
        return ":".join([str(self.bin), *map(str, before), os.environ["PATH"]])

    def args(self) -> list[str] | None:
        return self.called.read_text().splitlines() if self.called.exists() else None


def init_scripts(pod: Pod) -> list[Path]:
    """What the restore container left in /docker-entrypoint-initdb.d."""
    return sorted(pod.volumes[jobs.INITDB_VOLUME].iterdir())


def source_init_script(script: Path, env: Mapping[str, str], user: str | None) -> Ran:
    """Source one /docker-entrypoint-initdb.d script as the entrypoint does."""
    started = time.monotonic()
    done = subprocess.run(
        [*SOURCE_INIT_SCRIPT, str(script)],
        env=env,
        capture_output=True,
        text=True,
        user=user,
        timeout=CONTAINER_TIMEOUT_S,
        check=False,
    )
    return Ran(
        script.name, done.returncode, done.stdout, done.stderr, time.monotonic() - started, None
    )


def the_loader(pod: Pod) -> Path:
    """The one init script the restore container wrote: exactly the Job's RESTORE_LOADER."""
    scripts = init_scripts(pod)
    assert len(scripts) == 1, scripts
    loader = pod.env("restore")["RESTORE_LOADER"]
    assert scripts[0].read_text() == loader + "\n"
    return scripts[0]
