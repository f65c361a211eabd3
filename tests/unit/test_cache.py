"""The caches the reconcile reads instead of the API server, and how they stay true: our own
writes' echoes cost nothing, a burst is one reconcile, what a lost watch event left wrong is
corrected by the audit, and a restart resumes from a fresh listing with no write."""

from __future__ import annotations

from typing import Any

from database_operator.cache import ObjectCache, newer, stripped
from database_operator.controller import Controller
from database_operator.desired import MANAGED_BY
from database_operator.namesakes import Namesakes
from database_operator.ownership import CREATED_FOR, MANAGED_BY_LABEL
from database_operator.runner.build import backups_beside
from tests.aio import synchronously
from tests.fakekube import FakeKube
from tests.unit.controllers import NS, database, make, process_all, stored


def obj(kind: str, name: str, rv: str, uid: str = "u1", **meta: Any) -> dict[str, Any]:
    return {
        "kind": kind,
        "metadata": {"name": name, "namespace": NS, "uid": uid, "resourceVersion": rv, **meta},
    }


def test_the_cache_keeps_the_newest_version_without_managed_fields() -> None:
    cache = ObjectCache(["Service"])
    assert cache.put(obj("Service", "db", "5", managedFields=[{"manager": "x"}]))
    assert not cache.put(obj("Service", "db", "4"))  # an older event arriving late
    assert not cache.put(obj("Service", "db", "5"))  # the echo of what we hold
    held = cache.get("Service", NS, "db")
    assert held is not None
    assert "managedFields" not in held["metadata"]
    assert cache.put(obj("Service", "db", "3", uid="u2"))  # a new object under the same name
    assert not cache.discard(obj("Service", "db", "9", uid="u1"))  # not the one held
    assert cache.discard(obj("Service", "db", "9", uid="u2"))
    assert cache.get("Service", NS, "db") is None


def test_a_child_is_filed_under_the_database_that_owns_it() -> None:
    cache = ObjectCache(["Service"])
    ref = {
        "kind": "Database",
        "apiVersion": "databases.example.com/v1",
        "name": "db",
        "controller": True,
        "uid": "d1",
    }
    cache.put(obj("Service", "db", "5", ownerReferences=[ref]))
    assert cache.versions_of((NS, "db")) == {(("Service", NS, "db"), "5")}
    cache.put(obj("Service", "db", "6", ownerReferences=[ref]))
    assert cache.versions_of((NS, "db")) == {(("Service", NS, "db"), "6")}
    cache.discard(obj("Service", "db", "6"))
    assert cache.versions_of((NS, "db")) == frozenset()


def test_resource_versions_are_compared_as_numbers() -> None:
    assert newer(obj("Service", "db", "10"), obj("Service", "db", "9"))
    assert not newer(obj("Service", "db", "9"), obj("Service", "db", "10"))
    assert stripped({"metadata": {"managedFields": []}, "spec": {}}) == {"metadata": {}, "spec": {}}


async def created(namespaces: list[str] | None = None, **spec: Any) -> tuple[FakeKube, Controller]:
    """A Database created and reconciled once (watching ``namespaces``; default: all)."""
    kube = FakeKube()
    controller = make(kube, namespaces=namespaces)
    controller.observe("ADDED", database(kube, **spec))
    assert await process_all(controller) == 1
    return kube, controller


@synchronously
async def test_the_echo_of_our_own_writes_costs_no_second_reconcile() -> None:
    kube, controller = await created()
    # The watch events of everything the reconcile wrote, carrying the versions it got back.
    controller.observe("MODIFIED", stored(kube, "Database") or {})
    for kind in ("Deployment", "Service"):
        controller.child_event("MODIFIED", stored(kube, kind) or {})
    assert await process_all(controller) == 0


@synchronously
async def test_an_echo_that_arrives_during_the_reconcile_is_skipped_after_it() -> None:
    kube, controller = await created()
    writes, reads = len(kube.writes), len(kube.reads)
    # The queue ran the Database again because an event came in while it was being reconciled;
    # the event was our own status write: nothing changed since.
    assert await controller.process((NS, "db"), "update") is None
    assert (len(kube.writes), len(kube.reads)) == (writes, reads)
    # A change by someone else is not an echo.
    body = dict(stored(kube, "Database") or {})
    body["spec"] = {"paused": True}
    controller.observe("MODIFIED", kube.put(body))
    assert await process_all(controller) == 1


@synchronously
async def test_a_steady_resync_reads_nothing() -> None:
    kube, controller = await created(storage={"size": "1Gi"})
    writes, reads = len(kube.writes), len(kube.reads)
    await controller.process((NS, "db"), "resync")
    assert len(kube.writes) == writes
    assert kube.reads[reads:] == []  # the Secrets it generated came with the listing too


def skipped(controller: Controller) -> float:
    return (
        controller.metrics.registry.get_sample_value("database_operator_resyncs_skipped_total")
        or 0.0
    )


@synchronously
async def test_a_resync_is_skipped_while_the_last_reconcile_is_a_fixed_point() -> None:
    """A reconcile that wrote nothing and read only the caches would do the same nothing again
    on the same versions: the next resync is skipped, and comes back after a change."""
    kube, controller = await created(storage={"size": "1Gi"})
    await controller.process((NS, "db"), "resync")  # wrote nothing: a fixed point
    assert (NS, "db") in controller.fixed
    writes, reads = len(kube.writes), len(kube.reads)
    assert await controller.process((NS, "db"), "resync") is None
    assert skipped(controller) == 1
    assert (len(kube.writes), len(kube.reads)) == (writes, reads)
    assert controller.queue._slots[(NS, "db")].trigger == "resync"  # the next one is due
    # An event that changes nothing it reads (the echo of our write) skips as before; a
    # child's new version makes the resync a reconcile again.
    edited = dict(stored(kube, "Service") or {})
    edited["spec"] = {**edited["spec"], "ports": [{"name": "x", "port": 1}]}
    controller.child_event("MODIFIED", kube.put(edited))
    assert await controller.process((NS, "db"), "resync") is not None
    assert [port["name"] for port in (stored(kube, "Service") or {})["spec"]["ports"]] != ["x"]
    assert skipped(controller) == 1


@synchronously
async def test_a_resync_is_never_skipped_for_what_the_caches_cannot_tell() -> None:
    """A user's credentials Secret is read from the API server (no watch tells of its
    change), and a backup schedule needs the clock: their resyncs always reconcile."""
    kube = FakeKube()
    kube.put(
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": "mine", "namespace": NS},
            "data": {"password": "c2VjcmV0"},
        }
    )
    controller = make(kube)
    controller.observe(
        "ADDED", database(kube, engine="redis", credentialsSecretRef={"name": "mine"})
    )
    await process_all(controller)
    for _ in range(3):
        assert await controller.process((NS, "db"), "resync") is not None
    assert (NS, "db") not in controller.fixed
    assert skipped(controller) == 0


#: Namespaces by pattern: only Kopf's scanning finds them, and Kopf's watches (which can lose
#: a deletion on a re-list) deliver the children; the audit lists them.
GLOBS = ["sh*"]


@synchronously
async def test_the_audit_lists_no_kind_the_controllers_own_watches_follow() -> None:
    kube, controller = await created()
    backups = backups_beside(controller)
    reads = len(kube.reads)
    await controller.audit()
    await backups.audit()  # the DatabaseBackups' controller audits its own kind
    assert {kind for _, kind, _ in kube.reads[reads:]} == {"Database", "DatabaseBackup"}
    kube, controller = await created(GLOBS)
    reads = len(kube.reads)
    await controller.audit()
    assert {kind for _, kind, _ in kube.reads[reads:]} >= {"Deployment", "Service", "Secret"}


@synchronously
async def test_a_child_the_watch_never_delivered_is_found_by_the_audit() -> None:
    kube, controller = await created(GLOBS)
    missed = controller.children.get("Service", NS, "db")
    assert missed is not None
    controller.children.discard(missed)  # as if its ADDED event had been lost
    await controller.audit()
    assert await process_all(controller) == 1
    assert controller.children.get("Service", NS, "db") is not None
    assert ("POST", "Service", "db") not in kube.writes[-3:]  # read, not created again


@synchronously
async def test_a_child_deleted_while_the_watch_was_away_is_recreated_after_the_audit() -> None:
    kube, controller = await created(GLOBS)
    gone = kube.objects.pop(("Service", NS, "db"))  # deleted; the DELETED event was lost
    await controller.audit()
    assert controller.children.get("Service", NS, "db") is None
    await process_all(controller)
    recreated = stored(kube, "Service")
    assert recreated is not None
    assert recreated["metadata"]["resourceVersion"] != gone["metadata"]["resourceVersion"]


@synchronously
async def test_a_changed_child_whose_event_was_lost_is_read_afresh_after_the_audit() -> None:
    kube, controller = await created(GLOBS)
    edited = dict(stored(kube, "Service") or {})
    edited["spec"] = {**edited["spec"], "ports": [{"name": "x", "port": 1}]}
    kube.put(edited)  # someone's edit, its event lost
    await controller.audit()
    await process_all(controller)
    ports = (stored(kube, "Service") or {})["spec"]["ports"]
    assert [port["name"] for port in ports] != ["x"]  # put back


@synchronously
async def test_a_database_deleted_while_the_watch_was_away_is_forgotten_by_the_audit() -> None:
    kube, controller = await created()
    del kube.objects[("Database", NS, "db")]
    await controller.audit()
    assert (NS, "db") not in controller.databases


@synchronously
async def test_a_relisting_forgets_the_children_deleted_while_the_watch_was_away() -> None:
    """A watch too old to resume lists afresh (watches.py): what the cache holds and the
    listing lacks was deleted meanwhile (no event tells), unless written after the listing."""
    kube, controller = await created()
    assert controller.watches is not None
    by_kind = {watch.kind: watch for watch in controller.watches}
    del kube.objects[("Service", NS, "db")]
    listed, at = await kube.list_objects("Service", None)
    controller._relisted(by_kind["Service"])(listed, at)
    assert controller.children.get("Service", NS, "db") is None
    deployment = stored(kube, "Deployment") or {}
    controller._relisted(by_kind["Deployment"])([], "1")  # older than the Deployment held
    assert controller.children.get("Deployment", NS, "db") == stripped(deployment)
    assert await process_all(controller) == 1  # woken by the Service's loss: made again
    assert stored(kube, "Service") is not None


@synchronously
async def test_a_restart_resumes_from_a_fresh_list_with_no_write() -> None:
    kube, _ = await created(storage={"size": "1Gi"})
    writes = len(kube.writes)
    # A new process: each child watch's first listing fills its cache, then Kopf hands over
    # every Database (event type None).
    second = make(kube)
    await second.prime()
    # The Deployment, the Service, the claim, the credentials and connection Secrets.
    assert len(second.children) == 5
    second.observe(None, stored(kube, "Database") or {})
    reads = len(kube.reads)
    assert await process_all(second) == 1
    assert len(kube.writes) == writes
    assert kube.reads[reads:] == []  # the Secrets it generated came with the listing too


@synchronously
async def test_a_create_reads_only_the_children_it_applies() -> None:
    """The generated credentials Secret is created without a read (the create finds a
    namesake); each applied child the cache lacks is read once, since an apply would merge
    into a namesake without our label."""
    kube, _ = await created(storage={"size": "1Gi"})
    read = sorted((kind, name) for _, kind, name in kube.reads if kind != "Database")
    assert read == [
        ("Deployment", "db"),
        ("PersistentVolumeClaim", "db-data"),
        ("Secret", "db-connection"),
        ("Service", "db"),
    ]


def following(controller: Controller, *namesakes: dict[str, Any]) -> None:
    """The namesakes' watches have listed and follow, and hold ``namesakes``."""
    assert controller.namesakes is not None
    for held in controller.namesakes.watches:
        held.watch.following = True
        for namesake in namesakes:
            if held.watch.covers(namesake["kind"], NS):
                held.hear("ADDED", namesake)


@synchronously
async def test_a_create_reads_no_child_whose_name_the_namesakes_watches_know_free() -> None:
    kube = FakeKube()
    controller = make(kube)
    following(controller)
    controller.observe("ADDED", database(kube, storage={"size": "1Gi"}))
    assert await process_all(controller) == 1
    read = sorted((kind, name) for _, kind, name in kube.reads if kind != "Database")
    assert read == [("Secret", "db-connection")]  # Secrets have no namesakes' watch
    assert stored(kube, "Deployment") is not None


@synchronously
async def test_a_namesake_the_watches_know_is_read_and_left_alone() -> None:
    kube = FakeKube()
    users = kube.put(
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": "db", "namespace": NS},
            "spec": {"ports": [{"port": 1}]},
        }
    )
    controller = make(kube)
    following(controller, users)
    controller.observe("ADDED", database(kube))
    await process_all(controller)
    assert ("GET", "Service", "db") in kube.reads
    assert ("GET", "Deployment", "db") not in kube.reads
    ready = next(
        c for c in (stored(kube, "Database") or {})["status"]["conditions"] if c["type"] == "Ready"
    )
    assert ready["reason"] == "ChildNameConflict"
    assert stored(kube, "Service") == users  # untouched


def test_a_name_is_free_only_while_every_watch_covering_it_follows() -> None:
    namesakes = Namesakes(["a", "b"], ["x!=y", "x=y,s!=1"])
    assert not namesakes.free("Service", "a", "db")  # not listed yet
    for held in namesakes.watches:
        held.watch.following = held.watch.namespace == "a"
    assert namesakes.free("Service", "a", "db")
    assert not namesakes.free("Service", "b", "db")
    assert not namesakes.free("Secret", "a", "db")  # no watch covers it
    [second] = [
        held
        for held in namesakes.watches
        if held.watch.covers("Service", "a") and "s!=1" in held.watch.selector
    ]
    users = {"kind": "Service", "metadata": {"name": "db", "namespace": "a", "uid": "u1"}}
    second.hear("ADDED", users)
    assert not namesakes.free("Service", "a", "db")
    earlier = {"kind": "Service", "metadata": {"name": "db", "namespace": "a", "uid": "u0"}}
    second.hear("DELETED", earlier)
    assert not namesakes.free("Service", "a", "db")  # another object's delete, late
    second.hear("DELETED", users)
    assert namesakes.free("Service", "a", "db")


@synchronously
async def test_a_namesake_of_the_credentials_secret_is_found_by_the_create() -> None:
    kube = FakeKube()
    kube.put(
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": "db-credentials", "namespace": NS},
        }
    )
    controller = make(kube)
    controller.observe("ADDED", database(kube))
    await process_all(controller)
    ready = next(
        c for c in (stored(kube, "Database") or {})["status"]["conditions"] if c["type"] == "Ready"
    )
    assert ready["reason"] == "ChildNameConflict"
    assert "db-credentials" in ready["message"]
    assert stored(kube, "Deployment") is None  # nothing is written beside a namesake
    assert (stored(kube, "Secret", "db-credentials") or {}).get("data") is None  # untouched


@synchronously
async def test_our_secret_the_watch_does_not_deliver_is_used_and_labelled() -> None:
    """A generated Secret without our label (the watch does not deliver it): the create finds
    it, it is ours by its mark, so it is used as it is, and labelled so the watch has it next."""
    kube = FakeKube()
    kube.put(
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {
                "name": "db-credentials",
                "namespace": NS,
                "annotations": {CREATED_FOR: "db"},
            },
            "data": {"username": "YXBw", "password": "b2xk"},
        }
    )
    controller = make(kube)
    controller.observe("ADDED", database(kube, engine="postgres"))
    await process_all(controller)
    secret = stored(kube, "Secret", "db-credentials") or {}
    assert secret["data"]["password"] == "b2xk"
    assert secret["metadata"]["labels"][MANAGED_BY_LABEL] == MANAGED_BY
