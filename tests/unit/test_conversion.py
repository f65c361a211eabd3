"""Conversion between v1 (stored) and v1beta1 (served): field by field, lossless both ways,
metadata and status carried. The API server's side (it calls /convert) is in
tests/integration/test_webhooks.py."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from database_operator.api.models import DatabaseSpec
from database_operator.api.v1beta1 import DatabaseSpecV1beta1
from database_operator.webhooks import conversion
from database_operator.webhooks.conversion import V1, V1_FIELDS, V1BETA1

METADATA = {
    "name": "orders",
    "namespace": "shop",
    "uid": "0b7c",
    "resourceVersion": "42",
    "generation": 3,
    "labels": {"team": "a"},
    "finalizers": ["databases.example.com/finalizer"],
}
STATUS = {
    "observedGeneration": 3,
    "phase": "Active",
    "conditions": [{"type": "Ready", "status": "True", "reason": "AllReplicasReady"}],
}


def v1(spec: dict[str, Any], **metadata: Any) -> dict[str, Any]:
    return {
        "apiVersion": V1,
        "kind": "Database",
        "metadata": {**copy.deepcopy(METADATA), **metadata},
        "spec": spec,
        "status": copy.deepcopy(STATUS),
    }


def v1beta1(spec: dict[str, Any], **metadata: Any) -> dict[str, Any]:
    return {**v1(spec, **metadata), "apiVersion": V1BETA1}


# (v1 spec, v1beta1 spec, the annotation v1beta1 carries for v1's extra fields)
TABLE: list[tuple[str, dict[str, Any], dict[str, Any], dict[str, Any] | None]] = [
    ("empty", {}, {}, None),
    (
        "postgres",
        {"engine": "postgres", "version": "16"},
        {"type": "postgres", "version": "16"},
        None,
    ),
    (
        "mysql with storage and class",
        {"engine": "mysql", "storage": {"size": "10Gi", "storageClassName": "fast"}},
        {"type": "mysql", "storageSize": "10Gi", "storageClass": "fast"},
        None,
    ),
    (
        "redis, every shared field",
        {
            "engine": "redis",
            "version": "7.4",
            "image": "docker.io/library/redis:7.4",
            "replicas": 3,
            "port": 6380,
            "resources": {"requests": {"cpu": "100m"}},
            "credentialsSecretRef": {"name": "creds"},
            "serviceType": "NodePort",
            "paused": True,
            "deletionPolicy": "Delete",
        },
        {
            "type": "redis",
            "version": "7.4",
            "image": "docker.io/library/redis:7.4",
            "replicas": 3,
            "port": 6380,
            "resources": {"requests": {"cpu": "100m"}},
            "credentialsSecretRef": {"name": "creds"},
            "serviceType": "NodePort",
            "paused": True,
            "deletionPolicy": "Delete",
        },
        None,
    ),
    (
        "v1-only fields ride in the annotation",
        {
            "engine": "postgres",
            "deletionProtection": True,
            "parameters": {"max_connections": "200"},
            "nodeSelector": {"disk": "ssd"},
            "storage": {"size": "1Gi"},
        },
        {"type": "postgres", "storageSize": "1Gi"},
        {
            "deletionProtection": True,
            "nodeSelector": {"disk": "ssd"},
            "parameters": {"max_connections": "200"},
        },
    ),
]


@pytest.mark.parametrize(("case", "ours", "theirs", "kept"), TABLE, ids=[t[0] for t in TABLE])
def test_v1_to_v1beta1_and_back(
    case: str, ours: dict[str, Any], theirs: dict[str, Any], kept: dict[str, Any] | None
) -> None:
    old = conversion.to_v1beta1(v1(ours))
    assert old["apiVersion"] == V1BETA1
    assert old["spec"] == theirs
    annotations = old["metadata"].get("annotations") or {}
    if kept is None:
        assert V1_FIELDS not in annotations
    else:
        assert json.loads(annotations[V1_FIELDS]) == kept
    assert old["status"] == STATUS
    assert {k: v for k, v in old["metadata"].items() if k != "annotations"} == METADATA
    # Back: exactly the object we started from, the annotation gone.
    assert conversion.to_v1(old) == v1(ours)


EXPRESSIBLE = [row for row in TABLE if row[3] is None]


@pytest.mark.parametrize(
    ("case", "ours", "theirs", "kept"), EXPRESSIBLE, ids=[t[0] for t in EXPRESSIBLE]
)
def test_v1beta1_to_v1_maps_every_field(
    case: str, ours: dict[str, Any], theirs: dict[str, Any], kept: dict[str, Any] | None
) -> None:
    assert conversion.to_v1(v1beta1(theirs)) == v1(ours)


def test_other_annotations_are_kept_and_the_v1_fields_annotation_only_lives_in_v1beta1() -> None:
    obj = v1({"engine": "redis", "paused": True}, annotations={"example.com/owner": "team-a"})
    old = conversion.to_v1beta1(obj)
    assert old["metadata"]["annotations"] == {"example.com/owner": "team-a"}
    back = conversion.to_v1(old)
    assert back["metadata"]["annotations"] == {"example.com/owner": "team-a"}
    # A stale annotation on a v1 object (no v1-only fields any more) is dropped on the way out.
    stale = v1({"engine": "redis"}, annotations={V1_FIELDS: '{"deletionProtection":true}'})
    assert "annotations" not in conversion.to_v1beta1(stale)["metadata"]


def test_a_v1beta1_update_keeps_what_only_v1_can_say() -> None:
    """Read as v1beta1, edited there (replicas), written back: v1's extra fields survive."""
    stored = v1({"engine": "postgres", "deletionProtection": True, "replicas": 1})
    edited = conversion.to_v1beta1(stored)
    edited["spec"]["replicas"] = 2
    assert conversion.to_v1(edited)["spec"] == {
        "engine": "postgres",
        "deletionProtection": True,
        "replicas": 2,
    }


@pytest.mark.parametrize(
    ("annotation", "message"),
    [
        ("{not json", "is not JSON"),
        ("[1, 2]", "must be a JSON object"),
        ('{"replicas": 5}', "may not set replicas"),
        ('{"engine": "mysql"}', "may not set engine"),
    ],
)
def test_a_broken_annotation_is_refused_naming_it(annotation: str, message: str) -> None:
    obj = v1beta1({"type": "redis"}, annotations={V1_FIELDS: annotation})
    with pytest.raises(conversion.ConversionError, match=message) as refused:
        conversion.to_v1(obj)
    assert f"metadata.annotations[{V1_FIELDS}]" in str(refused.value)


def review(objects: list[dict[str, Any]], desired: str) -> dict[str, Any]:
    return conversion.review(
        {
            "apiVersion": "apiextensions.k8s.io/v1",
            "kind": "ConversionReview",
            "request": {"uid": "705ab4f5", "desiredAPIVersion": desired, "objects": objects},
        }
    )


def test_a_review_converts_every_object_in_order_and_echoes_the_uid() -> None:
    objects = [v1({"engine": "redis"}, name="a"), v1({"engine": "mysql"}, name="b")]
    answer = review(objects, V1BETA1)
    assert answer["apiVersion"] == "apiextensions.k8s.io/v1"
    assert answer["kind"] == "ConversionReview"
    response = answer["response"]
    assert response["uid"] == "705ab4f5"
    assert response["result"] == {"status": "Success"}
    assert [o["metadata"]["name"] for o in response["convertedObjects"]] == ["a", "b"]
    assert [o["spec"]["type"] for o in response["convertedObjects"]] == ["redis", "mysql"]
    assert {o["apiVersion"] for o in response["convertedObjects"]} == {V1BETA1}
    # Already in the desired version: returned as it is.
    assert review(objects, V1)["response"]["convertedObjects"] == objects


def test_a_review_that_cannot_convert_fails_as_a_whole_saying_which_object() -> None:
    broken = v1beta1({"type": "redis"}, name="bad", annotations={V1_FIELDS: "{"})
    answer = review([v1beta1({"type": "redis"}, name="good"), broken], V1)
    response = answer["response"]
    assert response["convertedObjects"] == []
    assert response["result"]["status"] == "Failure"
    assert response["result"]["message"].startswith("Database shop/bad: ")
    unknown = review([v1({"engine": "redis"})], "databases.example.com/v2")["response"]
    assert unknown["result"]["status"] == "Failure"
    assert (
        "cannot convert a Database from databases.example.com/v1 to"
        in (unknown["result"]["message"])
    )


# --- properties ---------------------------------------------------------------------------------

quantities = st.sampled_from(["1Gi", "500Mi", "10Gi", "2Ti"])
shared = {
    "version": st.sampled_from(["16", "16.4", "8.4", "7.4"]),
    "image": st.sampled_from(["registry.example.com/pg:16", "docker.io/library/redis:7.4"]),
    "replicas": st.integers(min_value=1, max_value=5),
    "port": st.integers(min_value=1024, max_value=65535),
    "serviceType": st.sampled_from(["ClusterIP", "NodePort", "LoadBalancer"]),
    "paused": st.booleans(),
    "deletionPolicy": st.sampled_from(["Retain", "Delete"]),
    "credentialsSecretRef": st.builds(lambda n: {"name": n}, st.sampled_from(["a", "creds"])),
}
v1_only = {
    "deletionProtection": st.booleans(),
    "parameters": st.dictionaries(
        st.sampled_from(["work_mem", "maxmemory"]), st.sampled_from(["64MB", "1gb"]), max_size=2
    ),
    "nodeSelector": st.dictionaries(st.sampled_from(["disk", "zone"]), st.just("x"), max_size=2),
    "podLabels": st.dictionaries(st.sampled_from(["team", "tier"]), st.just("y"), max_size=2),
    "priorityClassName": st.just("high"),
}
storage = st.fixed_dictionaries(
    {"size": quantities}, optional={"storageClassName": st.sampled_from(["fast", "slow"])}
)
v1_specs = st.fixed_dictionaries(
    {"engine": st.sampled_from(["postgres", "mysql", "redis"])},
    optional={**shared, **v1_only, "storage": storage},
)
v1beta1_specs = st.fixed_dictionaries(
    {"type": st.sampled_from(["postgres", "mysql", "redis"])},
    optional={
        **shared,
        "storageSize": quantities,
        "storageClass": st.sampled_from(["fast", "slow"]),
    },
)


@given(spec=v1_specs)
def test_any_valid_v1_object_survives_a_trip_through_v1beta1(spec: dict[str, Any]) -> None:
    DatabaseSpec.model_validate(spec)  # the generator makes valid specs only
    obj = v1(spec)
    old = conversion.to_v1beta1(obj)
    DatabaseSpecV1beta1.model_validate(old["spec"])  # and v1beta1's schema takes the result
    assert conversion.to_v1(old) == obj


@given(spec=v1beta1_specs)
def test_any_valid_v1beta1_object_survives_a_trip_through_v1(spec: dict[str, Any]) -> None:
    if "storageClass" in spec and "storageSize" not in spec:
        spec = {**spec, "storageSize": "1Gi"}
    obj = v1beta1(spec)
    new = conversion.to_v1(obj)
    DatabaseSpec.model_validate(new["spec"])
    assert conversion.to_v1beta1(new) == obj
