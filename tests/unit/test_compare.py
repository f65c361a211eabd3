"""Compare-then-apply: what counts as a difference between desired and observed children."""

from __future__ import annotations

from typing import Any

from database_operator.compare import (
    covers,
    difference,
    dotted,
    list_takebacks,
    needs_write,
    owned_by_others,
)

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


def test_a_sub_milli_quantity_is_what_the_api_server_stores_rounded_up_to_millis() -> None:
    assert covers({"cpu": "1m"}, {"cpu": "0.1m"})
    assert covers({"memory": "1m"}, {"memory": "0.0001"})
    assert covers({"cpu": "2m"}, {"cpu": "1.5m"})
    assert not covers({"cpu": "1m"}, {"cpu": "1.5m"})
    assert not covers({"cpu": "0.1m"}, {"cpu": "1m"})


def test_difference_names_the_first_field_that_differs() -> None:
    have = {"spec": {"containers": [{"name": "db", "resources": {"requests": {"cpu": "2m"}}}]}}
    want = {"spec": {"containers": [{"name": "db", "resources": {"requests": {"cpu": "1m"}}}]}}
    found = difference(have, want)
    assert found == (("spec", "containers", 0, "resources", "requests", "cpu"), "2m", "1m")
    assert dotted(found[0]) == "spec.containers[0].resources.requests.cpu"
    assert difference(have, have) is None


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


# --- what the API server leaves out --------------------------------------------------------------


def test_an_empty_map_we_send_matches_a_field_the_server_dropped() -> None:
    # resources: {limits: {}} comes back as resources: {} (or not at all): Go's omitempty.
    assert covers({"resources": {}}, {"resources": {"limits": {}}})
    assert covers({}, {"resources": {"limits": {}, "requests": {}}})
    assert covers({}, {"args": [], "name": ""})
    assert not covers({}, {"resources": {"limits": {"cpu": "1"}}})


def test_zero_and_false_are_values_not_absence() -> None:
    assert not covers({}, {"replicas": 0})
    assert not covers({}, {"automountServiceAccountToken": False})


# --- taking lists back from another field manager -------------------------------------------------

SERVICE: dict[str, Any] = {
    "apiVersion": "v1",
    "kind": "Service",
    "metadata": {"name": "db", "namespace": "ns"},
    "spec": {
        "type": "NodePort",
        "ports": [{"name": "postgres", "port": 5432, "targetPort": "postgres", "protocol": "TCP"}],
    },
}


def edited_service() -> dict[str, Any]:
    """SERVICE after `kubectl edit` changed the port to 9999: the element is now kubectl's."""
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {
            "name": "db",
            "namespace": "ns",
            "resourceVersion": "12",
            "managedFields": [
                {
                    "manager": "database-operator",
                    "operation": "Apply",
                    "fieldsV1": {"f:spec": {"f:type": {}}},
                },
                {
                    "manager": "kubectl-edit",
                    "operation": "Update",
                    "fieldsV1": {
                        "f:spec": {
                            "f:ports": {
                                'k:{"port":9999,"protocol":"TCP"}': {
                                    ".": {},
                                    "f:name": {},
                                    "f:port": {},
                                    "f:targetPort": {},
                                    "f:protocol": {},
                                    "f:appProtocol": {},
                                }
                            }
                        }
                    },
                },
            ],
        },
        "spec": {
            "type": "NodePort",
            "clusterIP": "10.0.0.7",
            "ports": [
                {
                    "name": "postgres",
                    "port": 9999,
                    "targetPort": "postgres",
                    "protocol": "TCP",
                    "appProtocol": "tcp",
                    "nodePort": 30123,
                }
            ],
        },
    }


def test_a_list_another_manager_changed_is_replaced_with_ours() -> None:
    operations = list_takebacks(edited_service(), SERVICE, "database-operator")
    assert operations == [
        {
            "op": "replace",
            "path": "/spec/ports",
            "value": [
                # Ours win; the server's allocation (nodePort) stays; kubectl's extra goes.
                {
                    "name": "postgres",
                    "port": 5432,
                    "targetPort": "postgres",
                    "protocol": "TCP",
                    "nodePort": 30123,
                }
            ],
        }
    ]


def test_lists_that_match_are_left_alone() -> None:
    assert (
        list_takebacks({**SERVICE, "metadata": {"name": "db"}}, SERVICE, "database-operator") == []
    )


def test_a_foreign_element_beside_ours_is_taken_out() -> None:
    observed = {
        "metadata": {"name": "db"},
        "spec": {
            "template": {
                "spec": {
                    "containers": [
                        {"name": "postgres", "image": "postgres:16", "imagePullPolicy": "Always"},
                        {"name": "pg", "image": "postgres:16"},
                    ]
                }
            }
        },
    }
    wanted = {
        "spec": {
            "template": {"spec": {"containers": [{"name": "postgres", "image": "postgres:17"}]}}
        }
    }
    assert list_takebacks(observed, wanted, "database-operator") == [
        {
            "op": "replace",
            "path": "/spec/template/spec/containers",
            "value": [{"name": "postgres", "image": "postgres:17", "imagePullPolicy": "Always"}],
        }
    ]


def test_fields_owned_by_others_are_found_through_list_keys() -> None:
    owned = owned_by_others(edited_service(), "database-operator")
    assert ("spec", "ports", 0, "appProtocol") in owned
    assert ("spec", "type") not in owned
