"""The RBAC rules the operator needs: written once, here.

`make manifests` renders them into config/rbac/ (kustomize) and into the Helm chart's
files/rbac-rules.yaml; tests check that both say exactly this. Each rule is what a code path
uses: nothing more (least privilege).
"""

from __future__ import annotations

from typing import Any

from database_operator.api.models import GROUP, PLURAL

Rule = dict[str, list[str]]

#: Rules for the namespaces the operator watches (a Role per namespace, or part of a ClusterRole).
NAMESPACED_RULES: list[Rule] = [
    # Kopf watches Databases; the operator patches their metadata (its finalizer).
    {"apiGroups": [GROUP], "resources": [PLURAL], "verbs": ["get", "list", "watch", "patch"]},
    # Status is written only through the status subresource.
    {"apiGroups": [GROUP], "resources": [f"{PLURAL}/status"], "verbs": ["get", "patch"]},
    # Owner references with blockOwnerDeletion need this where the OwnerReferencesPermission-
    # Enforcement admission plugin is on.
    {"apiGroups": [GROUP], "resources": [f"{PLURAL}/finalizers"], "verbs": ["update"]},
    # Children: read, create, server-side apply. Deployments and Services are also watched,
    # and deleted when they are the operator's own and the spec no longer asks for them (read
    # replicas scaled away) or a Deployment's immutable selector must change.
    {
        "apiGroups": ["apps"],
        "resources": ["deployments"],
        "verbs": ["get", "list", "watch", "create", "patch", "delete"],
    },
    {
        "apiGroups": [""],
        "resources": ["services"],
        "verbs": ["get", "list", "watch", "create", "patch", "delete"],
    },
    # PVCs are watched too (their Database's reconcile reads them from the watch's cache).
    {
        "apiGroups": [""],
        "resources": ["persistentvolumeclaims"],
        "verbs": ["get", "list", "watch", "create", "patch", "delete"],
    },
    # Secrets are read by name, never listed or watched (list/watch would let the operator read
    # every Secret in its namespaces); deleted only with deletionPolicy Delete. The connection
    # Secret is a child too.
    {"apiGroups": [""], "resources": ["secrets"], "verbs": ["get", "create", "patch", "delete"]},
    # Kubernetes Events on Databases (the operator posts them).
    {"apiGroups": [""], "resources": ["events"], "verbs": ["create"]},
]

#: Extra rules when the operator watches every namespace (a ClusterRole).
CLUSTER_RULES: list[Rule] = [
    # Kopf follows CRDs to start and stop its watches (scanning; off for named namespaces).
    {
        "apiGroups": ["apiextensions.k8s.io"],
        "resources": ["customresourcedefinitions"],
        "verbs": ["list", "watch"],
    },
]

#: HA only (peering on): the KopfPeering of each watched namespace, which the operator creates.
PEERING_NAMESPACED_RULES: list[Rule] = [
    {
        "apiGroups": ["kopf.dev"],
        "resources": ["kopfpeerings"],
        "verbs": ["get", "list", "watch", "create", "patch"],
    },
]

#: HA only, watching every namespace: one ClusterKopfPeering instead.
PEERING_CLUSTER_RULES: list[Rule] = [
    {
        "apiGroups": ["kopf.dev"],
        "resources": ["clusterkopfpeerings"],
        "verbs": ["get", "list", "watch", "create", "patch"],
    },
]


def cluster_role_rules(peering: bool = False) -> list[Rule]:
    """The ClusterRole of an operator that watches every namespace."""
    return NAMESPACED_RULES + CLUSTER_RULES + (PEERING_CLUSTER_RULES if peering else [])


def namespaced_rules(peering: bool = False) -> list[Rule]:
    """The Role in each namespace of an operator that watches named namespaces."""
    return NAMESPACED_RULES + (PEERING_NAMESPACED_RULES if peering else [])


def rules_file() -> dict[str, Any]:
    """What the Helm chart reads (files/rbac-rules.yaml)."""
    return {
        "namespaced": NAMESPACED_RULES,
        "cluster": CLUSTER_RULES,
        "peeringNamespaced": PEERING_NAMESPACED_RULES,
        "peeringCluster": PEERING_CLUSTER_RULES,
    }


def cluster_role(name: str = "database-operator") -> dict[str, Any]:
    """The ClusterRole of config/rbac/role.yaml (one replica, no peering)."""
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRole",
        "metadata": {"name": name},
        "rules": cluster_role_rules(),
    }
