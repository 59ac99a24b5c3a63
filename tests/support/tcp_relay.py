"""A TCP relay for one inter-node link that the test controls (the UDP relay's TCP sibling).

``TcpRelay(target)`` listens on 127.0.0.1 (port 0) and pipes every connection it accepts to
``target`` and back, byte for byte. ``cut()`` aborts every connection it carries (both ends
see a reset) and, until ``heal()``, aborts each new one as soon as it is accepted: the link
is down as if the network between the two nodes had failed, while both nodes keep running.
``lose_next_reply()``: the next bytes the target sends back are dropped and their connection
aborted, once (a request reached the target, its answer never reaches the client).

Invariants: bytes are forwarded in order and unchanged, or the connection is aborted on both
sides (never half-forwarded then resumed); a slow reader pauses its writer (flow control in
both directions), so the relay's memory stays bounded by the transports' high-water marks.
"""

from __future__ import annotations

import asyncio


class _End(asyncio.Protocol):
    """One side of a relayed connection; ``peer`` is the other side's transport."""

    def __init__(self, pair: "_Pair") -> None:
        self.pair = pair
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        relay = self.pair.relay
        if relay.reply_to_lose and self is self.pair.back:
            relay.reply_to_lose = False
            self.pair.abort()
            return
        other = self.pair.other(self)
        if other.transport is not None and not other.transport.is_closing():
            other.transport.write(data)

    def pause_writing(self) -> None:
        other = self.pair.other(self)
        if other.transport is not None:
            other.transport.pause_reading()

    def resume_writing(self) -> None:
        other = self.pair.other(self)
        if other.transport is not None and not other.transport.is_closing():
            other.transport.resume_reading()

    def eof_received(self) -> bool:
        other = self.pair.other(self)
        if other.transport is not None and other.transport.can_write_eof():
            other.transport.write_eof()
        return True  # keep our side open for the other direction

    def connection_lost(self, exc: Exception | None) -> None:
        self.pair.abort()


class _Pair:
    """The accepted (front) and dialed (back) ends of one relayed connection."""

    def __init__(self, relay: "TcpRelay") -> None:
        self.relay = relay
        self.front: _End = _Front(self)
        self.back = _End(self)
        self.dialing: asyncio.Future | None = None

    def other(self, end: _End) -> _End:
        return self.back if end is self.front else self.front

    def abort(self) -> None:
        self.relay.pairs.discard(self)
        for end in (self.front, self.back):
            if end.transport is not None and not end.transport.is_closing():
                end.transport.abort()


class _Front(_End):
    """The accepted end: dials the target before forwarding anything."""

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        super().connection_made(transport)
        relay = self.pair.relay
        if relay.is_cut:
            transport.abort()
            return
        relay.pairs.add(self.pair)
        self.transport.pause_reading()
        self.pair.dialing = asyncio.ensure_future(self._dial())

    async def _dial(self) -> None:
        loop = asyncio.get_running_loop()
        host, port = self.pair.relay.target
        try:
            await loop.create_connection(lambda: self.pair.back, host, port)
        except OSError:
            self.pair.abort()
            return
        if self.pair not in self.pair.relay.pairs:  # cut while dialing
            self.pair.abort()
            return
        if not self.transport.is_closing():
            self.transport.resume_reading()


class TcpRelay:
    """Forwards connections made to ``address`` to ``target``; ``cut``/``heal`` the path."""

    def __init__(self, target: tuple[str, int]) -> None:
        self.target = target
        self.is_cut = False
        self.pairs: set[_Pair] = set()
        self.server: asyncio.base_events.Server | None = None
        self.cuts = 0
        self.reply_to_lose = False

    async def start(self) -> "TcpRelay":
        loop = asyncio.get_running_loop()
        self.server = await loop.create_server(self._accept, "127.0.0.1", 0)
        return self

    def _accept(self) -> _End:
        return _Pair(self).front

    @property
    def port(self) -> int:
        assert self.server is not None
        return self.server.sockets[0].getsockname()[1]

    def cut(self) -> None:
        """Abort every relayed connection; refuse new ones until ``heal``."""
        self.is_cut = True
        self.cuts += 1
        for pair in list(self.pairs):
            pair.abort()

    def heal(self) -> None:
        self.is_cut = False

    def lose_next_reply(self) -> None:
        """Drop the next bytes the target sends back and abort their connection (once)."""
        self.reply_to_lose = True

    async def close(self) -> None:
        self.cut()
        if self.server is not None:
            self.server.close()
            await self.server.wait_closed()
