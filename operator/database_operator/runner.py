"""Start the operator: API client, metrics and health servers, and Kopf with our handlers."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import socket
import uuid
from collections.abc import Awaitable, Callable

import kopf

from database_operator import tracing
from database_operator.config import Settings
from database_operator.controller import Controller
from database_operator.events import EventRecorder
from database_operator.handlers import register
from database_operator.health import Health
from database_operator.kube import ApiError, Kube, new_api_client
from database_operator.leader import LeaderElection, wait_for_earlier_peers
from database_operator.lifecycle import Supervisor, Watching, WatchRestarts, required_resources
from database_operator.logs import get_logger
from database_operator.metrics import WATCHED_RESOURCES, Metrics
from database_operator.webhooks.admission import Admission
from database_operator.webhooks.keeper import WebhookServing


def identity() -> str:
    """This replica's name in the Lease: the pod's name, made unique per process (a restarted
    container must not inherit its previous life's lease)."""
    return f"{os.environ.get('POD_NAME') or socket.gethostname()}_{uuid.uuid4().hex[:8]}"


def leader_election(kube: Kube, settings: Settings) -> LeaderElection | None:
    """This replica's candidacy, when leader election is on."""
    if not settings.leader_election:
        return None
    return LeaderElection(
        kube,
        namespace=str(settings.lease_namespace),
        name=settings.lease_name,
        identity=identity(),
        lease_duration=settings.lease_duration,
        renew_deadline=settings.renew_deadline,
        retry_period=settings.retry_period,
    )


CRD_POLL_S = 2.0


async def wait_for_crds(kube: Kube, settings: Settings, stopping: asyncio.Event) -> bool:
    """Wait until the API server serves our CRDs.

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


async def campaign_for(
    election: LeaderElection, settings: Settings, stopping: asyncio.Event
) -> None:
    """Lead when elected; after the replicas of a release that used Kopf's peering are gone."""
    await wait_for_earlier_peers(
        election.kube,
        settings.lease_name,
        settings.namespaces,
        stopping,
        poll=settings.retry_period,
    )
    await election.run(stopping)


def announce(settings: Settings, election: LeaderElection | None, traces: str | bool) -> None:
    get_logger().info(
        "starting",
        namespaces=settings.namespaces or "all",
        resync_interval_s=settings.resync_interval,
        lease=f"{settings.lease_namespace}/{settings.lease_name}" if election else None,
        identity=election.identity if election else None,
        metrics_port=settings.metrics_port,
        health_port=settings.health_port,
        webhook_port=settings.webhook_port or None,
        tracing=traces,
    )


def take_signals(stopping: asyncio.Event) -> None:
    """SIGINT and SIGTERM set ``stopping``."""
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stopping.set)


async def run_kopf(
    registry: kopf.OperatorRegistry,
    settings: Settings,
    stop_kopf: asyncio.Event,
    stopping: asyncio.Event,
    ready: asyncio.Event,
) -> None:
    """Kopf's watches, until ``stop_kopf`` (set by ``stopping``, or when the CRDs go: see
    lifecycle.py). Every replica watches: the Lease, not Kopf's peering, elects the one that
    reconciles."""
    kopf_task = asyncio.create_task(
        kopf.operator(
            registry=registry,
            clusterwide=not settings.namespaces,
            namespaces=settings.namespaces,
            standalone=True,
            stop_flag=stop_kopf,
            ready_flag=ready,
        )
    )
    # Kopf installs its own signal handlers as it starts (they would stop it, slower, without
    # releasing the Lease first): ours again, over them.
    await asyncio.sleep(0.1)
    take_signals(stopping)
    await kopf_task


def webhook_starter(webhooks: WebhookServing | None) -> Callable[[], Awaitable[None]]:
    """Starts serving the webhooks, unless they are served. Before Kopf: conversion is served as
    soon as we are up. Kopf stops the server when it stops; the supervisor may run it again."""

    async def serve() -> None:
        if webhooks is not None and not webhooks.server.listening.is_set():
            await webhooks.start()

    return serve


async def operate(
    *,
    settings: Settings,
    kube: Kube,
    controller: Controller,
    registry: kopf.OperatorRegistry,
    webhooks: WebhookServing | None,
    election: LeaderElection | None,
    recorder: EventRecorder,
    health: Health,
    watching: Watching,
    stopping: asyncio.Event,
) -> None:
    """Once the CRDs are served: the webhooks, the caches, the workers, the campaign for the
    Lease and Kopf's watches; on the way out, the Lease released first."""
    if not await wait_for_crds(kube, settings, stopping):
        return
    serve_webhooks = webhook_starter(webhooks)
    await serve_webhooks()
    with contextlib.suppress(ApiError):  # without it, reconciles read what they lack
        await controller.prime()
    workers = controller.start(settings.workers)
    campaign = asyncio.create_task(campaign_for(election, settings, stopping)) if election else None
    try:
        # Kopf, run again when the CRDs come back after they went (lifecycle.py).
        await Supervisor(kube, settings, watching, health.ready, stopping).run(
            lambda stop_kopf: run_kopf(registry, settings, stop_kopf, stopping, health.ready),
            lambda: wait_for_crds(kube, settings, stopping),
            serve_webhooks,
        )
    finally:
        if campaign is not None:
            stopping.set()
            await campaign  # released: the standby takes over while we finish stopping
        await controller.stop(workers)
        await recorder.drain()


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
    election = leader_election(kube, settings)
    # The reconciling side writes only while it surely leads; the webhooks write as every replica.
    writer = kube.fenced(election.may_write) if election else kube
    recorder = EventRecorder(writer)
    controller = Controller(writer, settings, metrics, recorder.for_object)
    webhooks = (
        WebhookServing(kube, settings, metrics.webhook_took) if settings.webhook_port else None
    )
    registry = register(
        controller,
        kopf.OperatorRegistry(),
        Admission(kube, settings.image_registries) if webhooks else None,
        webhooks.server if webhooks else None,
    )
    if election is not None:
        election.on_change = controller.lead
    else:
        controller.lead(True)
    if settings.metrics_port:
        metrics.serve(settings.metrics_port)
    watching = Watching().following_kopf()
    restarts = WatchRestarts(
        WATCHED_RESOURCES, lambda resource: metrics.watch_restarted(resource).inc()
    ).following_kopf()
    health = Health(webhooks.server if webhooks else None, watching)
    health_runner = await health.serve(settings.health_port) if settings.health_port else None
    announce(settings, election, tracing.protocol() if traces else False)

    # SIGINT/SIGTERM set ``stopping``, which stops the wait for the CRDs, releases the Lease at
    # once (a rolling update hands over in about a second) and stops Kopf (its stop flag).
    stopping = stop_flag or asyncio.Event()
    take_signals(stopping)

    # Alive while waiting for the CRDs too; ready only once Kopf watches.
    health.operator_task = asyncio.create_task(
        operate(
            settings=settings,
            kube=kube,
            controller=controller,
            registry=registry,
            webhooks=webhooks,
            election=election,
            recorder=recorder,
            health=health,
            watching=watching,
            stopping=stopping,
        )
    )
    try:
        await health.operator_task
    finally:
        if webhooks is not None:
            await webhooks.stop()
        if health_runner is not None:
            with contextlib.suppress(Exception):
                await health_runner.cleanup()
        kube.close()
        restarts.stop_following()
        tracing.stop(traces)  # the last reconciles' spans, within tracing.SHUTDOWN_S
        log.info("stopped")
