"""The receiving side of a binary-protocol stream connection (TCP, TLS) as an asyncio
``BufferedProtocol``: response bytes are read straight into the buffer the caller gets.

Small responses land in a reusable scratch buffer (and are copied out once); a response
larger than the scratch space is read directly into a bytearray of its exact size, so a
1 MB poll reply is never copied inside Python. At most one response is expected at a
time (the connection serialises requests); bytes that arrive while nothing is expected
mark the stream stale (e.g. the server's unsolicited Disconnected frame). A frame header
announcing more than ``limit`` payload bytes fails the waiting request with IggyError
INVALID_BYTES_RESPONSE (nothing is allocated for it), closes the transport and discards
whatever else arrives.
"""

from __future__ import annotations

import asyncio

from lurcher.core.wire.frames import FRAME_HEADER, FRAME_HEADER_BYTES
from lurcher.sdk.connection.base import oversized

SCRATCH_BYTES = 64 * 1024
_EMPTY = memoryview(b"")


class ResponseReceiver(asyncio.BufferedProtocol):
    def __init__(self, limit: int) -> None:
        self.limit = limit  # the largest response payload accepted
        self.transport: asyncio.Transport | None = None
        self.scratch = bytearray(SCRATCH_BYTES)
        self.filled = 0  # bytes of the current response in ``scratch``
        self.body: bytearray | None = None  # a large response's own buffer
        self.body_filled = 0
        self.status = 0
        self.waiter: asyncio.Future | None = None
        self.unsolicited = False
        self.lost: Exception | None = None
        self._writable = asyncio.Event()
        self._writable.set()

    # -- asyncio protocol ----------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def connection_lost(self, exc: Exception | None) -> None:
        self.lost = exc or ConnectionResetError("connection closed by the server")
        self._writable.set()
        self._fail(self.lost)

    def eof_received(self) -> bool:
        self.lost = ConnectionResetError("connection closed by the server")
        self._fail(self.lost)
        return False

    def pause_writing(self) -> None:
        self._writable.clear()

    def resume_writing(self) -> None:
        self._writable.set()

    def get_buffer(self, sizehint: int) -> memoryview:
        if self.body is not None:
            return memoryview(self.body)[self.body_filled:]
        return memoryview(self.scratch)[self.filled:]

    def buffer_updated(self, nbytes: int) -> None:
        if self.lost is not None:  # refused: what follows is not read
            self.filled = 0
            return
        if self.waiter is None:
            self.unsolicited = True
        if self.body is not None:
            self.body_filled += nbytes
            if self.body_filled == len(self.body):
                body, self.body = self.body, None
                self._finish(memoryview(body))
            return
        self.filled += nbytes
        self._parse_scratch()

    # -- responses -------------------------------------------------------------------
    def _parse_scratch(self) -> None:
        if self.filled < FRAME_HEADER_BYTES:
            return
        status, length = FRAME_HEADER.unpack_from(self.scratch)
        self.status = status
        if status or length <= 1:  # no payload follows (the 0.8 client rule)
            self._finish(_EMPTY, FRAME_HEADER_BYTES)
            return
        if length > self.limit:
            self._refuse(oversized(length, self.limit))
            return
        have = self.filled - FRAME_HEADER_BYTES
        if FRAME_HEADER_BYTES + length <= len(self.scratch):
            if have >= length:
                payload = bytes(self.scratch[FRAME_HEADER_BYTES:FRAME_HEADER_BYTES + length])
                self._finish(memoryview(payload), FRAME_HEADER_BYTES + length)
            return
        self.body = bytearray(length)
        self.body[:have] = self.scratch[FRAME_HEADER_BYTES:self.filled]
        self.body_filled, self.filled = have, 0

    def _finish(self, payload: memoryview, consumed: int = 0) -> None:
        if consumed:
            rest = self.filled - consumed
            if rest:  # bytes beyond this response: unsolicited, keep them for stale checks
                self.scratch[:rest] = self.scratch[consumed:self.filled]
                self.unsolicited = True
            self.filled = rest
        waiter, self.waiter = self.waiter, None
        if waiter is not None and not waiter.done():
            waiter.set_result((self.status, payload))

    def _refuse(self, exc: Exception) -> None:
        """Fail the waiting request with ``exc`` and close: the stream is out of step."""
        self.lost, self.filled = exc, 0
        self._fail(exc)
        if self.transport is not None:
            self.transport.close()

    def _fail(self, exc: Exception) -> None:
        waiter, self.waiter = self.waiter, None
        if waiter is not None and not waiter.done():
            waiter.set_exception(exc)

    # -- used by the connection ---------------------------------------------------------
    def expect(self) -> asyncio.Future:
        """A future for the next response ``(status, payload)``; fails if the stream ends."""
        future = asyncio.get_running_loop().create_future()
        if self.lost is not None:
            future.set_exception(self.lost)
            return future
        self.waiter = future
        return future

    async def writable(self) -> None:
        """Wait while the transport's write buffer is over its high-water mark."""
        await self._writable.wait()
        if self.lost is not None:
            raise self.lost
