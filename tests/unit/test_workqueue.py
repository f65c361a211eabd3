"""The work queue: coalescing, one worker per key, one schedule slot per key, capped backoff."""

from __future__ import annotations

import asyncio

import pytest

from database_operator.workqueue import WorkQueue
from tests.aio import synchronously


async def drain(queue: WorkQueue[str]) -> list[tuple[str, str]]:
    """Take every key that is ready now (marking each done)."""
    taken = []
    while len(queue):
        item = await queue.get()
        assert item is not None
        taken.append(item)
        queue.done(item[0])
    return taken


@synchronously
async def test_a_burst_of_adds_is_one_item_with_its_first_trigger() -> None:
    queue: WorkQueue[str] = WorkQueue()
    for trigger in ("create", "Deployment", "Service", "update"):
        queue.add("ns/db", trigger)
    queue.add("ns/other", "create")
    assert await drain(queue) == [("ns/db", "create"), ("ns/other", "create")]


@synchronously
async def test_a_key_added_while_processed_comes_back_once_done() -> None:
    queue: WorkQueue[str] = WorkQueue()
    queue.add("k", "create")
    item = await queue.get()
    assert item == ("k", "create")
    queue.add("k", "Deployment")
    queue.add("k", "Service")
    assert len(queue) == 0, "never handed to a second worker while in progress"
    queue.done("k")
    assert await drain(queue) == [("k", "Deployment")]


@synchronously
async def test_scheduling_again_replaces_the_slot() -> None:
    queue: WorkQueue[str] = WorkQueue()
    queue.schedule("k", 0.05, "resync")
    queue.schedule("k", 0.2, "resync")  # the reconcile that ran meanwhile pushed it back
    item = await asyncio.wait_for(queue.get(), 1)
    assert item == ("k", "resync")
    queue.done("k")
    with pytest.raises(TimeoutError):
        await asyncio.wait_for(queue.get(), 0.3)


@synchronously
async def test_scheduled_keys_come_in_deadline_order() -> None:
    queue: WorkQueue[str] = WorkQueue()
    queue.schedule("late", 0.1, "resync")
    queue.schedule("soon", 0.02, "retry")
    first = await asyncio.wait_for(queue.get(), 1)
    second = await asyncio.wait_for(queue.get(), 1)
    assert [first, second] == [("soon", "retry"), ("late", "resync")]


@synchronously
async def test_backoff_doubles_to_a_cap_and_never_gives_up() -> None:
    queue: WorkQueue[str] = WorkQueue(base_delay=0.5, max_delay=60)
    delays = [queue.backoff("k")[0] for _ in range(12)]
    assert delays[:4] == [0.5, 1, 2, 4]
    assert delays[-1] == 60
    assert queue.failures("k") == 12
    queue.forget("k")
    assert queue.backoff("k") == (0.5, 1)


@synchronously
async def test_a_discarded_key_is_forgotten() -> None:
    queue: WorkQueue[str] = WorkQueue()
    queue.add("k", "create")
    queue.schedule("k", 0.01, "resync")
    queue.backoff("k")
    queue.discard("k")
    assert len(queue) == 0
    assert queue.failures("k") == 0
    with pytest.raises(TimeoutError):
        await asyncio.wait_for(queue.get(), 0.1)


@synchronously
async def test_shutting_down_wakes_every_worker() -> None:
    queue: WorkQueue[str] = WorkQueue()
    workers = [asyncio.create_task(queue.get()) for _ in range(3)]
    await asyncio.sleep(0)
    queue.shut_down()
    assert await asyncio.gather(*workers) == [None, None, None]


@synchronously
async def test_an_event_goes_before_every_resync_that_came_due() -> None:
    queue: WorkQueue[str] = WorkQueue()
    for key in ("a", "b", "c"):
        queue.schedule(key, 0, "resync")
    await asyncio.sleep(0.01)
    first = await queue.get()  # the resyncs are due: one is taken
    assert first == ("a", "resync")
    queue.add("z", "update")  # a change arrives behind two waiting resyncs
    queue.add("c", "Deployment")  # and one for a key whose resync waits: it moves up
    assert [await queue.get() for _ in range(3)] == [
        ("z", "update"),
        ("c", "resync"),  # the first trigger is kept, for the log
        ("b", "resync"),
    ]


class Clock:
    """A clock the test moves by hand."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@synchronously
async def test_each_key_reports_its_wait_from_its_add_to_a_workers_get() -> None:
    waits: list[float] = []
    clock = Clock()
    queue: WorkQueue[str] = WorkQueue(on_wait=waits.append, clock=clock)
    queue.add("a", "create")
    clock.now += 2.5
    queue.add("a", "update")  # coalesced: the wait runs from the first add
    queue.add("b", "create")
    clock.now += 0.5
    assert await drain(queue) == [("a", "create"), ("b", "create")]
    assert waits == [3.0, 0.5]


@synchronously
async def test_a_key_added_while_processed_waits_from_the_end_of_that_processing() -> None:
    waits: list[float] = []
    clock = Clock()
    queue: WorkQueue[str] = WorkQueue(on_wait=waits.append, clock=clock)
    queue.add("k", "create")
    assert await queue.get() == ("k", "create")
    queue.add("k", "Deployment")
    clock.now += 10  # the reconcile takes long: no worker could have taken it meanwhile
    queue.done("k")
    clock.now += 1
    assert await drain(queue) == [("k", "Deployment")]
    assert waits == [0.0, 1.0]


@synchronously
async def test_a_scheduled_key_waits_from_its_due_time_and_a_discarded_one_not_at_all() -> None:
    waits: list[float] = []
    queue: WorkQueue[str] = WorkQueue(on_wait=waits.append)
    queue.schedule("k", 0.0, "resync")
    await asyncio.sleep(0.05)  # due, but no worker asked
    assert await queue.get() == ("k", "resync")
    assert len(waits) == 1 and 0.04 <= waits[0] < 1
    queue.add("gone", "create")
    queue.discard("gone")
    assert len(queue) == 0 and len(waits) == 1
