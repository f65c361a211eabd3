"""Conversion between v1 (stored) and v1beta1 (served): field by field, lossless both ways,
metadata and status carried. The API server's side (it calls /convert) is in
tests/integration/test_webhooks.py."""

from __future__ import annotations

import copy
import json
import re
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from database_operator.api import conversion
from database_operator.api.conversion import V1, V1_FIELDS, V1BETA1
from database_operator.api.models import DatabaseSpec
from database_operator.api.v1beta1 import DatabaseSpecV1beta1
from database_operator.webhooks import conversion as webhook

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
    return webhook.review(
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
    "monitoring": st.fixed_dictionaries(
        {"enabled": st.booleans()},
        optional={
            "image": st.sampled_from(["registry.example.com/exporter:v1"]),
            "resources": st.just({"requests": {"memory": "32Mi"}}),
        },
    ),
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


# --- every engine, with and without storage ------------------------------------------------------

ENGINES = ["postgres", "mysql", "redis"]
#: v1 spec.storage, and the flat v1beta1 fields it becomes.
STORAGE_CASES = [
    pytest.param(None, {}, id="no storage"),
    pytest.param({"size": "10Gi"}, {"storageSize": "10Gi"}, id="storage size"),
    pytest.param(
        {"size": "2Ti", "storageClassName": "fast-ssd"},
        {"storageSize": "2Ti", "storageClass": "fast-ssd"},
        id="storage size and class",
    ),
    pytest.param({"size": 1073741824}, {"storageSize": 1073741824}, id="integer size"),
]
#: v1 spec fields v1beta1 has no place for; they ride in the annotation.
V1_ONLY_CASES = [
    pytest.param({}, id="nothing v1-only"),
    pytest.param({"deletionProtection": True}, id="deletion protection"),
    pytest.param(
        {
            "nodeSelector": {"disk": "ssd"},
            "tolerations": [{"key": "db", "operator": "Exists", "effect": "NoSchedule"}],
            "priorityClassName": "high",
            "podAnnotations": {"example.com/a": "1"},
            "podLabels": {"team": "a"},
            "serviceAnnotations": {"lb.example.com/internal": "true"},
        },
        id="placement and pod metadata",
    ),
    pytest.param(
        {
            "monitoring": {
                "enabled": True,
                "image": "registry.example.com/exporter:v1",
                "resources": {"requests": {"cpu": "10m"}, "limits": {"memory": "64Mi"}},
            }
        },
        id="monitoring",
    ),
    pytest.param({"monitoring": {"enabled": False}}, id="monitoring off"),
]


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize(("storage", "flat"), STORAGE_CASES)
@pytest.mark.parametrize("extra", V1_ONLY_CASES)
def test_each_engine_with_each_kind_of_storage_converts_both_ways(
    engine: str, storage: dict[str, Any] | None, flat: dict[str, Any], extra: dict[str, Any]
) -> None:
    ours = {"engine": engine, "version": "1.2", "replicas": 1, **extra}
    if storage is not None:
        ours["storage"] = storage
    obj = v1(copy.deepcopy(ours), annotations={"example.com/owner": "team-a"})

    old = conversion.to_v1beta1(obj)

    assert old["apiVersion"] == V1BETA1
    assert old["kind"] == "Database"
    assert old["spec"] == {"type": engine, "version": "1.2", "replicas": 1, **flat}
    annotations = dict(old["metadata"]["annotations"])
    assert annotations.pop("example.com/owner") == "team-a"
    if extra:
        assert json.loads(annotations.pop(V1_FIELDS)) == extra
    assert annotations == {}
    assert {k: v for k, v in old["metadata"].items() if k != "annotations"} == METADATA
    assert old["status"] == STATUS

    back = conversion.to_v1(old)

    assert back == obj
    assert V1_FIELDS not in back["metadata"]["annotations"]


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize(("storage", "flat"), STORAGE_CASES)
def test_a_v1beta1_object_of_each_engine_becomes_v1_with_nested_storage(
    engine: str, storage: dict[str, Any] | None, flat: dict[str, Any]
) -> None:
    obj = v1beta1({"type": engine, "paused": True, **flat})
    new = conversion.to_v1(obj)
    expected: dict[str, Any] = {"engine": engine, "paused": True}
    if storage is not None:
        expected["storage"] = storage
    assert new["apiVersion"] == V1
    assert new["spec"] == expected
    assert new["metadata"] == METADATA  # no annotations appear out of nowhere
    assert new["status"] == STATUS
    assert conversion.to_v1beta1(new) == obj


def test_the_annotation_is_removed_on_the_way_back_to_v1_and_only_it() -> None:
    old = v1beta1(
        {"type": "mysql", "storageSize": "5Gi"},
        annotations={
            V1_FIELDS: json.dumps({"deletionProtection": True, "parameters": {"a": "b"}}),
            "example.com/keep": "me",
        },
    )
    new = conversion.to_v1(old)
    assert new["metadata"]["annotations"] == {"example.com/keep": "me"}
    assert new["spec"] == {
        "engine": "mysql",
        "storage": {"size": "5Gi"},
        "deletionProtection": True,
        "parameters": {"a": "b"},
    }
    # The annotation as its only annotation: the annotations map goes entirely.
    alone = v1beta1({"type": "redis"}, annotations={V1_FIELDS: '{"deletionProtection":true}'})
    assert "annotations" not in conversion.to_v1(alone)["metadata"]


def test_v1beta1_edits_of_storage_win_over_a_storage_kept_in_the_annotation() -> None:
    """The flat fields are v1beta1's own: what a v1beta1 client wrote there counts."""
    old = v1beta1(
        {"type": "postgres", "storageSize": "20Gi"},
        annotations={V1_FIELDS: json.dumps({"storage": {"size": "5Gi"}})},
    )
    assert conversion.to_v1(old)["spec"]["storage"] == {"size": "20Gi"}


def test_an_object_without_spec_or_metadata_converts() -> None:
    bare = {"apiVersion": V1, "kind": "Database"}
    old = conversion.to_v1beta1(bare)
    assert old == {"apiVersion": V1BETA1, "kind": "Database", "metadata": {}}
    # v1 always has a spec (the CRD defaults it to {}): an empty one appears.
    assert conversion.to_v1(old) == {
        "apiVersion": V1,
        "kind": "Database",
        "metadata": {},
        "spec": {},
    }


def test_conversion_never_changes_its_input() -> None:
    obj = v1(
        {"engine": "mysql", "storage": {"size": "1Gi", "storageClassName": "x"}, "paused": True},
        annotations={"example.com/a": "b"},
    )
    before = copy.deepcopy(obj)
    old = conversion.to_v1beta1(obj)
    assert obj == before
    snapshot = copy.deepcopy(old)
    conversion.to_v1(old)
    assert old == snapshot


def test_convert_returns_an_object_already_in_the_desired_version_as_it_is() -> None:
    obj = v1({"engine": "redis"})
    assert conversion.convert(obj, V1) is obj
    with pytest.raises(
        conversion.ConversionError, match=re.escape("from databases.example.com/v2 to")
    ):
        conversion.convert({**obj, "apiVersion": "databases.example.com/v2"}, V1BETA1)


def test_the_field_tables_cover_every_v1beta1_field() -> None:
    """A field added to v1beta1 but not to the tables would be converted by luck, not design."""
    v1beta1_fields = {
        field.alias or name for name, field in DatabaseSpecV1beta1.model_fields.items()
    }
    mapped = {*conversion.SHARED, *conversion.RENAMED, *conversion.STORAGE}
    assert v1beta1_fields == mapped
    v1_fields = {field.alias or name for name, field in DatabaseSpec.model_fields.items()}
    assert set(conversion.SHARED) | set(conversion.RENAMED.values()) <= v1_fields
    assert "storage" in v1_fields


# --- ConversionReview ----------------------------------------------------------------------------


def test_a_review_to_v1_restores_the_kept_fields_and_keeps_the_order() -> None:
    objects = [
        v1beta1(
            {"type": "postgres", "storageSize": "1Gi"},
            name=f"db-{index}",
            annotations={V1_FIELDS: json.dumps({"deletionProtection": bool(index % 2)})},
        )
        for index in range(5)
    ]
    response = review(objects, V1)["response"]
    assert response["result"] == {"status": "Success"}
    converted = response["convertedObjects"]
    assert [o["metadata"]["name"] for o in converted] == [f"db-{i}" for i in range(5)]
    assert [o["apiVersion"] for o in converted] == [V1] * 5
    assert [o["spec"]["deletionProtection"] for o in converted] == [False, True] * 2 + [False]
    assert all("annotations" not in o["metadata"] for o in converted)
    assert all(o["status"] == STATUS for o in converted)


def test_a_review_of_mixed_versions_converts_each_to_the_desired_one() -> None:
    objects = [v1beta1({"type": "redis"}, name="old"), v1({"engine": "redis"}, name="new")]
    converted = review(objects, V1)["response"]["convertedObjects"]
    assert [(o["metadata"]["name"], o["apiVersion"]) for o in converted] == [
        ("old", V1),
        ("new", V1),
    ]
    assert [o["spec"] for o in converted] == [{"engine": "redis"}, {"engine": "redis"}]


def test_a_review_answers_in_the_reviews_own_api_version() -> None:
    body = {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "ConversionReview",
        "request": {"uid": "abc", "desiredAPIVersion": V1BETA1, "objects": []},
    }
    answer = webhook.review(body)
    assert answer == {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "ConversionReview",
        "response": {"uid": "abc", "convertedObjects": [], "result": {"status": "Success"}},
    }


def test_a_failed_review_is_an_answer_not_an_exception() -> None:
    broken = v1beta1(
        {"type": "redis"}, name="bad", annotations={V1_FIELDS: '{"engine": "postgres"}'}
    )
    answer = review([broken], V1)
    assert answer["kind"] == "ConversionReview"
    response = answer["response"]
    assert response["uid"] == "705ab4f5"
    assert response["convertedObjects"] == []
    assert response["result"]["status"] == "Failure"
    assert response["result"]["message"] == (
        f"Database shop/bad: metadata.annotations[{V1_FIELDS}] may not set engine: "
        "v1beta1 has fields for them"
    )


@pytest.mark.parametrize(
    ("obj", "desired"),
    [
        pytest.param(v1beta1("not-an-object"), V1, id="v1beta1 spec a string"),  # type: ignore[arg-type]
        pytest.param(v1beta1([1, 2]), V1, id="v1beta1 spec a list"),  # type: ignore[arg-type]
        pytest.param(v1("not-an-object"), V1BETA1, id="v1 spec a string"),  # type: ignore[arg-type]
    ],
)
def test_a_malformed_object_gives_a_failure_not_an_exception(
    obj: dict[str, Any], desired: str
) -> None:
    response = review([obj], desired)["response"]
    assert response["result"]["status"] == "Failure"
    assert response["result"]["message"].startswith("Database shop/orders: spec must be an object")


# --- more properties -----------------------------------------------------------------------------

resources = st.fixed_dictionaries(
    {},
    optional={
        "requests": st.dictionaries(
            st.sampled_from(["cpu", "memory"]), st.sampled_from(["100m", "1Gi", 2]), max_size=2
        ),
        "limits": st.dictionaries(
            st.sampled_from(["cpu", "memory"]), st.sampled_from(["1", "2Gi"]), max_size=2
        ),
    },
)
wide_v1_only = {
    **v1_only,
    "podAnnotations": st.dictionaries(st.sampled_from(["a", "b/c"]), st.text(max_size=5)),
    "serviceAnnotations": st.dictionaries(st.sampled_from(["lb", "x/y"]), st.text(max_size=5)),
    "tolerations": st.lists(
        st.fixed_dictionaries(
            {"key": st.sampled_from(["db", "gpu"]), "operator": st.just("Exists")},
            optional={"effect": st.sampled_from(["NoSchedule", "NoExecute"])},
        ),
        max_size=2,
    ),
}
wide_v1_specs = st.fixed_dictionaries(
    {"engine": st.sampled_from(ENGINES)},
    optional={**shared, **wide_v1_only, "storage": storage, "resources": resources},
)
annotation_maps = st.dictionaries(
    st.sampled_from(["example.com/a", "example.com/b"]), st.text(max_size=8), max_size=2
)


@given(spec=wide_v1_specs, other_annotations=annotation_maps)
def test_v1beta1_holds_only_its_own_fields_and_the_annotation_exactly_the_rest(
    spec: dict[str, Any], other_annotations: dict[str, str]
) -> None:
    DatabaseSpec.model_validate(spec)
    obj = v1(spec, annotations=other_annotations) if other_annotations else v1(spec)
    old = conversion.to_v1beta1(obj)
    DatabaseSpecV1beta1.model_validate(old["spec"])
    assert set(old["spec"]) <= {*conversion.SHARED, *conversion.RENAMED, *conversion.STORAGE}
    v1_only_keys = set(spec) - {*conversion.SHARED, *conversion.RENAMED.values(), "storage"}
    kept_annotations = dict(old["metadata"].get("annotations") or {})
    kept = json.loads(kept_annotations.pop(V1_FIELDS, "{}"))
    assert set(kept) == v1_only_keys
    assert kept_annotations == other_annotations
    assert conversion.to_v1(old) == obj


@given(spec=v1beta1_specs)
def test_a_v1beta1_object_gains_no_annotation_in_v1_and_loses_nothing(spec: dict[str, Any]) -> None:
    obj = v1beta1(spec)
    new = conversion.to_v1(obj)
    assert "annotations" not in new["metadata"]
    flat = sum(key in spec for key in conversion.STORAGE)
    nested = len(new["spec"].get("storage", {}))
    assert nested == flat
    assert len(new["spec"]) == len(spec) - flat + (1 if flat else 0)


def test_spec_monitoring_rides_through_v1beta1_and_a_v1beta1_edit_keeps_it() -> None:
    """The sidecar must not vanish because a client reads and writes the Database as v1beta1."""
    monitoring = {"enabled": True, "resources": {"limits": {"cpu": "100m"}}}
    obj = v1({"engine": "postgres", "replicas": 2, "monitoring": monitoring})
    old = conversion.to_v1beta1(obj)
    assert "monitoring" not in old["spec"]
    assert json.loads(old["metadata"]["annotations"][V1_FIELDS]) == {"monitoring": monitoring}
    old["spec"]["replicas"] = 3  # kubectl edit through v1beta1
    back = conversion.to_v1(old)
    assert back["spec"] == {"engine": "postgres", "replicas": 3, "monitoring": monitoring}
