"""Whether this operator may act: with peering, Kopf decides, and the controller follows.

Kopf pauses the watch streams of an operator that a peer with a higher (or the same) priority
outranks, and resumes them when that peer is gone, but it offers no way to ask whether it is
paused. The controller's queue must pause with it, or a standby that was once active would keep
reconciling from its cache. Kopf's peering logs every flip of each pause it keeps (one per
peering object: one per watched namespace, or one for the cluster), starting paused until the
first look at the peering object; this gate counts those flips. A Kopf release that words them
differently keeps the gate closed, and the HA tests fail, rather than letting two operators act.
"""

from __future__ import annotations

import asyncio
import logging

#: Kopf's peering logger and the starts of the messages it logs when a pause flips.
KOPF_PEERING_LOGGER = "kopf._core.engines.peering"
PAUSING = ("Pausing operations in favour of", "Pausing all operators, including self")
RESUMING = ("Resuming operations after the pause",)


class PeeringGate(logging.Handler):
    """Sets ``active`` while none of Kopf's peering pauses is on."""

    def __init__(self, active: asyncio.Event, pauses: int) -> None:
        super().__init__(level=logging.DEBUG)
        self.active = active
        self.pauses = pauses
        self._apply()

    def emit(self, record: logging.LogRecord) -> None:
        message = record.getMessage()
        if message.startswith(PAUSING):
            self.pauses += 1
        elif message.startswith(RESUMING):
            self.pauses = max(0, self.pauses - 1)
        else:
            return
        self._apply()

    def _apply(self) -> None:
        if self.pauses:
            self.active.clear()
        else:
            self.active.set()


def follow_kopf_peering(active: asyncio.Event, peering_objects: int) -> PeeringGate:
    """Gate ``active`` on Kopf's peering; every peering object starts paused."""
    gate = PeeringGate(active, peering_objects)
    logger = logging.getLogger(KOPF_PEERING_LOGGER)
    logger.addHandler(gate)
    if logger.getEffectiveLevel() > logging.INFO:  # the gate must see them at any log level
        logger.setLevel(logging.INFO)
    return gate
