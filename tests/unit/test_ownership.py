"""Whose is an object with a child's name: the operator's only when it created it."""

from __future__ import annotations

from typing import Any

from database_operator.api.models import Database
from database_operator.ownership import (
    CREATED_FOR,
    FIELD_MANAGER,
    conflict,
    conflict_message,
    is_ours,
    needs_managed_fields,
)

UID = "0b6c7a52-1111-4a7e-9f00-000000000001"
DB = Database.model_validate({"metadata": {"name": "web", "namespace": "shop", "uid": UID}})


def obj(kind: str, name: str = "web", **meta: Any) -> dict[str, Any]:
    return {"kind": kind, "metadata": {"name": name, "namespace": "shop", **meta}}


def controller(uid: str, kind: str = "Database", name: str = "web") -> dict[str, Any]:
    return {"apiVersion": "x/v1", "kind": kind, "name": name, "uid": uid, "controller": True}


def test_a_child_with_our_controller_reference_is_ours() -> None:
    assert is_ours(obj("Service", ownerReferences=[controller(UID)]), DB)


def test_an_unrelated_namesake_is_not_ours_and_is_named_in_the_conflict() -> None:
    found = conflict(obj("Service"), DB)
    assert found is not None
    assert found.describe() == "Service 'web' exists and the operator did not create it"


def test_a_controller_reference_to_another_object_is_not_ours() -> None:
    # A Database deleted and created again under the same name: its old Deployment waits for
    # the garbage collector and belongs to the old uid.
    stale = obj("Deployment", ownerReferences=[controller("old-uid")])
    found = conflict(stale, DB)
    assert found is not None
    assert found.owner == "Database 'web'"
    replicaset = conflict(obj("Deployment", ownerReferences=[controller(UID, "ReplicaSet")]), DB)
    assert replicaset is not None


def test_a_non_controller_reference_does_not_make_it_ours() -> None:
    ref = {**controller(UID), "controller": False}
    assert not is_ours(obj("Secret", "web-credentials", ownerReferences=[ref]), DB)


def test_kept_children_are_ours_by_the_marker_that_names_the_database() -> None:
    # Retained from an earlier Database of the same name: used again, as Retain promises.
    assert is_ours(obj("PersistentVolumeClaim", "web-data", annotations={CREATED_FOR: "web"}), DB)
    assert not is_ours(obj("Secret", "web-credentials", annotations={CREATED_FOR: "api"}), DB)


def test_the_conflict_message_says_what_to_do() -> None:
    found = conflict(obj("Secret", "web-credentials"), DB)
    assert found is not None
    message = conflict_message([found])
    assert "Secret 'web-credentials' exists" in message
    assert "Rename the Database" in message
    assert CREATED_FOR in message
    assert "credentialsSecretRef" in message


# --- kept children an earlier version (0.1.0) made, before it wrote CREATED_FOR -------------------

OUR_LABELS = {"app.kubernetes.io/instance": "web", "app.kubernetes.io/managed-by": FIELD_MANAGER}


def written_by(manager: str) -> list[dict[str, Any]]:
    return [{"manager": manager, "operation": "Update", "apiVersion": "v1"}]


def test_a_kept_child_an_earlier_version_made_is_ours_by_its_labels_and_field_manager() -> None:
    for kind, name in (("Secret", "web-credentials"), ("PersistentVolumeClaim", "web-data")):
        made = obj(kind, name, labels=OUR_LABELS, managedFields=written_by(FIELD_MANAGER))
        assert is_ours(made, DB)
        assert conflict(made, DB) is None
        # deletionPolicy Delete: 0.1.0 added a plain owner reference to the same Database.
        owned = {**controller(UID), "controller": False}
        assert is_ours({**made, "metadata": {**made["metadata"], "ownerReferences": [owned]}}, DB)


def test_our_labels_alone_or_our_field_manager_alone_do_not_make_it_ours() -> None:
    labelled = obj(
        "Secret", "web-credentials", labels=OUR_LABELS, managedFields=written_by("kubectl")
    )
    assert not is_ours(labelled, DB)
    unlabelled = obj("Secret", "web-credentials", managedFields=written_by(FIELD_MANAGER))
    assert not is_ours(unlabelled, DB)
    other = obj(
        "Secret",
        "web-credentials",
        labels={**OUR_LABELS, "app.kubernetes.io/instance": "api"},
        managedFields=written_by(FIELD_MANAGER),
    )
    assert not is_ours(other, DB)


def test_an_earlier_namesakes_kept_child_owned_by_another_uid_is_not_ours() -> None:
    stale = {**controller("old-uid"), "controller": False}
    made = obj(
        "PersistentVolumeClaim",
        "web-data",
        labels=OUR_LABELS,
        managedFields=written_by(FIELD_MANAGER),
        ownerReferences=[stale],
    )
    assert not is_ours(made, DB)


def test_only_kept_kinds_are_recognised_by_labels_and_field_manager() -> None:
    # A Deployment or Service of ours always carries the controller reference.
    made = obj("Service", labels=OUR_LABELS, managedFields=written_by(FIELD_MANAGER))
    assert not is_ours(made, DB)


def test_a_cached_copy_without_managed_fields_asks_for_a_live_read() -> None:
    cached = obj("PersistentVolumeClaim", "web-data", labels=OUR_LABELS)
    assert needs_managed_fields(cached, DB)
    assert not is_ours(cached, DB)
    marked = obj("PersistentVolumeClaim", "web-data", annotations={CREATED_FOR: "web"})
    assert not needs_managed_fields(marked, DB)
    assert not needs_managed_fields(obj("PersistentVolumeClaim", "web-data"), DB)
