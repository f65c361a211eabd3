"""A controller on an in-memory Kube (tests/fakekube.py), as the unit tests of the controller and
what it drives use it: `make` builds one (active, resyncing every minute, its Events recorded in
a list), `database` puts a Database in the Kube, `stored` reads an object back, `process_all`
works every ready key once. Every object is in the namespace `NS`."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, cast

from database_operator.config import Settings
from database_operator.controller import Controller
from database_operator.events import EventSink
from database_operator.kube.api import Kube
from database_operator.manifest import Manifest
from database_operator.metrics import Metrics
from tests.fakekube import FakeKube

NS = "shop"


def events_sink(posted: list[tuple[str, str, str]]) -> Callable[[Manifest], EventSink]:
    def for_object(_: Manifest) -> EventSink:
        return lambda type_, reason, message: posted.append((type_, reason, message))

    return for_object


def make(
    kube: FakeKube,
    posted: list[tuple[str, str, str]] | None = None,
    namespaces: list[str] | None = None,
) -> Controller:
    controller = Controller(
        cast(Kube, kube),
        Settings(resync_interval=60, retry_max_delay=8, namespaces=namespaces or []),
        Metrics(),
        events_sink(posted if posted is not None else []),
    )
    controller.active.set()
    return controller


def database(kube: FakeKube, name: str = "db", **spec: Any) -> Manifest:
    return kube.put(
        {
            "apiVersion": "databases.example.com/v1",
            "kind": "Database",
            "metadata": {"name": name, "namespace": NS},
            "spec": spec,
        }
    )


def stored(kube: FakeKube, kind: str, name: str = "db") -> Manifest | None:
    return kube.objects.get((kind, NS, name))


async def process_all(controller: Controller) -> int:
    """Work every ready key once; how many reconciles that was."""
    count = 0
    while len(controller.queue):
        item = await controller.queue.get()
        assert item is not None
        await controller.process(*item)
        controller.queue.done(item[0])
        count += 1
    return count
