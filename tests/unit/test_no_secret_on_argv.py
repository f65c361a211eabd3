"""No secret value on any command line: every container, probe and hook the builders emit, for
every engine and layout (a single primary, read replicas, instances in either role, monitoring,
the backup and restore Jobs), run with stand-ins for the programs it calls.

Each Secret key the container reads is set to a mark. The kubelet's expansion of ``$(VAR)`` in
a command, its arguments, a probe's or a hook's command must not bring a mark in; and a shell
script (``sh -c``) is run for real, by this host's ``sh``, on a PATH of stand-ins that record
the arguments they are started with: no program it starts may be given a mark. (The values
reach the programs through their environment or their standard input instead: what `ps`, the
runtime's config and an exec audit record do not show.)
"""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from database_operator import desired, replication
from database_operator.api.models import Database
from database_operator.backups import jobs, recipes
from database_operator.engines import MONITORING_DIR, Engine
from tests.unit.backups import LOCATION, OPTIONS, PVC, S3, make_backup

#: Every program the scripts start, as a stand-in: it records its arguments (NUL-separated, one
#: line per start), reads its standard input (a heredoc's config or SQL) and succeeds.
PROGRAMS = (
    *("chmod", "chown", "cp", "find", "flock", "grep", "id", "ls", "mkdir", "mktemp", "mv"),
    *("printenv", "rm", "sed", "setpriv", "sha256sum", "sleep", "tar", "touch", "cat"),
    *("gzip", "gunzip", "docker-entrypoint.sh", "head", "od", "tr"),
    *("pg_basebackup", "pg_ctl", "pg_dump", "pg_isready", "pg_restore", "pg_rewind"),
    *("postgres", "psql"),
    *("mariadb", "mariadb-dump", "mysql", "mysqladmin", "mysqld", "mysqldump"),
    *("redis-check-aof", "redis-check-rdb", "redis-cli", "redis-server"),
)

#: The Secret keys whose values are secrets (a user name or an access key's id are not).
SECRET_KEY = re.compile(r"password|secret|token", re.IGNORECASE)
#: The folders the scripts name themselves (not through their environment), moved under the
#: test's own folder.
FOLDERS = (recipes.INITDB_DIR, recipes.BACKUP_DIR, recipes.RESTORE_DIR, MONITORING_DIR)

STAND_IN = """#!/bin/sh
{ printf '%s\\0' "${0##*/}" "$@"; printf '\\n'; } >> "$ARGV_LOG"
case "${0##*/}" in
  mktemp) printf '%s\\n' "$SCRATCH/tmp.$$" ;;
  *) /bin/cat > /dev/null 2>&1 || true ;;
esac
exit 0
"""


def make_db(engine: str, **spec: Any) -> Database:
    body = {
        "metadata": {"name": "shop", "namespace": "prod", "uid": "u1", "generation": 1},
        "spec": {"engine": engine, **spec},
    }
    return Database.model_validate(body)


def containers(pod_spec: dict[str, Any]) -> Iterator[dict[str, Any]]:
    yield from pod_spec.get("initContainers") or []
    yield from pod_spec.get("containers") or []


def built() -> Iterator[tuple[str, dict[str, Any]]]:
    """(where, container) for every container the builders emit."""
    for engine in Engine:
        layouts: dict[str, dict[str, Any]] = {
            "single": {},
            "monitored, read replicas": {"replicas": 2, "monitoring": {"enabled": True}},
        }
        if engine is not Engine.MYSQL:
            layouts["instances"] = {
                "replicas": 2,
                "storage": {"size": "1Gi"},
                "failover": {"enabled": True},
            }
        for layout, spec in layouts.items():
            db = make_db(engine.value, **spec)
            for child in desired.children(db, "c0ffee"):
                if child["kind"] == "Deployment":
                    for found in containers(child["spec"]["template"]["spec"]):
                        yield f"{engine} {layout} {child['metadata']['name']}", found
        db = make_db(engine.value, storage={"size": "1Gi"})
        for destination, name in ((S3, "s3"), (PVC, "pvc")):
            made = [
                jobs.backup_job(make_backup(), db, destination, LOCATION, OPTIONS),
                jobs.restore_job(db, destination, LOCATION, "ab" * 32, OPTIONS),
            ]
            for job in made:
                for found in containers(job["spec"]["template"]["spec"]):
                    yield f"{engine} {name} job {job['metadata']['name']}", found


def resolved_env(container: dict[str, Any], scratch: Path) -> tuple[dict[str, str], set[str]]:
    """The container's environment as the kubelet resolves it, each Secret key a mark; paths
    moved under ``scratch`` (a script may write there). And the marks."""
    env: dict[str, str] = {}
    marks: set[str] = set()
    for number, entry in enumerate(container.get("env") or []):
        source = entry.get("valueFrom") or {}
        if "secretKeyRef" in source:
            key = source["secretKeyRef"]["key"]
            value = f"Mark{number}x{key.replace('-', '')}"
            if SECRET_KEY.search(key):
                marks.add(value)
        elif "configMapKeyRef" in source:
            value = "shop-1"
        elif source:
            value = "10.0.0.7"
        else:
            value = replication.expand(str(entry.get("value", "")), env)
            if value.startswith("/"):
                value = str(scratch / value.lstrip("/"))
        env[entry["name"]] = value
    return env, marks


def commands(container: dict[str, Any]) -> Iterator[tuple[str, list[str]]]:
    """Each argument list the container's process, probes and hooks are started with."""
    yield "process", [*(container.get("command") or []), *(container.get("args") or [])]
    for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
        exec_ = (container.get(probe) or {}).get("exec")
        if exec_:
            yield probe, list(exec_["command"])
    for hook in ("postStart", "preStop"):
        exec_ = ((container.get("lifecycle") or {}).get(hook) or {}).get("exec")
        if exec_:
            yield hook, list(exec_["command"])


def stand_ins(folder: Path) -> Path:
    folder.mkdir()
    for name in PROGRAMS:
        path = folder / name
        path.write_text(STAND_IN)
        path.chmod(0o755)
    return folder


CASES = [pytest.param(container, id=f"{where} {container['name']}") for where, container in built()]


@pytest.mark.parametrize("container", CASES)
def test_no_secret_reaches_an_argument_list(container: dict[str, Any], tmp_path: Path) -> None:
    bin_dir = stand_ins(tmp_path / "bin")
    env, marks = resolved_env(container, tmp_path / "root")
    for what, argv in commands(container):
        expanded = [replication.expand(arg, env) for arg in argv]
        # A folder given as an argument is moved too.
        expanded = [
            str(tmp_path / "root" / arg.lstrip("/")) if arg in FOLDERS else arg for arg in expanded
        ]
        assert not [arg for arg in expanded if any(mark in arg for mark in marks)], (what, argv)
        if expanded[:2] != ["sh", "-c"]:
            continue
        script = str(expanded[2])
        for named in FOLDERS:
            script = script.replace(named, str(tmp_path / "root" / named.lstrip("/")))
            (tmp_path / "root" / named.lstrip("/")).mkdir(parents=True, exist_ok=True)
        for name, value in env.items():
            if value.startswith(str(tmp_path)):
                made = Path(value) if name.endswith(("DIR", "DATA")) else Path(value).parent
                made.mkdir(parents=True, exist_ok=True)
        for target in ("shop-1", "shop-2"):  # an instance's script: either role
            log = tmp_path / f"{what}-{target}.argv"
            log.touch()
            run = env | {
                "PATH": str(bin_dir),
                "ARGV_LOG": str(log),
                "SCRATCH": str(tmp_path),
                "TARGET_PRIMARY": target,
                "HOME": str(tmp_path),
            }
            done = subprocess.run(
                ["/bin/sh", "-c", script, *expanded[3:]],
                env=run,
                cwd=tmp_path,
                stdin=subprocess.DEVNULL,
                capture_output=True,
                text=True,
                timeout=20,
                check=False,
            )
            assert "not found" not in done.stderr, (what, done.stderr)
            started = log.read_text()
            assert started, (what, "the script started no program", done.stderr)
            leaked = [mark for mark in marks if mark in started]
            assert not leaked, (what, started.replace("\0", " "))


def test_the_check_sees_a_secret_on_a_command_line(tmp_path: Path) -> None:
    """The same check, on a container that does put its password on a command line."""
    script = 'mysqladmin ping -p"$PW"'
    bad: dict[str, Any] = {
        "name": "bad",
        "env": [{"name": "PW", "valueFrom": {"secretKeyRef": {"name": "s", "key": "password"}}}],
        "command": ["sh", "-c", script],
    }
    bin_dir = stand_ins(tmp_path / "bin")
    env, marks = resolved_env(bad, tmp_path)
    log = tmp_path / "argv"
    subprocess.run(
        ["/bin/sh", "-c", script],
        env=env | {"PATH": str(bin_dir), "ARGV_LOG": str(log), "SCRATCH": str(tmp_path)},
        check=True,
    )
    assert any(mark in log.read_text() for mark in marks)
    assert os.access(bin_dir / "mysqladmin", os.X_OK)
