"""The operator's lifecycle around Kopf: endless retries, readiness, and Kopf run again."""

from __future__ import annotations

import asyncio
import itertools
import logging
from collections.abc import Sized
from pathlib import Path
from typing import Any, cast

import kopf
import pytest

from database_operator.config import Settings
from database_operator.kube import ApiError, Kube
from database_operator.lifecycle import (
    ENDLESS,
    FAILING_FOR_S,
    FIRST_RETRIES,
    KOPF_WATCHING_LOGGER,
    RETRY_JITTER,
    RETRY_S,
    Supervisor,
    Watching,
)
from tests.aio import synchronously


def test_kopfs_requests_are_retried_for_as_long_as_they_fail() -> None:
    delays = list(itertools.islice(ENDLESS, 1000))
    assert tuple(delays[: len(FIRST_RETRIES)]) == FIRST_RETRIES
    low, high = RETRY_S * (1 - RETRY_JITTER), RETRY_S * (1 + RETRY_JITTER)
    assert all(low <= delay <= high for delay in delays[len(FIRST_RETRIES) :])
    assert len(set(delays[len(FIRST_RETRIES) :])) > 1  # spread, not in step
    assert not isinstance(ENDLESS, Sized)  # Kopf counts attempts without a last one
    assert list(itertools.islice(ENDLESS, 3)) == list(FIRST_RETRIES)  # afresh for each request


def kopf_logs(watching: Watching, level: int, message: str) -> None:
    watching.handle(logging.LogRecord(KOPF_WATCHING_LOGGER, level, "", 0, message, None, None))


def test_a_failing_watch_request_makes_the_operator_not_ready_until_it_stops_failing() -> None:
    now = [100.0]
    watching = Watching(clock=lambda: now[0])
    assert watching.problem is None
    kopf_logs(
        watching,
        logging.ERROR,
        "Request attempt #9 failed; will retry: GET https://k8s/apis/x?watch=true -> "
        "ClientConnectorError(...)",
    )
    assert watching.problem is not None and "GET https://k8s/apis/x?watch=true" in watching.problem
    now[0] += FAILING_FOR_S + 0.1  # no failure since: Kopf's attempt succeeded
    assert watching.problem is None
    watching.unserved = "not served: databases.example.com/v1/databases"
    assert watching.problem == "not served: databases.example.com/v1/databases"


def test_kopf_still_words_a_failed_attempt_as_the_readiness_expects() -> None:
    # Read from the installed Kopf's source: a release that rewords it must fail here.
    source = (Path(kopf.__file__).parent / "_cogs" / "clients" / "api.py").read_text()
    assert 'logger.error(f"Request attempt {idx} failed; will retry: {what}' in source


class FakeDiscovery:
    """What the supervisor asks of the API: whether the CRDs are served."""

    def __init__(self) -> None:
        self.served = True
        self.down = False

    async def serves(self, group_version: str, resources: tuple[str, ...] = ()) -> bool:
        if self.down:
            raise ApiError(0, "ConnectionRefused", "refused", "GET", "/apis")
        return self.served


def supervisor(discovery: FakeDiscovery, stopping: asyncio.Event) -> Supervisor:
    return Supervisor(cast(Kube, discovery), Settings(), Watching(), asyncio.Event(), stopping)


@synchronously
async def test_the_check_says_why_the_operator_cannot_watch() -> None:
    discovery = FakeDiscovery()
    watched = supervisor(discovery, asyncio.Event())
    assert not await watched.check() and watched.watching.problem is None
    discovery.down = True
    assert not await watched.check()
    assert (watched.watching.problem or "").startswith("the API server does not answer")
    discovery.down, discovery.served = False, False
    assert await watched.check()
    assert (watched.watching.problem or "").startswith("not served: databases.example.com/v1")


class NotFoundError(Exception):
    """Kopf's APINotFoundError, as the supervisor sees it: an error with a status."""

    status = 404


@synchronously
async def test_kopf_failing_on_a_resource_gone_is_run_again_once_it_is_back() -> None:
    discovery, stopping = FakeDiscovery(), asyncio.Event()
    watched = supervisor(discovery, stopping)
    runs: list[str] = []
    waits: list[bool] = []

    async def run_kopf(stop_kopf: asyncio.Event) -> None:
        runs.append("run")
        if len(runs) == 1:
            discovery.served = False
            raise NotFoundError("404 page not found")
        stopping.set()  # the second run is stopped by the operator's stop flag
        await stop_kopf.wait()

    async def wait_for_crds() -> bool:
        waits.append(True)
        discovery.served = True
        return True

    async def restart_webhooks() -> None:
        runs.append("webhooks")

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr("database_operator.lifecycle.CHECK_S", 0.01)
        await watched.run(run_kopf, wait_for_crds, restart_webhooks)
    assert runs == ["run", "webhooks", "run"]
    assert waits == [True]
    assert watched.restarts == 1


@synchronously
async def test_kopf_failing_otherwise_still_ends_the_operator() -> None:
    watched = supervisor(FakeDiscovery(), asyncio.Event())

    async def run_kopf(_: asyncio.Event) -> None:
        raise RuntimeError("a bug")

    async def nothing() -> Any:
        return True

    with pytest.raises(RuntimeError, match="a bug"):
        await watched.run(run_kopf, nothing, nothing)
