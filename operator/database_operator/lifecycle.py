"""Keep watching: through API server outages of any length, and the CRDs deleted and created again.

Kopf alone does neither (docs/kopf-notes.md has the probes):

- It retries a failing request a bounded number of times, and a sleep between two attempts
  cannot be cut short: after a long outage a watch came back only at its next attempt, up to the
  longest backoff after the API server did. Here Kopf's requests are retried for as long as they
  fail (``ENDLESS``: after 1, 2 and 4 s, every ``RETRY_S`` ± a quarter), so a watch resumes
  within ``RETRY_S`` of the API server's return, whatever the outage length.
- A watch of a resource that is gone ends Kopf ("Watcher … has failed: 404", the process exits)
  or, with other timing, is never started again. Here Kopf is stopped when the CRDs go
  (``Supervisor.check`` notices it, or Kopf itself fails with a 404), the operator waits for
  them, and Kopf starts again: every watch lists afresh. The reconcile workers and the caches
  outlive Kopf.

Meanwhile ``Watching.problem`` says why the operator cannot watch, and /readyz answers 503 with
it: the API server does not answer, the CRDs are not served, or a watch request of Kopf's keeps
failing (Kopf logs each failed attempt at ERROR, whatever the log level; a test pins the
wording to the installed Kopf). /healthz stays 200: a restart would not bring the API server
back.

``WatchRestarts`` counts the watches of Databases and DatabaseBackups started again, for the
metrics. Kopf has no hook for it; its watching logger says it, at DEBUG (read whatever the log
level: the records below it are counted, then dropped as before).

Kopf's internals — private modules and attributes, logger names, log wording, behaviour its
documentation does not promise — are relied on here, and elsewhere only where named below
(runner/operate.py, logs.py). Each is pinned to the installed Kopf by a test that fails when a
release changes it (in tests/unit/test_lifecycle.py unless another file is named; a test there
checks that every test named here exists):

- the logger of ``kopf._cogs.clients.watching`` (``KOPF_WATCHING_LOGGER``), where Kopf logs its
  watch-streams and the attempts of their requests:
  ``test_kopf_still_logs_its_watches_and_their_requests_where_they_are_heard``;
- its wording of a failed attempt, at ERROR ("Request attempt #… failed; …": ``FAILED_ATTEMPT``,
  ``FAILED``): ``test_kopf_still_words_a_failed_attempt_as_the_readiness_expects``;
- its wording of a watch-stream started, listed afresh, and of a request that succeeded after
  failed attempts, at DEBUG (``STARTING``, ``RESTARTING``, ``SUCCEEDED``):
  ``test_kopf_still_words_its_watch_starts_as_the_restart_count_expects``;
- how those lines name a watch ("<plural>.<version>.<group>", "in 'ns'" or "cluster-wide"):
  ``test_kopf_still_names_a_watch_as_the_restart_count_expects``;
- ``settings.networking.error_backoffs`` iterated afresh for each request, which is retried
  until the iterable runs out, attempts counted without a total when it is not ``Sized``
  (``ENDLESS``): ``test_kopf_still_retries_a_request_for_as_long_as_its_backoffs_last``, and in
  tests/integration/test_lifecycle.py
  ``test_watches_resume_within_seconds_of_the_api_servers_return_after_a_long_outage``;
- the ``status`` of the errors Kopf fails with (``kopf._cogs.clients.errors.APIError``; a
  resource gone: ``APINotFoundError``, 404), read by ``Supervisor``:
  ``test_kopfs_own_not_found_error_is_read_as_a_resource_gone``, and in
  tests/integration/test_lifecycle.py
  ``test_the_crd_deleted_and_created_again_is_waited_for_then_watched_again``;
- SIGINT and SIGTERM taken over as Kopf starts and never given back (``handle_signals``; and
  runner/operate.py, which takes them back 0.1 s after starting Kopf):
  ``test_kopf_still_takes_the_signals_over_and_never_gives_them_back``;
- the tasks started before Kopf left running when it stops, every later one cancelled (the
  supervisor's helpers): ``test_kopf_still_leaves_the_tasks_started_before_it_alone``.

In logs.py (a floor below this module: it cannot import it):

- the logger ``kopf.objects`` and its line for each handler run ("Handler 'databases'
  succeeded." at INFO), shown only at DEBUG by ``logs._RoutineSuccess``: in
  tests/unit/test_logs.py ``test_kopf_still_logs_each_handler_run_as_the_filter_expects``;
- the extras of Kopf's per-object records (``settings``, ``k8s_skip``, and ``k8s_ref`` with the
  object's kind, namespace and name), dropped or lifted by ``logs._object_ref``: in
  tests/unit/test_logs.py ``test_kopfs_object_records_still_carry_the_extras_the_log_reads``.

Nothing of the operator imports a private module of Kopf's (``kopf._…``); its tests do, to pin.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import signal
import time
import urllib.parse
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field

from database_operator.api.backup import BACKUP_PLURAL
from database_operator.api.models import GROUP, PLURAL, VERSION
from database_operator.config import Settings
from database_operator.kube.api import Kube
from database_operator.kube.errors import ApiError
from database_operator.logs import get_logger

#: Kopf's first retries of a failed request (seconds), then every RETRY_S ± RETRY_JITTER.
FIRST_RETRIES = (1.0, 2.0, 4.0)
RETRY_S = 4.0
RETRY_JITTER = 0.25
#: How often the operator asks the API server whether it serves the CRDs.
CHECK_S = 5.0
#: A check the API server does not answer within this long counts as unanswered.
CHECK_TIMEOUT_S = 10.0
#: A failed watch request this recent makes the operator not ready (Kopf tries again at least
#: every RETRY_S * (1 + RETRY_JITTER) while it fails).
FAILING_FOR_S = 2 * RETRY_S
#: Kopf's watching logger, and how it words a failed attempt of a list or watch request.
KOPF_WATCHING_LOGGER = "kopf._cogs.clients.watching"
FAILED_ATTEMPT = ("Request attempt #",)
FAILED = " failed; "
#: How much of Kopf's message /readyz repeats.
PROBLEM_CHARS = 300
#: How Kopf words a watch-stream started ("Starting the watch-stream for databases.v1.<group>
#: in 'ns'."), listed afresh after a 410 Gone ("Restarting …"), and a request that succeeded
#: after failed attempts ("Request attempt #3 succeeded: GET <url>"). A test pins them.
STARTING = "Starting the watch-stream for "
RESTARTING = "Restarting the watch-stream for "
SUCCEEDED = " succeeded: GET "


class Endless:
    """Kopf's ``settings.networking.error_backoffs``: Kopf iterates it afresh for each request
    and retries until it runs out; this never does (not ``Sized``, so Kopf counts attempts
    without a total)."""

    def __iter__(self) -> Iterator[float]:
        yield from FIRST_RETRIES
        while True:
            yield RETRY_S * (1 + random.uniform(-RETRY_JITTER, RETRY_JITTER))  # noqa: S311


ENDLESS = Endless()


def required_resources(settings: Settings) -> list[tuple[str, tuple[str, ...]]]:
    """What must be served for the operator to watch: (group/version, plurals)."""
    return [(f"{GROUP}/{VERSION}", (PLURAL, BACKUP_PLURAL))]


async def unserved(kube: Kube, settings: Settings) -> list[str]:
    """The required resources the API server does not serve (raises ApiError or TimeoutError
    when it does not answer)."""
    missing = []
    for group_version, resources in required_resources(settings):
        # Not asyncio.wait_for: in Python 3.11 it can swallow a cancellation (the check's, when
        # Kopf stops) if the call completes at the same moment.
        async with asyncio.timeout(CHECK_TIMEOUT_S):
            served = await kube.serves(group_version, resources)
        if not served:
            missing.append(f"{group_version}/{'+'.join(resources)}".rstrip("/"))
    return missing


class Watching(logging.Handler):
    """Why the operator cannot watch now (``problem``; None: it can), for /readyz."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        super().__init__(level=logging.ERROR)
        self.clock = clock
        #: What the last check found: the API server not answering, the CRDs not served.
        self.unserved: str | None = None
        self._failed_at: float | None = None
        self._failure = ""

    def emit(self, record: logging.LogRecord) -> None:
        message = record.getMessage()
        if message.startswith(FAILED_ATTEMPT) and FAILED in message:
            self.failed(message)

    def failed(self, why: str) -> None:
        """A watch request failed (Kopf's, heard in its log, or the controller's own)."""
        self._failed_at = self.clock()
        self._failure = why[:PROBLEM_CHARS]

    @property
    def problem(self) -> str | None:
        if self.unserved is not None:
            return self.unserved
        if self._failed_at is not None and self.clock() - self._failed_at < FAILING_FOR_S:
            return f"a watch request keeps failing: {self._failure}"
        return None

    def following_kopf(self) -> Watching:
        """Hear Kopf's failed watch attempts (ERROR records: seen at any log level)."""
        logging.getLogger(KOPF_WATCHING_LOGGER).addHandler(self)
        return self


#: A watch listed afresh (410 Gone) this soon after it was established again is the same
#: restart: a watch resumed after an outage is often told at once that its resourceVersion is
#: too old for the new API server.
SAME_RESTART_S = 5.0

#: A watch: its resource's plural, and where (Kopf's words: "in 'ns'" or "cluster-wide").
WatchKey = tuple[str, str]


class WatchRestarts(logging.Filter):
    """Counts the watches of ``resources`` (plurals of our group) started again after they ended
    or failed, from the records of Kopf's watching logger:

    - a watch-stream started for a resource and namespace it was started for before: Kopf run
      anew (the CRDs re-created), or its watcher started again;
    - a watch request that succeeded after failed attempts: the API server was away;
    - a watch-stream listed afresh because its resourceVersion expired (410 Gone), unless that
      came right after the watch was established again (one restart, not two).

    A watch the API server ends on time (every few minutes) and that resumes at once from its
    resourceVersion is routine, and says nothing in the log: not counted.

    A filter on the logger, which is set to DEBUG: it reads every record, and lets through only
    those at the root logger's level or above, as the logger would have without it.
    """

    def __init__(self, resources: tuple[str, ...], on_restart: Callable[[str], None]) -> None:
        super().__init__()
        self.resources = resources
        self.on_restart = on_restart
        self._started: set[WatchKey] = set()
        #: When each watch was last established again after failed attempts (record time).
        self._reconnected: dict[WatchKey, float] = {}

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno == logging.DEBUG:
            restarted = self.restarted(record.getMessage(), record.created)
            if restarted is not None:
                self.on_restart(restarted)
        return logging.getLogger().isEnabledFor(record.levelno)

    def restarted(self, message: str, at: float) -> str | None:
        """The resource whose watch ``message`` (logged at ``at``, seconds) says was started
        again (None: none of ours, or not a restart)."""
        if message.startswith(STARTING):
            key = self._watch(message.removeprefix(STARTING))
            if key is None:
                return None
            if key in self._started:
                return key[0]
            self._started.add(key)
        elif message.startswith(RESTARTING):
            key = self._watch(message.removeprefix(RESTARTING))
            if key is None:
                return None
            reconnected = self._reconnected.pop(key, None)
            if reconnected is None or at - reconnected >= SAME_RESTART_S:
                return key[0]
        elif message.startswith(FAILED_ATTEMPT) and SUCCEEDED in message:
            key = self._watched_at(message.partition(SUCCEEDED)[2].strip())
            if key is not None:
                self._reconnected[key] = at
                return key[0]
        return None

    def _watch(self, said: str) -> WatchKey | None:
        """Kopf's ``<plural>.<version>.<group> <where>.``, if the resource is one of ours."""
        resource, _, where = said.partition(" ")
        plural, _, rest = resource.partition(".")
        if rest.partition(".")[2] != GROUP or plural not in self.resources:
            return None
        return plural, where.removesuffix(".")

    def _watched_at(self, url: str) -> WatchKey | None:
        """The watch of a watch request's URL: /apis/<group>/<version>/[namespaces/<ns>/]<plural>
        ?watch=true (a listing is not a watch)."""
        parts = urllib.parse.urlsplit(url)
        if urllib.parse.parse_qs(parts.query).get("watch") != ["true"]:
            return None
        path = parts.path.strip("/").split("/")
        if path[:2] != ["apis", GROUP] or path[-1] not in self.resources:
            return None
        where = f"in {path[4]!r}" if len(path) == 6 and path[3] == "namespaces" else "cluster-wide"
        return path[-1], where

    def following_kopf(self) -> WatchRestarts:
        """Read Kopf's watching logger's records, DEBUG included."""
        logger = logging.getLogger(KOPF_WATCHING_LOGGER)
        logger.addFilter(self)
        logger.setLevel(logging.DEBUG)
        return self

    def stop_following(self) -> None:
        logger = logging.getLogger(KOPF_WATCHING_LOGGER)
        logger.removeFilter(self)
        if not any(isinstance(found, WatchRestarts) for found in logger.filters):
            logger.setLevel(logging.NOTSET)


def handle_signals(stopping: asyncio.Event, on: bool) -> None:
    """SIGINT/SIGTERM set ``stopping`` (``on``), or are left to Kopf, which takes them over
    while it runs and never gives them back."""
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        if on:
            loop.add_signal_handler(signum, stopping.set)
        else:
            loop.remove_signal_handler(signum)


#: Runs Kopf until the flag it is given is set (or Kopf stops or fails by itself).
RunKopf = Callable[[asyncio.Event], Awaitable[None]]


@dataclass
class Supervisor:
    """Runs Kopf, stops it when the CRDs go, and starts it again once they are back."""

    kube: Kube
    settings: Settings
    watching: Watching
    #: Kopf's ready flag (set by Kopf once it watches), cleared while it does not run.
    kopf_ready: asyncio.Event
    #: Set to stop the operator for good (by a signal between Kopf's runs, or by the caller).
    stopping: asyncio.Event
    restarts: int = field(default=0, init=False)

    async def run(
        self,
        run_kopf: RunKopf,
        wait_for_crds: Callable[[], Awaitable[bool]],
        before_restart: Callable[[], Awaitable[None]],
    ) -> None:
        """Run Kopf until the operator stops; Kopf's own failures other than a resource gone
        are raised (the process exits, as before)."""
        log = get_logger()
        while True:
            stop_kopf = asyncio.Event()
            gone = asyncio.Event()
            # Started before Kopf: Kopf cancels at its exit every task started after it.
            helpers = [
                asyncio.create_task(self._relay(stop_kopf), name="stop relay"),
                asyncio.create_task(self._check_every_period(stop_kopf, gone), name="check"),
            ]
            failure: Exception | None = None
            try:
                await run_kopf(stop_kopf)
            except Exception as error:  # decided on below
                failure = error
            finally:
                for task in helpers:
                    task.cancel()
                await asyncio.gather(*helpers, return_exceptions=True)
            if self.stopping.is_set():
                return
            if failure is not None and not await self._resource_gone(failure):
                raise failure
            if failure is None and not gone.is_set():
                return  # Kopf stopped on a signal of its own
            self.kopf_ready.clear()
            self.watching.unserved = "the CRDs are not served"
            log.warning(
                "the CRDs are gone: not watching until they are back",
                kopf_error=str(failure) if failure is not None else None,
            )
            handle_signals(self.stopping, True)
            with contextlib.suppress(TimeoutError):  # Kopf found it gone before discovery did
                async with asyncio.timeout(CHECK_S):
                    await self.stopping.wait()
            if not await wait_for_crds():
                return
            handle_signals(self.stopping, False)
            await before_restart()
            self.restarts += 1
            log.info("the CRDs are served again: watching again", restarts=self.restarts)

    async def check(self) -> bool:
        """Look once; whether the CRDs are gone."""
        try:
            missing = await unserved(self.kube, self.settings)
        except (ApiError, TimeoutError) as error:
            self.watching.unserved = f"the API server does not answer: {error}"[:PROBLEM_CHARS]
            return False
        self.watching.unserved = f"not served: {', '.join(missing)}" if missing else None
        return bool(missing)

    async def _check_every_period(self, stop_kopf: asyncio.Event, gone: asyncio.Event) -> None:
        while not await self.check():
            await asyncio.sleep(CHECK_S)
        gone.set()
        stop_kopf.set()

    async def _relay(self, stop_kopf: asyncio.Event) -> None:
        await self.stopping.wait()
        stop_kopf.set()

    async def _resource_gone(self, failure: Exception) -> bool:
        """Kopf failed because a resource it watches is gone: its 404, or the CRDs missing."""
        if getattr(failure, "status", None) == 404:
            return True
        return await self.check()
