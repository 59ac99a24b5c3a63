"""send_messages and poll_messages: payloads and headers between JSON and the wire.

Sending: a payload given as a string is sent as its UTF-8 bytes, any other JSON value as its
JSON text; ``encoding`` makes that explicit ("text", "json") or takes base64 bytes. Headers
are ``{key: value}`` with plain JSON values (string, bool, integer -> int64, float ->
float64) or ``{"kind": "<kind>", "value": ...}`` for any Iggy header kind (raw as base64).
Polling: at most ``limits.max_messages`` messages are asked for, and the answer is rendered
by ``render.render_polled`` (decoded payloads and headers, byte limit). Auto-commit stores
the offset of the last message the answer shows (not the last one the server returned, which
the byte limit may have left out), so a following "next" poll continues at ``next_offset``.
"""

from __future__ import annotations

import base64
import binascii
import time
from typing import Annotated, Any, Literal

import msgspec

from lurcher.core.wire.errors import IggyError
from lurcher.core.wire.buffer import U32_MAX
from lurcher.core.wire.headers import HeaderKind, HeaderValue
from lurcher.core.wire.values.partitioning import Partitioning
from lurcher.core.wire.values.polling import PollingStrategy
from lurcher.mcp_server.gate import Access
from lurcher.mcp_server.render import render_polled
from lurcher.mcp_server.tools.base import (
    U64,
    Args,
    ArgumentError,
    ConsumerName,
    Context,
    OptionalPartition,
    StreamId,
    TopicId,
    consumer_of,
    message_id,
    ok,
    register,
)

_KINDS = ", ".join(k.name.lower() for k in HeaderKind)


class TypedHeader(msgspec.Struct, forbid_unknown_fields=True):
    kind: Annotated[str, msgspec.Meta(description=f"One of: {_KINDS}.")]
    value: Any


HeaderArg = str | bool | int | float | TypedHeader


class MessageArg(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    payload: Annotated[Any, msgspec.Meta(description=(
        "The message body: a string (sent as UTF-8 text) or any JSON value (sent as JSON "
        "text), or base64 text with encoding \"base64\"."))]
    encoding: Annotated[Literal["text", "json", "base64"] | None, msgspec.Meta(description=(
        "How to turn payload into bytes; by default strings are text and other values JSON."
    ))] = None
    id: Annotated[int | str | None, msgspec.Meta(description=(
        "Message id (u128): an integer, a string of ASCII digits or a UUID string; left "
        "out, the server assigns one."))] = None
    headers: Annotated[dict[str, HeaderArg] | None, msgspec.Meta(description=(
        "User headers: {name: value} with string, boolean, integer or float values, or "
        "{name: {\"kind\": ..., \"value\": ...}} for a specific header kind."))] = None


class SendArgs(Args):
    stream_id: StreamId
    topic_id: TopicId
    messages: Annotated[list[MessageArg], msgspec.Meta(min_length=1)]
    partitioning: Annotated[Literal["balanced", "partition", "key"] | None, msgspec.Meta(
        description=("Where messages go: \"balanced\" (round robin), \"partition\" (the "
                     "given partition_id), \"key\" (hash of messages_key). By default: "
                     "partition_id if given, else messages_key if given, else balanced."))
    ] = None
    partition_id: OptionalPartition = None
    messages_key: Annotated[str | None, msgspec.Meta(
        description="Key whose hash picks the partition (messages with one key keep order)."
    )] = None


Strategy = Literal["offset", "timestamp", "first", "last", "next"]


class PollArgs(Args):
    stream_id: StreamId
    topic_id: TopicId
    partition_id: OptionalPartition = None
    strategy: Annotated[Strategy, msgspec.Meta(description=(
        "Where to start: \"offset\" (from offset), \"timestamp\" (first message at or after "
        "timestamp), \"first\", \"last\" (the newest count messages), \"next\" (after the "
        "consumer's stored offset)."))] = "offset"
    offset: Annotated[U64, msgspec.Meta(description="Start offset for strategy "
                                                    "\"offset\".")] = 0
    timestamp: Annotated[U64 | None, msgspec.Meta(description=(
        "Microseconds since the Unix epoch, for strategy \"timestamp\" (default: now)."))
    ] = None
    count: Annotated[Annotated[int, msgspec.Meta(ge=1, le=U32_MAX)] | None, msgspec.Meta(
        description="How many messages to return; capped by the server's configured limit."
    )] = None
    auto_commit: Annotated[bool | None, msgspec.Meta(description=(
        "Store the consumer's offset after polling; default true for strategy \"next\", "
        "false otherwise."))] = None
    consumer: ConsumerName = None


@register("send_messages", Access.CREATE,
          "Append messages to a topic. Payloads may be text, JSON values or base64 bytes; "
          "each message may carry an id and user headers.", SendArgs)
async def send_messages(ctx: Context, a: SendArgs) -> dict[str, Any]:
    if len(a.messages) > ctx.limits.max_send_messages:
        raise ArgumentError(f"{len(a.messages)} messages in one call; the limit is "
                            f"{ctx.limits.max_send_messages}")
    payloads = [payload_bytes(m) for m in a.messages]
    ids = [message_id(m.id) for m in a.messages]
    headers = [typed_headers(m.headers) for m in a.messages]
    await ctx.client.send_messages(
        a.stream_id, a.topic_id, payloads, partitioning(a),
        ids=ids if any(ids) else None, headers=headers if any(headers) else None)
    return ok("send_messages", stream_id=a.stream_id, topic_id=a.topic_id,
              messages_count=len(payloads), bytes=sum(map(len, payloads)))


@register("poll_messages", Access.READ,
          "Read messages from a topic partition. Returns each message's offset, id, "
          "timestamps, decoded payload (JSON, text or base64, named in payload_encoding) and "
          "headers, limited in count and bytes; next_offset says where to continue.",
          PollArgs)
async def poll_messages(ctx: Context, a: PollArgs) -> dict[str, Any]:
    requested = a.count or ctx.limits.default_poll_count
    count = min(requested, ctx.limits.max_messages)
    auto_commit = a.strategy == "next" if a.auto_commit is None else a.auto_commit
    consumer = consumer_of(ctx, a.consumer)
    polled = await ctx.client.poll_messages(
        a.stream_id, a.topic_id, a.partition_id, strategy(a), count, False, consumer=consumer)
    result = render_polled(polled, ctx.limits, requested)
    if auto_commit and result["count"]:
        await ctx.client.store_consumer_offset(consumer, a.stream_id, a.topic_id,
                                               result["next_offset"] - 1, polled.partition_id)
    return result


def strategy(a: PollArgs) -> PollingStrategy:
    return {
        "offset": lambda: PollingStrategy.offset(a.offset),
        "timestamp": lambda: PollingStrategy.timestamp(
            a.timestamp if a.timestamp is not None else time.time_ns() // 1000),
        "first": PollingStrategy.first,
        "last": PollingStrategy.last,
        "next": PollingStrategy.next,
    }[a.strategy]()


def partitioning(a: SendArgs) -> Partitioning:
    """Raises ArgumentError when the chosen partitioning lacks its argument."""
    mode = a.partitioning or ("partition" if a.partition_id is not None else
                              "key" if a.messages_key else "balanced")
    if mode == "partition":
        if a.partition_id is None:
            raise ArgumentError("partitioning \"partition\" needs partition_id")
        return Partitioning.partition(a.partition_id)
    if mode == "key":
        if not a.messages_key:
            raise ArgumentError("partitioning \"key\" needs a non-empty messages_key")
        try:
            return Partitioning.messages_key(a.messages_key)
        except IggyError as e:
            raise ArgumentError(f"messages_key: {e}") from None
    return Partitioning.balanced()


def payload_bytes(m: MessageArg) -> bytes:
    """Raises ArgumentError for a payload that does not match its encoding."""
    encoding = m.encoding or ("text" if isinstance(m.payload, str) else "json")
    if encoding == "json":
        return msgspec.json.encode(m.payload)
    if not isinstance(m.payload, str):
        raise ArgumentError(f"encoding {encoding!r} needs a string payload")
    if encoding == "text":
        return m.payload.encode()
    try:
        return base64.b64decode(m.payload, validate=True)
    except binascii.Error as e:
        raise ArgumentError(f"payload is not valid base64: {e}") from None


def typed_headers(headers: dict[str, Any] | None) -> dict[str, Any] | None:
    """Header arguments as SDK header values. Raises ArgumentError for an unknown kind or a
    value that does not fit its kind."""
    if not headers:
        return None
    return {key: _header_value(key, value) for key, value in headers.items()}


def _header_value(key: str, value: Any) -> Any:
    if not isinstance(value, TypedHeader):
        return value
    try:
        kind = HeaderKind[value.kind.upper()]
    except KeyError:
        raise ArgumentError(f"header {key!r}: unknown kind {value.kind!r} ({_KINDS})") from None
    raw = value.value
    if kind == HeaderKind.RAW:
        raw = _b64(key, raw)
    try:
        return HeaderValue.of(kind, raw)
    except IggyError as e:
        raise ArgumentError(f"header {key!r}: {e}") from None


def _b64(key: str, value: Any) -> bytes:
    """A raw header's value: base64 text (nothing else is turned into text first)."""
    if not isinstance(value, str):
        raise ArgumentError(f"header {key!r}: a raw value must be base64 text, not "
                            f"{type(value).__name__}")
    try:
        return base64.b64decode(value, validate=True)
    except binascii.Error:
        raise ArgumentError(f"header {key!r}: a raw value must be base64") from None
