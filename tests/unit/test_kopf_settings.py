"""Kopf's settings for this operator: no bookkeeping of Kopf's on the Databases, server-side
child filters, and retries of Kopf's own calls."""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Sized

import kopf

from database_operator.config import Settings
from database_operator.finalizers import FINALIZER
from database_operator.handlers import KOPF_FINALIZER, NoDiffBase, configure_kopf


def configured(**ours: object) -> kopf.OperatorSettings:
    settings = kopf.OperatorSettings()
    configure_kopf(settings, Settings(**ours))  # type: ignore[arg-type]
    return settings


def test_kopf_never_takes_our_finalizer_for_its_own() -> None:
    # Kopf removes its finalizer from objects no handler of its needs it for: it must not be
    # the one the controller manages.
    assert configured().persistence.finalizer == KOPF_FINALIZER != FINALIZER


def test_kopf_retries_its_own_calls_for_as_long_as_they_fail_a_few_seconds_apart() -> None:
    # A watch must resume within seconds of the API server's return, whatever the outage.
    backoffs = configured().networking.error_backoffs
    assert isinstance(backoffs, Iterable) and not isinstance(backoffs, Sized)
    assert max(itertools.islice(backoffs, 1000)) <= 5


def test_kopf_never_kills_an_operator_that_runs_it_again() -> None:
    assert configured().process.ultimate_exiting_timeout is None


def resource(group: str, plural: str, kind: str) -> kopf.Resource:
    return kopf.Resource(
        group=group, version="v1", plural=plural, kind=kind, singular=kind.lower(), namespaced=True
    )


OURS = "app.kubernetes.io/managed-by=database-operator"
DEPLOYMENTS = resource("apps", "deployments", "Deployment")
SERVICES = resource("", "services", "Service")
CLAIMS = resource("", "persistentvolumeclaims", "PersistentVolumeClaim")
SECRETS = resource("", "secrets", "Secret")
DATABASES = resource("databases.example.com", "databases", "Database")


def test_children_are_filtered_by_the_api_server() -> None:
    # What Kopf puts into the watch request's labelSelector for each resource.
    selectors = configured().watching.label_selectors
    # Secrets too: only the ones the operator generated reach it (and its memory).
    for children in (DEPLOYMENTS, SERVICES, CLAIMS, SECRETS):
        assert list(selectors.collect(children)) == [OURS]
    assert list(selectors.collect(DATABASES)) == []


def test_a_shard_selects_its_databases_and_their_children_on_the_server() -> None:
    selectors = configured(shard="east").watching.label_selectors
    assert list(selectors.collect(DATABASES)) == ["databases.example.com/shard=east"]
    for children in (DEPLOYMENTS, SERVICES, CLAIMS):
        assert list(selectors.collect(children)) == [f"{OURS},databases.example.com/shard=east"]


def test_a_shard_has_its_own_lease_unless_named() -> None:
    assert Settings(shard="east").lease_name == "database-operator-east"
    assert Settings(shard="east", lease_name="ops").lease_name == "ops"
    assert Settings().lease_name == "database-operator"
    assert Settings(shard="").shard is None


def test_kopf_keeps_no_diff_base_of_its_own() -> None:
    # No change handlers: Kopf need not copy and compare every object at every event.
    assert isinstance(configured().persistence.diffbase_storage, NoDiffBase)


def test_named_namespaces_need_no_cluster_scan_but_globs_do() -> None:
    assert configured(namespaces=["team-a"]).scanning.disabled is True
    assert configured(namespaces=["team-*"]).scanning.disabled is False
    assert configured().scanning.disabled is False


def test_kopf_lists_in_chunks() -> None:
    # A first listing of thousands of objects must not sit in memory whole.
    assert configured().watching.chunk_size == 250


def test_kopf_keeps_no_idle_task_for_long() -> None:
    # A restart's thousands of listed objects do not all hold a task for seconds.
    assert configured().queueing.idle_timeout <= 1.0
