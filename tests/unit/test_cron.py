"""Backup schedules in cron syntax: parsing, due times around an instant, and the CRD's pattern."""

from __future__ import annotations

import random
import re
import time
from datetime import UTC, datetime, timedelta, timezone

import pytest

from database_operator.cron import PATTERN, CronError, Schedule, parse, validate


def at(text: str) -> datetime:
    """A UTC instant from "YYYY-MM-DD HH:MM[:SS]"."""
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


# --- due times ------------------------------------------------------------------------------

# (what it shows, schedule, t, next_after(t), previous_at_or_before(t))
DUE_TIMES = [
    ("every 10 seconds", "*/10 * * * * *", "2026-03-02 09:00:05", "09:00:10", "09:00:00"),
    (
        "every 15 seconds across a minute",
        "*/15 * * * * *",
        "2026-03-02 09:00:55",
        "09:01:00",
        "09:00:45",
    ),
    ("every minute", "* * * * *", "2026-03-02 09:00:30", "09:01:00", "09:00:00"),
    ("hourly", "@hourly", "2026-03-02 09:59:59", "10:00:00", "09:00:00"),
    ("daily at 02:30", "30 2 * * *", "2026-03-02 01:00", "2026-03-02 02:30", "2026-03-01 02:30"),
    # Saturday 7 March 2026: Friday before, Monday after.
    (
        "weekdays only",
        "0 2 * * MON-FRI",
        "2026-03-07 12:00",
        "2026-03-09 02:00",
        "2026-03-06 02:00",
    ),
    # Monday the 9th: the 10th (a Tuesday) by its date, the 9th by its weekday.
    ("the 10th or a Monday", "0 0 10 * MON", "2026-03-09 12:00", "2026-03-10", "2026-03-09"),
    # Not "the first Monday": the first seven days AND every Monday.
    ("days 1-7 or a Monday", "0 0 1-7 * MON", "2026-03-09 12:00", "2026-03-16", "2026-03-09"),
    # A day field starting with * is unrestricted for the rule: odd dates that are Mondays.
    ("odd days that are Mondays", "0 0 */2 * MON", "2026-03-10", "2026-03-23", "2026-03-09"),
    ("month names", "0 0 1 JAN,jul *", "2026-03-02", "2026-07-01", "2026-01-01"),
    ("New Year", "0 0 1 1 *", "2026-12-31 23:59:59", "2027-01-01", "2026-01-01"),
    (
        "the last second of a year",
        "59 59 23 31 12 *",
        "2027-01-01 00:00",
        "2027-12-31 23:59:59",
        "2026-12-31 23:59:59",
    ),
    ("leap day", "0 0 29 2 *", "2026-03-02", "2028-02-29", "2024-02-29"),
    ("leap day across 2100", "0 0 29 2 *", "2100-03-01", "2104-02-29", "2096-02-29"),
    ("leap day on a Sunday", "0 0 29 2 */7", "2100-03-01", "2128-02-29", "2088-02-29"),
    ("weekly", "@weekly", "2026-03-04 12:00", "2026-03-08", "2026-03-01"),
    ("7 as Sunday", "0 0 * * 7", "2026-03-04 12:00", "2026-03-08", "2026-03-01"),
    ("a range with a step", "10-50/20 * * * *", "2026-03-02 09:31", "09:50", "09:30"),
    ("a range with a step past its end", "10-50/20 * * * *", "2026-03-02 09:55", "10:10", "09:50"),
    ("a value with a step", "5/20 * * * *", "2026-03-02 09:30", "09:45", "09:25"),
    ("monthly", "@monthly", "2026-03-02", "2026-04-01", "2026-03-01"),
]


def due(t: str, when: str) -> datetime:
    """when is a full "YYYY-MM-DD[ HH:MM[:SS]]" or a time on t's day."""
    return at(when) if "-" in when else at(f"{t[:10]} {when}")


@pytest.mark.parametrize(
    ("expression", "t", "after", "before"),
    [case[1:] for case in DUE_TIMES],
    ids=[case[0] for case in DUE_TIMES],
)
def test_next_after_and_previous_at_or_before(
    expression: str, t: str, after: str, before: str
) -> None:
    schedule = parse(expression)
    assert schedule.next_after(at(t)) == due(t, after)
    assert schedule.previous_at_or_before(at(t)) == due(t, before)


@pytest.mark.parametrize(
    ("expression", "t"),
    [
        ("*/10 * * * * *", "2026-03-02 09:00:10"),
        ("30 2 * * *", "2026-03-02 02:30"),
        ("@yearly", "2026-01-01"),
        ("0 0 29 2 *", "2028-02-29"),
    ],
)
def test_previous_at_or_before_a_due_time_is_that_time_and_next_after_is_later(
    expression: str, t: str
) -> None:
    schedule = parse(expression)
    assert schedule.previous_at_or_before(at(t)) == at(t)
    assert schedule.next_after(at(t)) > at(t)


def test_results_are_whole_seconds_in_utc_from_any_aware_datetime() -> None:
    schedule = parse("* * * * * *")
    t = datetime(2026, 3, 2, 11, 0, 0, 500_000, tzinfo=timezone(timedelta(hours=2)))
    assert schedule.next_after(t) == at("2026-03-02 09:00:01")
    assert schedule.previous_at_or_before(t) == at("2026-03-02 09:00:00")
    assert schedule.next_after(t).tzinfo is UTC
    assert schedule.previous_at_or_before(t).microsecond == 0


def test_a_five_field_schedule_is_due_at_second_zero() -> None:
    assert parse("* * * * *").next_after(at("2026-03-02 09:00:59")) == at("2026-03-02 09:01:00")


@pytest.mark.parametrize("method", ["next_after", "previous_at_or_before", "period_at"])
def test_a_naive_datetime_is_refused(method: str) -> None:
    with pytest.raises(ValueError, match="time zone"):
        getattr(parse("@daily"), method)(datetime(2026, 3, 2))


@pytest.mark.parametrize(
    ("expression", "t", "period"),
    [
        ("*/10 * * * * *", "2026-03-02 09:00:05", timedelta(seconds=10)),
        ("0 2 * * 1-5", "2026-03-09 09:00", timedelta(days=3)),  # a Monday: from Friday
        ("0 2 * * 1-5", "2026-03-11 09:00", timedelta(days=1)),  # a Wednesday
        ("0 2 * * 1-5", "2026-03-09 01:00", timedelta(days=1)),  # Monday before 02:00
        ("@monthly", "2026-03-15", timedelta(days=28)),  # February's
        ("0 0 29 2 *", "2028-03-01", timedelta(days=366 + 3 * 365)),
    ],
)
def test_period_at_is_the_gap_before_the_last_due_time(
    expression: str, t: str, period: timedelta
) -> None:
    assert parse(expression).period_at(at(t)) == period


@pytest.mark.parametrize(
    "expression", ["@yearly", "0 0 29 2 *", "0 0 29 2 */7", "59 59 23 31 12 *"]
)
def test_rare_schedules_answer_in_well_under_a_few_milliseconds(expression: str) -> None:
    schedule = parse(expression)
    t = at("2026-03-02 09:00")
    started = time.perf_counter()
    for _ in range(100):
        schedule.next_after(t)
        schedule.previous_at_or_before(t)
        schedule.period_at(t)
    assert (time.perf_counter() - started) / 100 < 0.005


# --- parsing --------------------------------------------------------------------------------


def test_parse_keeps_each_fields_values_and_the_day_rule() -> None:
    schedule = parse("*/20 30 2,14 1-7 jan-MAR/2 MON-FRI,7")
    assert schedule == Schedule(
        expression="*/20 30 2,14 1-7 jan-MAR/2 MON-FRI,7",
        seconds=(0, 20, 40),
        minutes=(30,),
        hours=(2, 14),
        days_of_month=(1, 2, 3, 4, 5, 6, 7),
        months=(1, 3),
        days_of_week=(0, 1, 2, 3, 4, 5),
        either_day=True,
    )


@pytest.mark.parametrize(
    ("macro", "fields"),
    [
        ("@yearly", "0 0 1 1 *"),
        ("@annually", "0 0 1 1 *"),
        ("@monthly", "0 0 1 * *"),
        ("@weekly", "0 0 * * 0"),
        ("@daily", "0 0 * * *"),
        ("@midnight", "0 0 * * *"),
        ("@hourly", "0 * * * *"),
    ],
)
def test_a_macro_is_its_five_fields(macro: str, fields: str) -> None:
    expanded = parse(fields)
    assert parse(macro) == Schedule(**{**vars(expanded), "expression": macro})


# (schedule, the field the message names, text it must quote)
ERRORS = [
    ("0 0 * *", "schedule", "minute hour day-of-month month day-of-week"),
    ("0 0 0 * * * *", "schedule", "has 7 fields"),
    ("", "schedule", "empty"),
    ("60 * * * * *", "second", "60 is out of range 0-59"),
    ("60 * * * *", "minute", "60 is out of range 0-59"),
    ("0 24 * * *", "hour", "24 is out of range 0-23"),
    ("0 0 0 * *", "day-of-month", "0 is out of range 1-31"),
    ("0 0 32 * *", "day-of-month", "32 is out of range 1-31"),
    ("0 0 * 13 *", "month", "13 is out of range 1-12"),
    ("0 0 * * 8", "day-of-week", "8 is out of range 0-7"),
    ("007 * * * *", "minute", "007 has more than two digits"),
    ("*/0 * * * *", "minute", "step /0"),
    ("0 */24 * * *", "hour", "step /24"),
    ("5-1 * * * *", "minute", "range 5-1 is reversed"),
    ("0 0 * * FRI-SUN", "day-of-week", "range FRI-SUN is reversed"),
    ("0 0 * FOO *", "month", "FOO is not a month name (JAN-DEC)"),
    ("0 0 * * MOO", "day-of-week", "MOO is not a day-of-week name (SUN-SAT)"),
    ("0 MON * * *", "hour", "MON is a name"),
    ("1,,2 * * * *", "minute", "empty item"),
    ("-5 * * * *", "minute", "-5 is not a range"),
    ("TZ=Europe/Paris 0 2 * * *", "time zone", "TZ=Europe/Paris is not supported"),
    ("CRON_TZ=UTC 0 2 * * *", "time zone", "CRON_TZ=UTC is not supported"),
    ("@reboot", "schedule", "unknown macro"),
    (" 0 2 * * *", "schedule", "spaces before or after"),
    ("0 0 30 2 *", "day-of-month", "30 never falls in month 2"),
    ("0 0 31 4,6,9,11 *", "day-of-month", "31 never falls in month 4,6,9,11"),
]


@pytest.mark.parametrize(("expression", "field", "text"), ERRORS, ids=[e[0] for e in ERRORS])
def test_an_invalid_schedule_is_refused_with_a_message_naming_the_field(
    expression: str, field: str, text: str
) -> None:
    with pytest.raises(CronError) as refused:
        parse(expression)
    message = str(refused.value)
    assert message.startswith(f"{field}: ")
    assert text in message
    assert f'"{expression}"' in message
    assert validate(expression) == message


def test_a_wrong_field_count_says_what_a_schedule_looks_like() -> None:
    message = validate("0 2 * *")
    assert message is not None
    assert '"0 2 * *" has 4 fields' in message
    assert "second minute hour day-of-month month day-of-week" in message
    assert "@daily" in message


def test_validate_is_none_for_a_valid_schedule() -> None:
    assert validate("0 2 * * *") is None


def test_leap_day_and_feb_29_or_a_weekday_are_valid() -> None:
    assert validate("0 0 29 2 *") is None
    assert validate("0 0 30 2 MON") is None  # either rule: every Monday in February


# --- random schedules -----------------------------------------------------------------------

MONTHS = ("JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC")
WEEKDAYS = ("SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT")
# (low, high, names, value of the first name) for second .. day-of-week
FIELDS: list[tuple[int, int, tuple[str, ...], int]] = [
    (0, 59, (), 0),
    (0, 59, (), 0),
    (0, 23, (), 0),
    (1, 31, (), 0),
    (1, 12, MONTHS, 1),
    (0, 7, WEEKDAYS, 0),
]


def random_item(rng: random.Random, low: int, high: int, names: tuple[str, ...], first: int) -> str:
    def text(value: int) -> str:
        if names and 0 <= value - first < len(names) and rng.random() < 0.4:
            return rng.choice([str.upper, str.lower, str.title])(names[value - first])
        return rng.choice([str(value), f"{value:02d}"])

    a, b = sorted(rng.randint(low, high) for _ in range(2))
    step = rng.randint(1, high)
    return rng.choice(
        [
            "*",
            text(a),
            f"{text(a)}-{text(b)}",
            f"*/{step}",
            f"{text(a)}-{text(b)}/{step}",
            f"{text(a)}/{step}",
        ]
    )


def random_expression(rng: random.Random) -> str:
    if rng.random() < 0.05:
        return rng.choice(["@yearly", "@monthly", "@weekly", "@daily", "@hourly"])
    fields = FIELDS if rng.random() < 0.3 else FIELDS[1:]
    texts = []
    for field in fields:
        if rng.random() < 0.4:
            texts.append("*")
        else:
            items = rng.randint(1, 3)
            texts.append(",".join(random_item(rng, *field) for _ in range(items)))
    return " ".join(texts)


def random_schedules(seed: int, count: int) -> list[Schedule]:
    rng = random.Random(seed)  # noqa: S311 - a test's dice, not a secret
    schedules: list[Schedule] = []
    while len(schedules) < count:
        expression = random_expression(rng)
        if validate(expression) is None:  # a random February 30th is skipped
            schedules.append(parse(expression))
    return schedules


def random_instant(rng: random.Random) -> datetime:
    return at("2000-01-01") + timedelta(seconds=rng.randrange(100 * 365 * 86400))


def test_next_and_previous_agree_on_random_schedules() -> None:
    rng = random.Random(7)  # noqa: S311 - a test's dice, not a secret
    for schedule in random_schedules(seed=1, count=200):
        t = random_instant(rng)
        after = schedule.next_after(t)
        before = schedule.previous_at_or_before(t)
        assert after > t, schedule.expression
        assert before <= t, schedule.expression
        assert schedule.previous_at_or_before(after) == after, schedule.expression
        assert schedule.next_after(before) > t, schedule.expression
        assert schedule.next_after(before) == after, schedule.expression


def is_due(schedule: Schedule, t: datetime) -> bool:
    """The definition of a due time, checked directly (no search)."""
    in_month = t.day in schedule.days_of_month
    in_week = t.isoweekday() % 7 in schedule.days_of_week
    day = (in_month or in_week) if schedule.either_day else (in_month and in_week)
    return (
        day
        and t.month in schedule.months
        and t.hour in schedule.hours
        and t.minute in schedule.minutes
        and t.second in schedule.seconds
    )


def test_the_search_finds_what_a_minute_by_minute_walk_finds() -> None:
    rng = random.Random(11)  # noqa: S311 - a test's dice, not a secret
    five_fields = [s for s in random_schedules(seed=2, count=200) if s.seconds == (0,)][:60]
    for schedule in five_fields:
        start = random_instant(rng).replace(second=0)
        minutes = [start + timedelta(minutes=i) for i in range(2 * 24 * 60)]
        walked = [t for t in minutes if is_due(schedule, t)]
        searched, t = [], start - timedelta(seconds=1)
        while (t := schedule.next_after(t)) <= minutes[-1]:
            searched.append(t)
        assert searched == walked, schedule.expression
        backwards, t = [], minutes[-1]
        while (t := schedule.previous_at_or_before(t)) >= start:
            backwards.append(t)
            t -= timedelta(seconds=1)
        assert backwards[::-1] == walked, schedule.expression


# --- the CRD's pattern ----------------------------------------------------------------------


def pattern_accepts(expression: str) -> bool:
    # fullmatch: Python's $ also matches before a final newline, Go's (the API server's) does not.
    return re.fullmatch(PATTERN, expression) is not None


VALID = [case[1] for case in DUE_TIMES] + [
    "0 30 2 * * *",
    "00 05 02 01 01 00",
    "*/20 30 2,14 1-7 jan-MAR/2 MON-FRI,7",
    "0   2  *  *  *",
    "0 0 * * Sun",
    "0 0 * * sat-7",
    "0 0 1 DEC/1 *",
    "59 23 31 12 7",
    "0 0 30 2 MON",
    "@annually",
    "@midnight",
    "@daily",
]
# Refused by parse but passed by PATTERN: the order of a range and the calendar need more than a
# regular expression; the webhook's validate refuses them.
SEMANTIC = ["5-1 * * * *", "0 0 * * FRI-SUN", "0 0 30 2 *", "0 0 31 4,6,9,11 *"]


@pytest.mark.parametrize("expression", VALID)
def test_the_pattern_accepts_a_valid_schedule(expression: str) -> None:
    assert validate(expression) is None
    assert pattern_accepts(expression)


@pytest.mark.parametrize(
    "expression", [e[0] for e in ERRORS if e[0] not in SEMANTIC] + ["0 0 * * *\n", "0\t0 * * *"]
)
def test_the_pattern_refuses_a_malformed_schedule(expression: str) -> None:
    assert validate(expression) is not None
    assert not pattern_accepts(expression)


@pytest.mark.parametrize("expression", SEMANTIC)
def test_the_pattern_leaves_order_and_the_calendar_to_validate(expression: str) -> None:
    assert validate(expression) is not None
    assert pattern_accepts(expression)


@pytest.mark.parametrize("position", range(6))
def test_the_pattern_and_parse_agree_on_every_number_and_step_in_each_field(position: int) -> None:
    numbers = [str(n) for n in range(101)] + [f"0{n}" for n in range(10)] + ["000", "007", "010"]
    for text in numbers + [f"*/{n}" for n in numbers] + [f"{n}-{n}" for n in numbers]:
        fields = ["*"] * 6
        fields[position] = text
        expression = " ".join(fields)
        assert pattern_accepts(expression) == (validate(expression) is None), expression


@pytest.mark.parametrize("position", range(6))
def test_the_pattern_and_parse_agree_on_names_in_each_field(position: int) -> None:
    for name in [*MONTHS, *WEEKDAYS, "FOO", "JANUARY", "MO"]:
        for text in [name, name.lower(), name.title()]:
            fields = ["*"] * 6
            fields[position] = text
            expression = " ".join(fields)
            assert pattern_accepts(expression) == (validate(expression) is None), expression


def test_the_pattern_accepts_every_random_valid_schedule() -> None:
    for schedule in random_schedules(seed=3, count=200):
        assert pattern_accepts(schedule.expression), schedule.expression


def test_the_pattern_is_anchored_re2_without_special_groups() -> None:
    assert PATTERN.startswith("^")
    assert PATTERN.endswith("$")
    assert "(?" not in PATTERN
    assert "\\1" not in PATTERN
