"""What the operator's log keeps of Kopf's lines."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest

from database_operator.logs import _RoutineSuccess


def kopf_line(message: str, level: int = logging.INFO, name: str = "kopf.objects") -> bool:
    """Whether the operator's log keeps this line of Kopf's."""
    return _RoutineSuccess().filter(
        logging.LogRecord(name, level, __file__, 1, message, None, None)
    )


@pytest.fixture
def root_at_info() -> Iterator[logging.Logger]:
    root = logging.getLogger()
    level = root.level
    root.setLevel(logging.INFO)
    yield root
    root.setLevel(level)


@pytest.mark.parametrize("handler", ["databases", "databasebackups", "watch-deployments"])
def test_kopfs_line_for_each_event_shows_only_at_debug(
    handler: str, root_at_info: logging.Logger
) -> None:
    assert not kopf_line(f"Handler '{handler}' succeeded.")
    root_at_info.setLevel(logging.DEBUG)
    assert kopf_line(f"Handler '{handler}' succeeded.")


def test_kopfs_other_lines_are_kept(root_at_info: logging.Logger) -> None:
    assert kopf_line("Handler 'databases' failed with an exception. Will retry.", logging.ERROR)
    assert kopf_line("Handler 'configure' succeeded.")  # once, at start: worth a line
    assert kopf_line("Handler 'databases' succeeded.", name="kopf.activities")
