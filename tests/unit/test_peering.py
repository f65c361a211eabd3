"""The peering priority: distinct per replica (Kopf pauses every peer when the highest priority is
shared), stable across restarts of one pod, and an explicit one wins."""

from __future__ import annotations

import socket

import pytest

from database_operator.config import Settings
from database_operator.runner import peering_priority

REPLICAS = [f"database-operator-6d5f7c9b8-{suffix}" for suffix in ("x2k4q", "p9lzt", "c7mw3")]


@pytest.fixture(autouse=True)
def no_priority_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("DATABASE_OPERATOR_PRIORITY", raising=False)


def priority_of(pod_name: str, monkeypatch: pytest.MonkeyPatch, settings: Settings) -> int:
    monkeypatch.setenv("POD_NAME", pod_name)
    return peering_priority(settings)


def test_replicas_with_different_pod_names_get_different_priorities(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    priorities = [priority_of(name, monkeypatch, Settings(peering=True)) for name in REPLICAS]
    assert len(set(priorities)) == len(REPLICAS), priorities


def test_derived_priority_is_the_same_for_the_same_pod_name(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    first = priority_of(REPLICAS[0], monkeypatch, Settings(peering=True))
    assert priority_of(REPLICAS[0], monkeypatch, Settings(peering=True)) == first


def test_derived_priority_is_above_kopfs_default(monkeypatch: pytest.MonkeyPatch) -> None:
    # Kopf's default priority is 0: a replica outranks a peer started without one.
    for name in REPLICAS:
        assert priority_of(name, monkeypatch, Settings(peering=True)) > 0


def test_without_a_pod_name_the_host_name_decides(monkeypatch: pytest.MonkeyPatch) -> None:
    expected = priority_of(socket.gethostname(), monkeypatch, Settings(peering=True))
    monkeypatch.delenv("POD_NAME")
    assert peering_priority(Settings(peering=True)) == expected


def test_an_explicit_priority_wins_over_the_pod_name(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in REPLICAS:
        assert priority_of(name, monkeypatch, Settings(peering=True, priority=7)) == 7


def test_an_explicit_priority_from_the_environment_is_honoured(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("DATABASE_OPERATOR_PRIORITY", "42")
    assert priority_of(REPLICAS[0], monkeypatch, Settings(peering=True)) == 42
