"""Kopf's settings for this operator: no bookkeeping of Kopf's on the Databases, server-side
child filters, and retries of Kopf's own calls."""

from __future__ import annotations

import kopf

from database_operator.config import Settings
from database_operator.handlers import CHILD_SELECTOR, KOPF_FINALIZER, configure_kopf
from database_operator.reconcile import FINALIZER


def configured(**ours: object) -> kopf.OperatorSettings:
    settings = kopf.OperatorSettings()
    configure_kopf(settings, Settings(**ours))  # type: ignore[arg-type]
    return settings


def test_kopf_never_takes_our_finalizer_for_its_own() -> None:
    # Kopf removes its finalizer from objects no handler of its needs it for: it must not be
    # the one the controller manages.
    assert configured().persistence.finalizer == KOPF_FINALIZER != FINALIZER


def test_kopf_retries_its_own_calls_with_a_bounded_backoff() -> None:
    backoffs = list(configured().networking.error_backoffs)  # type: ignore[arg-type]
    assert len(backoffs) >= 5
    assert max(backoffs) <= 60


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
