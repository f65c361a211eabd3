"""The operator's lifecycle around Kopf: endless retries, readiness, and Kopf run again."""

from __future__ import annotations

import ast
import asyncio
import itertools
import logging
import re
from collections.abc import Sized
from pathlib import Path
from typing import Any, cast

import kopf
import pytest
from kopf._cogs.clients import errors as kopf_errors
from kopf._cogs.clients import watching as kopf_watching

from database_operator import lifecycle
from database_operator.api.models import GROUP, PLURAL, VERSION
from database_operator.config import Settings
from database_operator.kube.api import Kube
from database_operator.kube.errors import UnreachableError
from database_operator.lifecycle import (
    ENDLESS,
    FAILING_FOR_S,
    FIRST_RETRIES,
    KOPF_WATCHING_LOGGER,
    RETRY_JITTER,
    RETRY_S,
    SAME_RESTART_S,
    Supervisor,
    Watching,
    WatchRestarts,
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


def test_a_failing_watch_of_the_operators_own_makes_it_not_ready_the_same_way() -> None:
    now = [100.0]
    watching = Watching(clock=lambda: now[0])
    watching.failed("WATCH /apis/apps/v1/deployments: 403 Forbidden")  # watches.py's report
    assert "403 Forbidden" in (watching.problem or "")
    now[0] += FAILING_FOR_S + 0.1
    assert watching.problem is None


def test_kopf_still_words_a_failed_attempt_as_the_readiness_expects() -> None:
    # Read from the installed Kopf's source: a release that rewords it must fail here.
    source = (Path(kopf.__file__).parent / "_cogs" / "clients" / "api.py").read_text()
    assert 'logger.error(f"Request attempt {idx} failed; will retry: {what}' in source


OURS = ("databases", "databasebackups")
WATCH_URL = (
    "https://127.0.0.1:6443/apis/databases.example.com/v1/namespaces/shop/databases"
    "?watch=true&allowWatchBookmarks=true&resourceVersion=42&timeoutSeconds=300"
)


def kopf_debug(restarts: WatchRestarts, message: str, at: float = 0.0) -> None:
    record = logging.LogRecord(KOPF_WATCHING_LOGGER, logging.DEBUG, "", 0, message, None, None)
    record.created = at
    restarts.filter(record)


def test_watch_restarts_count_only_ours_started_again() -> None:
    counted: list[str] = []
    restarts = WatchRestarts(OURS, counted.append)
    said = [
        "Starting the watch-stream for databases.v1.databases.example.com in 'shop'.",
        "Starting the watch-stream for databasebackups.v1.databases.example.com in 'shop'.",
        "Starting the watch-stream for databases.v1.databases.example.com in 'other'.",
        "Starting the watch-stream for deployments.v1.apps in 'shop'.",
        # Kopf run anew (the CRDs re-created): the same watches start again.
        "Starting the watch-stream for databases.v1.databases.example.com in 'shop'.",
        "Starting the watch-stream for deployments.v1.apps in 'shop'.",
        # A listing is not a watch, a retry is not a success, a child's watch is not ours.
        "Request attempt #2 succeeded: GET https://k8s/apis/databases.example.com/v1/"
        "namespaces/shop/databasebackups?limit=250",
        "Request attempt #2 succeeded: GET https://k8s/apis/apps/v1/deployments?watch=true",
        "Request attempt #2: GET https://k8s/apis/databases.example.com/v1/databases?watch=true",
        # Listed afresh: its resourceVersion was too old.
        "Restarting the watch-stream for databasebackups.v1.databases.example.com cluster-wide.",
        "Stopping the watch-stream for databases.v1.databases.example.com in 'shop'.",
    ]
    for message in said:
        kopf_debug(restarts, message)
    assert counted == ["databases", "databasebackups"]


def test_a_watch_back_after_an_outage_is_one_restart_though_it_is_then_listed_afresh() -> None:
    counted: list[str] = []
    restarts = WatchRestarts(OURS, counted.append)
    # Established again after its failed attempts, the new API server says 410 Gone at once.
    kopf_debug(restarts, f"Request attempt #7 succeeded: GET {WATCH_URL}", at=100.0)
    restarts_for_shop = "Restarting the watch-stream for databases.v1.databases.example.com"
    kopf_debug(restarts, f"{restarts_for_shop} in 'shop'.", at=100.01)
    assert counted == ["databases"]
    # A 410 later on is a restart of its own.
    kopf_debug(restarts, f"{restarts_for_shop} in 'shop'.", at=100.02)
    kopf_debug(restarts, f"Request attempt #2 succeeded: GET {WATCH_URL}", at=700.0)
    kopf_debug(restarts, f"{restarts_for_shop} in 'shop'.", at=700.0 + SAME_RESTART_S)
    assert counted == ["databases"] * 4


def test_kopfs_debug_records_are_counted_but_still_not_logged_above_debug() -> None:
    counted: list[str] = []
    seen: list[logging.LogRecord] = []
    root = logging.getLogger()

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            seen.append(record)

    handler = Keep()
    level = root.level
    root.addHandler(handler)
    root.setLevel(logging.INFO)
    restarts = WatchRestarts(OURS, counted.append).following_kopf()
    kopf_logger = logging.getLogger(KOPF_WATCHING_LOGGER)
    try:
        kopf_logger.debug(f"Request attempt #3 succeeded: GET {WATCH_URL}")
        kopf_logger.error("Request attempt #2 failed; will retry: GET x -> Error()")
        root.setLevel(logging.DEBUG)
        kopf_logger.debug("Starting the watch-stream for deployments.v1.apps in 'shop'.")
    finally:
        restarts.stop_following()
        root.removeHandler(handler)
        root.setLevel(level)
    assert counted == ["databases"]
    assert [record.levelno for record in seen] == [logging.ERROR, logging.DEBUG]
    assert kopf_logger.level == logging.NOTSET and restarts not in kopf_logger.filters


def test_kopf_still_words_its_watch_starts_as_the_restart_count_expects() -> None:
    # Read from the installed Kopf's source: a release that rewords them must fail here.
    clients = Path(kopf.__file__).parent / "_cogs" / "clients"
    watching = (clients / "watching.py").read_text()
    assert 'logger.debug(f"Starting the watch-stream for {resource} {where}{how}.")' in watching
    assert 'logger.debug(f"Restarting the watch-stream for {resource} {where}.")' in watching
    api = (clients / "api.py").read_text()
    assert 'logger.debug(f"Request attempt {idx} succeeded: {what}")' in api
    assert 'what = f"{method.upper()} {url}"' in api


def test_kopf_still_logs_its_watches_and_their_requests_where_they_are_heard() -> None:
    # Kopf's watch-streams log to their module's logger, and hand it to the listings and watch
    # requests they make: those log their attempts there too, not to the API module's logger.
    assert kopf_watching.logger.name == KOPF_WATCHING_LOGGER
    source = Path(kopf_watching.__file__).read_text()
    assert "logger = logging.getLogger(__name__)" in source
    assert source.count("logger=logger,") >= 2  # the listing's fetch and the watch's stream


def test_kopf_still_names_a_watch_as_the_restart_count_expects() -> None:
    assert str(kopf.Resource(GROUP, VERSION, PLURAL)) == f"{PLURAL}.{VERSION}.{GROUP}"
    source = Path(kopf_watching.__file__).read_text()
    assert "where = f'in {namespace!r}' if namespace is not None else 'cluster-wide'" in source


def test_kopf_still_retries_a_request_for_as_long_as_its_backoffs_last() -> None:
    # ENDLESS never runs out: Kopf must iterate it afresh for each request, retry until it runs
    # out, and not ask its length.
    api = (Path(kopf.__file__).parent / "_cogs" / "clients" / "api.py").read_text()
    assert "else settings.networking.error_backoffs" in api
    assert "count = len(effective) + 1 if isinstance(effective, collections.abc.Sized)" in api
    assert "enumerate(itertools.chain(effective, itertools.repeat(None)), start=1)" in api
    assert "elif backoff is None:  # the last or the only attempt." in api


def test_kopf_still_takes_the_signals_over_and_never_gives_them_back() -> None:
    kopf_root = Path(kopf.__file__).parent
    running = (kopf_root / "_core" / "reactor" / "running.py").read_text()
    for signum in ("SIGINT", "SIGTERM"):
        assert f"loop.add_signal_handler(signal.{signum}, signal_flag.set_result" in running
    assert not [
        path for path in kopf_root.rglob("*.py") if "remove_signal_handler" in path.read_text()
    ]


def test_kopf_still_leaves_the_tasks_started_before_it_alone() -> None:
    running = (Path(kopf.__file__).parent / "_core" / "reactor" / "running.py").read_text()
    assert "existing_tasks = await aiotasks.all_tasks()" in running
    assert "await run_tasks(operator_tasks, ignored=existing_tasks)" in running
    assert "hung_tasks = await aiotasks.all_tasks(ignored=ignored)" in running


def test_every_kopf_internal_listed_is_pinned_by_a_test_that_exists() -> None:
    """lifecycle.py lists the internals of Kopf's it relies on, each with its pinning test."""
    listed = set(re.findall(r"``(test_\w+)``", lifecycle.__doc__ or ""))
    tests = Path(__file__).parents[1]
    defined = {
        node.name
        for path in [
            *(tests / "unit").glob("test_*.py"),
            *(tests / "integration").glob("test_*.py"),
        ]
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
    }
    assert len(listed) >= 10
    assert sorted(listed - defined) == []


class FakeDiscovery:
    """What the supervisor asks of the API: whether the CRDs are served."""

    def __init__(self) -> None:
        self.served = True
        self.down = False

    async def serves(self, group_version: str, resources: tuple[str, ...] = ()) -> bool:
        if self.down:
            raise UnreachableError(0, "ConnectionRefused", "refused", "GET", "/apis")
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
async def test_kopfs_own_not_found_error_is_read_as_a_resource_gone() -> None:
    # Kopf's own error, as it raises it: a watch of a resource the API server no longer serves,
    # before discovery says so.
    watched = supervisor(FakeDiscovery(), asyncio.Event())
    gone = kopf_errors.APINotFoundError("404 page not found", status=404, headers={})
    assert gone.status == 404
    assert await watched._resource_gone(gone)
    conflict = kopf_errors.APIConflictError("conflict", status=409, headers={})
    assert not await watched._resource_gone(conflict)


@synchronously
async def test_kopf_failing_otherwise_still_ends_the_operator() -> None:
    watched = supervisor(FakeDiscovery(), asyncio.Event())

    async def run_kopf(_: asyncio.Event) -> None:
        raise RuntimeError("a bug")

    async def nothing() -> Any:
        return True

    with pytest.raises(RuntimeError, match="a bug"):
        await watched.run(run_kopf, nothing, nothing)
