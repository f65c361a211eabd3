"""The Database API as kube-apiserver enforces it from the generated CRD."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.cluster import GROUP, PLURAL, VERSION, Cluster, own_cluster
from tests.controlplane import ROOT, install_crds
from tests.integration.refusals import rejection

API_FIELDS = [
    "parameters",
    "nodeSelector",
    "tolerations",
    "affinity",
    "topologySpreadConstraints",
    "priorityClassName",
    "podAnnotations",
    "podLabels",
    "serviceAnnotations",
    "engine",
    "version",
    "image",
    "replicas",
    "port",
    "storage",
    "resources",
    "credentialsSecretRef",
    "serviceType",
    "paused",
    "deletionPolicy",
]


def test_crd_is_established(cluster: Cluster) -> None:
    crd = cluster.kubectl("get", "crd", f"{PLURAL}.{GROUP}", "-o", "json")
    conditions = {c["type"]: c["status"] for c in json.loads(crd)["status"]["conditions"]}
    assert conditions["Established"] == "True"
    assert conditions["NamesAccepted"] == "True"


def test_defaults_are_applied_by_the_api_server(cluster: Cluster, namespace: str) -> None:
    created = cluster.create_db(namespace, "minimal", {})
    assert created["spec"] == {
        "engine": "postgres",
        "replicas": 1,
        "serviceType": "ClusterIP",
        "paused": False,
        "deletionProtection": False,
        "deletionPolicy": "Retain",
    }


def test_a_database_without_spec_gets_the_defaults(cluster: Cluster, namespace: str) -> None:
    body = {"apiVersion": f"{GROUP}/{VERSION}", "kind": "Database", "metadata": {"name": "bare"}}
    created = cluster.custom.create_namespaced_custom_object(
        GROUP, VERSION, namespace, PLURAL, body
    )
    assert created["spec"]["engine"] == "postgres"
    assert created["spec"]["replicas"] == 1


def test_unknown_fields_are_pruned(cluster: Cluster, namespace: str) -> None:
    created = cluster.create_db(
        namespace, "pruned", {"colour": "blue", "storage": {"size": "1Gi", "speed": "fast"}}
    )
    assert "colour" not in created["spec"]
    assert created["spec"]["storage"] == {"size": "1Gi"}


def test_postgres_and_redis_take_read_replicas_with_storage(
    cluster: Cluster, namespace: str
) -> None:
    # The volume belongs to the primary alone; read replicas clone it.
    for engine in ("postgres", "redis"):
        spec = {"engine": engine, "replicas": 3, "storage": {"size": "1Gi"}}
        created = cluster.create_db(namespace, engine, spec)
        assert created["spec"]["replicas"] == 3
        assert created["spec"]["storage"] == {"size": "1Gi"}
    # MySQL has no read replicas, with or without storage: the rule is per engine.
    status, message = rejection(
        lambda: cluster.create_db(
            namespace, "mysql", {"engine": "mysql", "replicas": 3, "storage": {"size": "1Gi"}}
        )
    )
    assert status == 422
    assert "spec.replicas" in message


def test_a_setting_the_operator_owns_is_refused_by_name(cluster: Cluster, namespace: str) -> None:
    status, message = rejection(
        lambda: cluster.create_db(
            namespace, "bad", {"parameters": {"max_connections": "9", "HBA_FILE": "/x"}}
        )
    )
    assert status == 422
    assert "spec.parameters.HBA_FILE is set by the operator for postgres" in message


def test_kubectl_get_shows_the_printer_columns(cluster: Cluster, namespace: str) -> None:
    cluster.create_db(namespace, "shown", {"engine": "redis", "replicas": 2})
    table = cluster.kubectl("get", "db", "-n", namespace).splitlines()
    assert table[0].split() == ["NAME", "ENGINE", "VERSION", "REPLICAS", "READY", "PHASE", "AGE"]
    # Version, Ready and Phase are empty until the operator writes status.
    assert table[1].split()[:3] == ["shown", "redis", "2"]
    wide = cluster.kubectl(
        "get", "databases.v1.databases.example.com", "-n", namespace, "-o", "wide"
    )
    assert "ENDPOINT" in wide.splitlines()[0]
    assert "shown" in cluster.kubectl("get", "databases", "-n", namespace)


def test_kubectl_explain_documents_every_spec_field(cluster: Cluster) -> None:
    explained = cluster.kubectl("explain", "database.spec")
    for field in API_FIELDS:
        assert f"  {field}\t" in explained, f"{field} missing from kubectl explain"
    assert "Database engine. Immutable." in explained
    storage = cluster.kubectl("explain", "database.spec.storage.size")
    assert "never shrink" in storage


# Each case: a spec that the API server must reject at create, and what the message must name.
INVALID_AT_CREATE: list[tuple[str, dict[str, Any], str]] = [
    ("unknown engine", {"engine": "oracle"}, "spec.engine"),
    ("too many replicas", {"replicas": 11}, "spec.replicas"),
    ("negative replicas", {"replicas": -1}, "spec.replicas"),
    ("replicas of the wrong type", {"replicas": "three"}, "spec.replicas"),
    ("port zero", {"port": 0}, "spec.port"),
    ("port too high", {"port": 70000}, "spec.port"),
    ("malformed storage size", {"storage": {"size": "ten gigs"}}, "spec.storage.size"),
    ("storage without size", {"storage": {}}, "spec.storage.size"),
    ("malformed memory request", {"resources": {"requests": {"memory": "lots"}}}, "spec.resources"),
    ("mysql with read replicas", {"engine": "mysql", "replicas": 2}, "spec.replicas"),
    ("a zero storage size", {"storage": {"size": "0"}}, "spec.storage.size"),
    (
        "a storage class that is no name",
        {"storage": {"size": "1Gi", "storageClassName": "Bad_X"}},
        "spec.storage.storageClassName",
    ),
    ("a setting the operator owns", {"parameters": {"Port": "5433"}}, "spec.parameters"),
    (
        "a redis setting it owns",
        {"engine": "redis", "parameters": {"requirepass": "x"}},
        "spec.parameters",
    ),
    (
        "a pod label it selects by",
        {"podLabels": {"app.kubernetes.io/instance": "x"}},
        "spec.podLabels",
    ),
    (
        "a toleration with a bad effect",
        {"tolerations": [{"effect": "Sometimes"}]},
        "spec.tolerations",
    ),
    (
        "a spread without its key",
        {"topologySpreadConstraints": [{"maxSkew": 1, "whenUnsatisfiable": "DoNotSchedule"}]},
        "spec.topologySpreadConstraints",
    ),
    ("unknown service type", {"serviceType": "Headless"}, "spec.serviceType"),
    ("unknown deletion policy", {"deletionPolicy": "Destroy"}, "spec.deletionPolicy"),
    ("paused of the wrong type", {"paused": "yes"}, "spec.paused"),
    ("version that is no image tag", {"version": "16 beta"}, "spec.version"),
    ("secret ref without name", {"credentialsSecretRef": {}}, "spec.credentialsSecretRef.name"),
    (
        "secret ref with a bad name",
        {"credentialsSecretRef": {"name": "Bad_Name"}},
        "spec.credentialsSecretRef.name",
    ),
]


@pytest.mark.parametrize(
    ("spec", "field"), [c[1:] for c in INVALID_AT_CREATE], ids=[c[0] for c in INVALID_AT_CREATE]
)
def test_invalid_database_is_rejected_at_create(
    cluster: Cluster, namespace: str, spec: dict[str, Any], field: str
) -> None:
    status, message = rejection(lambda: cluster.create_db(namespace, "bad", spec))
    assert status == 422
    assert field in message


# Each case: a valid spec, a change to it that the API server must reject, and the field named.
INVALID_UPDATES: list[tuple[str, dict[str, Any], dict[str, Any], str]] = [
    ("changing the engine", {"engine": "postgres"}, {"engine": "mysql"}, "spec.engine"),
    (
        "shrinking storage",
        {"storage": {"size": "2Gi"}},
        {"storage": {"size": "1Gi"}},
        "spec.storage.size",
    ),
    (
        "changing the storage class",
        {"storage": {"size": "1Gi", "storageClassName": "fast"}},
        {"storage": {"storageClassName": "slow"}},
        "spec.storage.storageClassName",
    ),
    ("removing storage", {"storage": {"size": "1Gi"}}, {"storage": None}, "spec.storage"),
    ("scaling mysql out", {"engine": "mysql"}, {"replicas": 2}, "spec.replicas"),
]


@pytest.mark.parametrize(
    ("spec", "change", "field"),
    [c[1:] for c in INVALID_UPDATES],
    ids=[c[0] for c in INVALID_UPDATES],
)
def test_invalid_update_is_rejected(
    cluster: Cluster, namespace: str, spec: dict[str, Any], change: dict[str, Any], field: str
) -> None:
    cluster.create_db(namespace, "valid", spec)
    status, message = rejection(lambda: cluster.patch_db(namespace, "valid", {"spec": change}))
    assert status == 422
    assert field in message


def test_storage_may_grow_and_get_a_class(cluster: Cluster, namespace: str) -> None:
    cluster.create_db(namespace, "growing", {"storage": {"size": "1Gi"}})
    grown = cluster.patch_db(
        namespace, "growing", {"spec": {"storage": {"size": "1536Mi", "storageClassName": "fast"}}}
    )
    assert grown["spec"]["storage"] == {"size": "1536Mi", "storageClassName": "fast"}


def test_scaling_mysql_out_through_the_scale_subresource_is_refused_too(
    cluster: Cluster, namespace: str
) -> None:
    cluster.create_db(namespace, "single", {"engine": "mysql"})
    out = cluster.kubectl("scale", "db/single", "-n", namespace, "--replicas=2", check=False)
    assert "replicas must be 0 or 1 for mysql" in out
    assert cluster.get_db(namespace, "single")["spec"]["replicas"] == 1


def test_kubectl_scale_uses_the_scale_subresource(cluster: Cluster, namespace: str) -> None:
    cluster.create_db(namespace, "scaled", {"engine": "redis"})
    cluster.kubectl("scale", "db/scaled", "-n", namespace, "--replicas=3")
    assert cluster.get_db(namespace, "scaled")["spec"]["replicas"] == 3
    scale = cluster.custom.get_namespaced_custom_object_scale(
        GROUP, VERSION, namespace, PLURAL, "scaled"
    )
    assert scale["spec"]["replicas"] == 3


def test_status_writes_leave_the_generation_and_spec_changes_bump_it(
    cluster: Cluster, namespace: str
) -> None:
    created = cluster.create_db(namespace, "gen", {})
    assert created["metadata"]["generation"] == 1
    after_status = cluster.custom.patch_namespaced_custom_object_status(
        GROUP,
        VERSION,
        namespace,
        PLURAL,
        "gen",
        {"status": {"phase": "Pending", "observedGeneration": 1}},
    )
    assert after_status["metadata"]["generation"] == 1
    assert after_status["status"]["phase"] == "Pending"
    after_spec = cluster.patch_db(namespace, "gen", {"spec": {"replicas": 2}})
    assert after_spec["metadata"]["generation"] == 2
    # The main resource ignores status: a status change sent there is dropped.
    ignored = cluster.patch_db(namespace, "gen", {"status": {"phase": "Active"}})
    assert ignored["status"]["phase"] == "Pending"
    assert ignored["metadata"]["generation"] == 2


# --- backups and restores ----------------------------------------------------------------------

S3 = {"s3": {"bucket": "backups", "credentialsSecretRef": {"name": "s3"}}}


def test_a_backup_policy_and_a_restore_source_are_accepted_as_written(
    cluster: Cluster, namespace: str
) -> None:
    policy = {"destination": S3, "schedule": "0 2 * * *", "retention": {"count": 7}}
    created = cluster.create_db(
        namespace, "scheduled", {"storage": {"size": "1Gi"}, "backup": policy}
    )
    # With the defaults the API server writes: not suspended, an endpoint not insecure.
    defaulted = {"s3": S3["s3"] | {"insecure": False}}
    assert created["spec"]["backup"] == policy | {"destination": defaulted, "suspend": False}
    restored = cluster.create_db(
        namespace, "restored", {"storage": {"size": "1Gi"}, "restore": {"backup": "nightly-1"}}
    )
    assert restored["spec"]["restore"] == {"backup": "nightly-1"}
    kms = {"serverSideEncryption": "aws:kms", "kmsKeyId": "arn:aws:kms:eu-west-1:1:key/ab-12"}
    encrypted = {"destination": {"s3": S3["s3"] | kms}}
    created = cluster.create_db(
        namespace, "encrypted", {"storage": {"size": "1Gi"}, "backup": encrypted}
    )
    assert created["spec"]["backup"]["destination"]["s3"] == defaulted["s3"] | kms


@pytest.mark.parametrize(
    ("spec", "words"),
    [
        (
            {"backup": {"destination": S3, "schedule": "61 * * * *"}},
            "spec.backup.schedule",
        ),
        (
            {"backup": {"destination": S3, "schedule": "* * * *"}},
            "spec.backup.schedule",
        ),
        (
            {"backup": {"destination": {}}},
            "a destination is exactly one of s3 or pvc",
        ),
        (
            {"backup": {"destination": S3 | {"pvc": {"claimName": "x"}}}},
            "a destination is exactly one of s3 or pvc",
        ),
        (
            {"backup": {"destination": S3, "retention": {"count": 3}}},
            "backup.retention applies to the backups the schedule takes",
        ),
        (
            {"backup": {"destination": {"s3": S3["s3"] | {"kmsKeyId": "alias/backups"}}}},
            "s3.kmsKeyId names the KMS key of serverSideEncryption: aws:kms",
        ),
        (
            {
                "backup": {
                    "destination": {
                        "s3": S3["s3"] | {"serverSideEncryption": "AES256", "kmsKeyId": "k"}
                    }
                }
            },
            "s3.kmsKeyId names the KMS key of serverSideEncryption: aws:kms",
        ),
        (
            {"backup": {"destination": {"s3": S3["s3"] | {"serverSideEncryption": "aws:kms:x"}}}},
            "spec.backup.destination.s3.serverSideEncryption",
        ),
        (
            {"backup": {"destination": S3, "schedule": "@daily", "retention": {}}},
            "retention needs count, maxAge, or both",
        ),
        (
            {
                "backup": {
                    "destination": S3,
                    "schedule": "@daily",
                    "retention": {"maxAge": "30 days"},
                }
            },
            "spec.backup.retention.maxAge",
        ),
        ({"restore": {"backup": "b"}}, "spec.restore needs spec.storage"),
        (
            {"storage": {"size": "1Gi"}, "restore": {"backup": "b", "location": "k/x.pgdump"}},
            "restore is exactly one of backup",
        ),
        (
            {"storage": {"size": "1Gi"}, "restore": {"location": "k/x.pgdump"}},
            "spec.restore.location needs restore.destination or spec.backup.destination",
        ),
        (
            {"storage": {"size": "1Gi"}, "restore": {"backup": "b", "destination": S3}},
            "restore.destination goes with restore.location",
        ),
    ],
)
def test_a_bad_backup_or_restore_spec_is_refused_naming_the_field(
    cluster: Cluster, namespace: str, spec: dict[str, Any], words: str
) -> None:
    status, message = rejection(lambda: cluster.create_db(namespace, "bad", spec))
    assert status == 422
    assert words in message


HTTP_S3 = {"s3": S3["s3"] | {"endpoint": "http://seaweedfs.storage.svc:8333"}}
INSECURE = "s3.endpoint is http://"


def test_an_http_endpoint_is_refused_unless_the_spec_says_insecure(
    cluster: Cluster, namespace: str
) -> None:
    """Every spec that names a destination: a Database's backup and restore, a DatabaseBackup.
    The status, which records the destination a backup used, is not checked."""
    refused = {
        "backup": lambda: cluster.create_db(
            namespace, "plain-backup", {"backup": {"destination": HTTP_S3}}
        ),
        "restore": lambda: cluster.create_db(
            namespace,
            "plain-restore",
            {"storage": {"size": "1Gi"}, "restore": {"location": "k/x", "destination": HTTP_S3}},
        ),
        "DatabaseBackup": lambda: cluster.create_backup(
            namespace, "plain", {"database": "db", "destination": HTTP_S3}
        ),
    }
    for what, create in refused.items():
        status, message = rejection(create)
        assert status == 422, what
        assert INSECURE in message and "destination.s3.endpoint" in message, (what, message)
    allowed = {"s3": HTTP_S3["s3"] | {"insecure": True}}
    created = cluster.create_db(namespace, "ok", {"backup": {"destination": allowed}})
    assert created["spec"]["backup"]["destination"] == allowed
    cluster.create_backup(namespace, "ok", {"database": "ok", "destination": allowed})
    https = {"s3": S3["s3"] | {"endpoint": "https://s3.eu-west-1.amazonaws.com"}}
    created = cluster.create_db(namespace, "tls", {"backup": {"destination": https}})
    assert created["spec"]["backup"]["destination"]["s3"]["insecure"] is False


def test_a_database_stored_with_an_http_endpoint_before_the_rule_keeps_its_other_edits(
    tmp_path: Path,
) -> None:
    """A Database made before this release with an http endpoint: the API server's validation
    ratcheting keeps it valid while its destination is unchanged; a change to its backup
    policy needs insecure: true (or https)."""
    before = tmp_path / "crds"
    before.mkdir()
    for path in (ROOT / "config" / "crd" / "bases").glob("*.yaml"):
        (before / path.name).write_text(without_https_rule(path.read_text()))
    with own_cluster() as cluster, cluster.scratch_namespace("ratchet") as ns:
        install_crds(cluster.kubeconfig, before)
        cluster.create_db(ns, "old", {"backup": {"destination": HTTP_S3}})
        install_crds(cluster.kubeconfig)
        cluster.patch_db(ns, "old", {"spec": {"replicas": 2}})
        _, message = rejection(
            lambda: cluster.patch_db(ns, "old", {"spec": {"backup": {"schedule": "@daily"}}})
        )
        assert INSECURE in message
        s3 = {"s3": {"insecure": True}}
        patch = {"spec": {"backup": {"schedule": "@daily", "destination": s3}}}
        assert cluster.patch_db(ns, "old", patch)["spec"]["backup"]["schedule"] == "@daily"


def without_https_rule(text: str) -> str:
    """A CRD of the project's without the https rule: as the previous release had it."""
    docs = []
    for doc in yaml.safe_load_all(text):
        docs.append(_strip(doc))
    return yaml.safe_dump_all(docs)


def _strip(node: Any) -> Any:
    if isinstance(node, dict):
        return {
            key: (
                [rule for rule in value if "startsWith('https://')" not in rule["rule"]]
                if key == "x-kubernetes-validations"
                else _strip(value)
            )
            for key, value in node.items()
        }
    if isinstance(node, list):
        return [_strip(item) for item in node]
    return node


def test_a_restore_is_given_at_creation_and_never_added_changed_or_removed(
    cluster: Cluster, namespace: str
) -> None:
    cluster.create_db(namespace, "plain", {"storage": {"size": "1Gi"}})
    _, message = rejection(
        lambda: cluster.patch_db(namespace, "plain", {"spec": {"restore": {"backup": "b"}}})
    )
    assert "cannot be added to a Database that exists" in message
    cluster.create_db(namespace, "copy", {"storage": {"size": "1Gi"}, "restore": {"backup": "b1"}})
    _, message = rejection(
        lambda: cluster.patch_db(namespace, "copy", {"spec": {"restore": {"backup": "b2"}}})
    )
    assert "spec.restore cannot change once the Database exists" in message
    _, message = rejection(lambda: cluster.patch_db(namespace, "copy", {"spec": {"restore": None}}))
    assert "or removed" in message


def test_a_database_backup_is_immutable_and_shows_its_columns(
    cluster: Cluster, namespace: str
) -> None:
    cluster.create_backup(namespace, "one", {"database": "orders"})
    status, message = rejection(
        lambda: cluster.custom.patch_namespaced_custom_object(
            GROUP, VERSION, namespace, "databasebackups", "one", {"spec": {"database": "other"}}
        )
    )
    assert status == 422
    assert "spec is immutable" in message
    _, message = rejection(
        lambda: cluster.create_backup(namespace, "two", {"database": "Not_A_Db"})
    )
    assert "spec.database" in message
    header = cluster.kubectl("get", "dbbackup", "-n", namespace).splitlines()[0].split()
    assert header == ["NAME", "DATABASE", "PHASE", "SIZE", "COMPLETED", "AGE"]
