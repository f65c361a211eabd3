"""Run a built operator: its servers, the wait for the CRDs, the workers, the campaign for the
Lease and Kopf's watches, until stopped; then everything stopped in order and closed."""

from __future__ import annotations

import asyncio
import contextlib
import signal
from collections.abc import Awaitable, Callable

import kopf

from database_operator.config import Settings
from database_operator.gcpauses import GcPauses
from database_operator.kube.api import Kube
from database_operator.kube.errors import ApiError
from database_operator.leader import LeaderElection, wait_for_earlier_peers
from database_operator.lifecycle import Supervisor, required_resources
from database_operator.logs import get_logger
from database_operator.runner.build import Operator
from database_operator.webhooks.keeper import WebhookServing

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


async def work_once_served(op: Operator, stopping: asyncio.Event) -> None:
    """Once the CRDs are served: the webhooks, the caches, the workers, the campaign for the
    Lease and Kopf's watches; on the way out, the Lease released first."""
    settings, kube, controller, election = op.settings, op.kube, op.controller, op.election
    backups = op.backups
    if not await wait_for_crds(kube, settings, stopping):
        return
    serve_webhooks = webhook_starter(op.webhooks)
    await serve_webhooks()
    with contextlib.suppress(ApiError):  # without it, reconciles read what they lack
        await controller.prime()
        await backups.prime()  # then the backups: each is judged against its Database
    # What startup made and the primed caches live as long as we do: frozen, out of the
    # garbage collector's way (gcpauses.py).
    gc_pauses = asyncio.create_task(GcPauses(op.metrics.gc_paused).run(stopping))
    workers = controller.start(settings.workers)
    backup_workers = backups.start()
    campaign = asyncio.create_task(campaign_for(election, settings, stopping)) if election else None
    try:
        # Kopf, run again when the CRDs come back after they went (lifecycle.py).
        ready = op.health.ready
        await Supervisor(kube, settings, op.watching, ready, stopping).run(
            lambda stop_kopf: run_kopf(op.registry, settings, stop_kopf, stopping, ready),
            lambda: wait_for_crds(kube, settings, stopping),
            serve_webhooks,
        )
    finally:
        if campaign is not None:
            stopping.set()
            await campaign  # released: the standby takes over while we finish stopping
        await backups.stop(backup_workers)
        await controller.stop(workers)
        await op.recorder.drain()
        gc_pauses.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await gc_pauses


async def operate(op: Operator, stopping: asyncio.Event, traces: str | bool) -> None:
    """Run the built operator until ``stopping`` is set: its metrics and health servers, then
    its work once the CRDs are served; on the way out, everything stopped and closed."""
    if op.settings.metrics_port:
        op.metrics.serve(op.settings.metrics_port)
    health = op.health
    health_runner = await health.serve(op.settings.health_port) if op.settings.health_port else None
    announce(op.settings, op.election, traces)

    # SIGINT/SIGTERM set ``stopping``, which stops the wait for the CRDs, releases the Lease at
    # once (a rolling update hands over in about a second) and stops Kopf (its stop flag).
    take_signals(stopping)

    # Alive while waiting for the CRDs too; ready only once Kopf watches.
    health.operator_task = asyncio.create_task(work_once_served(op, stopping))
    try:
        await health.operator_task
    finally:
        if op.webhooks is not None:
            await op.webhooks.stop()
        if health_runner is not None:
            with contextlib.suppress(Exception):
                await health_runner.cleanup()
        op.kube.close()
        op.restarts.stop_following()
