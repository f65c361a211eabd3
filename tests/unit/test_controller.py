"""The branches of the controller and the reconcile, in milliseconds, on an in-memory Kube
(tests/fakekube.py). The same behaviours are proven against the real API server in
tests/integration; these pin each branch down on its own."""

from __future__ import annotations

import asyncio
import itertools
from typing import Any

import pytest

from database_operator.controller import (
    ERRORS_BEFORE_DEGRADED,
    RETRY_BASE_S,
    STALE_RETRIES,
    Controller,
)
from database_operator.finalizers import FINALIZER
from database_operator.kube.errors import NotLeadingError, StaleReadError
from database_operator.manifest import Key, Manifest
from tests.aio import synchronously
from tests.fakekube import FakeKube
from tests.unit.controllers import NS, database, make, process_all, stored


def delete(kube: FakeKube, **spec: Any) -> Manifest:
    """What `kubectl delete` does to a Database with finalizers (after a last spec change)."""
    body = dict(stored(kube, "Database") or {})
    body["spec"] = {**body["spec"], **spec}
    body["metadata"] = {
        **body["metadata"],
        "deletionTimestamp": "2026-12-03T00:00:00Z",
        "resourceVersion": str(next(kube._versions)),  # every change is a new version
    }
    kube.objects[("Database", NS, "db")] = body
    return body


@synchronously
async def test_a_create_and_its_childrens_events_are_one_reconcile() -> None:
    kube = FakeKube()
    controller = make(kube)
    body = database(kube)
    controller.observe("ADDED", body)
    controller.wake((NS, "db"), "Deployment")
    controller.wake((NS, "db"), "Service")
    assert await process_all(controller) == 1
    assert stored(kube, "Deployment") is not None
    assert FINALIZER in (stored(kube, "Database") or {})["metadata"]["finalizers"]


@synchronously
async def test_a_childs_event_for_an_unknown_database_waits_for_the_database() -> None:
    controller = make(FakeKube())
    controller.wake((NS, "db"), "Deployment")
    assert await process_all(controller) == 0


@synchronously
async def test_a_failing_reconcile_is_retried_with_a_growing_delay_and_then_degrades(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    kube = FakeKube()
    controller = make(kube)
    # A user's Secret carries no label of ours: every reconcile reads it from the API server.
    kube.put(
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": "mine", "namespace": NS},
            "data": {"password": "c2VjcmV0"},
        }
    )
    controller.observe(
        "ADDED", database(kube, engine="redis", credentialsSecretRef={"name": "mine"})
    )
    await process_all(controller)
    delays: list[float] = []  # each retry's delay, as the controller asks the queue for it
    schedule = controller.queue.schedule

    def recorded(key: Key, delay: float, trigger: str) -> None:
        if trigger == "retry":
            delays.append(delay)
        schedule(key, delay, trigger)

    monkeypatch.setattr(controller.queue, "schedule", recorded)
    cap = controller.settings.retry_max_delay
    failing = ERRORS_BEFORE_DEGRADED + 4  # enough to reach the cap (8 s from 0.5 s) and stay
    kube.fail("GET", "Secret", 503, times=failing)
    for _ in range(failing):
        await controller.process((NS, "db"), "retry")
    assert len(delays) == failing
    assert delays[0] == RETRY_BASE_S
    assert cap in delays
    capped = delays.index(cap)
    assert all(shorter < longer for shorter, longer in itertools.pairwise(delays[: capped + 1]))
    assert delays[capped:] == [cap] * (failing - capped)
    assert controller.queue.failures((NS, "db")) == failing
    degraded = next(
        c
        for c in (stored(kube, "Database") or {})["status"]["conditions"]
        if c["type"] == "Degraded"
    )
    assert (degraded["status"], degraded["reason"]) == ("True", "ReconcileError")
    # And it heals: the next attempt succeeds, the count resets, a resync is scheduled.
    await controller.process((NS, "db"), "retry")
    assert controller.queue.failures((NS, "db")) == 0
    assert controller.queue._slots[(NS, "db")].trigger == "resync"


@synchronously
async def test_a_foreign_namesake_stops_every_write_but_the_status() -> None:
    kube = FakeKube()
    posted: list[tuple[str, str, str]] = []
    controller = make(kube, posted)
    kube.put({"kind": "Service", "metadata": {"name": "db", "namespace": NS}, "spec": {}})
    body = database(kube)
    kube.writes.clear()
    controller.observe("ADDED", body)
    await process_all(controller)
    assert sorted(kind for _, kind, _ in kube.writes) == ["Database", "Database/status"]
    status = (stored(kube, "Database") or {})["status"]
    assert status["phase"] == "Failed"
    assert [e[1] for e in posted if e[0] == "Warning"] == ["ChildNameConflict"]
    assert stored(kube, "Deployment") is None
    assert stored(kube, "Secret", "db-credentials") is None


@synchronously
async def test_a_cached_database_that_is_gone_gets_no_children() -> None:
    kube = FakeKube()
    controller = make(kube)
    body = database(kube)
    body["metadata"]["finalizers"] = [FINALIZER]  # an old copy: no finalizer patch to prove it
    del kube.objects[("Database", NS, "db")]  # deleted, and the DELETED event was missed
    controller.observe("MODIFIED", body)
    await process_all(controller)
    assert kube.written() == []
    assert (NS, "db") not in controller.databases


@synchronously
async def test_deletion_finishes_though_the_finalizer_removal_fails_at_first() -> None:
    kube = FakeKube()
    controller = make(kube)
    controller.observe("ADDED", database(kube, deletionPolicy="Delete", storage={"size": "1Gi"}))
    await process_all(controller)
    assert stored(kube, "PersistentVolumeClaim", "db-data") is not None
    deleting = delete(kube)
    kube.fail("PATCH", "Database", 500)  # the finalizer removal, once
    controller.observe("MODIFIED", deleting)
    await process_all(controller)
    assert stored(kube, "Database") is not None
    assert controller.queue._slots[(NS, "db")].trigger == "retry"
    await controller.process((NS, "db"), "retry")
    assert stored(kube, "Database") is None
    assert stored(kube, "PersistentVolumeClaim", "db-data") is None
    assert stored(kube, "Secret", "db-credentials") is None


@synchronously
async def test_a_finalized_database_woken_again_before_its_deleted_event_is_left_alone() -> None:
    # The controller learns from its own finalizer removal that the Database is done with: a
    # child's event between that and the DELETED event asks the API server nothing.
    kube = FakeKube()
    posted: list[tuple[str, str, str]] = []
    controller = make(kube, posted)
    controller.observe("ADDED", database(kube, deletionPolicy="Delete"))
    await process_all(controller)
    deployment = stored(kube, "Deployment")
    assert deployment is not None
    controller.child_event("ADDED", deployment)
    controller.observe("MODIFIED", delete(kube))
    await process_all(controller)
    assert stored(kube, "Database") is None
    seen = len(posted), len(kube.calls)
    # The garbage collector takes the Deployment (the object is gone from the fake already).
    going = {**deployment, "metadata": {**deployment["metadata"], "resourceVersion": "999"}}
    going["metadata"]["deletionTimestamp"] = "2026-12-03T00:00:01Z"
    controller.child_event("MODIFIED", going)
    await process_all(controller)
    assert (len(posted), len(kube.calls)) == seen, kube.calls[seen[1] :]


@synchronously
async def test_retain_releases_the_data_even_if_switched_just_before_the_delete() -> None:
    kube = FakeKube()
    controller = make(kube)
    controller.observe("ADDED", database(kube, deletionPolicy="Delete", storage={"size": "1Gi"}))
    await process_all(controller)
    assert (stored(kube, "PersistentVolumeClaim", "db-data") or {})["metadata"]["ownerReferences"]
    switched = delete(kube, deletionPolicy="Retain")
    controller.observe("MODIFIED", switched)
    await process_all(controller)
    assert stored(kube, "Database") is None
    for kind, name in (("PersistentVolumeClaim", "db-data"), ("Secret", "db-credentials")):
        kept = stored(kube, kind, name)
        assert kept is not None
        assert not kept["metadata"]["ownerReferences"], f"the collector would take the {kind}"


@synchronously
async def test_a_paused_operator_reconciles_nothing_until_it_resumes() -> None:
    kube = FakeKube()
    controller = make(kube)
    controller.active.clear()
    controller.observe("ADDED", database(kube))
    workers = asyncio.create_task(controller.run(2))
    await asyncio.sleep(0.05)
    assert stored(kube, "Deployment") is None
    # What the smoke test and the dashboards read to tell the standby from the active replica.
    sample = controller.metrics.registry.get_sample_value
    assert sample("database_operator_active") == 0
    controller.active.set()
    assert sample("database_operator_active") == 1
    for _ in range(100):
        await asyncio.sleep(0.01)
        if stored(kube, "Deployment") is not None:
            break
    workers.cancel()
    assert stored(kube, "Deployment") is not None


@synchronously
async def test_an_older_watch_event_never_replaces_what_our_write_returned() -> None:
    kube = FakeKube()
    controller = make(kube)
    body = database(kube)
    controller.observe("ADDED", body)
    await process_all(controller)
    newest = controller.databases[(NS, "db")]
    controller.observe("MODIFIED", body)  # the event of an older version, arriving late
    assert controller.databases[(NS, "db")] is newest


def error_count(controller: Controller) -> float:
    return float(controller.metrics.reconciles.labels("error")._value.get())


@synchronously
async def test_a_stale_read_is_read_afresh_and_retried_at_once_not_counted_as_an_error() -> None:
    """A write refused because the object changed since it was read (a 409, or a guarded
    patch's failed test: StaleReadError): what a new leader meets first after a failover."""
    kube = FakeKube()
    controller = make(kube)
    controller.observe("ADDED", database(kube))
    kube.fail("PATCH", "Database", 409)  # the finalizer's guarded patch: a conflict
    failed_test = StaleReadError(422, "Invalid", "test failed", "PATCH", "/apis/x/databases/db")
    kube.failures.append(("PATCH", "Database", failed_test))  # then its test fails
    await process_all(controller)
    assert error_count(controller) == 0
    assert FINALIZER in (stored(kube, "Database") or {})["metadata"]["finalizers"]
    assert controller.queue.failures((NS, "db")) == 0


@synchronously
async def test_stale_reads_that_keep_coming_count_as_a_failure() -> None:
    kube = FakeKube()
    controller = make(kube)
    controller.observe("ADDED", database(kube))
    kube.fail("PATCH", "Database", 409, times=STALE_RETRIES + 1)
    await process_all(controller)
    assert error_count(controller) == 1
    assert controller.queue._slots[(NS, "db")].trigger == "retry"


@synchronously
async def test_a_replica_that_stops_leading_mid_reconcile_leaves_the_database_queued() -> None:
    kube = FakeKube()
    controller = make(kube)
    controller.observe("ADDED", database(kube))
    kube.failures.append(("PATCH", "Database", NotLeadingError("PATCH", "Database")))
    controller.lead(False)
    item = await controller.queue.get()
    assert item is not None
    await controller.process(*item)
    controller.queue.done(item[0])
    assert error_count(controller) == 0
    assert len(controller.queue) == 1  # waiting for whoever leads
    controller.lead(True)
    await process_all(controller)
    assert FINALIZER in (stored(kube, "Database") or {})["metadata"]["finalizers"]


class ClampingKube(FakeKube):
    """An API server that keeps a Deployment's cpu request at 7m whatever is written (as a
    mutating webhook might)."""

    def _written(
        self, verb: str, kind: str, name: str, obj: Manifest, what: str | None = None
    ) -> Manifest:
        if kind == "Deployment":
            for container in obj["spec"]["template"]["spec"]["containers"]:
                container.setdefault("resources", {}).setdefault("requests", {})["cpu"] = "7m"
        return super()._written(verb, kind, name, obj, what)


@synchronously
async def test_a_child_the_server_keeps_different_fails_the_database_naming_the_field() -> None:
    kube = ClampingKube()
    posted: list[tuple[str, str, str]] = []
    controller = make(kube, posted)
    controller.observe("ADDED", database(kube, resources={"requests": {"cpu": "250m"}}))
    await process_all(controller)
    status = (stored(kube, "Database") or {})["status"]
    ready = next(c for c in status["conditions"] if c["type"] == "Ready")
    assert (status["phase"], ready["reason"]) == ("Failed", "ChildNotConverged")
    assert "spec.template.spec.containers[0].resources.requests.cpu at '7m'" in ready["message"]
    assert "'250m'" in ready["message"]
    assert [e[1] for e in posted if e[0] == "Warning"] == ["ChildNotConverged"]
    assert controller.queue.failures((NS, "db")) == 0  # a status, not an endless retry


@synchronously
async def test_a_database_refused_for_its_spec_waits_for_a_change_not_a_resync() -> None:
    kube = FakeKube()
    posted: list[tuple[str, str, str]] = []
    controller = make(kube, posted)
    kube.fail("APPLY", "Deployment", 422)
    controller.observe("ADDED", database(kube))
    await process_all(controller)
    assert (stored(kube, "Database") or {})["status"]["phase"] == "Failed"
    assert (NS, "db") not in controller.queue._slots  # no resync re-applies it
    assert [e[1] for e in posted if e[0] == "Warning"] == ["DeploymentRejected"]
    # The user changes the spec: tried again at once, and resynced again once it is fine.
    body = dict(stored(kube, "Database") or {})
    body["spec"] = {**body["spec"], "replicas": 2}
    body["metadata"] = {**body["metadata"], "generation": 2}
    controller.observe("MODIFIED", kube.put(body))
    await process_all(controller)
    assert (stored(kube, "Database") or {})["status"]["phase"] != "Failed"
    assert controller.queue._slots[(NS, "db")].trigger == "resync"


def failures(controller: Controller, reason: str) -> float | None:
    return controller.metrics.registry.get_sample_value(
        "database_operator_reconcile_failures_total", {"reason": reason}
    )


@synchronously
async def test_reconciles_that_fail_are_counted_by_reason_and_waits_by_the_queue() -> None:
    kube = FakeKube()
    controller = make(kube)
    kube.put({"kind": "Service", "metadata": {"name": "db", "namespace": NS}, "spec": {}})
    controller.observe("ADDED", database(kube))
    await process_all(controller)
    assert failures(controller, "ChildNameConflict") == 1
    kube.fail("GET", "Secret", 503, times=2)
    await controller.process((NS, "db"), "retry")
    await controller.process((NS, "db"), "retry")
    assert failures(controller, "ApiError") == 2
    assert failures(controller, "ChildNameConflict") == 1  # the errors wrote no status
    registry = controller.metrics.registry
    assert registry.get_sample_value("database_operator_workqueue_wait_seconds_count") == 1
    assert (
        registry.get_sample_value(
            "database_operator_databases", {"namespace": NS, "phase": "Failed"}
        )
        == 1
    )
    controller.queue.add((NS, "db"), "update")
    assert registry.get_sample_value("database_operator_workqueue_depth") == 1
