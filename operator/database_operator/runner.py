"""Start the operator: API client, metrics and health servers, and Kopf with our handlers."""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import zlib
from collections.abc import Awaitable, Callable

import kopf

from database_operator import tracing
from database_operator.config import Settings
from database_operator.controller import Controller
from database_operator.events import EventRecorder
from database_operator.handlers import register
from database_operator.health import Health
from database_operator.kube import ApiError, Kube, new_api_client
from database_operator.lifecycle import (
    RunKopf,
    Supervisor,
    Watching,
    handle_signals,
    required_resources,
)
from database_operator.logs import get_logger
from database_operator.metrics import Metrics
from database_operator.standby import follow_kopf_peering
from database_operator.webhooks.admission import Admission
from database_operator.webhooks.keeper import Webhooks


def peering_priority(settings: Settings) -> int:
    """The configured priority, else one derived from the pod name: replicas of one Deployment
    must differ, since Kopf pauses every peer when the highest priority is shared."""
    if settings.priority is not None:
        return settings.priority
    identity = os.environ.get("POD_NAME") or socket.gethostname()
    return 1 + zlib.crc32(identity.encode()) % 10_000


CRD_POLL_S = 2.0


async def wait_for_crds(kube: Kube, settings: Settings, stopping: asyncio.Event) -> bool:
    """Wait until the API server serves our CRDs (and Kopf's peering CRDs when peering).

    Kopf looks resources up when it starts and when a CRD changes; a CRD created just before the
    operator starts (a chart installing both at once) can be missed for good. Starting Kopf only
    once they are served closes that race. False when stopped meanwhile.
    """
    told = False
    for group_version, resources in required_resources(settings):
        while not stopping.is_set():
            try:
                if await kube.serves(group_version, resources):
                    break
                problem = "not served"
            except ApiError as error:
                if not error.retryable:
                    raise
                problem = str(error)  # e.g. the API server is not up yet: try again
            if not told:
                get_logger().warning(
                    "waiting for the CRDs to be installed",
                    missing=", ".join(f"{group_version}/{r}" for r in resources) or group_version,
                    why=problem,
                )
                told = True
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stopping.wait(), CRD_POLL_S)
    return not stopping.is_set()


def kopf_runner(
    registry: kopf.OperatorRegistry, settings: Settings, priority: int, ready: asyncio.Event
) -> RunKopf:
    """Runs Kopf with our handlers until the flag it is given is set."""

    async def run_kopf(stop_kopf: asyncio.Event) -> None:
        await kopf.operator(
            registry=registry,
            clusterwide=not settings.namespaces,
            namespaces=settings.namespaces,
            # Passing a peering name makes peering mandatory in Kopf: only when asked for.
            standalone=not settings.peering,
            peering_name=settings.peering_name if settings.peering else None,
            priority=priority,
            stop_flag=stop_kopf,
            ready_flag=ready,
        )

    return run_kopf


def webhook_starter(webhooks: Webhooks | None) -> Callable[[], Awaitable[None]]:
    """Starts serving the webhooks, unless they are served. Before Kopf: conversion is served as
    soon as we are up. Kopf stops the server when it stops; the supervisor may run it again."""

    async def serve() -> None:
        if webhooks is not None and not webhooks.server.listening.is_set():
            await webhooks.start()

    return serve


async def run(settings: Settings, stop_flag: asyncio.Event | None = None) -> None:
    """Run until stopped (SIGINT/SIGTERM, or ``stop_flag``)."""
    log = get_logger()
    metrics = Metrics()

    traces = (
        tracing.start(lambda reason, spans: metrics.spans_dropped.labels(reason).inc(spans))
        if settings.tracing
        else None
    )

    # Each worker makes one call at a time; Events are posted beside them.
    api = new_api_client(connections=max(16, 2 * settings.workers))
    kube = Kube(api, on_error=lambda error: metrics.api_errors.labels(str(error.status)).inc())
    recorder = EventRecorder(kube)
    controller = Controller(kube, settings, metrics, recorder.for_object)
    webhooks = Webhooks(kube, settings) if settings.webhook_port else None
    registry = register(
        controller,
        kopf.OperatorRegistry(),
        Admission(kube, settings.image_registries) if webhooks else None,
        webhooks.server if webhooks else None,
    )
    if settings.peering:
        follow_kopf_peering(controller.active, len(settings.namespaces) or 1)
    else:
        controller.active.set()
    if settings.metrics_port:
        metrics.serve(settings.metrics_port)
    watching = Watching().following_kopf()
    health = Health(webhooks.server if webhooks else None, watching)
    health_runner = await health.serve(settings.health_port) if settings.health_port else None
    priority = peering_priority(settings)
    log.info(
        "starting",
        namespaces=settings.namespaces or "all",
        resync_interval_s=settings.resync_interval,
        peering=settings.peering,
        priority=priority if settings.peering else None,
        metrics_port=settings.metrics_port,
        health_port=settings.health_port,
        webhook_port=settings.webhook_port or None,
        tracing=tracing.protocol() if traces else False,
    )

    # Until Kopf installs its own signal handlers, SIGINT/SIGTERM stop the wait for the CRDs.
    stopping = stop_flag or asyncio.Event()
    handle_signals(stopping, True)
    serve_webhooks = webhook_starter(webhooks)

    async def operate() -> None:
        if not await wait_for_crds(kube, settings, stopping):
            return
        await serve_webhooks()
        # Kopf's own signal handling from here on; the supervisor's while Kopf does not run.
        handle_signals(stopping, False)
        with contextlib.suppress(ApiError):  # without it, reconciles read what they lack
            await controller.prime()
        workers = controller.start(settings.workers)
        try:
            # Kopf, run again when the CRDs come back after they went (lifecycle.py).
            await Supervisor(kube, settings, watching, health.ready, stopping).run(
                kopf_runner(registry, settings, priority, health.ready),
                lambda: wait_for_crds(kube, settings, stopping),
                serve_webhooks,
            )
        finally:
            await controller.stop(workers)
            await recorder.drain()

    # Alive while waiting for the CRDs too; ready only once Kopf watches.
    health.operator_task = asyncio.create_task(operate())
    try:
        await health.operator_task
    finally:
        if webhooks is not None:
            await webhooks.stop()
        if health_runner is not None:
            with contextlib.suppress(Exception):
                await health_runner.cleanup()
        kube.close()
        tracing.stop(traces)  # the last reconciles' spans, within tracing.SHUTDOWN_S
        log.info("stopped")
