"""Asking an instance's engine what it is: the operator connects to the pod's address itself.

No agent runs in the database pods and the operator holds no ``pods/exec``: it speaks the
engine's own protocol to the pod's IP with the credentials it already reads (the Database's
Secret), as any client does (docs/architecture.md, "Instances and failover"). A probe that gets
no answer within its timeout says so; it never raises for the engine's sake. Each engine's
words are in its own module (postgres.py, redis.py); this one picks by engine.
"""

from __future__ import annotations

from database_operator.engines import Engine
from database_operator.failover import postgres, redis
from database_operator.failover.answers import Credentials, EngineState

__all__ = ["Credentials", "EngineState", "ask", "follow_again", "promote", "set_synchronous"]


async def ask(engine: Engine, address: str, port: int, login: Credentials) -> EngineState | None:
    """The engine at ``address:port``: its role and position, or None if it does not answer."""
    if engine is Engine.REDIS:
        return await redis.ask(address, port, login)
    return await postgres.ask(address, port, login)


async def promote(engine: Engine, address: str, port: int, login: Credentials) -> bool:
    """Make the standby at ``address:port`` the primary; whether it accepts writes now."""
    if engine is Engine.REDIS:
        return await redis.promote(address, port, login)
    return await postgres.promote(address, port, login)


async def follow_again(engine: Engine, address: str, port: int, login: Credentials) -> None:
    """After a promotion: make the standby at ``address:port`` connect to the primary's Service
    afresh (both engines keep a link to a frozen primary until their replication timeout)."""
    if engine is Engine.REDIS:
        await redis.follow_again(address, port, login)
    else:
        await postgres.follow_again(address, port, login)


async def set_synchronous(
    engine: Engine, address: str, port: int, login: Credentials, on: bool
) -> bool:
    """Turn the primary's zero-loss mode on or off (PostgreSQL only: Redis has none)."""
    if engine is Engine.POSTGRES:
        return await postgres.set_synchronous(address, port, login, on)
    return False
