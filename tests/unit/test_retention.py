"""Which scheduled backups retention deletes: the rules of count and maxAge, as a table."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from database_operator.api.backup import BackupPhase, Retention
from database_operator.backups.retention import Scheduled, expired, max_age

T0 = datetime(2026, 3, 1, 2, 0, tzinfo=UTC)
#: An hour after the fifth daily backup: backup N finished (5 - N) days and 50 minutes ago.
NOW = T0 + timedelta(days=5, hours=1)


def _at(day: int) -> datetime:
    return T0 + timedelta(days=day)


def completed(day: int) -> Scheduled:
    return Scheduled(f"c{day}", _at(day), BackupPhase.COMPLETED, _at(day) + timedelta(minutes=10))


def failed(day: int) -> Scheduled:
    return Scheduled(f"f{day}", _at(day), BackupPhase.FAILED, _at(day) + timedelta(minutes=10))


def running(day: int) -> Scheduled:
    return Scheduled(f"r{day}", _at(day), BackupPhase.RUNNING)


def pending(day: int) -> Scheduled:
    return Scheduled(f"p{day}", _at(day), None)


FIVE_DAILY = [completed(day) for day in range(1, 6)]


@pytest.mark.parametrize(
    ("backups", "retention", "gone"),
    [
        pytest.param(FIVE_DAILY, Retention(count=3), ["c1", "c2"], id="count-keeps-the-newest"),
        pytest.param(FIVE_DAILY, Retention(count=5), [], id="count-as-many-as-there-are"),
        pytest.param(
            FIVE_DAILY, Retention(count=1), ["c1", "c2", "c3", "c4"], id="count-one-keeps-one"
        ),
        pytest.param(FIVE_DAILY, Retention(max_age="3d"), ["c1", "c2"], id="max-age-in-days"),
        pytest.param(
            FIVE_DAILY, Retention(max_age="48h"), ["c1", "c2", "c3"], id="max-age-in-hours"
        ),
        pytest.param(FIVE_DAILY, Retention(max_age="1w"), [], id="max-age-in-weeks"),
        pytest.param(
            FIVE_DAILY,
            Retention(count=4, max_age="1d"),
            ["c1"],
            id="both-count-keeps-what-max-age-lets-go",
        ),
        pytest.param(
            FIVE_DAILY,
            Retention(count=1, max_age="3d"),
            ["c1", "c2"],
            id="both-max-age-keeps-what-count-lets-go",
        ),
        pytest.param(
            [completed(1), completed(2)],
            Retention(max_age="1h"),
            ["c1"],
            id="the-newest-completed-stays-though-older-than-max-age",
        ),
        pytest.param(
            [completed(1), failed(2), completed(3), failed(4)],
            Retention(count=10),
            ["f2"],
            id="a-failure-goes-once-a-later-backup-completed",
        ),
        pytest.param(
            [completed(1), failed(2), failed(3)],
            Retention(count=10),
            [],
            id="failures-newer-than-every-completion-stay",
        ),
        pytest.param([failed(1), failed(2)], Retention(count=1), [], id="nothing-completed-yet"),
        pytest.param(
            [running(0), pending(1), completed(2), completed(3)],
            Retention(count=1),
            ["c2"],
            id="pending-and-running-never-go",
        ),
        pytest.param(
            [completed(5), failed(2), completed(1), completed(4), completed(3)],
            Retention(count=2),
            ["c1", "f2", "c3"],
            id="oldest-first-whatever-the-input-order",
        ),
    ],
)
def test_retention_deletes(backups: list[Scheduled], retention: Retention, gone: list[str]) -> None:
    assert expired(backups, retention, NOW) == gone


def test_age_is_counted_from_when_a_backup_finished() -> None:
    # Scheduled 4 days ago but finished only 1 day ago: 2 days of maxAge keep it.
    late = Scheduled("late", _at(1), BackupPhase.COMPLETED, NOW - timedelta(days=1))
    assert expired([late, completed(5)], Retention(max_age="2d"), NOW) == []


@pytest.mark.parametrize(
    ("text", "duration"),
    [
        ("1h", timedelta(hours=1)),
        ("36h", timedelta(hours=36)),
        ("30d", timedelta(days=30)),
        ("8w", timedelta(weeks=8)),
    ],
)
def test_max_age_reads_hours_days_and_weeks(text: str, duration: timedelta) -> None:
    assert max_age(text) == duration


@pytest.mark.parametrize("text", ["30", "0d", "1m", "d", "-1d", "1.5d", "30 d", ""])
def test_max_age_refuses_anything_else_and_shows_the_form_it_takes(text: str) -> None:
    with pytest.raises(ValueError, match=r"is not a number of hours, days or weeks \(30d\)"):
        max_age(text)
