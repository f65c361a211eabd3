"""What the real node's backup tests share (test_backups.py, test_backup_faults.py): `create`
makes a Database that runs the images built here, `wait_backup` waits for a backup to complete,
and each engine's data is written and fingerprinted by the same statements before a backup and
after its restore (`POSTGRES_FINGERPRINT`, `MYSQL_FINGERPRINT`, `REDIS_FILL`,
`REDIS_FINGERPRINT`)."""

from __future__ import annotations

from typing import Any

from tests.cluster import Cluster, wait_for
from tests.realpods import on_local_images

BACKUP_TIMEOUT_S = 180.0


def create(
    cluster: Cluster, namespace: str, name: str, images: dict[str, str], **spec: Any
) -> None:
    body = on_local_images({"metadata": {"name": name}, "spec": spec}, images)
    cluster.create_db(namespace, name, body["spec"])


def wait_backup(cluster: Cluster, namespace: str, name: str) -> dict[str, Any]:
    def finished() -> dict[str, Any] | None:
        found = cluster.get_backup(namespace, name)
        phase = (found.get("status") or {}).get("phase")
        return found if phase in ("Completed", "Failed") else None

    backup = wait_for(finished, timeout=BACKUP_TIMEOUT_S, interval=1, what=f"backup {name}")
    assert backup["status"]["phase"] == "Completed", backup["status"]
    return backup


POSTGRES_FINGERPRINT = (
    "SELECT count(*) || ':' || md5(string_agg(id || '=' || item, ',' ORDER BY id)) FROM orders"
)
MYSQL_FINGERPRINT = (
    "SELECT CONCAT(COUNT(*), ':', MD5(GROUP_CONCAT(sku, '=', qty ORDER BY sku))) FROM stock"
)
REDIS_FILL = "for i = 1, 5000 do redis.call('SET', 'key:' .. i, 'value-' .. i) end return 1"
REDIS_FINGERPRINT = (
    "local s = '' for i = 1, 5000, 499 do s = s .. redis.call('GET', 'key:' .. i) end return s"
)
