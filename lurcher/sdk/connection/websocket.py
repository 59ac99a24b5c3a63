"""``WebSocketConnection``: the Iggy binary protocol inside binary WebSocket messages (§15.1).

Each request is one binary message holding the TCP request frame; each response arrives as
one binary message (``status, length, payload``). A response split over several messages is
reassembled; text messages are skipped. ``ws://host:port/`` with no subprotocol, or
``wss://`` when ``config.tls`` (CA from ``tls_ca_file``; no checks when validation is off).
Options (``config.options``): ``response_buffer_size`` (the largest response payload, as
over TCP: default ``DEFAULT_MAX_RESPONSE_BYTES``; a frame announcing more fails with
INVALID_BYTES_RESPONSE) and ``max_message_size`` (bytes or "64 MiB"; default the response
buffer size plus a frame header: a longer message closes the connection, also with
INVALID_BYTES_RESPONSE), ``max_frame_size`` (the largest single frame of a response
message, as tungstenite's: default no limit of its own; a longer frame closes the
connection with INVALID_BYTES_RESPONSE) and ``max_write_buffer_size`` (the write buffer's
high-water mark: a send waits while more is buffered; tungstenite fails the write instead;
default websockets' 32 KiB). Any of them 0, or not a size, fails the connect with
INVALID_CONFIGURATION naming it (``size_setting``; a connection string refuses it at parse).
"""

from __future__ import annotations

import asyncio
import ssl

from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed, InvalidHandshake, InvalidURI
from websockets.frames import CloseCode
from websockets.protocol import State

from lurcher.core.wire.buffer import Buffer
from lurcher.core.wire.error_codes import ErrorCode
from lurcher.core.wire.errors import IggyError
from lurcher.core.wire.frames import CODE_BYTES, FRAME_HEADER, FRAME_HEADER_BYTES
from lurcher.sdk.config import ClientConfig
from lurcher.sdk.connection.base import Connection, oversized, response_limit, size_setting
from lurcher.sdk.connection.tcp import tls_context

_EMPTY = memoryview(b"")


class WebSocketConnection(Connection):
    """One WebSocket connection (``ws://`` or ``wss://``)."""
    LOST_ERRORS = (OSError, ConnectionClosed, ssl.SSLError)


    def __init__(self, config: ClientConfig) -> None:
        super().__init__()
        self.config = config
        self.host, self.port = config.host_port()
        self.limit = response_limit(config.options)
        self._ws: ClientConnection | None = None

    @property
    def uri(self) -> str:
        scheme = "wss" if self.config.tls else "ws"
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{scheme}://{host}:{self.port}/"

    @property
    def connected(self) -> bool:
        return self._ws is not None and self._ws.state is State.OPEN

    async def _connect(self) -> None:
        if self.connected:
            return
        cfg = self.config
        ssl_ctx: ssl.SSLContext | None = tls_context(cfg) if cfg.tls else None
        try:
            self._ws = await asyncio.wait_for(
                connect(self.uri, ssl=ssl_ctx, server_hostname=(cfg.tls_domain or self.host)
                        if cfg.tls else None, compression=None, ping_interval=None,
                        max_size=(self._max_message_bytes(),
                                  size_setting(cfg.options, "max_frame_size")),
                        open_timeout=None, user_agent_header=None, **self._write_limit()),
                cfg.connect_timeout_s)
        except asyncio.TimeoutError:
            raise IggyError(ErrorCode.TASK_TIMEOUT,
                            f"connect to {self.uri} timed out after "
                            f"{cfg.connect_timeout_s}s") from None
        except (OSError, ssl.SSLError, InvalidHandshake, InvalidURI) as e:
            raise IggyError(ErrorCode.CANNOT_ESTABLISH_CONNECTION, f"{self.uri}: {e}") from None

    async def _roundtrip(self, code: int, parts: list[Buffer]) -> tuple[int, memoryview]:
        assert self._ws is not None
        size = sum(len(p) for p in parts)
        await self._ws.send(b"".join([FRAME_HEADER.pack(CODE_BYTES + size, code), *parts]))
        data = await self._next_binary()
        while len(data) < FRAME_HEADER_BYTES:
            data += await self._next_binary()
        status, length = FRAME_HEADER.unpack_from(data)
        if status or length <= 1:
            return status, _EMPTY
        if length > self.limit:
            raise oversized(length, self.limit)
        while len(data) < FRAME_HEADER_BYTES + length:
            data += await self._next_binary()
        return status, memoryview(data)[FRAME_HEADER_BYTES:FRAME_HEADER_BYTES + length]

    def _max_message_bytes(self) -> int:
        """The ``max_message_size`` option, else one response frame. Raises IggyError."""
        given = size_setting(self.config.options, "max_message_size")
        return given or self.limit + FRAME_HEADER_BYTES

    def _write_limit(self) -> dict[str, int]:
        """websockets' ``write_limit`` from ``max_write_buffer_size``, if given."""
        high = size_setting(self.config.options, "max_write_buffer_size")
        return {} if high is None else {"write_limit": high}

    async def _next_binary(self) -> bytes:
        assert self._ws is not None
        while True:
            try:
                message = await self._ws.recv()
            except ConnectionClosed as e:
                if e.sent is None or e.sent.code != CloseCode.MESSAGE_TOO_BIG:
                    raise
                raise IggyError(ErrorCode.INVALID_BYTES_RESPONSE,
                                f"response message refused: {e.sent.reason}") from None
            if isinstance(message, bytes):
                return message

    async def _abort(self) -> None:
        ws, self._ws = self._ws, None
        if ws is None:
            return
        try:
            await asyncio.wait_for(ws.close(), 1.0)
        except (OSError, asyncio.TimeoutError, ConnectionClosed, ssl.SSLError):
            pass
