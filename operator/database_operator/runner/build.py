"""Make the operator's objects and wire them together: the API client, the Lease, the two
controllers (the Databases' and the DatabaseBackups', side by side), the webhooks, Kopf's
registry, the probes. Nothing here runs anything."""

from __future__ import annotations

import os
import socket
import uuid
from dataclasses import dataclass

import kopf

from database_operator.backups.controller import BackupController
from database_operator.config import Settings
from database_operator.controller import Controller
from database_operator.events import EventRecorder
from database_operator.handlers import register
from database_operator.health import Health
from database_operator.kube.api import Kube, new_api_client
from database_operator.leader import LeaderElection
from database_operator.lifecycle import Watching, WatchRestarts
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


def backups_beside(controller: Controller) -> BackupController:
    """The DatabaseBackups' controller beside the Databases' ``controller``, linked to it. It
    writes through that one's API client (watched children from its caches: a backup's Job is
    one), reads its Databases, pauses with it, and fills the index its reconciles read."""
    backups = BackupController(
        controller.kube,
        controller.client,
        controller.settings,
        controller.metrics,
        controller.events_for,
        controller.databases,
        # A backup changed (its watch event, or our own write): its Database's status names
        # its newest backups, its schedule and retention count them.
        controller.wake,
        controller.active,
        # A backup names a Database the cache lacks: read it before failing the backup.
        find_database=controller.look_up,
        index=controller.backups,
        now=controller.now,
    )
    # A Database changed (now Active, say): its backups that wait for it may run.
    controller.database_changed = backups.database_changed
    # A backup's Job changed: it comes by the Databases' controller's watches of children.
    controller.wake_backup = backups.wake
    return backups


@dataclass
class Operator:
    """Everything one operator process runs, made and wired together but not started."""

    settings: Settings
    metrics: Metrics
    #: The API as every replica writes it (the webhooks); the controller writes through a
    #: fenced copy while leader election is on.
    kube: Kube
    election: LeaderElection | None
    recorder: EventRecorder
    controller: Controller
    backups: BackupController
    webhooks: WebhookServing | None
    registry: kopf.OperatorRegistry
    watching: Watching
    restarts: WatchRestarts
    health: Health


def build(settings: Settings, metrics: Metrics) -> Operator:
    """Make the operator's objects and wire them together. Nothing runs yet: no server, no
    task, no request."""
    # Each worker makes one call at a time; Events are posted beside them.
    api = new_api_client(connections=max(16, 2 * settings.workers))
    kube = Kube(api, on_error=lambda error: metrics.api_errors.labels(str(error.status)).inc())
    election = leader_election(kube, settings)
    # The reconciling side writes only while it surely leads; the webhooks write as every replica.
    writer = kube.fenced(election.may_write) if election else kube
    recorder = EventRecorder(writer)
    controller = Controller(writer, settings, metrics, recorder.for_object)
    backups = backups_beside(controller)
    webhooks = (
        WebhookServing(kube, settings, metrics.webhook_took) if settings.webhook_port else None
    )
    registry = register(
        controller,
        backups,
        kopf.OperatorRegistry(),
        Admission(kube, settings.image_registries, webhooks.namespaces) if webhooks else None,
        webhooks.server if webhooks else None,
    )

    def lead(leading: bool) -> None:
        """Both controllers start (or stop) with the Lease; they share one pause."""
        if leading:
            backups.lead()
        controller.lead(leading)

    if election is not None:
        election.on_change = lead
    else:
        lead(True)
    watching = Watching().following_kopf()
    controller.watch_failed = watching.failed
    restarts = WatchRestarts(
        WATCHED_RESOURCES, lambda resource: metrics.watch_restarted(resource).inc()
    ).following_kopf()
    health = Health(webhooks.server if webhooks else None, watching)
    return Operator(
        settings=settings,
        metrics=metrics,
        kube=kube,
        election=election,
        recorder=recorder,
        controller=controller,
        backups=backups,
        webhooks=webhooks,
        registry=registry,
        watching=watching,
        restarts=restarts,
        health=health,
    )
