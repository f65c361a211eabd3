"""`make bench`'s arithmetic: percentiles, medians over runs, Prometheus histograms.

Pure functions (no I/O, no sibling imports), so the unit tests load this file on its own.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable
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


# --- Prometheus text ------------------------------------------------------------------------------

Labels = dict[str, str]


def samples(text: str, name: str) -> list[tuple[Labels, float]]:
    """Every sample of metric ``name`` (exactly: ``name`` or ``name{...}``) in Prometheus text
    exposition, with its labels. Label values are assumed free of ``,`` and ``"``."""
    found: list[tuple[Labels, float]] = []
    for line in text.splitlines():
        if line.startswith("#") or not line.startswith(name):
            continue
        rest = line[len(name) :]
        if rest.startswith("{"):
            inside, value = rest[1:].rsplit("} ", 1)
            labels = dict(
                part.split("=", 1) for part in inside.replace('"', "").split(",") if "=" in part
            )
        elif rest.startswith(" "):
            labels, value = {}, rest
        else:
            continue  # another metric sharing the prefix
        found.append((labels, float(value.split()[0])))
    return found


def buckets_by(text: str, histogram: str, label: str) -> dict[str, list[tuple[float, float]]]:
    """A histogram's cumulative buckets, summed over every label but ``label``:
    {label value: [(upper bound, count), ...]} sorted by bound."""
    summed: dict[str, dict[float, float]] = {}
    for labels, value in samples(text, f"{histogram}_bucket"):
        bound = math.inf if labels["le"] in ("+Inf", "Inf") else float(labels["le"])
        group = summed.setdefault(labels.get(label, ""), {})
        group[bound] = group.get(bound, 0.0) + value
    return {key: sorted(bounds.items()) for key, bounds in summed.items()}


def histogram_quantile(share: float, buckets: Iterable[tuple[float, float]]) -> float:
    """Prometheus's histogram_quantile over cumulative (upper bound, count) buckets: linear
    within the bucket the rank falls in; the highest finite bound when it falls in +Inf; NaN
    with no observations."""
    ordered = sorted(buckets)
    if not ordered or ordered[-1][1] <= 0:
        return float("nan")
    rank = share * ordered[-1][1]
    lower, below = 0.0, 0.0
    for bound, count in ordered:
        if count >= rank:
            if math.isinf(bound):
                return lower
            if count == below:
                return bound
            return lower + (bound - lower) * (rank - below) / (count - below)
        lower, below = bound, count
    return lower


def latency_summary(buckets: dict[str, list[tuple[float, float]]]) -> dict[str, dict[str, float]]:
    """{group: {"count", "p50_s", "p99_s"}} of each group's histogram."""
    return {
        key: {
            "count": bounds[-1][1] if bounds else 0.0,
            "p50_s": histogram_quantile(0.5, bounds),
            "p99_s": histogram_quantile(0.99, bounds),
        }
        for key, bounds in sorted(buckets.items())
    }
