"""What a handler returns and how it becomes response bytes.

A handler returns ``None`` (empty OK), ``bytes``, a ``WireStruct``, a list of
``WireStruct`` (the Iggy list form) or a ``Parts`` (buffers sent back to back without
joining them, e.g. a poll prefix followed by stored message bytes).
"""

from __future__ import annotations

import struct
from typing import Any

from lurcher.core.wire.codec import WireStruct

RESPONSE_HEADER = struct.Struct("<II")
assert RESPONSE_HEADER.size == 8


class Parts:
    """Buffers that together form one response payload."""

    __slots__ = ("buffers", "length")

    def __init__(self, buffers: list[Any]) -> None:
        self.buffers = buffers
        self.length = sum(len(b) for b in buffers)


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


def ok_frame(result: Any) -> list[Any]:
    """Response header + payload buffers for a successful command."""
    parts = payload_parts(result)
    length = sum(len(p) for p in parts)
    return [RESPONSE_HEADER.pack(0, length), *parts]


def error_frame(status: int) -> bytes:
    """An error response: the status and a zero length, never a payload."""
    return RESPONSE_HEADER.pack(status, 0)
