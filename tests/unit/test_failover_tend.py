"""failover/tend.py: which pods it may label or fence."""

from __future__ import annotations

from typing import Any

from database_operator.failover.tend import _made_for


def pod(controller: dict[str, Any] | None) -> dict[str, Any]:
    refs = [{"controller": True, **controller}] if controller else []
    return {"metadata": {"name": "p", "ownerReferences": refs}}


def test_only_a_pod_of_the_instances_own_replica_set_is_its_own() -> None:
    assert _made_for(pod({"kind": "ReplicaSet", "name": "shop-1-7b7c466c74"}), "shop-1")
    assert not _made_for(pod({"kind": "ReplicaSet", "name": "shop-10-7b7c466c74"}), "shop-1")
    assert not _made_for(pod({"kind": "StatefulSet", "name": "shop-1-x"}), "shop-1")
    assert not _made_for(pod(None), "shop-1")  # a bare pod someone labelled like ours
