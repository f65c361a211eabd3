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

The DatabaseBackups' loop (backups/controller.py) runs beside this one, made and linked to it by
runner/build.py; the two share the skeleton of a key's turn and of an audit (loops.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime

from database_operator import loops, tracing
from database_operator.api.backup import BACKUP_KIND
from database_operator.api.models import KIND, Database, DatabaseStatus, InstanceRole, Phase
from database_operator.backups.controller import BackupIndex
from database_operator.backups.jobs import JobOptions
from database_operator.backups.state import WAITING_LOOK_S
from database_operator.cache import (
    CachedKube,
    LiveReads,
    ObjectCache,
    ObjectKey,
    live_reads,
    newer,
    object_key,
    stripped,
    version,
)
from database_operator.clock import Clock, system_clock
from database_operator.config import Settings
from database_operator.events import EventSink
from database_operator.failover.decide import Memory
from database_operator.finalizers import add_finalizer, has_finalizer, remove_finalizer
from database_operator.kube.api import Kube, object_at
from database_operator.kube.errors import ApiError, NotLeadingError
from database_operator.logs import get_logger
from database_operator.loops import Failed
from database_operator.manifest import Key, Manifest, key_of
from database_operator.metrics import API_ERROR, UNEXPECTED_ERROR, BackupFacts, Metrics
from database_operator.namesakes import Namesakes
from database_operator.ownership import controller_of, owner_key
from database_operator.reconcile import Result, finalize, reconcile, report_failure
from database_operator.selection import (
    audited_namespaces,
    child_selected,
    child_selector,
    database_selected,
    database_selector,
    exact_namespaces,
    unselected_child_selectors,
)
from database_operator.status import DEGRADED
from database_operator.watches import Watch
from database_operator.workqueue import WorkQueue, work_on

#: Stale reads in a row (a write refused because the object changed since it was read) that are
#: re-read and retried at once before they count as a failure.
STALE_RETRIES = 3
#: Consecutive failures of one Database before its Degraded condition says so.
ERRORS_BEFORE_DEGRADED = 3
#: The first wait before trying a failing Database again (it doubles up to the setting
#: retry_max_delay).
RETRY_BASE_S = 0.5
#: Resyncs are spread by up to this share of the interval, either way.
RESYNC_JITTER = 0.1
#: What a watch event's type means for the log's "trigger".
TRIGGERS = {None: "resume", "ADDED": "create", "MODIFIED": "update"}
#: Triggers that ask for a reconcile whatever the caches say: the periodic one, a retry after
#: a failure, the first look after a start, the audit's (what the cache lacked), a backup
#: schedule's due time, a restore Job's start deadline, and the next look at instances that
#: fail over.
SCHEDULED = frozenset(
    {"resync", "retry", "resume", "audit", "schedule", "deadline", "leader", "stale", "instances"}
)
#: The children the watches deliver whole (by our label): read from the cache, not the server.
#: Jobs take and restore backups; the Secrets are the ones the operator generated.
WATCHED_CHILDREN = (
    "Deployment",
    "Service",
    "PersistentVolumeClaim",
    "Job",
    "Secret",
    "NetworkPolicy",
)


def failure_reason(status: DatabaseStatus) -> str | None:
    """Why a reconcile that left its Database Failed or Degraded did (the Degraded condition's
    reason: for Failed, the failure's); None for any other phase."""
    if status.phase not in (Phase.FAILED, Phase.DEGRADED):
        return None
    for condition in status.conditions or ():
        if condition.type == DEGRADED:
            return str(condition.reason)
    return None


def is_fixed_point(db: Database, result: Result, reads: LiveReads) -> bool:
    """Whether running the reconcile again on the same versions of the Database, its children
    and its backups would do exactly what it just did: nothing. It wrote nothing, ended in no
    failure, read nothing but the caches (a user's Secret, a namesake, pods are read from the
    API server: they may have changed unseen), and needs no clock (a backup schedule's due
    time and retention do; a status's times move only on a change)."""
    backup = db.spec.backup
    return (
        not result.changed
        and result.result in ("success", "paused")
        and reads.count == 0
        and (backup is None or not backup.schedule)
    )


def span_attributes(key: Key, body: Manifest, trigger: str) -> dict[str, str | int]:
    """What a reconcile's root span says about its Database."""
    return {
        "k8s.namespace.name": key[0],
        "database.name": key[1],
        "database.generation": int(body["metadata"].get("generation") or 0),
        "reconcile.trigger": trigger,
    }


def _valid(body: Manifest) -> Database | None:
    """The Database ``body`` says, if it validates."""
    try:
        return Database.model_validate(body)
    except ValueError:  # pydantic's ValidationError
        return None


@dataclass
class Controller:
    """The Databases and their children as last seen, the queue of Databases to look at, and
    the workers."""

    kube: Kube
    settings: Settings
    metrics: Metrics
    #: Gives the EventSink for a Database (posts Kubernetes Events on it).
    events_for: Callable[[Manifest], EventSink]
    queue: WorkQueue[Key] = field(init=False)
    databases: dict[Key, Manifest] = field(default_factory=dict)
    children: ObjectCache = field(default_factory=lambda: ObjectCache(WATCHED_CHILDREN))
    #: The children's watches (watches.py), a list and watch per kind and namespace; None with
    #: namespace globs (the namespaces are not known in advance): Kopf's watches, which follow
    #: the namespaces that match, deliver the children then (handlers.py).
    watches: list[Watch] | None = field(init=False)
    #: Told why a watch request failed (the readiness probe's ``Watching``).
    watch_failed: Callable[[str], None] = lambda _: None
    #: The names the children's watches miss (a user's, another shard's); None with namespace
    #: globs: a child the cache lacks is read then.
    namesakes: Namesakes | None = field(init=False)
    #: The API as the reconcile sees it: watched children from the cache, writes cached.
    client: CachedKube = field(init=False)
    #: What each Database and its children were when its last reconcile ended (their
    #: resourceVersions): an event that arrives during a reconcile and turns out to be the echo
    #: of its own writes finds nothing new, and costs no second reconcile.
    settled: dict[Key, object] = field(default_factory=dict)
    #: The Databases whose last reconcile was a fixed point of what the watches deliver: it
    #: wrote nothing, read nothing of the API server, and needs no clock (no backup schedule).
    #: While their ``settled`` versions stand, a resync would find the same nothing: skipped.
    fixed: set[Key] = field(default_factory=set)
    #: Stale reads in a row per Database (see _stale).
    _stale_reads: dict[Key, int] = field(default_factory=dict)
    #: Set while this replica may reconcile: always, or with leader election while it leads.
    active: asyncio.Event = field(default_factory=asyncio.Event)
    now: Clock = system_clock
    #: The DatabaseBackups, in the index their own loop beside this one fills (empty without
    #: one; runner/build.py links the two): what a reconcile reads of its Database's backups.
    backups: BackupIndex = field(default_factory=BackupIndex)
    #: Told that a Database changed (now Active, say: its waiting backups may run).
    database_changed: Callable[[Key], None] = lambda _: None
    #: Told that something of a DatabaseBackup's changed (its Job, a watched child).
    wake_backup: Callable[[Key, str], None] = lambda *_: None
    #: spec.failover: what was seen of each Database's instances at its last look.
    instances: dict[Key, Memory] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.queue = WorkQueue(
            base_delay=RETRY_BASE_S,
            max_delay=self.settings.retry_max_delay,
            on_wait=self.metrics.workqueue_wait.observe,
        )
        namespaces = exact_namespaces(self.settings)
        selector = child_selector(self.settings)
        self.watches, self.namesakes = None, None
        if namespaces is not None:
            self.watches = [
                Watch(kind, namespace, selector)
                for namespace in namespaces
                for kind in WATCHED_CHILDREN
            ]
            self.namesakes = Namesakes(namespaces, unselected_child_selectors(self.settings))
        self.client = CachedKube(
            self.kube,
            self.children,
            lambda obj: child_selected(self.settings, obj),
            self.namesakes,
        )
        # The gauge follows the gate itself, read at scrape time from the metrics thread (an
        # Event's flag is a plain bool: the read needs no lock).
        self.metrics.active.set_function(lambda: float(self.active.is_set()))
        self.metrics.workqueue_depth.set_function(lambda: float(len(self.queue)))

    # --- what the watches tell ------------------------------------------------------------------

    def observe(self, event_type: str | None, body: Manifest) -> None:
        """A Database's watch event: remember the object, and look at it soon — unless it is
        the echo of our own write (the version that write returned is known already)."""
        key = key_of(body)
        if event_type == "DELETED":
            self._forget(key)
            return
        if self.remember(body):
            self.queue.add(key, TRIGGERS.get(event_type, "update"))
            self.database_changed(key)

    def child_event(self, event_type: str | None, body: Manifest) -> None:
        """A watched child's event: cache it, and wake its Database (or, for a backup's Job,
        its DatabaseBackup) if it changed."""
        if event_type == "DELETED":
            changed = self.children.discard(body)
        else:
            changed = self.children.put(body)
        if not changed:
            return
        controller = controller_of(body) or {}
        if controller.get("kind") == BACKUP_KIND:
            namespace = str(body["metadata"].get("namespace", ""))
            self.wake_backup((namespace, str(controller.get("name"))), str(body.get("kind")))
        elif (owner := owner_key(body)) is not None:
            self.wake(owner, str(body.get("kind", "child")))

    def wake(self, key: Key, trigger: str) -> None:
        """Something a Database owns changed: look at the Database soon (if it is known; a child
        seen before its owner is looked at when the owner's own event arrives)."""
        if key in self.databases:
            self.queue.add(key, trigger)

    def remember(self, body: Manifest) -> bool:
        """Keep ``body`` if it is newer than the Database known; whether it was."""
        key = key_of(body)
        if not newer(body, self.databases.get(key)):
            return False
        self.databases[key] = stripped(body)
        return True

    # --- leading ------------------------------------------------------------------------------

    def lead(self, leading: bool) -> None:
        """Start (or stop) reconciling. A new leader looks at every Database it knows afresh:
        what the previous one left undone is found by looking, not by remembering."""
        if not leading:
            self.active.clear()
            return
        self.settled.clear()
        self.fixed.clear()
        for key in self.databases:
            self.queue.add(key, "leader")
        self.active.set()

    # --- the workers --------------------------------------------------------------------------

    def start(self, workers: int) -> list[asyncio.Task[None]]:
        """Start ``workers`` tasks on the queue and the audit of the caches, now (before Kopf
        starts: Kopf waits at exit for tasks started after it, and these stop only when told
        to)."""
        tasks = [
            asyncio.create_task(
                work_on(self.queue, self.active, self.process), name=f"reconciler-{i}"
            )
            for i in range(workers)
        ]
        audit = asyncio.create_task(
            loops.audit_every(self.settings.resync_interval, self.active, self.audit), name="audit"
        )
        for watch in self.watches or ():
            following = watch.follow(
                self.kube, self._relisted(watch), self.child_event, self.watch_failed
            )
            tasks.append(asyncio.create_task(following, name=f"watch-{watch.kind}"))
        if self.namesakes is not None:
            tasks.append(asyncio.create_task(self.namesakes.follow(self.kube), name="namesakes"))
        return [*tasks, audit]

    # --- the caches: filled at start, audited every period ----------------------------------

    async def prime(self) -> None:
        """Fill the caches before the first reconcile, with one listing each: the Databases
        first, then each child watch's (the watches go on from it); the backups' loop lists
        its own next (runner/operate.py). So a backup is judged against the Databases as they
        are (before, it could be failed as DatabaseNotFound for good because Kopf had not
        listed them yet), a restart reads no child it already knows of, and no status loses the
        backups it names. Each Database listed is looked at ("resume"); Kopf's own listing,
        later, brings the same versions, which queue nothing. With namespace globs (the
        namespaces are not known yet) Kopf's listing fills it, and a backup whose Database the
        cache lacks reads it (`look_up`)."""
        for namespace in exact_namespaces(self.settings) or ():
            await self._list_databases(namespace)
        for watch in self.watches or ():
            self._relisted(watch)(await watch.list_now(self.kube), watch.version)

    async def _list_databases(self, namespace: str | None) -> None:
        async for page in self.kube.list_pages(KIND, namespace, database_selector(self.settings)):
            for body in page:
                if self.remember(body):
                    self.queue.add(key_of(body), "resume")

    async def look_up(self, key: Key) -> Manifest | None:
        """A Database the cache lacks, read from the API server: a backup names it before its
        watch event came (the two kinds are two watches, in no order), or the listing at start
        failed. A backup is never failed as DatabaseNotFound on the cache's word alone. A
        Database found is kept and looked at, as its watch event would have had it."""
        fresh = await self.kube.get(KIND, *key)
        if fresh is None or not database_selected(self.settings, fresh):
            return None
        if self.remember(fresh):
            self.queue.add(key, "resume")
        return self.databases.get(key)

    def _relisted(self, watch: Watch) -> Callable[[list[Manifest], str], None]:
        """What a watch's complete listing (at version ``at``) tells the cache: what it holds
        and was not listed is gone, what was listed is as listed."""

        def relisted(listed: list[Manifest], at: str) -> None:
            self._forget_unlisted(watch.kind, watch.namespace, {object_key(o) for o in listed}, at)
            for obj in listed:
                self.child_event("ADDED", obj)

        return relisted

    def _forget_unlisted(
        self, kind: str, namespace: str | None, listed: set[ObjectKey], at: str
    ) -> None:
        """Drop the children of ``kind`` held that a listing at version ``at`` lacks (unless
        held at a later version: written since)."""
        for held in self.children.objects_of(kind, namespace):
            if object_key(held) not in listed and version(held) < int(at or 0):
                self.child_event("DELETED", held)

    async def audit(self) -> None:
        """Correct what a lost watch event left wrong in the caches, once per resync period.

        A watch that breaks and resumes, or lists afresh, tells nothing of what was deleted
        meanwhile; a lost event leaves a stale version. So the caches are compared with a
        listing of names and resourceVersions (metadata only: no bodies), a few requests per
        period whatever the number of Databases: what is stale or missing is dropped and its
        Database looked at again (reading it afresh); what is gone is forgotten.

        That is Kopf's watches: the Databases, and the children too with namespace globs (the
        DatabaseBackups' loop audits its own). The children's own watches (watches.py) lose
        nothing: each resumes from the version it reached, and one too old lists afresh and
        drops what the listing lacks; so their kinds are not listed here (most of the audit's
        objects, and of its CPU).
        """
        audited_children = WATCHED_CHILDREN if self.watches is None else ()
        for namespace in audited_namespaces(self.settings, self.databases):
            await self._audit_databases(namespace)
            for kind in audited_children:
                await self._audit_children(kind, namespace)

    async def _audit_databases(self, namespace: str | None) -> None:
        await loops.audit(
            self.kube,
            KIND,
            namespace,
            database_selector(self.settings),
            self.databases,
            gone=lambda key, _: self._forget(key),
            changed=lambda fresh: self.observe("MODIFIED", fresh),
        )

    async def _audit_children(self, kind: str, namespace: str | None) -> None:
        listed, at = await self.kube.list_metadata(kind, namespace, child_selector(self.settings))
        self._forget_unlisted(kind, namespace, {object_key(meta) for meta in listed}, at)
        for meta in listed:
            stale = self.children.get(kind, *key_of(meta))
            if newer(meta, stale):
                if stale is not None:
                    self.children.discard(stale)  # read afresh by the reconcile
                if (owner := owner_key(meta)) is not None:
                    self.wake(owner, "audit")

    async def stop(self, tasks: list[asyncio.Task[None]]) -> None:
        """Stop the workers: a reconcile in progress is cancelled, the queue is dropped."""
        await loops.stop(self.queue, tasks)

    async def run(self, workers: int) -> None:
        """Work the queue with ``workers`` tasks until cancelled."""
        tasks = self.start(workers)
        try:
            await asyncio.gather(*tasks)
        finally:
            await self.stop(tasks)

    async def process(self, key: Key, trigger: str) -> Result | None:
        """Reconcile (or finalize) one Database; never raises: failures are retried."""
        body = self.databases.get(key)
        if body is None:
            return None
        if self._nothing_new(key, body, trigger):
            return None
        started = time.monotonic()
        deleting = bool(body["metadata"].get("deletionTimestamp"))
        name = "finalize Database" if deleting else "reconcile Database"
        # The root span of everything this reconcile does: API calls, the status write, logs.
        with tracing.span(name, span_attributes(key, body, trigger)) as span:
            turn = await loops.take_turn(
                self.queue,
                key,
                trigger,
                lambda: self._work(key, body, deleting),
                forgive=lambda error: self._forgive(key, error),
            )
            if turn.done is None:
                span.set_attribute("reconcile.result", turn.ended)
                if turn.failed is not None:
                    tracing.fail(span, turn.failed.error)
                    await self._failed(key, trigger, turn.failed, body)
                return None
            result, fixed = turn.done
            span.set_attribute("reconcile.result", "gone" if result.gone else result.result)
            if tracing.enabled() and result.status_wire is not None:
                old = body.get("status") or {}
                tracing.add_events(span, tracing.status_events(old, result.status_wire))
            self._succeeded(key, body, result, fixed)
            if not result.gone:
                self._record(key, trigger, result, started)
            return result

    async def _work(self, key: Key, body: Manifest, deleting: bool) -> tuple[Result, bool] | None:
        """Finalize the Database (None), or reconcile it: what that did, and whether it was a
        fixed point."""
        db = Database.model_validate(body)  # once: every step below takes the model
        if deleting:
            await self._finalize(key, body, db)
            return None
        return await self._reconcile(key, body, db)

    async def _forgive(self, key: Key, error: ApiError) -> str | None:
        """Why a failed reconcile is no failure: its Database is gone (forgotten), or what it
        read was stale (read afresh, and queued again); None: it is one."""
        if self._is_gone(key, error):
            self._forget(key)
            return "gone"
        return "stale" if await self._stale(key, error) else None

    def _succeeded(self, key: Key, body: Manifest, result: Result, fixed: bool) -> None:
        """After a reconcile that raised nothing (its failures forgotten): its next one, and
        what it settled (``fixed``: it was a fixed point)."""
        self._stale_reads.pop(key, None)
        if result.gone:
            self._forget(key)
            return
        if result.waits_for_a_change:
            # Refused for its spec: re-applying it at every resync would be refused again.
            # Its next reconcile is the next change to it or a child (a watch event).
            self.queue.unschedule(key)
        else:
            self._schedule_resync(key, result.next_backup, result.job_deadline, result.look_again)
        self.settled[key] = self._versions(key, self.databases.get(key, body))
        if has_finalizer(body) and fixed:
            self.fixed.add(key)
        else:
            self.fixed.discard(key)

    def _nothing_new(self, key: Key, body: Manifest, trigger: str) -> bool:
        """Woken by the echo of our own writes, or due a resync that would do the same nothing
        as the last reconcile (a fixed point): nothing it reads changed since."""
        resync_of_fixed = trigger == "resync" and key in self.fixed
        if trigger in SCHEDULED and not resync_of_fixed:
            return False
        if self.settled.get(key) != self._versions(key, body):
            return False
        if resync_of_fixed:
            self.metrics.resyncs_skipped.inc()
            self._schedule_resync(key)
            get_logger().debug("resync skipped", namespace=key[0], name=key[1])
        return True

    async def _stale(self, key: Key, error: ApiError) -> bool:
        """A write refused because what it was built from changed meanwhile (a conflict, or a
        guarded patch whose resourceVersion test failed): a stale read, not a failure. Read the
        Database afresh, drop the cached child the write was for, and go again at once — a few
        times in a row, then it counts as a failure."""
        if not error.stale:
            return False
        stale = self._stale_reads.get(key, 0) + 1
        if stale > STALE_RETRIES:
            self._stale_reads.pop(key, None)
            return False
        self._stale_reads[key] = stale
        if (child := object_at(error.path)) is not None and self.children.holds(child[0]):
            await self.client.get_live(*child)  # kept in the cache, fresher than what was held
        fresh = await self.kube.get(KIND, *key)
        if fresh is None:
            self._forget(key)
            return True
        self.databases[key] = stripped(fresh)
        get_logger().info(
            "stale read: retrying with a fresh copy",
            namespace=key[0],
            name=key[1],
            error=str(error),
            attempt=stale,
        )
        self.queue.add(key, "stale")
        return True

    @staticmethod
    def _is_gone(key: Key, error: ApiError) -> bool:
        """The Database itself is not found: deleted while the watch was away (a re-list
        after a lost watch brings no DELETED event)."""
        return error.not_found and error.path.startswith(Kube.path(KIND, *key))

    def _versions(self, key: Key, body: Manifest) -> object:
        return (
            body["metadata"].get("resourceVersion"),
            self.children.versions_of(key),
            self.backups.versions_of(key),
        )

    def _forget(self, key: Key) -> None:
        self.settled.pop(key, None)
        self.fixed.discard(key)
        self._stale_reads.pop(key, None)
        self.databases.pop(key, None)
        self.queue.discard(key)
        self.metrics.phases.forget(*key)
        self.metrics.backups.forget(*key)
        with contextlib.suppress(KeyError):
            self.metrics.primaries.remove(*key)
        self.instances.pop(key, None)

    def _schedule_resync(
        self,
        key: Key,
        backup_due: datetime | None = None,
        job_deadline: datetime | None = None,
        look_again: float | None = None,
    ) -> None:
        """The next periodic look, or, if it comes first, the backup schedule's next due time;
        while a restore Job's pod waits to start (``job_deadline``: when it is stopped), every
        few seconds until then, as no watch event tells of its pod; with spec.failover, the
        next look at its instances (``look_again`` seconds: no watch tells of an engine)."""
        interval = self.settings.resync_interval
        jitter = random.uniform(-RESYNC_JITTER, RESYNC_JITTER)  # noqa: S311 - not for secrets
        delay, trigger = interval * (1 + jitter), "resync"
        if job_deadline is not None:
            until = (job_deadline - self.now()).total_seconds()
            delay, trigger = min(delay, max(0.0, until), WAITING_LOOK_S), "deadline"
        if backup_due is not None and (until := (backup_due - self.now()).total_seconds()) < delay:
            delay, trigger = max(0.0, until), "schedule"
        if look_again is not None and look_again < delay:
            delay, trigger = look_again, "instances"
        self.queue.schedule(key, delay, trigger)

    async def _reconcile(self, key: Key, body: Manifest, db: Database) -> tuple[Result, bool]:
        """The reconcile, and whether it was a fixed point (counting the reads it asked of the
        API server)."""
        reads = LiveReads()
        counting = live_reads.set(reads)
        try:
            result = await self._reconcile_counted(key, body, db)
        finally:
            live_reads.reset(counting)
        return result, is_fixed_point(db, result, reads)

    async def _reconcile_counted(self, key: Key, body: Manifest, db: Database) -> Result:
        confirmed = False
        if not has_finalizer(body):
            body = await add_finalizer(self.client, body)
            self.remember(body)
            # Only the metadata changed (the finalizer, the version): no need to validate again.
            db = db.model_copy(update={"metadata": body["metadata"]})
            confirmed = True  # the API server just answered with it: it exists
        with self.metrics.reconcile_duration.time():
            result = await reconcile(
                self.client,
                db,
                self.events_for(body),
                self.now,
                confirmed=confirmed,
                backups=self.backups.view(key),
                jobs=JobOptions.of(self.settings),
                operator_namespace=self.settings.operator_namespace,
                memory=self.instances.setdefault(key, Memory()),
            )
        if result.failed_over is not None:
            self.metrics.failovers.labels(db.spec.engine).inc()
            self.metrics.failover_duration.labels(db.spec.engine).observe(result.failed_over)
        if result.body:
            self.remember(result.body)
            self.database_changed(key)  # e.g. now Active: its waiting backups can run
        return result

    async def _finalize(self, key: Key, body: Manifest, db: Database) -> None:
        self.metrics.phases.set(*key, "Deleting")
        if not has_finalizer(body):
            return  # ours is gone already; other finalizers hold it, not us
        done = await finalize(self.client, db, self.events_for(body), self.now)
        if left := await remove_finalizer(self.client, body):
            self.remember(left)
        self.queue.forget(key)
        get_logger().info("finalized", namespace=key[0], name=key[1], done=done)

    async def _failed(self, key: Key, trigger: str, failed: Failed, taken: Manifest) -> None:
        """Count and log a failure (its retry is scheduled); after ERRORS_BEFORE_DEGRADED in a
        row, say so on the Database, as this reconcile took it (``taken``), if it validates."""
        error, delay, failures = failed.error, failed.delay, failed.failures
        self.metrics.reconciled("error").inc()
        self.metrics.failed(API_ERROR if isinstance(error, ApiError) else UNEXPECTED_ERROR).inc()
        if isinstance(error, ApiError) and error.namespace_terminating:
            # The namespace is being deleted, and its Databases with it: expected, not an error.
            get_logger().info(
                "namespace is being deleted: nothing is created in it",
                namespace=key[0],
                name=key[1],
                trigger=trigger,
                retry_in_s=round(delay, 2),
            )
            return
        unexpected = not isinstance(error, ApiError)
        get_logger().error(
            "reconcile failed",
            namespace=key[0],
            name=key[1],
            trigger=trigger,
            error=str(error) or type(error).__name__,
            failures=failures,
            retry_in_s=round(delay, 2),
            exc_info=error if unexpected else False,  # caught in take_turn: its own traceback
        )
        body = self.databases.get(key)
        db = _valid(taken) if failures >= ERRORS_BEFORE_DEGRADED else None
        if body is not None and db is not None:
            # Best effort: the next retry reports again if this one fails.
            with contextlib.suppress(ApiError, NotLeadingError):
                written = await report_failure(
                    self.client, db, error, self.events_for(body), self.now
                )
                if written is not None:
                    self.remember(written)

    def _record(self, key: Key, trigger: str, result: Result, started: float) -> None:
        metrics = self.metrics
        metrics.reconciled(result.result).inc()
        if (reason := failure_reason(result.status)) is not None:
            metrics.failed(reason).inc()
        if result.status_written:
            metrics.status_updates.inc()
        for kind in result.drift:
            metrics.drift_corrections.labels(kind).inc()
        metrics.phases.set(*key, str(result.status.phase) if result.status.phase else None)
        if (seen := result.outcome.instances) is not None:
            primaries = sum(1 for i in seen.instances if i.role is InstanceRole.PRIMARY)
            metrics.primaries.labels(*key).set(primaries)
        if result.backups is not None:
            summary = result.backups
            metrics.backups.set(
                *key,
                BackupFacts(
                    summary.last_success.time.timestamp() if summary.last_success else None,
                    summary.last_failure.time.timestamp() if summary.last_failure else None,
                    summary.period.total_seconds() if summary.period else None,
                ),
            )
        # A resync that found nothing to do is routine: DEBUG, so INFO logs show only changes.
        get_logger().log(
            logging.INFO if result.changed else logging.DEBUG,
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
            backups_created=result.backups_created,
            backups_deleted=result.backups_deleted,
            status_written=result.status_written,
            duration_s=round(time.monotonic() - started, 4),
            generation=result.status.observed_generation,
        )
