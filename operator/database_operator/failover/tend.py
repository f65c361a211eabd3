"""One look at a Database's instances, and the steps `decide` asks for, carried out.

Run by each reconcile of a Database with spec.failover (after its credentials, before its
Deployments, so that the ConfigMap the pods read exists when they start). It reads the target
primary from the ConfigMap ``<name>-instances`` (made here once, naming ``<name>-1``), lists the
instances' pods, asks each live pod's engine what it is (probe.py), and then, in decide.py's
order: names a new target, fences, promotes, labels. Each step is an Event. The reconcile looks
again within `LOOK_EVERY_S`, or at once while a failover is under way.
"""

from __future__ import annotations

import asyncio
import base64
from dataclasses import dataclass
from datetime import datetime

from database_operator import desired
from database_operator.api.models import (
    GROUP,
    INSTANCE_LABEL,
    ROLE_LABEL,
    SWITCHOVER_ANNOTATION,
    Database,
    Failover,
)
from database_operator.clock import Clock
from database_operator.desired.common import TARGET_PRIMARY_KEY, engine_facts, object_meta
from database_operator.events import EventSink
from database_operator.failover import probe
from database_operator.failover.decide import (
    ANY,
    Memory,
    PodFacts,
    Seen,
    Target,
    decide,
    statuses,
)
from database_operator.kube.api import KubeApi
from database_operator.kube.errors import ApiError
from database_operator.logs import get_logger
from database_operator.manifest import Manifest
from database_operator.ownership import controller_of, is_ours
from database_operator.reasons import Problem, Reason
from database_operator.status import InstancesSeen

#: Seconds between two looks at the instances of a Database whose primary is well: how long a
#: lost primary may go unseen, before spec.failover.delay starts to count.
LOOK_EVERY_S = 2.0
#: Seconds between two looks while a failover is under way.
LOOK_SOON_S = 0.5
#: A fenced pod's grace period in a failover: the primary is lost already, and a frozen one
#: is killed when it ends.
FENCE_GRACE_S = 1
#: ... in a switchover: the old primary's clean stop, which sends its standbys every write it
#: acknowledged (PostgreSQL's fast shutdown, Redis's shutdown waiting for its replicas).
CLEAN_STOP_GRACE_S = 15
#: The ConfigMap's annotation: when its target primary was named.
SINCE_ANNOTATION = f"{GROUP}/primary-since"
#: The ConfigMap's annotation: the last switchover request (the Database's annotation's value)
#: answered, so that each is answered once.
ANSWERED_ANNOTATION = f"{GROUP}/switchover-answered"


@dataclass
class Tended:
    """What one look found and did."""

    seen: InstancesSeen
    #: Seconds until the next look.
    look_again: float
    #: A failover completed: seconds from the loss of the primary to the promotion.
    failed_over: float | None = None
    #: The ConfigMap is not the Database's own: nothing was done.
    failure: Problem | None = None


async def tend(
    kube: KubeApi,
    db: Database,
    credentials: Manifest,
    memory: Memory,
    *,
    events: EventSink,
    clock: Clock,
    rollout_switchover: bool = False,
) -> Tended:
    """Look at the instances of ``db`` and take the next steps (see the module docstring).
    ``credentials``: the data of its credentials Secret (base64, as the API has it);
    ``rollout_switchover``: a rollout waits for the primary to move to an updated replica."""
    now = clock()
    config = await _config(kube, db, now)
    if config is None:
        name = desired.instances_config_name(db)
        return Tended(
            InstancesSeen(None, None, []),
            LOOK_EVERY_S,
            failure=Problem(
                Reason.CHILD_NAME_CONFLICT,
                f"ConfigMap {name!r} exists and is not this Database's: rename or delete it",
            ),
        )
    target = _target(db, config)
    login = probe.Credentials(_decoded(credentials, "username"), _decoded(credentials, "password"))
    seen = await _look(kube, db, login)
    # After a restart of the operator: a primary served before if the status named one.
    memory.confirmed = memory.confirmed or db.status.current_primary is not None
    request = _switchover(db, config)
    wanted = request.split()[0] if request else (ANY if rollout_switchover else None)
    plan = decide(seen, target, memory, now, _failover(db), switchover=wanted)
    failed_over = None

    if plan.target is not None or plan.answered:
        answered = request if plan.answered and request else None
        config = await _name_target(kube, db, plan.target, now, answered)
        target = _target(db, config)
    for pod in plan.fence:
        await _label(kube, db, pod, None)
        grace = FENCE_GRACE_S if memory.loss_began is not None else CLEAN_STOP_GRACE_S
        await kube.delete("Pod", db.namespace, pod.name, pod.uid, grace_seconds=grace)
    for kind, reason, message in plan.events:
        events(kind, reason, message)
    if plan.promote is not None:
        promoted = next(i for i in seen if i.name == plan.promote)
        if await _promote(kube, db, promoted, seen, login):
            plan.labels.pop(promoted.pod.name if promoted.pod else "", None)
            began, memory.loss_began = memory.loss_began, None
            took = (clock() - (began or target.since)).total_seconds()
            failed_over = took if began is not None else None
            events(
                "Normal",
                "Promoted",
                f"{promoted.name} is the primary, {took:.1f}s after "
                + ("its predecessor was lost" if began else "it was named"),
            )
            seen = await _look(kube, db, login)
            plan.labels = decide(seen, target, memory, clock(), _failover(db)).labels
    pods = {pod.name: pod for instance in seen for pod in instance.pods}
    for name, role in plan.labels.items():
        if name in pods:
            await _label(kube, db, pods[name], role)

    confirmed = next((i for i in seen if i.primary and i.name == target.primary), None)
    if confirmed is not None:
        await _zero_loss(db, confirmed, login, events)
    return Tended(
        InstancesSeen(
            confirmed.name if confirmed else None, target.primary, statuses(seen, memory)
        ),
        LOOK_SOON_S if plan.busy else LOOK_EVERY_S,
        failed_over,
    )


async def _promote(
    kube: KubeApi, db: Database, promoted: Seen, seen: list[Seen], login: probe.Credentials
) -> bool:
    """Promote ``promoted``, label it, and point the other standbys at it afresh; whether the
    engine took it (if not, the next look tries again)."""
    pod = promoted.pod
    assert pod is not None and pod.address is not None
    engine, port = db.spec.engine, engine_facts(db).port
    if not await probe.promote(engine, pod.address, port, login):
        get_logger().warning(
            "promotion not confirmed: tried again at the next look",
            namespace=db.namespace,
            name=db.name,
            instance=promoted.name,
            pod=pod.name,
        )
        return False
    if _failover(db).synchronous:  # before any client reaches it
        await probe.set_synchronous(engine, pod.address, port, login, on=True)
    await _label(kube, db, pod, "primary")
    for other in seen:
        if other is not promoted and other.standby and other.pod and other.pod.address:
            await probe.follow_again(engine, other.pod.address, port, login)
    return True


async def _zero_loss(
    db: Database, primary: Seen, login: probe.Credentials, events: EventSink
) -> None:
    """The primary's zero-loss mode as spec.failover.synchronous says (PostgreSQL: applied by a
    reload, so turning it on or off restarts nothing)."""
    wanted, engine = _failover(db).synchronous, primary.engine
    if primary.pod is None or primary.pod.address is None or engine is None:
        return
    if engine.synchronous is None or engine.synchronous == wanted:
        return
    port = engine_facts(db).port
    if await probe.set_synchronous(db.spec.engine, primary.pod.address, port, login, on=wanted):
        state = "on: a commit waits for a replica" if wanted else "off"
        events("Normal", "ZeroLossMode", f"zero-loss mode {state} on {primary.name}")


def _failover(db: Database) -> Failover:
    assert db.spec.failover is not None
    return db.spec.failover


def _decoded(data: Manifest, key: str) -> str:
    return base64.b64decode(str(data.get(key) or "")).decode()


def _target(db: Database, config: Manifest) -> Target:
    data = config.get("data") or {}
    since = (config["metadata"].get("annotations") or {}).get(SINCE_ANNOTATION)
    created = str(config["metadata"].get("creationTimestamp"))
    return Target(
        primary=str(data.get(TARGET_PRIMARY_KEY) or desired.instance_name(db, 1)),
        since=datetime.fromisoformat(since or created),
    )


async def _config(kube: KubeApi, db: Database, now: datetime) -> Manifest | None:
    """The instances' ConfigMap, made (naming the first instance) if it does not exist; None
    if one by its name is not the Database's own."""
    name = desired.instances_config_name(db)
    found = await kube.get("ConfigMap", db.namespace, name)
    if found is None:
        made = {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": object_meta(db, name, desired.controlled_owner_references(db))
            | {"annotations": {SINCE_ANNOTATION: now.isoformat()}},
            "data": {TARGET_PRIMARY_KEY: desired.instance_name(db, 1)},
        }
        found = await kube.create(made, exist_ok=True) or await kube.get(
            "ConfigMap", db.namespace, name
        )
    if found is None or not is_ours(found, db):
        return None
    return found


def _switchover(db: Database, config: Manifest) -> str | None:
    """The Database's switchover request, if it is not answered yet."""
    asked = (db.metadata.get("annotations") or {}).get(SWITCHOVER_ANNOTATION, "").strip()
    answered = (config["metadata"].get("annotations") or {}).get(ANSWERED_ANNOTATION)
    return asked if asked and asked != answered else None


async def _name_target(
    kube: KubeApi, db: Database, primary: str | None, now: datetime, answered: str | None
) -> Manifest:
    """Name ``primary`` the target: from now on every instance that starts reads it. And/or
    note the switchover request ``answered``."""
    annotations = {ANSWERED_ANNOTATION: answered} if answered else {}
    patch: Manifest = {"metadata": {"annotations": annotations}}
    if primary is not None:
        annotations[SINCE_ANNOTATION] = now.isoformat()
        patch["data"] = {TARGET_PRIMARY_KEY: primary}
    return await kube.merge_patch(
        "ConfigMap", db.namespace, desired.instances_config_name(db), patch
    )


async def _look(kube: KubeApi, db: Database, login: probe.Credentials) -> list[Seen]:
    """Every instance the spec asks for, and any other whose pods are found (an instance scaled
    away may still run), with what its live pod's engine answers."""
    selector = ",".join(
        [f"{key}={value}" for key, value in desired.selector_labels(db).items()] + [INSTANCE_LABEL]
    )
    pods: dict[str, list[PodFacts]] = {name: [] for name in desired.instance_names(db)}
    async for page in kube.list_pages("Pod", db.namespace, selector):
        for pod in page:
            facts = PodFacts.of(pod)
            if _made_for(pod, facts.instance):
                pods.setdefault(facts.instance, []).append(facts)
    port = engine_facts(db).port
    instances = [Seen(name, tuple(found)) for name, found in pods.items()]

    async def asked(instance: Seen) -> Seen:
        pod = instance.pod
        if pod is None or pod.address is None:
            return instance
        engine = await probe.ask(db.spec.engine, pod.address, port, login)
        return Seen(instance.name, instance.pods, engine)

    return list(await asyncio.gather(*(asked(instance) for instance in instances)))


def _made_for(pod: Manifest, instance: str) -> bool:
    """Whether ``pod`` is one the instance's Deployment made (its controller a ReplicaSet
    ``<instance>-<hash>``): a pod of anyone else's that carries the labels is never labelled
    or deleted."""
    controller = controller_of(pod) or {}
    return controller.get("kind") == "ReplicaSet" and str(controller.get("name", "")).startswith(
        f"{instance}-"
    )


async def _label(kube: KubeApi, db: Database, pod: PodFacts, role: str | None) -> None:
    """Set (or remove) a pod's role label; the pod's uid in the patch makes it fail on a
    namesake. A pod gone meanwhile needs no label."""
    patch = {"metadata": {"uid": pod.uid, "labels": {ROLE_LABEL: role}}}
    try:
        await kube.merge_patch("Pod", db.namespace, pod.name, patch)
    except ApiError as error:
        # Gone, or a namesake: the patch's uid is not the pod's (a conflict, or a 422 refusing
        # a change of the immutable uid).
        if not (error.not_found or error.stale or error.status == 422):
            raise
