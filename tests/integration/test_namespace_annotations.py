"""The namespaces' watch of the admission quota (webhooks/namespaces.py) against the real
kube-apiserver: it follows the annotations without a read per request, and with the RBAC the
chart grants an operator of named namespaces (narrowed to them by resourceNames) it lists and
watches each by name, and nothing else."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from kubernetes import config

from database_operator import rbac
from database_operator.api.models import MAX_DATABASES
from database_operator.kube.api import Kube
from database_operator.kube.errors import ApiError
from database_operator.webhooks.namespaces import NamespaceAnnotations
from tests.aio import until
from tests.cluster import Cluster
from tests.integration.helm import service_account_kubeconfig


def annotate(cluster: Cluster, namespace: str, value: str | None) -> None:
    cluster.core.patch_namespace(namespace, {"metadata": {"annotations": {MAX_DATABASES: value}}})


async def following(
    kube: Kube, namespaces: NamespaceAnnotations, test: Callable[[], Awaitable[None]]
) -> None:
    task = asyncio.create_task(namespaces.follow(kube))
    try:
        await until(
            lambda: all(held.watch.following for held in namespaces.watches), 10, "the listings"
        )
        await test()
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


def test_every_namespaces_annotations_follow_their_changes(
    cluster: Cluster, namespace: str
) -> None:
    annotate(cluster, namespace, "3")  # there before the listing
    namespaces = NamespaceAnnotations()
    errors: list[str] = []

    async def test() -> None:
        assert (namespaces.of(namespace) or {}).get(MAX_DATABASES) == "3"
        assert namespaces.of("default") is not None  # every namespace is held
        annotate(cluster, namespace, "5")
        await until(
            lambda: (namespaces.of(namespace) or {}).get(MAX_DATABASES) == "5", 10, "the change"
        )
        annotate(cluster, namespace, None)
        await until(lambda: namespaces.of(namespace) == {}, 10, "the annotation's removal")
        assert namespaces.of("no-such-namespace") is None  # unknown: to be read

    kube = Kube(cluster.api, on_error=lambda error: errors.append(str(error)))
    asyncio.run(following(kube, namespaces, test))
    assert errors == []


@contextmanager
def account_with(
    cluster: Cluster, namespace: str, account: str, rules: list[Any], path: Path
) -> Iterator[Path]:
    """A ServiceAccount of ``namespace`` bound to a ClusterRole of ``rules``; its kubeconfig
    (a token, as a pod has)."""
    name = f"{account}-{namespace}"
    role = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRole",
        "metadata": {"name": name},
        "rules": rules,
    }
    binding = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRoleBinding",
        "metadata": {"name": name},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name},
        "subjects": [{"kind": "ServiceAccount", "name": account, "namespace": namespace}],
    }
    cluster.kubectl("create", "serviceaccount", account, "-n", namespace)
    for manifest in (role, binding):
        cluster.kubectl("apply", "-f", "-", input=json.dumps(manifest))
    try:
        yield service_account_kubeconfig(cluster, namespace, account, path)
    finally:
        cluster.kubectl("delete", "clusterrolebinding,clusterrole", name, "--ignore-not-found")


def test_named_namespaces_are_watched_by_name_within_their_narrowed_rbac(
    cluster: Cluster, namespace: str, tmp_path: Path
) -> None:
    """The webhooks' ClusterRole of an operator watching ``namespace`` only (self-managed
    certificates off: the namespaces' rule alone)."""
    annotate(cluster, namespace, "2")
    namespaces = NamespaceAnnotations([namespace])
    assert [held.watch.fields for held in namespaces.watches] == [f"metadata.name={namespace}"]
    rules = rbac.webhook_cluster_rules(watched=[namespace], self_managed=False)
    errors: list[int] = []

    async def test(kube: Kube) -> None:
        assert (namespaces.of(namespace) or {}).get(MAX_DATABASES) == "2"
        annotate(cluster, namespace, "4")
        await until(
            lambda: (namespaces.of(namespace) or {}).get(MAX_DATABASES) == "4", 10, "the change"
        )
        assert namespaces.of("default") is None  # not covered: read as before
        with pytest.raises(ApiError) as refused:  # the narrowed rule lists only by name
            await kube.list_metadata("Namespace", None)
        assert refused.value.status == 403

    with account_with(cluster, namespace, "webhooks", rules, tmp_path / "sa.conf") as kubeconfig:
        api = config.new_client_from_config(config_file=str(kubeconfig))
        kube = Kube(api, on_error=lambda error: errors.append(error.status))
        try:
            asyncio.run(following(kube, namespaces, lambda: test(kube)))
        finally:
            api.close()
    assert errors == [403]  # the cluster-wide listing above, and nothing of the watch


def test_without_list_and_watch_the_quota_reads_each_namespace(
    cluster: Cluster, namespace: str, tmp_path: Path
) -> None:
    """Bring-your-own RBAC of the release before (namespaces `get` only): one warning, no
    retries, and every namespace is read as before."""
    rules = [{"apiGroups": [""], "resources": ["namespaces"], "verbs": ["get"]}]
    namespaces = NamespaceAnnotations()
    with account_with(cluster, namespace, "get-only", rules, tmp_path / "sa.conf") as kubeconfig:
        api = config.new_client_from_config(config_file=str(kubeconfig))

        async def follow() -> None:
            await asyncio.wait_for(namespaces.follow(Kube(api)), 10)  # ends: nothing to follow

        try:
            asyncio.run(follow())
        finally:
            api.close()
    assert namespaces.of(namespace) is None
    assert not namespaces.watches[0].watch.following
