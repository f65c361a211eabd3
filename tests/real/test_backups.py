"""Backups for real: the backup Job runs the engine's own tool against the running database and
its agent (the operator's image) stores the dump in SeaweedFS on the host; a Database restored
from it holds the same rows and keys, for all three engines; a schedule's retention deletes the
stored objects of the backups it lets go."""

from __future__ import annotations

import base64
import hashlib
import os
from typing import Any

from tests.cluster import Cluster, wait_for
from tests.objectstore import ObjectStore
from tests.real.backups import (
    BACKUP_TIMEOUT_S,
    MYSQL_FINGERPRINT,
    POSTGRES_FINGERPRINT,
    REDIS_FILL,
    REDIS_FINGERPRINT,
    create,
    wait_backup,
)
from tests.realpods import client_pod, until_answers, wait_active


def test_a_backup_of_each_engine_restores_the_same_rows_and_keys_into_a_new_database(
    real_cluster: Cluster,
    user_namespace: str,
    images: dict[str, str],
    bucket: dict[str, Any],
    host_store: ObjectStore,
) -> None:
    ns = user_namespace
    # Redis's backups encrypted twice over: in the Job (the key a Secret of the namespace's)
    # and by the store (SSE-S3).
    key = base64.b64encode(os.urandom(32)).decode()
    real_cluster.create_secret(ns, "backup-key", {"key": key})
    sealed = {
        "s3": bucket["s3"] | {"serverSideEncryption": "AES256"},
        "encryption": {"keySecretRef": {"name": "backup-key"}},
    }
    policies = {"pg": {"destination": bucket}, "my": {"destination": bucket}}
    policies["kv"] = {"destination": sealed}
    for name, engine in (("pg", "postgres"), ("my", "mysql"), ("kv", "redis")):
        create(
            real_cluster, ns, name, images,
            engine=engine, storage={"size": "1Gi"}, backup=policies[name],
        )  # fmt: skip
    for name in ("pg", "my", "kv"):
        wait_active(real_cluster, ns, name)

    fingerprints: dict[str, str] = {}
    with client_pod(real_cluster, ns, images["postgresql"], "pg-connection", "pg") as pg:
        pg.psql("CREATE TABLE orders (id int PRIMARY KEY, item text)")
        pg.psql("INSERT INTO orders SELECT i, 'item ' || i FROM generate_series(1, 20000) i")
        pg.psql("CREATE VIEW big_orders AS SELECT * FROM orders WHERE id > 19990")
        fingerprints["pg"] = pg.psql(POSTGRES_FINGERPRINT)
    with client_pod(real_cluster, ns, images["mariadb"], "my-connection", "my") as my:
        until_answers(lambda: my.mysql("SELECT 1"), what="MySQL through its Service")
        my.mysql("CREATE TABLE stock (sku varchar(20) PRIMARY KEY, qty int)")
        my.mysql(
            "INSERT INTO stock SELECT CONCAT('sku-', seq), seq FROM seq_1_to_3000"
        )  # MariaDB's sequence engine
        fingerprints["my"] = my.mysql(MYSQL_FINGERPRINT)
    with client_pod(real_cluster, ns, images["redis"], "kv-connection", "kv") as kv:
        kv.redis("EVAL", REDIS_FILL, "0")
        assert kv.redis("DBSIZE") == "5000"
        fingerprints["kv"] = kv.redis("EVAL", REDIS_FINGERPRINT, "0")

    for name in ("pg", "my", "kv"):
        real_cluster.create_backup(ns, f"{name}-1", {"database": name})
    stored = {}
    for name in ("pg", "my", "kv"):
        status = wait_backup(real_cluster, ns, f"{name}-1")["status"]
        data = host_store.get(bucket["s3"]["bucket"], status["location"])
        # What the status says is what the store holds, byte for byte.
        assert status["size"] == len(data) > 0
        assert status["checksum"] == f"sha256:{hashlib.sha256(data).hexdigest()}"
        stored[name] = status
    assert stored["pg"]["engineVersion"].startswith("15.")
    assert "MariaDB" in stored["my"]["engineVersion"]
    assert stored["kv"]["engineVersion"].startswith("7.0.")
    kv_data = host_store.get(bucket["s3"]["bucket"], stored["kv"]["location"])
    assert kv_data.startswith(b"DBOPAES1") and b"REDIS" not in kv_data[:64]
    assert b"value-1" not in kv_data, "no key's value in clear"
    head = host_store.client().head_object(
        Bucket=bucket["s3"]["bucket"], Key=stored["kv"]["location"]
    )
    assert head.get("ServerSideEncryption") == "AES256"

    for name, engine in (("pg", "postgres"), ("my", "mysql"), ("kv", "redis")):
        create(
            real_cluster, ns, f"{name}-restored", images,
            engine=engine, storage={"size": "1Gi"}, restore={"backup": f"{name}-1"},
        )  # fmt: skip
    for name in ("pg", "my", "kv"):
        db = wait_active(real_cluster, ns, f"{name}-restored", timeout_s=BACKUP_TIMEOUT_S)
        assert db["status"]["restoredFrom"]["backup"] == f"{name}-1"
    with client_pod(real_cluster, ns, images["postgresql"], "pg-restored-connection", "pg2") as pg:
        assert pg.psql(POSTGRES_FINGERPRINT) == fingerprints["pg"]
        assert pg.psql("SELECT count(*) FROM big_orders") == "10"
    with client_pod(real_cluster, ns, images["mariadb"], "my-restored-connection", "my2") as my:
        assert until_answers(lambda: my.mysql(MYSQL_FINGERPRINT)) == fingerprints["my"]
    with client_pod(real_cluster, ns, images["redis"], "kv-restored-connection", "kv2") as kv:
        assert kv.redis("DBSIZE") == "5000"
        assert kv.redis("EVAL", REDIS_FINGERPRINT, "0") == fingerprints["kv"]


def test_a_schedule_keeps_what_its_retention_says_and_deletes_the_stored_objects_of_the_rest(
    real_cluster: Cluster,
    user_namespace: str,
    images: dict[str, str],
    bucket: dict[str, Any],
    host_store: ObjectStore,
) -> None:
    ns = user_namespace
    policy = {"destination": bucket, "schedule": "*/5 * * * * *", "retention": {"count": 2}}
    create(
        real_cluster, ns, "often", images, engine="redis", storage={"size": "1Gi"}, backup=policy
    )
    wait_active(real_cluster, ns, "often")
    prefix = f"real/{ns}/often/"
    seen: set[str] = set()

    def turned_over() -> bool:
        backups = real_cluster.list_backups(ns)
        seen.update(b["metadata"]["name"] for b in backups)
        return len(seen) >= 3

    wait_for(turned_over, timeout=150, interval=1, what="three scheduled backups taken")
    real_cluster.patch_db(ns, "often", {"spec": {"backup": {"suspend": True}}})

    def settled() -> list[dict[str, Any]] | None:
        backups = real_cluster.list_backups(ns)
        phases = [(b.get("status") or {}).get("phase") for b in backups]
        return backups if phases and all(p == "Completed" for p in phases) else None

    wait_for(settled, timeout=BACKUP_TIMEOUT_S, interval=1, what="the running backups finished")

    def two_kept() -> list[dict[str, Any]] | None:
        backups = settled()
        return backups if backups and len(backups) == 2 else None

    kept = wait_for(two_kept, timeout=60, interval=1, what="retention to keep the newest 2")
    keys = host_store.keys(bucket["s3"]["bucket"], prefix)
    # Each kept backup's three objects (the dump, its .sha256 and its .json), and nothing else:
    # the objects of every backup that retention let go are deleted from the store.
    expected = set()
    for backup in kept:
        location = backup["status"]["location"]
        expected |= {location, f"{location}.sha256", f"{location}.json"}
    assert set(keys) == expected, sorted(seen)
    assert len(seen) > len(kept)
