"""What the operator's log keeps of Kopf's lines."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path

import kopf
import pytest
from kopf._core.actions import loggers as kopf_loggers

from database_operator.logs import _DROPPED_EXTRAS, _RoutineSuccess


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


def test_kopf_still_logs_each_handler_run_as_the_filter_expects() -> None:
    # Read from the installed Kopf: a release that renames the logger or rewords the line would
    # let every watch event's line through at INFO again.
    assert kopf_loggers.logger.name == "kopf.objects"
    execution = (Path(kopf.__file__).parent / "_core" / "actions" / "execution.py").read_text()
    assert 'return f"Handler {self.id!r}"' in execution
    assert 'logger.info(f"{handler} succeeded.")' in execution


def test_kopfs_object_records_still_carry_the_extras_the_log_reads() -> None:
    body = kopf.Body(
        {
            "apiVersion": "databases.example.com/v1",
            "kind": "Database",
            "metadata": {"name": "db", "namespace": "shop", "uid": "1"},
        }
    )
    extra = kopf_loggers.ObjectLogger(body=body, settings=kopf.OperatorSettings()).extra or {}
    assert set(extra) == _DROPPED_EXTRAS
    ref = extra["k8s_ref"]
    assert isinstance(ref, dict)
    assert (ref["kind"], ref["namespace"], ref["name"]) == ("Database", "shop", "db")
