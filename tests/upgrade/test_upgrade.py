"""Upgrading in place from each earlier version worth supporting touches no database: every
Database stays Ready with no ChildNameConflict, no Secret or PVC is replaced, no pod template
changes (so no pod restarts), each child is written at most once, and the new status fields are
filled in. And a downgrade to the previous version deletes nothing.
"""

from __future__ import annotations

from typing import Any

import pytest

from database_operator.api.models import ROLE_LABEL
from database_operator.carryover import UPGRADE_PODS
from tests.cluster import Cluster, condition, wait_for, write_requests
from tests.controlplane import install_crds
from tests.upgrade.conftest import (
    FIGURES,
    RESYNCS,
    Upgrade,
    Upgrades,
    snapshot,
    wait_settled,
    writes_since,
)
from tests.upgrade.versions import EARLIER, FIRST_COMPLETE, PREVIOUS, Version

#: The names of a Database's children: <name>, and <name>-<suffix>.
CHILD_SUFFIXES = ("replicas", "credentials", "connection", "data")
KINDS = {
    "deployments": "Deployment",
    "services": "Service",
    "secrets": "Secret",
    "persistentvolumeclaims": "PersistentVolumeClaim",
}


@pytest.fixture(params=EARLIER, ids=[v.name for v in EARLIER])
def upgrade(request: pytest.FixtureRequest, upgrades: Upgrades) -> Upgrade:
    """The upgrade from each earlier version (done once per version for the module)."""
    version: Version = request.param
    return upgrades.of(version)


def assert_kept(
    key: str, before: dict[str, Any], after: dict[str, Any] | None, when: str
) -> dict[str, Any]:
    """``key`` (a `snapshot` entry) is still there ``when``, not replaced, its data (a Secret's)
    and spec (a PVC's) unchanged: its entry then, for what else a test compares."""
    assert after is not None, f"{key} is gone {when}"
    assert after["uid"] == before["uid"], f"{key} was replaced {when}"
    assert after.get("data") == before.get("data"), f"{key}'s data changed {when}"
    assert after.get("spec") == before.get("spec"), f"{key}'s spec changed {when}"
    return after


def test_every_database_stays_ready_with_no_child_name_conflict(upgrade: Upgrade) -> None:
    for name, db in upgrade.status.items():
        ready = condition(db, "Ready") or {}
        assert ready.get("status") == "True", (name, ready)
        assert db["status"]["phase"] == "Active", (name, db["status"])
        assert ready.get("reason") != "ChildNameConflict"
    assert not [line for line in upgrade.log if "ChildNameConflict" in str(line)]


def test_no_secret_or_claim_is_replaced_or_changed(upgrade: Upgrade) -> None:
    kept = [
        key for key in upgrade.before if key.split("/")[0] in ("Secret", "PersistentVolumeClaim")
    ]
    assert len(kept) >= len(upgrade.databases)
    for key in kept:
        assert_kept(key, upgrade.before[key], upgrade.after.get(key), "after the upgrade")


def test_no_pod_template_changes_and_no_deployment_or_service_is_replaced(upgrade: Upgrade) -> None:
    deployments = [key for key in upgrade.before if key.startswith("Deployment/")]
    assert len(deployments) >= len(upgrade.databases)
    changed = []
    for key in deployments:
        before = upgrade.before[key]
        after = assert_kept(key, before, upgrade.after.get(key), "after the upgrade")
        if after["template"] != before["template"] or after["generation"] != before["generation"]:
            changed.append(key)
        assert after["selector"] == before["selector"], key
        assert after["replicas"] == before["replicas"], key
    for key in [key for key in upgrade.before if key.startswith("Service/")]:
        before = upgrade.before[key]
        after = assert_kept(key, before, upgrade.after.get(key), "after the upgrade")
        assert after["selector"] == before["selector"], key
    FIGURES.append(
        f"from {upgrade.version.name}: {len(deployments)} Deployments, pod templates changed: "
        f"{len(changed)}, generations before -> after: "
        + ", ".join(
            f"{key.split('/')[1]} {upgrade.before[key]['generation']}->"
            f"{upgrade.after[key]['generation']}"
            for key in deployments
        )
    )
    assert changed == []


def test_each_child_is_written_at_most_once(upgrade: Upgrade) -> None:
    count = len(upgrade.databases)
    children = {
        kind: len([key for key in upgrade.after if key.startswith(f"{kind}/")])
        for kind in KINDS.values()
    }
    per_resource: dict[str, int] = {}
    for key, writes in upgrade.writes.items():
        resource = key.split(" ")[1]
        per_resource[resource] = per_resource.get(resource, 0) + writes
    total = sum(writes for resource, writes in per_resource.items() if resource != "events")
    FIGURES.append(
        f"from {upgrade.version.name}: {count} Databases, {sum(children.values())} children; "
        f"writes {dict(sorted(upgrade.writes.items()))}; {total / count:.2f} writes per Database "
        "(Events aside)"
    )
    for resource, kind in KINDS.items():
        assert per_resource.get(resource, 0) <= children[kind], (resource, upgrade.writes)
    assert per_resource.get("databases", 0) == 0, upgrade.writes
    assert per_resource.get("databases/status", 0) <= count, upgrade.writes


def test_each_database_is_written_a_bounded_number_of_times(upgrade: Upgrade) -> None:
    # What each reconcile says it wrote, child by child (the API server counts only totals).
    per_database: dict[str, dict[str, int]] = {name: {} for name in upgrade.databases}
    for line in upgrade.log:
        if line.get("event") != "reconciled" or line.get("name") not in per_database:
            continue
        written = per_database[line["name"]]
        for field in ("children_created", "children_corrected", "children_recreated"):
            for kind in line.get(field) or []:
                written[kind] = written.get(kind, 0) + 1
        for kind in line.get("lists_taken_back") or []:
            written[kind] = written.get(kind, 0) + 1
        if line.get("status_written"):
            written["status"] = written.get("status", 0) + 1
    totals = {name: sum(written.values()) for name, written in per_database.items()}
    FIGURES.append(
        f"from {upgrade.version.name}: writes per Database (children and status) "
        f"{dict(sorted(totals.items()))}; by kind {per_database}"
    )
    for name, written in per_database.items():
        assert not [
            line
            for line in upgrade.log
            if line.get("name") == name and line.get("children_recreated")
        ], name
        names = {name, *(f"{name}-{suffix}" for suffix in CHILD_SUFFIXES)}
        owned = {"status": 1}
        for key in upgrade.after:
            kind, child = key.split("/")
            if child in names:
                owned[kind] = owned.get(kind, 0) + 1
        for kind, times in written.items():
            assert times <= owned[kind], (name, kind, written)


def test_the_status_fields_of_this_version_are_filled_in(upgrade: Upgrade) -> None:
    for name, db in upgrade.status.items():
        status = db["status"]
        assert status["observedGeneration"] == db["metadata"]["generation"]
        assert status["binding"] == {"name": f"{name}-connection"}, name
        assert status["primaryReady"] is True, name
        assert status["endpoint"] == f"{name}.{upgrade.namespace}.svc:" + str(
            {"postgres": 5432, "mysql": 3306, "redis": 6379}[upgrade.databases[name]["engine"]]
        )
        for type_ in ("Ready", "Progressing", "Degraded"):
            found = condition(db, type_)
            assert found is not None, (name, type_)
            assert found["observedGeneration"] == db["metadata"]["generation"]
        if upgrade.databases[name].get("replicas", 1) > 1:
            assert status["readEndpoint"].startswith(f"{name}-replicas."), name
            assert status["readyReadReplicas"] == upgrade.databases[name]["replicas"] - 1


def test_a_downgrade_to_the_previous_version_deletes_nothing(upgrades: Upgrades) -> None:
    upgrade = upgrades.of(PREVIOUS)
    cluster, namespace = upgrades.cluster, upgrade.namespace
    counted = write_requests(cluster)
    install_crds(cluster.kubeconfig, upgrades.source(PREVIOUS) / "config" / "crd" / "bases")
    previous = upgrades.operator(f"downgrade-to-{PREVIOUS.name}.log", namespace, PREVIOUS)
    names = list(upgrade.databases)
    wait_settled(
        cluster,
        namespace,
        names,
        previous,
        f"every Database Ready under {PREVIOUS.name} again, {RESYNCS} resyncs each",
    )
    writes = writes_since(cluster, counted)
    now = snapshot(cluster, namespace)
    assert previous.stop() == 0, previous.log_text()[-3000:]
    FIGURES.append(f"downgrade to {PREVIOUS.name}: writes {dict(sorted(writes.items()))}")
    for key, before in upgrade.before.items():
        after = assert_kept(key, before, now.get(key), "after the downgrade")
        if key.startswith("Deployment/"):
            assert after["template"] == before["template"], key
    assert not [key for key in writes if key.startswith("DELETE")], writes


def role_of(cluster: Cluster, namespace: str, name: str) -> str | None:
    """The role label a Deployment's pods carry (0.1.0's pods carry none)."""
    found = cluster.apps.read_namespaced_deployment(name, namespace)
    labels: dict[str, str] = found.spec.template.metadata.labels or {}
    return labels.get(ROLE_LABEL)


def others_untouched(upgrade: Upgrade, now: dict[str, dict[str, Any]], rolled: set[str]) -> None:
    for key, before in upgrade.before.items():
        if key.startswith("Deployment/") and key.split("/")[1] not in rolled:
            after = assert_kept(key, before, now.get(key), "after another's rollout")
            assert after["template"] == before["template"], key


def test_a_spec_change_of_its_pods_rolls_only_that_database_onto_this_versions_pods(
    upgrades: Upgrades,
) -> None:
    upgrade = upgrades.of(FIRST_COMPLETE)
    cluster, namespace = upgrades.cluster, upgrade.namespace
    current = upgrades.operator("spec-change.log", namespace, None)
    # A change its pods do not read (the PVC's owner) keeps them as they are.
    changed = cluster.patch_db(namespace, "mysql-kept", {"spec": {"deletionPolicy": "Delete"}})
    wait_for(
        lambda: (
            cluster.get_db(namespace, "mysql-kept")["status"]["observedGeneration"]
            == changed["metadata"]["generation"]
        ),
        what="mysql-kept's change reconciled",
    )
    cluster.patch_db(namespace, "pg-scratch", {"spec": {"parameters": {"max_connections": "50"}}})
    wait_for(
        lambda: role_of(cluster, namespace, "pg-scratch") == "primary",
        what="pg-scratch's pods on this version's template",
    )
    others_untouched(upgrade, snapshot(cluster, namespace), {"pg-scratch"})
    after = snapshot(cluster, namespace)["Deployment/mysql-kept"]
    assert after["generation"] == upgrade.before["Deployment/mysql-kept"]["generation"]
    assert current.stop() == 0, current.log_text()[-3000:]


def test_the_upgrade_pods_annotation_rolls_only_that_database_onto_this_versions_pods(
    upgrades: Upgrades,
) -> None:
    upgrade = upgrades.of(FIRST_COMPLETE)
    cluster, namespace = upgrades.cluster, upgrade.namespace
    current = upgrades.operator("upgrade-pods.log", namespace, None)
    assert role_of(cluster, namespace, "redis-scratch") is None
    cluster.patch_db(
        namespace, "redis-scratch", {"metadata": {"annotations": {UPGRADE_PODS: "true"}}}
    )
    wait_for(
        lambda: role_of(cluster, namespace, "redis-scratch") == "primary",
        what="redis-scratch's pods on this version's template",
    )
    service = cluster.core.read_namespaced_service("redis-scratch", namespace)
    assert service.spec.selector[ROLE_LABEL] == "primary"
    others_untouched(upgrade, snapshot(cluster, namespace), {"pg-scratch", "redis-scratch"})
    assert current.stop() == 0, current.log_text()[-3000:]


def to_move(version: Version) -> dict[str, list[str]]:
    """The Databases of ``version``'s mix moved to instances (spec.failover turned on), and
    their instances: its read replicas' where it has them, else a single primary's."""
    if not version.replicas:
        return {"pg-kept": ["pg-kept-1"]}
    return {
        "pg-replicas": ["pg-replicas-1", "pg-replicas-2"],
        "redis-replicas": ["redis-replicas-1", "redis-replicas-2", "redis-replicas-3"],
    }


def moved_layout(
    cluster: Cluster, namespace: str, moving: dict[str, list[str]]
) -> dict[str, dict[str, Any]] | None:
    """The namespace's objects once every moved Database runs its instances: their
    Deployments, and the name holder (no pod) in place of the primary's."""
    now = snapshot(cluster, namespace)
    for name, instances in moving.items():
        if not all(f"Deployment/{instance}" in now for instance in instances):
            return None
        if f"Deployment/{name}-replicas" in now or now[f"Deployment/{name}"]["replicas"] != 0:
            return None
    return now


def test_a_database_moved_to_instances_keeps_its_data_and_the_previous_version_refuses_it(
    upgrades: Upgrades, upgrade: Upgrade
) -> None:
    """spec.failover turned on for Databases an earlier version made (a primary, and read
    replicas where it has them): the first instance runs on the primary's claim, no Secret or
    claim is replaced. Then a rollback to the previous version: it finds the name holder
    foreign and refuses the moved Databases (ChildNameConflict), writing none of their
    children, instead of starting a second primary on the claim the first instance runs on."""
    cluster, namespace = upgrades.cluster, upgrade.namespace
    moving = to_move(upgrade.version)
    install_crds(cluster.kubeconfig)
    current = upgrades.operator(f"move-{upgrade.version.name}.log", namespace, None)
    for name in moving:
        cluster.patch_db(namespace, name, {"spec": {"failover": {"enabled": True}}})
    moved = wait_for(
        lambda: moved_layout(cluster, namespace, moving), timeout=60, what="the instances"
    )
    assert current.stop() == 0, current.log_text()[-3000:]
    first = next(iter(moving))
    claims = [
        volume.persistent_volume_claim.claim_name
        for volume in cluster.apps.read_namespaced_deployment(
            f"{first}-1", namespace
        ).spec.template.spec.volumes
        if volume.persistent_volume_claim
    ]
    assert claims == [f"{first}-data"]
    for key, before in upgrade.before.items():
        if key.split("/")[0] in ("Secret", "PersistentVolumeClaim"):
            assert_kept(key, before, moved.get(key), "after the move to instances")

    counted = write_requests(cluster)
    install_crds(cluster.kubeconfig, upgrades.source(PREVIOUS) / "config" / "crd" / "bases")
    previous = upgrades.operator(
        f"rollback-{upgrade.version.name}-to-{PREVIOUS.name}.log", namespace, PREVIOUS
    )

    def refused(name: str) -> bool:
        ready = condition(cluster.get_db(namespace, name), "Ready") or {}
        return ready.get("reason") == "ChildNameConflict" and len(previous.resyncs(name)) >= 2

    try:
        wait_for(lambda: all(refused(name) for name in moving), timeout=60, what="refusals")
    finally:
        log = previous.log_text()
        assert previous.stop() == 0, log[-3000:]
        install_crds(cluster.kubeconfig)
    ready = condition(cluster.get_db(namespace, first), "Ready") or {}
    assert f"Deployment '{first}'" in ready["message"], ready
    writes = writes_since(cluster, counted)
    FIGURES.append(
        f"{', '.join(moving)} made by {upgrade.version.name}, moved to instances, rolled back "
        f"to {PREVIOUS.name}: writes {writes}"
    )
    after = snapshot(cluster, namespace)

    def theirs(key: str) -> bool:
        return key.split("/")[1].startswith(tuple(moving))

    for key, before in moved.items():
        if theirs(key):  # not one field written (the others' are the earlier tests' business)
            assert after.get(key) == before, key
    created = sorted(key for key in set(after) - set(moved) if theirs(key))
    assert created == [], f"the previous version made {created} beside the instances"
