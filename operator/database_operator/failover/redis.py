"""Redis's answers: its role and replication offset (``INFO replication``), its promotion
(``REPLICAOF NO ONE``), and a replica's fresh link to the primary (``CLIENT KILL TYPE MASTER``).

The few commands need no client library: RESP, Redis's protocol, is lines and lengths. The
password goes in an ``AUTH`` command on the connection, never anywhere else.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

from database_operator.failover.answers import PROBE_TIMEOUT_S, Credentials, EngineState

#: Redis's replies are one of these; an error reply is raised as RedisError.
Reply = str | int | bytes | list["Reply"] | None


class RedisError(Exception):
    """An error reply (``-ERR ...``) or a reply that is not RESP."""


#: What a connection to an engine that is gone, stopping or starting may raise.
UNANSWERED = (TimeoutError, OSError, RedisError, asyncio.IncompleteReadError, ValueError)


class _Connection:
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer

    async def command(self, *words: str) -> Reply:
        encoded = [word.encode() for word in words]
        request = b"*%d\r\n" % len(encoded) + b"".join(
            b"$%d\r\n%s\r\n" % (len(word), word) for word in encoded
        )
        self.writer.write(request)
        await self.writer.drain()
        return await asyncio.wait_for(self._reply(), PROBE_TIMEOUT_S)

    async def _reply(self) -> Reply:
        line = (await self.reader.readuntil(b"\r\n"))[:-2]
        kind, rest = line[:1], line[1:]
        if kind == b"+":
            return rest.decode()
        if kind == b"-":
            raise RedisError(rest.decode(errors="replace"))
        if kind == b":":
            return int(rest)
        if kind == b"$":
            size = int(rest)
            return None if size < 0 else (await self.reader.readexactly(size + 2))[:-2]
        if kind == b"*":
            count = int(rest)
            return None if count < 0 else [await self._reply() for _ in range(count)]
        raise RedisError(f"not a RESP reply: {line[:40]!r}")


@contextlib.asynccontextmanager
async def _connected(address: str, port: int, login: Credentials) -> AsyncIterator[_Connection]:
    reader, writer = await asyncio.wait_for(asyncio.open_connection(address, port), PROBE_TIMEOUT_S)
    try:
        connection = _Connection(reader, writer)
        await connection.command("AUTH", login.password)
        yield connection
    finally:
        writer.close()
        with contextlib.suppress(*UNANSWERED):
            await asyncio.wait_for(writer.wait_closed(), PROBE_TIMEOUT_S)


def parse_info(text: str) -> dict[str, str]:
    """``INFO``'s ``key:value`` lines (sections and blank lines aside)."""
    fields = {}
    for line in text.splitlines():
        key, colon, value = line.partition(":")
        if colon and not key.startswith("#"):
            fields[key.strip()] = value.strip()
    return fields


def state_of(info: dict[str, str]) -> EngineState:
    """A Redis's role and position: a master's offset is what it has written, a replica's what
    it has received from its master."""
    standby = info.get("role") == "slave"
    offset = info.get("slave_repl_offset" if standby else "master_repl_offset", "0")
    return EngineState(
        standby=standby,
        position=int(offset or 0),
        timeline=0,
        streaming=standby and info.get("master_link_status") == "up",
    )


async def ask(address: str, port: int, login: Credentials) -> EngineState | None:
    """The Redis at ``address:port``, or None if it does not answer in time."""
    try:
        async with _connected(address, port, login) as connection:
            reply = await connection.command("INFO", "replication")
    except UNANSWERED:
        return None
    if not isinstance(reply, bytes):
        return None
    return state_of(parse_info(reply.decode(errors="replace")))


async def promote(address: str, port: int, login: Credentials) -> bool:
    """``REPLICAOF NO ONE``: the replica at ``address:port`` becomes a master, keeping its data
    (and its replication history as replid2, so the other replicas continue from it)."""
    try:
        async with _connected(address, port, login) as connection:
            await connection.command("REPLICAOF", "NO", "ONE")
            reply = await connection.command("INFO", "replication")
    except UNANSWERED:
        return False
    return isinstance(reply, bytes) and b"role:master" in reply


async def follow_again(address: str, port: int, login: Credentials) -> None:
    """Break the replica's link to its master: it reconnects to the primary's Service, which
    now leads to the new primary (without this, a link to a frozen master stays up until
    repl-timeout, 60 s)."""
    with contextlib.suppress(*UNANSWERED):
        async with _connected(address, port, login) as connection:
            await connection.command("CLIENT", "KILL", "TYPE", "master")
