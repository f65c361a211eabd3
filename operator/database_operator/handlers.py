"""Kopf wiring only: which events lead to `reconcile` or `finalize`, and Kopf's own settings.

Create, update and resume of a Database, the periodic resync timer, and any change of an owned
Deployment or Service all end in the same idempotent reconcile, serialised per Database by a
lock (a timer tick can overlap a change handler). Handlers are registered on a fresh registry
per operator, so tests can run several.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, cast

import kopf

from database_operator import desired
from database_operator.api.models import GROUP, KIND, PLURAL, VERSION, Database
from database_operator.config import Settings
from database_operator.kube import ApiError, Kube
from database_operator.metrics import Metrics
from database_operator.reconcile import EventSink, Result, finalize, reconcile, write_status
from database_operator.status import Outcome

#: Kopf's bookkeeping (progress, diff-base, finalizer) under our own prefix, out of `status`.
PREFIX = GROUP
#: Owned children are watched with this server-side label selector: nothing else is streamed.
CHILD_SELECTOR = f"app.kubernetes.io/managed-by={desired.MANAGED_BY}"
#: The children watched: (group, version, plural).
CHILD_RESOURCES = (("apps", "v1", "deployments"), ("", "v1", "services"))
#: Characters that make a namespace a glob (Kopf then has to scan namespaces for matches).
GLOB_CHARACTERS = set("*?[]!")
#: Consecutive failures of one Database before its Degraded condition says so.
ERRORS_BEFORE_DEGRADED = 3


@dataclass
class Context:
    """What every handler shares: the API access, the settings and the per-object locks."""

    kube: Kube
    settings: Settings
    metrics: Metrics = field(default_factory=Metrics)
    locks: defaultdict[tuple[str, str], asyncio.Lock] = field(
        default_factory=lambda: defaultdict(asyncio.Lock)
    )


def configure_kopf(settings: kopf.OperatorSettings, ours: Settings) -> None:
    """Kopf's settings for this operator (fixed before the first release: changing the
    prefixes later makes Kopf re-handle every object)."""
    settings.persistence.progress_storage = kopf.AnnotationsProgressStorage(prefix=PREFIX)
    settings.persistence.diffbase_storage = kopf.AnnotationsDiffBaseStorage(
        prefix=PREFIX, key="last-handled-configuration"
    )
    settings.persistence.finalizer = f"{PREFIX}/finalizer"
    for group, version, plural in CHILD_RESOURCES:
        settings.watching.label_selectors[group, version, plural] = CHILD_SELECTOR
    settings.watching.server_timeout = 300
    settings.watching.client_timeout = 330
    settings.watching.connect_timeout = 30
    settings.peering.lifetime = ours.peering_lifetime
    # Watching named namespaces only: no cluster-wide listing of namespaces (and CRDs), so a
    # Role per namespace is all the RBAC it needs. Globs still need the scan to find matches.
    settings.scanning.disabled = bool(ours.namespaces) and all(
        is_exact(ns) for ns in ours.namespaces
    )


def is_exact(namespace: str) -> bool:
    """A namespace name, not a pattern."""
    return not set(namespace) & GLOB_CHARACTERS


async def ensure_peering_objects(
    ctx: Context, logger: logging.Logger | logging.LoggerAdapter[Any]
) -> None:
    """Kopf peers meet in a KopfPeering per watched namespace (a ClusterKopfPeering when
    watching all), and Kopf never creates it: without it every peer stays paused. Create it."""
    name = ctx.settings.peering_name
    exact = [ns for ns in ctx.settings.namespaces if is_exact(ns)]
    objects: list[dict[str, Any]] = (
        [{"kind": "KopfPeering", "metadata": {"name": name, "namespace": ns}} for ns in exact]
        if ctx.settings.namespaces
        else [{"kind": "ClusterKopfPeering", "metadata": {"name": name}}]
    )
    for obj in objects:
        try:
            await ctx.kube.create({"apiVersion": "kopf.dev/v1", **obj}, exist_ok=True)
        except ApiError as error:
            logger.warning(
                "cannot create the peering object; create it or peers stay paused",
                extra={"peering_kind": obj["kind"], "error": str(error)},
            )


def events_for(body: Mapping[str, Any]) -> EventSink:
    """Post Events on the Database ``body`` (Kopf needs only its reference fields)."""
    target = body if isinstance(body, kopf.Body) else kopf.Body(cast(kopf.RawBody, body))

    def post(type_: str, reason: str, message: str) -> None:
        kopf.event(target, type=type_, reason=reason, message=message)

    return post


def log_result(
    logger: logging.Logger | logging.LoggerAdapter[Any],
    trigger: str,
    result: Result,
    started: float,
) -> None:
    changed = bool(result.created or result.corrected or result.status_written)
    # A resync that found nothing to do is routine: DEBUG, so INFO logs show only changes.
    logger.log(
        logging.INFO if changed else logging.DEBUG,
        "reconciled",
        extra={
            "trigger": trigger,
            "result": result.result,
            "phase": str(result.status.phase),
            "children_created": result.created,
            "children_corrected": result.corrected,
            "status_written": result.status_written,
            "duration_s": round(time.monotonic() - started, 4),
            "generation": result.status.observed_generation,
        },
    )


async def run_reconcile(
    ctx: Context,
    key: tuple[str, str],
    logger: logging.Logger | logging.LoggerAdapter[Any],
    trigger: str,
    retry: int = 0,
) -> Result | None:
    """Reconcile under the Database's lock.

    API failures become Kopf errors, which Kopf logs once per attempt with their cause:
    temporary ones are retried with backoff and, once they keep failing, reported in the
    Degraded condition. ``key`` is the Database's (namespace, name).
    """
    started = time.monotonic()
    async with ctx.locks[key]:
        current: dict[str, Any] | None = None
        try:
            # The freshest body: a timer or a child event may carry one older than our last write.
            current = await ctx.kube.get(KIND, *key)
            if current is None or current["metadata"].get("deletionTimestamp"):
                return None
            with ctx.metrics.reconcile_duration.time():
                result = await reconcile(ctx.kube, current, events_for(current))
        except ApiError as error:
            ctx.metrics.reconciles.labels("error").inc()
            if current is not None and retry + 1 >= ERRORS_BEFORE_DEGRADED:
                await report_error(ctx, current, error)
            if not error.retryable:
                raise kopf.PermanentError(f"reconcile failed: {error}") from error
            delay = min(60, 2 ** min(retry, 6))
            raise kopf.TemporaryError(f"reconcile failed: {error}", delay=delay) from error
    record(ctx.metrics, key, result)
    log_result(logger, trigger, result, started)
    return result


async def report_error(ctx: Context, body: dict[str, Any], error: ApiError) -> None:
    """Best effort: say in the Degraded condition that reconciling keeps failing."""
    db = Database.model_validate(body)
    result = Result(
        status=db.status,
        outcome=Outcome(error_reason="ReconcileError", error_message=str(error)),
    )
    with contextlib.suppress(ApiError):
        deployment = await ctx.kube.get("Deployment", db.namespace, db.name)
        await write_status(
            ctx.kube,
            db,
            deployment=deployment,
            result=result,
            events=events_for(body),
            now=datetime.now(UTC),
        )


def record(metrics: Metrics, key: tuple[str, str], result: Result) -> None:
    metrics.reconciles.labels(result.result).inc()
    if result.status_written:
        metrics.status_updates.inc()
    for kind in result.drift:
        metrics.drift_corrections.labels(kind).inc()
    metrics.phases.set(*key, str(result.status.phase) if result.status.phase else None)


def key_of(body: kopf.Body) -> tuple[str, str]:
    return (str(body.metadata.namespace), str(body.metadata.name))


def register(ctx: Context, registry: kopf.OperatorRegistry) -> kopf.OperatorRegistry:
    """Register the operator's handlers on ``registry``."""

    @kopf.on.startup(id="configure", registry=registry)
    async def startup(settings: kopf.OperatorSettings, logger: kopf.Logger, **_: Any) -> None:
        configure_kopf(settings, ctx.settings)
        if ctx.settings.peering:
            await ensure_peering_objects(ctx, logger)

    @kopf.on.login(id="login", registry=registry)
    def login(**kwargs: Any) -> kopf.ConnectionInfo | None:
        return kopf.login_via_client(**kwargs)

    # Handler ids name Kopf's progress annotations: keep them stable across releases.
    @kopf.on.resume(GROUP, VERSION, PLURAL, id="reconcile", registry=registry)
    @kopf.on.create(GROUP, VERSION, PLURAL, id="reconcile", registry=registry)
    @kopf.on.update(GROUP, VERSION, PLURAL, id="reconcile", registry=registry)
    async def on_change(
        body: kopf.Body, logger: kopf.Logger, reason: str, retry: int, **_: Any
    ) -> None:
        await run_reconcile(ctx, key_of(body), logger, trigger=str(reason), retry=retry)

    @kopf.timer(
        GROUP,
        VERSION,
        PLURAL,
        interval=ctx.settings.resync_interval,
        initial_delay=ctx.settings.resync_interval,
        id="resync",
        registry=registry,
    )
    async def resync(body: kopf.Body, logger: kopf.Logger, **kwargs: Any) -> None:
        await run_reconcile(
            ctx, key_of(body), logger, trigger="resync", retry=kwargs.get("retry", 0)
        )

    @kopf.on.delete(GROUP, VERSION, PLURAL, id="finalize", registry=registry)
    async def on_delete(body: kopf.Body, logger: kopf.Logger, **_: Any) -> None:
        meta = body["metadata"]
        key = (meta["namespace"], meta["name"])
        async with ctx.locks[key]:
            ctx.metrics.phases.set(*key, "Deleting")
            try:
                deleted = await finalize(ctx.kube, body, events_for(body))
            except ApiError as error:
                if not error.retryable:
                    raise kopf.PermanentError(str(error)) from error
                raise kopf.TemporaryError(str(error), delay=5) from error
        ctx.locks.pop(key, None)
        ctx.metrics.phases.forget(*key)
        logger.info("finalized", extra={"deleted": deleted})

    async def on_child(body: kopf.Body, logger: kopf.Logger, **_: Any) -> None:
        owner = next(
            (
                ref
                for ref in body.metadata.get("ownerReferences") or []
                if ref.get("kind") == KIND and ref.get("apiVersion") == f"{GROUP}/{VERSION}"
            ),
            None,
        )
        if owner is None or body.metadata.namespace is None:
            return
        # Event handlers are not retried (Kopf logs the failure); the resync timer comes back.
        key = (body.metadata.namespace, str(owner["name"]))
        await run_reconcile(ctx, key, logger, trigger=str(body.get("kind", "child")))

    for group, version, plural in CHILD_RESOURCES:
        kopf.on.event(
            group=group or None,
            version=version,
            plural=plural,
            labels={"app.kubernetes.io/managed-by": desired.MANAGED_BY},
            id=f"watch-{plural}",
            registry=registry,
        )(on_child)

    return registry
