"""What the operator's two control loops share — the Databases' (controller.py) and the
DatabaseBackups' (backups/controller.py), each a work queue of keys worked by a few tasks
(workqueue.py): one key's turn, and the audit of what Kopf's watch delivered of a kind.

- `take_turn` does a loop's own work on one key, and never raises what it retries: a replica
  that stopped leading leaves the key queued for whoever leads next (maybe itself again); an API
  failure the loop forgives (its object gone, a stale read made good) is no failure; any other
  is retried after a doubling delay, for as long as it fails. A turn that ends well forgets the
  key's failures. What the work gave is the loop's to record and reschedule.
- `audit` corrects a lost watch event: a listing of names and resourceVersions (metadata only)
  against the copies held; `audit_every` does it once per period while the loop is active.
- `stop` stops a loop's workers.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Generic, TypeVar

from database_operator.cache import newer, version
from database_operator.kube.api import Kube
from database_operator.kube.errors import ApiError, NotLeadingError
from database_operator.logs import get_logger
from database_operator.manifest import Key, Manifest, key_of
from database_operator.workqueue import WorkQueue

R = TypeVar("R")
#: An audit comes up to this share of its period late: the audits of many replicas spread.
AUDIT_JITTER = 0.1


@dataclass(frozen=True)
class Failed:
    """A turn's failure, retried in ``delay`` seconds: the ``failures``-th in a row."""

    error: Exception
    delay: float
    failures: int


@dataclass(frozen=True)
class Turn(Generic[R]):
    """How one key's turn ended: ``done``, what the work gave; else ``ended`` says how:
    "finalized" (the work gave nothing to record), "not leading", what the loop forgave
    ("gone", "stale"), or "error" (``failed``)."""

    ended: str
    done: R | None = None
    failed: Failed | None = None


async def take_turn(
    queue: WorkQueue[Key],
    key: Key,
    trigger: str,
    work: Callable[[], Awaitable[R | None]],
    *,
    forgive: Callable[[ApiError], Awaitable[str | None]],
) -> Turn[R]:
    """Do ``work`` for ``key``, taken from ``queue`` for ``trigger`` (None: it finalized its
    object). A failure is retried, unless ``forgive`` says why an API failure is none (a word
    for the log and the trace: None, it is one); a bug too, so that it never ends a worker."""
    try:
        done = await work()
    except NotLeadingError:
        queue.add(key, trigger)  # for whoever leads next: maybe us again
        return Turn("not leading")
    except Exception as error:  # retried and logged by the loop: never the end of a worker
        if isinstance(error, ApiError) and (why := await forgive(error)) is not None:
            return Turn(why)
        delay, failures = queue.backoff(key)
        queue.schedule(key, delay, "retry")
        return Turn("error", failed=Failed(error, delay, failures))
    if done is None:
        return Turn("finalized")
    queue.forget(key)
    return Turn("done", done)


async def audit(
    kube: Kube,
    kind: str,
    namespace: str | None,
    selector: str | None,
    held: Mapping[Key, Manifest],
    *,
    gone: Callable[[Key, Manifest], None],
    changed: Callable[[Manifest], None],
) -> None:
    """Correct what a lost watch event left wrong in ``held``, the copies of ``kind`` in
    ``namespace`` (None: every one) that a watch delivered: one listing of their names and
    resourceVersions. A copy the listing lacks, and older than it, is ``gone``; an object listed
    newer than its copy (or with none) is read afresh and ``changed``."""
    listed, at = await kube.list_metadata(kind, namespace, selector)
    names = {key_of(meta): meta for meta in listed}
    for key, body in list(held.items()):
        if namespace in (None, key[0]) and key not in names and version(body) < int(at or 0):
            gone(key, body)
    for key, meta in names.items():
        if newer(meta, held.get(key)):
            fresh = await kube.get(kind, *key)
            if fresh is not None:
                changed(fresh)


async def audit_every(
    period: float, active: asyncio.Event, audit: Callable[[], Awaitable[None]]
) -> None:
    """``audit`` once per ``period`` seconds while active; one that fails is logged, and the
    next period's tries again."""
    while True:
        await asyncio.sleep(period * (1 + random.uniform(0, AUDIT_JITTER)))  # noqa: S311
        await active.wait()
        try:
            await audit()
        except ApiError as error:
            get_logger().warning("could not audit the caches", error=str(error))


async def stop(queue: WorkQueue[Key], tasks: list[asyncio.Task[None]]) -> None:
    """Stop a loop's workers: a turn in progress is cancelled, the queue is dropped."""
    queue.shut_down()
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
