"""The admission and conversion webhooks, called by the real kube-apiserver.

The operator runs outside the cluster, as `make demo` runs it: it serves HTTPS on a loopback
port with its own CA and registers URL-based webhook configurations (selecting only the test's
namespace) and the CRD's conversion itself. Every rule is shown through kubectl, as a user
meets it: accepted, refused with the field and the limit named, mutated, warned about.
"""

from __future__ import annotations

import base64
import functools
import json
import socket
import ssl
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from database_operator.webhooks import configuration
from database_operator.webhooks.certificates import new_ca
from tests.cluster import Cluster, wait_for
from tests.controlplane import free_port, kubectl_process
from tests.integration.conftest import start_operator
from tests.integration.webhooks import (
    BETA,
    CRD,
    GROUP,
    V1BETA1,
    WebhookOperator,
    apply,
    conversion_kept,
    database,
    start_webhook_operator,
)


@pytest.fixture(autouse=True, scope="module")
def _conversion_restored(cluster: Cluster) -> Iterator[None]:
    with conversion_kept(cluster):
        yield


@pytest.fixture
def hooks(cluster: Cluster, namespace: str, tmp_path: Path) -> Iterator[WebhookOperator]:
    running = start_webhook_operator(cluster, namespace, tmp_path / "operator.log")
    yield running
    assert running.process.stop() == 0, running.process.log_text()[-3000:]
    # A clean stop takes the local registration away: the namespace is not left refusing.
    for kind in ("validatingwebhookconfigurations", "mutatingwebhookconfigurations"):
        assert (
            cluster.kubectl("get", kind, running.configuration, check=False).find("NotFound") >= 0
        )


def annotate_namespace(cluster: Cluster, namespace: str, **annotations: str) -> None:
    cluster.core.patch_namespace(
        namespace,
        {
            "metadata": {
                "annotations": {f"{GROUP}/{k.replace('_', '-')}": v for k, v in annotations.items()}
            }
        },
    )


# --- mutating: the version is pinned -------------------------------------------------------------


def test_the_default_version_is_written_into_the_spec_and_stays(
    cluster: Cluster, namespace: str, hooks: WebhookOperator
) -> None:
    done = apply(cluster, namespace, database("pinned", {"engine": "postgres"}))
    assert done.returncode == 0, done.stderr
    assert cluster.get_db(namespace, "pinned")["spec"]["version"] == "16"
    # A later apply or patch without the version keeps the one the database runs.
    cluster.patch_db(namespace, "pinned", {"spec": {"version": None, "replicas": 2}})
    assert cluster.get_db(namespace, "pinned")["spec"]["version"] == "16"
    # An explicit version is the user's.
    cluster.patch_db(namespace, "pinned", {"spec": {"version": "16.4"}})
    assert cluster.get_db(namespace, "pinned")["spec"]["version"] == "16.4"


# --- validating: quota ---------------------------------------------------------------------------


def test_namespace_quota_caps_the_number_of_databases(
    cluster: Cluster, namespace: str, hooks: WebhookOperator
) -> None:
    annotate_namespace(cluster, namespace, max_databases="1")
    assert apply(cluster, namespace, database("first", {})).returncode == 0
    refused = apply(cluster, namespace, database("second", {}))
    assert refused.returncode != 0
    assert "admission webhook" in refused.stderr and "denied the request" in refused.stderr
    assert f"namespace {namespace} allows at most 1 Databases" in refused.stderr
    assert f"annotation {GROUP}/max-databases" in refused.stderr and "has 1" in refused.stderr
    assert cluster.db_gone(namespace, "second")
    with pytest.raises(client.ApiException) as refusal:  # what an API client sees
        cluster.create_db(namespace, "third", {})
    assert refusal.value.status == 403
    assert "max-databases" in json.loads(refusal.value.body)["message"]
    # Updates of the existing one are not counted again.
    assert apply(cluster, namespace, database("first", {"replicas": 2})).returncode == 0


def test_namespace_quota_caps_the_requested_storage(
    cluster: Cluster, namespace: str, hooks: WebhookOperator
) -> None:
    annotate_namespace(cluster, namespace, max_storage="3Gi")
    assert apply(cluster, namespace, database("a", {"storage": {"size": "2Gi"}})).returncode == 0
    refused = apply(cluster, namespace, database("b", {"storage": {"size": "2Gi"}}))
    assert refused.returncode != 0
    assert "spec.storage.size 2Gi" in refused.stderr
    assert (
        "to 4Gi, above its limit 3Gi" in refused.stderr
        and "in use by other Databases: 2Gi" in refused.stderr
    )
    assert apply(cluster, namespace, database("b", {"storage": {"size": "1Gi"}})).returncode == 0
    grown = apply(cluster, namespace, database("a", {"storage": {"size": "5Gi"}}))
    assert grown.returncode != 0 and "above its limit 3Gi" in grown.stderr
    # Without storage a Database requests none.
    assert apply(cluster, namespace, database("c", {"engine": "redis"})).returncode == 0


def test_a_malformed_quota_annotation_is_named(
    cluster: Cluster, namespace: str, hooks: WebhookOperator
) -> None:
    annotate_namespace(cluster, namespace, max_databases="ten")
    refused = apply(cluster, namespace, database("x", {}))
    assert refused.returncode != 0
    assert f"annotation {GROUP}/max-databases is not a number: 'ten'" in refused.stderr


# --- validating: version changes -----------------------------------------------------------------


def test_version_changes_the_engine_cannot_make_are_refused_and_risky_ones_warned(
    cluster: Cluster, namespace: str, hooks: WebhookOperator
) -> None:
    storage = {"size": "1Gi"}
    assert (
        apply(cluster, namespace, database("pg", {"version": "15", "storage": storage})).returncode
        == 0
    )
    refused = apply(cluster, namespace, database("pg", {"version": "16", "storage": storage}))
    assert refused.returncode != 0
    assert "spec.version 15 -> 16: postgres makes no major upgrade in place" in refused.stderr
    assert "pg_dump" in refused.stderr
    # A minor update is fine.
    assert (
        apply(
            cluster, namespace, database("pg", {"version": "15.8", "storage": storage})
        ).returncode
        == 0
    )

    my = {"engine": "mysql", "version": "8.4", "storage": storage}
    assert apply(cluster, namespace, database("my", my)).returncode == 0
    upgraded = apply(cluster, namespace, database("my", {**my, "version": "9.1"}))
    assert upgraded.returncode == 0, upgraded.stderr
    assert "Warning: spec.version 8.4 -> 9.1 upgrades the data" in upgraded.stderr
    down = apply(cluster, namespace, database("my", {**my, "version": "8.4"}))
    assert down.returncode != 0 and "is a major-version downgrade" in down.stderr
    jump = apply(cluster, namespace, database("my", {**my, "version": "11.0"}))
    assert jump.returncode != 0 and "at most 1 major at a time" in jump.stderr

    # Without storage the data does not outlive the pod: nothing to protect.
    assert apply(cluster, namespace, database("eph", {"version": "15"})).returncode == 0
    assert apply(cluster, namespace, database("eph", {"version": "17"})).returncode == 0


# --- validating: backups and restores -----------------------------------------------------------


def test_a_schedule_that_never_fires_is_refused_naming_the_field(
    cluster: Cluster, namespace: str, hooks: WebhookOperator
) -> None:
    policy = {
        "destination": {"s3": {"bucket": "backups", "credentialsSecretRef": {"name": "s3"}}},
        "schedule": "0 0 30 2 *",  # February 30: every field in range, never a day
    }
    refused = apply(cluster, namespace, database("never", {"backup": policy}))
    assert refused.returncode != 0
    assert "spec.backup.schedule: day-of-month" in refused.stderr
    assert "never" in refused.stderr


def test_a_restore_from_a_backup_that_does_not_exist_or_failed_is_refused_naming_it(
    cluster: Cluster, namespace: str, hooks: WebhookOperator
) -> None:
    restored = {"storage": {"size": "1Gi"}, "restore": {"backup": "nightly"}}
    refused = apply(cluster, namespace, database("copy", restored))
    assert refused.returncode != 0
    assert f"DatabaseBackup 'nightly' does not exist in namespace '{namespace}'" in refused.stderr
    assert cluster.db_gone(namespace, "copy")
    # A backup of a Database that does not exist fails (the operator says so) ...
    cluster.create_backup(namespace, "nightly", {"database": "gone"})

    def failed() -> bool:
        phase = cluster.get_backup(namespace, "nightly").get("status", {}).get("phase")
        return bool(phase == "Failed")

    wait_for(failed, what="the backup of a missing Database to fail")
    # ... and nothing can be restored from it.
    refused = apply(cluster, namespace, database("copy", restored))
    assert refused.returncode != 0
    assert "DatabaseBackup 'nightly' failed, so it holds nothing to restore" in refused.stderr


# --- validating: deletion protection --------------------------------------------------------------


def test_deletion_protection_refuses_the_delete_until_turned_off(
    cluster: Cluster, namespace: str, hooks: WebhookOperator
) -> None:
    assert apply(cluster, namespace, database("keep", {"deletionProtection": True})).returncode == 0
    refused = kubectl_process(cluster.kubeconfig, "delete", "database", "keep", "-n", namespace)
    assert refused.returncode != 0
    assert "has spec.deletionProtection: true" in refused.stderr
    assert "kubectl patch database keep" in refused.stderr
    assert not cluster.db_gone(namespace, "keep")
    cluster.patch_db(namespace, "keep", {"spec": {"deletionProtection": False}})
    cluster.delete_db(namespace, "keep")
    wait_for(lambda: cluster.db_gone(namespace, "keep"), what="the Database to go")


# --- validating: image policy -------------------------------------------------------------------


def test_the_image_policy_allows_only_the_configured_registries(
    cluster: Cluster, namespace: str, tmp_path: Path
) -> None:
    running = start_webhook_operator(
        cluster, namespace, tmp_path / "operator.log", "--image-registries=registry.example.com/"
    )
    try:
        refused = apply(
            cluster, namespace, database("a", {"image": "docker.io/library/postgres:16"})
        )
        assert refused.returncode != 0
        assert (
            "spec.image docker.io/library/postgres:16 is not from an allowed registry"
            in refused.stderr
        )
        assert "registry.example.com/" in refused.stderr
        default = apply(cluster, namespace, database("b", {}))
        assert "spec.image (empty, so the official image)" in default.stderr
        allowed = apply(cluster, namespace, database("c", {"image": "registry.example.com/pg:16"}))
        assert allowed.returncode == 0, allowed.stderr
    finally:
        assert running.process.stop() == 0


# --- conversion ---------------------------------------------------------------------------------


def test_v1beta1_objects_are_stored_as_v1_and_read_back_in_either_version(
    cluster: Cluster, namespace: str, hooks: WebhookOperator
) -> None:
    old = database(
        "legacy",
        {"type": "mysql", "storageSize": "2Gi", "storageClass": "standard", "replicas": 1},
        V1BETA1,
    )
    created = apply(cluster, namespace, old)
    assert created.returncode == 0, created.stderr
    assert "v1beta1 Database is deprecated" in created.stderr  # kubectl shows the warning
    stored = cluster.get_db(namespace, "legacy")
    assert stored["spec"]["engine"] == "mysql"
    assert stored["spec"]["storage"] == {"size": "2Gi", "storageClassName": "standard"}
    assert "type" not in stored["spec"] and "storageSize" not in stored["spec"]

    # v1-only fields survive an update through v1beta1.
    cluster.patch_db(namespace, "legacy", {"spec": {"parameters": {"max_connections": "50"}}})
    as_beta = json.loads(
        cluster.kubectl(
            "get",
            "databases.v1beta1.databases.example.com",
            "legacy",
            "-n",
            namespace,
            "-o",
            "json",
        )
    )
    assert as_beta["spec"]["type"] == "mysql" and as_beta["spec"]["storageSize"] == "2Gi"
    assert json.loads(as_beta["metadata"]["annotations"][f"{GROUP}/v1-fields"]) == {
        "deletionProtection": False,
        "parameters": {"max_connections": "50"},
    }
    cluster.custom.patch_namespaced_custom_object(
        GROUP, "v1beta1", namespace, "databases", "legacy", {"spec": {"storageSize": "3Gi"}}
    )
    after = cluster.get_db(namespace, "legacy")
    assert after["spec"]["storage"]["size"] == "3Gi"
    assert after["spec"]["parameters"] == {"max_connections": "50"}
    assert f"{GROUP}/v1-fields" not in (after["metadata"].get("annotations") or {})

    # Status is carried: what the operator wrote through v1 reads the same through v1beta1.
    def same_status() -> bool:
        beta = cluster.custom.get_namespaced_custom_object(
            GROUP, "v1beta1", namespace, "databases", "legacy"
        )
        v1 = cluster.get_db(namespace, "legacy")
        # Read one after the other: the first status can land between the two reads.
        return bool(v1.get("status", {}).get("phase")) and beta.get("status") == v1["status"]

    wait_for(same_status, what="the same status through both versions")

    # The operator reconciles a Database created through v1beta1 like any other.
    wait_for(
        lambda: cluster.apps.read_namespaced_deployment("legacy", namespace),
        what="the Deployment of a v1beta1 Database",
    )
    # etcd holds v1 only: nothing to migrate when v1beta1 goes.
    crd = json.loads(cluster.kubectl("get", "crd", CRD, "-o", "json"))
    assert crd["status"]["storedVersions"] == ["v1"]
    listed = cluster.kubectl("get", BETA, "-n", namespace)
    assert "legacy" in listed and "mysql" in listed


def test_v1beta1_schema_rules_name_the_field(
    cluster: Cluster, namespace: str, hooks: WebhookOperator
) -> None:
    refused = apply(cluster, namespace, database("x", {"storageClass": "fast"}, V1BETA1))
    assert refused.returncode != 0 and "storageClass needs storageSize" in refused.stderr
    created = apply(cluster, namespace, database("grow", {"storageSize": "2Gi"}, V1BETA1))
    assert created.returncode == 0, created.stderr
    shrink = apply(cluster, namespace, database("grow", {"storageSize": "1Gi"}, V1BETA1))
    assert shrink.returncode != 0 and "storageSize may grow but never shrink" in shrink.stderr


# --- when the webhook cannot answer ---------------------------------------------------------------


def test_with_the_operator_down_database_writes_fail_fast_and_clearly(
    cluster: Cluster, namespace: str, tmp_path: Path
) -> None:
    """failurePolicy Fail: a write nobody could check is refused, within the webhook timeout;
    reads still work."""
    running = start_webhook_operator(cluster, namespace, tmp_path / "operator.log")
    assert apply(cluster, namespace, database("before", {})).returncode == 0
    running.process.proc.kill()  # no clean stop: the registration stays, as in a cluster
    running.process.proc.wait()
    try:
        started = time.monotonic()
        refused = apply(cluster, namespace, database("during", {}))
        took = time.monotonic() - started
        assert refused.returncode != 0
        assert 'failed calling webhook "mutate.databases.example.com"' in refused.stderr
        assert "connection refused" in refused.stderr
        assert took < configuration.TIMEOUT_S + 10
        assert cluster.get_db(namespace, "before")["metadata"]["name"] == "before"
        # The match conditions: what neither webhook could change or refuse is never sent —
        # a label, or the finalizer's removal (operations.md's way out when no operator runs).
        labelled = kubectl_process(
            cluster.kubeconfig, "label", "-n", namespace, "database", "before", "team=a"
        )
        assert labelled.returncode == 0, labelled.stderr
        unfinalized = kubectl_process(
            cluster.kubeconfig,
            "patch",
            "-n",
            namespace,
            "database",
            "before",
            "--type=merge",
            "-p",
            '{"metadata":{"finalizers":null}}',
        )
        assert unfinalized.returncode == 0, unfinalized.stderr
        # A spec change is checked (its version is set: the mutating webhook is not called).
        pinned = cluster.get_db(namespace, "before")["spec"]["version"]
        spec = {"version": pinned, "podAnnotations": {"team": "a"}}
        changed = apply(cluster, namespace, database("before", spec))
        assert changed.returncode != 0
        assert 'failed calling webhook "validate.databases.example.com"' in changed.stderr
        assert "mutate" not in changed.stderr
    finally:
        for kind in ("validatingwebhookconfigurations", "mutatingwebhookconfigurations"):
            cluster.kubectl("delete", kind, running.configuration, "--ignore-not-found")


def _register(cluster: Cluster, namespace: str, name: str, url: str, ca: bytes) -> None:
    for manifest in configuration.configurations(
        name,
        lambda path: configuration.with_ca(configuration.url_client(url, path), ca),
        configuration.namespace_selector([namespace], None),
    ):
        cluster.kubectl("apply", "-f", "-", input=json.dumps(manifest))


def test_a_webhook_that_hangs_fails_the_request_after_its_timeout(
    cluster: Cluster, namespace: str
) -> None:
    """A listener that accepts connections and never answers: kubectl gets an error after
    timeoutSeconds, never hangs."""
    name = f"hang-{namespace}"
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(16)
        port = silent.getsockname()[1]
        _register(cluster, namespace, name, f"https://127.0.0.1:{port}", new_ca_pem())
        try:
            started = time.monotonic()
            refused = apply(cluster, namespace, database("slow", {}))
            took = time.monotonic() - started
        finally:
            for kind in ("validatingwebhookconfigurations", "mutatingwebhookconfigurations"):
                cluster.kubectl("delete", kind, name, "--ignore-not-found")
    assert refused.returncode != 0
    assert "failed calling webhook" in refused.stderr
    assert "deadline exceeded" in refused.stderr or "timeout" in refused.stderr.lower()
    assert configuration.TIMEOUT_S - 1 < took < configuration.TIMEOUT_S + 15


def new_ca_pem() -> bytes:
    from datetime import UTC, datetime

    return new_ca(datetime.now(UTC)).cert


def test_a_certificate_the_api_server_does_not_trust_is_a_clear_error(
    cluster: Cluster, namespace: str, hooks: WebhookOperator
) -> None:
    """The caBundle of another CA: the API server says so (x509), promptly."""
    name = f"untrusted-{namespace}"
    _register(cluster, namespace, name, f"https://127.0.0.1:{hooks.port}", new_ca_pem())
    try:
        refused = apply(cluster, namespace, database("x", {}))
    finally:
        for kind in ("validatingwebhookconfigurations", "mutatingwebhookconfigurations"):
            cluster.kubectl("delete", kind, name, "--ignore-not-found")
    assert refused.returncode != 0
    assert "x509" in refused.stderr and "failed calling webhook" in refused.stderr


# --- in the cluster: the operator's own CA in a shared Secret -------------------------------------


def test_in_cluster_mode_keeps_one_certificate_in_a_secret_and_writes_the_ca_bundles(
    cluster: Cluster, namespace: str, tmp_path: Path
) -> None:
    """What the chart runs without cert-manager: the configurations (installed by the chart,
    here by the test) get the caBundle of the CA kept in the Secret; a second replica reuses the
    same Secret; the server presents a certificate for the Service's DNS name."""
    name = f"svc-{namespace}"
    for manifest in configuration.configurations(
        name,
        lambda path: configuration.service_client(namespace, "database-operator-webhook", path),
        # Selects no namespace: the API server cannot reach a Service here (no pods).
        configuration.namespace_selector(["no-such-namespace"], None),
    ):
        cluster.kubectl("apply", "-f", "-", input=json.dumps(manifest))
    ports = [free_port(), free_port()]
    started = []
    try:
        for i, port in enumerate(ports):
            started.append(
                start_operator(
                    cluster,
                    tmp_path / f"replica-{i}.log",
                    f"--namespace={namespace}",
                    "--health-port=0",
                    "--metrics-port=0",
                    f"--webhook-port={port}",
                    f"--webhook-service={namespace}/database-operator-webhook",
                    "--webhook-secret=webhook-cert",
                    f"--webhook-configuration={name}",
                )
            )
            wait_for(functools.partial(listening, port), what="the webhook port")
        secret = cluster.core.read_namespaced_secret("webhook-cert", namespace)
        assert secret.type == "kubernetes.io/tls"
        ca = base64.b64decode(secret.data["ca.crt"])
        for kind in ("validatingwebhookconfigurations", "mutatingwebhookconfigurations"):
            found = json.loads(cluster.kubectl("get", kind, name, "-o", "json"))
            assert base64.b64decode(found["webhooks"][0]["clientConfig"]["caBundle"]) == ca
        crd = json.loads(
            cluster.kubectl("get", "crd", "databases.databases.example.com", "-o", "json")
        )
        assert (
            base64.b64decode(crd["spec"]["conversion"]["webhook"]["clientConfig"]["caBundle"]) == ca
        )
        # Both replicas serve the one certificate, valid for the Service's name under that CA.
        context = ssl.create_default_context(cadata=ca.decode())
        host = f"database-operator-webhook.{namespace}.svc"
        served = []
        for port in ports:
            with (
                socket.create_connection(("127.0.0.1", port)) as raw,
                context.wrap_socket(raw, server_hostname=host) as tls,
            ):
                served.append(tls.getpeercert(binary_form=True))
        assert served[0] == served[1]
        assert (
            cluster.core.read_namespaced_secret("webhook-cert", namespace).metadata.resource_version
            == secret.metadata.resource_version
        )
    finally:
        for process in started:
            process.stop()
        for kind in ("validatingwebhookconfigurations", "mutatingwebhookconfigurations"):
            cluster.kubectl("delete", kind, name, "--ignore-not-found")


def listening(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1):
            return True
    except OSError:
        return False


# --- HA: the standby answers too ------------------------------------------------------------------


def test_a_standby_replica_answers_admission_and_conversion(
    cluster: Cluster, namespace: str, tmp_path: Path
) -> None:
    lease = f"webhooks-{namespace}"
    election = ["--leader-election", f"--lease-name={lease}", f"--lease-namespace={namespace}"]
    active = start_webhook_operator(
        cluster, namespace, tmp_path / "active.log", *election, env={"POD_NAME": "active"}
    )
    # The first replica leads before the second starts: the second stands by.
    wait_for(lambda: lease_holder(cluster, namespace, lease) == "active", what="active to lead")
    standby_port, standby_health = free_port(), free_port()
    standby = start_operator(
        cluster,
        tmp_path / "standby.log",
        f"--namespace={namespace}",
        f"--health-port={standby_health}",
        "--metrics-port=0",
        f"--webhook-port={standby_port}",
        f"--webhook-url=https://127.0.0.1:{standby_port}",
        f"--webhook-configuration=standby-{namespace}",
        "--log-level=DEBUG",
        *election,
        env={"POD_NAME": "standby"},
    )
    try:
        probe = WebhookOperator(standby, standby_port, standby_health, f"standby-{namespace}")
        wait_for(probe.ready, what="the standby's /readyz")
        # Both replicas' registrations are live: a delete of a protected Database is refused
        # (by both), an ordinary write admitted by both.
        assert (
            apply(cluster, namespace, database("p", {"deletionProtection": True})).returncode == 0
        )
        refused = kubectl_process(cluster.kubeconfig, "delete", "database", "p", "-n", namespace)
        assert "deletionProtection" in refused.stderr
        # Straight to the standby: a ConversionReview and an AdmissionReview.
        review = {
            "apiVersion": "apiextensions.k8s.io/v1",
            "kind": "ConversionReview",
            "request": {
                "uid": "u1",
                "desiredAPIVersion": V1BETA1,
                "objects": [cluster.get_db(namespace, "p")],
            },
        }
        answer = post(standby_port, "/convert", review)
        assert answer["response"]["result"]["status"] == "Success"
        assert answer["response"]["convertedObjects"][0]["apiVersion"] == V1BETA1
        db = cluster.get_db(namespace, "p")
        admission = {
            "apiVersion": "admission.k8s.io/v1",
            "kind": "AdmissionReview",
            "request": {
                "uid": "u2",
                "kind": {"group": GROUP, "version": "v1", "kind": "Database"},
                "resource": {"group": GROUP, "version": "v1", "resource": "databases"},
                "operation": "DELETE",
                "name": "p",
                "namespace": namespace,
                "userInfo": {"username": "test"},
                "oldObject": db,
            },
        }
        denied = post(standby_port, "/validate", admission)
        assert denied["response"]["allowed"] is False
        assert "deletionProtection" in denied["response"]["status"]["message"]
        cluster.patch_db(namespace, "p", {"spec": {"deletionProtection": False}})
        # All along the standby reconciled nothing: it stood by.
        assert lease_holder(cluster, namespace, lease) == "active"
        wait_for(lambda: active.process.reconciles("p"), what="the leader's reconcile logged")
        assert not standby.reconciles("p")
    finally:
        standby.stop()
        active.process.stop()
        for kind in ("validatingwebhookconfigurations", "mutatingwebhookconfigurations"):
            cluster.kubectl("delete", kind, f"standby-{namespace}", "--ignore-not-found")


def lease_holder(cluster: Cluster, namespace: str, name: str) -> str:
    """The pod holding the Lease (its holderIdentity is "<POD_NAME>_<8 hex>"), or ""."""
    holder = cluster.kubectl(
        "get", "lease", name, "-n", namespace, "-o", "jsonpath={.spec.holderIdentity}", check=False
    )
    return holder.rpartition("_")[0]


def post(port: int, path: str, body: dict[str, Any]) -> dict[str, Any]:
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE  # the test checks answers, not the certificate
    request = urllib.request.Request(
        f"https://127.0.0.1:{port}{path}",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, context=context, timeout=10) as response:  # noqa: S310
        return json.loads(response.read())  # type: ignore[no-any-return]
