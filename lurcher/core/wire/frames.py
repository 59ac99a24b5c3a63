"""TCP framing of requests and responses (sans-IO).

Request frame: ``length u32`` (= 4 + payload size: it counts the code, not itself),
``code u32``, payload. Response frame: ``status u32`` (0 = OK, else an error code),
``length u32`` (payload size), payload (only with status 0).

Here: the header layout, encoders, the response-side split (the 0.8 clients' rule: error
responses carry no payload, and an OK payload of exactly 1 byte is never written because
they treat a length <= 1 as empty without reading the byte) and ``FrameLimits``. Splitting
received requests, with the limits, is ``core.connection.framing``'s alone.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from lurcher.core.wire.buffer import Buffer
from lurcher.core.wire.error_codes import ErrorCode
from lurcher.core.wire.errors import WireError, truncated

FRAME_HEADER = struct.Struct("<II")
FRAME_HEADER_BYTES = FRAME_HEADER.size
assert FRAME_HEADER_BYTES == 8
CODE_BYTES = 4
SEND_MESSAGES_CODE = 101


@dataclass(frozen=True)
class FrameLimits:
    """Largest request payloads (bytes) a server accepts (``[limits]`` in server.toml).

    Before login every frame is held to ``max_unauthenticated`` (answered Unauthenticated);
    after login SendMessages to ``max_send`` and every other command to ``max_control``
    (answered InvalidCommand). The server closes the connection after either refusal.
    """

    max_control: int
    max_send: int
    max_unauthenticated: int

    def for_code(self, code: int, authenticated: bool) -> tuple[int, int]:
        """(limit, status answered above it) for a frame of ``code``."""
        if not authenticated:
            return self.max_unauthenticated, ErrorCode.UNAUTHENTICATED
        return (self.max_send if code == SEND_MESSAGES_CODE else self.max_control,
                ErrorCode.INVALID_COMMAND)


def encode_request(code: int, payload: Buffer = b"") -> bytes:
    """A complete request frame."""
    return FRAME_HEADER.pack(CODE_BYTES + len(payload), code) + bytes(payload)


def encode_response(status: int, payload: Buffer = b"") -> bytes:
    """A complete response frame.

    Raises ValueError for a payload with a non-zero status, or a 1-byte OK payload.
    """
    if status and len(payload):
        raise ValueError("error responses carry no payload")
    if len(payload) == 1:
        raise ValueError("a 1-byte OK payload is read as empty by the 0.8 clients")
    return FRAME_HEADER.pack(status, len(payload)) + bytes(payload)


def encode_error(code: ErrorCode | int) -> bytes:
    """The response frame of a failed command: ``status, 0``."""
    return FRAME_HEADER.pack(int(code), 0)


def decode_response_header(buf: Buffer) -> tuple[int, int]:
    """``(status, length)`` of the response frame at the start of ``buf``.

    Raises WireError when fewer than 8 bytes are given.
    """
    if len(buf) < FRAME_HEADER_BYTES:
        raise truncated("response header", len(buf), FRAME_HEADER_BYTES - len(buf))
    status, length = FRAME_HEADER.unpack_from(buf)
    return status, length


def split_response(buf: Buffer) -> tuple[int, memoryview, int] | None:
    """``(status, payload, consumed)`` for a whole response frame at the start of ``buf``,
    else None. Mirrors the 0.8 clients: a non-zero status or a length <= 1 means no
    payload bytes are read."""
    if len(buf) < FRAME_HEADER_BYTES:
        return None
    status, length = decode_response_header(buf)
    size = 0 if status or length <= 1 else length
    end = FRAME_HEADER_BYTES + size
    if len(buf) < end:
        return None
    return status, memoryview(buf)[FRAME_HEADER_BYTES:end], end
