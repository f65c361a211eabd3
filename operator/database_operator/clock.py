"""The clock the reconcile layers read: a function, so tests can pass their own."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime

#: What "now" is: the wall clock in production, a fixed or stepped time in tests.
Clock = Callable[[], datetime]


def system_clock() -> datetime:
    return datetime.now(UTC)
