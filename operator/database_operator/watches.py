"""The operator's own lists and watches: one kind, one namespace (or all), one label selector,
listed once and then watched from the listing's version for as long as the operator runs.

Kopf watches the Databases and DatabaseBackups, whose events it turns into handler calls. The
children's events only feed the controller's cache and wake their Database (controller.py), and
going through Kopf's per-object machinery (a task per object, its causes and handler
invocation) cost about a fifth of the operator's CPU on a create: four of a new Database's six
events are its children's. They are followed here instead, as are the namesakes' names
(namesakes.py).

A watch the server ends (every few minutes) goes on from the version it reached; one too old
(410 Gone) lists afresh, and the listing replaces what the watch held (an object deleted
meanwhile brings no event). Any other failure is logged and retried from the same version, as
Kopf retries its own (1, 2, 4 s, then every 4 s ± 1: lifecycle.ENDLESS), so that after an API
server outage of any length the children's events flow again within seconds of its return.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from database_operator.kube.api import Kube
from database_operator.kube.errors import ApiError
from database_operator.lifecycle import ENDLESS
from database_operator.logs import get_logger
from database_operator.manifest import Manifest


@dataclass
class Watch:
    """One list and watch, and how far it has come."""

    kind: str
    namespace: str | None
    selector: str
    #: Names, uids and owners only (PartialObjectMetadata), not whole objects.
    metadata_only: bool = False
    #: A field selector besides the label selector (``metadata.name=x``: one object).
    fields: str = ""
    #: The version to watch from; "" until listed (and after a 410: list again).
    version: str = ""
    #: Listed and watching: what it delivered is complete, but for events in flight.
    following: bool = False

    def covers(self, kind: str, namespace: str) -> bool:
        return kind == self.kind and self.namespace in (None, namespace)

    async def list_now(self, kube: Kube) -> list[Manifest]:
        """List what the watch selects, and remember the version to watch from."""
        lister = kube.list_metadata if self.metadata_only else kube.list_objects
        listed, self.version = await lister(
            self.kind, self.namespace, self.selector, fields=self.fields
        )
        return listed

    async def follow(
        self,
        kube: Kube,
        relisted: Callable[[list[Manifest], str], None],
        heard: Callable[[str, Manifest], None],
        failed: Callable[[str], None] = lambda _: None,
        backoffs: Iterable[float] = ENDLESS,
    ) -> None:
        """Watch (listing first, unless listed already) until cancelled. ``relisted`` gets
        each complete listing and its version, ``heard`` each event; ``failed`` is told why a
        request failed; ``backoffs``: the waits between failed attempts, afresh after each
        success."""
        delays = iter(backoffs)
        while True:
            try:
                if not self.version:
                    listed = await self.list_now(kube)
                    relisted(listed, self.version)
                self.following = True
                while True:  # each watch ends after minutes: made again from where it was
                    self.version = await kube.watch(
                        self.kind,
                        self.namespace,
                        self.selector,
                        self.version,
                        deliver=heard,
                        metadata_only=self.metadata_only,
                        fields=self.fields,
                    )
                    delays = iter(backoffs)  # one ran its course: what failed before is over
            except Exception as error:  # whatever it is, the watch is made again
                self.following = False
                if isinstance(error, ApiError) and error.expired:
                    self.version = ""  # too old to resume from: list afresh (routine)
                    continue
                why = str(error) or type(error).__name__
                failed(why)
                delay = next(delays)
                get_logger().warning(
                    "watch failed; retrying",
                    kind=self.kind,
                    namespace=self.namespace,
                    error=why,
                    retry_in_s=round(delay, 2),
                )
                await asyncio.sleep(delay)
            finally:
                self.following = False
