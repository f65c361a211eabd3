"""The DatabaseBackups' loop: what the watch delivered of them (`BackupIndex`), and a work queue
of backups to look at, worked by a few tasks (`BackupController`), beside the Databases' own loop
(controller.py), whose API client, caches and pause it shares, and with which it shares the
skeleton of a turn and of an audit (loops.py). runner/build.py makes the two and links them: a
Database that changed is told here (`database_changed`), a backup that changed wakes its
Database (`wake_database`).

A backup is looked at when it changes, when its Job changes, and periodically while it is not
finished; a finished one is looked at again only when it is deleted. Each change to a backup
wakes its Database too — one its watch delivers, and one our own write made (whose watch event,
the echo, then finds that version held and wakes nothing) — at once: its status names its
newest backups, its schedule and retention count them.

A backup not yet started is judged against its Database: the Databases are listed before any
backup is looked at (Controller.prime comes before `prime`), and one the cache lacks is read from
the API server before the backup is failed as DatabaseNotFound, which is final.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections.abc import Awaitable, Callable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime

from database_operator import loops
from database_operator.api.backup import (
    BACKUP_KIND,
    DATABASE_LABEL,
    BackupPhase,
    DatabaseBackup,
)
from database_operator.backups import state
from database_operator.backups.jobs import JobOptions
from database_operator.backups.reconcile import BackupReconciler, BackupResult, EventsFor
from database_operator.cache import newer, stripped
from database_operator.clock import Clock, system_clock
from database_operator.config import Settings
from database_operator.finalizers import (
    add_finalizer,
    has_finalizer,
    missing_labels,
    remove_finalizer,
)
from database_operator.kube.api import Kube, KubeApi
from database_operator.kube.errors import ApiError
from database_operator.logs import get_logger
from database_operator.loops import Failed
from database_operator.manifest import Key, Manifest, key_of
from database_operator.metrics import Metrics
from database_operator.selection import audited_namespaces, database_selector
from database_operator.workqueue import WorkQueue, work_on

#: Backups run one Job each and are few: two tasks look at them.
WORKERS = 2
RETRY_BASE_S = 0.5


class BackupIndex(Mapping[Key, Manifest]):
    """The latest DatabaseBackups the watch delivered, by key (as a Mapping), and parsed, by
    namespace and by Database."""

    def __init__(self) -> None:
        self._bodies: dict[Key, Manifest] = {}
        #: By namespace, by name: the parsed backups (what restores and reconciles read).
        self._named: dict[str, dict[str, DatabaseBackup]] = {}
        #: (namespace, database) -> the names of its backups.
        self._of: dict[Key, set[str]] = {}

    def __len__(self) -> int:
        return len(self._bodies)

    def __getitem__(self, key: Key) -> Manifest:
        return self._bodies[key]

    def __iter__(self) -> Iterator[Key]:
        return iter(self._bodies)

    def put(self, body: Manifest) -> bool:
        """Keep ``body`` if it is newer than the backup held; whether it was."""
        key = key_of(body)
        if not newer(body, self._bodies.get(key)):
            return False
        try:
            backup = DatabaseBackup.model_validate(body)
        except ValueError:  # the API server's schema keeps such shapes out
            return False
        self.discard(key)
        self._bodies[key] = stripped(body)
        self._named.setdefault(key[0], {})[key[1]] = backup
        self._of.setdefault((key[0], backup.spec.database), set()).add(key[1])
        return True

    def discard(self, key: Key) -> bool:
        """Forget a backup; whether it was held."""
        if self._bodies.pop(key, None) is None:
            return False
        backup = self._named[key[0]].pop(key[1])
        names = self._of[(key[0], backup.spec.database)]
        names.discard(key[1])
        if not names:
            del self._of[(key[0], backup.spec.database)]
        return True

    def model(self, key: Key) -> DatabaseBackup | None:
        return self._named.get(key[0], {}).get(key[1])

    def database_of(self, key: Key) -> Key | None:
        """The (namespace, name) of the Database a backup held is of."""
        backup = self.model(key)
        return (key[0], backup.spec.database) if backup is not None else None

    def view(self, database: Key) -> state.Backups:
        """What a Database's reconcile reads: its backups, and its namespace's by name."""
        named = self._named.get(database[0], {})
        return state.Backups(
            of_database=[named[name] for name in sorted(self._of.get(database, ()))],
            named=named,
        )

    def versions_of(self, database: Key) -> frozenset[tuple[str, str]]:
        """The resourceVersion of each backup of a Database (what its reconcile last saw)."""
        return frozenset(
            (name, str(self._bodies[(database[0], name)]["metadata"].get("resourceVersion")))
            for name in self._of.get(database, ())
        )

    def running(self, database: Key, but: str) -> list[str]:
        """The backups of a Database that are running now, other than ``but``."""
        named = self._named.get(database[0], {})
        return sorted(
            name
            for name in self._of.get(database, ())
            if name != but and named[name].status.phase is BackupPhase.RUNNING
        )


def _unstarted(body: Manifest) -> bool:
    """Whether a backup is yet to be started (no phase, or Pending): only then does its
    Database decide anything."""
    return (body.get("status") or {}).get("phase") in (None, BackupPhase.PENDING)


async def _unknown(_: Key) -> Manifest | None:
    return None


async def _deleted_meanwhile(error: ApiError) -> str | None:
    """A backup not found was deleted meanwhile: no failure, its DELETED event follows."""
    return "gone" if error.not_found else None


@dataclass
class BackupController:
    """The DatabaseBackups' queue and workers."""

    kube: Kube
    client: KubeApi
    settings: Settings
    metrics: Metrics
    events_for: EventsFor
    #: The Databases as the Databases' loop holds them.
    databases: Mapping[Key, Manifest]
    #: Look at a Database again (its backups changed).
    wake_database: Callable[[Key, str], None]
    active: asyncio.Event
    #: A Database the Databases' loop does not hold, read from the API server (None: there is
    #: none), kept by that loop if found.
    find_database: Callable[[Key], Awaitable[Manifest | None]] = _unknown
    index: BackupIndex = field(default_factory=BackupIndex)
    now: Clock = system_clock
    queue: WorkQueue[Key] = field(init=False)
    backups: BackupReconciler = field(init=False)

    def __post_init__(self) -> None:
        self.queue = WorkQueue(base_delay=RETRY_BASE_S, max_delay=self.settings.retry_max_delay)
        self.backups = BackupReconciler(
            self.client, self.events_for, self.now, JobOptions.of(self.settings)
        )

    # --- what the watches tell --------------------------------------------------------------

    def observe(self, event_type: str | None, body: Manifest) -> None:
        """A DatabaseBackup's watch event."""
        key = key_of(body)
        database = self.index.database_of(key)
        if event_type == "DELETED":
            changed = self.index.discard(key)
            self.queue.discard(key)
        else:
            changed = self.index.put(body)
            database = self.index.database_of(key) or database
            if changed:
                self.queue.add(key, "create" if event_type == "ADDED" else "update")
        if changed and database is not None:
            self.wake_database(database, "DatabaseBackup")

    def wake(self, key: Key, trigger: str) -> None:
        """Something of a backup's changed (its Job): look at it soon."""
        if self.index.get(key) is not None:
            self.queue.add(key, trigger)

    def database_changed(self, database: Key) -> None:
        """A Database changed (its primary may be ready now): look at its unfinished backups."""
        for backup in self.index.view(database).of_database:
            if not state.finished(backup):
                self.queue.add((database[0], backup.name), "Database")

    async def prime(self) -> None:
        """Fill the index with one listing per namespace, once the Databases' loop has filled
        its caches, and before the first reconcile of a Database (whose status names its
        backups)."""
        selector = database_selector(self.settings)
        for namespace in audited_namespaces(self.settings, self.databases):
            async for page in self.kube.list_pages(BACKUP_KIND, namespace, selector):
                for body in page:
                    self.index.put(body)
        for key in self.index:
            self.queue.add(key, "resume")

    def lead(self) -> None:
        """This replica starts leading: look at every DatabaseBackup afresh."""
        for key in self.index:
            self.queue.add(key, "resume")

    async def audit(self) -> None:
        """Correct what a lost watch event left wrong in the index, once per resync period, in
        the namespaces the Databases' loop audits (see Controller.audit)."""
        for namespace in audited_namespaces(self.settings, self.databases):
            await loops.audit(
                self.kube,
                BACKUP_KIND,
                namespace,
                database_selector(self.settings),
                self.index,
                gone=lambda _, held: self.observe("DELETED", held),
                changed=lambda fresh: self.observe("MODIFIED", fresh),
            )

    # --- the workers ------------------------------------------------------------------------

    def start(self) -> list[asyncio.Task[None]]:
        """Start the workers and the audit of the index, now (see Controller.start)."""
        workers = [
            asyncio.create_task(work_on(self.queue, self.active, self.process), name=f"backups-{i}")
            for i in range(WORKERS)
        ]
        audit = loops.audit_every(self.settings.resync_interval, self.active, self.audit)
        return [*workers, asyncio.create_task(audit, name="backups-audit")]

    async def stop(self, tasks: list[asyncio.Task[None]]) -> None:
        """Stop the workers: a reconcile in progress is cancelled, the queue is dropped."""
        await loops.stop(self.queue, tasks)

    async def process(self, key: Key, trigger: str) -> None:
        """Reconcile (or finalize) one DatabaseBackup; never raises an API failure: those are
        retried."""
        body = self.index.get(key)
        if body is None:
            return
        started = time.monotonic()
        turn = await loops.take_turn(
            self.queue,
            key,
            trigger,
            lambda: self._work(key, body),
            forgive=_deleted_meanwhile,
        )
        if turn.failed is not None:
            self._failed(key, trigger, turn.failed)
        if (result := turn.done) is None:
            return
        if result.body is not None:
            self._keep(result.body)
        if result.status.phase not in (BackupPhase.COMPLETED, BackupPhase.FAILED):
            self._look_again(key, result.deadline)
        self._record(key, trigger, result.entered, result.reason, started)

    async def _work(self, key: Key, body: Manifest) -> BackupResult | None:
        """Finalize the backup (None), or reconcile it."""
        if body["metadata"].get("deletionTimestamp"):
            await self._finalize(key, body)
            return None
        database = key[0], str((body.get("spec") or {}).get("database", ""))
        # Labelled with its Database, whoever made it (a schedule labels its own): so
        # `kubectl get dbbackup -l databases.example.com/database=NAME` finds every one.
        labels = {DATABASE_LABEL: database[1]}
        if not has_finalizer(body) or missing_labels(body, labels):
            body = await add_finalizer(self.client, body, BACKUP_KIND, labels)
            self._keep(body)
        db = self.databases.get(database)
        if db is None and _unstarted(body):  # missing is final: ask the API server first
            db = await self.find_database(database)
        return await self.backups.reconcile(body, db, self.index.running(database, key[1]))

    def _failed(self, key: Key, trigger: str, failed: Failed) -> None:
        """Log a failure (its retry is scheduled); one that is no API failure is a bug: its
        traceback goes with it (before, it ended the worker that met it)."""
        error = failed.error
        # A namespace being deleted refuses creates: expected, not an error.
        terminating = isinstance(error, ApiError) and error.namespace_terminating
        log = get_logger().info if terminating else get_logger().error
        log(
            "backup reconcile failed",
            namespace=key[0],
            name=key[1],
            trigger=trigger,
            error=str(error),
            failures=failed.failures,
            retry_in_s=round(failed.delay, 2),
            exc_info=False if isinstance(error, ApiError) else error,
        )

    def _keep(self, body: Manifest) -> None:
        """Hold what our own write of a backup answered, and wake its Database as that change's
        watch event would have: the event, when it comes, finds the version held (an echo) and
        wakes nothing. (Before, a backup's end reached its Database only when the echo came
        before the answer — 5 times in 21 — else at the Database's next resync.)"""
        if self.index.put(body) and (database := self.index.database_of(key_of(body))):
            self.wake_database(database, "DatabaseBackup")

    async def _finalize(self, key: Key, body: Manifest) -> None:
        if not has_finalizer(body):
            return
        finalized = await self.backups.finalize(body)
        if finalized.done:
            if left := await remove_finalizer(self.client, body, BACKUP_KIND):
                self._keep(left)
            get_logger().info("backup finalized", namespace=key[0], name=key[1])
        else:  # its delete Job's events wake it; look again anyway, in case one is lost
            self._look_again(key, finalized.deadline)

    def _look_again(self, key: Key, deadline: datetime | None) -> None:
        """The next periodic look at an unfinished backup; sooner while its Job's pod waits
        to start (``deadline``: when it is stopped), which no watch event would tell: every
        few seconds, for the pod's reason, and at the deadline."""
        delay = self.settings.resync_interval * (1 + random.uniform(0, 0.1))  # noqa: S311
        if deadline is None:
            self.queue.schedule(key, delay, "resync")
            return
        until = max(0.0, (deadline - self.now()).total_seconds())
        self.queue.schedule(key, min(delay, until, state.WAITING_LOOK_S), "deadline")

    def _record(
        self,
        key: Key,
        trigger: str,
        entered: BackupPhase | None,
        reason: str | None,
        started: float,
    ) -> None:
        backup = self.index.model(key)
        if entered is BackupPhase.COMPLETED and backup is not None:
            engine = backup.status.engine or ""
            if backup.status.started_at and backup.status.completed_at:
                took = backup.status.completed_at - backup.status.started_at
                self.metrics.backup_duration.labels(engine).observe(took.total_seconds())
            self.metrics.backup_size.labels(engine).observe(backup.status.size or 0)
        if entered is BackupPhase.FAILED:
            self.metrics.backup_failures.labels(reason or "Unknown").inc()
        get_logger().log(
            logging.INFO if entered else logging.DEBUG,
            "backup reconciled",
            namespace=key[0],
            name=key[1],
            trigger=trigger,
            phase=str(backup.status.phase) if backup is not None else None,
            entered=str(entered) if entered else None,
            duration_s=round(time.monotonic() - started, 4),
        )
