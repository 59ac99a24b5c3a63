"""The inter-shard bus: request/response and one-way messages between shard processes.

Every shard listens on an abstract-namespace Unix stream socket named after the server's
namespace and its shard id; a peer link is opened on first use and re-opened after the peer
restarts. Frames are ``u32 length`` + a msgpack-encoded ``BusMessage``. Requests carry an id
and are answered with a ``Reply`` of the same id; handlers run as tasks, so a slow request
does not hold up the link. A handler that raises (directly or as a task) answers its
request with status ``ErrorCode.ERROR``; the link stays open. A reply with a non-zero status
reaches the requester as ``PeerRefused`` (never as a reply without its data).
Back-pressure: writers await ``drain()``; at most ``MAX_IN_FLIGHT`` requests per link wait
for answers.

Ordering: messages sent on one link arrive in order, which the metadata replica relies on
(an event published before a reply is applied before the reply is seen).
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import socket
import struct
from typing import Any, Awaitable, Callable

import msgspec

from lurcher.core.wire.error_codes import ErrorCode

log = logging.getLogger(__name__)

FRAME = struct.Struct("<I")
MAX_FRAME_BYTES = 1 << 30
MAX_IN_FLIGHT = 256
CONNECT_ATTEMPTS = 50
CONNECT_RETRY_S = 0.1


class BusMessage(msgspec.Struct, tag=True, frozen=True):
    """Base of every bus message; ``rid`` 0 = one-way."""

    rid: int = 0


class Reply(BusMessage, frozen=True):
    status: int = 0
    payload: bytes = b""
    data: Any = None


_encoder = msgspec.msgpack.Encoder()


def bus_address(namespace: str, shard_id: int, kind: str = "bus") -> str:
    """The abstract socket name of a shard's endpoint (leading NUL = abstract namespace)."""
    return f"\0{namespace}/{kind}/{shard_id}"


class BusError(Exception):
    """A peer could not be reached or dropped the link while a request was pending."""


class PeerRefused(BusError):
    """The peer answered a request with a non-zero status (its handler failed or refused)."""

    def __init__(self, status: int, detail: str) -> None:
        super().__init__(f"refused with status {status}: {detail}" if detail
                         else f"refused with status {status}")
        self.status = status


class Link:
    """One connection to a peer: writes frames, matches replies to requests."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                 bus: "Bus") -> None:
        self.reader = reader
        self.writer = writer
        self.bus = bus
        self.pending: dict[int, asyncio.Future] = {}
        self.slots = asyncio.Semaphore(MAX_IN_FLIGHT)
        self.task = asyncio.ensure_future(self._read_loop())

    async def send(self, message: BusMessage) -> None:
        body = _encoder.encode(message)
        self.writer.write(FRAME.pack(len(body)) + body)
        await self.writer.drain()

    def send_nowait(self, message: BusMessage) -> None:
        """Queue a one-way message (ordered with every other write on this link)."""
        body = _encoder.encode(message)
        self.writer.write(FRAME.pack(len(body)) + body)

    async def request(self, message: BusMessage, timeout_s: float) -> Reply:
        async with self.slots:
            future = asyncio.get_running_loop().create_future()
            self.pending[message.rid] = future
            try:
                await self.send(message)
                reply = await asyncio.wait_for(future, timeout_s)
            finally:
                self.pending.pop(message.rid, None)
        if reply.status:
            raise PeerRefused(reply.status, reply.payload.decode(errors="replace"))
        return reply

    async def _read_loop(self) -> None:
        try:
            while True:
                header = await self.reader.readexactly(FRAME.size)
                (length,) = FRAME.unpack(header)
                if length > MAX_FRAME_BYTES:
                    raise BusError(f"bus frame of {length} bytes")
                message = self.bus.decoder.decode(await self.reader.readexactly(length))
                if isinstance(message, Reply):
                    future = self.pending.get(message.rid)
                    if future is not None and not future.done():
                        future.set_result(message)
                else:
                    self.bus.receive(self, message)
        except (asyncio.IncompleteReadError, ConnectionError, BusError) as exc:
            log.debug("bus link closed: %s", exc)
        finally:
            self.close()

    def close(self) -> None:
        for future in self.pending.values():
            if not future.done():
                future.set_exception(BusError("peer link closed"))
        self.pending.clear()
        self.writer.close()
        self.bus.forget(self)


Handler = Callable[[Link, Any], Awaitable[Reply | None] | Reply | None]


class Bus:
    """This shard's endpoint and its links to peers."""

    def __init__(self, namespace: str, shard_id: int, message_types: tuple[type, ...],
                 handlers: dict[type, Handler]) -> None:
        self.namespace = namespace
        self.shard_id = shard_id
        self.decoder = msgspec.msgpack.Decoder(Reply | _union(message_types))
        self.handlers = handlers
        self.links: dict[int, Link] = {}
        self.accepted: set[Link] = set()
        self.server: asyncio.AbstractServer | None = None
        self._rids = itertools.count(1)
        self._connecting: dict[int, asyncio.Future] = {}

    async def start(self) -> None:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.bind(bus_address(self.namespace, self.shard_id))
        self.server = await asyncio.start_unix_server(self._accept, sock=sock)

    async def _accept(self, reader, writer) -> None:
        self.accepted.add(Link(reader, writer, self))

    def forget(self, link: Link) -> None:
        self.accepted.discard(link)
        for peer, known in list(self.links.items()):
            if known is link:
                del self.links[peer]

    async def link(self, peer: int) -> Link:
        """The link to ``peer``, connecting (with retries while it starts) if needed."""
        link = self.links.get(peer)
        if link is not None:
            return link
        if peer not in self._connecting:
            self._connecting[peer] = asyncio.ensure_future(self._connect(peer))
        try:
            return await asyncio.shield(self._connecting[peer])
        finally:
            if self._connecting.get(peer) is not None and self._connecting[peer].done():
                self._connecting.pop(peer, None)

    async def _connect(self, peer: int) -> Link:
        last: Exception | None = None
        for _ in range(CONNECT_ATTEMPTS):
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                sock.connect(bus_address(self.namespace, peer))
                reader, writer = await asyncio.open_unix_connection(sock=sock)
            except (ConnectionError, FileNotFoundError, OSError) as exc:
                sock.close()
                last = exc
                await asyncio.sleep(CONNECT_RETRY_S)
                continue
            link = Link(reader, writer, self)
            self.links[peer] = link
            return link
        raise BusError(f"shard {peer} unreachable: {last}")

    def next_rid(self) -> int:
        return next(self._rids)

    async def request(self, peer: int, make: Callable[[int], BusMessage],
                      timeout_s: float = 30.0) -> Reply:
        """Send ``make(rid)`` to ``peer`` and wait for its reply. Raises BusError
        (PeerRefused for a reply with a non-zero status)."""
        link = await self.link(peer)
        try:
            return await link.request(make(self.next_rid()), timeout_s)
        except asyncio.TimeoutError:
            raise BusError(f"shard {peer} did not answer in {timeout_s} s") from None

    def receive(self, link: Link, message: Any) -> None:
        handler = self.handlers.get(type(message))
        if handler is None:
            log.warning("bus: no handler for %s", type(message).__name__)
            return
        try:
            result = handler(link, message)
        except Exception as exc:  # a failing handler must not kill the link
            result = _handler_failed(message, exc)
        if asyncio.iscoroutine(result):
            asyncio.ensure_future(self._answer_later(link, message, result))
        elif result is not None:
            link.send_nowait(result)

    async def _answer_later(self, link: Link, message: Any, pending: Awaitable) -> None:
        try:
            reply = await pending
        except Exception as exc:  # a failing handler must not kill the link
            reply = _handler_failed(message, exc)
        if reply is not None:
            link.send_nowait(reply)

    async def close(self) -> None:
        if self.server is not None:
            self.server.close()
        for link in list(self.links.values()) + list(self.accepted):
            link.close()


def _handler_failed(message: Any, exc: Exception) -> Reply:
    """The answer to a request whose handler raised: ``ErrorCode.ERROR``, as a command's
    unexpected exception is answered on the shard that received it."""
    log.error("bus handler for %s failed", type(message).__name__, exc_info=exc)
    return Reply(rid=message.rid, status=ErrorCode.ERROR, payload=str(exc).encode())


def _union(types: tuple[type, ...]):
    result = types[0]
    for t in types[1:]:
        result = result | t
    return result


def reserve_socket(address: tuple[str, int], kind: int = socket.SOCK_STREAM) -> socket.socket:
    """A bound, not listening, SO_REUSEPORT socket: fixes the port (port 0 resolved) for
    shard processes that bind the same address, without receiving connections itself."""
    family = socket.AF_INET6 if ":" in address[0] else socket.AF_INET
    sock = socket.socket(family, kind)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    sock.bind(address)
    return sock
