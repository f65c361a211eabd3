"""Start the operator: ``build`` makes its objects and wires them (build.py), ``operate`` runs
them until stopped (operate.py); ``run`` is tracing around the two."""

from __future__ import annotations

import asyncio

from database_operator import tracing
from database_operator.config import Settings
from database_operator.logs import get_logger
from database_operator.metrics import Metrics
from database_operator.runner.build import Operator, build
from database_operator.runner.operate import operate

__all__ = ["Operator", "build", "operate", "run"]


async def run(settings: Settings, stop_flag: asyncio.Event | None = None) -> None:
    """Run until stopped (SIGINT/SIGTERM, or ``stop_flag``)."""
    metrics = Metrics()
    traces = (
        tracing.start(lambda reason, spans: metrics.spans_dropped.labels(reason).inc(spans))
        if settings.tracing
        else None
    )
    try:
        await operate(
            build(settings, metrics),
            stop_flag or asyncio.Event(),
            tracing.protocol() if traces else False,
        )
    finally:
        tracing.stop(traces)  # the last reconciles' spans, within tracing.SHUTDOWN_S
        get_logger().info("stopped")
