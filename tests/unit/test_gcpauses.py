"""The garbage collector policy (gcpauses.py), on this process's real collector."""

from __future__ import annotations

import asyncio
import gc
import weakref
from collections.abc import Iterator

import pytest

from database_operator.gcpauses import GcPauses
from database_operator.metrics import Metrics


class Node:
    """Something the collector tracks, that can be part of a cycle and weakly referenced."""

    def __init__(self) -> None:
        self.other: Node | None = None


class SteppedClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> SteppedClock:
    return SteppedClock()


@pytest.fixture
def pauses(clock: SteppedClock) -> Iterator[tuple[GcPauses, list[tuple[int, float]]]]:
    seen: list[tuple[int, float]] = []
    keeper = GcPauses(lambda generation, seconds: seen.append((generation, seconds)), clock=clock)
    keeper.start()
    try:
        yield keeper, seen
    finally:
        keeper.stop()
    assert gc.get_freeze_count() == 0  # the process as it was


def cycle() -> Node:
    """Two nodes that refer to each other: once dropped, only the collector frees them."""
    first, second = Node(), Node()
    first.other, second.other = second, first
    return first


def test_start_freezes_what_startup_made(
    pauses: tuple[GcPauses, list[tuple[int, float]]],
) -> None:
    assert gc.get_freeze_count() > 0


def test_a_full_collections_survivors_are_frozen_and_its_pause_reported(
    pauses: tuple[GcPauses, list[tuple[int, float]]],
) -> None:
    keeper, seen = pauses
    frozen = gc.get_freeze_count()
    survivors = [Node() for _ in range(1000)]
    gc.collect()
    keeper.tend()
    assert gc.get_freeze_count() >= frozen + len(survivors)
    assert any(generation == 2 and seconds >= 0 for generation, seconds in seen)


def test_a_young_collection_freezes_nothing(
    pauses: tuple[GcPauses, list[tuple[int, float]]],
) -> None:
    keeper, seen = pauses
    frozen = gc.get_freeze_count()
    young = [Node() for _ in range(1000)]
    gc.collect(0)
    keeper.tend()
    assert gc.get_freeze_count() == frozen
    assert (0, seen[-1][1]) in seen
    del young


def test_garbage_cycles_among_frozen_objects_wait_for_the_thaw(
    pauses: tuple[GcPauses, list[tuple[int, float]]], clock: SteppedClock
) -> None:
    keeper, _ = pauses
    holder = [cycle()]  # alive through a full collection, so frozen
    gc.collect()
    keeper.tend()
    garbage = weakref.ref(holder.pop())  # the cycle's last outside reference is gone
    gc.collect()
    assert garbage() is not None  # frozen: the collector does not look at it
    keeper.tend()
    clock.now += keeper._thaw_interval
    keeper.tend()
    assert garbage() is None
    assert gc.get_freeze_count() > 0  # frozen again after the thaw


def test_the_metric_counts_pauses_by_generation() -> None:
    metrics = Metrics()
    metrics.gc_paused(2, 0.03)
    metrics.gc_paused(0, 0.00001)
    value = metrics.registry.get_sample_value
    assert value("database_operator_gc_pause_seconds_count", {"generation": "2"}) == 1
    assert value("database_operator_gc_pause_seconds_count", {"generation": "0"}) == 1
    assert value("database_operator_gc_pause_seconds_count", {"generation": "1"}) == 0


def test_run_tends_until_stopped_then_thaws() -> None:
    seen: list[int] = []
    keeper = GcPauses(lambda generation, _: seen.append(generation), check_interval=0.01)

    async def operate() -> None:
        stopping = asyncio.Event()
        running = asyncio.create_task(keeper.run(stopping))
        await asyncio.sleep(0.05)
        assert gc.get_freeze_count() > 0
        gc.collect()
        await asyncio.sleep(0.05)
        assert 2 in seen  # reported from the loop
        stopping.set()
        await running

    asyncio.run(operate())
    assert gc.get_freeze_count() == 0
