"""The WebSocket front end (wire §15.1): Iggy binary frames inside binary WebSocket messages.

Each connection is one session. Incoming binary messages are a byte stream fed to a
``FrameReader`` (a request frame may span messages, several may share one); every complete
frame is dispatched in order, and its response (``status, length, payload``) goes back as
one binary message. Text messages carry nothing Iggy understands: they are ignored (as the
0.8 server does) and counted. Ping/Pong and Close are handled by the ``websockets`` library.
A request frame over the limits (``FrameLimits``) is refused as on TCP and the connection is
closed; a message above ``max_message_size`` closes it with code 1009 (library behaviour).
Before login that message limit is lowered to the unauthenticated frame limit, so an
unauthenticated client cannot make the library buffer a large message. Back-pressure: one
message is handled at a time and each reply is awaited until the transport drained it;
the library queues at most ``MAX_QUEUED_FRAMES`` incoming frames meanwhile.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from typing import Any

from websockets.asyncio.server import Server, ServerConnection, serve
from websockets.exceptions import ConnectionClosed

from lurcher.auth.session import TRANSPORT_WEBSOCKET
from lurcher.config import parse_size
from lurcher.core.shard.reply import error_frame, ok_frame
from lurcher.core.wire.error_codes import ErrorCode
from lurcher.core.wire.errors import IggyError
from lurcher.core.connection.framing import BadFrame, Frame, FrameReader
from lurcher.core.net import split_address

log = logging.getLogger(__name__)
logging.getLogger("websockets.server").setLevel(logging.WARNING)

DEFAULT_MAX_MESSAGE_BYTES = 64 * 1024 * 1024
MAX_QUEUED_FRAMES = 4
CLOSE_GOING_AWAY = 1001


class WebSocketClient:
    """One WebSocket connection: its session and the request loop."""

    def __init__(self, shard: Any, ws: ServerConnection, max_message: int) -> None:
        self.shard = shard
        self.ws = ws
        self.max_message = max_message
        self.reader = FrameReader(shard.limits.frames, self.authenticated)
        peer = ws.remote_address
        address = f"{peer[0]}:{peer[1]}" if peer else "unknown"
        self.session = shard.open_session(address, TRANSPORT_WEBSOCKET, self)
        self.text_messages = 0

    def authenticated(self) -> bool:
        return self.session is not None and self.session.authenticated

    def limit_messages(self) -> None:
        """The library's message limit: small until the session is logged in."""
        unauthenticated = self.shard.limits.frames.max_unauthenticated + 8
        self.ws.protocol.max_message_size = (
            self.max_message if self.authenticated() else min(self.max_message, unauthenticated))

    async def serve(self) -> None:
        try:
            self.limit_messages()
            async for message in self.ws:
                if isinstance(message, str):
                    self.text_messages += 1
                    log.debug("ignoring a text message from %s", self.session.address)
                    continue
                self.reader.feed(message)
                if not await self.drain_frames():
                    break
        except ConnectionClosed:
            pass
        finally:
            self.shard.close_session(self.session)

    async def drain_frames(self) -> bool:
        """Handle every complete frame; False once the connection must close."""
        while True:
            frame = self.reader.next_frame()
            if frame is None:
                return True
            if isinstance(frame, BadFrame):
                log.info("refusing frame from %s: %s", self.session.address, frame.detail)
                await self.send([error_frame(frame.status)])
                if frame.fatal:
                    await self.ws.close(1008, "frame too large")
                    return False
                continue
            parts = await self.run(frame)
            self.limit_messages()  # before the reply: a client may send more once it has it
            await self.send(parts)

    async def run(self, frame: Frame) -> list[Any]:
        """The response buffers of one request (an error frame on failure)."""
        try:
            result = self.shard.dispatcher.dispatch(self.session, frame.code, frame.payload)
            if inspect.isawaitable(result):
                result = await result
        except IggyError as exc:
            log.debug("command %d -> %s", frame.code, exc)
            return [error_frame(exc.status)]
        except Exception:
            log.exception("command %d failed", frame.code)
            return [error_frame(ErrorCode.ERROR)]
        return ok_frame(result)

    async def send(self, parts: list[Any]) -> None:
        await self.ws.send(b"".join(parts))

    def disconnect(self, status: int = ErrorCode.DISCONNECTED) -> None:
        """Server-initiated close: one error frame, then a close handshake."""
        asyncio.ensure_future(self._disconnect(status))

    async def _disconnect(self, status: int) -> None:
        try:
            await self.ws.send(error_frame(status))
            await self.ws.close(CLOSE_GOING_AWAY, "server closed the session")
        except ConnectionClosed:
            pass


def max_message_bytes(section: dict[str, Any]) -> int:
    value = section.get("max_message_size")
    return parse_size(value) if value else DEFAULT_MAX_MESSAGE_BYTES


async def start_websocket(shard: Any, address: str, section: dict[str, Any] | None = None,
                          ssl_context: Any = None, reuse_port: bool = False) -> Server:
    """Listen on ``address`` (``ws://`` or ``wss://`` with ``ssl_context``). Raises OSError."""
    section = section or {}
    host, port = split_address(address)
    max_message = max_message_bytes(section)

    async def handler(ws: ServerConnection) -> None:
        await WebSocketClient(shard, ws, max_message).serve()

    return await serve(handler, host, port, ssl=ssl_context, compression=None,
                       max_size=max_message, max_queue=MAX_QUEUED_FRAMES,
                       ping_interval=None, server_header=None, reuse_port=reuse_port or None)


def websocket_address(server: Server) -> str:
    host, port = server.sockets[0].getsockname()[:2]
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
