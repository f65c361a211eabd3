"""The earlier versions an upgrade to this one is tested from, pinned by full commit SHA.

Read from the repository's own history (tests/upgrade/conftest.py checks each one out into a
temporary git worktree), so the tests need a clone with full history: `git fetch --unshallow`,
or `fetch-depth: 0` on the CI checkout.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Version:
    """An earlier version of the operator: a name for people and the commit that is it."""

    name: str
    sha: str
    #: It runs read replicas (spec.replicas > 1 on postgres and redis) and the connection Secret.
    replicas: bool


#: The end of the first wave, the README's 0.1.0: the first commit whose operator was complete
#: (Kopf change handlers; no created-for mark on kept children; no read replicas).
FIRST_COMPLETE = Version("0.1.0", "ad0e02cfdb94a05481a23c85c0d512b1f5dade78", replicas=False)
#: The commit before issue 24's work (main's head then): the controller, read replicas,
#: webhooks, backups.
BEFORE_ISSUE_24 = Version("5de2295", "5de22953a0613e078dababb21fb0b3289054e7f7", replicas=True)

#: The commit before issue 39's work (main's head then): a primary Deployment and a read
#: replicas' Deployment, and no spec.failover.
BEFORE_ISSUE_39 = Version("e183ecd", "e183ecd773fdb16ef39a5d84d2c12498d7b7be02", replicas=True)

#: Every version an upgrade is tested from, oldest first.
EARLIER = (FIRST_COMPLETE, BEFORE_ISSUE_24, BEFORE_ISSUE_39)
#: The version a downgrade is tested to (it must keep every Secret and PVC).
PREVIOUS = BEFORE_ISSUE_39
