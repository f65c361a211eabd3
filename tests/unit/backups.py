"""What the unit tests build a backup's Jobs from (test_backup_jobs.py, test_no_secret_on_argv.py):
a DatabaseBackup of the Database shop in prod (`make_backup`, its status given), destinations
(`S3`, `S3_WITH_CA`, `PVC`), where the backup is stored (`LOCATION`), and the Jobs' options
(`OPTIONS`, the operator's image `AGENT`)."""

from __future__ import annotations

from typing import Any

from database_operator.api.backup import BackupDestination, DatabaseBackup
from database_operator.api.models import SHARD_LABEL
from database_operator.backups import jobs

BACKUP_UID = "0b1c2d3e-0000-4000-8000-0000000000b1"
AGENT = "registry.example.com/database-operator:1.2.3"
OPTIONS = jobs.JobOptions(agent_image=AGENT)
LOCATION = "team/prod/shop/shop-nightly.pgdump"
DATABASE_LABEL = "databases.example.com/database"

S3 = BackupDestination.model_validate(
    {
        "s3": {
            "endpoint": "https://s3.example.com",
            "bucket": "backups",
            "path": "team",
            "region": "eu-west-1",
            "credentialsSecretRef": {"name": "s3-creds"},
        }
    }
)
S3_WITH_CA = BackupDestination.model_validate(
    {
        "s3": {
            "endpoint": "https://s3.internal",
            "bucket": "backups",
            "credentialsSecretRef": {"name": "s3-creds"},
            "caBundleSecretRef": {"name": "s3-ca"},
        }
    }
)
PVC = BackupDestination.model_validate({"pvc": {"claimName": "backup-volume"}})


def make_backup(name: str = "shop-nightly", **status: Any) -> DatabaseBackup:
    return DatabaseBackup.model_validate(
        {
            "metadata": {
                "name": name,
                "namespace": "prod",
                "uid": BACKUP_UID,
                "labels": {DATABASE_LABEL: "shop", SHARD_LABEL: "east"},
            },
            "spec": {"database": "shop"},
            "status": status,
        }
    )
