"""`kubectl database` against the real kube-apiserver: no operator runs, so each test writes the
statuses the operator would, through the status subresource."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.cluster import BACKUPS, GROUP, PLURAL, VERSION, Cluster, wait_for
from tests.controlplane import free_port, kubectl_path

BIN = Path(sys.executable).parent
PLUGIN = BIN / "kubectl-database"
T0 = "2025-01-02T02:00:00Z"
SIZE = 12_897_485  # 12.3 MiB

Run = Callable[..., subprocess.CompletedProcess[str]]


@pytest.fixture
def plugin(cluster: Cluster) -> Run:
    """Run `kubectl-database ARGS` as installed (`pip install -e .`), as the admin unless
    ``kubeconfig`` names another."""
    assert PLUGIN.is_file(), f"{PLUGIN} is missing: run `.venv/bin/pip install --no-deps -e .`"

    def run(*args: str, kubeconfig: Path | None = None) -> subprocess.CompletedProcess[str]:
        env = {**os.environ, "KUBECONFIG": str(kubeconfig or cluster.kubeconfig)}
        return subprocess.run(
            [str(PLUGIN), *args], env=env, capture_output=True, text=True, timeout=60, check=False
        )

    return run


def start(cluster: Cluster, *args: str) -> subprocess.Popen[str]:
    """`kubectl-database ARGS` in the background."""
    return subprocess.Popen(
        [str(PLUGIN), *args],
        env={**os.environ, "KUBECONFIG": str(cluster.kubeconfig)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def write_backup_status(cluster: Cluster, namespace: str, name: str, **status: Any) -> None:
    """What the operator writes of a DatabaseBackup."""
    cluster.custom.patch_namespaced_custom_object_status(
        GROUP, VERSION, namespace, BACKUPS, name, {"status": status}
    )


def write_db_status(cluster: Cluster, namespace: str, name: str, status: dict[str, Any]) -> None:
    cluster.custom.patch_namespaced_custom_object_status(
        GROUP, VERSION, namespace, PLURAL, name, {"status": status}
    )


def the_only_backup(cluster: Cluster, namespace: str) -> dict[str, Any]:
    found = wait_for(lambda: cluster.list_backups(namespace), what="the DatabaseBackup")
    assert len(found) == 1
    return found[0]


def completed(location: str = "backups/shop/orders.dump") -> dict[str, Any]:
    return {
        "phase": "Completed",
        "completedAt": T0,
        "size": SIZE,
        "location": location,
        "engine": "postgres",
        "engineVersion": "16.4",
    }


def condition(type_: str, status: str, reason: str, message: str) -> dict[str, Any]:
    return {
        "type": type_,
        "status": status,
        "reason": reason,
        "message": message,
        "lastTransitionTime": T0,
    }


# --- backup ---------------------------------------------------------------------------------------


def test_backup_creates_a_database_backup_and_prints_its_name(
    cluster: Cluster, namespace: str, plugin: Run
) -> None:
    cluster.create_db(namespace, "orders", {})
    done = plugin("backup", "orders", "-n", namespace)
    assert done.returncode == 0, done.stderr
    backup = the_only_backup(cluster, namespace)
    assert done.stdout == backup["metadata"]["name"] + "\n"
    assert backup["metadata"]["name"].startswith("orders-20")
    assert backup["spec"] == {"database": "orders"}
    assert backup["metadata"]["labels"] == {f"{GROUP}/database": "orders"}


def test_backup_wait_follows_the_phases_to_completed(cluster: Cluster, namespace: str) -> None:
    cluster.create_db(namespace, "orders", {})
    proc = start(cluster, "backup", "orders", "-n", namespace, "--wait", "--timeout", "1m")
    name = the_only_backup(cluster, namespace)["metadata"]["name"]
    write_backup_status(cluster, namespace, name, phase="Pending")
    write_backup_status(cluster, namespace, name, phase="Running")
    write_backup_status(cluster, namespace, name, **completed())

    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    assert out.splitlines() == [
        name,
        "phase: Pending",
        "phase: Running",
        "phase: Completed",
        "location: backups/shop/orders.dump",
        "size: 12.3 MiB",
    ]


def test_backup_wait_exits_1_with_the_message_when_it_fails(
    cluster: Cluster, namespace: str
) -> None:
    cluster.create_db(namespace, "orders", {})
    proc = start(cluster, "backup", "orders", "-n", namespace, "--wait")
    name = the_only_backup(cluster, namespace)["metadata"]["name"]
    write_backup_status(cluster, namespace, name, phase="Running")
    write_backup_status(
        cluster, namespace, name, phase="Failed", message="pg_dump: connection refused"
    )

    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 1
    assert out.splitlines()[1:] == ["phase: Running", "phase: Failed"]
    assert err == f"error: DatabaseBackup {name} failed: pg_dump: connection refused\n"


def test_backup_wait_gives_up_at_the_timeout(cluster: Cluster, namespace: str, plugin: Run) -> None:
    cluster.create_db(namespace, "orders", {})
    done = plugin("backup", "orders", "-n", namespace, "--wait", "--timeout", "2s")
    assert done.returncode == 1
    assert "did not finish within 2s; it goes on" in done.stderr
    assert "Traceback" not in done.stderr


def test_backup_of_a_missing_database_is_refused(
    cluster: Cluster, namespace: str, plugin: Run
) -> None:
    done = plugin("backup", "nope", "-n", namespace)
    assert done.returncode == 1
    assert done.stderr == f'error: Database "nope" not found in namespace "{namespace}"\n'
    assert cluster.list_backups(namespace) == []


# --- status ---------------------------------------------------------------------------------------


@pytest.fixture
def reported(cluster: Cluster, namespace: str) -> str:
    """A Database "orders" with the status the operator writes, two backups of its own and one
    of another Database."""
    cluster.create_db(namespace, "orders", {"version": "16"})
    write_db_status(
        cluster,
        namespace,
        "orders",
        {
            "phase": "Active",
            "version": "16",
            "replicas": 1,
            "readyReplicas": 1,
            "endpoint": f"orders.{namespace}.svc:5432",
            "conditions": [
                condition("Ready", "True", "AllReplicasReady", "1 of 1 pods ready"),
                condition(
                    "BackupHealthy", "False", "LastBackupFailed", "orders-20250103-020000 failed"
                ),
            ],
            "lastSuccessfulBackup": {"name": "orders-20250102-020000", "time": T0},
            "lastFailedBackup": {"name": "orders-20250103-020000", "time": "2025-01-03T02:00:00Z"},
        },
    )
    for name, database in (
        ("orders-20250102-020000", "orders"),
        ("orders-20250103-020000", "orders"),
        ("other-20250103-020000", "other"),
    ):
        cluster.create_backup(namespace, name, {"database": database})
    write_backup_status(cluster, namespace, "orders-20250102-020000", **completed())
    write_backup_status(
        cluster, namespace, "orders-20250103-020000", phase="Failed", message="disk full"
    )
    return "orders"


def test_status_shows_conditions_and_backups_newest_first(
    namespace: str, reported: str, plugin: Run
) -> None:
    done = plugin("status", reported, "-n", namespace)
    assert done.returncode == 0, done.stderr
    lines = [line.split() for line in done.stdout.splitlines()]
    assert ["Engine:", "postgres", "16"] in lines
    assert ["Phase:", "Active"] in lines
    assert ["Ready", "replicas:", "1/1"] in lines
    assert ["Endpoint:", f"orders.{namespace}.svc:5432"] in lines
    assert ["Ready", "True", "AllReplicasReady", "1", "of", "1", "pods", "ready"] in lines
    assert "BackupHealthy:    False (LastBackupFailed) orders-20250103-020000 failed" in done.stdout
    assert "Last successful:  orders-20250102-020000 at 2025-01-02T02:00:00Z" in done.stdout
    assert "Last failed:      orders-20250103-020000 at 2025-01-03T02:00:00Z" in done.stdout
    table = lines[lines.index(["NAME", "PHASE", "COMPLETED", "SIZE", "LOCATION"]) :]
    assert table[1:] == [
        ["orders-20250103-020000", "Failed", "-", "-", "disk", "full"],
        ["orders-20250102-020000", "Completed", T0, "12.3", "MiB", "backups/shop/orders.dump"],
    ]


def test_status_json_carries_the_same_data(namespace: str, reported: str, plugin: Run) -> None:
    done = plugin("status", reported, "-n", namespace, "-o", "json")
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    assert summary["backupHealthy"]["reason"] == "LastBackupFailed"
    assert summary["lastSuccessfulBackup"] == {"name": "orders-20250102-020000", "time": T0}
    assert [(b["name"], b["phase"], b["size"]) for b in summary["backups"]] == [
        ("orders-20250103-020000", "Failed", None),
        ("orders-20250102-020000", "Completed", SIZE),
    ]


def test_status_of_a_missing_database_is_one_clear_error(namespace: str, plugin: Run) -> None:
    done = plugin("status", "nope", "-n", namespace)
    assert (done.returncode, done.stdout) == (1, "")
    assert done.stderr == f'error: Database "nope" not found in namespace "{namespace}"\n'


def test_status_without_permission_says_forbidden(
    cluster: Cluster, namespace: str, plugin: Run
) -> None:
    cluster.create_db(namespace, "orders", {})
    done = plugin(
        "status", "orders", "-n", namespace, kubeconfig=cluster.plane.kubeconfig_for("nobody")
    )
    assert done.returncode == 1
    assert done.stderr.startswith("error: databases.databases.example.com ")
    assert 'is forbidden: User "nobody" cannot get resource "databases"' in done.stderr
    assert len(done.stderr.splitlines()) == 1


def test_an_unreachable_api_server_is_one_clear_error(
    cluster: Cluster, plugin: Run, tmp_path: Path
) -> None:
    server = f"https://127.0.0.1:{free_port()}"
    kubeconfig = edited_kubeconfig(
        cluster,
        tmp_path / "config",
        lambda config: config["clusters"][0]["cluster"].update(server=server),
    )
    done = plugin("status", "orders", kubeconfig=kubeconfig)
    assert done.returncode == 1
    assert done.stderr == f"error: cannot reach the API server at {server}: Connection refused\n"


# --- the namespace and the context ----------------------------------------------------------------


def edited_kubeconfig(cluster: Cluster, path: Path, edit: Callable[[dict[str, Any]], Any]) -> Path:
    """A copy of the cluster's kubeconfig at ``path``, changed by ``edit``."""
    kubeconfig = yaml.safe_load(cluster.kubeconfig.read_text())
    edit(kubeconfig)
    path.write_text(yaml.safe_dump(kubeconfig))
    return path


def test_the_namespace_defaults_to_the_contexts(
    cluster: Cluster, namespace: str, plugin: Run, tmp_path: Path
) -> None:
    cluster.create_db(namespace, "orders", {})
    kubeconfig = edited_kubeconfig(
        cluster,
        tmp_path / "config",
        lambda config: config["contexts"][0]["context"].update(namespace=namespace),
    )
    done = plugin("status", "orders", kubeconfig=kubeconfig)
    assert done.returncode == 0, done.stderr
    assert f"Database:         {namespace}/orders" in done.stdout


def test_context_picks_the_context_and_its_namespace(
    cluster: Cluster, namespace: str, plugin: Run, tmp_path: Path
) -> None:
    cluster.create_db(namespace, "orders", {})

    def add_context(config: dict[str, Any]) -> None:
        current = config["contexts"][0]["context"]  # namespace "default"
        config["contexts"].append({"name": "shop", "context": {**current, "namespace": namespace}})

    kubeconfig = edited_kubeconfig(cluster, tmp_path / "config", add_context)
    assert plugin("status", "orders", kubeconfig=kubeconfig).returncode == 1
    done = plugin("--context", "shop", "status", "orders", kubeconfig=kubeconfig)
    assert done.returncode == 0, done.stderr
    assert f"Database:         {namespace}/orders" in done.stdout


# --- restore --------------------------------------------------------------------------------------


def test_restore_prints_a_database_from_the_backup(
    cluster: Cluster, namespace: str, plugin: Run
) -> None:
    cluster.create_db(namespace, "orders", {"storage": {"size": "2Gi"}})
    cluster.create_backup(namespace, "orders-20250102-020000", {"database": "orders"})
    write_backup_status(cluster, namespace, "orders-20250102-020000", **completed())
    done = plugin("restore", "copy", "--from", "orders-20250102-020000", "-n", namespace)
    assert done.returncode == 0, done.stderr
    assert yaml.safe_load(done.stdout) == {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "Database",
        "metadata": {"name": "copy", "namespace": namespace},
        "spec": {
            "engine": "postgres",
            "version": "16",
            "storage": {"size": "2Gi"},  # the size of the Database backed up
            "restore": {"backup": "orders-20250102-020000"},
        },
    }
    assert cluster.db_gone(namespace, "copy")


def test_restore_apply_creates_the_database(cluster: Cluster, namespace: str, plugin: Run) -> None:
    cluster.create_backup(namespace, "retired-20250102-020000", {"database": "retired"})
    write_backup_status(cluster, namespace, "retired-20250102-020000", **completed())
    args = ("restore", "copy", "--from", "retired-20250102-020000", "-n", namespace)
    refused = plugin(*args)
    assert (
        refused.stderr == "error: give --storage SIZE: Database retired is gone, or has no volume\n"
    )
    done = plugin(*args, "--storage", "5Gi", "--apply")
    assert done.returncode == 0, done.stderr
    assert done.stdout == f"database.{GROUP}/copy created\n"
    spec = cluster.get_db(namespace, "copy")["spec"]
    assert (spec["storage"], spec["restore"]) == (
        {"size": "5Gi"},
        {"backup": "retired-20250102-020000"},
    )


# --- kubectl --------------------------------------------------------------------------------------


def test_kubectl_finds_the_plugin_on_path(cluster: Cluster, namespace: str) -> None:
    cluster.create_db(namespace, "orders", {})
    done = subprocess.run(
        [str(kubectl_path()), "database", "backup", "orders", "-n", namespace],
        env={
            **os.environ,
            "KUBECONFIG": str(cluster.kubeconfig),
            "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}",
        },
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == the_only_backup(cluster, namespace)["metadata"]["name"] + "\n"
    listed = subprocess.run(
        [str(kubectl_path()), "plugin", "list"],
        env={**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert str(PLUGIN) in listed.stdout
