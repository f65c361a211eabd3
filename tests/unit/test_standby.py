"""The controller pauses exactly when Kopf's peering pauses the operator."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

import kopf

from database_operator.standby import KOPF_PEERING_LOGGER, PeeringGate
from tests.aio import synchronously


def kopf_says(gate: PeeringGate, message: str) -> None:
    gate.handle(logging.LogRecord(KOPF_PEERING_LOGGER, logging.INFO, "", 0, message, None, None))


@synchronously
async def test_each_peering_object_starts_paused_until_kopf_resumes_it() -> None:
    active = asyncio.Event()
    gate = PeeringGate(active, pauses=2)  # two watched namespaces
    assert not active.is_set()
    kopf_says(gate, "Resuming operations after the pause. Conflicting operators ... are gone.")
    assert not active.is_set()
    kopf_says(gate, "Resuming operations after the pause. Conflicting operators ... are gone.")
    assert active.is_set()


@synchronously
async def test_a_higher_priority_peer_pauses_and_its_exit_resumes() -> None:
    active = asyncio.Event()
    gate = PeeringGate(active, pauses=0)
    assert active.is_set()
    kopf_says(gate, "Pausing operations in favour of [<Peer dev@laptop: priority=666>].")
    assert not active.is_set()
    kopf_says(gate, "Keep-alive in 'database-operator' in 'ns': ok.")
    assert not active.is_set()
    kopf_says(gate, "Resuming operations after the pause. Conflicting operators are gone.")
    assert active.is_set()
    kopf_says(gate, "Pausing all operators, including self: [...]")
    assert not active.is_set()


def test_kopf_still_words_its_peering_flips_as_the_gate_expects() -> None:
    # Read from the installed Kopf's source: a release that rewords them must fail here.
    source = (Path(kopf.__file__).parent / "_core" / "engines" / "peering.py").read_text()
    for start in (
        "Pausing operations in favour of",
        "Pausing all operators, including self",
        "Resuming operations after the pause",
    ):
        assert f'"{start}' in source or f'f"{start}' in source, start
