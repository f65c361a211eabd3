"""Keep the garbage collector's pauses short.

CPython's full (generation 2) collection walks every object the process tracks, and an operator
holds many for long: its modules, the watches' caches, Kopf's per-object state. At N = 1,000
Databases each full collection took 80-115 ms, every ~11 s; every reconcile and webhook review
in flight waited for it (the bench's p95 change → status). Objects that survive a full
collection are nearly all long-lived, so they are frozen (``gc.freeze``): collections skip them,
and a full one walks only what came since (15-36 ms in the same run).

Frozen objects are still freed by reference counting; only garbage cycles among them wait, for
the thaw every ``thaw_interval`` seconds: everything unfrozen, collected in one full pause, and
frozen again. The callback runs in whichever thread the collection happened on, mid-allocation:
it only notes what happened; the event loop acts on it.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import time
from collections import deque
from collections.abc import Callable
from typing import Any

#: Often enough that a full collection's survivors are frozen before the next one starts.
CHECK_INTERVAL_S = 1.0
#: How long garbage cycles among frozen objects may wait to be collected.
THAW_INTERVAL_S = 900.0

#: Told of each collection's pause: its generation (0, 1, 2) and seconds.
PauseObserver = Callable[[int, float], None]


class GcPauses:
    """Freezes what full collections leave, thaws now and then, and reports every pause."""

    def __init__(
        self,
        observe: PauseObserver | None = None,
        *,
        thaw_interval: float = THAW_INTERVAL_S,
        check_interval: float = CHECK_INTERVAL_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._observe = observe
        self._thaw_interval = thaw_interval
        self._check_interval = check_interval
        self._clock = clock
        self._started = 0.0
        # Appended to by the callback on any thread, emptied by the loop: deque's ends are
        # thread-safe. Bounded, in case the loop is stuck: pauses beyond are not reported.
        self._pauses: deque[tuple[int, float]] = deque(maxlen=1024)
        self._full_collected = False
        self._thaw_at = 0.0

    def _on_collection(self, phase: str, info: dict[str, Any]) -> None:
        # One collection runs at a time (under the GIL): start and stop pair up.
        if phase == "start":
            self._started = time.perf_counter()
            return
        generation = info["generation"]
        self._pauses.append((generation, time.perf_counter() - self._started))
        if generation == 2:
            self._full_collected = True

    def start(self) -> None:
        """Collect what startup left, freeze the rest (modules, primed caches), watch."""
        gc.collect()
        gc.freeze()
        self._thaw_at = self._clock() + self._thaw_interval
        gc.callbacks.append(self._on_collection)

    def stop(self) -> None:
        with contextlib.suppress(ValueError):
            gc.callbacks.remove(self._on_collection)
        gc.unfreeze()

    def tend(self) -> None:
        """Report the pauses noted, thaw when due, else freeze a full collection's survivors."""
        while self._pauses:
            generation, seconds = self._pauses.popleft()
            if self._observe is not None:
                self._observe(generation, seconds)
        if self._clock() >= self._thaw_at:
            self._thaw_at = self._clock() + self._thaw_interval
            gc.unfreeze()
            gc.collect()  # noted by the callback: it sets _full_collected, frozen below
        if self._full_collected:
            self._full_collected = False
            gc.freeze()

    async def run(self, stopping: asyncio.Event) -> None:
        """Tend until ``stopping`` is set; then everything is thawed."""
        self.start()
        try:
            while not stopping.is_set():
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stopping.wait(), self._check_interval)
                self.tend()
        finally:
            self.stop()
