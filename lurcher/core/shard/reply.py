"""What a handler returns and how it becomes response bytes.

A handler returns ``None`` (empty OK), ``bytes``, a ``WireStruct``, a list of
``WireStruct`` (the Iggy list form) or a ``Parts`` (buffers sent back to back without
joining them, e.g. a poll prefix followed by stored message bytes). A part may be a file
slice (an object with ``total_bytes`` and ``pieces()``, e.g. ``PolledSlice``): transports
that can ``sendfile`` send it from the page cache; ``read_parts`` reads it in pieces (QUIC,
WebSocket, TCP's small replies), ``payload_bytes`` into one ``bytes`` (HTTP, cluster
replies), with one copy after the reads at most and no zero-filled buffer.

Stored bytes that cannot be read (a log file cut short or failing under the server) answer
the request with CANNOT_READ_FILE and one warning in the log: ``read_parts`` gives the error
frame instead of the reply, ``payload_bytes`` raises the IggyError. Every transport reads a
reply before sending any of it, so the connection goes on; only a ``sendfile`` reply that
fails half sent must end its connection (``transports.sendfile``).

Encoding a reply never kills a connection: a value that cannot be encoded (e.g. metadata
stored out of range by an older version) is logged and answered with the status
CANNOT_SERIALIZE_RESOURCE instead (``ok_frame_parts``; ``payload_parts`` raises IggyError).
"""

from __future__ import annotations

import inspect
import logging
import struct
from typing import Any

from lurcher.core.wire.codec import WireStruct
from lurcher.core.wire.error_codes import ErrorCode
from lurcher.core.wire.errors import IggyError

log = logging.getLogger(__name__)

RESPONSE_HEADER = struct.Struct("<II")
assert RESPONSE_HEADER.size == 8


def is_awaitable(result: Any) -> bool:
    """Whether a handler's result must be awaited: ``inspect.isawaitable``, answered at
    once for the plain reply types (most replies), which the generic check would take
    through the ``Awaitable`` ABC."""
    return result.__class__ not in _PLAIN_REPLIES and inspect.isawaitable(result)


def is_file_part(part: Any) -> bool:
    return hasattr(part, "total_bytes")


def part_length(part: Any) -> int:
    return part.total_bytes if is_file_part(part) else len(part)


class Parts:
    """Buffers (or file slices) that together form one response payload."""

    __slots__ = ("buffers", "length")

    def __init__(self, buffers: list[Any], length: int | None = None) -> None:
        """``length``: the parts' total, when the caller already knows it."""
        self.buffers = buffers
        self.length = sum(part_length(b) for b in buffers) if length is None else length


_PLAIN_REPLIES = frozenset({type(None), bytes, bytearray, memoryview, list, Parts})


def payload_parts(result: Any) -> list[Any]:
    """The payload buffers of a handler result (see module docstring). Raises IggyError
    CANNOT_SERIALIZE_RESOURCE when a value cannot be encoded."""
    try:
        return _payload_parts(result)
    except (struct.error, OverflowError, ValueError, TypeError, UnicodeEncodeError) as exc:
        log.error("cannot encode a %s reply: %s", type(result).__name__, exc)
        raise IggyError(ErrorCode.CANNOT_SERIALIZE_RESOURCE, str(exc)) from None


def _payload_parts(result: Any) -> list[Any]:
    if result is None:
        return []
    if isinstance(result, Parts):
        return result.buffers
    if isinstance(result, (bytes, bytearray, memoryview)):
        return [result]
    if isinstance(result, WireStruct):
        return [result.encode()]
    if isinstance(result, list):
        return [WireStruct.encode_list(result)]
    raise TypeError(f"handler returned {type(result).__name__}")


def ok_frame_parts(result: Any) -> list[Any]:
    """Response header + payload parts, file slices left as they are; an error frame when
    the result cannot be encoded."""
    if result.__class__ is Parts:  # a poll's reply: its length is known
        return [RESPONSE_HEADER.pack(0, result.length), *result.buffers]
    try:
        parts = payload_parts(result)
    except IggyError as exc:
        return [error_frame(exc.status)]
    length = sum(part_length(p) for p in parts)
    return [RESPONSE_HEADER.pack(0, length), *parts]


def pieces(parts: list[Any], below: int | None = None) -> list[Any]:
    """The parts with every file slice (only those under ``below`` bytes, when given) read
    as one ``bytes`` per byte range (``PolledSlice.pieces``). Raises OSError, or EOFError
    when a file is shorter than its range."""
    out: list[Any] = []
    for part in parts:
        if is_file_part(part) and (below is None or part.total_bytes < below):
            out.extend(part.pieces())
        else:
            out.append(part)
    return out


def read_failure(exc: BaseException) -> IggyError:
    """CANNOT_READ_FILE for a reply whose stored bytes cannot be read (logged once here)."""
    log.warning("cannot read a reply: %s", exc)
    return IggyError(ErrorCode.CANNOT_READ_FILE, f"cannot read a reply: {exc}")


def read_parts(parts: list[Any], below: int | None = None) -> list[Any]:
    """``pieces(parts, below)``, or the error frame CANNOT_READ_FILE in place of the whole
    reply when its stored bytes cannot be read."""
    try:
        return pieces(parts, below)
    except (OSError, EOFError) as exc:
        return [error_frame(read_failure(exc).status)]


def payload_bytes(result: Any) -> bytes:
    """A handler result's payload in one ``bytes``. Raises IggyError as ``payload_parts``,
    and CANNOT_READ_FILE when its stored bytes cannot be read."""
    parts = payload_parts(result)
    try:
        return b"".join(pieces(parts))
    except (OSError, EOFError) as exc:
        raise read_failure(exc) from None


def ok_frame(result: Any) -> bytes:
    """The whole response frame of a command, in one ``bytes``."""
    return b"".join(read_parts(ok_frame_parts(result)))


def error_frame(status: int) -> bytes:
    """An error response: the status and a zero length, never a payload."""
    return RESPONSE_HEADER.pack(status, 0)
