"""The webhook configurations and the CRD's conversion stanza the operator's code describes
(one source for config/webhook, the chart and the local registration): each deliberate choice
pinned, and the hooks' paths equal to Kopf's handler ids."""

from __future__ import annotations

import base64
from typing import Any

import kopf
import pytest

from database_operator.api.models import GROUP, PLURAL
from database_operator.config import Settings
from database_operator.controller import Controller
from database_operator.handlers import register
from database_operator.metrics import Metrics
from database_operator.runner.build import backups_beside
from database_operator.webhooks import configuration as hooks
from database_operator.webhooks.admission import Admission
from tests.fakekube import FakeKube


def configurations(watched: list[str], own: str | None = "ops") -> list[dict[str, Any]]:
    return hooks.configurations(
        "database-operator",
        lambda path: hooks.service_client("ops", "database-operator-webhook", path),
        hooks.namespace_selector(watched, own),
    )


def entries(watched: list[str] | None = None) -> dict[str, dict[str, Any]]:
    return {config["kind"]: config["webhooks"][0] for config in configurations(watched or [])}


def test_both_fail_closed_with_no_side_effects_and_a_short_timeout() -> None:
    for kind, entry in entries().items():
        assert entry["failurePolicy"] == "Fail", kind
        assert entry["sideEffects"] == "None", kind
        assert entry["timeoutSeconds"] == hooks.TIMEOUT_S <= 10, kind
        assert entry["admissionReviewVersions"] == ["v1"], kind
        assert entry["matchPolicy"] == "Equivalent", kind  # v1beta1 requests, converted


def test_they_match_databases_of_the_group_in_v1_only() -> None:
    operations = {}
    for kind, entry in entries().items():
        (rule,) = entry["rules"]
        assert rule["apiGroups"] == [GROUP]
        assert rule["apiVersions"] == ["v1"]
        assert rule["resources"] == [PLURAL]
        assert rule["scope"] == "Namespaced"
        operations[kind] = rule["operations"]
    assert operations == {
        "MutatingWebhookConfiguration": ["CREATE", "UPDATE"],
        "ValidatingWebhookConfiguration": ["CREATE", "UPDATE", "DELETE"],
    }
    assert entries()["MutatingWebhookConfiguration"]["reinvocationPolicy"] == "Never"


def test_only_requests_a_webhook_could_change_or_refuse_are_sent() -> None:
    """The match conditions (kube-apiserver evaluates them: test_webhooks shows it): the
    mutating webhook only for an unset version, the validating one for a create, a delete, or
    an update that changes the spec."""
    conditions = {
        kind: [(c["name"], c["expression"]) for c in entry["matchConditions"]]
        for kind, entry in entries().items()
    }
    [(_, mutate)] = conditions["MutatingWebhookConfiguration"]
    [(_, validate)] = conditions["ValidatingWebhookConfiguration"]
    assert "object.spec.version == ''" in mutate
    assert "request.operation != 'UPDATE'" in validate
    assert "object.spec != oldObject.spec" in validate


@pytest.mark.parametrize("watched", [[], ["team-b", "team-a"]])
def test_never_kube_system_nor_the_operators_namespace(watched: list[str]) -> None:
    for entry in entries(watched).values():
        expressions = entry["namespaceSelector"]["matchExpressions"]
        assert {
            "key": "kubernetes.io/metadata.name",
            "operator": "NotIn",
            "values": ["kube-system", "ops"],
        } in expressions
        watching = [e for e in expressions if e["operator"] == "In"]
        assert watching == (
            [{"key": "kubernetes.io/metadata.name", "operator": "In", "values": sorted(watched)}]
            if watched
            else []
        )
    # Outside the cluster the operator has no namespace of its own: kube-system still.
    local = hooks.namespace_selector([], None)["matchExpressions"]
    assert local == [
        {"key": "kubernetes.io/metadata.name", "operator": "NotIn", "values": ["kube-system"]}
    ]


def test_a_pattern_among_the_watched_namespaces_widens_the_selector_to_all_but_the_exempt() -> None:
    # A selector cannot match "chainsaw-*": In [chainsaw-*] would let every Database through
    # unchecked, so the webhooks see all namespaces but the exempt ones instead.
    expressions = hooks.namespace_selector(["team-a", "chainsaw-*"], "ops")["matchExpressions"]
    assert expressions == [
        {
            "key": "kubernetes.io/metadata.name",
            "operator": "NotIn",
            "values": ["kube-system", "ops"],
        }
    ]


def test_clients_by_service_or_url_and_the_ca_bundle() -> None:
    assert hooks.service_client("ops", "svc", "/validate") == {
        "service": {"namespace": "ops", "name": "svc", "path": "/validate", "port": 443}
    }
    assert hooks.url_client("https://127.0.0.1:9443/", "/convert") == {
        "url": "https://127.0.0.1:9443/convert"
    }
    with_ca = hooks.with_ca(hooks.url_client("https://h", "/mutate"), b"PEM")
    assert base64.b64decode(with_ca["caBundle"]) == b"PEM"
    assert "caBundle" not in hooks.with_ca(hooks.url_client("https://h", "/mutate"), None)


def test_the_crds_conversion_stanza() -> None:
    client = hooks.service_client("ops", "svc", hooks.CONVERT_PATH)
    assert hooks.conversion(client) == {
        "strategy": "Webhook",
        "webhook": {"conversionReviewVersions": ["v1"], "clientConfig": client},
    }


def test_each_hooks_path_is_the_id_of_a_kopf_handler() -> None:
    """The API server calls /<path>; Kopf finds the handler by that id."""
    registry = kopf.OperatorRegistry()
    controller = Controller(FakeKube(), Settings(), Metrics(), lambda body: lambda *a: None)  # type: ignore[arg-type]
    register(controller, backups_beside(controller), registry, Admission(FakeKube()))  # type: ignore[arg-type]
    ids = {handler.id for handler in registry._webhooks.get_all_handlers()}
    assert {hook.path.lstrip("/") for hook in hooks.HOOKS} <= ids
    for hook in hooks.HOOKS:
        (handler,) = [h for h in registry._webhooks.get_all_handlers() if h.id == hook.handler_id]
        assert set(handler.operations or []) == set(hook.operations)
