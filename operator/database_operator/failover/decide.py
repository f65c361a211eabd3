"""What to do about a Database's instances, from what was seen of them: pure, no I/O, no clock.

The target primary is named in the ConfigMap ``<name>-instances`` (the pods read it at each
start). From the instances' pods and what their engines answered, `decide` returns the next
steps, in the only order that is safe:

1. A primary that is lost (no running pod, or no answer) for longer than spec.failover.delay
   is replaced as target by the most advanced replica, never one further behind the position
   the primary was last seen at than spec.failover.maxLag. Naming it is the point of no return:
   from then on no pod of the old primary can start as a primary.
2. Fence: every pod that may still accept writes and is not the target's — a pod of the old
   primary started before the target changed, or an engine that answers as a primary — loses
   its role label (no Service sends it clients) and is deleted (it comes back as a standby).
3. Promote the target only when no such pod is left: two primaries never accept writes at once.
4. Label the roles the engines confirm: the target primary ``primary``, each standby
   ``replica``; an instance whose engine has not answered keeps what it had (a slow answer
   must not empty a Service), but a lost primary loses its label when the failover begins.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from database_operator.api.models import (
    INSTANCE_LABEL,
    ROLE_LABEL,
    Failover,
    InstanceRole,
    InstanceStatus,
)
from database_operator.failover.answers import EngineState

#: A switchover to whichever standby is most advanced.
ANY = "any"
#: A Kubernetes Event: type, reason, message.
Event = tuple[str, str, str]


@dataclass(frozen=True)
class PodFacts:
    """The facts about one pod of an instance that the decisions need."""

    name: str
    uid: str
    instance: str
    #: Its role label (None: none).
    role: str | None
    address: str | None
    created: datetime
    deleting: bool
    running: bool
    ready: bool

    @property
    def live(self) -> bool:
        """Running and not on its way out: the pod the instance serves from."""
        return self.running and not self.deleting and self.address is not None

    @classmethod
    def of(cls, pod: dict[str, Any]) -> PodFacts:
        meta, status = pod["metadata"], pod.get("status") or {}
        labels = meta.get("labels") or {}
        conditions = {c.get("type"): c.get("status") for c in status.get("conditions") or ()}
        return cls(
            name=str(meta["name"]),
            uid=str(meta.get("uid", "")),
            instance=str(labels.get(INSTANCE_LABEL, "")),
            role=labels.get(ROLE_LABEL),
            address=status.get("podIP"),
            created=datetime.fromisoformat(str(meta["creationTimestamp"])),
            deleting=bool(meta.get("deletionTimestamp")),
            running=status.get("phase") == "Running",
            ready=conditions.get("Ready") == "True",
        )


@dataclass(frozen=True)
class Seen:
    """One instance: its pods, and what its live pod's engine answered (None: no answer)."""

    name: str
    pods: tuple[PodFacts, ...] = ()
    engine: EngineState | None = None

    @property
    def pod(self) -> PodFacts | None:
        """Its live pod, the newest if two are (a replacement before the old one is gone)."""
        live = [pod for pod in self.pods if pod.live]
        return max(live, key=lambda pod: pod.created) if live else None

    @property
    def primary(self) -> bool:
        """Its engine answered as a primary (it accepts writes)."""
        return self.pod is not None and self.engine is not None and not self.engine.standby

    @property
    def standby(self) -> bool:
        return self.pod is not None and self.engine is not None and self.engine.standby

    @property
    def engine_streaming(self) -> bool:
        """A standby that streams from its primary now."""
        return self.standby and self.engine is not None and self.engine.streaming


@dataclass(frozen=True)
class Target:
    """The ConfigMap's word: the target primary, and since when it is."""

    primary: str
    since: datetime


@dataclass
class Memory:
    """What the operator keeps of a Database's instances between two looks (lost at a restart:
    a failover then waits its delay once more)."""

    #: Since when the target primary is lost (None: it is not).
    lost_since: datetime | None = None
    #: The WAL position the primary was last seen at.
    primary_position: int = 0
    #: Whether "no replica can be promoted" was said for this loss.
    impossible_told: bool = False
    #: Whether a primary has served yet: until the first has, a missing one is not lost but
    #: starting (its first initdb), and no failover is counted.
    confirmed: bool = False
    #: When the primary that a failover under way replaces was found lost (its duration).
    loss_began: datetime | None = None
    #: The standbys that streamed from the primary at the last look that found it well.
    streaming: set[str] = field(default_factory=set)


@dataclass
class Plan:
    """The next steps, in order: name a new target, fence, promote, label."""

    target: str | None = None
    fence: list[PodFacts] = field(default_factory=list)
    promote: str | None = None
    #: Pod name -> the role label it should carry (None: none); only the changes.
    labels: dict[str, str | None] = field(default_factory=dict)
    events: list[Event] = field(default_factory=list)
    #: A failover is under way: look again soon.
    busy: bool = False
    #: The switchover asked for was answered (done or refused).
    answered: bool = False


def decide(
    seen: list[Seen],
    target: Target,
    memory: Memory,
    now: datetime,
    failover: Failover,
    *,
    switchover: str | None = None,
) -> Plan:
    """The next steps for these instances (and ``memory`` brought up to date). ``switchover``:
    an instance asked to become the primary (``any``: the most advanced standby), not yet
    answered; it is, once the primary is well and no promotion is pending."""
    plan = Plan()
    by_name = {instance.name: instance for instance in seen}
    current = by_name.get(target.primary)

    pending = False
    if current is not None and current.primary:
        memory.lost_since, memory.impossible_told, memory.confirmed = None, False, True
        memory.streaming = {i.name for i in seen if i.engine_streaming}
        # Its own position: after a failover the old primary's is no measure (its WAL beyond
        # the promotion point is gone with its timeline).
        memory.primary_position = _position(current)
        if switchover is not None:
            _switch_over(seen, target, memory, failover, plan, wanted=switchover)
            if plan.target is not None:
                return plan  # the old primary is fenced (a clean stop) at the next look
    elif current is None or current.pod is None or current.engine is None:
        if memory.confirmed:  # else it is starting for the first time: nothing is lost yet
            memory.lost_since = memory.lost_since or now
            plan.busy = True
            if (now - memory.lost_since).total_seconds() >= failover.delay:
                _fail_over(seen, target, memory, failover, plan)
                if plan.target is not None:
                    return plan  # fenced and promoted at the next look, against the new target
    else:  # the target answers as a standby: it is to be promoted, once nothing else writes
        pending = plan.busy = True

    writers, earlier = _suspects(seen, target, pending=pending)
    suspects = writers + earlier
    # A pod that only may have started before the target was named is fenced once the second
    # the target was named in is over: its replacement is then created in a later second, and
    # never taken for one that started before (a creationTimestamp has whole seconds). An engine
    # that answers as a primary is fenced at once.
    settled = now >= _second_after(target.since)
    plan.fence = [pod for pod in (suspects if settled else writers) if not pod.deleting]
    plan.busy = plan.busy or (bool(suspects) and not settled)
    for pod in plan.fence:
        plan.events.append(
            (
                "Warning",
                "InstanceFenced",
                f"stopped pod {pod.name} of {pod.instance}: it may accept writes, and "
                f"{target.primary} is the primary",
            )
        )
    if pending and current is not None and not suspects:
        plan.promote = current.name
    plan.labels |= _labels(seen, target, promoting=plan.promote)
    return plan


def _fail_over(
    seen: list[Seen], target: Target, memory: Memory, failover: Failover, plan: Plan
) -> None:
    """The primary is lost past its delay: name the most advanced replica within maxLag."""
    plan.busy = True
    standbys = [i for i in seen if i.name != target.primary and i.standby]
    # Never one that was not streaming from the primary when it was last seen well: it may
    # not have had the primary's data at all (a replica still in its first sync).
    following = [i for i in standbys if i.name in memory.streaming or i.engine_streaming]
    eligible = [i for i in following if memory.primary_position - _position(i) <= failover.max_lag]
    if not eligible:
        if not memory.impossible_told:
            memory.impossible_told = True
            if following:
                why = (
                    f"{', '.join(i.name for i in following)} lag(s) more than "
                    f"spec.failover.maxLag ({failover.max_lag} bytes) behind it"
                )
            elif standbys:
                why = f"{', '.join(i.name for i in standbys)} did not stream from it"
            else:
                why = "no replica answers as a standby"
            plan.events.append(
                (
                    "Warning",
                    "FailoverImpossible",
                    f"primary {target.primary} is lost and {why}; writes wait for it to return",
                )
            )
        return
    chosen = min(eligible, key=lambda instance: (-_position(instance), instance.name))
    plan.target = chosen.name
    # The new target gets its own delay if it is lost before its promotion.
    memory.loss_began, memory.lost_since = memory.lost_since, None
    lag = max(0, memory.primary_position - _position(chosen))
    plan.events.append(
        (
            "Warning",
            "FailoverStarted",
            f"primary {target.primary} lost for {failover.delay}s "
            f"or more: promoting {chosen.name} ({lag} bytes behind its last known position)",
        )
    )
    for instance in seen:
        if instance.name == target.primary:
            for pod in instance.pods:
                if pod.role is not None:
                    plan.labels[pod.name] = None


def _switch_over(
    seen: list[Seen],
    target: Target,
    memory: Memory,
    failover: Failover,
    plan: Plan,
    *,
    wanted: str,
) -> None:
    """A switchover asked for: name ``wanted`` (or, for ``any``, the most advanced standby) if
    it is a standby within maxLag of the primary; say why not otherwise. Answered either way."""
    plan.answered = True
    standbys = [
        instance
        for instance in seen
        if instance.name != target.primary
        and instance.engine_streaming
        and wanted in (ANY, instance.name)
    ]
    close = [i for i in standbys if memory.primary_position - _position(i) <= failover.max_lag]
    if not close:
        if wanted == target.primary:
            why = f"{wanted} is the primary already"
        elif wanted != ANY and wanted not in {instance.name for instance in seen}:
            why = f"there is no instance {wanted}"
        elif standbys:
            why = f"{', '.join(i.name for i in standbys)} lag(s) more than spec.failover.maxLag"
        else:
            why = f"{'no instance' if wanted == ANY else wanted} streams from the primary"
        plan.events.append(("Warning", "SwitchoverImpossible", f"switchover not done: {why}"))
        return
    chosen = min(close, key=lambda instance: (-_position(instance), instance.name))
    plan.target = chosen.name
    lag = max(0, memory.primary_position - _position(chosen))
    plan.events.append(
        (
            "Normal",
            "SwitchoverStarted",
            f"switching the primary from {target.primary} to {chosen.name} ({lag} bytes "
            "behind): the old primary stops cleanly, then the new one is promoted",
        )
    )


def _suspects(
    seen: list[Seen], target: Target, *, pending: bool
) -> tuple[list[PodFacts], list[PodFacts]]:
    """The pods that may accept writes and are not the target's: those whose engine answers as
    a primary; and, while a promotion is pending, every other pod that may have started before
    the target was named and has not answered as a standby since (it may have started as the
    primary it then was), even one on its way out (a pod being deleted still runs until its
    containers stop). A pod created in the very second the target was named may have read
    either target: it counts as before (see `decide`: its fence waits for that second to end)."""
    writers, earlier = [], []
    boundary = _second_after(target.since)
    for instance in seen:
        if instance.name == target.primary:
            continue
        confirmed = instance.pod if instance.standby else None
        for pod in instance.pods:
            if pod is confirmed:
                continue
            if instance.primary and pod is instance.pod:
                writers.append(pod)
            elif pending and pod.created < boundary:
                earlier.append(pod)
    return writers, earlier


def _second_after(when: datetime) -> datetime:
    """The first whole second after the one ``when`` is in: a creationTimestamp (whole
    seconds) before it may be of a pod created before ``when``."""
    return when.replace(microsecond=0) + timedelta(seconds=1)


def _labels(seen: list[Seen], target: Target, promoting: str | None) -> dict[str, str | None]:
    """The role labels that change: what the engines confirm (see the module's docstring)."""
    changes: dict[str, str | None] = {}
    for instance in seen:
        pod = instance.pod
        if pod is None or instance.engine is None:
            continue
        if instance.primary:
            wanted: str | None = InstanceRole.PRIMARY if instance.name == target.primary else None
        elif instance.name == promoting:
            continue  # labelled primary once promoted
        else:
            wanted = InstanceRole.REPLICA
        if pod.role != wanted:
            changes[pod.name] = None if wanted is None else str(wanted)
    return changes


def _position(instance: Seen) -> int:
    return instance.engine.position if instance.engine is not None else 0


def statuses(seen: list[Seen], memory: Memory) -> list[InstanceStatus]:
    """Each instance as its engine answered, for the Database's status."""
    found = []
    for instance in seen:
        pod, engine = instance.pod, instance.engine
        role = InstanceRole.UNKNOWN
        if instance.primary:
            role = InstanceRole.PRIMARY
        elif instance.standby:
            role = InstanceRole.REPLICA
        found.append(
            InstanceStatus(
                name=instance.name,
                role=role,
                ready=pod is not None and pod.ready,
                pod=pod.name if pod is not None else None,
                lag_bytes=(
                    max(0, memory.primary_position - engine.position)
                    if engine is not None and engine.standby
                    else None
                ),
                timeline=engine.timeline if engine is not None and engine.timeline else None,
                streaming=instance.engine_streaming if instance.standby else None,
            )
        )
    return found
