"""Structured logs: structlog for our own lines, and Kopf's stdlib records in the same format.

One handler on the root logger renders every record — ours and Kopf's — as one JSON object per
line (or coloured console lines for people). Kopf's per-object records carry ``k8s_ref``; its
namespace and name become top-level keys, so every line about a Database says which one.
"""

from __future__ import annotations

import logging
import sys
from typing import Any

import structlog
from structlog.types import EventDict, Processor, WrappedLogger

from database_operator import tracing
from database_operator.config import LogFormat

#: Keys of a stdlib record's ``extra`` that are Kopf internals, not facts worth a log line.
_DROPPED_EXTRAS = {"settings", "k8s_skip", "k8s_ref"}
#: LogRecord attributes that are not extras.
_RECORD_ATTRS = set(logging.makeLogRecord({}).__dict__) | {"message", "asctime"}


def _object_ref(_: WrappedLogger, __: str, event: EventDict) -> EventDict:
    """Lift Kopf's object reference and our ``extra=`` keys into the event dict."""
    record: logging.LogRecord | None = event.get("_record")
    if record is None:
        return event
    ref = getattr(record, "k8s_ref", None)
    if isinstance(ref, dict):
        for key in ("namespace", "name", "kind"):
            if ref.get(key):
                event.setdefault(key, ref[key])
    for key, value in record.__dict__.items():
        if key not in _RECORD_ATTRS and key not in _DROPPED_EXTRAS and not key.startswith("_"):
            event.setdefault(key, value)
    return event


def _trace_ids(_: WrappedLogger, __: str, event: EventDict) -> EventDict:
    """A line written inside a span names it (trace_id, span_id), so logs and traces join."""
    if tracing.enabled():
        for key, value in tracing.log_ids().items():
            event.setdefault(key, value)
    return event


class _RoutineSuccess(logging.Filter):
    """Kopf logs every watch event it hands to a handler at INFO; those are routine (our own
    "reconciled" line says what happened), so they show only at DEBUG."""

    ROUTINE = ("Handler 'databases'", "Handler 'databasebackups'", "Handler 'watch-")

    def filter(self, record: logging.LogRecord) -> bool:
        if record.name != "kopf.objects" or record.levelno != logging.INFO:
            return True
        message = record.getMessage()
        routine = message.startswith(self.ROUTINE) and message.endswith("succeeded.")
        return not routine or logging.getLogger().isEnabledFor(logging.DEBUG)


def _renderer(fmt: LogFormat) -> Processor:
    if fmt is LogFormat.CONSOLE:
        return structlog.dev.ConsoleRenderer(colors=sys.stderr.isatty())
    return structlog.processors.JSONRenderer()


def setup(level: str = "INFO", fmt: LogFormat = LogFormat.JSON) -> None:
    """Route every log line of the process through one structlog formatter on stderr."""
    shared: list[Processor] = [
        structlog.contextvars.merge_contextvars,
        structlog.stdlib.add_log_level,
        structlog.stdlib.add_logger_name,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
        _trace_ids,
    ]
    formatter = structlog.stdlib.ProcessorFormatter(
        foreign_pre_chain=[*shared, _object_ref],
        processors=[
            structlog.stdlib.ProcessorFormatter.remove_processors_meta,
            structlog.processors.format_exc_info,
            _renderer(fmt),
        ],
    )
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(formatter)
    handler.addFilter(_RoutineSuccess())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    # aiohttp's access log and the client's connection chatter are noise at INFO.
    for noisy in ("aiohttp.access", "urllib3", "kubernetes"):
        logging.getLogger(noisy).setLevel(max(logging.WARNING, logging.getLevelName(level)))
    structlog.configure(
        processors=[
            *shared,
            structlog.stdlib.ProcessorFormatter.wrap_for_formatter,
        ],
        logger_factory=structlog.stdlib.LoggerFactory(),
        wrapper_class=structlog.stdlib.BoundLogger,
        cache_logger_on_first_use=True,
    )


def get_logger(name: str = "database_operator", **bound: Any) -> structlog.stdlib.BoundLogger:
    logger: structlog.stdlib.BoundLogger = structlog.get_logger(name, **bound)
    return logger
