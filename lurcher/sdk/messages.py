"""Client-side message helpers: building a ``MessageBatch`` from payloads, typed header
values from plain Python values, partitioning and polling-strategy shorthands, and
``ReceivedMessage`` (one polled message with its partition id and decoded headers).

Headers: a mapping whose keys are ``str`` or ``HeaderValue`` and whose values are
``HeaderValue`` or plain values (str -> string, bytes -> raw, bool -> bool, int -> int64,
or uint64 above the int64 range, float -> float64). One mapping given for a whole batch is
encoded once and shared by every message.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from typing import Any

import msgspec

from lurcher.core.wire.batch import MessageBatch
from lurcher.core.wire.buffer import Buffer
from lurcher.core.wire.error_codes import ErrorCode
from lurcher.core.wire.errors import IggyError
from lurcher.core.wire.headers import HeaderKind, HeaderValue, decode_headers, encode_headers
from lurcher.core.wire.responses.messages import Message
from lurcher.core.wire.values.partitioning import Partitioning
from lurcher.core.wire.values.polling import PollingStrategy
from lurcher.core.wire.units import shown
from lurcher.sdk.arguments import InvalidArgument, named, uint

HeadersArg = Mapping[Any, Any]
PayloadArg = bytes | bytearray | memoryview | str
INT64_MAX = (1 << 63) - 1

_KIND_OF_TYPE: dict[type, HeaderKind] = {
    str: HeaderKind.STRING, bytes: HeaderKind.RAW, bytearray: HeaderKind.RAW,
    bool: HeaderKind.BOOL, float: HeaderKind.FLOAT64,
}


def header_value(value: Any) -> HeaderValue:
    """A HeaderValue for a plain Python value (see the module docstring).

    Raises IggyError INVALID_HEADER_VALUE for other types or out-of-range numbers.
    """
    if isinstance(value, HeaderValue):
        return value
    if type(value) is int:
        kind = HeaderKind.INT64 if value <= INT64_MAX else HeaderKind.UINT64
        return HeaderValue.of(kind, value)
    kind = _KIND_OF_TYPE.get(type(value))
    if kind is None:
        raise IggyError(ErrorCode.INVALID_HEADER_VALUE,
                        f"no header kind for {type(value).__name__}")
    return HeaderValue.of(kind, value)


def encode_header_block(headers: HeadersArg | Buffer | None) -> bytes:
    """The user-headers block for a mapping (raw blocks pass through). Raises IggyError."""
    if headers is None:
        return b""
    if isinstance(headers, (bytes, bytearray, memoryview)):
        return bytes(headers)
    typed = {header_key(k): header_value(v) for k, v in headers.items()}
    return encode_headers(typed)


def header_key(key: Any) -> HeaderValue:
    """``header_value`` for a key. Raises IggyError INVALID_HEADER_KEY (as Iggy's
    HeaderKey) for a key that cannot be one."""
    try:
        return header_value(key)
    except IggyError as e:
        raise IggyError(ErrorCode.INVALID_HEADER_KEY, f"header key {key!r}: {e.detail}"
                        ) from None


def _header_blocks(headers: Any, n: int) -> list[bytes] | None:
    if headers is None:
        return None
    if isinstance(headers, Mapping):
        block = encode_header_block(headers)
        return [block] * n if block else None
    return [encode_header_block(h) for h in headers]


def build_batch(payloads: Sequence[PayloadArg], ids: Sequence[int | uuid.UUID] | None = None,
                headers: HeadersArg | Sequence[HeadersArg | Buffer | None] | None = None,
                origin_timestamp_us: int | None = None) -> MessageBatch:
    """A batch ready to send. ``ids`` (ints or UUIDs), ``headers`` one mapping for all or
    one per message. A message without an id (none given, or 0) gets a random UUIDv4 id here
    rather than from the server, so a batch the client sends again after a lost connection
    carries the same ids and a server that deduplicates ids drops the second copy. Raises
    IggyError INVALID_MESSAGES_COUNT for no payloads, INVALID_HEADER_KEY/VALUE for a header
    that cannot be one, InvalidArgument (a ValueError) naming the argument for a payload
    that is not bytes or str, an id that is not an int in 0..2**128-1 or a UUID, headers
    that are not mappings, or ids/headers not matching the payloads in number."""
    if not payloads:
        raise IggyError(ErrorCode.INVALID_MESSAGES_COUNT, "no messages to send")
    try:
        data = [p.encode() if isinstance(p, str) else p for p in payloads]
        return MessageBatch.build(data, ids=ids, user_headers=_header_blocks(headers, len(data)),
                                  origin_timestamp_us=origin_timestamp_us, random_ids=True)
    except (TypeError, ValueError, OverflowError, AttributeError) as exc:
        raise _bad_batch_argument(payloads, ids, exc) from None


def _bad_batch_argument(payloads: Sequence[Any], ids: Sequence[Any] | None,
                        error: Exception) -> InvalidArgument:
    """The InvalidArgument of a batch that did not build with ``error`` (looked into only
    then): the first payload or id of the wrong kind, else the ids' or headers' own error."""
    for i, payload in enumerate(payloads):
        if not isinstance(payload, (bytes, bytearray, memoryview, str)):
            return InvalidArgument(ErrorCode.INVALID_FORMAT, f"messages[{i}]: a payload is "
                                   f"bytes or str, not {type(payload).__name__}")
    for i, message_id in enumerate(ids or ()):
        if not isinstance(message_id, uuid.UUID) and not _is_u128(message_id):
            return InvalidArgument(ErrorCode.INVALID_FORMAT, f"ids[{i}]: {shown(message_id)}"
                                   " is not an int in 0..2**128-1 or a UUID")
    what = "ids" if str(error).startswith("ids") else "headers"
    return InvalidArgument(ErrorCode.INVALID_FORMAT, f"{what}: {error}")


def _is_u128(value: Any) -> bool:
    return type(value) is int and 0 <= value < 1 << 128


def to_partitioning(value: Partitioning | int | bytes | str | None) -> Partitioning:
    """None -> balanced; int -> that partition id; bytes/str -> messages key.
    Raises InvalidArgument for a partition id that is not a u32."""
    if value is None:
        return Partitioning.balanced()
    if isinstance(value, Partitioning):
        return value
    if isinstance(value, int):
        return Partitioning.partition(uint(value, 32, "partitioning (partition id)"))
    return Partitioning.messages_key(value)


_NAMED_STRATEGIES = {"next": PollingStrategy.next, "first": PollingStrategy.first,
                     "last": PollingStrategy.last}


def to_strategy(value: PollingStrategy | str | int | None) -> PollingStrategy:
    """None/"next" -> Next, "first", "last", an int -> Offset(int). Raises InvalidArgument
    for another name or an offset that is not a u64."""
    if value is None:
        return PollingStrategy.next()
    if isinstance(value, PollingStrategy):
        return value
    if isinstance(value, int):
        return PollingStrategy.offset(uint(value, 64, "strategy (offset)"))
    return named(_NAMED_STRATEGIES, value, "strategy")()


class ReceivedMessage(msgspec.Struct, frozen=True):
    """A polled message: where it came from, its header fields, payload and user headers."""

    partition_id: int
    offset: int
    id: int
    timestamp: int
    origin_timestamp: int
    checksum: int
    payload: bytes
    user_headers: bytes = b""

    @classmethod
    def of(cls, partition_id: int, m: Message, payload: bytes | None = None) -> "ReceivedMessage":
        return cls(partition_id, m.offset, m.id, m.timestamp, m.origin_timestamp, m.checksum,
                   m.payload if payload is None else payload, m.user_headers)

    @property
    def uuid(self) -> uuid.UUID:
        return uuid.UUID(int=self.id)

    @property
    def headers(self) -> dict[HeaderValue, HeaderValue]:
        """The typed user headers (decoded on access). Raises WireError for a bad block."""
        return decode_headers(self.user_headers) if self.user_headers else {}

    def header_values(self) -> dict[Any, Any]:
        """User headers as plain Python values (keys and values)."""
        return {k.to_python(): v.to_python() for k, v in self.headers.items()}
