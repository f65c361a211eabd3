"""Kopf wiring only: which watch events reach the controller, and Kopf's own settings.

Kopf watches the Databases and DatabaseBackups (with a shard, only that shard's) and logs in.
Every replica watches, leader or not (leader.py decides who reconciles): a standby's caches are
warm when it takes over. Every event only feeds the controllers' caches and queues (the
Databases', controller.py; the DatabaseBackups', backups/controller.py), which reconcile: no
Kopf change handlers, so Kopf writes nothing on the Databases itself — no progress or
diff-base annotations, no finalizer of its own.

The children (Deployments, Services, claims, Jobs and Secrets, selected by our label on the
server) are listed and watched by the controller itself (watches.py), which skips Kopf's
per-object machinery for events that only feed a cache. With namespace globs, whose namespaces
only Kopf's scan finds, Kopf watches them too, and their events reach the same place.
"""

from __future__ import annotations

from typing import Any

import kopf

from database_operator.api.backup import BACKUP_PLURAL
from database_operator.api.models import GROUP, PLURAL, VERSION
from database_operator.backups.controller import BackupController
from database_operator.config import Settings, is_exact
from database_operator.controller import Controller
from database_operator.lifecycle import ENDLESS
from database_operator.selection import child_selector, database_selector
from database_operator.webhooks.admission import Admission, RefusedError, pinned_version
from database_operator.webhooks.configuration import MUTATE, VALIDATE
from database_operator.webhooks.server import WebhookServer

#: The children watched: (group, version, plural), the cache's kinds (controller.py).
CHILD_RESOURCES = (
    ("apps", "v1", "deployments"),
    ("", "v1", "services"),
    ("", "v1", "persistentvolumeclaims"),
    ("batch", "v1", "jobs"),
    # Only the Secrets the operator generated (credentials, connection), selected by its label on
    # the server: a steady resync reads none (docs/operations.md, "Why the operator may list
    # Secrets").
    ("", "v1", "secrets"),
)
#: Kopf removes its finalizer from any object no handler of its needs it for. Ours
#: (finalizers.FINALIZER) is managed by the controller, so Kopf's is set to one it never adds.
KOPF_FINALIZER = f"{GROUP}/kopf-finalizer"
#: Kopf lists this many objects at a time when it starts watching (not all at once: a first
#: listing of thousands of Deployments would sit in memory whole, and the memory stays taken).
LIST_CHUNK = 250
#: How long Kopf keeps an object's task after its last event (Kopf's default: 5 s).
IDLE_TIMEOUT_S = 0.5


class NoDiffBase(kopf.DiffBaseStorage):
    """Kopf builds and compares a "diff-base" of every object at every event for its change
    handlers; there are none here, so skip the work (a deep copy per event)."""

    def build(self, *, body: kopf.Body, extra_fields: Any = None) -> Any:
        return None

    def fetch(self, *, body: kopf.Body) -> Any:
        return None

    def store(self, *, body: kopf.Body, patch: kopf.Patch, essence: Any) -> None:
        return None


def configure_kopf(
    settings: kopf.OperatorSettings,
    ours: Settings,
    webhook_server: kopf.WebhookServerProtocol | None = None,
) -> None:
    """Kopf's settings for this operator."""
    settings.persistence.finalizer = KOPF_FINALIZER
    settings.persistence.diffbase_storage = NoDiffBase()
    if (databases := database_selector(ours)) is not None:
        # A shard's DatabaseBackups carry its label too (its schedule puts it on them).
        settings.watching.label_selectors[GROUP, VERSION, PLURAL] = databases
        settings.watching.label_selectors[GROUP, VERSION, BACKUP_PLURAL] = databases
    for group, version, plural in CHILD_RESOURCES:
        settings.watching.label_selectors[group, version, plural] = child_selector(ours)
    settings.watching.chunk_size = LIST_CHUNK
    # Kopf keeps a task per object while its events flow: short-lived, so that a restart's
    # thousands of listed objects do not all hold one for seconds (the memory stays taken).
    settings.queueing.idle_timeout = IDLE_TIMEOUT_S
    settings.watching.server_timeout = 300
    settings.watching.client_timeout = 330
    settings.watching.connect_timeout = 30
    # Kopf's own API calls (watches) retry failures for as long as they last, so a
    # watch resumes within seconds of the API server's return (lifecycle.py); none of them
    # writes a Database.
    settings.networking.error_backoffs = ENDLESS
    # Kopf would SIGKILL the process 10 minutes after it stopped without our stop flag (its
    # own failure, e.g. a watched CRD deleted), though the operator then runs Kopf again; the
    # kubelet's termination grace period bounds a stuck shutdown instead.
    settings.process.ultimate_exiting_timeout = None
    # Watching named namespaces only: no cluster-wide listing of namespaces (and CRDs), so a
    # Role per namespace is all the RBAC it needs. Globs still need the scan to find matches.
    settings.scanning.disabled = bool(ours.namespaces) and all(
        is_exact(ns) for ns in ours.namespaces
    )
    # Kopf runs the admission handlers behind our server; the webhook configurations are
    # installed by the chart (or registered by a local operator), never managed by Kopf, whose
    # own would have a 30 s timeout, no namespace selector, and vanish with each replica.
    settings.admission.server = webhook_server
    settings.admission.managed = None


def register(
    controller: Controller,
    backups: BackupController,
    registry: kopf.OperatorRegistry,
    admission: Admission | None = None,
    webhook_server: kopf.WebhookServerProtocol | None = None,
) -> kopf.OperatorRegistry:
    """Register the operator's handlers on ``registry`` (the admission handlers when
    ``admission`` is given, served by ``webhook_server``)."""
    ours = controller.settings

    @kopf.on.startup(id="configure", registry=registry)
    async def startup(settings: kopf.OperatorSettings, **_: Any) -> None:
        configure_kopf(settings, ours, webhook_server)

    @kopf.on.login(id="login", registry=registry)
    def login(**kwargs: Any) -> kopf.ConnectionInfo | None:
        return kopf.login_via_client(**kwargs)

    # async: Kopf runs plain functions in a thread pool, and the controller lives in the loop.
    @kopf.on.event(GROUP, VERSION, PLURAL, id="databases", registry=registry)
    async def on_database(event: kopf.RawEvent, **_: Any) -> None:
        controller.observe(event.get("type"), dict(event["object"]))

    @kopf.on.event(GROUP, VERSION, BACKUP_PLURAL, id="databasebackups", registry=registry)
    async def on_backup(event: kopf.RawEvent, **_: Any) -> None:
        backups.observe(event.get("type"), dict(event["object"]))

    async def on_child(event: kopf.RawEvent, **_: Any) -> None:
        controller.child_event(event.get("type"), dict(event["object"]))

    # Only with namespace globs: otherwise the controller watches the children itself.
    for group, version, plural in CHILD_RESOURCES if controller.watches is None else ():
        kopf.on.event(
            group=group or None,
            version=version,
            plural=plural,
            id=f"watch-{plural}",
            registry=registry,
        )(on_child)

    if admission is not None:
        register_admission(admission, registry)
    if isinstance(webhook_server, WebhookServer):

        @kopf.on.cleanup(id="webhooks", registry=registry)
        async def stop_serving(**_: Any) -> None:
            # Before Kopf waits for its tasks: the API server's keep-alive connections to us are
            # tasks too, and Kopf would wait 5 s for them to end on their own.
            await webhook_server.stop()

    return registry


def register_admission(admission: Admission, registry: kopf.OperatorRegistry) -> None:
    """Kopf's validating and mutating handlers; their ids are the webhooks' paths."""

    @kopf.on.mutate(
        GROUP,
        VERSION,
        PLURAL,
        id=MUTATE.handler_id,
        operations=list(MUTATE.operations),
        registry=registry,
    )
    def mutate(**kwargs: Any) -> None:
        old, patch = kwargs["old"], kwargs["patch"]
        spec = kwargs["body"].get("spec") or {}
        if (version := pinned_version(spec, dict(old) if old else None)) is not None:
            patch.setdefault("spec", {})["version"] = version

    @kopf.on.validate(
        GROUP,
        VERSION,
        PLURAL,
        id=VALIDATE.handler_id,
        operations=list(VALIDATE.operations),
        registry=registry,
    )
    async def validate(**kwargs: Any) -> None:
        new, old = kwargs["new"], kwargs["old"]
        try:
            kwargs["warnings"].extend(
                await admission.validate(
                    kwargs["operation"], dict(new) if new else None, dict(old) if old else None
                )
            )
        except RefusedError as refusal:
            raise kopf.AdmissionError(str(refusal), code=refusal.code) from refusal
