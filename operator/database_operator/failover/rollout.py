"""Rollouts of instances that fail over: replicas first, one at a time, the primary last,
through a switchover — pure, from the Deployments as they are and wanted and the instances as
last seen.

A change of the pod template (a version, a setting, the credentials) would otherwise reach
every instance's Deployment in one reconcile, and every pod would restart at once: the primary
with them (CloudNativePG #7888 is that, for a primary terminated before the switchover). Here
one instance's Deployment is written at a time, and only while every other instance is well
(its pod ready and its engine confirming its role): first the replicas; then, when only the
primary's is left, a switchover to a replica that runs the new template; the old primary, now
a replica, is written last. With a single instance there is nothing to switch to: it is
written as it is.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from database_operator.api.models import DatabaseStatus, InstanceRole
from database_operator.desired.common import APPLIED_DIGEST_ANNOTATION
from database_operator.manifest import Manifest


@dataclass
class Rollout:
    """Which instances' Deployments wait, which one is written now, and whether the primary
    should move first."""

    held: list[str] = field(default_factory=list)
    #: The instance whose new Deployment is written now (None: none).
    next: str | None = None
    #: Only the primary's is left: switch over to a replica that runs the new template.
    switchover: bool = False


def plan(
    wanted: Mapping[str, Manifest],
    existing: Mapping[str, Manifest | None],
    status: DatabaseStatus,
) -> Rollout:
    """``wanted``: each instance's desired Deployment (stamped with its digest); ``existing``:
    the Deployment as it is (None: none yet, written at once); ``status``: the instances as
    last seen."""
    outdated = sorted(
        name
        for name, deployment in wanted.items()
        if (found := existing.get(name)) is not None
        and _digest(found) != _digest(deployment)
        # Hibernating, or waking from it: no pod serves, nothing to roll around.
        and _pods(found) > 0
        and _pods(deployment) > 0
    )
    if not outdated:
        return Rollout()
    # Well: its Deployment has rolled out its pod and it is ready (the Deployment's word is the
    # fresh one: the status is the last look's, from before a write just made), and its engine
    # confirms its role, a replica streaming.
    well = {
        instance.name
        for instance in status.instances or ()
        if instance.ready
        and (
            instance.role is InstanceRole.PRIMARY
            or (instance.role is InstanceRole.REPLICA and instance.streaming is not False)
        )
        and _rolled_out(existing.get(instance.name))
    }
    primary = status.current_primary
    unsettled = [name for name in wanted if name not in outdated and name not in well]
    if primary is None or unsettled:
        return Rollout(held=outdated)  # wait for every instance to be well
    replicas = [name for name in outdated if name != primary]
    if replicas:
        first, *rest = replicas
        return Rollout(held=[*rest, *([primary] if primary in outdated else [])], next=first)
    standbys = [name for name in well if name != primary]
    if not standbys:
        return Rollout(next=primary)  # one instance: nothing to switch to
    return Rollout(held=[primary], switchover=True)


def _rolled_out(deployment: Manifest | None) -> bool:
    """Its controller has seen its last change, and its pods are all new and ready."""
    if deployment is None:
        return False
    status = deployment.get("status") or {}
    wanted = _pods(deployment)
    return (
        int(status.get("observedGeneration") or 0)
        >= int(deployment["metadata"].get("generation") or 0)
        and int(status.get("updatedReplicas") or 0) == wanted
        and int(status.get("readyReplicas") or 0) == wanted
    )


def _pods(deployment: Manifest) -> int:
    return int(deployment.get("spec", {}).get("replicas") or 0)


def _digest(deployment: Manifest) -> str | None:
    return (deployment["metadata"].get("annotations") or {}).get(APPLIED_DIGEST_ANNOTATION)
