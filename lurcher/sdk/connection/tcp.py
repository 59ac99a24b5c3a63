"""``TcpConnection``: the Iggy binary protocol over TCP (optionally TLS) with asyncio streams.

Request frame ``length u32, code u32, payload`` is written with one ``writelines`` call (the
payload parts are not concatenated); the response header is read with ``readexactly(8)`` and
the payload with one ``readexactly`` into a single buffer. As the 0.8 clients do, a non-zero
status or a length <= 1 means no payload bytes follow. TCP_NODELAY is set unless disabled.
uvloop is used by ``lurcher.sdk.sync`` and may be installed by applications; nothing here
depends on the loop implementation.
"""

from __future__ import annotations

import asyncio
import socket
import ssl

from lurcher.core.wire.buffer import Buffer
from lurcher.core.wire.error_codes import ErrorCode
from lurcher.core.wire.errors import IggyError
from lurcher.core.wire.frames import CODE_BYTES, FRAME_HEADER, FRAME_HEADER_BYTES
from lurcher.sdk.config import ClientConfig
from lurcher.sdk.connection.base import Connection

_EMPTY = memoryview(b"")
STREAM_LIMIT_BYTES = 1 << 20


def _buffered(reader: asyncio.StreamReader) -> int:
    """Bytes the reader holds that nobody asked for (asyncio has no public peek)."""
    return len(getattr(reader, "_buffer", b""))


def tls_context(config: ClientConfig) -> ssl.SSLContext:
    """A client SSL context: system roots or ``tls_ca_file``; no checks when validation is off."""
    ctx = ssl.create_default_context(cafile=config.tls_ca_file)
    if not config.tls_validate_certificate:
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
    return ctx


class TcpConnection(Connection):
    """One TCP (or TLS over TCP) connection."""

    def __init__(self, config: ClientConfig) -> None:
        super().__init__()
        self.config = config
        self.host, self.port = config.host_port()
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None

    def _is_open(self) -> bool:
        return self._writer is not None and not self._writer.is_closing()

    def _stale(self) -> bool:
        reader = self._reader
        return reader is None or reader.at_eof() or _buffered(reader) > 0

    async def _connect(self) -> None:
        if self._is_open():
            return
        cfg = self.config
        ssl_ctx = tls_context(cfg) if cfg.tls else None
        server_hostname = (cfg.tls_domain or self.host) if cfg.tls else None
        try:
            self._reader, self._writer = await asyncio.wait_for(
                asyncio.open_connection(self.host, self.port, ssl=ssl_ctx,
                                        server_hostname=server_hostname,
                                        limit=STREAM_LIMIT_BYTES),
                cfg.connect_timeout_s)
        except asyncio.TimeoutError:
            raise IggyError(ErrorCode.TASK_TIMEOUT,
                            f"connect to {cfg.address} timed out after {cfg.connect_timeout_s}s") from None
        except (OSError, ssl.SSLError) as e:
            raise IggyError(ErrorCode.CANNOT_ESTABLISH_CONNECTION, f"{cfg.address}: {e}") from None
        sock = self._writer.get_extra_info("socket")
        if sock is not None and cfg.nodelay:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    async def _exchange(self, code: int, parts: list[Buffer]) -> tuple[int, memoryview]:
        timeout = self.config.request_timeout_s
        try:
            if timeout is None:
                return await self._roundtrip(code, parts)
            return await asyncio.wait_for(self._roundtrip(code, parts), timeout)
        except asyncio.TimeoutError:
            raise IggyError(ErrorCode.TASK_TIMEOUT,
                            f"no response to command {code} within {timeout}s") from None
        except (OSError, asyncio.IncompleteReadError, ssl.SSLError) as e:
            raise IggyError(ErrorCode.CONNECTION_CLOSED, f"{self.config.address}: {e!r}") from None

    async def _roundtrip(self, code: int, parts: list[Buffer]) -> tuple[int, memoryview]:
        assert self._reader is not None and self._writer is not None
        size = sum(len(p) for p in parts)
        self._writer.writelines([FRAME_HEADER.pack(CODE_BYTES + size, code), *parts])
        await self._writer.drain()
        status, length = FRAME_HEADER.unpack(await self._reader.readexactly(FRAME_HEADER_BYTES))
        if status or length <= 1:
            return status, _EMPTY
        return status, memoryview(await self._reader.readexactly(length))

    async def _abort(self) -> None:
        writer, self._writer, self._reader = self._writer, None, None
        if writer is None:
            return
        writer.close()
        try:
            await asyncio.wait_for(writer.wait_closed(), 1.0)
        except (OSError, asyncio.TimeoutError, ssl.SSLError):
            pass
