"""The RBAC rules the operator needs: written once, here.

`make manifests` renders them into config/rbac/ (kustomize) and into the Helm chart's
files/rbac-rules.yaml; tests check that both say exactly this. Each rule is what a code path
uses: nothing more (least privilege).
"""

from __future__ import annotations

from typing import Any

from database_operator.api.backup import BACKUP_PLURAL
from database_operator.api.models import GROUP, PLURAL
from database_operator.webhooks import configuration as webhooks

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
    # Secrets: the ones the operator generated (credentials, connection) are watched, selected
    # by its label on the server, so a steady resync reads none; a user's is read by name. RBAC
    # cannot narrow list/watch to a label: what this grants and why it is acceptable is in
    # docs/operations.md ("Why the operator may list Secrets"). Deleted only with
    # deletionPolicy Delete, and only the ones it generated.
    {
        "apiGroups": [""],
        "resources": ["secrets"],
        "verbs": ["get", "list", "watch", "create", "patch", "delete"],
    },
    # Kubernetes Events on Databases and DatabaseBackups (the operator posts them).
    {"apiGroups": [""], "resources": ["events"], "verbs": ["create"]},
    # DatabaseBackups: watched and reconciled; the schedule creates them, retention deletes
    # them, and the operator patches their metadata (its finalizer: their data goes first).
    {
        "apiGroups": [GROUP],
        "resources": [BACKUP_PLURAL],
        "verbs": ["get", "list", "watch", "create", "patch", "delete"],
    },
    {"apiGroups": [GROUP], "resources": [f"{BACKUP_PLURAL}/status"], "verbs": ["get", "patch"]},
    # Their Jobs carry an owner reference with blockOwnerDeletion.
    {"apiGroups": [GROUP], "resources": [f"{BACKUP_PLURAL}/finalizers"], "verbs": ["update"]},
    # Backups, restores and the deletion of a backup's data run in Jobs (watched like the other
    # children); a running backup Job is deleted when its DatabaseBackup is, and one whose pod
    # did not start by the start deadline is stopped (patched: spec.suspend, an annotation).
    {
        "apiGroups": ["batch"],
        "resources": ["jobs"],
        "verbs": ["get", "list", "watch", "create", "patch", "delete"],
    },
    # What a finished Job's agent stored, or why it failed, is in its pod's termination
    # message; why an unfinished one's pod has not started, in its status. Listed by the Job's
    # label. With spec.failover, the instances' pods are listed by their labels, their role
    # label is patched once the engine confirms it, and a pod that may still accept writes
    # while another instance is promoted is deleted (fenced). No pods/exec: the operator asks
    # the engines over the network (docs/architecture.md, "Instances and failover").
    {"apiGroups": [""], "resources": ["pods"], "verbs": ["list", "patch", "delete"]},
    # spec.failover: the ConfigMap <name>-instances names the target primary; the instances
    # read it as they start. Made once, patched at a failover.
    {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "create", "patch"]},
    # spec.networkPolicy: the NetworkPolicy <name>, watched like the other children, deleted
    # when the spec turns it off.
    {
        "apiGroups": ["networking.k8s.io"],
        "resources": ["networkpolicies"],
        "verbs": ["get", "list", "watch", "create", "patch", "delete"],
    },
    # Read only: upgraded from a release that elected its active replica with Kopf's peering,
    # a new replica waits until the old ones have left the peering object (leader.py).
    {"apiGroups": ["kopf.dev"], "resources": ["kopfpeerings"], "verbs": ["get"]},
]

#: Extra rules when the operator watches every namespace (a ClusterRole).
CLUSTER_RULES: list[Rule] = [
    # Kopf follows CRDs to start and stop its watches (scanning; off for named namespaces).
    {
        "apiGroups": ["apiextensions.k8s.io"],
        "resources": ["customresourcedefinitions"],
        "verbs": ["list", "watch"],
    },
    # Read only, as for kopfpeerings above, when watching every namespace.
    {"apiGroups": ["kopf.dev"], "resources": ["clusterkopfpeerings"], "verbs": ["get"]},
]

#: Leader election (HA): the Lease, in the operator's own namespace, narrowed to its name but for
#: `create` (which RBAC cannot narrow by name: the object does not exist yet). `watch` with the
#: name's field selector lets a standby take a released Lease at once.
LEASE_CREATE_RULE: Rule = {
    "apiGroups": ["coordination.k8s.io"],
    "resources": ["leases"],
    "verbs": ["create"],
}
LEASE_RULE: Rule = {
    "apiGroups": ["coordination.k8s.io"],
    "resources": ["leases"],
    "verbs": ["get", "watch", "update"],
}


#: Webhooks on (any certificate mode): the admission quota reads the namespaces' annotations, from
#: a metadata-only watch (webhooks/namespaces.py), or by a read while it is down. Namespaces are
#: cluster-scoped, so this needs a ClusterRole even for named namespaces; there it is narrowed to
#: them by resourceNames (a list or watch then names one by its field selector).
WEBHOOK_NAMESPACES_RULE: Rule = {
    "apiGroups": [""],
    "resources": ["namespaces"],
    "verbs": ["get", "list", "watch"],
}

#: Self-managed certificates only: the operator writes its CA into the caBundle of its own two
#: webhook configurations (resourceNames: their name) and of the Database CRD's conversion.
WEBHOOK_CONFIGURATIONS_RULE: Rule = {
    "apiGroups": ["admissionregistration.k8s.io"],
    "resources": ["mutatingwebhookconfigurations", "validatingwebhookconfigurations"],
    "verbs": ["get", "update"],
}
WEBHOOK_CRD_RULE: Rule = {
    "apiGroups": ["apiextensions.k8s.io"],
    "resources": ["customresourcedefinitions"],
    "verbs": ["get", "patch"],
    "resourceNames": [f"{PLURAL}.{GROUP}"],
}
#: Self-managed certificates only, in the operator's own namespace: its CA and certificate
#: Secret (resourceNames: its name). `create` cannot be narrowed by name (the name is in the
#: body), hence a rule of its own.
WEBHOOK_SECRET_RULE: Rule = {
    "apiGroups": [""],
    "resources": ["secrets"],
    "verbs": ["get", "update"],
}
WEBHOOK_SECRET_CREATE_RULE: Rule = {
    "apiGroups": [""],
    "resources": ["secrets"],
    "verbs": ["create"],
}


#: Kubernetes' built-in user-facing ClusterRoles take in the rules of every ClusterRole carrying
#: these labels (their aggregationRule), so namespace admins, editors and viewers (RoleBindings
#: to admin/edit/view) can manage or read Databases without a role of ours to bind.
AGGREGATE_LABEL = "rbac.authorization.k8s.io/aggregate-to-{role}"
#: admin and edit: everything a user does to Databases (kubectl scale too) and DatabaseBackups
#: (take one, delete one), but never their status, which only the operator writes.
AGGREGATE_EDIT_RULES: list[Rule] = [
    {
        "apiGroups": [GROUP],
        "resources": [PLURAL, BACKUP_PLURAL],
        "verbs": [
            "create",
            "delete",
            "deletecollection",
            "get",
            "list",
            "patch",
            "update",
            "watch",
        ],
    },
    {"apiGroups": [GROUP], "resources": [f"{PLURAL}/scale"], "verbs": ["get", "patch", "update"]},
]
#: view: read Databases, DatabaseBackups and their status. Kubernetes' view role is itself
#: aggregated into edit, and edit into admin, so these reach all three.
AGGREGATE_VIEW_RULES: list[Rule] = [
    {
        "apiGroups": [GROUP],
        "resources": [PLURAL, f"{PLURAL}/status", BACKUP_PLURAL, f"{BACKUP_PLURAL}/status"],
        "verbs": ["get", "list", "watch"],
    },
]
#: The three aggregated ClusterRoles' rules, by the built-in role they join.
AGGREGATE_RULES: dict[str, list[Rule]] = {
    "admin": AGGREGATE_EDIT_RULES,
    "edit": AGGREGATE_EDIT_RULES,
    "view": AGGREGATE_VIEW_RULES,
}


def _named(rule: Rule, names: list[str]) -> Rule:
    return {**rule, "resourceNames": list(names)} if names else dict(rule)


def webhook_cluster_rules(
    configuration: str = webhooks.DEFAULT_CONFIGURATION,
    watched: list[str] | None = None,
    self_managed: bool = True,
) -> list[Rule]:
    """The webhooks' ClusterRole: read the watched namespaces; with self-managed certificates,
    write the caBundles of the configurations named ``configuration`` and of the CRD."""
    rules = [_named(WEBHOOK_NAMESPACES_RULE, watched or [])]
    if self_managed:
        rules += [_named(WEBHOOK_CONFIGURATIONS_RULE, [configuration]), WEBHOOK_CRD_RULE]
    return rules


def webhook_secret_rules(secret: str = webhooks.DEFAULT_SECRET) -> list[Rule]:
    """The webhooks' Role in the operator's namespace (self-managed certificates only)."""
    return [_named(WEBHOOK_SECRET_RULE, [secret]), WEBHOOK_SECRET_CREATE_RULE]


def cluster_role_rules() -> list[Rule]:
    """The ClusterRole of an operator that watches every namespace."""
    return NAMESPACED_RULES + CLUSTER_RULES


def namespaced_rules() -> list[Rule]:
    """The Role in each namespace of an operator that watches named namespaces."""
    return list(NAMESPACED_RULES)


def lease_rules(name: str = "database-operator") -> list[Rule]:
    """The Role in the operator's namespace for leader election on the Lease ``name``."""
    return [_named(LEASE_RULE, [name]), LEASE_CREATE_RULE]


def leader_election_roles(
    namespace: str = webhooks.DEFAULT_NAMESPACE,
    account: str = "database-operator",
    name: str = "database-operator-leader-election",
    lease: str = "database-operator",
) -> list[dict[str, Any]]:
    """config/rbac/leader_election_role.yaml: the Role on the Lease ``lease`` in the operator's
    namespace, and its binding, for the names `kubectl apply -k config/default` installs."""
    subjects = [{"kind": "ServiceAccount", "name": account, "namespace": namespace}]
    return role_and_binding(
        "Role", {"name": name, "namespace": namespace}, lease_rules(lease), subjects
    )


def rules_file() -> dict[str, Any]:
    """What the Helm chart reads (files/rbac-rules.yaml)."""
    return {
        "namespaced": NAMESPACED_RULES,
        "cluster": CLUSTER_RULES,
        # Without resourceNames: the chart adds its Lease's name, as lease_rules() does.
        "lease": LEASE_RULE,
        "leaseCreate": LEASE_CREATE_RULE,
        # Without resourceNames: the chart adds its release's names, as webhook_*_rules() do.
        "webhook": {
            "namespaces": WEBHOOK_NAMESPACES_RULE,
            "configurations": WEBHOOK_CONFIGURATIONS_RULE,
            "crd": WEBHOOK_CRD_RULE,
            "secret": WEBHOOK_SECRET_RULE,
            "secretCreate": WEBHOOK_SECRET_CREATE_RULE,
        },
        # The ClusterRoles aggregated into admin, edit and view (rbac.aggregateToDefaultRoles).
        "aggregate": AGGREGATE_RULES,
    }


def cluster_role(name: str = "database-operator") -> dict[str, Any]:
    """The ClusterRole of config/rbac/role.yaml."""
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRole",
        "metadata": {"name": name},
        "rules": cluster_role_rules(),
    }


def role_and_binding(
    kind: str, metadata: dict[str, Any], rules: list[Rule], subjects: list[dict[str, str]]
) -> list[dict[str, Any]]:
    """A (Cluster)Role and the (Cluster)RoleBinding of the same name giving it to ``subjects``."""
    return [
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": kind,
            "metadata": metadata,
            "rules": rules,
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": f"{kind}Binding",
            "metadata": metadata,
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": kind,
                "name": metadata["name"],
            },
            "subjects": subjects,
        },
    ]


def webhook_roles(
    namespace: str = webhooks.DEFAULT_NAMESPACE,
    account: str = "database-operator",
    name: str = "database-operator-webhook",
) -> list[dict[str, Any]]:
    """config/rbac/webhook_role.yaml: the webhooks' ClusterRole and Role, with their bindings,
    for the names `kubectl apply -k config/default` installs (self-managed certificates)."""
    subjects = [{"kind": "ServiceAccount", "name": account, "namespace": namespace}]
    roles: list[tuple[str, dict[str, Any], list[Rule]]] = [
        ("ClusterRole", {"name": name}, webhook_cluster_rules()),
        ("Role", {"name": name, "namespace": namespace}, webhook_secret_rules()),
    ]
    return [
        obj
        for kind, metadata, rules in roles
        for obj in role_and_binding(kind, metadata, rules, subjects)
    ]


def aggregated_cluster_roles(name: str = "database-operator") -> list[dict[str, Any]]:
    """config/rbac/aggregate_roles.yaml: ``<name>-admin``, ``-edit`` and ``-view``, each
    labelled to join Kubernetes' role of that name."""
    return [
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRole",
            "metadata": {
                "name": f"{name}-{role}",
                "labels": {AGGREGATE_LABEL.format(role=role): "true"},
            },
            "rules": rules,
        }
        for role, rules in AGGREGATE_RULES.items()
    ]


# --- the deployer: what a CI deploy job needs ---------------------------------------------------

#: The deploy job's ServiceAccount, its namespace (the release's: `hack/deploy.sh`'s default),
#: the release's objects' name (the chart's fullname for the release "database-operator") and
#: the smoke test's namespace (hack/smoke.py's default).
DEPLOYER = "database-operator-deployer"
DEPLOYER_NAMESPACE = webhooks.DEFAULT_NAMESPACE
DEPLOYER_RELEASE = "database-operator"
SMOKE_NAMESPACE = "database-operator-smoke"
#: What Helm does to the objects of a release: read them (and watch them for --wait), create,
#: apply (server-side apply is a patch), update, and delete those an upgrade, a rollback or an
#: uninstall drops.
MANAGE = ["get", "list", "watch", "create", "update", "patch", "delete"]
#: The CRDs the chart installs (crds.enabled), named after the CRDs themselves; and Kopf's
#: peering CRDs, which releases before leader election installed: an upgrade keeps them (their
#: resource policy is "keep"), and the deployer may still delete them (docs/operations.md).
CHART_CRDS = [
    f"{PLURAL}.{GROUP}",
    f"{BACKUP_PLURAL}.{GROUP}",
    "kopfpeerings.kopf.dev",
    "clusterkopfpeerings.kopf.dev",
]


def _changes(api_group: str, resources: list[str], names: list[str]) -> list[Rule]:
    """Read and create ``resources``; change and delete only those ``names``. (`create` cannot
    be narrowed by name: the name is in the body.)"""
    return [
        {"apiGroups": [api_group], "resources": resources, "verbs": MANAGE[:4]},
        {
            "apiGroups": [api_group],
            "resources": resources,
            "verbs": MANAGE[4:],
            "resourceNames": names,
        },
    ]


def _distinct(rules: list[Rule]) -> list[Rule]:
    """``rules`` without repeats (admin's and edit's are the same)."""
    out: list[Rule] = []
    for rule in rules:
        if rule not in out:
            out.append(rule)
    return out


def deployer_cluster_rules(fullname: str = DEPLOYER_RELEASE) -> list[Rule]:
    """The deploy job's ClusterRole: the chart's cluster-scoped objects and its Roles in the
    watched namespaces (changed only by their names: the release's ``fullname``), the smoke
    test's reads and writes, and every rule the chart grants.

    Kubernetes lets nobody grant permissions they do not hold, unless they may `escalate`
    (roles) and `bind` (bindings). The deployer holds them: it gains nothing by it, since it
    creates the operator's Deployment, which runs with the operator's ServiceAccount and so
    with the operator's rules anyway. `escalate` and `bind` would instead let it grant any
    permission, its own included, where a role's name is all that narrows them.
    """
    role_names = [fullname, f"{fullname}-webhook"]
    return _distinct(
        [
            # --- Helm: the chart's cluster-scoped objects, and its Roles anywhere (watchNamespaces)
            *_changes("apiextensions.k8s.io", ["customresourcedefinitions"], CHART_CRDS),
            *_changes(
                "rbac.authorization.k8s.io",
                ["clusterroles"],
                [*role_names, *(f"{fullname}-{role}" for role in AGGREGATE_RULES)],
            ),
            *_changes("rbac.authorization.k8s.io", ["clusterrolebindings"], role_names),
            # ... and the Lease's Role, in the release's namespace (leader election).
            *_changes(
                "rbac.authorization.k8s.io",
                ["roles", "rolebindings"],
                [*role_names, f"{fullname}-leader-election"],
            ),
            *_changes(
                "admissionregistration.k8s.io",
                ["mutatingwebhookconfigurations", "validatingwebhookconfigurations"],
                [fullname],
            ),
            # `helm --create-namespace` (Helm 4 applies the namespace: a patch) and the smoke test's
            # `kubectl apply` of its own: only these two are changed.
            {"apiGroups": [""], "resources": ["namespaces"], "verbs": ["get", "create"]},
            {
                "apiGroups": [""],
                "resources": ["namespaces"],
                "verbs": ["patch"],
                "resourceNames": [DEPLOYER_NAMESPACE, SMOKE_NAMESPACE],
            },
            # --- the smoke test: a Database in its own namespace
            {
                "apiGroups": [GROUP],
                "resources": [PLURAL],
                "verbs": ["get", "list", "watch", "create", "patch", "delete"],
            },
            # --- what the chart grants, held (see above)
            *cluster_role_rules(),
            *webhook_cluster_rules(fullname),
            *(rule for rules in AGGREGATE_RULES.values() for rule in rules),
        ]
    )


def deployer_namespaced_rules(fullname: str = DEPLOYER_RELEASE) -> list[Rule]:
    """The deploy job's Role in the release's namespace: Helm's release records (Secrets: the
    default storage driver; never cluster-wide), the chart's namespaced objects, the smoke
    test's look at the operator's pods, and the webhooks' Role, held."""
    return _distinct(
        [
            {
                "apiGroups": [""],
                "resources": ["secrets", "serviceaccounts", "services"],
                "verbs": MANAGE,
            },
            {"apiGroups": ["apps"], "resources": ["deployments"], "verbs": MANAGE},
            {"apiGroups": ["policy"], "resources": ["poddisruptionbudgets"], "verbs": MANAGE},
            {"apiGroups": ["networking.k8s.io"], "resources": ["networkpolicies"], "verbs": MANAGE},
            {
                "apiGroups": ["monitoring.coreos.com"],
                "resources": ["servicemonitors", "prometheusrules"],
                "verbs": MANAGE,
            },
            {
                "apiGroups": ["cert-manager.io"],
                "resources": ["issuers", "certificates"],
                "verbs": MANAGE,
            },
            # The smoke test finds the operator's pods and port-forwards to one for its metrics;
            # a failed deploy is investigated from its pods and events.
            {"apiGroups": [""], "resources": ["pods", "events"], "verbs": ["get", "list", "watch"]},
            {"apiGroups": [""], "resources": ["pods/portforward"], "verbs": ["create"]},
            *webhook_secret_rules(f"{fullname}-webhook-cert"),
            # The Lease's Role, held for any Lease of the namespace: the chart names one per
            # shard (`<leaseName>-<shard>`). The smoke test reads the Lease to find the leader.
            LEASE_RULE,
            LEASE_CREATE_RULE,
        ]
    )


def deployer_manifests() -> list[dict[str, Any]]:
    """config/deployer/deployer.yaml: the deploy job's namespace, ServiceAccount, ClusterRole
    and Role, and their bindings."""
    account = {"name": DEPLOYER, "namespace": DEPLOYER_NAMESPACE}
    subjects = [{"kind": "ServiceAccount", **account}]
    out: list[dict[str, Any]] = [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": DEPLOYER_NAMESPACE}},
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": account},
    ]
    roles: list[tuple[str, dict[str, Any], list[Rule]]] = [
        ("ClusterRole", {"name": DEPLOYER}, deployer_cluster_rules()),
        ("Role", account, deployer_namespaced_rules()),
    ]
    for kind, metadata, rules in roles:
        out.extend(role_and_binding(kind, metadata, rules, subjects))
    return out
