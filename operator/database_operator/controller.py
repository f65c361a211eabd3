"""The reconcile loop: a work queue of Database keys, fed by watch events, worked by a few tasks.

Level-triggered: an event only says "look at this Database again". The Database itself comes
from a cache that the watch keeps current (and our own writes refresh), so a burst of events —
a create, then its Deployment and Service appearing — is one reconcile, and at most one runs
per Database at a time (workqueue.py).

Nothing is given up on. A reconcile that fails is retried with a doubling delay capped at the
setting ``retry_max_delay``, for as long as it fails, and after ``ERRORS_BEFORE_DEGRADED``
failures in a row the Database's Degraded condition says why. Every success schedules the
next resync of that Database, jittered so the resyncs of many Databases spread over the period
instead of arriving together. The same holds for the end of a Database's life: finalize, then
remove the finalizer, each retried until it succeeds.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from database_operator.api.models import Database
from database_operator.config import Settings
from database_operator.kube import ApiError, Kube
from database_operator.logs import get_logger
from database_operator.manifest import Key, Manifest, key_of
from database_operator.metrics import Metrics
from database_operator.reconcile import (
    EventSink,
    Result,
    add_finalizer,
    finalize,
    has_finalizer,
    observe_workloads,
    reconcile,
    remove_finalizer,
    write_status,
)
from database_operator.status import Outcome
from database_operator.workqueue import WorkQueue

#: Consecutive failures of one Database before its Degraded condition says so.
ERRORS_BEFORE_DEGRADED = 3
#: The first wait before trying a failing Database again (it doubles up to the setting
#: retry_max_delay).
RETRY_BASE_S = 0.5
#: Resyncs are spread by up to this share of the interval, either way.
RESYNC_JITTER = 0.1
#: What a watch event's type means for the log's "trigger".
TRIGGERS = {None: "resume", "ADDED": "create", "MODIFIED": "update"}


def newer(candidate: Mapping[str, Any], known: Mapping[str, Any] | None) -> bool:
    """Whether ``candidate`` is a later version of the object than ``known``.

    resourceVersions are opaque to clients by contract, but etcd's are increasing integers and
    this only orders two versions of one object: a watch event that arrives after our own write
    returned a newer body must not put the older one back. Unparseable: trust the newcomer.
    """
    if known is None:
        return True
    if candidate["metadata"].get("uid") != known["metadata"].get("uid"):
        return True
    try:
        return int(candidate["metadata"]["resourceVersion"]) >= int(
            known["metadata"]["resourceVersion"]
        )
    except (KeyError, TypeError, ValueError):
        return True


@dataclass
class Controller:
    """The Databases as last seen, the queue of those to look at, and the workers."""

    kube: Kube
    settings: Settings
    metrics: Metrics
    #: Gives the EventSink for a Database (posts Kubernetes Events on it).
    events_for: Callable[[Manifest], EventSink]
    queue: WorkQueue[Key] = field(init=False)
    databases: dict[Key, Manifest] = field(default_factory=dict)
    #: Set while this operator may act (always, unless peering pauses it: see standby.py).
    active: asyncio.Event = field(default_factory=asyncio.Event)
    now: Callable[[], datetime] = field(default=lambda: datetime.now(UTC))

    def __post_init__(self) -> None:
        self.queue = WorkQueue(base_delay=RETRY_BASE_S, max_delay=self.settings.retry_max_delay)

    # --- what the watches tell ------------------------------------------------------------------

    def observe(self, event_type: str | None, body: Manifest) -> None:
        """A Database's watch event: remember the object, and look at it soon."""
        key = key_of(body)
        if event_type == "DELETED":
            self.databases.pop(key, None)
            self.queue.discard(key)
            self.metrics.phases.forget(*key)
            return
        self.remember(body)
        self.queue.add(key, TRIGGERS.get(event_type, "update"))

    def wake(self, key: Key, trigger: str) -> None:
        """Something a Database owns changed: look at the Database soon (if it is known; a child
        seen before its owner is looked at when the owner's own event arrives)."""
        if key in self.databases:
            self.queue.add(key, trigger)

    def remember(self, body: Manifest) -> None:
        key = key_of(body)
        if newer(body, self.databases.get(key)):
            self.databases[key] = body

    # --- the workers --------------------------------------------------------------------------

    def start(self, workers: int) -> list[asyncio.Task[None]]:
        """Start ``workers`` tasks on the queue, now (before Kopf starts: Kopf waits at exit for
        tasks started after it, and these stop only when told to)."""
        return [asyncio.create_task(self._work(), name=f"reconciler-{i}") for i in range(workers)]

    async def stop(self, tasks: list[asyncio.Task[None]]) -> None:
        """Stop the workers: a reconcile in progress is cancelled, the queue is dropped."""
        self.queue.shut_down()
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    async def run(self, workers: int) -> None:
        """Work the queue with ``workers`` tasks until cancelled."""
        tasks = self.start(workers)
        try:
            await asyncio.gather(*tasks)
        finally:
            await self.stop(tasks)

    async def _work(self) -> None:
        while True:
            await self.active.wait()
            item = await self.queue.get()
            if item is None:
                return
            key, trigger = item
            try:
                if self.active.is_set():
                    await self.process(key, trigger)
                else:  # paused while waiting: leave it for when this operator is active again
                    self.queue.add(key, trigger)
            finally:
                self.queue.done(key)

    async def process(self, key: Key, trigger: str) -> Result | None:
        """Reconcile (or finalize) one Database; never raises: failures are retried."""
        body = self.databases.get(key)
        if body is None:
            return None
        started = time.monotonic()
        try:
            if body["metadata"].get("deletionTimestamp"):
                await self._finalize(key, body)
                return None
            result = await self._reconcile(key, body)
        except Exception as error:
            await self._failed(key, trigger, error)
            return None
        self.queue.forget(key)
        if result.gone:
            self.databases.pop(key, None)
            self.queue.discard(key)
            return result
        self._schedule_resync(key)
        self._record(key, trigger, result, started)
        return result

    def _schedule_resync(self, key: Key) -> None:
        interval = self.settings.resync_interval
        jitter = random.uniform(-RESYNC_JITTER, RESYNC_JITTER)  # noqa: S311 - not for secrets
        self.queue.schedule(key, interval * (1 + jitter), "resync")

    async def _reconcile(self, key: Key, body: Manifest) -> Result:
        confirmed = False
        if not has_finalizer(body):
            body = await add_finalizer(self.kube, body)
            self.remember(body)
            confirmed = True  # the API server just answered with it: it exists
        with self.metrics.reconcile_duration.time():
            result = await reconcile(
                self.kube, body, self.events_for(body), self.now, confirmed=confirmed
            )
        if result.body:
            self.remember(result.body)
        return result

    async def _finalize(self, key: Key, body: Manifest) -> None:
        self.metrics.phases.set(*key, "Deleting")
        if not has_finalizer(body):
            return  # ours is gone already; other finalizers hold it, not us
        done = await finalize(self.kube, body, self.events_for(body), self.now)
        await remove_finalizer(self.kube, body)
        self.queue.forget(key)
        get_logger().info("finalized", namespace=key[0], name=key[1], done=done)

    async def _failed(self, key: Key, trigger: str, error: Exception) -> None:
        delay, failures = self.queue.backoff(key)
        self.queue.schedule(key, delay, "retry")
        self.metrics.reconciles.labels("error").inc()
        unexpected = not isinstance(error, ApiError)
        get_logger().error(
            "reconcile failed",
            namespace=key[0],
            name=key[1],
            trigger=trigger,
            error=str(error) or type(error).__name__,
            failures=failures,
            retry_in_s=round(delay, 2),
            exc_info=unexpected,
        )
        body = self.databases.get(key)
        if body is not None and failures >= ERRORS_BEFORE_DEGRADED:
            await self._report_error(body, error)

    async def _report_error(self, body: Manifest, error: Exception) -> None:
        """Best effort: say in the Degraded condition that reconciling keeps failing."""
        if body["metadata"].get("deletionTimestamp"):
            return
        with contextlib.suppress(ApiError):
            db = Database.model_validate(body)
            outcome = Outcome(error_reason="ReconcileError", error_message=str(error))
            _, written = await write_status(
                self.kube,
                db,
                workloads=await observe_workloads(self.kube, db),
                outcome=outcome,
                events=self.events_for(body),
                now=self.now(),
            )
            if written is not None:
                self.remember(written)

    def _record(self, key: Key, trigger: str, result: Result, started: float) -> None:
        metrics = self.metrics
        metrics.reconciles.labels(result.result).inc()
        if result.status_written:
            metrics.status_updates.inc()
        for kind in result.drift:
            metrics.drift_corrections.labels(kind).inc()
        metrics.phases.set(*key, str(result.status.phase) if result.status.phase else None)
        changed = bool(
            result.created
            or result.corrected
            or result.status_written
            or result.taken_back
            or result.removed
        )
        # A resync that found nothing to do is routine: DEBUG, so INFO logs show only changes.
        get_logger().log(
            20 if changed else 10,
            "reconciled",
            namespace=key[0],
            name=key[1],
            trigger=trigger,
            result=result.result,
            phase=str(result.status.phase),
            children_created=result.created,
            children_corrected=result.corrected,
            lists_taken_back=result.taken_back,
            children_removed=result.removed,
            children_recreated=result.recreated,
            status_written=result.status_written,
            duration_s=round(time.monotonic() - started, 4),
            generation=result.status.observed_generation,
        )
