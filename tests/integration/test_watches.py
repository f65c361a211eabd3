"""The operator's own list-and-watch (watches.py, ``Kube.watch``) against the real
kube-apiserver: whole objects, selected by label on the server, without managedFields, from
the listing's version on; closed at once when cancelled."""

from __future__ import annotations

import asyncio
import time

from kubernetes import client

from database_operator.kube.api import Kube
from database_operator.manifest import Manifest
from database_operator.watches import Watch
from tests.aio import until
from tests.cluster import Cluster

LABEL = {"app.kubernetes.io/managed-by": "database-operator"}


def test_a_watch_delivers_whole_selected_objects_from_its_listing_on(
    cluster: Cluster, namespace: str
) -> None:
    core = cluster.core
    core.create_namespaced_service(
        namespace,
        client.V1Service(
            metadata=client.V1ObjectMeta(name="before", labels=LABEL),
            spec=client.V1ServiceSpec(ports=[client.V1ServicePort(port=80)]),
        ),
    )
    held: dict[str, Manifest] = {}
    heard: list[tuple[str, str]] = []

    def relisted(listed: list[Manifest], at: str) -> None:
        held.clear()
        held.update((obj["metadata"]["name"], obj) for obj in listed)

    def hear(event_type: str, obj: Manifest) -> None:
        heard.append((event_type, obj["metadata"]["name"]))
        if event_type == "DELETED":
            held.pop(obj["metadata"]["name"], None)
        else:
            held[obj["metadata"]["name"]] = obj

    async def test() -> float:
        watch = Watch("Service", namespace, ",".join(f"{k}={v}" for k, v in LABEL.items()))
        task = asyncio.create_task(watch.follow(Kube(cluster.api), relisted, hear))
        try:
            await until(lambda: watch.following, 10, "the listing")
            assert set(held) == {"before"}
            for name, labels in (("ours", LABEL), ("users", None)):
                core.create_namespaced_service(
                    namespace,
                    client.V1Service(
                        metadata=client.V1ObjectMeta(name=name, labels=labels),
                        spec=client.V1ServiceSpec(ports=[client.V1ServicePort(port=80)]),
                    ),
                )
            await until(lambda: "ours" in held, 10, "ours")
            core.patch_namespaced_service(
                "ours", namespace, {"metadata": {"annotations": {"a": "b"}}}
            )
            await until(lambda: "a" in held["ours"]["metadata"].get("annotations", {}), 10, "patch")
            core.delete_namespaced_service("before", namespace)
            await until(lambda: "before" not in held, 10, "the delete")
        finally:
            task.cancel()
            started = time.monotonic()
            await asyncio.gather(task, return_exceptions=True)
        return time.monotonic() - started

    stopped_in = asyncio.run(test())
    assert heard == [("ADDED", "ours"), ("MODIFIED", "ours"), ("DELETED", "before")]
    ours = held["ours"]
    assert ours["kind"] == "Service" and ours["apiVersion"] == "v1"
    assert ours["spec"]["ports"][0]["port"] == 80  # the whole object
    assert "managedFields" not in ours["metadata"]
    assert stopped_in < 2  # the stream is closed, not waited out
