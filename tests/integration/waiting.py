"""What integration tests wait for in a Database's status, and read of its events: `wait_for_status`
polls the Database until a check of it passes (`observed`: its generation reconciled;
`phase_is`, `ready_is`: its phase, its Ready condition); `events_for` lists its Events."""

from __future__ import annotations

from typing import Any

from tests.cluster import Cluster, condition, wait_for


def wait_for_status(  # noqa: PLR0917 - reads as a sentence at the call sites
    cluster: Cluster, namespace: str, name: str, what: str, check: Any, timeout: float = 20
) -> dict[str, Any]:
    def probe() -> dict[str, Any] | None:
        db = cluster.get_db(namespace, name)
        return db if check(db) else None

    return wait_for(probe, timeout=timeout, what=what)


def phase_is(phase: str) -> Any:
    return lambda db: db.get("status", {}).get("phase") == phase


def ready_is(status: str) -> Any:
    return lambda db: (condition(db, "Ready") or {}).get("status") == status


def observed(db: dict[str, Any]) -> bool:
    return bool(db.get("status", {}).get("observedGeneration") == db["metadata"]["generation"])


def events_for(cluster: Cluster, namespace: str, name: str) -> list[Any]:
    return [
        event
        for event in cluster.core.list_namespaced_event(namespace).items
        if event.involved_object.name == name and event.involved_object.kind == "Database"
    ]
