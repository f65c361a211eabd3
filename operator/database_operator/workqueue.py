"""A coalescing work queue of object keys, in asyncio (the shape of client-go's workqueue).

- A key added several times before a worker takes it is processed once: a burst of events (a
  Database created, then its children appearing) costs one reconcile. The first trigger is kept,
  for the log.
- A key is processed by at most one worker at a time; a key added while it is being processed is
  processed again once that is done, so no change is lost.
- Each key has one scheduled slot (`schedule`): the next resync, or the retry after a failure.
  Scheduling again replaces it, so a reconcile that ran early because of an event pushes the
  resync back instead of adding a second one.
- Two lanes: a key added by an event (or a retry) goes before every key whose periodic resync
  came due. Resyncs fill the time that events leave: however short the resync period and
  however many the keys, a change is never queued behind a period's worth of resyncs (the
  resyncs run late instead).
- `backoff` counts a key's consecutive failures and gives the delay before its retry: doubling,
  capped, never giving up; `forget` resets it after a success.
- `on_wait` hears how long each key waited for a worker: from its add (a scheduled key: from
  its due time; a key added while processed: from the end of that processing) to `get`.
- `work_on` is one worker: it takes keys from the queue while its operator is active.
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import itertools
import time
from collections.abc import Awaitable, Callable, Hashable
from dataclasses import dataclass, field
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)
#: The trigger of a periodic resync: scheduled keys with it wait in the routine lane.
RESYNC = "resync"


@dataclass
class _Slot:
    deadline: float
    trigger: str
    order: int


@dataclass
class WorkQueue(Generic[K]):
    """Keys waiting to be processed, keys being processed, and keys scheduled for later."""

    #: First retry delay (seconds) and its cap: doubling from base_delay up to max_delay.
    base_delay: float = 0.5
    max_delay: float = 60.0
    #: Keys ready now, in the order they came (dicts as ordered sets): events first, resyncs after.
    _urgent: dict[K, None] = field(default_factory=dict)
    _routine: dict[K, None] = field(default_factory=dict)
    _triggers: dict[K, str] = field(default_factory=dict)
    _processing: set[K] = field(default_factory=set)
    _slots: dict[K, _Slot] = field(default_factory=dict)
    _heap: list[tuple[float, int, K]] = field(default_factory=list)
    _failures: dict[K, int] = field(default_factory=dict)
    _wakeup: asyncio.Event = field(default_factory=asyncio.Event)
    _order: itertools.count[int] = field(default_factory=itertools.count)
    _closed: bool = False
    #: Hears each key's wait for a worker (seconds), as `get` hands it out.
    on_wait: Callable[[float], None] | None = None
    clock: Callable[[], float] = time.monotonic
    #: When each ready key became ready (by ``clock``).
    _ready_since: dict[K, float] = field(default_factory=dict)

    def __len__(self) -> int:
        """Keys waiting to be processed now (not those in progress or scheduled for later)."""
        return len(self._urgent) + len(self._routine)

    def add(self, key: K, trigger: str, routine: bool = False, since: float | None = None) -> None:
        """Process ``key`` as soon as a worker is free (once, however often it is added);
        ``routine`` keys wait until no other key is ready. ``since``: when it became due (by
        ``clock``; default now)."""
        if key in self._triggers:
            if not routine and key in self._routine:  # an event overtakes the waiting resync
                del self._routine[key]
                self._urgent[key] = None
            return
        self._triggers[key] = trigger
        if key not in self._processing:
            (self._routine if routine else self._urgent)[key] = None
            self._ready_since[key] = self.clock() if since is None else since
            self._wakeup.set()

    def schedule(self, key: K, delay: float, trigger: str) -> None:
        """Process ``key`` after ``delay`` seconds, replacing what was scheduled for it."""
        loop = asyncio.get_running_loop()
        slot = _Slot(loop.time() + max(0.0, delay), trigger, next(self._order))
        self._slots[key] = slot
        heapq.heappush(self._heap, (slot.deadline, slot.order, key))
        self._wakeup.set()

    def discard(self, key: K) -> None:
        """Forget ``key`` entirely: its object is gone (a pending add is dropped too)."""
        self._slots.pop(key, None)
        self._failures.pop(key, None)
        if self._triggers.pop(key, None) is not None:
            self._urgent.pop(key, None)
            self._routine.pop(key, None)
            self._ready_since.pop(key, None)

    def unschedule(self, key: K) -> None:
        """Drop what was scheduled for ``key`` (an add still comes through)."""
        self._slots.pop(key, None)

    def backoff(self, key: K) -> tuple[float, int]:
        """Count one more failure of ``key``: the delay before its retry, and the count."""
        failures = self._failures.get(key, 0) + 1
        self._failures[key] = failures
        delay = min(self.max_delay, self.base_delay * 2 ** min(failures - 1, 30))
        return delay, failures

    def forget(self, key: K) -> None:
        """``key`` succeeded: its next failure starts the backoff afresh."""
        self._failures.pop(key, None)

    def failures(self, key: K) -> int:
        return self._failures.get(key, 0)

    def _promote_due(self, now: float) -> float | None:
        """Move scheduled keys whose time has come to the ready queue; the next deadline."""
        while self._heap:
            deadline, order, key = self._heap[0]
            slot = self._slots.get(key)
            if slot is None or slot.order != order:
                heapq.heappop(self._heap)  # replaced or discarded since
                continue
            if deadline > now:
                return deadline
            heapq.heappop(self._heap)
            del self._slots[key]
            # Due at its deadline, though no worker asked until now: its wait starts then.
            since = self.clock() - (now - deadline)
            self.add(key, slot.trigger, routine=slot.trigger == RESYNC, since=since)
        return None

    async def get(self) -> tuple[K, str] | None:
        """The next key to process and what triggered it; None once the queue is shut down.
        Call `done` when finished with it."""
        loop = asyncio.get_running_loop()
        while not self._closed:
            next_deadline = self._promote_due(loop.time())
            lane = self._urgent or self._routine
            if lane:
                key = next(iter(lane))
                del lane[key]
                self._processing.add(key)
                since = self._ready_since.pop(key, None)
                if self.on_wait is not None and since is not None:
                    self.on_wait(max(0.0, self.clock() - since))
                return key, self._triggers.pop(key)
            self._wakeup.clear()
            timeout = None if next_deadline is None else max(0.0, next_deadline - loop.time())
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wakeup.wait(), timeout)
        return None

    def done(self, key: K) -> None:
        """Processing ``key`` is over; if it was added meanwhile, it is ready again."""
        self._processing.discard(key)
        if key in self._triggers:
            self._urgent[key] = None
            self._ready_since[key] = self.clock()
            self._wakeup.set()

    def shut_down(self) -> None:
        """Wake every waiting worker with None."""
        self._closed = True
        self._wakeup.set()


async def work_on(
    queue: WorkQueue[K],
    active: asyncio.Event,
    process: Callable[[K, str], Awaitable[object]],
) -> None:
    """One worker: take keys from ``queue`` while this operator is active, and process each."""
    while True:
        await active.wait()
        item = await queue.get()
        if item is None:
            return
        key, trigger = item
        try:
            if active.is_set():
                await process(key, trigger)
            else:  # paused while waiting: leave it for when this operator is active again
                queue.add(key, trigger)
        finally:
            queue.done(key)
