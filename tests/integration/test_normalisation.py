"""The comparison agrees with the API server: every child the builders make, once the server has
defaulted and normalised it (a server-side apply, dry run), compares equal to what we sent.

A comparison that can never match is a write on every resync (an empty map the server drops,
a quantity it rewrites); this checks `needs_write` against the server's own result for specs
drawn by hypothesis.
"""

from __future__ import annotations

import asyncio
import json
import os
from typing import Any

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from kubernetes.utils.quantity import parse_quantity

from database_operator import desired
from database_operator.api.models import Database
from database_operator.compare import needs_write
from database_operator.kube.api import Kube
from tests.cluster import Cluster

EXAMPLES = int(os.environ.get("PROPERTY_EXAMPLES", "40"))
UID = "5f0e3a2e-0000-4000-8000-000000000001"

quantity = st.sampled_from(["100m", "0.5", "1", "1500m", "2", "128Mi", "1Gi", "1024Mi", 2])
resources = st.fixed_dictionaries(
    {},
    optional={
        "limits": st.dictionaries(st.sampled_from(["cpu", "memory"]), quantity, max_size=2),
        "requests": st.dictionaries(st.sampled_from(["cpu", "memory"]), quantity, max_size=2),
    },
)
valid_specs = st.fixed_dictionaries(
    {},
    optional={
        "engine": st.sampled_from(["postgres", "mysql", "redis"]),
        "version": st.sampled_from(["16", "8.4", "7.4", "17.1"]),
        "replicas": st.integers(0, 4),
        "port": st.integers(1, 65535),
        "storage": st.fixed_dictionaries({"size": st.sampled_from(["1Gi", "1.5Gi", 1073741824])}),
        "resources": resources,
        "serviceType": st.sampled_from(["ClusterIP", "NodePort", "LoadBalancer"]),
        "deletionPolicy": st.sampled_from(["Retain", "Delete"]),
        "credentialsSecretRef": st.just({"name": "users"}),
        "image": st.just("registry.example.com/db:1"),
        "parameters": st.dictionaries(
            st.sampled_from(["max_connections", "maxmemory", "work_mem"]),
            st.sampled_from(["100", "64mb", "", "$(HOME)"]),
            max_size=2,
        ),
        "nodeSelector": st.dictionaries(st.just("disk"), st.just("ssd"), max_size=1),
        "tolerations": st.lists(
            st.fixed_dictionaries(
                {"key": st.just("dedicated")},
                optional={
                    "operator": st.sampled_from(["Equal", "Exists"]),
                    "effect": st.sampled_from(["NoSchedule", "NoExecute"]),
                    "tolerationSeconds": st.integers(0, 600),
                },
            ),
            max_size=2,
        ),
        "affinity": st.just(
            {
                "podAntiAffinity": {
                    "preferredDuringSchedulingIgnoredDuringExecution": [
                        {
                            "weight": 10,
                            "podAffinityTerm": {
                                "topologyKey": "kubernetes.io/hostname",
                                "labelSelector": {
                                    "matchLabels": {"app.kubernetes.io/instance": "norm"}
                                },
                            },
                        }
                    ]
                }
            }
        ),
        "topologySpreadConstraints": st.just(
            [{"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "ScheduleAnyway"}]
        ),
        "podAnnotations": st.dictionaries(
            st.just("a.example.com/x"), st.sampled_from(["1", ""]), max_size=1
        ),
        "podLabels": st.dictionaries(st.just("team"), st.just("shop"), max_size=1),
        # The exporter beside the engine (Redis's: with its init container and its volume).
        "monitoring": st.fixed_dictionaries({"enabled": st.booleans()}),
        "serviceAnnotations": st.dictionaries(
            st.just("lb.example.com/internal"), st.just("true"), max_size=1
        ),
    },
)


def admissible(spec: dict[str, Any]) -> bool:
    """Specs the CRD's own rules refuse are not what this test is about (it sends children)."""
    tolerations = spec.get("tolerations") or []
    return limits_cover_requests(spec) and all(
        "tolerationSeconds" not in t or t.get("effect") == "NoExecute"
        for t in tolerations
        if t.get("operator") != "Exists" or "value" not in t
    )


def limits_cover_requests(spec: dict[str, Any]) -> bool:
    """Specs the API server would refuse for another reason (limits below requests) are not
    what this test is about."""
    limits = (spec.get("resources") or {}).get("limits") or {}
    requests = (spec.get("resources") or {}).get("requests") or {}
    return all(
        parse_quantity(limits[key]) >= parse_quantity(value)
        for key, value in requests.items()
        if key in limits
    )


@settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(spec=valid_specs.filter(admissible))
# Every extra container and volume, whatever hypothesis draws: Redis's exporter has an init
# container and an in-memory volume; instances have a ConfigMap and claims of their own.
@example(spec={"engine": "redis", "monitoring": {"enabled": True}, "replicas": 2})
@example(
    spec={
        "engine": "postgres",
        "monitoring": {"enabled": True},
        "replicas": 3,
        "storage": {"size": "1Gi"},
        "failover": {"enabled": True},
    }
)
def test_what_the_server_makes_of_each_child_compares_equal_to_what_we_sent(
    cluster: Cluster, namespace: str, spec: dict[str, Any]
) -> None:
    db = Database.model_validate(
        {"metadata": {"name": "norm", "namespace": namespace, "uid": UID}, "spec": spec}
    )
    credentials = {"username": "YXBw", "password": "cA=="}
    children = [*desired.children(db, "0" * 32), desired.connection_secret(db, credentials)]
    if db.spec.credentials_secret_ref is None:
        children.append(desired.secret(db, "a-password", "r-password"))
    kube = Kube(cluster.api)
    for child in children:
        answered = dry_run_apply(kube, child)
        assert not needs_write(answered, child, UID), json.dumps(
            {"sent": child, "server": answered}, indent=1, default=str
        )


def dry_run_apply(kube: Kube, manifest: dict[str, Any]) -> dict[str, Any]:
    return asyncio.run(kube.apply(manifest, dry_run=True))
