"""What an engine answers about itself, and how the operator logs in to ask."""

from __future__ import annotations

from dataclasses import dataclass

#: Seconds a probe waits for an engine, to connect and to answer.
PROBE_TIMEOUT_S = 2.0


@dataclass(frozen=True)
class EngineState:
    """What an engine answered."""

    standby: bool
    #: How far its data goes, in bytes: PostgreSQL's WAL position, Redis's replication offset.
    position: int
    #: PostgreSQL's timeline (Redis: 0).
    timeline: int
    #: A standby that streams from its primary now.
    streaming: bool
    #: PostgreSQL in zero-loss mode (synchronous_standby_names as spec.failover.synchronous
    #: sets it); None for Redis, which has none.
    synchronous: bool | None = None


@dataclass(frozen=True)
class Credentials:
    """Whom the operator connects as (the Database's Secret; Redis: the password only)."""

    user: str
    password: str
