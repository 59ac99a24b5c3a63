"""What a handler returns and how it becomes response bytes.

A handler returns ``None`` (empty OK), ``bytes``, a ``WireStruct``, a list of
``WireStruct`` (the Iggy list form) or a ``Parts`` (buffers sent back to back without
joining them, e.g. a poll prefix followed by stored message bytes). A part may be a file
slice (an object with ``total_bytes`` and ``read()``, e.g. ``PolledSlice``): transports that
can ``sendfile`` send it from the page cache; ``ok_frame`` materialises it for the others.
"""

from __future__ import annotations

import struct
from typing import Any

from lurcher.core.wire.codec import WireStruct

RESPONSE_HEADER = struct.Struct("<II")
assert RESPONSE_HEADER.size == 8


def is_file_part(part: Any) -> bool:
    return hasattr(part, "total_bytes")


def part_length(part: Any) -> int:
    return part.total_bytes if is_file_part(part) else len(part)


class Parts:
    """Buffers (or file slices) that together form one response payload."""

    __slots__ = ("buffers", "length")

    def __init__(self, buffers: list[Any]) -> None:
        self.buffers = buffers
        self.length = sum(part_length(b) for b in buffers)


def payload_parts(result: Any) -> list[Any]:
    """The payload buffers of a handler result (see module docstring)."""
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
    """Response header + payload parts, file slices left as they are."""
    parts = payload_parts(result)
    length = sum(part_length(p) for p in parts)
    return [RESPONSE_HEADER.pack(0, length), *parts]


def materialise(parts: list[Any]) -> list[Any]:
    """The same parts with every file slice read into memory."""
    return [p.read() if is_file_part(p) else p for p in parts]


def ok_frame(result: Any) -> list[Any]:
    """Response header + payload buffers (in memory) for a successful command."""
    return materialise(ok_frame_parts(result))


def error_frame(status: int) -> bytes:
    """An error response: the status and a zero length, never a payload."""
    return RESPONSE_HEADER.pack(status, 0)
