"""The SDK's answer to bad arguments, over every transport of the suite (tcp, ws, quic, http,
plain and TLS).

A ``Client`` method given an argument its request cannot carry or the server's rules refuse
raises ``InvalidArgument`` (an ``IggyError`` and a ``ValueError``) naming the argument, with
the code of the rule, and sends nothing; the client goes on working. Before, the caller got
whatever the encoder raised: ``struct.error`` for a partition id of -1 or 2**40, KeyError
for an unknown polling strategy or compression name, OverflowError for a message id past
u128, ValueError for a stream name over 255 bytes, TypeError for a payload that is not bytes
or str, AttributeError for headers that are not mappings; a float message id was rounded
down and sent, an empty stream name was sent (the server answered InvalidFormat), and
permissions given as a string were encoded as bytes and sent (InvalidCommand), a stream
name given as an int raised AttributeError.
"""

from __future__ import annotations

import itertools
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from lurcher.core.wire.error_codes import ErrorCode
from lurcher.core.wire.errors import IggyError
from lurcher.sdk.arguments import InvalidArgument
from lurcher.sdk.client import Client

_ids = itertools.count()
Call = Callable[[Client, str], Awaitable[Any]]
F = ErrorCode.INVALID_FORMAT
IDENT = ErrorCode.INVALID_IDENTIFIER

# (what is bad, the call, expected code, text the message names)
BAD_ARGUMENTS: list[tuple[str, Call, ErrorCode, str]] = [
    ("poll partition -1", lambda c, s: c.poll_messages(s, "t", -1, "first", 1), F, "partition_id"),
    ("poll partition 2**40", lambda c, s: c.poll_messages(s, "t", 2 ** 40, "first", 1), F,
     "partition_id"),
    ("poll strategy name", lambda c, s: c.poll_messages(s, "t", 0, "oldest", 1), F, "strategy"),
    ("poll offset -5", lambda c, s: c.poll_messages(s, "t", 0, -5, 1), F, "strategy"),
    ("poll count -1", lambda c, s: c.poll_messages(s, "t", 0, "first", -1), F, "count"),
    ("send partition -1", lambda c, s: c.send_messages(s, "t", [b"x"], -1), F, "partition"),
    ("send partition 2**40", lambda c, s: c.send_messages(s, "t", [b"x"], 2 ** 40), F,
     "partition"),
    ("send id 2**128", lambda c, s: c.send_messages(s, "t", [b"x"], ids=[2 ** 128]), F, "ids"),
    ("send id -1", lambda c, s: c.send_messages(s, "t", [b"x"], ids=[-1]), F, "ids"),
    ("send stream id -1", lambda c, s: c.send_messages(-1, "t", [b"x"]), IDENT, "stream_id"),
    ("send payload int", lambda c, s: c.send_messages(s, "t", [b"x", 7]), F, "messages[1]"),
    ("send id float", lambda c, s: c.send_messages(s, "t", [b"x"], ids=[1.5]), F, "ids[0]"),
    ("send id text", lambda c, s: c.send_messages(s, "t", [b"x"], ids=["7"]), F, "ids[0]"),
    ("send ids short", lambda c, s: c.send_messages(s, "t", [b"x", b"y"], ids=[1]), F, "ids"),
    ("send headers not mappings", lambda c, s: c.send_messages(s, "t", [b"x"], headers=[1]),
     F, "headers"),
    ("stream name 300 bytes", lambda c, s: c.create_stream("x" * 300),
     ErrorCode.INVALID_STREAM_NAME, "create_stream"),
    ("stream id 2**40", lambda c, s: c.get_stream(2 ** 40), IDENT, "stream_id"),
    ("stream name empty", lambda c, s: c.get_stream(""), IDENT, "empty name"),
    ("topic name 300 bytes", lambda c, s: c.get_topic(s, "x" * 300), IDENT, "topic_id"),
    ("consumer id -1", lambda c, s: c.get_consumer_offset(-1, s, "t", 0), IDENT,
     "consumer: -1"),
    ("compression name", lambda c, s: c.create_topic(s, "t2", 1, "zip"), F, "compression"),
    ("expiry -1", lambda c, s: c.create_topic(s, "t3", 1, "none", -1), F, "message_expiry"),
    ("replication factor 300", lambda c, s: c.create_topic(s, "t4", 1, "none", 0, 0, 300),
     ErrorCode.INVALID_REPLICATION_FACTOR, "replication_factor"),
    ("flush partition -1", lambda c, s: c.flush_unsaved_buffer(s, "t", -1), F, "partition_id"),
    ("segments -1", lambda c, s: c.delete_segments(s, "t", 0, -1), F, "segments_count"),
    ("stored offset -1", lambda c, s: c.store_consumer_offset(1, s, "t", -1, 0), F, "offset"),
    ("stream name an int", lambda c, s: c.create_stream(123), F, "name"),
    ("partitions as text", lambda c, s: c.create_topic(s, "t5", "3"), F, "partitions_count"),
    ("poll count float", lambda c, s: c.poll_messages(s, "t", 0, "first", 1.5), F, "count"),
    ("permissions as text", lambda c, s: c.create_user("someone", "secret1", permissions="all"),
     F, "permissions"),
]


class CountingRequests:
    """Counts the requests a client's connection is asked to send."""

    def __init__(self, client: Client) -> None:
        self.sent = 0
        conn = client._conn
        assert conn is not None
        original = conn.request

        async def counted(*args: Any, **kwargs: Any) -> Any:
            self.sent += 1
            return await original(*args, **kwargs)

        conn.request = counted  # type: ignore[method-assign]


async def test_bad_arguments_raise_invalid_argument_before_sending(
        sdk_client: Client, transport_name: str) -> None:
    stream = f"args-{next(_ids)}-{transport_name}"
    await sdk_client.create_stream(stream)
    await sdk_client.create_topic(stream, "t", 1)
    counter = CountingRequests(sdk_client)
    for label, call, code, named in BAD_ARGUMENTS:
        with pytest.raises(InvalidArgument) as caught:
            await call(sdk_client, stream)
        assert isinstance(caught.value, IggyError) and isinstance(caught.value, ValueError)
        assert caught.value.code == code, (label, caught.value)
        assert named in str(caught.value), (label, caught.value)
    assert counter.sent == 0
    topics = await sdk_client.get_topics(stream)
    assert [t.name for t in topics] == ["t"]
    polled = await sdk_client.poll_messages(stream, "t", 0, "first", 10)
    assert list(polled.messages()) == []
