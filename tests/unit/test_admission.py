"""The admission webhooks' rules, as pure functions (and the Admission class on the in-memory
Kube): what each refuses, what it allows, what it warns about, and that every message names
the field and the limit. The API server's side is tests/integration/test_webhooks.py."""

from __future__ import annotations

import asyncio
import re
from typing import Any

import pytest

from database_operator.api.models import MAX_DATABASES, MAX_STORAGE, Database
from database_operator.engines import ENGINES, Engine
from database_operator.finalizers import FINALIZER
from database_operator.webhooks import admission
from database_operator.webhooks.admission import (
    Admission,
    RefusedError,
    deletion_problem,
    exporter_image_problem,
    from_registry,
    image_problem,
    pinned_version,
    quota_problem,
    spec_problems,
    version_change,
)
from tests.fakekube import FakeKube


def db(spec: dict[str, Any], status: dict[str, Any] | None = None) -> Database:
    return Database.model_validate(
        {
            "metadata": {"name": "orders", "namespace": "shop"},
            "spec": spec,
            "status": status or {},
        }
    )


# --- mutate: pinning the version ---------------------------------------------------------------


@pytest.mark.parametrize("engine", list(Engine))
def test_create_pins_the_engines_default_of_today(engine: Engine) -> None:
    assert pinned_version({"engine": engine.value}, None) == ENGINES[engine].default_version


def test_an_explicit_version_is_never_changed() -> None:
    assert pinned_version({"engine": "postgres", "version": "15"}, None) is None
    assert (
        pinned_version({"engine": "postgres", "version": "15"}, {"spec": {"version": "16"}}) is None
    )


def test_an_update_that_empties_the_version_keeps_the_old_one() -> None:
    old = {"spec": {"engine": "postgres", "version": "15.6"}}
    assert pinned_version({"engine": "postgres"}, old) == "15.6"
    # A Database made before pinning existed: the version its status says is deployed.
    legacy = {"spec": {"engine": "postgres"}, "status": {"version": "14"}}
    assert pinned_version({"engine": "postgres"}, legacy) == "14"


def test_no_engine_means_postgres_and_an_unknown_one_is_left_to_the_schema() -> None:
    assert pinned_version({}, None) == ENGINES[Engine.POSTGRES].default_version
    assert pinned_version({"engine": "oracle"}, None) is None


# --- validate: the spec as v1 sees it ----------------------------------------------------------


@pytest.mark.parametrize(
    ("spec", "field"),
    [
        ({"engine": "postgres", "replicas": -1}, "spec.replicas"),
        ({"engine": "postgres", "parameters": {"port": "5433"}}, "spec.parameters.port"),
        (
            {"engine": "redis", "podLabels": {"app.kubernetes.io/instance": "x"}},
            "spec.podLabels",
        ),
        # v1-only through v1beta1: monitoring rides in an annotation no CRD schema checked.
        (
            {"engine": "redis", "monitoring": {"enabled": True, "image": ""}},
            "spec.monitoring.image",
        ),
    ],
)
def test_spec_problems_name_the_field(spec: dict[str, Any], field: str) -> None:
    with pytest.raises(RefusedError) as refused:
        spec_problems(spec)
    assert str(refused.value).startswith(field)
    assert refused.value.code == 422


def refusal(spec: dict[str, Any]) -> str | None:
    """What `spec_problems` refuses ``spec`` for; None when it lets it through."""
    try:
        spec_problems(spec)
    except RefusedError as refused:
        return str(refused)
    return None


def test_a_valid_spec_has_no_problem() -> None:
    valid = {"engine": "mysql", "storage": {"size": "5Gi"}, "parameters": {"x": "1"}}
    assert refusal(valid) is None
    # One step off in either part and it is refused: both were looked at.
    assert (refusal({**valid, "storage": {"size": "five"}}) or "").startswith("spec.storage.size")
    assert refusal({**valid, "parameters": {"port": "1"}}) == (
        "spec.parameters.port is set by the operator for mysql"
    )


# --- validate: the namespace quota -------------------------------------------------------------


def test_without_quota_annotations_there_is_no_limit() -> None:
    others = [{"storage": {"size": "100Ti"}}] * 50
    assert quota_problem("shop", {}, others, {"storage": {"size": "1Ti"}}, None) is None


def test_the_count_cap_names_the_limit_and_the_use() -> None:
    annotations = {MAX_DATABASES: "2"}
    assert quota_problem("shop", annotations, [{}], {}, None) is None
    message = quota_problem("shop", annotations, [{}, {}], {}, None)
    assert message == (
        f"namespace shop allows at most 2 Databases (annotation {MAX_DATABASES}) and has 2: "
        "delete one or ask for a higher limit"
    )
    # Updates never count: lowering the cap must not block unrelated changes.
    assert quota_problem("shop", annotations, [{}, {}, {}], {}, {}) is None


def test_the_storage_cap_names_the_field_the_limit_and_the_use() -> None:
    annotations = {MAX_STORAGE: "10Gi"}
    others = [{"storage": {"size": "4Gi"}}, {}]
    assert quota_problem("shop", annotations, others, {"storage": {"size": "6Gi"}}, None) is None
    message = quota_problem("shop", annotations, others, {"storage": {"size": "7Gi"}}, None)
    assert message is not None
    assert message.startswith("spec.storage.size 7Gi would bring namespace shop's requested")
    assert "to 11Gi, above its limit 10Gi" in message
    assert "in use by other Databases: 4Gi" in message


def test_storage_growth_is_checked_on_update_and_anything_else_is_not() -> None:
    annotations = {MAX_STORAGE: "10Gi"}
    others = [{"storage": {"size": "8Gi"}}]
    old = {"storage": {"size": "5Gi"}}  # already over: lowering a cap keeps working Databases
    assert quota_problem("shop", annotations, others, {"storage": {"size": "5Gi"}}, old) is None
    assert quota_problem("shop", annotations, others, {"storage": {"size": "6Gi"}}, old)


@pytest.mark.parametrize(
    ("annotations", "message"),
    [
        ({MAX_DATABASES: "ten"}, f"annotation {MAX_DATABASES} is not a number: 'ten'"),
        ({MAX_STORAGE: "lots"}, f"annotation {MAX_STORAGE} is not a quantity: 'lots'"),
    ],
)
def test_a_malformed_annotation_is_named(annotations: dict[str, str], message: str) -> None:
    try:
        problem = quota_problem("shop", annotations, [], {"storage": {"size": "1Gi"}}, None)
    except RefusedError as refused:
        problem = str(refused)
    assert problem is not None
    assert message in problem


# --- validate: the image policy ----------------------------------------------------------------


def test_any_image_without_a_policy() -> None:
    assert image_problem(db({"engine": "redis", "image": "evil.io/redis:7"}), []) is None


def test_the_policy_names_the_image_and_the_registries() -> None:
    allowed = ["registry.example.com/", "docker.io/library/"]
    assert (
        image_problem(db({"engine": "redis", "image": "registry.example.com/r:7"}), allowed) is None
    )
    assert image_problem(db({"engine": "redis"}), allowed) is None  # the official image
    message = image_problem(db({"engine": "redis", "image": "quay.io/x/redis:7"}), allowed)
    assert message == (
        "spec.image quay.io/x/redis:7 is not from an allowed registry "
        "(registry.example.com/, docker.io/library/): set spec.image to an image from one of them"
    )
    official = image_problem(db({"engine": "redis"}), ["registry.example.com/"])
    assert official is not None
    assert official.startswith("spec.image (empty, so the official image) docker.io/library/redis")


@pytest.mark.parametrize(
    ("reference", "prefix", "allowed"),
    [
        ("registry.example.com/pg:16", "registry.example.com", True),
        ("registry.example.com/pg:16", "registry.example.com/", True),
        ("registry.example.com:5000/pg:16", "registry.example.com", True),
        ("registry.example.com.evil.io/pg:16", "registry.example.com", False),
        ("registry.example.comx/pg:16", "registry.example.com", False),
        ("docker.io/library/postgres:16", "docker.io/library", True),
        ("docker.io/libraryx/postgres:16", "docker.io/library", False),
        ("docker.io/library/postgres@sha256:ab", "docker.io/library/postgres", True),
    ],
)
def test_a_prefix_ends_at_a_path_tag_or_digest(reference: str, prefix: str, allowed: bool) -> None:
    assert from_registry(reference, prefix) is allowed


# --- validate: version changes -----------------------------------------------------------------

STORED = {"storage": {"size": "1Gi"}}


def change(engine: str, before: str, after: str, **extra: Any) -> admission.Verdict:
    return version_change(
        db({"engine": engine, "version": before, **STORED, **extra}),
        db({"engine": engine, "version": after, **STORED, **extra}),
    )


def test_minor_changes_are_allowed_quietly() -> None:
    assert change("postgres", "16", "16.4").warnings == []
    assert change("mysql", "8.4", "8.4.3").warnings == []


def test_a_major_downgrade_is_refused_saying_what_to_do() -> None:
    with pytest.raises(RefusedError) as refused:
        change("postgres", "16", "15")
    message = str(refused.value)
    assert message.startswith("spec.version 16 -> 15 is a major-version downgrade")
    assert "Keep spec.version at 16.x, or create a new Database at 15" in message
    assert refused.value.code == 422


def test_postgres_makes_no_major_upgrade_in_place() -> None:
    with pytest.raises(RefusedError) as refused:
        change("postgres", "16", "17")
    assert "postgres makes no major upgrade in place on existing data" in str(refused.value)
    assert ENGINES[Engine.POSTGRES].major_upgrade_path in str(refused.value)


def test_mysql_upgrades_one_major_at_a_time_with_a_warning() -> None:
    warned = change("mysql", "8.4", "9.1").warnings
    assert len(warned) == 1
    assert "upgrades the data in spec.storage in place" in warned[0]
    assert "take a backup first" in warned[0]
    with pytest.raises(RefusedError, match="at most 1 major at a time"):
        change("mysql", "8.4", "10.0")


def test_redis_has_no_limit_on_upgrades_but_warns() -> None:
    assert ENGINES[Engine.REDIS].major_upgrade_steps is None
    assert change("redis", "6.2", "8.0").warnings


def test_without_storage_or_with_an_image_any_version_goes() -> None:
    assert (
        version_change(
            db({"engine": "postgres", "version": "16"}), db({"engine": "postgres", "version": "13"})
        ).warnings
        == []
    )
    assert change("postgres", "16", "13", image="registry.example.com/pg:13").warnings == []


def test_an_unpinned_database_is_compared_with_what_runs() -> None:
    old = db({"engine": "postgres", **STORED}, status={"version": "15"})
    with pytest.raises(RefusedError, match=re.escape("spec.version 15 -> 17")):
        version_change(old, db({"engine": "postgres", "version": "17", **STORED}))


# --- validate: deletion protection -------------------------------------------------------------


def test_deletion_protection_refuses_and_says_how_to_turn_it_off() -> None:
    protected = {
        "metadata": {"name": "orders", "namespace": "shop"},
        "spec": {"deletionProtection": True},
    }
    assert deletion_problem(protected) == (
        "Database shop/orders has spec.deletionProtection: true. To delete it, first run "
        "kubectl patch database orders -n shop --type merge "
        """-p '{"spec":{"deletionProtection":false}}'"""
    )
    assert deletion_problem({"metadata": {}, "spec": {"deletionProtection": False}}) is None
    assert deletion_problem({"metadata": {}, "spec": {}}) is None


# --- the Admission class, on the in-memory Kube ------------------------------------------------


def manifest(name: str, spec: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "databases.example.com/v1",
        "kind": "Database",
        "metadata": {"name": name, "namespace": "shop"},
        "spec": spec,
    }


def test_admission_reads_the_namespace_and_counts_the_other_databases() -> None:
    kube = FakeKube()
    kube.put(
        {
            "apiVersion": "v1",
            "kind": "Namespace",
            "metadata": {"name": "shop", "annotations": {MAX_DATABASES: "1"}},
        }
    )
    kube.put(manifest("existing", {"engine": "redis"}))
    checks = Admission(kube)  # type: ignore[arg-type]
    with pytest.raises(RefusedError, match="allows at most 1 Databases"):
        asyncio.run(checks.validate("CREATE", manifest("new", {"engine": "redis"}), None))
    # The Database itself (an update) is not one of "the others".
    existing = manifest("existing", {"engine": "redis", "replicas": 2})
    assert asyncio.run(checks.validate("UPDATE", existing, manifest("existing", {}))) == []


def test_an_update_that_cannot_break_a_cap_reads_nothing() -> None:
    """Every Database's finalizer is an UPDATE through this webhook: only growing storage can
    break a cap, so anything else is let through without a read (a malformed cap included)."""
    kube = FakeKube()
    annotations = {MAX_STORAGE: "10Gi", MAX_DATABASES: "many"}
    kube.put(
        {
            "apiVersion": "v1",
            "kind": "Namespace",
            "metadata": {"name": "shop", "annotations": annotations},
        }
    )
    kube.put(manifest("other", {"engine": "postgres", "storage": {"size": "8Gi"}}))
    checks = Admission(kube)  # type: ignore[arg-type]
    running = manifest("orders", {"engine": "postgres", "storage": {"size": "2Gi"}})
    finalized = manifest("orders", {"engine": "postgres", "storage": {"size": "2Gi"}})
    finalized["metadata"]["finalizers"] = [FINALIZER]
    shrunk = manifest("orders", {"engine": "postgres", "storage": {"size": "1Gi"}})
    for update in (finalized, shrunk):
        assert asyncio.run(checks.validate("UPDATE", update, running)) == []
    assert kube.reads == []
    grown = manifest("orders", {"engine": "postgres", "storage": {"size": "3Gi"}})
    with pytest.raises(RefusedError, match="above its limit 10Gi"):
        asyncio.run(checks.validate("UPDATE", grown, running))
    assert kube.reads == [("GET", "Namespace", "shop"), ("LIST", "Database", "shop")]


def test_admission_refuses_a_protected_delete_and_allows_others() -> None:
    checks = Admission(FakeKube())  # type: ignore[arg-type]
    protected = manifest("orders", {"engine": "redis", "deletionProtection": True})
    with pytest.raises(RefusedError, match="deletionProtection: true"):
        asyncio.run(checks.validate("DELETE", None, protected))
    assert asyncio.run(checks.validate("DELETE", None, manifest("x", {}))) == []


def test_admission_checks_the_image_only_when_it_changes() -> None:
    """A policy made stricter later never blocks an unrelated update of a running Database."""
    checks = Admission(FakeKube(), ["registry.example.com/"])  # type: ignore[arg-type]
    running = manifest("orders", {"engine": "redis", "image": "quay.io/r:7"})
    scaled = manifest("orders", {"engine": "redis", "image": "quay.io/r:7", "replicas": 2})
    assert asyncio.run(checks.validate("UPDATE", scaled, running)) == []
    with pytest.raises(RefusedError, match="is not from an allowed registry"):
        asyncio.run(checks.validate("CREATE", running, None))


def test_the_exporters_port_is_free_as_a_service_port_without_monitoring() -> None:
    assert refusal({"engine": "mysql", "port": 9104}) is None
    assert refusal({"engine": "mysql", "port": 9104, "monitoring": {"enabled": False}}) is None
    assert refusal({"engine": "mysql", "port": 9187, "monitoring": {"enabled": True}}) is None


def test_the_policy_holds_the_exporters_image_to_the_same_registries() -> None:
    allowed = ["registry.example.com/"]
    assert exporter_image_problem(db({"engine": "redis"}), allowed) is None  # no exporter
    off = db({"engine": "redis", "monitoring": {"enabled": False, "image": "evil.io/x:1"}})
    assert exporter_image_problem(off, allowed) is None
    pinned = exporter_image_problem(
        db({"engine": "redis", "monitoring": {"enabled": True}}), allowed
    )
    assert pinned == (
        "spec.monitoring.image (empty, so the pinned exporter release) "
        "docker.io/oliver006/redis_exporter:v1.45.0 is not from an allowed registry "
        "(registry.example.com/): set spec.monitoring.image to an image from one of them"
    )
    mirrored = {"enabled": True, "image": "registry.example.com/redis_exporter:v1.45.0"}
    assert exporter_image_problem(db({"engine": "redis", "monitoring": mirrored}), allowed) is None
    assert (
        exporter_image_problem(db({"engine": "redis", "monitoring": {"enabled": True}}), []) is None
    )


def test_admission_checks_the_exporters_image_when_monitoring_turns_on_or_it_changes() -> None:
    checks = Admission(FakeKube(), ["registry.example.com/"])  # type: ignore[arg-type]
    ours = {"engine": "redis", "image": "registry.example.com/redis:7"}
    before = manifest("orders", ours)
    monitored = manifest("orders", {**ours, "monitoring": {"enabled": True}})
    with pytest.raises(RefusedError, match=r"^spec\.monitoring\.image \(empty"):
        asyncio.run(checks.validate("UPDATE", monitored, before))
    mirrored = {"enabled": True, "image": "registry.example.com/redis_exporter:v1.45.0"}
    assert (
        asyncio.run(
            checks.validate("UPDATE", manifest("orders", {**ours, "monitoring": mirrored}), before)
        )
        == []
    )
    # Already running with it (a policy made stricter later): an unrelated update goes through.
    scaled = manifest("orders", {**ours, "replicas": 2, "monitoring": {"enabled": True}})
    assert asyncio.run(checks.validate("UPDATE", scaled, monitored)) == []
