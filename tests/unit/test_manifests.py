"""Generated manifests (CRDs, RBAC) are committed exactly as their single sources make them."""

from __future__ import annotations

import json
import runpy
from pathlib import Path
from typing import Any

import pytest
import yaml

from database_operator import rbac

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "helm" / "database-operator"
#: hack/manifests.py's functions (a script, not a package).
MANIFESTS = runpy.run_path(str(ROOT / "hack" / "manifests.py"))


def test_every_generated_file_is_up_to_date() -> None:
    generated = MANIFESTS["generated"]()
    stale = [
        str(path.relative_to(ROOT)) for path, text in generated.items() if path.read_text() != text
    ]
    assert stale == [], f"run `make manifests`: {stale}"


def test_cluster_role_is_the_rules_of_rbac_py() -> None:
    role = yaml.safe_load((ROOT / "config" / "rbac" / "role.yaml").read_text())
    assert role["rules"] == rbac.cluster_role_rules()


def test_no_rule_grants_wildcards_or_secret_updates() -> None:
    """Secrets may be listed and watched (the operator watches the ones it generated, selected by
    its label on the server: docs/operations.md), never replaced whole."""
    for rule in rbac.cluster_role_rules() + rbac.namespaced_rules() + rbac.lease_rules():
        assert "*" not in rule["verbs"] + rule["resources"] + rule["apiGroups"]
        if "secrets" in rule["resources"]:
            assert "update" not in rule["verbs"]


def test_webhook_rules_are_narrowed_by_name_where_kubernetes_allows() -> None:
    """Every webhook rule but `create` (whose object has no name yet) and the namespaces' when
    watching all of them names its objects; none deletes, and only the namespaces' (by name:
    a list or watch with the name's field selector) lists or watches."""
    named = rbac.webhook_cluster_rules("cfg", ["a"]) + rbac.webhook_secret_rules("s")
    for rule in named:
        assert not {"delete", "*"} & set(rule["verbs"]), rule
        if {"list", "watch"} & set(rule["verbs"]):
            assert rule["resources"] == ["namespaces"] and rule["resourceNames"] == ["a"], rule
        assert rule.get("resourceNames") or rule["verbs"] == ["create"], rule
    assert rbac.webhook_cluster_rules("cfg", [])[0] == rbac.WEBHOOK_NAMESPACES_RULE
    assert rbac.webhook_cluster_rules(self_managed=False) == [rbac.WEBHOOK_NAMESPACES_RULE]


def test_lease_rules_are_narrowed_to_the_lease_but_for_create() -> None:
    """The Lease's name is known before it exists: everything but `create` (RBAC cannot narrow
    it by name) names it; no list, patch nor delete."""
    get_watch_update, create = rbac.lease_rules("ha")
    assert get_watch_update["resourceNames"] == ["ha"]
    assert set(get_watch_update["verbs"]) == {"get", "watch", "update"}
    assert create["verbs"] == ["create"] and "resourceNames" not in create
    for rule in (get_watch_update, create):
        assert (rule["apiGroups"], rule["resources"]) == (["coordination.k8s.io"], ["leases"])


def test_kustomize_leader_election_role_is_in_the_operators_namespace_on_its_lease() -> None:
    role, binding = yaml.safe_load_all(
        (ROOT / "config" / "rbac" / "leader_election_role.yaml").read_text()
    )
    manager = list(yaml.safe_load_all((ROOT / "config" / "manager" / "manager.yaml").read_text()))
    deployment = next(doc for doc in manager if doc["kind"] == "Deployment")
    args = deployment["spec"]["template"]["spec"]["containers"][0]["args"]
    assert "--leader-election" in args
    lease = next(arg.split("=", 1)[1] for arg in args if arg.startswith("--lease-name="))
    assert role["kind"] == "Role" and binding["kind"] == "RoleBinding"
    assert role["metadata"]["namespace"] == deployment["metadata"]["namespace"]
    assert role["rules"] == rbac.lease_rules(lease)
    assert binding["roleRef"]["name"] == role["metadata"]["name"]


@pytest.mark.parametrize("path", ["webhook_role.yaml", "leader_election_role.yaml"])
def test_kustomize_roles_bind_the_operator_account(path: str) -> None:
    documents = list(yaml.safe_load_all((ROOT / "config" / "rbac" / path).read_text()))
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


# --- the chart's README, from values.yaml's comments --------------------------------------------


def values_leaves() -> list[tuple[str, Any]]:
    text = (CHART / "values.yaml").read_text()
    leaves: list[tuple[str, Any]] = MANIFESTS["values_leaves"](
        yaml.safe_load(text), MANIFESTS["values_comments"](text)
    )
    return leaves


def schema_leaves(schema: dict[str, Any], prefix: str = "") -> list[str]:
    """The values values.schema.json defines one by one (a free-form map is one value)."""
    paths = []
    for name, child in schema.get("properties", {}).items():
        path = f"{prefix}{name}"
        if child.get("additionalProperties") is False and "properties" in child:
            paths += schema_leaves(child, f"{path}.")
        elif path != "global":  # Helm's own, for subcharts
            paths.append(path)
    return paths


def test_chart_readme_is_generated_from_chart_yaml_and_values_yaml() -> None:
    readme = (CHART / "README.md").read_text()
    assert readme == MANIFESTS["chart_readme"](
        (CHART / "Chart.yaml").read_text(), (CHART / "values.yaml").read_text()
    ), "run `make manifests`"
    chart = yaml.safe_load((CHART / "Chart.yaml").read_text())
    assert f"\n# {chart['name']}\n\n{chart['description']}\n" in readme
    assert (
        "helm install database-operator oci://ghcr.io/example/charts/database-operator"
        " --version <version>"
    ) in readme
    assert f"({chart['home']}#install)" in readme
    assert (
        "cosign verify ghcr.io/example/charts/database-operator:<version> \\\n"
        "  --certificate-identity https://github.com/example/database-operator/"
        ".github/workflows/release.yaml@refs/tags/v<version> \\\n"
        "  --certificate-oidc-issuer https://token.actions.githubusercontent.com\n"
    ) in readme
    rows = [line for line in readme.splitlines() if line.startswith("| `")]
    assert [row.split("`")[1] for row in rows] == [path for path, _ in values_leaves()]


def test_every_value_of_values_yaml_has_a_comment_naming_it() -> None:
    comments = MANIFESTS["values_comments"]((CHART / "values.yaml").read_text())
    for path, _ in values_leaves():
        assert comments.get(path, "").startswith(f"{path} "), f"values.yaml: comment {path}"


def test_the_readme_lists_exactly_the_values_of_the_schema() -> None:
    schema = json.loads((CHART / "values.schema.json").read_text())
    assert sorted(path for path, _ in values_leaves()) == sorted(schema_leaves(schema))


def test_values_comments_and_leaves_follow_the_yaml_structure() -> None:
    text = """\
# A heading, then a blank line: it describes no key.

# a is one.
a: 1
b:
  # b.c is
  # two lines.
  c: [x]
  d:
    - item
# e is a map with a comment: one value.
e:
  f: 2
"""
    comments = MANIFESTS["values_comments"](text)
    assert comments == {
        "a": "a is one.",
        "b.c": "b.c is two lines.",
        "e": "e is a map with a comment: one value.",
    }
    leaves = MANIFESTS["values_leaves"](yaml.safe_load(text), comments)
    assert leaves == [("a", 1), ("b.c", ["x"]), ("b.d", ["item"]), ("e", {"f": 2})]
    readme = MANIFESTS["chart_readme"](
        "name: n\ndescription: d\nhome: https://github.com/O/r\n",
        "# x is `a|b` or <c|d>.\nx: '|'\n",
    )
    assert '| `x` | `"\\|"` | x is `a\\|b` or &lt;c\\|d&gt;. |' in readme
    # GHCR's names are lowercase; the signing identity keeps GitHub's spelling.
    assert "oci://ghcr.io/o/charts/database-operator --version <version>" in readme
    assert "https://github.com/O/r/.github/workflows/release.yaml@refs/tags/v<version>" in readme


# --- the deployer (config/deployer) -------------------------------------------------------------


def test_deployer_holds_every_rule_the_chart_grants() -> None:
    """Kubernetes refuses a role or binding that grants more than its author holds: the
    deployer holds the operator's, the webhooks' and the aggregated rules as they are."""
    cluster = rbac.deployer_cluster_rules()
    granted = [
        *rbac.cluster_role_rules(),
        *rbac.namespaced_rules(),
        *rbac.webhook_cluster_rules(rbac.DEPLOYER_RELEASE, []),
        *(rule for rules in rbac.AGGREGATE_RULES.values() for rule in rules),
    ]
    assert [rule for rule in granted if rule not in cluster] == []
    namespaced = rbac.deployer_namespaced_rules()
    secret = f"{rbac.DEPLOYER_RELEASE}-webhook-cert"
    assert all(rule in namespaced for rule in rbac.webhook_secret_rules(secret))
    # The Lease's rules for any name: the chart's, one per shard.
    assert rbac.LEASE_RULE in namespaced and rbac.LEASE_CREATE_RULE in namespaced


def test_deployer_may_not_escalate_bind_or_update_secrets_cluster_wide() -> None:
    for rule in rbac.deployer_cluster_rules() + rbac.deployer_namespaced_rules():
        assert "*" not in rule["verbs"] + rule["resources"] + rule["apiGroups"], rule
        assert not {"escalate", "bind", "impersonate"} & set(rule["verbs"]), rule
    # It holds the operator's verbs on Secrets to grant them (Kubernetes refuses to let anyone
    # grant what they do not hold), and nothing more.
    operator_verbs = {
        verb
        for rule in rbac.cluster_role_rules()
        if "secrets" in rule["resources"]
        for verb in rule["verbs"]
    }
    for rule in rbac.deployer_cluster_rules():
        if "secrets" in rule["resources"]:
            assert set(rule["verbs"]) <= operator_verbs, rule
    # Cluster-scoped objects (and Roles anywhere) are changed only by the release's names.
    guarded = {"apiextensions.k8s.io", "rbac.authorization.k8s.io", "admissionregistration.k8s.io"}
    for rule in rbac.deployer_cluster_rules():
        if (guarded & set(rule["apiGroups"]) or "namespaces" in rule["resources"]) and {
            "update",
            "patch",
            "delete",
        } & set(rule["verbs"]):
            assert rule.get("resourceNames"), rule


def test_config_deployer_is_rbac_py_deployer() -> None:
    text = (ROOT / "config" / "deployer" / "deployer.yaml").read_text()
    assert list(yaml.safe_load_all(text)) == rbac.deployer_manifests()
