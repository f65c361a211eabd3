"""Kubernetes Events on a Database, posted in the background.

Kopf's own ``kopf.event`` posts only from inside Kopf's per-object tasks; the reconcile runs in
our work queue's workers, so it posts through our API client instead. Posting never holds up a
reconcile, and a failed post is logged and dropped: an Event is a courtesy, the status is the
record.
"""

from __future__ import annotations

import asyncio
import os
import socket
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from database_operator.kube.api import Kube
from database_operator.kube.errors import ApiError, NotLeadingError
from database_operator.logs import get_logger
from database_operator.manifest import Manifest

#: Posts a Kubernetes Event on an object: (type "Normal"/"Warning", reason, message).
EventSink = Callable[[str, str, str], None]

COMPONENT = "database-operator"
#: The API server caps an Event's message at 1 KiB.
MAX_MESSAGE = 1024


def no_events(_type: str, _reason: str, _message: str) -> None:
    """The EventSink that posts nothing (a caller with no Database to post on, or a test)."""
    return None


class EventRecorder:
    """Posts core/v1 Events about objects; `for_object` gives a reconcile its EventSink."""

    def __init__(self, kube: Kube, instance: str | None = None) -> None:
        self.kube = kube
        self.instance = instance or os.environ.get("POD_NAME") or socket.gethostname()
        self._pending: set[asyncio.Task[Any]] = set()

    def for_object(self, body: Manifest) -> EventSink:
        meta = body["metadata"]
        involved = {
            "apiVersion": body.get("apiVersion", ""),
            "kind": body.get("kind", ""),
            "name": meta["name"],
            "namespace": meta["namespace"],
            "uid": meta.get("uid", ""),
        }

        def post(type_: str, reason: str, message: str) -> None:
            # Logged too: the log is where a failover's steps are read in order, with the
            # reconciles around them (and where a CI run's failure is read).
            get_logger().info("event", type=type_, reason=reason, message=message, **_ref(involved))
            task = asyncio.create_task(self._post(involved, type_, reason, message))
            self._pending.add(task)
            task.add_done_callback(self._pending.discard)

        return post

    async def _post(self, involved: Manifest, type_: str, reason: str, message: str) -> None:
        now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        event = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {
                "generateName": f"{involved['name']}.",
                "namespace": involved["namespace"],
            },
            "involvedObject": involved,
            "type": type_,
            "reason": reason,
            "message": message[:MAX_MESSAGE],
            "source": {"component": COMPONENT},
            "reportingComponent": COMPONENT,
            "reportingInstance": self.instance,
            "firstTimestamp": now,
            "lastTimestamp": now,
            "count": 1,
        }
        try:
            await self.kube.create(event)
        except (ApiError, NotLeadingError) as error:  # NotLeadingError: stepped down meanwhile
            get_logger().debug(
                "could not post an Event", reason=reason, error=str(error), **_ref(involved)
            )

    async def drain(self) -> None:
        """Wait for the Events being posted (at shutdown)."""
        if self._pending:
            await asyncio.wait(set(self._pending), timeout=5)


def _ref(involved: Manifest) -> dict[str, str]:
    return {"namespace": involved["namespace"], "name": involved["name"]}
