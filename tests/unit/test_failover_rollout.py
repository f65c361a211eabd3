"""failover/rollout.py: replicas first, one at a time, the primary last through a switchover."""

from __future__ import annotations

from typing import Any

from database_operator.api.models import DatabaseStatus, InstanceRole, InstanceStatus
from database_operator.desired.common import APPLIED_DIGEST_ANNOTATION
from database_operator.failover.rollout import Rollout, plan

NAMES = ("shop-1", "shop-2", "shop-3")


def deployment(digest: str, pods: int = 1, rolled_out: bool = True) -> dict[str, Any]:
    """A Deployment with ``digest``; as its controller last saw it: rolled out, or not yet."""
    return {
        "metadata": {"annotations": {APPLIED_DIGEST_ANNOTATION: digest}, "generation": 2},
        "spec": {"replicas": pods},
        "status": {
            "observedGeneration": 2 if rolled_out else 1,
            "updatedReplicas": pods,
            "readyReplicas": pods,
        },
    }


def status(primary: str | None = "shop-1", unwell: tuple[str, ...] = ()) -> DatabaseStatus:
    return DatabaseStatus(
        current_primary=primary,
        instances=[
            InstanceStatus(
                name=name,
                role=InstanceRole.PRIMARY if name == primary else InstanceRole.REPLICA,
                ready=name not in unwell,
            )
            for name in NAMES
        ],
    )


def wanted(digest: str = "new") -> dict[str, dict[str, Any]]:
    return {name: deployment(digest) for name in NAMES}


def existing(*old: str) -> dict[str, dict[str, Any] | None]:
    return {name: deployment("old" if name in old else "new") for name in NAMES}


def test_nothing_outdated_holds_nothing() -> None:
    assert plan(wanted(), existing(), status()) == Rollout()


def test_a_new_instance_is_written_at_once() -> None:
    found: dict[str, dict[str, Any] | None] = {**existing(), "shop-3": None}
    assert plan(wanted(), found, status()) == Rollout()


def test_the_replicas_go_first_one_at_a_time_and_the_primary_waits() -> None:
    turn = plan(wanted(), existing(*NAMES), status())

    assert turn.next == "shop-2"
    assert turn.held == ["shop-3", "shop-1"]
    assert not turn.switchover


def test_the_next_waits_while_an_updated_instance_is_not_well() -> None:
    turn = plan(wanted(), existing("shop-1", "shop-3"), status(unwell=("shop-2",)))

    assert turn.next is None and turn.held == ["shop-1", "shop-3"]


def test_when_only_the_primary_is_left_it_moves_first() -> None:
    turn = plan(wanted(), existing("shop-1"), status())

    assert turn == Rollout(held=["shop-1"], switchover=True)


def test_after_the_switchover_the_old_primary_is_written_as_a_replica() -> None:
    turn = plan(wanted(), existing("shop-1"), status(primary="shop-2"))

    assert turn == Rollout(next="shop-1")


def test_nothing_moves_while_no_primary_is_confirmed() -> None:
    turn = plan(wanted(), existing(*NAMES), status(primary=None))

    assert turn.next is None and sorted(turn.held) == sorted(NAMES)


def test_a_single_instance_is_written_as_it_is() -> None:
    alone = DatabaseStatus(
        current_primary="shop-1",
        instances=[InstanceStatus(name="shop-1", role=InstanceRole.PRIMARY, ready=True)],
    )
    turn = plan({"shop-1": deployment("new")}, {"shop-1": deployment("old")}, alone)

    assert turn == Rollout(next="shop-1")


def test_hibernating_and_waking_are_written_at_once() -> None:
    asleep = {name: deployment("new", pods=0) for name in NAMES}
    assert plan(asleep, existing(*NAMES), status()) == Rollout()
    woken = {name: deployment("old", pods=0) for name in NAMES}
    assert plan(wanted(), woken, status(primary=None)) == Rollout()


def test_a_broken_replica_is_given_its_fix_even_though_it_is_not_well() -> None:
    turn = plan(wanted(), existing("shop-2"), status(unwell=("shop-2",)))

    assert turn.next == "shop-2"


def test_the_next_waits_while_the_deployment_just_written_has_not_rolled_out() -> None:
    """The status is the last look's: right after shop-2's Deployment was written, it still
    says shop-2 is a ready replica. The Deployment knows better."""
    found = existing("shop-1", "shop-3")
    found["shop-2"] = deployment("new", rolled_out=False)

    turn = plan(wanted(), found, status())

    assert turn.next is None and turn.held == ["shop-1", "shop-3"]


def test_a_replica_that_does_not_stream_yet_holds_the_next() -> None:
    lagging = status()
    assert lagging.instances is not None
    lagging.instances[1].streaming = False

    turn = plan(wanted(), existing("shop-1", "shop-3"), lagging)

    assert turn.next is None
