"""``QuicConnection``: the Iggy binary protocol over QUIC (aioquic), §15.2.

One QUIC connection; every request opens a new bidirectional stream, writes the request
frame, finishes its side and reads the response frame to the end of the stream. No ALPN.
As the Iggy SDK, the server certificate is not validated by default and the TLS server name
is ``localhost``; with ``tls_ca_file`` set it is validated against that CA (server name
``tls_domain`` or ``localhost``). Options (``config.options``): ``response_buffer_size``
(bytes, default ``connection.base.DEFAULT_MAX_RESPONSE_BYTES``, above any poll reply of
the server's, where Iggy's 10 MB was not: a response frame announcing a longer payload
fails the request with INVALID_BYTES_RESPONSE as soon as its header arrives; a response
being gathered holds its frame's bytes and nothing more) and the QUIC settings of
``lurcher.core.quic`` with Iggy's names: ``initial_mtu``, ``send_window``, ``receive_window``
(bytes), ``keep_alive_interval``, ``max_idle_timeout`` (humantime, or a plain number of
milliseconds as in Iggy's connection strings), ``max_concurrent_bidi_streams`` (the streams
the server may open; it opens none, so the default, 256 as for the server, never matters).
A bad value fails the connect with INVALID_CONFIGURATION naming the option.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import ssl
from typing import Any, AsyncIterator, Callable

from aioquic.quic.configuration import QuicConfiguration
from aioquic.quic.connection import QuicConnection as AioquicConnection
from aioquic.quic.events import (ConnectionTerminated, HandshakeCompleted, QuicEvent,
                                  StreamDataReceived, StreamReset)

from lurcher.core.quic import (QuicSettings, TunedQuicProtocol, bound_socket,
                               quic_configuration, quic_settings)
from lurcher.core.quic_send import StreamParts
from lurcher.core.udp_offload import open_endpoint
from lurcher.core.wire.buffer import Buffer
from lurcher.core.wire.error_codes import ErrorCode
from lurcher.core.wire.errors import IggyError
from lurcher.core.wire.frames import CODE_BYTES, FRAME_HEADER, FRAME_HEADER_BYTES
from lurcher.sdk.config import ClientConfig
from lurcher.sdk.connection.base import Connection, oversized, response_limit, with_ca_file

_EMPTY = memoryview(b"")
DEFAULT_SERVER_NAME = "localhost"
QUIC_NO_ERROR = 0


def client_settings(config: ClientConfig) -> QuicSettings:
    """The QUIC settings of the connection string. Raises IggyError INVALID_CONFIGURATION."""
    try:
        return quic_settings(config.options, plain_unit_s=1e-3)
    except ValueError as exc:
        raise IggyError(ErrorCode.INVALID_CONFIGURATION, str(exc)) from None


@contextlib.asynccontextmanager
async def connect(host: str, port: int, configuration: QuicConfiguration,
                  create_protocol: Callable[..., TunedQuicProtocol]
                  ) -> AsyncIterator[TunedQuicProtocol]:
    """A QUIC connection to ``host:port`` whose handshake is done, on a UDP socket of the
    address's family served by ``lurcher.core.udp_offload``; closed on exit."""
    loop = asyncio.get_running_loop()
    family, *_, addr = (await loop.getaddrinfo(host, port, type=socket.SOCK_DGRAM))[0]
    sock = bound_socket(family, ("::", 0) if family == socket.AF_INET6 else ("0.0.0.0", 0))
    transport, protocol = await open_endpoint(
        lambda: create_protocol(AioquicConnection(configuration=configuration)), sock)
    try:
        protocol.connect(addr, transmit=True)
        await protocol.wait_connected()
        yield protocol
    finally:
        protocol.close()
        await protocol.wait_closed()
        transport.close()


def client_configuration(config: ClientConfig, settings: QuicSettings) -> QuicConfiguration:
    quic = quic_configuration(settings, is_client=True,
                              server_name=config.tls_domain or DEFAULT_SERVER_NAME)
    if config.tls_ca_file:
        with_ca_file(quic.load_verify_locations, config.tls_ca_file)
        quic.verify_mode = ssl.CERT_REQUIRED
    else:
        quic.verify_mode = ssl.CERT_NONE
    return quic


class _Response:
    """The response frame of one request stream, gathered until the stream ends. A lone
    piece of data that ends the stream is the response as it is (a view of the decrypted
    packet, or bytes). Otherwise, once the frame header is in, the frame's own buffer is
    made (its length checked against ``limit`` first) and every piece is copied into it as
    it arrives, while the rest is still on its way, so nothing is joined at the end and no
    piece (or the packet behind it) is kept. Bytes past the frame's length are dropped."""

    def __init__(self, done: asyncio.Future, limit: int) -> None:
        self.done, self.limit = done, limit
        self.chunks: list[bytes | memoryview] = []  # pieces before the frame's buffer exists
        self.size = 0
        self.frame: bytearray | None = None
        self.filled = 0

    def data(self, data: bytes | memoryview, end_stream: bool) -> None:
        if self.done.done():
            return
        if self.frame is not None:
            self._fill(data)
        elif end_stream and not self.chunks:
            self._finish(data)
            return
        else:
            self.chunks.append(data)
            self.size += len(data)
            if self.size >= FRAME_HEADER_BYTES and not self._start_frame():
                return
        if end_stream:
            self._finish(self._gathered())

    def _start_frame(self) -> bool:
        """Make the frame's buffer and copy the pieces so far in; False (and the request
        failed) when the frame is longer than ``limit`` allows."""
        chunks, self.chunks = self.chunks, []
        head = chunks[0] if len(chunks[0]) >= FRAME_HEADER_BYTES else b"".join(chunks)
        length = self._checked_length(head)
        if length is None:
            return False
        self.frame = bytearray(FRAME_HEADER_BYTES + length)
        for chunk in chunks:
            self._fill(chunk)
        return True

    def _checked_length(self, head: bytes | memoryview) -> int | None:
        """The payload length the frame header announces; None (and the request failed)
        when it is over ``limit``."""
        length = FRAME_HEADER.unpack_from(head)[1]
        if length <= self.limit:
            return length
        self.fail(oversized(length, self.limit))
        return None

    def _fill(self, data: bytes | memoryview) -> None:
        frame, at = self.frame, self.filled
        assert frame is not None
        n = min(len(data), len(frame) - at)
        frame[at:at + n] = data[:n] if n < len(data) else data
        self.filled = at + n

    def _gathered(self) -> bytes | bytearray | memoryview:
        if self.frame is None:
            return b"".join(self.chunks)
        if self.filled == len(self.frame):
            return self.frame
        return memoryview(self.frame)[:self.filled]

    def _finish(self, response: bytes | bytearray | memoryview) -> None:
        if len(response) < FRAME_HEADER_BYTES:
            self.fail(asyncio.IncompleteReadError(bytes(response), FRAME_HEADER_BYTES))
        elif self.frame is not None or self._checked_length(response) is not None:
            self.done.set_result(response)

    def fail(self, error: BaseException) -> None:
        if not self.done.done():
            self.done.set_exception(error)


class _ClientProtocol(TunedQuicProtocol):
    """aioquic's client protocol on a *connected* UDP socket, so an ICMP "port unreachable"
    (nobody listens there) reaches ``error_received`` and fails the handshake at once
    instead of after the connect timeout. The handshake waiter's exception is always
    retrieved (no "Future exception was never retrieved" when a connect is abandoned).
    The connection owns its socket (``connect``)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.responses: dict[int, _Response] = {}

    def connect(self, addr: Any, transmit: bool = True) -> None:
        self._transport.get_extra_info("socket").connect(addr)
        super().connect(addr, transmit)

    def quic_event_received(self, event: QuicEvent) -> None:
        if isinstance(event, StreamDataReceived):
            response = self.responses.get(event.stream_id)
            if response is not None:
                response.data(event.data, event.end_stream)
            return  # the server opens no streams; late bytes of a dropped request go
        if isinstance(event, HandshakeCompleted):
            self.handshake_done()
        elif isinstance(event, StreamReset) and event.stream_id in self.responses:
            self.responses[event.stream_id].fail(ConnectionResetError("response stream reset"))
        elif isinstance(event, ConnectionTerminated):
            for response in list(self.responses.values()):
                response.fail(ConnectionError(f"QUIC connection closed: {event.reason_phrase}"))
        super().quic_event_received(event)

    async def request(self, code: int, parts: list[Buffer], limit: int) -> bytes | memoryview:
        """Send one request frame on a new stream; its response frame, whole (``limit``:
        the largest response payload accepted, larger raises IggyError)."""
        quic = self._quic
        stream_id = quic.get_next_available_stream_id()
        size = sum(len(p) for p in parts)
        frame = StreamParts([FRAME_HEADER.pack(CODE_BYTES + size, code), *parts])
        quic.send_stream_data(stream_id, frame, end_stream=True)  # held, not joined
        response = self.responses[stream_id] = _Response(self._loop.create_future(), limit)
        self.send_soon()
        try:
            return await response.done
        except BaseException:
            self.stop_receiving(stream_id)
            raise
        finally:
            del self.responses[stream_id]

    def stop_receiving(self, stream_id: int) -> None:
        """Ask the server to stop sending a response nobody waits for any more."""
        try:
            self._quic.stop_stream(stream_id, QUIC_NO_ERROR)
        except (AssertionError, ValueError):  # the stream is finished or gone
            return
        self._transmit_soon()

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
        self.limit = response_limit(config.options)
        self._cm: Any = None
        self._proto: _ClientProtocol | None = None
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
        settings = client_settings(self.config)

        def create(*args: Any, **kwargs: Any) -> _ClientProtocol:
            return _ClientProtocol(*args, settings=settings, **kwargs)

        cm = connect(self.host, self.port, client_configuration(self.config, settings), create)
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
        response = await self._proto.request(code, parts, self.limit)
        status, length = FRAME_HEADER.unpack_from(response)
        if status or length <= 1:
            return status, _EMPTY
        if len(response) < FRAME_HEADER_BYTES + length:
            raise asyncio.IncompleteReadError(response, FRAME_HEADER_BYTES + length)
        return status, memoryview(response)[FRAME_HEADER_BYTES:FRAME_HEADER_BYTES + length]

    async def _abort(self) -> None:
        cm, self._cm, self._proto = self._cm, None, None
        if cm is None:
            return
        try:
            await asyncio.wait_for(cm.__aexit__(None, None, None), 1.0)
        except (OSError, asyncio.TimeoutError, ConnectionError):
            pass
