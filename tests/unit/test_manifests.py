"""Generated manifests (CRDs, RBAC) are committed exactly as their single sources make them."""

from __future__ import annotations

import runpy
from pathlib import Path

import yaml

from database_operator import rbac

ROOT = Path(__file__).resolve().parents[2]


def test_every_generated_file_is_up_to_date() -> None:
    generated = runpy.run_path(str(ROOT / "hack" / "manifests.py"))["generated"]()
    stale = [
        str(path.relative_to(ROOT)) for path, text in generated.items() if path.read_text() != text
    ]
    assert stale == [], f"run `make manifests`: {stale}"


def test_cluster_role_is_the_rules_of_rbac_py() -> None:
    role = yaml.safe_load((ROOT / "config" / "rbac" / "role.yaml").read_text())
    assert role["rules"] == rbac.cluster_role_rules(peering=False)


def test_no_rule_grants_wildcards_or_secret_listing() -> None:
    for rule in rbac.cluster_role_rules(peering=True) + rbac.namespaced_rules(peering=True):
        assert "*" not in rule["verbs"] + rule["resources"] + rule["apiGroups"]
        if "secrets" in rule["resources"]:
            assert not {"list", "watch"} & set(rule["verbs"])


def test_webhook_rules_are_narrowed_by_name_where_kubernetes_allows() -> None:
    """Every webhook rule but `create` (whose object has no name yet) and the namespaces'
    `get` when watching all of them names its objects; none lists, watches or deletes."""
    named = rbac.webhook_cluster_rules("cfg", ["a"]) + rbac.webhook_secret_rules("s")
    for rule in named:
        assert not {"list", "watch", "delete", "*"} & set(rule["verbs"]), rule
        assert rule.get("resourceNames") or rule["verbs"] == ["create"], rule
    assert rbac.webhook_cluster_rules("cfg", [])[0] == rbac.WEBHOOK_NAMESPACES_RULE
    assert rbac.webhook_cluster_rules(self_managed=False) == [rbac.WEBHOOK_NAMESPACES_RULE]


def test_kustomize_webhook_roles_bind_the_operator_account() -> None:
    documents = list(
        yaml.safe_load_all((ROOT / "config" / "rbac" / "webhook_role.yaml").read_text())
    )
    account = yaml.safe_load((ROOT / "config" / "rbac" / "service_account.yaml").read_text())
    for binding in (doc for doc in documents if doc["kind"].endswith("Binding")):
        assert binding["subjects"] == [
            {
                "kind": "ServiceAccount",
                "name": account["metadata"]["name"],
                "namespace": "database-operator-system",
            }
        ]


def test_kustomize_aggregated_roles_join_admin_edit_and_view_with_rbac_py_rules() -> None:
    documents = list(
        yaml.safe_load_all((ROOT / "config" / "rbac" / "aggregate_roles.yaml").read_text())
    )
    assert documents == rbac.aggregated_cluster_roles()
    labels = {label for doc in documents for label in doc["metadata"]["labels"]}
    assert labels == {rbac.AGGREGATE_LABEL.format(role=role) for role in ("admin", "edit", "view")}
