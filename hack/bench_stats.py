"""`make bench`'s arithmetic: percentiles.

Pure functions (no I/O, no sibling imports), so the unit tests load this file on its own.
"""

from __future__ import annotations


def percentile(values: list[float], share: float) -> float:
    """The nearest-rank percentile (``share`` in 0..1); NaN with no values."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(share * (len(ordered) - 1)))]
