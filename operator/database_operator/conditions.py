"""Conditions (metav1.Condition) as every status here keeps them: a verdict (status, reason,
message) per type, stamped with the generation it was computed for, its lastTransitionTime moved
only when its status flips. Pure; shared by the Database's and the DatabaseBackup's status."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime

from database_operator.api.common import Condition, ConditionStatus
from database_operator.reasons import Reason


@dataclass(frozen=True)
class Verdict:
    """One condition's status, reason and message, before times and generations are stamped."""

    status: ConditionStatus
    reason: str
    message: str = ""


def true(reason: Reason, message: str = "") -> Verdict:
    return Verdict(ConditionStatus.TRUE, reason, message)


def false(reason: Reason, message: str = "") -> Verdict:
    return Verdict(ConditionStatus.FALSE, reason, message)


def set_condition(conditions: list[Condition], new: Condition) -> list[Condition]:
    """`conditions` with `new` in place of the one of its type (appended if absent).

    lastTransitionTime is kept from the old condition when status did not change: it records
    when the status last flipped, not when it was last evaluated. The input is not modified.
    """
    result: list[Condition] = []
    replaced = False
    for old in conditions:
        if old.type != new.type:
            result.append(old)
            continue
        if old.status == new.status:
            new = new.model_copy(update={"last_transition_time": old.last_transition_time})
        result.append(new)
        replaced = True
    return result if replaced else [*result, new]


def whole_seconds(now: datetime) -> datetime:
    """`now` at whole seconds, as metav1.Time stores it (so a round trip compares equal)."""
    if now.tzinfo is None:
        raise ValueError("now must be timezone-aware, e.g. datetime.now(UTC)")
    return now.replace(microsecond=0)


def stamped(
    previous: list[Condition] | None,
    verdicts: Mapping[str, Verdict | None],
    generation: int | None,
    now: datetime,
) -> list[Condition]:
    """``previous`` with a condition of each type in ``verdicts`` set from its verdict (None:
    the type is removed), stamped with ``generation``; times move only on a flip."""
    conditions = [c for c in previous or [] if verdicts.get(c.type, c) is not None]
    at = whole_seconds(now)
    for type_, verdict in verdicts.items():
        if verdict is None:
            continue
        conditions = set_condition(
            conditions,
            Condition(
                type=type_,
                status=verdict.status,
                observed_generation=generation,
                last_transition_time=at,
                reason=verdict.reason,
                message=verdict.message,
            ),
        )
    return conditions
