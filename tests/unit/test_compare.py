"""Compare-then-apply: what counts as a difference between desired and observed children."""

from __future__ import annotations

from typing import Any

from database_operator.compare import covers, needs_write

DESIRED: dict[str, Any] = {
    "metadata": {"name": "db", "labels": {"app": "db"}},
    "spec": {
        "replicas": 1,
        "template": {
            "spec": {
                "containers": [{"name": "postgres", "resources": {"requests": {"memory": "1Gi"}}}]
            }
        },
    },
}


def observed(**changes: Any) -> dict[str, Any]:
    """DESIRED as the API server returns it: with defaults and others' fields added."""
    obj: dict[str, Any] = {
        "metadata": {
            "name": "db",
            "labels": {"app": "db"},
            "annotations": {"other-tool/note": "x"},
            "resourceVersion": "7",
        },
        "spec": {
            "replicas": 1,
            "progressDeadlineSeconds": 600,
            "template": {
                "spec": {
                    "containers": [
                        {
                            "name": "postgres",
                            "resources": {"requests": {"memory": "1Gi"}},
                            "terminationMessagePath": "/dev/termination-log",
                        }
                    ]
                }
            },
        },
    }
    obj["spec"].update(changes)
    return obj


def test_defaults_and_fields_of_others_are_no_difference() -> None:
    assert covers(observed(), DESIRED)


def test_a_changed_field_we_set_is_a_difference() -> None:
    assert not covers(observed(replicas=5), DESIRED)


def test_a_missing_list_item_is_a_difference() -> None:
    assert not covers(observed(template={"spec": {"containers": []}}), DESIRED)


def test_quantities_compare_by_value() -> None:
    assert covers({"memory": "1024Mi"}, {"memory": "1Gi"})
    assert covers({"cpu": "500m"}, {"cpu": "0.5"})
    assert not covers({"cpu": "1"}, {"cpu": "2"})


def test_booleans_are_not_numbers() -> None:
    assert not covers({"paused": 1}, {"paused": True})


def test_nothing_observed_needs_a_write() -> None:
    assert needs_write(None, DESIRED, "uid-1")


def test_an_owner_reference_we_no_longer_want_needs_a_write() -> None:
    ref = {
        "apiVersion": "databases.example.com/v1",
        "kind": "Database",
        "name": "db",
        "uid": "uid-1",
    }
    with_ref = observed()
    with_ref["metadata"]["ownerReferences"] = [ref]
    assert needs_write(with_ref, DESIRED, "uid-1")
    assert not needs_write(with_ref, DESIRED, "another-owner")


def test_owner_references_of_others_are_no_difference() -> None:
    ref = {
        "apiVersion": "databases.example.com/v1",
        "kind": "Database",
        "name": "db",
        "uid": "uid-1",
    }
    theirs = {"apiVersion": "example.com/v1", "kind": "Backup", "name": "b", "uid": "uid-9"}
    desired = {**DESIRED, "metadata": {**DESIRED["metadata"], "ownerReferences": [ref]}}
    shared = observed()
    shared["metadata"]["ownerReferences"] = [theirs, ref]
    assert not needs_write(shared, desired, "uid-1")
    shared["metadata"]["ownerReferences"] = [theirs]
    assert needs_write(shared, desired, "uid-1")
