"""The NetworkPolicy ``<name>`` of spec.networkPolicy: what may reach the Database's pods.

Ingress only (what the pods reach is left alone), and only to the ports a Database serves: the
engine's, by its container port's name (so spec.port, a Service port, never matters), and the
exporter's. Pods the operator starts for the Database (its instances and read replicas, its
backup and restore Jobs) carry its instance label and the operator's managed-by label: they reach
the engine for replication, clones, dumps and restores. The operator's namespace is admitted with
spec.failover, whose roles the operator learns by asking each engine on its pod's address.
"""

from __future__ import annotations

from database_operator.api.core import LabelSelector, NetworkPolicyPeer
from database_operator.api.models import (
    EXPORTER_PORT_NAME,
    MONITORING_NAMESPACE,
    NAMESPACE_NAME_LABEL,
    Database,
)
from database_operator.desired.common import (
    MANAGED_BY,
    controlled_owner_references,
    engine_name,
    has_instances,
    labels,
    object_meta,
)
from database_operator.desired.monitoring import enabled as monitoring_enabled
from database_operator.manifest import Manifest

#: Absent clientsFrom: every pod of the Database's namespace.
SAME_NAMESPACE = NetworkPolicyPeer(pod_selector=LabelSelector())
#: Absent metricsFrom: the pods of the namespace named ``monitoring``.
MONITORING = NetworkPolicyPeer(
    namespace_selector=LabelSelector(match_labels={NAMESPACE_NAME_LABEL: MONITORING_NAMESPACE})
)


def enabled(db: Database) -> bool:
    """Whether spec.networkPolicy asks for the NetworkPolicy."""
    return db.spec.network_policy is not None and db.spec.network_policy.enabled


def network_policy(db: Database, operator_namespace: str | None) -> Manifest | None:
    """The NetworkPolicy spec.networkPolicy asks for, or None when it is off.
    ``operator_namespace``: where the operator runs (None: unknown, as outside a cluster,
    whose traffic no policy can name by pod)."""
    wanted = db.spec.network_policy
    if wanted is None or not enabled(db):
        return None
    clients = [SAME_NAMESPACE] if wanted.clients_from is None else wanted.clients_from
    engine_peers = [peer.to_wire() for peer in clients]
    engine_peers.append({"podSelector": {"matchLabels": own_pods(db)}})
    if has_instances(db) and operator_namespace:
        engine_peers.append(
            {"namespaceSelector": {"matchLabels": {NAMESPACE_NAME_LABEL: operator_namespace}}}
        )
    ingress = [{"ports": [_port(engine_name(db))], "from": engine_peers}]
    if monitoring_enabled(db):
        scrapers = [MONITORING] if wanted.metrics_from is None else wanted.metrics_from
        ingress.append(
            {"ports": [_port(EXPORTER_PORT_NAME)], "from": [peer.to_wire() for peer in scrapers]}
        )
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": object_meta(db, db.name, controlled_owner_references(db)),
        "spec": {
            "podSelector": {"matchLabels": labels(db)},
            "policyTypes": ["Ingress"],
            "ingress": ingress,
        },
    }


def own_pods(db: Database) -> dict[str, str]:
    """The labels of every pod the operator starts for the Database: its database pods and its
    backup and restore Jobs' pods."""
    return {"app.kubernetes.io/instance": db.name, "app.kubernetes.io/managed-by": MANAGED_BY}


def _port(name: str) -> Manifest:
    return {"port": name, "protocol": "TCP"}
