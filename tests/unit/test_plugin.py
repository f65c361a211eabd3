"""`kubectl database` offline: its command line, the backup it creates, sizes, the status summary
and its layout, the restore manifest."""

from __future__ import annotations

import argparse
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest

from database_operator.api.backup import DatabaseBackup
from database_operator.api.models import Database
from database_operator.backups.schedule import backup_for
from database_operator.plugin import (
    PluginError,
    duration,
    human_size,
    main,
    parser,
    render,
    restore_manifest,
    summarize,
    switchover_request,
)

T0 = "2025-01-02T02:00:09Z"


def condition(type_: str, status: str, reason: str, message: str = "") -> dict[str, Any]:
    return {
        "type": type_,
        "status": status,
        "reason": reason,
        "message": message,
        "lastTransitionTime": T0,
    }


def database(status: dict[str, Any] | None = None, **meta: Any) -> Database:
    return Database.model_validate(
        {
            "metadata": {"name": "orders", "namespace": "shop", **meta},
            "spec": {"engine": "postgres", "version": "16", "replicas": 2},
            "status": status or {},
        }
    )


def backup(name: str, created: str, of: str = "orders", **status: Any) -> DatabaseBackup:
    return DatabaseBackup.model_validate(
        {
            "metadata": {"name": name, "namespace": "shop", "creationTimestamp": created},
            "spec": {"database": of},
            "status": status,
        }
    )


REPORTED = {
    "phase": "Active",
    "version": "16.4",
    "replicas": 2,
    "readyReplicas": 1,
    "endpoint": "orders.shop.svc:5432",
    "conditions": [
        condition("Ready", "False", "ReplicasNotReady", "1 of 2 pods ready"),
        condition("BackupHealthy", "False", "LastBackupFailed", "orders-2 failed"),
    ],
    "lastSuccessfulBackup": {"name": "orders-1", "time": T0},
    "lastFailedBackup": {"name": "orders-2", "time": "2025-01-03T02:00:31Z"},
}
BACKUPS = [
    backup(
        "orders-1",
        "2025-01-02T02:00:00Z",
        phase="Completed",
        completedAt=T0,
        size=12_897_485,
        location="backups/shop/orders/orders-1.dump",
    ),
    backup("other-1", "2025-01-04T02:00:00Z", of="other", phase="Completed"),
    backup("orders-3", "2025-01-04T02:00:00Z"),
    backup(
        "orders-2",
        "2025-01-03T02:00:00Z",
        phase="Failed",
        completedAt="2025-01-03T02:00:31Z",
        message="disk full",
    ),
]


# --- the command line ---------------------------------------------------------------------------


def test_backup_takes_a_name_and_waits_ten_minutes_by_default() -> None:
    args = parser().parse_args(["backup", "orders"])
    assert (args.name, args.wait, args.timeout) == ("orders", False, 600.0)
    assert not hasattr(args, "namespace")  # the context's namespace, decided when connecting


def test_the_namespace_and_context_go_before_or_after_the_command() -> None:
    before = parser().parse_args(["-n", "shop", "--context", "prod", "status", "orders"])
    after = parser().parse_args(["status", "orders", "--namespace", "shop", "--context", "prod"])
    assert (
        (before.namespace, before.context) == (after.namespace, after.context) == ("shop", "prod")
    )


def test_backup_wait_takes_a_timeout() -> None:
    args = parser().parse_args(["backup", "orders", "--wait", "--timeout", "1h30m"])
    assert (args.wait, args.timeout) == (True, 5400.0)


def test_status_prints_text_or_json() -> None:
    assert parser().parse_args(["status", "orders"]).output == "text"
    assert parser().parse_args(["status", "orders", "-o", "json"]).output == "json"


def test_restore_needs_a_backup(capsys: pytest.CaptureFixture[str]) -> None:
    args = parser().parse_args(["restore", "copy", "--from", "orders-1", "--storage", "5Gi"])
    assert (args.name, args.source, args.storage, args.apply) == ("copy", "orders-1", "5Gi", False)
    with pytest.raises(SystemExit) as exited:
        parser().parse_args(["restore", "copy"])
    assert exited.value.code == 2
    assert "the following arguments are required: --from" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("text", "seconds"), [("90s", 90), ("10m", 600), ("1h30m", 5400), ("2h", 7200), ("45", 45)]
)
def test_durations_read_as_kubectl_writes_them(text: str, seconds: float) -> None:
    assert duration(text) == seconds


@pytest.mark.parametrize("text", ["", "0", "0s", "10x", "m", "1.5m", "-5"])
def test_a_bad_duration_is_refused(text: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError):
        duration(text)


def test_an_unreadable_kubeconfig_is_one_line_and_exit_1(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "missing"
    assert main(["--kubeconfig", str(missing), "status", "orders"]) == 1
    assert capsys.readouterr().err == (
        f"error: kubeconfig {missing}: Invalid kube-config file. No configuration found.\n"
    )


# --- backup ------------------------------------------------------------------------------------


def test_a_backup_is_named_after_its_database_and_the_utc_time() -> None:
    taken = datetime(2025, 1, 2, 4, 5, 6, tzinfo=timezone(timedelta(hours=2)))
    manifest = backup_for(database(), taken, scheduled=False)
    assert manifest["metadata"]["name"] == "orders-20250102-020506"
    assert manifest["metadata"]["namespace"] == "shop"
    assert manifest["spec"] == {"database": "orders"}


def test_a_backup_carries_its_database_and_shard_labels() -> None:
    sharded = database(labels={"databases.example.com/shard": "eu"})
    labels = backup_for(sharded, datetime.now(UTC), scheduled=False)["metadata"]["labels"]
    assert labels == {
        "databases.example.com/database": "orders",
        "databases.example.com/shard": "eu",
    }
    assert backup_for(database(), datetime.now(UTC), scheduled=False)["metadata"]["labels"] == {
        "databases.example.com/database": "orders"
    }


@pytest.mark.parametrize(
    ("size", "text"),
    [
        (0, "0 B"),
        (1023, "1023 B"),
        (1024, "1.0 KiB"),
        (12_897_485, "12.3 MiB"),
        (5 * 1024**3, "5.0 GiB"),
        (3 * 1024**5, "3072.0 TiB"),
    ],
)
def test_sizes_read_in_powers_of_1024(size: int, text: str) -> None:
    assert human_size(size) == text


# --- status ------------------------------------------------------------------------------------


def test_status_lists_only_this_databases_backups_newest_first() -> None:
    summary = summarize(database(REPORTED), BACKUPS)
    assert [(b["name"], b["phase"]) for b in summary["backups"]] == [
        ("orders-3", None),
        ("orders-2", "Failed"),
        ("orders-1", "Completed"),
    ]
    assert summary["backups"][2] == {
        "name": "orders-1",
        "phase": "Completed",
        "completedAt": T0,
        "size": 12_897_485,
        "location": "backups/shop/orders/orders-1.dump",
        "message": None,
    }


def test_status_calls_out_backup_health_and_the_last_backups() -> None:
    summary = summarize(database(REPORTED), BACKUPS)
    assert summary["backupHealthy"] == {
        "type": "BackupHealthy",
        "status": "False",
        "reason": "LastBackupFailed",
        "message": "orders-2 failed",
    }
    assert summary["lastSuccessfulBackup"] == {"name": "orders-1", "time": T0}
    assert summary["lastFailedBackup"] == {"name": "orders-2", "time": "2025-01-03T02:00:31Z"}


def test_status_renders_for_people() -> None:
    assert render(summarize(database(REPORTED), BACKUPS)) == (
        "Database:         shop/orders\n"
        "Engine:           postgres 16.4\n"
        "Phase:            Active\n"
        "Ready replicas:   1/2\n"
        "Endpoint:         orders.shop.svc:5432\n"
        "\n"
        "Conditions:\n"
        "  TYPE           STATUS  REASON            MESSAGE\n"
        "  Ready          False   ReplicasNotReady  1 of 2 pods ready\n"
        "  BackupHealthy  False   LastBackupFailed  orders-2 failed\n"
        "\n"
        "Backups:\n"
        "  BackupHealthy:    False (LastBackupFailed) orders-2 failed\n"
        "  Last successful:  orders-1 at 2025-01-02T02:00:09Z\n"
        "  Last failed:      orders-2 at 2025-01-03T02:00:31Z\n"
        "  NAME      PHASE      COMPLETED             SIZE      LOCATION\n"
        "  orders-3  -          -                     -         -\n"
        "  orders-2  Failed     2025-01-03T02:00:31Z  -         disk full\n"
        "  orders-1  Completed  2025-01-02T02:00:09Z  12.3 MiB  backups/shop/orders/orders-1.dump\n"
    )


def test_a_database_not_reconciled_yet_renders_with_what_the_spec_says() -> None:
    text = render(summarize(database(), []))
    assert "Engine:           postgres 16\n" in text
    assert "Phase:            - (not reconciled yet)\n" in text
    assert "Ready replicas:   0/2\n" in text
    assert "Conditions:\n  none\n" in text
    assert "  BackupHealthy:    -\n  Last successful:  -\n  Last failed:      -\n  none\n" in text


def test_status_shows_what_a_database_was_restored_from() -> None:
    restored = {"backup": "orders-1", "location": "backups/orders-1.dump", "time": T0}
    text = render(summarize(database({"restoredFrom": restored}), []))
    assert f"Restored from:    orders-1 at {T0}\n" in text


# --- restore -----------------------------------------------------------------------------------


@pytest.mark.parametrize(("reported", "version"), [("16.4", "16"), ("8.0.36", "8"), ("", None)])
def test_a_restore_takes_the_backups_engine_and_major_version(
    reported: str, version: str | None
) -> None:
    taken = backup(
        "orders-1", T0, phase="Completed", engine="postgres", engineVersion=reported, size=1
    )
    manifest = restore_manifest(taken, "copy", "10Gi")
    assert manifest["metadata"] == {"name": "copy", "namespace": "shop"}
    assert manifest["spec"] == {
        "engine": "postgres",
        **({"version": version} if version else {}),
        "storage": {"size": "10Gi"},
        "restore": {"backup": "orders-1"},
    }


@pytest.mark.parametrize("phase", ["Running", "Failed", None])
def test_only_a_completed_backup_is_restored(phase: str | None) -> None:
    unfinished = backup("orders-1", T0, **({"phase": phase} if phase else {}))
    with pytest.raises(PluginError, match="not Completed: there is nothing to restore"):
        restore_manifest(unfinished, "copy", "10Gi")


def test_switchover_takes_an_instance_or_none_and_waits_a_minute_by_default() -> None:
    args = parser().parse_args(["switchover", "orders", "--to", "orders-2"])
    assert (args.name, args.to, args.wait, args.timeout) == ("orders", "orders-2", False, 60.0)
    assert parser().parse_args(["switchover", "orders"]).to is None


def test_a_switchover_request_names_the_instance_and_is_new_each_time() -> None:
    first = switchover_request("orders-2", datetime(2026, 12, 7, 12, 0, 0, tzinfo=UTC))
    again = switchover_request("orders-2", datetime(2026, 12, 7, 12, 0, 1, tzinfo=UTC))
    assert first == "orders-2 2026-12-07T12:00:00Z"
    assert first != again
    assert switchover_request(None, datetime(2026, 12, 7, tzinfo=UTC)).split()[0] == "any"


def test_status_shows_the_instances_with_their_roles_and_lag() -> None:
    db = database(
        {
            "currentPrimary": "orders-2",
            "instances": [
                {"name": "orders-1", "role": "replica", "ready": True, "pod": "orders-1-a",
                 "lagBytes": 2048},
                {"name": "orders-2", "role": "primary", "ready": True, "pod": "orders-2-a"},
            ],
        }
    )  # fmt: skip

    text = render(summarize(db, []))

    assert "Instances (primary: orders-2):" in text
    assert "orders-1  replica  yes    2.0 KiB  orders-1-a" in text
    assert "orders-2  primary  yes    -        orders-2-a" in text
    assert "Instances" not in render(summarize(database(), []))
