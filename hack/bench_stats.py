"""`make bench`'s arithmetic: percentiles, medians over runs.

Pure functions (no I/O, no sibling imports), so the unit tests load this file on its own.
"""

from __future__ import annotations

import statistics
from typing import Any


def percentile(values: list[float], share: float) -> float:
    """The nearest-rank percentile (``share`` in 0..1); NaN with no values."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(share * (len(ordered) - 1)))]


def is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def median_of(runs: list[Any]) -> Any:
    """The median of each figure over runs of the same shape.

    Numbers: their median. Dicts: key by key, over every run's keys; a key a run lacks counts
    0 when the others are numbers (request counts leave out what was not requested). Lists
    and strings: the first run's (they label a run, they are not measured). None: None.
    """
    present = [run for run in runs if run is not None]
    if not present:
        return None
    if all(isinstance(run, dict) for run in present):
        keys = list(dict.fromkeys(key for run in present for key in run))
        merged: dict[str, Any] = {}
        for key in keys:
            values = [run.get(key) for run in present]
            numbers = [value for value in values if value is not None]
            if numbers and all(is_number(value) for value in numbers):
                values = [0.0 if value is None else value for value in values]
            merged[key] = median_of(values)
        return merged
    if all(is_number(run) for run in present):
        return statistics.median(present)
    return present[0]
