"""Request framing shared by the byte-stream transports (TCP, TLS, WebSocket).

``FrameReader`` is a sans-IO receive buffer: bytes go in through ``get_buffer`` /
``buffer_updated`` (the ``asyncio.BufferedProtocol`` shape), complete frames come out of
``next_frame``. Small frames are views into one reusable buffer; a frame larger than the
buffer is read straight into a dedicated bytearray of its size, so a 1 MB send is never
copied inside Python. Frame rules (wire §1.1): ``length`` counts the code and the payload;
``length < 4`` is answered with InvalidCommand and reading goes on; an oversized frame is
answered with InvalidCommand and the connection is closed (it cannot resynchronise).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from lurcher.core.wire.error_codes import ErrorCode

REQUEST_HEADER = struct.Struct("<II")
HEADER_BYTES = REQUEST_HEADER.size
SEND_MESSAGES_CODE = 101
DEFAULT_BUFFER_BYTES = 256 * 1024
MIN_FREE_BYTES = 16 * 1024


@dataclass(frozen=True)
class Frame:
    code: int
    payload: memoryview


@dataclass(frozen=True)
class BadFrame:
    """A frame that is answered with ``status``; ``fatal`` closes the connection."""

    status: int
    fatal: bool
    detail: str


class FrameReader:
    def __init__(self, max_control_payload_bytes: int, max_send_payload_bytes: int,
                 buffer_bytes: int = DEFAULT_BUFFER_BYTES) -> None:
        self.max_control = max_control_payload_bytes
        self.max_send = max_send_payload_bytes
        self.buf = bytearray(buffer_bytes)
        self.view = memoryview(self.buf)
        self.start = 0
        self.end = 0
        self.big: bytearray | None = None
        self.big_code = 0
        self.big_filled = 0

    # -- receiving --------------------------------------------------------------
    def get_buffer(self) -> memoryview:
        if self.big is not None:
            return memoryview(self.big)[self.big_filled:]
        if len(self.buf) - self.end < MIN_FREE_BYTES:
            self._compact()
        return self.view[self.end:]

    def buffer_updated(self, nbytes: int) -> None:
        if self.big is not None:
            self.big_filled += nbytes
        else:
            self.end += nbytes

    def feed(self, data: bytes) -> None:
        """Push bytes (for transports that deliver messages, e.g. WebSocket)."""
        data = memoryview(data)
        while data:
            target = self.get_buffer()
            n = min(len(target), len(data))
            target[:n] = data[:n]
            self.buffer_updated(n)
            data = data[n:]

    def _compact(self) -> None:
        """Move unconsumed bytes to the front; grow the buffer when they fill most of it."""
        pending = self.end - self.start
        if len(self.buf) - pending < MIN_FREE_BYTES:
            grown = bytearray(2 * len(self.buf))
            grown[:pending] = self.buf[self.start:self.end]
            self.buf, self.view = grown, memoryview(grown)
        elif self.start:
            self.buf[:pending] = self.buf[self.start:self.end]
        self.start, self.end = 0, pending

    @property
    def unhandled(self) -> bytes:
        """Bytes received but not yet returned as frames (for socket migration)."""
        if self.big is not None:
            header = REQUEST_HEADER.pack(len(self.big) + 4, self.big_code)
            return header + bytes(self.big[:self.big_filled])
        return bytes(self.buf[self.start:self.end])

    # -- framing ----------------------------------------------------------------
    def next_frame(self) -> Frame | BadFrame | None:
        """The next complete frame, a frame to refuse, or None if more bytes are needed.

        A returned small frame's payload is a view valid until the next ``get_buffer``.
        """
        if self.big is not None:
            if self.big_filled < len(self.big):
                return None
            frame = Frame(self.big_code, memoryview(self.big))
            self.big = None
            return frame
        if self.end - self.start < HEADER_BYTES:
            return None
        length, code = REQUEST_HEADER.unpack_from(self.buf, self.start)
        if length < 4:
            self.start += HEADER_BYTES
            return BadFrame(ErrorCode.INVALID_COMMAND, False, f"frame length {length} < 4")
        payload_bytes = length - 4
        limit = self.max_send if code == SEND_MESSAGES_CODE else self.max_control
        if payload_bytes > limit:
            return BadFrame(ErrorCode.INVALID_COMMAND, True,
                            f"payload of {payload_bytes} bytes exceeds {limit} for code {code}")
        frame_end = self.start + HEADER_BYTES + payload_bytes
        if frame_end <= self.end:
            payload = self.view[self.start + HEADER_BYTES:frame_end]
            self.start = frame_end
            if self.start == self.end:
                self.start = self.end = 0
            return Frame(code, payload)
        if HEADER_BYTES + payload_bytes > len(self.buf) // 2:
            self._start_big(code, payload_bytes)
        return None

    def _start_big(self, code: int, payload_bytes: int) -> None:
        have = self.end - self.start - HEADER_BYTES
        self.big = bytearray(payload_bytes)
        self.big[:have] = self.buf[self.start + HEADER_BYTES:self.end]
        self.big_code, self.big_filled = code, have
        self.start = self.end = 0
