"""``QuicConnection``: the Iggy binary protocol over QUIC (aioquic), §15.2.

One QUIC connection; every request opens a new bidirectional stream, writes the request
frame, finishes its side and reads the response frame to the end of the stream. No ALPN.
As the Iggy SDK, the server certificate is not validated by default and the TLS server name
is ``localhost``; with ``tls_ca_file`` set it is validated against that CA (server name
``tls_domain`` or ``localhost``). Options (``config.options``): ``response_buffer_size``
(bytes, default 10 MB: a larger response is an error), ``max_idle_timeout`` (humantime or
seconds, default 10 s).
"""

from __future__ import annotations

import asyncio
import socket
import ssl
from typing import Any

from aioquic.asyncio import connect
from aioquic.asyncio.protocol import QuicConnectionProtocol
from aioquic.quic.configuration import QuicConfiguration

from lurcher.core.wire.buffer import Buffer
from lurcher.core.wire.error_codes import ErrorCode
from lurcher.core.wire.errors import IggyError
from lurcher.core.wire.frames import CODE_BYTES, FRAME_HEADER, FRAME_HEADER_BYTES
from lurcher.sdk.config import ClientConfig
from lurcher.sdk.connection.base import Connection
from lurcher.sdk.connection.websocket import size_option
from lurcher.core.wire.units import parse_duration

_EMPTY = memoryview(b"")
DEFAULT_RESPONSE_BUFFER_BYTES = 10_000_000
DEFAULT_IDLE_TIMEOUT_S = 10.0
DEFAULT_SERVER_NAME = "localhost"


def client_configuration(config: ClientConfig) -> QuicConfiguration:
    idle = config.options.get("max_idle_timeout")
    quic = QuicConfiguration(is_client=True, alpn_protocols=None,
                             server_name=config.tls_domain or DEFAULT_SERVER_NAME,
                             idle_timeout=parse_duration(idle) if idle else DEFAULT_IDLE_TIMEOUT_S,
                             max_stream_data=4 * 1024 * 1024, max_data=16 * 1024 * 1024)
    if config.tls_ca_file:
        quic.load_verify_locations(config.tls_ca_file)
        quic.verify_mode = ssl.CERT_REQUIRED
    else:
        quic.verify_mode = ssl.CERT_NONE
    return quic


class _ClientProtocol(QuicConnectionProtocol):
    """aioquic's client protocol on a *connected* UDP socket, so an ICMP "port unreachable"
    (nobody listens there) reaches ``error_received`` and fails the handshake at once
    instead of after the connect timeout. The handshake waiter's exception is always
    retrieved (no "Future exception was never retrieved" when a connect is abandoned)."""

    def connect(self, addr: Any, transmit: bool = True) -> None:
        sock = self._transport.get_extra_info("socket")
        with socket.fromfd(sock.fileno(), sock.family, sock.type) as shared:
            shared.connect(addr)
        super().connect(addr, transmit)

    async def wait_connected(self) -> None:
        if not self._connected and self._connected_waiter is None:
            self._connected_waiter = self._loop.create_future()
            self._connected_waiter.add_done_callback(_retrieve)
        waiter = self._connected_waiter
        if waiter is not None:
            await asyncio.shield(waiter)

    def error_received(self, exc: Exception) -> None:
        waiter = self._connected_waiter
        if waiter is not None and not waiter.done():
            self._connected_waiter = None
            waiter.set_exception(exc)


def _retrieve(future: asyncio.Future) -> None:
    if not future.cancelled():
        future.exception()


class QuicConnection(Connection):
    LOST_ERRORS = (OSError, ConnectionError, asyncio.IncompleteReadError)

    def __init__(self, config: ClientConfig) -> None:
        super().__init__()
        self.config = config
        self.host, self.port = config.host_port()
        self.limit = (size_option(config.options.get("response_buffer_size"))
                      or DEFAULT_RESPONSE_BUFFER_BYTES)
        self._cm: Any = None
        self._proto: QuicConnectionProtocol | None = None
        self._lost = False

    @property
    def connected(self) -> bool:
        return self._proto is not None and not self._lost and not self._closed_by_peer()

    def _closed_by_peer(self) -> bool:
        assert self._proto is not None
        return self._proto._closed.is_set()

    async def _connect(self) -> None:
        if self.connected:
            return
        cm = connect(self.host, self.port, configuration=client_configuration(self.config),
                     create_protocol=_ClientProtocol, wait_connected=True)
        try:
            self._proto = await asyncio.wait_for(cm.__aenter__(), self.config.connect_timeout_s)
        except asyncio.TimeoutError:
            raise IggyError(ErrorCode.TASK_TIMEOUT, f"QUIC connect to {self.config.address} "
                            f"timed out after {self.config.connect_timeout_s}s") from None
        except (OSError, ConnectionError, ssl.SSLError) as e:
            raise IggyError(ErrorCode.CANNOT_ESTABLISH_CONNECTION,
                            f"{self.config.address}: {e!r}") from None
        self._cm, self._lost = cm, False

    def _on_lost(self) -> None:
        self._lost = True

    async def _roundtrip(self, code: int, parts: list[Buffer]) -> tuple[int, memoryview]:
        assert self._proto is not None
        reader, writer = await self._proto.create_stream()
        size = sum(len(p) for p in parts)
        writer.write(FRAME_HEADER.pack(CODE_BYTES + size, code))
        for part in parts:
            writer.write(bytes(part))
        writer.write_eof()
        header = await reader.readexactly(FRAME_HEADER_BYTES)
        status, length = FRAME_HEADER.unpack(header)
        if status or length <= 1:
            return status, _EMPTY
        if length > self.limit:
            raise IggyError(ErrorCode.INVALID_BYTES_RESPONSE,
                            f"response of {length} bytes exceeds response_buffer_size {self.limit}")
        return status, memoryview(await reader.readexactly(length))

    async def _abort(self) -> None:
        cm, self._cm, self._proto = self._cm, None, None
        if cm is None:
            return
        try:
            await asyncio.wait_for(cm.__aexit__(None, None, None), 1.0)
        except (OSError, asyncio.TimeoutError, ConnectionError):
            pass
