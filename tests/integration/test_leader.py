"""Leader election (leader.py) on a real Lease in kube-apiserver, candidates in this process.

The semantics are client-go's: at most one holder, the Kubernetes fields kept as `kubectl` and
alerts read them, a release taken at once, and a holder that cannot renew stops (its fence shuts)
before its lease can expire for anyone else. The operators' side of it — kill -9, SIGTERM,
simultaneous starts, an API server outage — is tests/integration/test_ha.py.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from database_operator.kube.api import Kube
from database_operator.leader import LeaderElection, wait_for_earlier_peers
from tests.aio import synchronously, until
from tests.cluster import Cluster, wait_for
from tests.faults import Fault, FaultProxy, Request

#: Short, so the tests take seconds (the operator's defaults are 15, 10 and 2).
LEASE_S, RENEW_S, RETRY_S = 3.0, 2.0, 0.5
RACES = 10


def lease(cluster: Cluster, namespace: str, name: str) -> dict[str, Any]:
    """The Lease's spec, its times as datetimes."""
    spec = client.CoordinationV1Api(cluster.api).read_namespaced_lease(name, namespace).spec
    return {
        "holderIdentity": spec.holder_identity,
        "leaseDurationSeconds": spec.lease_duration_seconds,
        "leaseTransitions": spec.lease_transitions,
        "acquireTime": spec.acquire_time,
        "renewTime": spec.renew_time,
    }


def candidate(kube: Kube, namespace: str, name: str, identity: str) -> LeaderElection:
    return LeaderElection(
        kube,
        namespace=namespace,
        name=name,
        identity=identity,
        lease_duration=LEASE_S,
        renew_deadline=RENEW_S,
        retry_period=RETRY_S,
    )


@asynccontextmanager
async def campaigning(*candidates: LeaderElection) -> AsyncIterator[asyncio.Event]:
    """The candidates campaign until the block ends (then they stop, releasing the Lease)."""
    stopping = asyncio.Event()
    tasks = [asyncio.create_task(each.run(stopping)) for each in candidates]
    try:
        yield stopping
    finally:
        stopping.set()
        await asyncio.gather(*tasks)


@pytest.fixture
def kube(cluster: Cluster) -> Kube:
    return Kube(cluster.api)  # shares the session's client: not closed here


def test_of_candidates_started_together_exactly_one_leads_every_time(
    cluster: Cluster, namespace: str, kube: Kube
) -> None:
    async def race(name: str) -> str:
        candidates = [candidate(kube, namespace, name, f"c{i}") for i in range(3)]
        async with campaigning(*candidates):
            await until(lambda: any(c.leading.is_set() for c in candidates), 10, "a leader")
            # Watch the race settle over several renewals: never two at once.
            for _ in range(int(3 * RETRY_S / 0.02)):
                leaders = [c.identity for c in candidates if c.leading.is_set()]
                writers = [c.identity for c in candidates if c.may_write()]
                assert len(leaders) == 1, leaders
                assert writers == leaders
                await asyncio.sleep(0.02)
            return leaders[0]

    for round_ in range(RACES):
        name = f"race-{round_}"
        if round_ % 2:  # half the rounds race for an existing, released Lease
            asyncio.run(race(name))
        leader = asyncio.run(race(name))
        assert not lease(cluster, namespace, name)["holderIdentity"]  # released on stop
        print(f"round {round_}: {leader} led")


def test_the_lease_says_who_holds_it_since_when_and_how_often_it_changed_hands(
    cluster: Cluster, namespace: str, kube: Kube
) -> None:
    @synchronously
    async def scenario() -> None:
        first = candidate(kube, namespace, "fields", "first")
        second = candidate(kube, namespace, "fields", "second")
        async with campaigning(first) as stopping_first:
            await until(first.leading.is_set, 10, "the first to lead")
            spec = lease(cluster, namespace, "fields")
            assert spec["holderIdentity"] == "first"
            assert spec["leaseDurationSeconds"] == LEASE_S
            assert spec["leaseTransitions"] == 0
            acquired, renewed = spec["acquireTime"], spec["renewTime"]
            await asyncio.sleep(2 * RETRY_S + 0.2)
            spec = lease(cluster, namespace, "fields")
            assert spec["acquireTime"] == acquired
            assert spec["renewTime"] > renewed
            async with campaigning(second):
                await asyncio.sleep(RETRY_S)
                assert not second.leading.is_set()
                stopping_first.set()  # the first stops: it releases; the second takes it
                await until(second.leading.is_set, 5, "the second to lead")
                spec = lease(cluster, namespace, "fields")
                assert spec["holderIdentity"] == "second"
                assert spec["leaseTransitions"] == 1
                assert spec["acquireTime"] > acquired

    scenario()


def test_a_released_lease_is_taken_within_a_second(
    cluster: Cluster, namespace: str, kube: Kube
) -> None:
    async def scenario() -> float:
        leader = candidate(kube, namespace, "handover", "leader")
        # The operator's own retry period: the standby must not wait for its next try.
        standby = LeaderElection(kube, namespace, "handover", "standby", retry_period=2.0)
        # The standby starts once the leader leads: started together, either may win.
        async with campaigning(leader) as stopping_leader:
            await until(leader.leading.is_set, 10, "the leader")
            async with campaigning(standby):
                await asyncio.sleep(2.5)  # the standby is between tries, watching
                assert not standby.leading.is_set()
                stopping_leader.set()
                took = await until(standby.leading.is_set, 5, "the standby to take over")
        return took

    took = asyncio.run(scenario())
    print(f"a released Lease was taken in {took:.2f} s (retry period 2 s)")
    assert took < 1.0


def test_a_leader_cut_off_from_the_api_server_stops_before_its_lease_can_expire(
    cluster: Cluster, namespace: str, kube: Kube, tmp_path: Path
) -> None:
    cut = {"on": False}

    def partition(request: Request) -> Fault | None:
        return Fault(0) if cut["on"] else None

    with FaultProxy(cluster.plane, tmp_path, [partition]) as proxy:
        configuration = client.Configuration(host=f"http://127.0.0.1:{proxy.port}")
        behind_proxy = Kube(client.ApiClient(configuration))

        async def scenario() -> tuple[float, float]:
            leader = candidate(behind_proxy, namespace, "partition", "cut-off")
            other = candidate(kube, namespace, "partition", "other")
            seen: list[tuple[str, bool, float]] = []

            def recorder(who: str) -> Callable[[bool], None]:
                return lambda leading: seen.append((who, leading, time.monotonic()))

            for each in (leader, other):
                each.on_change = recorder(each.identity)
            async with campaigning(leader):
                await until(leader.leading.is_set, 10, "the leader")
                async with campaigning(other):
                    await asyncio.sleep(RETRY_S)
                    cut["on"] = True
                    started = time.monotonic()
                    await until(lambda: not leader.may_write(), RENEW_S + 1, "the fence")
                    fenced = time.monotonic() - started
                    await until(other.leading.is_set, LEASE_S + 3 * RETRY_S, "the takeover")
                    took = time.monotonic() - started
                    cut["on"] = False
            stepped_down = next(at for who, leading, at in seen if who == "cut-off" and not leading)
            took_over = next(at for who, leading, at in seen if who == "other" and leading)
            assert stepped_down < took_over, seen
            return fenced, took

        fenced, took = asyncio.run(scenario())
        behind_proxy.close()
    print(f"cut off: fenced after {fenced:.2f} s, taken over after {took:.2f} s")
    assert fenced <= RENEW_S + 0.2
    assert took >= LEASE_S - RETRY_S - 0.2  # not before the lease could have expired


def test_a_candidate_never_takes_a_lease_held_by_another_within_its_duration(
    cluster: Cluster, namespace: str, kube: Kube
) -> None:
    """Another holder (another operator, or a crashed one) renewed it: the lease must run out,
    on this candidate's own clock, before it is taken."""
    spec = {
        "holderIdentity": "crashed",
        "leaseDurationSeconds": int(LEASE_S),
        "renewTime": "2020-01-01T00:00:00.000000Z",  # long ago by the clock: ignored
        "acquireTime": "2020-01-01T00:00:00.000000Z",
        "leaseTransitions": 4,
    }
    client.CoordinationV1Api(cluster.api).create_namespaced_lease(
        namespace, {"metadata": {"name": "held"}, "spec": spec}
    )

    async def scenario() -> float:
        waiting = candidate(kube, namespace, "held", f"new-{uuid.uuid4().hex[:4]}")
        async with campaigning(waiting):
            return await until(waiting.leading.is_set, LEASE_S + 3, "the takeover")

    took = asyncio.run(scenario())
    assert LEASE_S - 0.2 <= took <= LEASE_S + 2 * RETRY_S + 0.5
    assert lease(cluster, namespace, "held")["leaseTransitions"] == 5


# --- an upgrade from a release that used Kopf's peering ------------------------------------------

#: Kopf's namespaced peering CRD as releases before leader election installed it.
KOPF_PEERING_CRD = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": "kopfpeerings.kopf.dev"},
    "spec": {
        "scope": "Namespaced",
        "group": "kopf.dev",
        "names": {"kind": "KopfPeering", "plural": "kopfpeerings", "singular": "kopfpeering"},
        "versions": [
            {
                "name": "v1",
                "served": True,
                "storage": True,
                "schema": {
                    "openAPIV3Schema": {
                        "type": "object",
                        "properties": {
                            "status": {
                                "type": "object",
                                "x-kubernetes-preserve-unknown-fields": True,
                            }
                        },
                    }
                },
            }
        ],
    },
}


def test_a_new_replica_campaigns_only_once_the_earlier_releases_peers_are_gone(
    cluster: Cluster, namespace: str, kube: Kube
) -> None:
    """During a rolling upgrade from a peering release the old pods still reconcile: the new
    ones wait until the last old peer's keep-alive has run out (or it said goodbye)."""
    extensions = client.ApiextensionsV1Api(cluster.api)
    extensions.create_custom_resource_definition(KOPF_PEERING_CRD)
    try:
        _earlier_peers_are_waited_for(cluster, namespace, kube)
    finally:  # the session's cluster has no Kopf CRD otherwise (test_packaging checks)
        extensions.delete_custom_resource_definition("kopfpeerings.kopf.dev")
        wait_for(lambda: not _served(extensions), what="the KopfPeering CRD to be gone")


def _served(extensions: client.ApiextensionsV1Api) -> bool:
    try:
        extensions.read_custom_resource_definition("kopfpeerings.kopf.dev")
    except client.ApiException as error:
        if error.status == 404:
            return False
        raise
    return True


def _earlier_peers_are_waited_for(cluster: Cluster, namespace: str, kube: Kube) -> None:
    peering = {
        "apiVersion": "kopf.dev/v1",
        "kind": "KopfPeering",
        "metadata": {"name": "database-operator"},
        "status": {
            "old-pod@host": {
                "priority": 100,
                "lifetime": 3,
                "lastseen": datetime.now(UTC).isoformat(),
            }
        },
    }
    custom = client.CustomObjectsApi(cluster.api)

    def create() -> None:
        custom.create_namespaced_custom_object("kopf.dev", "v1", namespace, "kopfpeerings", peering)

    async def waited(name: str) -> float:
        started = time.monotonic()
        await wait_for_earlier_peers(kube, name, [namespace], asyncio.Event(), poll=0.1)
        return time.monotonic() - started

    assert asyncio.run(waited("database-operator")) < 1.0  # no peering object: no wait
    wait_for(lambda: _created(create), what="the KopfPeering CRD to be served")
    # A keep-alive, as the old replica sends every few seconds: it runs out 3 s from now.
    keepalive = {"old-pod@host": {"lifetime": 3, "lastseen": datetime.now(UTC).isoformat()}}
    custom.patch_namespaced_custom_object(
        "kopf.dev", "v1", namespace, "kopfpeerings", "database-operator", {"status": keepalive}
    )
    seen = time.monotonic()
    took = asyncio.run(waited("database-operator"))
    since_seen = time.monotonic() - seen
    print(f"waited {took:.1f} s for the earlier release's peer (lifetime 3 s)")
    assert 2.7 <= since_seen <= 4.0


def _created(create: Callable[[], None]) -> bool:
    try:
        create()
    except client.ApiException as error:
        if error.status == 404:  # the CRD is not served yet
            return False
        raise
    return True
