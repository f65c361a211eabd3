"""Kopf's settings for this operator: bookkeeping under our prefix, server-side child filters."""

from __future__ import annotations

import kopf

from database_operator.config import Settings
from database_operator.handlers import CHILD_SELECTOR, configure_kopf


def configured(**ours: object) -> kopf.OperatorSettings:
    settings = kopf.OperatorSettings()
    configure_kopf(settings, Settings(**ours))  # type: ignore[arg-type]
    return settings


def test_bookkeeping_uses_our_prefix_and_stays_out_of_status() -> None:
    settings = configured()
    assert isinstance(settings.persistence.progress_storage, kopf.AnnotationsProgressStorage)
    assert isinstance(settings.persistence.diffbase_storage, kopf.AnnotationsDiffBaseStorage)
    assert settings.persistence.progress_storage.prefix == "databases.example.com"
    assert settings.persistence.diffbase_storage.prefix == "databases.example.com"
    assert settings.persistence.finalizer == "databases.example.com/finalizer"


def resource(group: str, plural: str, kind: str) -> kopf.Resource:
    return kopf.Resource(
        group=group, version="v1", plural=plural, kind=kind, singular=kind.lower(), namespaced=True
    )


def test_children_are_filtered_by_the_api_server() -> None:
    # What Kopf puts into the watch request's labelSelector for each resource.
    selectors = configured().watching.label_selectors
    assert CHILD_SELECTOR == "app.kubernetes.io/managed-by=database-operator"
    assert list(selectors.collect(resource("apps", "deployments", "Deployment"))) == [
        CHILD_SELECTOR
    ]
    assert list(selectors.collect(resource("", "services", "Service"))) == [CHILD_SELECTOR]
    assert list(selectors.collect(resource("", "secrets", "Secret"))) == []
    assert list(selectors.collect(resource("databases.example.com", "databases", "Database"))) == []


def test_named_namespaces_need_no_cluster_scan_but_globs_do() -> None:
    assert configured(namespaces=["team-a"]).scanning.disabled is True
    assert configured(namespaces=["team-*"]).scanning.disabled is False
    assert configured().scanning.disabled is False
