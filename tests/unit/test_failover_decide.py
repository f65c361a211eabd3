"""failover/decide.py as a truth table: what was seen, remembered and configured -> the plan.

Each test is one behaviour. The instances are ``shop-1`` .. ``shop-3``; ``shop-1`` is the target
primary unless a test says otherwise.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from database_operator.api.models import (
    INSTANCE_LABEL,
    ROLE_LABEL,
    Failover,
    InstanceRole,
)
from database_operator.failover.answers import EngineState
from database_operator.failover.decide import (
    Memory,
    PodFacts,
    Seen,
    Target,
    decide,
    statuses,
)

NOW = datetime(2026, 12, 7, 10, 0, 0, tzinfo=UTC)
#: When the ConfigMap named the current target (well before NOW unless a test says otherwise).
SINCE = NOW - timedelta(hours=1)
MIB = 1024 * 1024
FAILOVER = Failover(enabled=True, delay=5, max_lag=16 * MIB)


def pod(
    instance: str,
    *,
    suffix: str = "a",
    role: str | None = None,
    created: datetime = SINCE - timedelta(hours=1),
    deleting: bool = False,
    running: bool = True,
    address: str | None = "10.0.0.1",
    ready: bool = True,
) -> PodFacts:
    """A pod of ``instance``, named ``<instance>-<suffix>``, by default live and old."""
    return PodFacts(
        name=f"{instance}-{suffix}",
        uid=f"uid-{instance}-{suffix}",
        instance=instance,
        role=role,
        address=address,
        created=created,
        deleting=deleting,
        running=running,
        ready=ready,
    )


def primary(position: int = 1000, timeline: int = 1) -> EngineState:
    return EngineState(standby=False, position=position, timeline=timeline, streaming=False)


def standby(position: int = 1000, timeline: int = 1) -> EngineState:
    return EngineState(standby=True, position=position, timeline=timeline, streaming=True)


def seen(name: str, engine: EngineState | None, *pods: PodFacts) -> Seen:
    """Instance ``name`` with ``pods`` (default: one live old pod) and its engine's answer."""
    return Seen(name, pods if pods else (pod(name),), engine)


def target(name: str = "shop-1", since: datetime = SINCE) -> Target:
    return Target(primary=name, since=since)


def confirmed(primary_position: int = 0, lost_since: datetime | None = None) -> Memory:
    """Memory of a Database whose primary has served."""
    return Memory(lost_since=lost_since, primary_position=primary_position, confirmed=True)


def reasons(events: list[tuple[str, str, str]]) -> list[str]:
    return [reason for _, reason, _ in events]


# --- a healthy primary ----------------------------------------------------------------------


def test_a_healthy_primary_is_labelled_primary_and_its_standbys_replica() -> None:
    instances = [
        seen("shop-1", primary(5000)),
        seen("shop-2", standby(4000)),
        seen("shop-3", standby(4500)),
    ]
    memory = Memory()

    plan = decide(instances, target(), memory, NOW, FAILOVER)

    assert plan.labels == {"shop-1-a": "primary", "shop-2-a": "replica", "shop-3-a": "replica"}
    assert plan.target is None
    assert plan.fence == []
    assert plan.promote is None
    assert plan.events == []
    assert not plan.busy


def test_a_healthy_primary_confirms_the_memory_and_records_its_position() -> None:
    memory = Memory(lost_since=NOW - timedelta(seconds=3), impossible_told=True)

    decide([seen("shop-1", primary(5000))], target(), memory, NOW, FAILOVER)

    assert memory.confirmed
    assert memory.lost_since is None
    assert not memory.impossible_told
    assert memory.primary_position == 5000


def test_labels_already_right_are_no_change() -> None:
    instances = [
        seen("shop-1", primary(), pod("shop-1", role="primary")),
        seen("shop-2", standby(), pod("shop-2", role="replica")),
    ]

    plan = decide(instances, target(), confirmed(), NOW, FAILOVER)

    assert plan.labels == {}


# --- a primary not yet confirmed ------------------------------------------------------------


def test_a_missing_primary_never_confirmed_starts_no_failover_and_no_timer() -> None:
    instances = [Seen("shop-1"), seen("shop-2", standby(100))]
    memory = Memory()

    plan = decide(instances, target(), memory, NOW + timedelta(hours=1), FAILOVER)

    assert plan.target is None
    assert plan.events == []
    assert not plan.busy
    assert memory.lost_since is None
    assert not memory.confirmed


def test_an_unanswering_primary_never_confirmed_causes_no_failover() -> None:
    instances = [seen("shop-1", None), seen("shop-2", standby(100))]
    memory = Memory()

    plan = decide(instances, target(), memory, NOW, FAILOVER)

    assert plan.target is None
    assert memory.lost_since is None


# --- a lost primary -------------------------------------------------------------------------


def test_a_lost_primary_within_its_delay_is_waited_for() -> None:
    instances = [seen("shop-1", None), seen("shop-2", standby(900))]
    memory = confirmed(primary_position=1000)

    first = decide(instances, target(), memory, NOW, FAILOVER)
    second = decide(instances, target(), memory, NOW + timedelta(seconds=4), FAILOVER)

    assert first.busy and second.busy
    assert first.target is None and second.target is None
    assert first.events == [] and second.events == []
    assert memory.lost_since == NOW


def test_a_primary_with_no_pod_counts_as_lost() -> None:
    memory = confirmed(primary_position=1000)

    plan = decide([Seen("shop-1"), seen("shop-2", standby(900))], target(), memory, NOW, FAILOVER)

    assert plan.busy
    assert memory.lost_since == NOW


def test_a_primary_whose_pod_is_not_running_counts_as_lost() -> None:
    instances = [seen("shop-1", None, pod("shop-1", running=False)), seen("shop-2", standby(900))]
    memory = confirmed(primary_position=1000)

    plan = decide(instances, target(), memory, NOW, FAILOVER)

    assert plan.busy
    assert memory.lost_since == NOW


def test_a_lost_primary_beyond_its_delay_is_replaced_by_the_most_advanced_standby() -> None:
    instances = [
        seen("shop-1", None, pod("shop-1", role="primary")),
        seen("shop-2", standby(900), pod("shop-2", role="replica")),
        seen("shop-3", standby(950), pod("shop-3", role="replica")),
    ]
    memory = confirmed(primary_position=1000, lost_since=NOW - timedelta(seconds=6))

    plan = decide(instances, target(), memory, NOW, FAILOVER)

    assert plan.target == "shop-3"
    assert plan.busy
    assert reasons(plan.events) == ["FailoverStarted"]
    kind, _, message = plan.events[0]
    assert kind == "Warning"
    assert "shop-3" in message and "50 bytes" in message


def test_a_failover_takes_the_role_label_off_every_pod_of_the_lost_primary() -> None:
    instances = [
        seen(
            "shop-1",
            None,
            pod("shop-1", suffix="old", role="primary", deleting=True),
            pod("shop-1", suffix="new", role="primary"),
            pod("shop-1", suffix="bare"),
        ),
        seen("shop-2", standby(900), pod("shop-2", role="replica")),
    ]
    memory = confirmed(primary_position=1000, lost_since=NOW - timedelta(seconds=60))

    plan = decide(instances, target(), memory, NOW, FAILOVER)

    assert plan.target == "shop-2"
    assert plan.labels == {"shop-1-old": None, "shop-1-new": None}


def test_the_delay_counts_from_the_first_look_that_found_the_primary_lost() -> None:
    instances = [seen("shop-1", None), seen("shop-2", standby(900))]
    memory = confirmed(primary_position=1000)

    decide(instances, target(), memory, NOW, FAILOVER)
    plan = decide(instances, target(), memory, NOW + timedelta(seconds=5), FAILOVER)

    assert plan.target == "shop-2"


def test_a_standby_that_does_not_answer_is_never_chosen() -> None:
    instances = [
        seen("shop-1", None),
        seen("shop-2", None),
        seen("shop-3", standby(800)),
    ]
    memory = confirmed(primary_position=1000, lost_since=NOW - timedelta(seconds=60))

    plan = decide(instances, target(), memory, NOW, FAILOVER)

    assert plan.target == "shop-3"


def test_a_standby_lagging_more_than_max_lag_is_never_chosen() -> None:
    position = 100 * MIB
    instances = [
        seen("shop-1", None),
        seen("shop-2", standby(position - 16 * MIB - 1)),
    ]
    memory = confirmed(primary_position=position, lost_since=NOW - timedelta(seconds=60))

    plan = decide(instances, target(), memory, NOW, FAILOVER)

    assert plan.target is None
    assert plan.busy


def test_a_standby_exactly_max_lag_behind_may_be_chosen() -> None:
    position = 100 * MIB
    instances = [seen("shop-1", None), seen("shop-2", standby(position - 16 * MIB))]
    memory = confirmed(primary_position=position, lost_since=NOW - timedelta(seconds=60))

    plan = decide(instances, target(), memory, NOW, FAILOVER)

    assert plan.target == "shop-2"


def test_when_no_standby_is_eligible_failover_impossible_is_said_once_only() -> None:
    position = 100 * MIB
    instances = [
        seen("shop-1", None, pod("shop-1", role="primary")),
        seen("shop-2", standby(position - 20 * MIB)),
        seen("shop-3", standby(position - 30 * MIB)),
    ]
    memory = confirmed(primary_position=position, lost_since=NOW - timedelta(seconds=60))

    first = decide(instances, target(), memory, NOW, FAILOVER)
    second = decide(instances, target(), memory, NOW + timedelta(seconds=1), FAILOVER)

    assert reasons(first.events) == ["FailoverImpossible"]
    assert "shop-2, shop-3" in first.events[0][2]
    assert first.target is None and second.target is None
    assert second.events == []
    assert first.busy and second.busy
    # No failover began: the lost primary keeps its label.
    # The standbys are labelled for what they are; the lost primary keeps its label.
    assert first.labels == {"shop-2-a": "replica", "shop-3-a": "replica"}


def test_failover_impossible_without_any_standby_says_none_answers() -> None:
    instances = [seen("shop-1", None), seen("shop-2", None)]
    memory = confirmed(primary_position=1000, lost_since=NOW - timedelta(seconds=60))

    plan = decide(instances, target(), memory, NOW, FAILOVER)

    assert reasons(plan.events) == ["FailoverImpossible"]
    assert "no replica answers as a standby" in plan.events[0][2]


def test_failover_impossible_is_said_again_for_a_later_loss() -> None:
    lagging = [seen("shop-1", None), seen("shop-2", standby(0))]
    memory = confirmed(primary_position=100 * MIB, lost_since=NOW - timedelta(seconds=60))
    decide(lagging, target(), memory, NOW, FAILOVER)
    # The primary comes back, then is lost again.
    decide([seen("shop-1", primary(100 * MIB))], target(), memory, NOW, FAILOVER)
    later = NOW + timedelta(minutes=5)
    decide(lagging, target(), memory, later, FAILOVER)

    plan = decide(lagging, target(), memory, later + timedelta(seconds=10), FAILOVER)

    assert reasons(plan.events) == ["FailoverImpossible"]


def test_a_tie_on_position_goes_to_the_lowest_name() -> None:
    instances = [
        seen("shop-1", None),
        seen("shop-3", standby(900)),
        seen("shop-2", standby(900)),
    ]
    memory = confirmed(primary_position=1000, lost_since=NOW - timedelta(seconds=60))

    plan = decide(instances, target(), memory, NOW, FAILOVER)

    assert plan.target == "shop-2"


def test_a_zero_delay_fails_over_at_the_first_look() -> None:
    instances = [seen("shop-1", None), seen("shop-2", standby(900))]
    memory = confirmed(primary_position=1000)

    plan = decide(instances, target(), memory, NOW, Failover(enabled=True, delay=0))

    assert plan.target == "shop-2"


# --- fencing and promotion ------------------------------------------------------------------


def test_a_pending_promotion_fences_an_older_pod_of_another_instance_not_yet_standby() -> None:
    since = NOW - timedelta(seconds=2)
    old_primary = pod("shop-1", role="primary", created=since - timedelta(hours=1))
    instances = [
        seen("shop-1", None, old_primary),
        seen("shop-2", standby(900)),
        seen("shop-3", standby(800)),
    ]

    plan = decide(instances, target("shop-2", since), confirmed(), NOW, FAILOVER)

    assert plan.fence == [old_primary]
    assert plan.promote is None
    assert plan.busy
    assert reasons(plan.events) == ["InstanceFenced"]
    assert "shop-1-a" in plan.events[0][2]


def test_a_pending_promotion_does_not_fence_a_standby_that_answered() -> None:
    since = NOW - timedelta(seconds=2)
    instances = [
        seen("shop-1", None, pod("shop-1", created=since - timedelta(hours=1))),
        seen("shop-2", standby(900)),
        seen("shop-3", standby(800), pod("shop-3", created=since - timedelta(hours=1))),
    ]

    plan = decide(instances, target("shop-2", since), confirmed(), NOW, FAILOVER)

    assert [p.name for p in plan.fence] == ["shop-1-a"]


def test_a_pod_already_deleting_blocks_promotion_but_is_not_fenced_again() -> None:
    since = NOW - timedelta(seconds=2)
    going = pod("shop-1", role=None, created=since - timedelta(hours=1), deleting=True)
    instances = [seen("shop-1", None, going), seen("shop-2", standby(900))]

    plan = decide(instances, target("shop-2", since), confirmed(), NOW, FAILOVER)

    assert plan.fence == []
    assert plan.promote is None
    assert plan.events == []
    assert plan.busy


def test_with_no_suspect_left_the_target_is_promoted() -> None:
    since = NOW - timedelta(seconds=2)
    instances = [
        Seen("shop-1"),
        seen("shop-2", standby(900), pod("shop-2", role="replica")),
        seen("shop-3", standby(800), pod("shop-3", role="replica")),
    ]

    plan = decide(instances, target("shop-2", since), confirmed(), NOW, FAILOVER)

    assert plan.promote == "shop-2"
    assert plan.fence == []
    assert plan.busy
    # The target is labelled primary once promoted, not before; the other keeps replica.
    assert plan.labels == {}


def test_a_pod_started_after_the_target_was_named_is_no_suspect() -> None:
    since = NOW - timedelta(seconds=10)
    restarted = pod("shop-1", suffix="new", created=since + timedelta(seconds=1))
    instances = [seen("shop-1", None, restarted), seen("shop-2", standby(900))]

    plan = decide(instances, target("shop-2", since), confirmed(), NOW, FAILOVER)

    assert plan.fence == []
    assert plan.promote == "shop-2"


def test_a_primary_engine_not_the_target_is_fenced_even_with_a_healthy_target() -> None:
    rogue = pod("shop-2", role="replica")
    instances = [
        seen("shop-1", primary(5000), pod("shop-1", role="primary")),
        seen("shop-2", primary(4000), rogue),
        seen("shop-3", standby(4900), pod("shop-3", role="replica")),
    ]

    plan = decide(instances, target(), confirmed(), NOW, FAILOVER)

    assert plan.fence == [rogue]
    assert reasons(plan.events) == ["InstanceFenced"]
    assert plan.labels == {"shop-2-a": None}
    assert plan.promote is None
    assert not plan.busy


def test_an_engine_answering_as_primary_blocks_a_pending_promotion() -> None:
    since = NOW - timedelta(seconds=2)
    rogue = pod("shop-1", created=since + timedelta(seconds=1))
    instances = [seen("shop-1", primary(1000), rogue), seen("shop-2", standby(900))]

    plan = decide(instances, target("shop-2", since), confirmed(), NOW, FAILOVER)

    assert plan.fence == [rogue]
    assert plan.promote is None


# --- labels ---------------------------------------------------------------------------------


def test_an_instance_whose_engine_does_not_answer_keeps_its_label() -> None:
    instances = [
        seen("shop-1", primary(), pod("shop-1", role="primary")),
        seen("shop-2", None, pod("shop-2", role="replica")),
        seen("shop-3", None, pod("shop-3")),
    ]

    plan = decide(instances, target(), confirmed(), NOW, FAILOVER)

    assert plan.labels == {}
    assert plan.fence == []


def test_a_standby_labelled_primary_is_relabelled_replica() -> None:
    instances = [
        seen("shop-1", primary(), pod("shop-1", role="primary")),
        seen("shop-2", standby(), pod("shop-2", role="primary")),
    ]

    plan = decide(instances, target(), confirmed(), NOW, FAILOVER)

    assert plan.labels == {"shop-2-a": "replica"}


def test_the_label_goes_on_the_newest_live_pod_of_an_instance() -> None:
    instances = [
        seen(
            "shop-1",
            primary(),
            pod("shop-1", suffix="old", created=SINCE - timedelta(hours=2)),
            pod("shop-1", suffix="new", created=SINCE - timedelta(hours=1)),
        )
    ]

    plan = decide(instances, target(), confirmed(), NOW, FAILOVER)

    assert plan.labels == {"shop-1-new": "primary"}


# --- after a failover -----------------------------------------------------------------------


def test_after_a_failover_the_lag_is_measured_against_the_new_primary() -> None:
    """The new primary was promoted a little behind the old one's last position: its WAL is a
    new timeline, and a standby that has all of it lags by nothing."""
    old_position = 100 * MIB
    new_position = old_position - 10 * MIB
    instances = [
        seen("shop-2", primary(new_position, timeline=2)),
        seen("shop-3", standby(new_position, timeline=2)),
    ]
    memory = confirmed(primary_position=old_position)

    decide(instances, target("shop-2"), memory, NOW, FAILOVER)
    [_, replica] = statuses(instances, memory)

    assert memory.primary_position == new_position
    assert replica.lag_bytes == 0


def test_after_a_failover_a_standby_close_behind_the_new_primary_can_replace_it() -> None:
    """The new primary, promoted 15 MiB behind the old one's last position, is lost in turn: a
    standby 2 MiB behind it is within maxLag of it, whatever the old primary had written."""
    old_position = 100 * MIB
    new_position = old_position - 15 * MIB
    memory = confirmed(primary_position=old_position)
    healthy = [
        seen("shop-2", primary(new_position, timeline=2)),
        seen("shop-3", standby(new_position - 2 * MIB, timeline=2)),
    ]
    decide(healthy, target("shop-2"), memory, NOW, FAILOVER)
    lost = [seen("shop-2", None), healthy[1]]
    decide(lost, target("shop-2"), memory, NOW + timedelta(seconds=1), FAILOVER)

    plan = decide(lost, target("shop-2"), memory, NOW + timedelta(seconds=10), FAILOVER)

    assert plan.target == "shop-3"
    assert reasons(plan.events) == ["FailoverStarted"]


# --- statuses -------------------------------------------------------------------------------


def test_statuses_report_role_readiness_pod_lag_and_timeline() -> None:
    instances = [
        seen("shop-1", primary(5000, timeline=3)),
        seen("shop-2", standby(4000, timeline=3), pod("shop-2", ready=False)),
        seen("shop-3", None),
        Seen("shop-4"),
    ]
    memory = Memory(primary_position=5000)

    found = statuses(instances, memory)

    assert [(s.name, s.role, s.ready, s.pod, s.lag_bytes, s.timeline) for s in found] == [
        ("shop-1", InstanceRole.PRIMARY, True, "shop-1-a", None, 3),
        ("shop-2", InstanceRole.REPLICA, False, "shop-2-a", 1000, 3),
        ("shop-3", InstanceRole.UNKNOWN, True, "shop-3-a", None, None),
        ("shop-4", InstanceRole.UNKNOWN, False, None, None, None),
    ]


def test_statuses_never_report_a_negative_lag() -> None:
    [found] = statuses([seen("shop-2", standby(6000))], Memory(primary_position=5000))

    assert found.lag_bytes == 0


# --- PodFacts.of ----------------------------------------------------------------------------


def _pod_dict(**meta: object) -> dict[str, object]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "shop-2-7d9f8c6b5-x2x4q",
            "namespace": "prod",
            "uid": "5f0c1e2d-0000-4000-8000-000000000002",
            "creationTimestamp": "2026-12-07T10:00:00Z",
            "labels": {
                "app.kubernetes.io/name": "postgres",
                "app.kubernetes.io/instance": "shop",
                INSTANCE_LABEL: "shop-2",
                ROLE_LABEL: "replica",
            },
            **meta,
        },
        "spec": {"containers": [{"name": "postgres"}]},
        "status": {
            "phase": "Running",
            "podIP": "10.244.1.17",
            "conditions": [
                {"type": "Initialized", "status": "True"},
                {"type": "Ready", "status": "True"},
                {"type": "ContainersReady", "status": "True"},
                {"type": "PodScheduled", "status": "True"},
            ],
        },
    }


def test_pod_facts_of_a_running_ready_pod() -> None:
    facts = PodFacts.of(_pod_dict())

    assert facts == PodFacts(
        name="shop-2-7d9f8c6b5-x2x4q",
        uid="5f0c1e2d-0000-4000-8000-000000000002",
        instance="shop-2",
        role="replica",
        address="10.244.1.17",
        created=datetime(2026, 12, 7, 10, 0, 0, tzinfo=UTC),
        deleting=False,
        running=True,
        ready=True,
    )
    assert facts.created.tzinfo is not None
    assert facts.live


def test_pod_facts_of_a_pod_being_deleted_is_not_live() -> None:
    facts = PodFacts.of(_pod_dict(deletionTimestamp="2026-12-07T10:05:00Z"))

    assert facts.deleting
    assert facts.running
    assert not facts.live


def test_pod_facts_of_a_pod_just_created_has_no_address_role_or_readiness() -> None:
    facts = PodFacts.of(
        {
            "metadata": {
                "name": "shop-3-abc",
                "creationTimestamp": "2026-12-07T10:00:00Z",
                "labels": {INSTANCE_LABEL: "shop-3"},
            },
            "status": {"phase": "Pending"},
        }
    )

    assert (facts.role, facts.address, facts.running, facts.ready) == (None, None, False, False)
    assert not facts.live


# --- switchover on request --------------------------------------------------------------------


def well() -> list[Seen]:
    return [
        seen("shop-1", primary(5000)),
        seen("shop-2", standby(4000)),
        seen("shop-3", standby(4900)),
    ]


def test_a_switchover_to_any_names_the_most_advanced_standby_and_is_answered() -> None:
    plan = decide(well(), target(), confirmed(), NOW, FAILOVER, switchover="any")

    assert plan.target == "shop-3"
    assert plan.answered
    assert reasons(plan.events) == ["SwitchoverStarted"]
    # The old primary is fenced at the next look, against the new target: nothing more now.
    assert plan.fence == [] and plan.promote is None


def test_a_switchover_to_a_named_standby_names_it() -> None:
    plan = decide(well(), target(), confirmed(), NOW, FAILOVER, switchover="shop-2")

    assert plan.target == "shop-2" and plan.answered


def test_after_a_switchover_is_named_the_old_primary_is_fenced_before_the_promotion() -> None:
    """The next look: the target is the standby, the old primary still answers as one."""
    named = target("shop-3", since=NOW - timedelta(seconds=1))

    plan = decide(well(), named, confirmed(5000), NOW, FAILOVER)

    assert [pod.instance for pod in plan.fence] == ["shop-1"]
    assert plan.promote is None and plan.busy


def test_a_switchover_that_cannot_be_done_is_answered_with_the_reason() -> None:
    for wanted, why in (
        ("shop-1", "shop-1 is the primary already"),
        ("shop-9", "there is no instance shop-9"),
    ):
        plan = decide(well(), target(), confirmed(), NOW, FAILOVER, switchover=wanted)

        assert plan.target is None and plan.answered
        assert reasons(plan.events) == ["SwitchoverImpossible"]
        assert why in plan.events[0][2]


def test_a_switchover_to_a_standby_beyond_max_lag_is_refused() -> None:
    lagging = [seen("shop-1", primary(100 * MIB)), seen("shop-2", standby(10 * MIB))]

    plan = decide(lagging, target(), confirmed(), NOW, FAILOVER, switchover="shop-2")

    assert plan.target is None and plan.answered
    assert "maxLag" in plan.events[0][2]


def test_a_switchover_waits_while_the_primary_is_lost() -> None:
    lost = [seen("shop-1", None), seen("shop-2", standby())]

    plan = decide(lost, target(), confirmed(), NOW, FAILOVER, switchover="shop-2")

    assert not plan.answered and plan.target is None


def test_a_pod_made_in_the_targets_second_is_fenced_only_once_that_second_is_over() -> None:
    """Seen on a real node: a switchover named shop-2 at :46.404; the old primary's pod was
    deleted and its replacement created at :46.55, whose creationTimestamp says :46 — before
    the target, by whole seconds. It may have read either target: it is a suspect, but its
    fence waits until :47, so that its own replacement is made in a later second and is never
    taken for one that started before (which, fenced in turn, left a pod that never stopped)."""
    since = NOW.replace(microsecond=404_000)
    in_that_second = pod("shop-1", suffix="b", created=NOW)  # :00.55, said :00
    old = pod("shop-1", created=since - timedelta(hours=1), deleting=True)
    instances = [seen("shop-1", None, old, in_that_second), seen("shop-2", standby(900))]

    early = decide(
        instances, target("shop-2", since), confirmed(), NOW.replace(microsecond=600_000), FAILOVER
    )
    assert early.fence == [] and early.promote is None and early.busy

    later = decide(
        instances, target("shop-2", since), confirmed(), NOW + timedelta(seconds=1), FAILOVER
    )
    assert later.fence == [in_that_second] and later.promote is None

    replacement = pod("shop-1", suffix="c", created=NOW + timedelta(seconds=1))
    gone = [seen("shop-1", None, replacement), seen("shop-2", standby(900))]
    done = decide(gone, target("shop-2", since), confirmed(), NOW + timedelta(seconds=2), FAILOVER)
    assert done.fence == [] and done.promote == "shop-2"


def test_an_engine_answering_as_a_primary_is_fenced_at_once_even_in_the_targets_second() -> None:
    since = NOW.replace(microsecond=404_000)
    writer = pod("shop-1", created=NOW)
    instances = [seen("shop-1", primary(), writer), seen("shop-2", standby(900))]
    plan = decide(
        instances, target("shop-2", since), confirmed(), NOW.replace(microsecond=600_000), FAILOVER
    )
    assert plan.fence == [writer]
