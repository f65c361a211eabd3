"""The chart's aggregated ClusterRoles really reach Kubernetes' built-in admin, edit and view
roles: aggregation is done by kube-controller-manager's clusterrole-aggregation controller, so
only the full cluster shows it. ServiceAccounts bound in a namespace to the built-in roles (never
to ours) are asked what they may do with Databases, and an editor creates and scales one."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from database_operator import rbac
from tests.cluster import Cluster, wait_for
from tests.integration.helm import CHART, Helm, can_i

DATABASES = "databases.databases.example.com"
#: What each built-in role may do with Databases once ours are aggregated into it: request
#: (kubectl auth can-i's arguments) -> allowed. Status is the operator's to write, nobody else's.
EXPECTED: dict[tuple[str, ...], dict[str, bool]] = {
    ("create", DATABASES): {"admin": True, "edit": True, "view": False},
    ("patch", DATABASES): {"admin": True, "edit": True, "view": False},
    ("delete", DATABASES): {"admin": True, "edit": True, "view": False},
    ("deletecollection", DATABASES): {"admin": True, "edit": True, "view": False},
    ("list", DATABASES): {"admin": True, "edit": True, "view": True},
    ("watch", DATABASES): {"admin": True, "edit": True, "view": True},
    ("patch", DATABASES, "--subresource=scale"): {"admin": True, "edit": True, "view": False},
    ("get", DATABASES, "--subresource=status"): {"admin": True, "edit": True, "view": True},
    ("patch", DATABASES, "--subresource=status"): {"admin": False, "edit": False, "view": False},
}


def aggregated_roles(home: Path, kubeconfig: Path) -> list[dict[str, object]]:
    """The chart's aggregated ClusterRoles, as `helm template` renders them with its defaults."""
    rendered = Helm(kubeconfig, home)(
        "template", "database-operator", str(CHART), "--show-only", "templates/rbac.yaml"
    ).stdout
    labels = {rbac.AGGREGATE_LABEL.format(role=role) for role in rbac.AGGREGATE_RULES}
    roles = [
        doc
        for doc in yaml.safe_load_all(rendered)
        if doc and labels & set(doc["metadata"].get("labels", {}))
    ]
    assert len(roles) == len(labels), rendered
    return roles


@pytest.fixture(scope="module")
def accounts(full_cluster: Cluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A namespace with a ServiceAccount per built-in role, bound to it there by a RoleBinding,
    and the chart's aggregated ClusterRoles applied; all removed afterwards."""
    roles = aggregated_roles(tmp_path_factory.mktemp("helm"), full_cluster.kubeconfig)
    manifest = json.dumps({"apiVersion": "v1", "kind": "List", "items": roles})
    full_cluster.kubectl("apply", "-f", "-", input=manifest)
    try:
        with full_cluster.scratch_namespace("aggregation") as namespace:
            for role in rbac.AGGREGATE_RULES:
                full_cluster.kubectl("create", "serviceaccount", role, "-n", namespace)
                full_cluster.kubectl(
                    "create", "rolebinding", role, "-n", namespace,
                    f"--clusterrole={role}", f"--serviceaccount={namespace}:{role}",
                )  # fmt: skip
            yield namespace
    finally:
        full_cluster.kubectl("delete", "-f", "-", "--ignore-not-found", input=manifest)


def account(namespace: str, role: str) -> str:
    return f"system:serviceaccount:{namespace}:{role}"


def test_built_in_roles_grant_what_ours_add_and_nothing_more(
    full_cluster: Cluster, accounts: str
) -> None:
    def answers() -> dict[tuple[tuple[str, ...], str], bool]:
        return {
            (request, role): can_i(full_cluster, account(accounts, role), *request, "-n", accounts)
            == "yes"
            for request, by_role in EXPECTED.items()
            for role in by_role
        }

    expected = {
        (request, role): allowed
        for request, by_role in EXPECTED.items()
        for role, allowed in by_role.items()
    }
    # The controller aggregates within a moment of the roles' creation.
    wait_for(lambda: answers() == expected, timeout=30, interval=0.5, what="aggregation")
    # Elsewhere, nothing: the bindings are the namespace's.
    assert can_i(full_cluster, account(accounts, "admin"), "list", DATABASES, "-A") == "no"


def test_an_editor_creates_and_scales_a_database_and_a_viewer_may_not(
    full_cluster: Cluster, accounts: str
) -> None:
    database = {
        "apiVersion": "databases.example.com/v1",
        "kind": "Database",
        "metadata": {"name": "by-editor", "namespace": accounts},
        "spec": {"engine": "postgres"},
    }
    # Wait as the first test does, should this one run alone.
    wait_for(
        lambda: (
            can_i(full_cluster, account(accounts, "edit"), "create", DATABASES, "-n", accounts)
            == "yes"
        ),
        timeout=30,
        interval=0.5,
        what="aggregation into edit",
    )
    as_editor = f"--as={account(accounts, 'edit')}"
    full_cluster.kubectl("create", "-f", "-", as_editor, input=json.dumps(database))
    full_cluster.kubectl("scale", "database/by-editor", "--replicas=2", "-n", accounts, as_editor)
    assert full_cluster.get_db(accounts, "by-editor")["spec"]["replicas"] == 2

    as_viewer = f"--as={account(accounts, 'view')}"
    got = json.loads(
        full_cluster.kubectl(
            "get", "database", "by-editor", "-n", accounts, "-o", "json", as_viewer
        )
    )
    assert got["metadata"]["name"] == "by-editor"
    refused = full_cluster.kubectl(
        "delete", "database", "by-editor", "-n", accounts, as_viewer, check=False
    )
    assert "forbidden" in refused.lower(), refused
