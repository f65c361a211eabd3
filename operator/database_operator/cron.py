"""Cron schedules for backups: parse one once, then ask for the due times around any instant.

A schedule is one of:

- 5 fields ``minute hour day-of-month month day-of-week``, as a Kubernetes CronJob (Vixie cron);
- 6 fields with a leading ``second``, as CloudNativePG's ScheduledBackup (it can run more than
  once a minute);
- a macro: ``@yearly``/``@annually``, ``@monthly``, ``@weekly``, ``@daily``/``@midnight`` or
  ``@hourly`` (lower case, as cron writes them).

Fields are separated by spaces. Each is ``*``, a value, a range ``a-b``, a step ``*/n``, ``a-b/n``
or ``a/n`` (from a to the field's largest value), or a comma-separated list of those. A value is
one or two digits (``5`` or ``05``): second and minute 0-59, hour 0-23, day-of-month 1-31, month
1-12 or JAN-DEC, day-of-week 0-7 (0 and 7 are both Sunday) or SUN-SAT; names are
case-insensitive; a step is 1 to the field's largest value; ranges go upward (no wrap-around).

The day rule is Vixie cron's: when both day fields are restricted (neither starts with ``*``) a
day is due when EITHER matches, otherwise when both do. So ``0 0 1-7 * MON`` runs on the first
seven days and on every Monday, while ``0 0 */2 * MON`` runs on Mondays with an odd date.

All times are UTC; a ``TZ=`` or ``CRON_TZ=`` prefix is refused rather than silently ignored. A
schedule that can never fire (``0 0 30 2 *``, February 30th) is refused.

`PATTERN` is the same grammar as one RE2 regular expression for the CRD's OpenAPI schema, so the
API server refuses a malformed schedule before the operator sees it. A regular expression cannot
see order or the calendar: a reversed range (``5-1``) and an impossible date (February 30th) pass
it and are refused by `validate`, which the admission webhook and the operator call.
"""

from __future__ import annotations

import calendar
import re
from bisect import bisect_left, bisect_right
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import MAXYEAR, MINYEAR, UTC, date, datetime, time, timedelta


class CronError(ValueError):
    """A schedule that cannot be used; the message names the field and the offending text."""


@dataclass(frozen=True)
class _Field:
    """One cron field: its name, its values' range and the names it accepts for them."""

    name: str
    low: int
    high: int
    #: Names for the values first_named, first_named + 1, ... (upper case).
    names: tuple[str, ...] = ()
    first_named: int = 0


_SECOND = _Field("second", 0, 59)
_MINUTE = _Field("minute", 0, 59)
_HOUR = _Field("hour", 0, 23)
_DAY_OF_MONTH = _Field("day-of-month", 1, 31)
_MONTH = _Field(
    "month",
    1,
    12,
    names=("JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC"),
    first_named=1,
)
_DAY_OF_WEEK = _Field(
    "day-of-week", 0, 7, names=("SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"), first_named=0
)
_FIVE_FIELDS = (_MINUTE, _HOUR, _DAY_OF_MONTH, _MONTH, _DAY_OF_WEEK)

_MACROS = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}

_EXPECTED = (
    'a schedule is 5 fields "minute hour day-of-month month day-of-week" (e.g. "30 2 * * *"), '
    '6 fields "second minute hour day-of-month month day-of-week" (e.g. "0 30 2 * * *"), '
    "or one of " + ", ".join(_MACROS)
)

#: The most days each month can have (February's in a leap year).
_LONGEST_MONTH = {month: calendar.monthrange(2000, month)[1] for month in range(1, 13)}

#: How far the search walks, in months. The Gregorian calendar repeats every 400 years (146097
#: days, a whole number of weeks), so a schedule that fires at all fires within one cycle. The
#: walk visits only the allowed months' days, so even the rarest valid schedules answer quickly:
#: February 29th is up to 8 years away (2096 -> 2104), February 29th on a Sunday up to 40.
_CYCLE_MONTHS = 400 * 12 + 1

_ONE_SECOND = timedelta(seconds=1)
_TWO_DIGITS = re.compile(r"[0-9]{1,2}")


# --- parsing --------------------------------------------------------------------------------


def _error(field: _Field | str, problem: str, expression: str) -> CronError:
    name = field if isinstance(field, str) else field.name
    return CronError(f'{name}: {problem} in "{expression}"')


def _value(field: _Field, text: str, expression: str) -> int:
    """One value of the field: a number or (month, day-of-week) a name."""
    if text.isascii() and text.upper() in field.names:
        return field.first_named + field.names.index(text.upper())
    if _TWO_DIGITS.fullmatch(text):
        value = int(text)
    elif text.isascii() and text.isdigit():
        value = int(text)
        if field.low <= value <= field.high:
            raise _error(field, f"{text} has more than two digits", expression)
    elif text.isascii() and text.isalpha():
        if field.names:
            known = f"{field.names[0]}-{field.names[-1]}"
            raise _error(field, f"{text} is not a {field.name} name ({known})", expression)
        raise _error(field, f"{text} is a name; only month and day-of-week take names", expression)
    else:
        raise _error(field, f"{text!r} is not a number", expression)
    if not field.low <= value <= field.high:
        raise _error(field, f"{text} is out of range {field.low}-{field.high}", expression)
    return value


def _step(field: _Field, text: str, expression: str) -> int:
    if not _TWO_DIGITS.fullmatch(text) or not 1 <= int(text) <= field.high:
        raise _error(field, f"step /{text} must be a number 1-{field.high}", expression)
    return int(text)


def _item(field: _Field, item: str, expression: str) -> range:
    """The values of one list item: ``*``, ``a``, ``a-b``, each with an optional ``/step``."""
    base, slash, step_text = item.partition("/")
    step = _step(field, step_text, expression) if slash else 1
    if base == "*":
        return range(field.low, field.high + 1, step)
    if "-" in base:
        first_text, _, last_text = base.partition("-")
        if not first_text or not last_text:
            raise _error(field, f"{base} is not a range a-b", expression)
        first, last = _value(field, first_text, expression), _value(field, last_text, expression)
        if first > last:
            problem = f"range {base} is reversed: ranges go upward and do not wrap around"
            raise _error(field, problem, expression)
        return range(first, last + 1, step)
    first = _value(field, base, expression)
    return range(first, field.high + 1 if slash else first + 1, step)


def _values(field: _Field, text: str, expression: str) -> tuple[int, ...]:
    """The field's allowed values, ascending (day-of-week's 7 folded onto Sunday's 0)."""
    values: set[int] = set()
    for item in text.split(","):
        if not item:
            raise _error(field, f"empty item in the list {text}", expression)
        values.update(_item(field, item, expression))
    if field is _DAY_OF_WEEK:
        values = {value % 7 for value in values}
    return tuple(sorted(values))


def parse(expression: str) -> Schedule:
    """The schedule an expression describes; raises CronError when it is not a usable one."""
    if not expression.strip():
        raise CronError(f'schedule: empty ("{expression}"); {_EXPECTED}')
    if re.match(r"(CRON_)?TZ=", expression):
        prefix = expression.split(maxsplit=1)[0]
        problem = f"{prefix} is not supported (schedules are in UTC: drop it, give UTC times)"
        raise _error("time zone", problem, expression)
    if expression != expression.strip():
        raise _error("schedule", "spaces before or after the fields", expression)
    if expression.startswith("@"):
        if expression not in _MACROS:
            raise CronError(f'schedule: unknown macro "{expression}"; {_EXPECTED}')
        texts = _MACROS[expression].split()
    else:
        texts = [text for text in expression.split(" ") if text]
    if len(texts) not in (5, 6):
        raise CronError(f'schedule: "{expression}" has {len(texts)} fields; {_EXPECTED}')
    if len(texts) == 5:
        texts = ["0", *texts]
    fields = (_SECOND, *_FIVE_FIELDS)
    second, minute, hour, dom, month, dow = (
        _values(field, text, expression) for field, text in zip(fields, texts, strict=True)
    )
    schedule = Schedule(
        expression=expression,
        seconds=second,
        minutes=minute,
        hours=hour,
        days_of_month=dom,
        months=month,
        days_of_week=dow,
        either_day=not texts[3].startswith("*") and not texts[5].startswith("*"),
    )
    # Either rule: every month has each weekday. Otherwise some allowed month must have one of
    # the allowed dates; over the 400-year cycle every date then falls on every weekday.
    if not schedule.either_day and not any(d <= _LONGEST_MONTH[m] for m in month for d in dom):
        problem = f"{texts[3]} never falls in month {texts[4]}"
        raise _error(_DAY_OF_MONTH, problem, expression)
    return schedule


def validate(expression: str) -> str | None:
    """None when the expression is a valid schedule, else what is wrong with it (for webhooks)."""
    try:
        parse(expression)
    except CronError as error:
        return str(error)
    return None


# --- due times ------------------------------------------------------------------------------


def _utc_second(t: datetime) -> datetime:
    """t in UTC without its microseconds; refuses a naive datetime."""
    if t.utcoffset() is None:
        raise ValueError(f"{t.isoformat()} has no time zone: pass a timezone-aware UTC datetime")
    return t.astimezone(UTC).replace(microsecond=0)


def _shift(t: datetime, delta: timedelta) -> datetime:
    try:
        return t + delta
    except OverflowError:
        raise ValueError(f"{t.isoformat()} is at the end of the calendar") from None


@dataclass(frozen=True)
class Schedule:
    """A parsed schedule: each field's allowed values, ascending, and the day rule.

    The methods take and return timezone-aware datetimes in UTC (an aware datetime in another
    zone is converted) and raise ValueError on a naive one; results have microsecond 0, and a
    5-field schedule's have second 0.
    """

    expression: str
    seconds: tuple[int, ...]
    minutes: tuple[int, ...]
    hours: tuple[int, ...]
    days_of_month: tuple[int, ...]
    months: tuple[int, ...]
    #: 0-6, Sunday is 0 (a 7 in the expression is Sunday too).
    days_of_week: tuple[int, ...]
    #: Vixie cron's rule: both day fields are restricted, so a day is due when either matches.
    either_day: bool

    def next_after(self, t: datetime) -> datetime:
        """The first due time strictly after t."""
        return self._first_at_or_after(_shift(_utc_second(t), _ONE_SECOND))

    def previous_at_or_before(self, t: datetime) -> datetime:
        """The last due time at or before t."""
        return self._last_at_or_before(_utc_second(t))

    def period_at(self, t: datetime) -> timedelta:
        """One schedule period at t: from the due time before the last one at or before t to it."""
        last = self.previous_at_or_before(t)
        return last - self._last_at_or_before(_shift(last, -_ONE_SECOND))

    def _first_at_or_after(self, start: datetime) -> datetime:
        first_day = start.date()
        for day in self._due_days(first_day, forward=True):
            at = self._earliest(start.time() if day == first_day else time.min)
            if at is not None:
                return datetime.combine(day, at, UTC)
        raise ValueError(f'"{self.expression}" has no due time after {start.isoformat()}')

    def _last_at_or_before(self, end: datetime) -> datetime:
        last_day = end.date()
        for day in self._due_days(last_day, forward=False):
            at = self._latest(end.time() if day == last_day else time.max)
            if at is not None:
                return datetime.combine(day, at, UTC)
        raise ValueError(f'"{self.expression}" has no due time before {end.isoformat()}')

    def _due_days(self, start: date, *, forward: bool) -> Iterator[date]:
        """The due days from start on (forward) or back, visiting only the allowed months."""
        year, month, first = start.year, start.month, start.day
        for _ in range(_CYCLE_MONTHS):
            if month in self.months:
                weekday_of_1st, length = calendar.monthrange(year, month)
                days = range(first, length + 1) if forward else range(min(first, length), 0, -1)
                for day in days:
                    # calendar counts weekdays from Monday = 0, cron from Sunday = 0.
                    if self._is_due(day, (weekday_of_1st + day) % 7):
                        yield date(year, month, day)
            if forward:
                (year, month), first = _next_month(year, month), 1
            else:
                (year, month), first = _previous_month(year, month), 31
            if not MINYEAR <= year <= MAXYEAR:
                return

    def _is_due(self, day: int, weekday: int) -> bool:
        in_month = day in self.days_of_month
        in_week = weekday in self.days_of_week
        return (in_month or in_week) if self.either_day else (in_month and in_week)

    def _earliest(self, lower: time) -> time | None:
        """The first due time of a day at or after lower (on a due day)."""
        for hour in self.hours[bisect_left(self.hours, lower.hour) :]:
            first_minute = lower.minute if hour == lower.hour else 0
            for minute in self.minutes[bisect_left(self.minutes, first_minute) :]:
                same = (hour, minute) == (lower.hour, lower.minute)
                i = bisect_left(self.seconds, lower.second if same else 0)
                if i < len(self.seconds):
                    return time(hour, minute, self.seconds[i])
        return None

    def _latest(self, upper: time) -> time | None:
        """The last due time of a day at or before upper (on a due day)."""
        for hour in reversed(self.hours[: bisect_right(self.hours, upper.hour)]):
            last_minute = upper.minute if hour == upper.hour else 59
            for minute in reversed(self.minutes[: bisect_right(self.minutes, last_minute)]):
                same = (hour, minute) == (upper.hour, upper.minute)
                i = bisect_right(self.seconds, upper.second if same else 59)
                if i:
                    return time(hour, minute, self.seconds[i - 1])
        return None


def _next_month(year: int, month: int) -> tuple[int, int]:
    return (year, month + 1) if month < 12 else (year + 1, 1)


def _previous_month(year: int, month: int) -> tuple[int, int]:
    return (year, month - 1) if month > 1 else (year - 1, 12)


# --- the CRD's pattern ----------------------------------------------------------------------


def _digits(first: int, last: int) -> str:
    """A character class for the digits first..last."""
    if first == last:
        return str(first)
    return f"[{first}{last}]" if last == first + 1 else f"[{first}-{last}]"


def _number_pattern(low: int, high: int) -> str:
    """The numbers low..high (low 0 or 1, high below 100) in one or two digits: 5 and 05."""
    alternatives = [f"0?{_digits(low, min(high, 9))}"]
    full_tens = [tens for tens in range(1, 10) if tens * 10 + 9 <= high]
    if full_tens:
        alternatives.append(f"{_digits(full_tens[0], full_tens[-1])}[0-9]")
    top = high // 10
    if top >= 1 and top not in full_tens:
        alternatives.append(f"{top}{_digits(0, high % 10)}")
    return "|".join(alternatives)


def _name_pattern(name: str) -> str:
    """A name in any case, without the (?i) flag: MON -> [Mm][Oo][Nn]."""
    return "".join(f"[{letter.upper()}{letter.lower()}]" for letter in name)


def _field_pattern(field: _Field) -> str:
    """A comma-separated list of ``*`` or ``a`` or ``a-b``, each with an optional ``/step``."""
    value = (
        "("
        + "|".join([_number_pattern(field.low, field.high), *map(_name_pattern, field.names)])
        + ")"
    )
    item = rf"(\*|{value}(-{value})?)(/({_number_pattern(1, field.high)}))?"
    return f"{item}(,{item})*"


def _schedule_pattern() -> str:
    fields = " +".join(_field_pattern(field) for field in _FIVE_FIELDS)
    macros = "@(" + "|".join(macro.removeprefix("@") for macro in _MACROS) + ")"
    return f"^(({_field_pattern(_SECOND)} +)?{fields}|{macros})$"


#: The schedule grammar as one RE2 expression (no lookarounds, no backreferences, no (?flags))
#: for the CRD's OpenAPI `pattern`: it accepts every schedule `parse` accepts and refuses wrong
#: field counts, out-of-range numbers and steps, unknown names and names outside month and
#: day-of-week. It passes reversed ranges and impossible dates, which `validate` refuses.
PATTERN: str = _schedule_pattern()
