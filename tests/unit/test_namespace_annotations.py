"""Which watches the admission quota's namespaces take, and when it reads a namespace instead
(webhooks/namespaces.py). Against the real API server: tests/integration/."""

from __future__ import annotations

import asyncio

import pytest

from database_operator.api.models import MAX_DATABASES
from database_operator.webhooks.admission import Admission, RefusedError
from database_operator.webhooks.namespaces import NamespaceAnnotations
from tests.fakekube import FakeKube


def namespace(name: str, **annotations: str) -> dict[str, object]:
    return {"kind": "Namespace", "metadata": {"name": name, "annotations": annotations}}


def database(name: str) -> dict[str, object]:
    return {
        "apiVersion": "databases.example.com/v1",
        "kind": "Database",
        "metadata": {"name": name, "namespace": "shop"},
        "spec": {"engine": "redis"},
    }


@pytest.mark.parametrize(
    ("watched", "fields"),
    [
        ([], [""]),
        (["shop", "bar"], ["metadata.name=shop", "metadata.name=bar"]),
        # A pattern's namespaces are known only by listing them all.
        (["shop", "team-*"], [""]),
    ],
)
def test_named_namespaces_are_watched_each_by_name_else_all(
    watched: list[str], fields: list[str]
) -> None:
    held = NamespaceAnnotations(watched)
    assert [each.watch.fields for each in held.watches] == fields
    assert {each.watch.kind for each in held.watches} == {"Namespace"}
    assert all(each.watch.metadata_only for each in held.watches)


def test_annotations_are_vouched_for_only_while_the_covering_watch_follows() -> None:
    held = NamespaceAnnotations(["shop", "bar"])
    shop, bar = held.watches
    shop.relisted([namespace("shop", a="1")], "7")
    assert held.of("shop") is None  # listed, not yet following
    shop.watch.following = True
    assert held.of("shop") == {"a": "1"}
    assert held.of("bar") is None  # its own watch does not follow
    assert held.of("elsewhere") is None  # no watch covers it
    shop.hear("MODIFIED", namespace("shop"))
    assert held.of("shop") == {}
    shop.hear("DELETED", namespace("shop"))
    assert held.of("shop") is None  # not heard of: read it
    bar.watch.following = True
    bar.relisted([], "8")
    assert held.of("bar") is None


def test_the_quota_takes_the_held_annotations_without_a_read() -> None:
    kube = FakeKube()
    kube.put(database("existing"))
    held = NamespaceAnnotations()
    held.watches[0].relisted([namespace("shop", **{MAX_DATABASES: "1"})], "1")
    held.watches[0].watch.following = True
    checks = Admission(kube, namespaces=held)  # type: ignore[arg-type]
    with pytest.raises(RefusedError, match="allows at most 1 Databases"):
        asyncio.run(checks.validate("CREATE", database("new"), None))
    assert kube.reads == [("LIST", "Database", "shop")]  # the others, not the namespace


def test_the_quota_reads_a_namespace_the_watch_cannot_vouch_for() -> None:
    kube = FakeKube()
    kube.put(namespace("shop", **{MAX_DATABASES: "0"}))
    held = NamespaceAnnotations()  # never listed: not following
    checks = Admission(kube, namespaces=held)  # type: ignore[arg-type]
    with pytest.raises(RefusedError, match="allows at most 0 Databases"):
        asyncio.run(checks.validate("CREATE", database("new"), None))
    assert kube.reads[0] == ("GET", "Namespace", "shop")
