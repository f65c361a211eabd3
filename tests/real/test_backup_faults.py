"""Backups under faults, for real (issue 38's findings, on the node where they were found): a
backup to a claim the user made completes and restores (the claim was looked up in a cache that
holds only the operator's own); a key the store refuses fails the backup after one pod, naming
the Secret (it was retried as transient: three pods, three dumps); a backup whose pod cannot be
scheduled fails at the start deadline with the pod's reason (it stayed Running for ever), and
the next one completes."""

from __future__ import annotations

import time
from functools import partial
from typing import Any

from tests.cluster import Cluster, wait_for
from tests.objectstore import ObjectStore
from tests.real.backups import POSTGRES_FINGERPRINT, create, wait_backup
from tests.realnode import RealCluster
from tests.realpods import START_DEADLINE_S, client_pod, wait_active

ROWS = "INSERT INTO orders SELECT i, 'item ' || i FROM generate_series(1, 5000) i"


def _finished(cluster: Cluster, namespace: str, name: str) -> dict[str, Any] | None:
    found = cluster.get_backup(namespace, name)
    return found if (found.get("status") or {}).get("phase") in ("Completed", "Failed") else None


def _pods_of_job(cluster: Cluster, namespace: str, job: str) -> list[Any]:
    selector = f"batch.kubernetes.io/job-name={job}"
    return list(cluster.core.list_namespaced_pod(namespace, label_selector=selector).items)


def test_a_backup_to_the_users_own_claim_completes_and_a_new_database_restores_from_it(
    real_cluster: Cluster, user_namespace: str, images: dict[str, str]
) -> None:
    ns = user_namespace
    real_cluster.create_claim(ns, "bk")
    to_claim = {"destination": {"pvc": {"claimName": "bk"}}}
    create(real_cluster, ns, "pg", images, engine="postgres", storage={"size": "1Gi"},
           backup=to_claim)  # fmt: skip
    wait_active(real_cluster, ns, "pg")
    with client_pod(real_cluster, ns, images["postgresql"], "pg-connection", "pg") as pg:
        pg.psql("CREATE TABLE orders (id int PRIMARY KEY, item text)")
        pg.psql(ROWS)
        fingerprint = pg.psql(POSTGRES_FINGERPRINT)

    real_cluster.create_backup(ns, "pg-1", {"database": "pg"})
    status = wait_backup(real_cluster, ns, "pg-1")["status"]
    assert status["destination"] == to_claim["destination"]
    assert status["size"] > 0

    create(real_cluster, ns, "pg-restored", images, engine="postgres", storage={"size": "1Gi"},
           restore={"backup": "pg-1"})  # fmt: skip
    wait_active(real_cluster, ns, "pg-restored", timeout_s=180)
    with client_pod(real_cluster, ns, images["postgresql"], "pg-restored-connection", "pg2") as pg:
        assert pg.psql(POSTGRES_FINGERPRINT) == fingerprint


def test_a_key_the_store_refuses_fails_the_backup_after_one_pod_naming_the_secret(
    real_cluster: Cluster,
    user_namespace: str,
    images: dict[str, str],
    bucket: dict[str, Any],
    host_store: ObjectStore,
) -> None:
    ns = user_namespace
    real_cluster.core.delete_namespaced_secret("backup-credentials", ns)
    real_cluster.create_secret(
        ns,
        "backup-credentials",
        {"AWS_ACCESS_KEY_ID": host_store.access_key, "AWS_SECRET_ACCESS_KEY": "not-the-key"},
    )
    create(real_cluster, ns, "kv", images, engine="redis", backup={"destination": bucket})
    wait_active(real_cluster, ns, "kv")

    started = time.monotonic()
    real_cluster.create_backup(ns, "kv-1", {"database": "kv"})
    backup = wait_for(
        partial(_finished, real_cluster, ns, "kv-1"), timeout=180, interval=1, what="kv-1"
    )
    took = time.monotonic() - started
    status = backup["status"]
    assert status["phase"] == "Failed", status
    assert "backup-credentials" in status["message"], status["message"]
    # Not retried: one pod, one dump (a retry cannot cure a key the store refuses).
    assert len(_pods_of_job(real_cluster, ns, status["job"])) == 1
    print(f"wrong key: Failed after {took:.1f} s, one pod: {status['message']}")


def test_a_backup_whose_pod_cannot_be_scheduled_fails_at_the_start_deadline_and_the_next_completes(
    real_cluster: Cluster,
    user_namespace: str,
    images: dict[str, str],
    bucket: dict[str, Any],
    real_node: RealCluster,
) -> None:
    ns = user_namespace
    create(real_cluster, ns, "kv", images, engine="redis", backup={"destination": bucket})
    wait_active(real_cluster, ns, "kv")

    node = real_node.node_name
    real_cluster.kubectl("cordon", node)
    try:
        started = time.monotonic()
        real_cluster.create_backup(ns, "kv-1", {"database": "kv"})

        def says_why() -> dict[str, Any] | None:
            found = real_cluster.get_backup(ns, "kv-1")
            message = (found.get("status") or {}).get("message") or ""
            return found if "Unschedulable" in message else None

        running = wait_for(says_why, timeout=60, interval=1, what="kv-1 saying why it waits")
        assert running["status"]["phase"] == "Running", running["status"]
        backup = wait_for(
            partial(_finished, real_cluster, ns, "kv-1"),
            timeout=START_DEADLINE_S + 60,
            interval=1,
            what="kv-1 failed at its start deadline",
        )
        took = time.monotonic() - started
    finally:
        real_cluster.kubectl("uncordon", node)
    status = backup["status"]
    assert status["phase"] == "Failed", status
    reasons = {condition["reason"] for condition in status["conditions"]}
    assert "StartDeadlineExceeded" in reasons, status
    assert "Unschedulable" in status["message"], status["message"]
    job = real_cluster.batch.read_namespaced_job(status["job"], ns)
    assert job.spec.suspend is True  # stopped: no pod of it tries again
    print(f"unschedulable: Failed after {took:.1f} s: {status['message']}")

    real_cluster.create_backup(ns, "kv-2", {"database": "kv"})
    assert wait_backup(real_cluster, ns, "kv-2")["status"]["size"] > 0
