"""Start the operator: one API client, the Kopf registry with our handlers, and Kopf itself."""

from __future__ import annotations

import asyncio

import kopf

from database_operator.config import Settings
from database_operator.handlers import Context, register
from database_operator.kube import Kube, new_api_client
from database_operator.logs import get_logger


async def run(settings: Settings, stop_flag: asyncio.Event | None = None) -> None:
    """Run until stopped (SIGINT/SIGTERM, or ``stop_flag``)."""
    log = get_logger()
    api = new_api_client()
    ctx = Context(kube=Kube(api), settings=settings)
    registry = register(ctx, kopf.OperatorRegistry())
    log.info(
        "starting",
        namespaces=settings.namespaces or "all",
        resync_interval_s=settings.resync_interval,
        peering=settings.peering,
    )
    try:
        await kopf.operator(
            registry=registry,
            clusterwide=not settings.namespaces,
            namespaces=settings.namespaces,
            # Passing a peering name makes peering mandatory in Kopf: only when asked for.
            standalone=not settings.peering,
            peering_name=settings.peering_name if settings.peering else None,
            priority=settings.priority,
            liveness_endpoint=(
                f"http://0.0.0.0:{settings.health_port}/healthz" if settings.health_port else None
            ),
            stop_flag=stop_flag,
        )
    finally:
        api.close()
        log.info("stopped")
