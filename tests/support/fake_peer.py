"""A fake server for client tests: an asyncio TCP server on 127.0.0.1 (port 0) whose
subclasses decide, in ``serve``, what each accepted connection gets, so a test can play a
peer that misbehaves in ways a real server cannot.

Invariants: ``start`` binds before returning (``address`` is valid after it); ``close``
closes every accepted connection and the listening socket; ``peers`` (a fixture helper)
closes every peer it started when the test ends.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from typing import TypeVar

Peer = TypeVar("Peer", bound="FakePeer")


class FakePeer:
    def __init__(self) -> None:
        self.connections = 0
        self.writers: list[asyncio.StreamWriter] = []
        self.server: asyncio.Server | None = None

    async def start(self: Peer) -> Peer:
        self.server = await asyncio.start_server(self._accept, "127.0.0.1", 0)
        return self

    @property
    def address(self) -> str:
        assert self.server is not None
        return "127.0.0.1:%d" % self.server.sockets[0].getsockname()[1]

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        connection, self.connections = self.connections, self.connections + 1
        self.writers.append(writer)
        try:
            await self.serve(connection, reader, writer)
        except (asyncio.IncompleteReadError, ConnectionError, asyncio.CancelledError):
            pass

    async def serve(self, connection: int, reader: asyncio.StreamReader,
                    writer: asyncio.StreamWriter) -> None:
        """Answer connection number ``connection`` (from 0)."""
        raise NotImplementedError

    async def close(self) -> None:
        for writer in self.writers:
            writer.close()
        assert self.server is not None
        self.server.close()
        await self.server.wait_closed()


async def peers(make: Callable[..., Peer]) -> AsyncIterator[Callable[..., "asyncio.Future[Peer]"]]:
    """For a fixture: yields ``start(*args)``, which starts ``make(*args)``; closes them all
    afterwards."""
    started: list[Peer] = []

    async def start(*args: object) -> Peer:
        started.append(await make(*args).start())
        return started[-1]

    yield start
    for peer in started:
        await peer.close()
