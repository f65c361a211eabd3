"""A Database's backup schedule: the DatabaseBackup of each due time, when one is due, which
retention deletes, and `tend` doing both on an in-memory Kube."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, cast

import pytest

from database_operator.api.backup import (
    DATABASE_LABEL,
    ORIGIN_LABEL,
    SCHEDULED_AT_ANNOTATION,
    DatabaseBackup,
)
from database_operator.api.models import SHARD_LABEL, Database
from database_operator.backups import schedule
from database_operator.kube.api import KubeApi
from database_operator.manifest import Manifest
from tests.aio import synchronously
from tests.fakekube import FakeKube

UID = "u-1"
DAILY = "0 2 * * *"
NOW = datetime(2026, 3, 10, 12, 0, tzinfo=UTC)
DUE = datetime(2026, 3, 10, 2, 0, tzinfo=UTC)


def at(day: int, hour: int = 2, minute: int = 0) -> datetime:
    return datetime(2026, 3, day, hour, minute, tzinfo=UTC)


CREATED = at(1)


def make_db(
    schedule_: str | None = DAILY,
    *,
    suspend: bool = False,
    retention: Manifest | None = None,
    created: datetime = CREATED,
    shard: str | None = None,
) -> Database:
    policy: Manifest = {"destination": {"pvc": {"claimName": "b"}}, "suspend": suspend}
    if schedule_:
        policy["schedule"] = schedule_
    if retention:
        policy["retention"] = retention
    metadata: Manifest = {
        "name": "shop",
        "namespace": "prod",
        "uid": UID,
        "creationTimestamp": created.strftime("%Y-%m-%dT%H:%M:%SZ"),
    }
    if shard:
        metadata["labels"] = {SHARD_LABEL: shard}
    return Database.model_validate({"metadata": metadata, "spec": {"backup": policy}})


def scheduled(
    day: int, phase: str = "Completed", *, uid: str = UID, **metadata: Any
) -> DatabaseBackup:
    """The scheduled backup of shop due on ``day`` at 02:00, finished ten minutes later."""
    body = schedule.backup_for(make_db(), at(day), scheduled=True)
    body["metadata"] |= {"uid": f"backup-{day}", **metadata}
    finished = at(day, 2, 10).isoformat() if phase in ("Completed", "Failed") else None
    body["status"] = {"phase": phase, "completedAt": finished, "databaseUID": uid}
    return DatabaseBackup.model_validate(body)


def on_demand(name: str, day: int) -> DatabaseBackup:
    return DatabaseBackup.model_validate(
        {
            "metadata": {"name": name, "namespace": "prod", "uid": f"od-{day}"},
            "spec": {"database": "shop"},
            "status": {
                "phase": "Completed",
                "completedAt": at(day, 5).isoformat(),
                "databaseUID": UID,
            },
        }
    )


# --- the DatabaseBackup of a due time -------------------------------------------------------


def test_a_scheduled_backup_is_named_after_its_due_time_in_utc() -> None:
    assert schedule.scheduled_name(make_db(), DUE) == "shop-20260310-020000"


def test_the_scheduled_backup_says_what_made_it_and_for_when() -> None:
    body = schedule.backup_for(make_db(shard="east"), DUE, scheduled=True)
    assert body["kind"] == "DatabaseBackup"
    assert body["metadata"]["name"] == "shop-20260310-020000"
    assert body["metadata"]["namespace"] == "prod"
    assert body["metadata"]["labels"] == {
        DATABASE_LABEL: "shop",
        ORIGIN_LABEL: "schedule",
        SHARD_LABEL: "east",
    }
    assert body["metadata"]["annotations"] == {SCHEDULED_AT_ANNOTATION: "2026-03-10T02:00:00Z"}
    assert body["spec"] == {"database": "shop"}


def test_a_scheduled_backup_outlives_its_database() -> None:
    assert "ownerReferences" not in schedule.backup_for(make_db(), DUE, scheduled=True)["metadata"]


def test_a_database_without_a_shard_gives_no_shard_label() -> None:
    assert (
        SHARD_LABEL not in schedule.backup_for(make_db(), DUE, scheduled=True)["metadata"]["labels"]
    )


def test_the_scheduled_backup_is_one_the_model_takes_as_scheduled() -> None:
    backup = DatabaseBackup.model_validate(schedule.backup_for(make_db(), DUE, scheduled=True))
    assert backup.scheduled


# --- due_now --------------------------------------------------------------------------------


def test_the_latest_due_time_is_due_when_it_has_no_backup() -> None:
    assert schedule.due_now(make_db(), [scheduled(9)], NOW) == DUE


def test_nothing_is_due_when_that_due_times_backup_exists() -> None:
    assert schedule.due_now(make_db(), [scheduled(10, "Running")], NOW) is None


def test_a_due_time_before_the_database_existed_is_not_made_up() -> None:
    assert schedule.due_now(make_db(created=at(10, 3)), [], NOW) is None


def test_the_first_due_time_after_the_database_was_created_is_due() -> None:
    assert schedule.due_now(make_db(created=at(10, 1, 59)), [], NOW) == DUE


def test_an_operator_that_was_away_takes_one_backup_for_the_latest_due_time() -> None:
    assert schedule.due_now(make_db(), [scheduled(5)], NOW) == DUE


@pytest.mark.parametrize(
    "db",
    [
        pytest.param(make_db(suspend=True), id="suspended"),
        pytest.param(make_db(None), id="no-schedule"),
        pytest.param(
            Database.model_validate({"metadata": {"name": "shop"}, "spec": {}}), id="no-backup"
        ),
    ],
)
def test_nothing_is_due_without_an_active_schedule(db: Database) -> None:
    assert schedule.due_now(db, [], NOW) is None


# --- expired --------------------------------------------------------------------------------

KEEP_TWO = {"count": 2}


def names(backups: list[DatabaseBackup]) -> list[str]:
    return [b.name for b in backups]


def test_retention_expires_the_oldest_scheduled_backups() -> None:
    backups = [scheduled(day) for day in (6, 7, 8, 9)]
    assert names(schedule.expired(make_db(retention=KEEP_TWO), backups, NOW)) == [
        "shop-20260306-020000",
        "shop-20260307-020000",
    ]


def test_retention_counts_only_the_schedules_backups_of_this_database() -> None:
    backups = [
        scheduled(5, uid="a-namesake-before"),
        on_demand("manual-1", 4),
        on_demand("manual-2", 6),
        scheduled(8),
        scheduled(9),
    ]
    assert schedule.expired(make_db(retention=KEEP_TWO), backups, NOW) == []


def test_retention_skips_the_backups_already_being_deleted() -> None:
    backups = [
        scheduled(6, deletionTimestamp="2026-03-10T11:00:00Z"),
        scheduled(7),
        scheduled(8),
        scheduled(9),
    ]
    assert names(schedule.expired(make_db(retention={"count": 1}), backups, NOW)) == [
        "shop-20260307-020000",
        "shop-20260308-020000",
    ]


def test_without_retention_nothing_expires() -> None:
    backups = [scheduled(day) for day in range(1, 10)]
    assert schedule.expired(make_db(), backups, NOW) == []


# --- tend -----------------------------------------------------------------------------------


def stored(kube: FakeKube, backups: list[DatabaseBackup]) -> list[DatabaseBackup]:
    """``backups`` as the API server holds them (the fake keeps their uids)."""
    for backup in backups:
        kube.put(backup.model_dump(mode="json", by_alias=True, exclude_none=True))
    return backups


def backups_in(kube: FakeKube) -> list[str]:
    return sorted(name for kind, _, name in kube.objects if kind == "DatabaseBackup")


@synchronously
async def test_tend_creates_the_due_backup_once() -> None:
    kube = FakeKube()
    db = make_db()
    first = await schedule.tend(cast(KubeApi, kube), db, [], NOW)
    # The watch has not delivered it yet: the second look finds it by its name (a 409).
    second = await schedule.tend(cast(KubeApi, kube), db, [], NOW)
    assert (first.created, second.created) == (["shop-20260310-020000"], [])
    assert kube.written("POST") == [("POST", "DatabaseBackup", "shop-20260310-020000")]
    created = kube.objects[("DatabaseBackup", "prod", "shop-20260310-020000")]
    assert created == {
        **schedule.backup_for(db, DUE, scheduled=True),
        "metadata": created["metadata"],
    }


@synchronously
async def test_tend_deletes_what_retention_lets_go_and_nothing_else() -> None:
    kube = FakeKube()
    backups = stored(kube, [scheduled(day) for day in (7, 8, 9, 10)])
    tended = await schedule.tend(cast(KubeApi, kube), make_db(retention=KEEP_TWO), backups, NOW)
    assert tended.deleted == ["shop-20260307-020000", "shop-20260308-020000"]
    assert tended.created == []
    assert backups_in(kube) == ["shop-20260309-020000", "shop-20260310-020000"]


@synchronously
async def test_tend_deletes_a_backup_only_if_it_is_still_the_one_retention_chose() -> None:
    kube = FakeKube()
    backups = stored(kube, [scheduled(day) for day in (8, 9, 10)])
    # Since the watch delivered it, it was deleted and created again under the same name.
    del kube.objects[("DatabaseBackup", "prod", "shop-20260308-020000")]
    stored(kube, [scheduled(8, uid=UID)])
    kube.objects[("DatabaseBackup", "prod", "shop-20260308-020000")]["metadata"]["uid"] = "new"
    tended = await schedule.tend(cast(KubeApi, kube), make_db(retention=KEEP_TWO), backups, NOW)
    assert tended.deleted == []
    assert "shop-20260308-020000" in backups_in(kube)


@synchronously
async def test_tend_says_when_the_schedule_is_next_due() -> None:
    tended = await schedule.tend(cast(KubeApi, FakeKube()), make_db(), [scheduled(10)], NOW)
    assert tended.next_due == datetime(2026, 3, 11, 2, 0, tzinfo=UTC)


@synchronously
async def test_a_suspended_schedule_takes_nothing_but_retention_still_applies() -> None:
    kube = FakeKube()
    backups = stored(kube, [scheduled(day) for day in (7, 8, 9)])
    db = make_db(suspend=True, retention=KEEP_TWO)
    tended = await schedule.tend(cast(KubeApi, kube), db, backups, NOW)
    assert (tended.created, tended.deleted, tended.next_due) == (
        [],
        ["shop-20260307-020000"],
        None,
    )


@synchronously
async def test_without_a_schedule_tend_does_nothing() -> None:
    kube = FakeKube()
    backups = stored(kube, [scheduled(day) for day in (7, 8, 9)])
    tended = await schedule.tend(cast(KubeApi, kube), make_db(None), backups, NOW)
    assert (tended.created, tended.deleted, tended.next_due) == ([], [], None)
    assert kube.writes == []


@pytest.mark.parametrize("phase", [None, "Pending", "Running"])
def test_a_due_time_is_skipped_while_a_backup_of_the_database_is_unfinished(
    phase: str | None,
) -> None:
    earlier = DatabaseBackup.model_validate(
        {
            "metadata": {"name": "shop-earlier", "namespace": "prod"},
            "spec": {"database": "shop"},
            "status": {"phase": phase} if phase else {},
        }
    )
    assert schedule.due_now(make_db(), [earlier], DUE) is None
    finished = earlier.model_copy(
        update={"status": earlier.status.model_copy(update={"phase": "Failed"})}
    )
    assert schedule.due_now(make_db(), [finished], DUE) == DUE
