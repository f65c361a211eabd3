"""The operator's own list-and-watch loop (watches.py): it goes on from where a watch ended,
lists afresh only when the version is too old (410 Gone), and after any other failure retries
from the same version."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from database_operator.kube.errors import ApiError
from database_operator.manifest import Manifest
from database_operator.watches import Watch
from tests.aio import synchronously, until


def service(name: str, rv: str) -> Manifest:
    return {"kind": "Service", "metadata": {"name": name, "namespace": "ns", "resourceVersion": rv}}


@dataclass
class ScriptedKube:
    """Lists answer the next of ``listings``; each watch plays the next of ``watches``: events
    to deliver, then the version it ends at, or an exception to raise."""

    listings: list[tuple[list[Manifest], str]]
    watches: list[tuple[list[tuple[str, Manifest]], str | Exception]]
    #: The version each watch was made from, and each listing's kind of request.
    watched_from: list[str] = field(default_factory=list)
    listed: list[str] = field(default_factory=list)

    async def list_objects(self, *_: Any, **__: Any) -> tuple[list[Manifest], str]:
        self.listed.append("objects")
        return self.listings.pop(0)

    async def list_metadata(self, *_: Any, **__: Any) -> tuple[list[Manifest], str]:
        self.listed.append("metadata")
        return self.listings.pop(0)

    async def watch(self, *args: Any, deliver: Callable[[str, Manifest], None], **_: Any) -> str:
        self.watched_from.append(args[3])
        if not self.watches:
            await asyncio.Event().wait()  # the last watch lasts until cancelled
        events, end = self.watches.pop(0)
        for event_type, obj in events:
            deliver(event_type, obj)
        if isinstance(end, Exception):
            raise end
        return end


async def follow(kube: ScriptedKube, watch: Watch, done: Callable[[], bool]) -> dict[str, Any]:
    seen: dict[str, Any] = {"relisted": [], "heard": [], "failed": []}
    task = asyncio.create_task(
        watch.follow(
            kube,  # type: ignore[arg-type]
            lambda listed, at: seen["relisted"].append(
                ([o["metadata"]["name"] for o in listed], at)
            ),
            lambda event_type, obj: seen["heard"].append((event_type, obj["metadata"]["name"])),
            seen["failed"].append,
            backoffs=itertools.repeat(0.001),
        )
    )
    try:
        await until(done, 5, "the script")
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
    return seen


@synchronously
async def test_a_watch_goes_on_from_where_it_ended_and_relists_only_when_too_old() -> None:
    gone = ApiError(410, "Expired", "too old resource version", "WATCH", "/api/v1/services")
    kube = ScriptedKube(
        listings=[([service("a", "3")], "5"), ([service("b", "11")], "12")],
        watches=[
            ([("ADDED", service("c", "6"))], "9"),  # the server ended it on time
            ([("DELETED", service("c", "10"))], gone),
            ([("MODIFIED", service("b", "13"))], "13"),
        ],
    )
    watch = Watch("Service", "ns", "x=y")
    seen = await follow(kube, watch, lambda: len(kube.watched_from) == 4)
    assert seen["relisted"] == [(["a"], "5"), (["b"], "12")]
    assert seen["heard"] == [("ADDED", "c"), ("DELETED", "c"), ("MODIFIED", "b")]
    assert kube.watched_from == ["5", "9", "12", "13"]
    assert kube.listed == ["objects", "objects"]
    assert seen["failed"] == []  # a 410 is routine


@synchronously
async def test_a_failed_watch_is_retried_from_the_same_version_and_told() -> None:
    kube = ScriptedKube(
        listings=[([], "5")],
        watches=[([], ApiError(0, "Unreachable", "connection refused", "WATCH", "/api"))],
    )
    watch = Watch("Service", "ns", "x=y", metadata_only=True)
    seen = await follow(kube, watch, lambda: len(kube.watched_from) == 2)
    assert kube.watched_from == ["5", "5"]
    assert kube.listed == ["metadata"]
    assert len(seen["failed"]) == 1 and "connection refused" in seen["failed"][0]


@synchronously
async def test_a_watch_listed_already_goes_on_from_that_listing() -> None:
    kube = ScriptedKube(listings=[([service("a", "3")], "7")], watches=[])
    watch = Watch("Service", "ns", "x=y")
    assert [o["metadata"]["name"] for o in await watch.list_now(kube)] == ["a"]  # type: ignore[arg-type]
    seen = await follow(kube, watch, lambda: watch.following)
    assert seen["relisted"] == []
    assert kube.watched_from == ["7"]
