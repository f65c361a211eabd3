"""What the end-to-end tests (test_full_cluster.py, test_backups.py) wait for and check on the
full cluster: `wait_phase`, a Database's phase (read with `db_state`); `gone`, an object the
garbage collector or the operator removed."""

from __future__ import annotations

from typing import Any

from kubernetes import client

from tests.cluster import Cluster, wait_for


def db_state(cluster: Cluster, namespace: str, name: str) -> dict[str, Any]:
    return cluster.get_db(namespace, name)


def wait_phase(
    cluster: Cluster, namespace: str, name: str, phase: str, timeout: float = 60
) -> dict[str, Any]:
    def probe() -> dict[str, Any] | None:
        db = db_state(cluster, namespace, name)
        return db if db.get("status", {}).get("phase") == phase else None

    return wait_for(probe, timeout=timeout, what=f"{name} to be {phase}")


def gone(read: Any, name: str, namespace: str) -> bool:
    try:
        read(name, namespace)
    except client.ApiException as error:
        return bool(error.status == 404)
    return False
