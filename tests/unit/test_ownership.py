"""Whose is an object with a child's name: the operator's only when it created it."""

from __future__ import annotations

from typing import Any

from database_operator.api.models import Database
from database_operator.ownership import CREATED_FOR, conflict, conflict_message, is_ours

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
