"""The namesakes' watches (namesakes.py) against the real kube-apiserver: a metadata-only list
and watch that sees every object the children's label-selected watches miss, and nothing else."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable

from kubernetes import client

from database_operator.api.models import SHARD_LABEL
from database_operator.config import Settings
from database_operator.desired import MANAGED_BY
from database_operator.kube.api import Kube
from database_operator.namesakes import Namesakes
from database_operator.ownership import MANAGED_BY_LABEL
from database_operator.selection import unselected_child_selectors
from tests.aio import until
from tests.cluster import Cluster


def service(name: str, **labels: str) -> client.V1Service:
    return client.V1Service(
        metadata=client.V1ObjectMeta(name=name, labels=labels or None),
        spec=client.V1ServiceSpec(ports=[client.V1ServicePort(port=80)]),
    )


async def following(
    cluster: Cluster,
    namespace: str,
    settings: Settings,
    test: Callable[[Namesakes], Awaitable[None]],
) -> float:
    """Run ``test`` while the namesakes of ``namespace`` are followed; how long the watches
    took to stop once cancelled."""
    namesakes = Namesakes([namespace], unselected_child_selectors(settings))
    task = asyncio.create_task(namesakes.follow(Kube(cluster.api)))
    try:
        await until(
            lambda: all(held.watch.following for held in namesakes.watches), 10, "the listings"
        )
        await test(namesakes)
    finally:
        task.cancel()
        started = time.monotonic()
        await asyncio.gather(task, return_exceptions=True)
    return time.monotonic() - started


def test_a_users_object_takes_its_name_and_ours_do_not(cluster: Cluster, namespace: str) -> None:
    core = cluster.core
    core.create_namespaced_service(namespace, service("listed"))  # there before the listing

    async def test(namesakes: Namesakes) -> None:
        assert not namesakes.free("Service", namespace, "listed")
        assert namesakes.free("Service", namespace, "web")
        assert namesakes.free("Deployment", namespace, "web")
        core.create_namespaced_service(namespace, service("web"))
        await until(lambda: not namesakes.free("Service", namespace, "web"), 10, "the user's")
        assert namesakes.free("Deployment", namespace, "web")  # another kind
        # Ours is not delivered: the one created after it is, so it would have been by then.
        core.create_namespaced_service(namespace, service("ours", **{MANAGED_BY_LABEL: MANAGED_BY}))
        core.create_namespaced_service(namespace, service("after"))
        await until(lambda: not namesakes.free("Service", namespace, "after"), 10, "the next one")
        assert namesakes.free("Service", namespace, "ours")
        core.delete_namespaced_service("web", namespace)
        await until(lambda: namesakes.free("Service", namespace, "web"), 10, "the delete")

    stopped_in = asyncio.run(following(cluster, namespace, Settings(), test))
    assert stopped_in < 2  # the watch threads' streams are closed, not waited out


def test_a_shard_sees_another_shards_children_as_namesakes(
    cluster: Cluster, namespace: str
) -> None:
    core = cluster.core
    mine = {MANAGED_BY_LABEL: MANAGED_BY, SHARD_LABEL: "s1"}
    theirs = {MANAGED_BY_LABEL: MANAGED_BY, SHARD_LABEL: "s2"}

    async def test(namesakes: Namesakes) -> None:
        core.create_namespaced_service(namespace, service("mine", **mine))
        core.create_namespaced_service(namespace, service("theirs", **theirs))
        core.create_namespaced_service(namespace, service("users"))
        await until(lambda: not namesakes.free("Service", namespace, "theirs"), 10, "theirs")
        await until(lambda: not namesakes.free("Service", namespace, "users"), 10, "the user's")
        assert namesakes.free("Service", namespace, "mine")

    asyncio.run(following(cluster, namespace, Settings(shard="s1"), test))


def test_a_watch_ends_when_the_server_ends_it_with_the_version_to_go_on_from(
    cluster: Cluster, namespace: str
) -> None:
    heard: list[tuple[str, str]] = []

    async def watch() -> tuple[str, str]:
        kube = Kube(cluster.api)
        _, listed = await kube.list_metadata("Service", namespace, "a!=b")
        cluster.core.create_namespaced_service(namespace, service("web"))
        version = await kube.watch(
            "Service",
            namespace,
            "a!=b",
            listed,
            deliver=lambda kind, obj: heard.append((kind, obj["metadata"]["name"])),
            timeout_s=2,
        )
        return listed, version

    listed, version = asyncio.run(watch())
    assert heard == [("ADDED", "web")]
    assert int(version) > int(listed)
