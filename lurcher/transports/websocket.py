"""The WebSocket front end (wire §15.1): Iggy binary frames inside binary WebSocket messages.

Each connection is one session. Incoming binary messages are a byte stream fed to a
``FrameReader`` (a request frame may span messages, several may share one); every complete
frame is dispatched in order, and its response (``status, length, payload``) goes back as
one binary message. Text messages carry nothing Iggy understands: they are ignored (as the
0.8 server does) and counted. Ping/Pong and Close are handled by the ``websockets`` library.
A request frame over the limits (``FrameLimits``) is refused as on TCP and the connection is
closed; a message above ``max_message_size`` closes it with code 1009 (library behaviour).
A reply whose stored bytes cannot be read is answered CANNOT_READ_FILE (``read_parts``).
Before login that message limit is lowered to the unauthenticated frame limit, so an
unauthenticated client cannot make the library buffer a large message. Framing, order,
errors and the session are the connection core's (``ServerConnection``); this module is its
adapter. Back-pressure: one message is handled at a time, its replies are sent (each awaited
until the transport drained it) before the next message is read, and the core takes no
request while more than ``WRITE_HIGH_WATER_BYTES`` of replies wait; the library queues at
most ``MAX_QUEUED_FRAMES`` incoming frames meanwhile. The library answers Ping (and Close)
frames by itself, without asking us; ``ReadPausingConnection`` stops reading the socket while
the transport's output is above the library's write limit, so a client that sends pings but
never reads the pongs cannot make the server buffer without bound. A connection counts in
the binary listeners' cap (``transports.admission``) from the start of its opening
handshake to its end; one beyond the cap is answered ``503 Service Unavailable`` and closed
before its upgrade is read. With ``[websocket.tls]`` the TLS handshake counts too
(``transports.handshake``: within ``limits.login_timeout``; one beyond the cap is closed at
once, before it). The session's login deadline runs from the accept, the TLS and WebSocket
handshakes included.
"""

from __future__ import annotations

import logging
from collections import deque
from typing import TYPE_CHECKING, Any

from websockets.asyncio.server import ServerConnection, serve
from websockets.exceptions import ConnectionClosed

from lurcher.auth.session import TRANSPORT_WEBSOCKET
from lurcher.core.connection.server import CLOSE_REFUSED
from lurcher.core.connection.server import ServerConnection as Connection
from lurcher.core.wire.address import split_address
from lurcher.core.shard.reply import read_parts
from lurcher.transports.admission import SERVICE_UNAVAILABLE, ConnectionCap
from lurcher.transports.connection import peer_address, run_tracked
from lurcher.transports.frontend import ListenContext, Listener, ServerListener, tls_context
from lurcher.transports.handshake import gated, tls_accept
from lurcher.transports.sendfile import WRITE_HIGH_WATER_BYTES, WRITE_LOW_WATER_BYTES

if TYPE_CHECKING:
    from lurcher.runtime.settings import WebSocket

log = logging.getLogger(__name__)
logging.getLogger("websockets.server").setLevel(logging.WARNING)

MAX_QUEUED_FRAMES = 4
CLOSE_GOING_AWAY = 1001
CLOSE_POLICY = 1008
CLOSE_REASONS = {CLOSE_GOING_AWAY: "server closed the session", CLOSE_POLICY: "frame too large"}


class ReadPausingConnection(ServerConnection):
    """The library's connection, with reading paused while writing is, counted in the
    listeners' connection cap (if any).

    Reading is paused when either the incoming-frame queue is full (the library's own rule)
    or the transport's output is above its high-water mark (a client not reading the
    library's automatic Pong replies); it resumes only when neither holds. A connection
    beyond the cap is answered 503 and closed as it is made, before its upgrade request.
    """

    def __init__(self, *args: Any, cap: ConnectionCap | None = None,
                 accepted_us: int | None = None, **kwargs: Any) -> None:
        """``accepted_us``: when the listener accepted the connection (the session's login
        deadline runs from then; None: once the WebSocket handshake is done)."""
        super().__init__(*args, **kwargs)
        self.cap = cap
        self.accepted_us = accepted_us
        self.counted = False  # in cap's count until connection_lost

    def connection_made(self, transport: Any) -> None:
        super().connection_made(transport)
        self.recv_messages.resume = self.resume_reading_if_drained
        if self.cap is None:
            return
        self.counted = self.cap.admit()
        if not self.counted:
            transport.write(SERVICE_UNAVAILABLE)
            transport.close()

    def connection_lost(self, exc: Exception | None) -> None:
        if self.counted:
            self.counted = False
            self.cap.release()
        super().connection_lost(exc)

    def pause_writing(self) -> None:
        super().pause_writing()
        self.transport.pause_reading()

    def resume_writing(self) -> None:
        super().resume_writing()
        self.resume_reading_if_drained()

    def resume_reading_if_drained(self) -> None:
        """Read again unless the frame queue is full or output still waits."""
        if not self.paused and not self.recv_messages.paused:
            self.transport.resume_reading()


class WebSocketClient:
    """The adapter of one WebSocket connection around its ``ServerConnection``.

    Binary messages go into the core; the replies it writes are queued and sent, in order,
    by ``flush`` (one message each); an awaited reply is awaited there too. While more than
    ``WRITE_HIGH_WATER_BYTES`` wait to be sent the core is paused (it takes no request).
    """

    def __init__(self, shard: Any, ws: ServerConnection, max_message: int,
                 accepted_us: int | None = None) -> None:
        self.shard = shard
        self.ws = ws
        self.max_message = max_message
        self.core = Connection(shard, TRANSPORT_WEBSOCKET, self, accepted_us=accepted_us)
        self.outgoing: deque[bytes] = deque()
        self.outgoing_bytes = 0
        self.paused = False
        self.pending: Any = None
        self.close_code: int | None = None
        self.in_turn = False  # serve (or a flush of its own) is handling output now
        self.text_messages = 0

    def limit_messages(self) -> None:
        """The library's message limit: small until the session is logged in."""
        unauthenticated = self.shard.limits.frames.max_unauthenticated + 8
        self.ws.protocol.max_message_size = (
            self.max_message if self.core.authenticated()
            else min(self.max_message, unauthenticated))

    async def serve(self) -> None:
        self.core.open(peer_address(self.ws.remote_address))
        try:
            self.limit_messages()
            async for message in self.ws:
                if isinstance(message, str):
                    self.text_messages += 1
                    log.debug("ignoring a text message from %s", self.core.session.address)
                    continue
                self.in_turn = True
                try:
                    self.core.receive_data(message)
                    await self.flush()
                finally:
                    self.in_turn = False
                if self.close_code is not None:
                    break
        except ConnectionClosed:
            pass
        finally:
            self.core.connection_lost()

    async def flush(self) -> None:
        """Send what the core wrote and await what it waits for, until it is idle; then
        close if it asked to."""
        while self.outgoing or self.pending is not None:
            if self.outgoing:
                self.limit_messages()  # before a reply: the client may send more after it
                await self.send_next()
            else:
                pending, self.pending = self.pending, None
                await self.core.settle(pending)
        if self.close_code is not None:
            await self.ws.close(self.close_code, CLOSE_REASONS[self.close_code])

    async def send_next(self) -> None:
        message = self.outgoing.popleft()
        self.outgoing_bytes -= len(message)
        await self.ws.send(message)
        if self.paused and self.outgoing_bytes <= WRITE_LOW_WATER_BYTES:
            self.paused = False
            self.core.resume_writing()

    # -- intents of the core ------------------------------------------------------------
    def write(self, parts: list[Any]) -> None:
        message = b"".join(read_parts(parts))
        self.outgoing.append(message)
        self.outgoing_bytes += len(message)
        if not self.paused and self.outgoing_bytes > WRITE_HIGH_WATER_BYTES:
            self.paused = True
            self.core.pause_writing()
        self.flush_later()

    def wait(self, pending: Any) -> None:
        self.pending = pending

    def pause_reading(self) -> None:
        """Nothing to do: the next message is read only once ``flush`` is done."""

    def resume_reading(self) -> None:
        """See ``pause_reading``."""

    def close(self, reason: str) -> None:
        self.close_code = CLOSE_POLICY if reason == CLOSE_REFUSED else CLOSE_GOING_AWAY
        self.flush_later()

    def abort(self) -> None:
        self.ws.transport.abort()

    def can_migrate(self) -> bool:
        return False

    def migrate(self, shard_id: int, session: Any, pending: bytes) -> bool:
        return False

    def flush_later(self) -> None:
        """Output outside ``serve``'s turn (a server-initiated disconnect): flush it now."""
        if not self.in_turn:
            self.in_turn = True
            run_tracked(self.flush_quietly(), "flushing WebSocket output")

    async def flush_quietly(self) -> None:
        """``flush``, a closed connection being no error (another is logged by
        ``run_tracked``)."""
        try:
            await self.flush()
        except ConnectionClosed:
            pass
        finally:
            self.in_turn = False


async def listen(shard: Any, section: WebSocket, context: ListenContext) -> Listener:
    """Listen on ``section.address`` (``wss://`` with ``[websocket.tls]``). Raises OSError,
    TlsConfigError."""
    host, port = split_address(section.address)
    max_message = section.max_message_size

    async def handler(ws: ReadPausingConnection) -> None:
        await WebSocketClient(shard, ws, max_message, ws.accepted_us).serve()

    def connection(*args: Any, **kwargs: Any) -> ReadPausingConnection:
        return ReadPausingConnection(*args, cap=cap, accepted_us=shard.clock(), **kwargs)

    cap = context.connection_cap
    tls = tls_accept(tls_context(section.tls, context.data_path),
                     shard.config.typed.limits.login_timeout)
    # the library returns what create_connection builds as the listener's protocol
    server = await serve(handler, host, port, compression=None, max_size=max_message,
                         max_queue=MAX_QUEUED_FRAMES, ping_interval=None, server_header=None,
                         reuse_port=context.reuse_port or None,
                         create_connection=gated(connection, tls, cap))
    return ServerListener(server, server.sockets[0].getsockname(), tls)
