"""Leader election on a coordination.k8s.io/v1 Lease: which replica reconciles.

Every replica watches (its caches stay warm) and serves the webhooks; only the holder of the Lease
works the queue. The semantics are client-go's leaderelection, which every controller-runtime
operator uses and whose Lease users and their alerts know:

- A candidate takes the Lease when it has no holder (released) or when the record has not changed
  for ``leaseDurationSeconds`` as the candidate measured it on its own clock: renewTime is written
  for people, never compared with another node's clock.
- The holder renews it every retry period. If it has not renewed within the renew deadline it
  steps down — before any candidate can take over, since the deadline is shorter than the lease.
- On a clean stop the holder releases it (no holder, leaseDurationSeconds 1): a rolling update
  hands over in about a second.

``may_write`` is the fence: true while the last renewal, timed from the moment its request was
sent, is younger than the renew deadline. The controller's API client checks it before every write,
so a holder that stopped renewing stops writing — even in a reconcile already under way — while
its Lease is still valid for everyone else. That margin (lease duration minus renew deadline,
5 s by default) is what keeps two writers apart.

An upgrade from a release that elected its active replica with Kopf's peering rolls new pods in
beside the old ones, which do not know the Lease: until no old peer is left alive in the peering
object (their keep-alives stop when they exit), a new replica does not campaign
(``wait_for_earlier_peers``).

Why our own (one module) rather than a library's: Kopf has peering, not a Lease; the ``kubernetes``
package's leaderelection runs in threads and locks a ConfigMap; ``kubernetes_asyncio``'s brings a
second API client, does not release on stop and offers no fence.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from database_operator.kube.api import Kube
from database_operator.kube.errors import ApiError
from database_operator.logs import get_logger
from database_operator.manifest import Manifest

LEASE = "Lease"
#: Tries that keep failing are a WARNING at most this often (each is a DEBUG line).
WARN_EVERY_S = 30.0


def micro_time(moment: datetime) -> str:
    """A MicroTime as the API server writes it."""
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


@dataclass
class LeaderElection:
    """One candidate for one Lease. ``run`` until stopped; ``leading`` is set while it holds it."""

    kube: Kube
    namespace: str
    name: str
    identity: str
    lease_duration: float = 15.0
    renew_deadline: float = 10.0
    retry_period: float = 2.0
    #: Told True when this candidate starts leading, False when it stops.
    on_change: Callable[[bool], None] = lambda leading: None
    leading: asyncio.Event = field(default_factory=asyncio.Event)
    clock: Callable[[], float] = time.monotonic
    now: Callable[[], datetime] = lambda: datetime.now(UTC)
    #: The Lease as last read or written, and when (our clock) its record last changed.
    _lease: Manifest | None = None
    _record: tuple[Any, ...] | None = None
    _record_seen_at: float = 0.0
    #: When the request of our last successful acquire or renewal was sent (our clock).
    _renewed_at: float | None = None
    #: When another's hold runs out unless renewed (our clock): the next try is then, not later.
    _expires_at: float | None = None
    _warned_at: float = float("-inf")

    def may_write(self) -> bool:
        """Whether this candidate holds the Lease for certain: renewed within the deadline."""
        return (
            self.leading.is_set()
            and self._renewed_at is not None
            and self.clock() < self._renewed_at + self.renew_deadline
        )

    async def run(self, stopping: asyncio.Event) -> None:
        """Campaign, lead while the Lease is renewed, campaign again when it is lost; release it
        when ``stopping`` is set."""
        log = get_logger()
        try:
            while not stopping.is_set():
                if not await self._acquire(stopping):
                    return
                self._lead(True)
                log.info("leading", lease=f"{self.namespace}/{self.name}", identity=self.identity)
                if await self._renew(stopping):
                    return
                self._lead(False)
                log.warning(
                    "stopped leading: the lease was not renewed within the renew deadline",
                    lease=f"{self.namespace}/{self.name}",
                    renew_deadline_s=self.renew_deadline,
                )
        finally:
            await self.release()

    # --- the states -----------------------------------------------------------------------------

    async def _acquire(self, stopping: asyncio.Event) -> bool:
        """Try until the Lease is ours (True) or we are stopped (False). Between tries, wait on a
        watch of the Lease: a release is taken at once, not a retry period later."""
        while not stopping.is_set():
            if await self._attempt(self.retry_period):
                return True
            await self._wait_for_change(stopping)
        return False

    async def _renew(self, stopping: asyncio.Event) -> bool:
        """Renew every retry period; True when stopped, False when the deadline passed."""
        while True:
            if await _sleep_or_stop(stopping, self.retry_period):
                return True
            assert self._renewed_at is not None
            deadline = self._renewed_at + self.renew_deadline
            while not await self._attempt(deadline - self.clock()):
                left = deadline - self.clock()
                if left <= 0:
                    return False
                if await _sleep_or_stop(stopping, min(self.retry_period, left)):
                    return True

    def _lead(self, leading: bool) -> None:
        if leading:
            self.leading.set()
        else:
            self.leading.clear()
        self.on_change(leading)

    # --- one try --------------------------------------------------------------------------------

    async def _attempt(self, timeout: float) -> bool:
        """One acquire-or-renew, abandoned after ``timeout`` seconds (a hung request must not
        outlast the renew deadline)."""
        if timeout <= 0:
            return False
        try:
            return await asyncio.wait_for(self._try(), timeout)
        except (TimeoutError, ApiError) as error:
            self._failed(error)
            return False

    def _failed(self, error: Exception) -> None:
        """A try that failed: DEBUG, but a WARNING every WARN_EVERY_S while tries keep failing
        for another reason than a race (a missing Role would otherwise keep every replica a
        silent standby)."""
        why = str(error) or type(error).__name__
        raced = isinstance(error, ApiError) and error.stale
        now = self.clock()
        if raced or now < self._warned_at + WARN_EVERY_S:
            get_logger().debug("lease attempt failed", lease=self.name, error=why)
            return
        self._warned_at = now
        get_logger().warning(
            "cannot read or write the lease", lease=f"{self.namespace}/{self.name}", error=why
        )

    async def _try(self) -> bool:
        sent = self.clock()
        if self.leading.is_set() and self._lease is not None:
            # The holder renews what it wrote last: one request; a conflict means someone else
            # wrote the Lease, and the full path below decides.
            with contextlib.suppress(ApiError):
                return self._took(await self.kube.replace(self._renewed(self._lease)), sent)
        lease = await self.kube.get_live(LEASE, self.namespace, self.name)
        if lease is None:
            created = await self.kube.create(self._new_lease(), exist_ok=True)
            return created is not None and self._took(created, sent)
        spec = lease.get("spec") or {}
        record = _record_of(spec)
        if record != self._record:
            self._record, self._record_seen_at = record, sent
        holder = spec.get("holderIdentity") or ""
        duration = float(spec.get("leaseDurationSeconds") or self.lease_duration)
        if holder and holder != self.identity and sent < self._record_seen_at + duration:
            self._lease = lease
            self._expires_at = self._record_seen_at + duration
            return False  # held, and renewed within its duration as far as we have seen
        return self._took(await self.kube.replace(self._renewed(lease)), sent)

    def _took(self, lease: Manifest, sent: float) -> bool:
        self._lease = lease
        self._renewed_at = sent
        self._expires_at = None
        spec = lease.get("spec") or {}
        self._record = _record_of(spec)
        self._record_seen_at = sent
        return True

    def _whole_seconds(self) -> int:
        """The lease duration as the Lease holds it: whole seconds, at least one."""
        return max(1, math.ceil(self.lease_duration))

    def _new_lease(self) -> Manifest:
        now = micro_time(self.now())
        return {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": LEASE,
            "metadata": {"name": self.name, "namespace": self.namespace},
            "spec": {
                "holderIdentity": self.identity,
                "leaseDurationSeconds": self._whole_seconds(),
                "acquireTime": now,
                "renewTime": now,
                "leaseTransitions": 0,
            },
        }

    def _renewed(self, lease: Manifest) -> Manifest:
        """``lease`` held by us from now: a new holder counts a transition and a new acquireTime."""
        spec = dict(lease.get("spec") or {})
        now = micro_time(self.now())
        if spec.get("holderIdentity") != self.identity:
            spec["leaseTransitions"] = int(spec.get("leaseTransitions") or 0) + 1
            spec["acquireTime"] = now
        spec.update(
            holderIdentity=self.identity,
            leaseDurationSeconds=self._whole_seconds(),
            renewTime=now,
        )
        return {**lease, "apiVersion": "coordination.k8s.io/v1", "kind": LEASE, "spec": spec}

    async def _wait_for_change(self, stopping: asyncio.Event) -> None:
        """Until the Lease changes (a renewal, a release), a retry period passes, or we stop.
        The watch ends on the server's side within the retry period too: no request outlives
        the wait in a thread."""
        version = (self._lease or {}).get("metadata", {}).get("resourceVersion")
        period = self.retry_period
        left = None if self._expires_at is None else self._expires_at - self.clock()
        if left is not None and left > 0:  # try again the moment the holder's lease runs out
            period = min(period, left + 0.01)
        deadline = self.clock() + period
        if version and period > 0:
            changed = asyncio.ensure_future(
                self.kube.next_change(LEASE, self.namespace, self.name, version, period)
            )
            stopped = asyncio.ensure_future(stopping.wait())
            try:
                await asyncio.wait(
                    (changed, stopped), timeout=period, return_when="FIRST_COMPLETED"
                )
            finally:
                for waiting in (changed, stopped):
                    waiting.cancel()
                results = await asyncio.gather(changed, stopped, return_exceptions=True)
            if results[0] is True:
                return  # it changed: look now
        # No watch, or it failed (the API server is away): the rest of the retry period.
        await _sleep_or_stop(stopping, deadline - self.clock())

    # --- the end --------------------------------------------------------------------------------

    async def release(self) -> None:
        """Give the Lease up if we hold it (best effort: it expires anyway)."""
        if not self.leading.is_set() or self._lease is None:
            return
        self._lead(False)
        self._renewed_at = None
        spec = {
            **(self._lease.get("spec") or {}),
            "holderIdentity": "",
            "leaseDurationSeconds": 1,
            "renewTime": micro_time(self.now()),
        }
        try:
            await asyncio.wait_for(self.kube.replace({**self._lease, "spec": spec}), 5)
        except (TimeoutError, ApiError) as error:
            get_logger().warning("could not release the lease", lease=self.name, error=str(error))
            return
        get_logger().info("released the lease", lease=f"{self.namespace}/{self.name}")


async def _sleep_or_stop(stopping: asyncio.Event, seconds: float) -> bool:
    """Sleep ``seconds``; True if ``stopping`` was set meanwhile."""
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(stopping.wait(), max(0.0, seconds))
    return stopping.is_set()


async def wait_for_earlier_peers(
    kube: Kube,
    name: str,
    namespaces: list[str],
    stopping: asyncio.Event,
    *,
    poll: float = 2.0,
    now: Callable[[], datetime] = lambda: datetime.now(UTC),
) -> None:
    """Until no replica of an earlier release (Kopf peering, peering object ``name``: one per
    watched namespace, or one for the cluster) is alive. No peering object, no Kopf CRD, or no
    permission to read it: nothing to wait for."""
    objects = [("KopfPeering", ns) for ns in namespaces] or [("ClusterKopfPeering", "")]
    told = False
    while not stopping.is_set():
        alive: list[str] = []
        for kind, namespace in objects:
            try:
                peering = await kube.get(kind, namespace, name)
            except ApiError as error:
                if not (error.forbidden or error.not_found):
                    raise
                peering = None
            for peer, record in ((peering or {}).get("status") or {}).items():
                if isinstance(record, dict) and _peer_alive(record, now()):
                    alive.append(peer)
        if not alive:
            return
        if not told:
            get_logger().info(
                "waiting for the replicas of an earlier release (Kopf peering) to stop",
                peering=name,
                peers=sorted(alive),
            )
            told = True
        await _sleep_or_stop(stopping, poll)


def _peer_alive(record: Manifest, now: datetime) -> bool:
    try:
        seen = datetime.fromisoformat(str(record["lastseen"]))
        lifetime = float(record.get("lifetime", 60))
    except (KeyError, ValueError):
        return False
    if seen.tzinfo is None:
        seen = seen.replace(tzinfo=UTC)
    return (now - seen).total_seconds() < lifetime


def _record_of(spec: Manifest) -> tuple[Any, ...]:
    """What a change of the Lease's record is judged by (client-go's observed record)."""
    return tuple(
        spec.get(key)
        for key in ("holderIdentity", "leaseDurationSeconds", "renewTime", "leaseTransitions")
    )
