"""``TcpConnection``: the Iggy binary protocol over TCP (optionally TLS).

Request frame ``length u32, code u32, payload`` is written with one ``writelines`` call (the
payload parts are not concatenated); responses are read by ``ResponseReceiver`` straight
into their final buffer. As the 0.8 clients do, a non-zero status or a length <= 1 means no
payload bytes follow. A response payload over the ``response_buffer_size`` option (default
``connection.base.DEFAULT_MAX_RESPONSE_BYTES``) fails with INVALID_BYTES_RESPONSE when its
header arrives, and the connection is closed. TCP_NODELAY is set unless disabled. uvloop is used by
``lurcher.sdk.sync`` and may be installed by applications; nothing here depends on the loop
implementation.
"""

from __future__ import annotations

import asyncio
import socket
import ssl

from lurcher.core.wire.buffer import Buffer
from lurcher.core.wire.error_codes import ErrorCode
from lurcher.core.wire.errors import IggyError
from lurcher.core.wire.frames import CODE_BYTES, FRAME_HEADER
from lurcher.sdk.config import ClientConfig
from lurcher.sdk.connection.base import Connection, response_limit, with_ca_file
from lurcher.sdk.connection.receiver import ResponseReceiver


def tls_context(config: ClientConfig) -> ssl.SSLContext:
    """A client SSL context: system roots or ``tls_ca_file``; no checks when validation is off."""
    path = config.tls_ca_file
    ctx = (with_ca_file(lambda p: ssl.create_default_context(cafile=p), path) if path
           else ssl.create_default_context())
    if not config.tls_validate_certificate:
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
    return ctx


class TcpConnection(Connection):
    """One TCP (or TLS over TCP) connection."""
    LOST_ERRORS = (OSError, ssl.SSLError)


    def __init__(self, config: ClientConfig) -> None:
        super().__init__()
        self.config = config
        self.host, self.port = config.host_port()
        self.limit = response_limit(config.options)
        self._transport: asyncio.Transport | None = None
        self._receiver: ResponseReceiver | None = None

    def _is_open(self) -> bool:
        return self._transport is not None and not self._transport.is_closing()

    def _stale(self) -> bool:
        receiver = self._receiver
        return receiver is None or receiver.lost is not None or receiver.unsolicited

    async def _connect(self) -> None:
        if self._is_open():
            return
        cfg = self.config
        ssl_ctx = tls_context(cfg) if cfg.tls else None
        server_hostname = (cfg.tls_domain or self.host) if cfg.tls else None
        loop = asyncio.get_running_loop()
        try:
            self._transport, self._receiver = await asyncio.wait_for(
                loop.create_connection(lambda: ResponseReceiver(self.limit), self.host,
                                       self.port, ssl=ssl_ctx, server_hostname=server_hostname),
                cfg.connect_timeout_s)
        except asyncio.TimeoutError:
            raise IggyError(ErrorCode.TASK_TIMEOUT,
                            f"connect to {cfg.address} timed out after "
                            f"{cfg.connect_timeout_s}s") from None
        except (OSError, ssl.SSLError) as e:
            raise IggyError(ErrorCode.CANNOT_ESTABLISH_CONNECTION, f"{cfg.address}: {e}") from None
        sock = self._transport.get_extra_info("socket")
        if sock is not None and cfg.nodelay:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    async def _roundtrip(self, code: int, parts: list[Buffer]) -> tuple[int, memoryview]:
        assert self._transport is not None and self._receiver is not None
        size = sum(len(p) for p in parts)
        response = self._receiver.expect()
        self._transport.writelines([FRAME_HEADER.pack(CODE_BYTES + size, code), *parts])
        await self._receiver.writable()
        return await response

    async def _abort(self) -> None:
        transport, self._transport, self._receiver = self._transport, None, None
        if transport is not None:
            transport.close()
