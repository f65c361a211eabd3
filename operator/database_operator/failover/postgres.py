"""PostgreSQL's answers: its role, WAL position and timeline; its promotion (asyncpg)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

import asyncpg

from database_operator.failover.answers import PROBE_TIMEOUT_S, Credentials, EngineState

# The role and the WAL position in one round trip: a standby's position is what it has received
# (what a promotion keeps), else what it has replayed; a primary's is its current insert point.
# The timeline: a standby's is the one it receives (its last checkpoint's may be an old one).
ROLE_QUERY = """
SELECT pg_is_in_recovery() AS standby,
       (CASE WHEN pg_is_in_recovery()
             THEN coalesce(pg_last_wal_receive_lsn(), pg_last_wal_replay_lsn())
             ELSE pg_current_wal_lsn() END - '0/0'::pg_lsn)::bigint AS position,
       coalesce((SELECT received_tli FROM pg_stat_wal_receiver),
                (SELECT timeline_id FROM pg_control_checkpoint())) AS timeline,
       EXISTS (SELECT FROM pg_stat_wal_receiver WHERE status = 'streaming') AS streaming,
       current_setting('synchronous_standby_names') = $1 AS synchronous
"""
#: spec.failover.synchronous: a commit is acknowledged once any one standby has it.
SYNCHRONOUS_STANDBY_NAMES = "ANY 1 (*)"


#: What a connection to an engine that is gone, stopping or starting may raise; asyncpg's
#: InternalClientError ("cannot switch to state 12") too, seen on a real node when a server
#: froze mid-query: a probe says "no answer", never fails the reconcile.
UNANSWERED = (
    TimeoutError,
    OSError,
    asyncpg.PostgresError,
    asyncpg.InterfaceError,
    asyncpg.InternalClientError,
)


@contextlib.asynccontextmanager
async def _connected(
    address: str, port: int, credentials: Credentials
) -> AsyncIterator[asyncpg.Connection]:
    connection = await asyncpg.connect(
        host=address,
        port=port,
        user=credentials.user,
        password=credentials.password,
        database="postgres",
        timeout=PROBE_TIMEOUT_S,
        command_timeout=PROBE_TIMEOUT_S,
        ssl=False,
    )
    try:
        yield connection
    finally:
        with contextlib.suppress(*UNANSWERED):
            await asyncio.wait_for(connection.close(), PROBE_TIMEOUT_S)


async def ask(address: str, port: int, credentials: Credentials) -> EngineState | None:
    """The engine at ``address:port``, or None if it does not answer in time."""
    try:
        async with _connected(address, port, credentials) as connection:
            row = await connection.fetchrow(ROLE_QUERY, SYNCHRONOUS_STANDBY_NAMES)
    except UNANSWERED:
        return None
    if row is None:
        return None
    return EngineState(
        standby=bool(row["standby"]),
        position=int(row["position"] or 0),
        timeline=int(row["timeline"] or 0),
        streaming=bool(row["streaming"]),
        synchronous=bool(row["synchronous"]),
    )


#: Seconds pg_promote waits for the standby to finish recovery and accept writes.
PROMOTE_WAIT_S = 10


async def promote(address: str, port: int, credentials: Credentials) -> bool:
    """Promote the standby at ``address:port`` and wait for it to accept writes; whether it
    does (a server that is a primary already does)."""
    try:
        async with _connected(address, port, credentials) as connection:
            if not await connection.fetchval("SELECT pg_is_in_recovery()"):
                return True
            return bool(
                await connection.fetchval(
                    "SELECT pg_promote(true, $1)", PROMOTE_WAIT_S, timeout=PROMOTE_WAIT_S + 5
                )
            )
    except UNANSWERED:
        return False


async def follow_again(address: str, port: int, credentials: Credentials) -> None:
    """End the standby's WAL receiver: the startup process starts a new one, which connects to
    the primary's Service afresh — now the new primary's — and follows its timeline. Without
    this, a receiver connected to a frozen primary waits for wal_receiver_timeout (60 s)."""
    with contextlib.suppress(*UNANSWERED):
        async with _connected(address, port, credentials) as connection:
            await connection.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_wal_receiver")


async def set_synchronous(address: str, port: int, credentials: Credentials, on: bool) -> bool:
    """Turn zero-loss mode on (or off) on the primary at ``address:port``: ALTER SYSTEM, which
    a reload applies (no restart); whether it was done."""
    statement = (
        f"ALTER SYSTEM SET synchronous_standby_names = '{SYNCHRONOUS_STANDBY_NAMES}'"
        if on
        else "ALTER SYSTEM RESET synchronous_standby_names"
    )
    try:
        async with _connected(address, port, credentials) as connection:
            await connection.execute(statement)
            await connection.execute("SELECT pg_reload_conf()")
    except UNANSWERED:
        return False
    return True
